"""Per-check time limits: a check that never returns is reported as that check's failure, naming
it and its limit, the run goes on, and results come out as each check finishes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest

from labs import harness


def _student(tmp_path: Path, source: str) -> types.ModuleType:
    path = tmp_path / "exercise.py"
    path.write_text(textwrap.dedent(source))
    return harness.load_lab_module("lab01_spot_avoidance", str(path))


def test_a_hung_check_fails_within_its_limit_and_the_next_checks_run(tmp_path: Path) -> None:
    module = _student(tmp_path, """
        import threading, time

        def spin():
            while True:  # a student's loop that never ends
                time.sleep(0.01)

        def block():
            threading.Event().wait()  # a blocking call nothing will ever wake

        def fine():
            return 1
    """)
    seen: list[tuple[str, float]] = []
    start = time.monotonic()
    checks = [
        harness.Check("loops for ever", lambda m: m.spin(), "end the loop", timeout=0.5),
        harness.Check("blocks for ever", lambda m: m.block(), "do not wait without a timeout", timeout=0.5),
        harness.Check("returns", lambda m: None if m.fine() == 1 else (_ for _ in ()).throw(AssertionError("no")),
                      "return 1"),
    ]
    report = harness.run_checks(checks, module,
                                on_outcome=lambda o: seen.append((o.check.name, time.monotonic() - start)))
    elapsed = time.monotonic() - start
    assert elapsed < 10, f"two 0.5 s limits took {elapsed:.1f} s"
    assert [name for name, _ in seen] == ["loops for ever", "blocks for ever", "returns"]
    assert seen[0][1] < seen[1][1] < seen[2][1]  # reported one by one, in order, as each finished
    spun, blocked, returned = report.outcomes
    assert not spun.passed and "timed out" in spun.message and "'loops for ever'" in spun.message
    assert "0.5 s" in spun.message
    assert spun.where.startswith("exercise.py line ") and "time.sleep(0.01)" in spun.where
    assert not blocked.passed and "timed out" in blocked.message and "threading.Event().wait()" in blocked.where
    assert returned.passed
    assert "hint: end the loop" in str(spun)


def test_an_abandoned_check_leaves_the_switch_interval_as_it_was() -> None:
    before = sys.getswitchinterval()
    never = threading.Event()

    def lowers_then_hangs(module: types.ModuleType) -> None:
        sys.setswitchinterval(1e-6)
        never.wait()

    outcome = harness.run_check(harness.Check("hangs", lowers_then_hangs, "", timeout=0.3), types.ModuleType("m"))
    never.set()
    assert not outcome.passed and sys.getswitchinterval() == before


def test_the_default_limit_and_a_per_check_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINISCHED_CHECK_TIMEOUT", raising=False)
    assert harness.Check("x", lambda m: None, "").limit == harness.DEFAULT_TIMEOUT
    assert harness.Check("x", lambda m: None, "", timeout=3).limit == 3
    monkeypatch.setenv("MINISCHED_CHECK_TIMEOUT", "7.5")
    assert harness.Check("x", lambda m: None, "").limit == 7.5
    assert harness.Check("x", lambda m: None, "", timeout=3).limit == 3
    monkeypatch.setenv("MINISCHED_CHECK_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="MINISCHED_CHECK_TIMEOUT"):
        _ = harness.Check("x", lambda m: None, "").limit


def test_the_command_line_prints_each_check_as_it_finishes(tmp_path: Path) -> None:
    """`python -m labs.<lab>.checks FILE` streams: the first result is out before the run ends."""
    submission = tmp_path / "exercise.py"
    submission.write_text((harness.LABS_DIR / "lab04_jitter_backoff" / "exercise.py").read_text())
    run = subprocess.Popen([sys.executable, "-m", "labs.lab04_jitter_backoff.checks", str(submission)],
                           stdout=subprocess.PIPE, text=True, cwd=harness.LABS_DIR.parent)
    assert run.stdout is not None
    first = run.stdout.readline()
    rest = run.stdout.read()
    assert run.wait(timeout=60) == 1
    assert first.startswith("  FAIL full jitter"), first
    assert rest.rstrip().endswith("0/3 checks pass")
