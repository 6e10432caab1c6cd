"""The minisched command: the demo's report, and run's graceful shutdown on SIGTERM."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import time

from minisched.cli import main
from minisched.demo import run_demo


def test_demo_places_pods_and_explains_failures() -> None:
    out = io.StringIO()
    result = run_demo(pods=120, out=out)
    text = out.getvalue()
    assert result.bound >= 100 and all(f"urgent-{i}" in sum(result.placements.values(), []) for i in range(4))
    assert "huge-0" in text and "Insufficient cpu" in text
    assert "broken-request: 400 BadRequest: Pod in version \"v1\" cannot be handled as a Pod: quantities must match" in text
    assert "pods/s" in text and "p99" in text


def test_bad_arguments_are_refused_with_a_message(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo", "--pods", "0"]) == 2
    assert "--pods must be at least 1" in capsys.readouterr().err


def test_run_logs_its_memory_on_sigusr1() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "minisched.cli", "-v", "run", "--embedded"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        assert proc.stderr is not None
        line = ""
        while time.monotonic() < deadline and "scheduling for profiles" not in line:
            line = proc.stderr.readline()
        proc.send_signal(signal.SIGUSR1)
        while time.monotonic() < deadline and "memory:" not in line:
            line = proc.stderr.readline()
        assert "memory: RSS" in line and "pymalloc blocks" in line and "gc objects" in line
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_run_stops_gracefully_on_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "minisched.cli", "-v", "run", "--embedded"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        assert proc.stderr is not None
        line = ""
        while time.monotonic() < deadline and "scheduling for profiles" not in line:
            line = proc.stderr.readline()
        assert "scheduling for profiles ['minisched']" in line
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "received SIGTERM: shutting down" in err and "minisched: stopped" in err
    finally:
        if proc.poll() is None:
            proc.kill()


def test_run_refuses_a_bad_buffers_setting_naming_the_problem(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for setting, problem in [("event-correlator", "'event-correlator' is not name=size"),
                             ("cycle-log=ten", "'cycle-log=ten' is not name=size"),
                             ("event-correlater=64", "unknown buffer 'event-correlater'; known: event-correlator"),
                             ("pod-change-log=1", "buffer pod-change-log must be an integer of at least 2, got 1")]:
        monkeypatch.setenv("MINISCHED_BUFFERS", setting)
        assert main(["run", "--embedded"]) == 2
        assert f"minisched run: MINISCHED_BUFFERS: {problem}" in capsys.readouterr().err


def test_buffers_setting_parses_names_and_sizes() -> None:
    from minisched.cli import buffers_setting

    assert buffers_setting("") == {}
    assert buffers_setting(" event-correlator=64, memory-samples=2 ,") == {"event-correlator": 64, "memory-samples": 2}
