"""`python -m minisched.controlplane up` (make cluster-local) starts the kind-like plane unless told
otherwise; no binaries are needed to check which plane it asks for."""

from __future__ import annotations

from typing import Any

import pytest

import minisched.controlplane.__main__ as cli
from minisched.controlplane import ControlPlaneOptions


class _Started(Exception):
    pass


@pytest.fixture
def requested(monkeypatch: pytest.MonkeyPatch) -> list[ControlPlaneOptions]:
    """The options `up` starts its control plane with (the start itself is cut short)."""
    seen: list[ControlPlaneOptions] = []

    class FakeControlPlane:
        def __init__(self, options: ControlPlaneOptions, *args: Any) -> None:
            seen.append(options)

        def __enter__(self) -> None:
            raise _Started

        def __exit__(self, *exc: Any) -> None:
            return None

    monkeypatch.setattr(cli, "find_binaries", lambda: None)
    monkeypatch.setattr(cli, "ControlPlane", FakeControlPlane)
    return seen


def test_up_starts_the_kind_like_plane_by_default(requested: list[ControlPlaneOptions]) -> None:
    with pytest.raises(_Started):
        cli.main(["up"])
    assert requested[0].kind_like is True


def test_up_plane_envtest_starts_the_lighter_plane(requested: list[ControlPlaneOptions]) -> None:
    with pytest.raises(_Started):
        cli.main(["up", "--plane", "envtest"])
    assert requested[0].kind_like is False


def test_up_help_says_what_each_plane_is(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["up", "--help"])
    out = capsys.readouterr().out
    assert "--plane {kind,envtest}" in out and "kind (default)" in out
