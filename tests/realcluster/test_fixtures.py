"""Missing binaries: a skip that says how to enable the tests, or under CI=true a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.controlplane import require_binaries


def test_missing_binaries_skip_with_the_command_to_build_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINISCHED_CONTROLPLANE_BIN", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="make controlplane"):
        require_binaries()


def test_missing_binaries_fail_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINISCHED_CONTROLPLANE_BIN", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_binaries()
