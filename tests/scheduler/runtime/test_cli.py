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
