"""`make lab` serves the chapters: start it as a student would, ask its URL, then stop it."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_make_lab_serves_the_chapters_and_labs(tmp_path: Path) -> None:
    port, token = _free_port(), secrets.token_hex(16)
    args = f"--no-browser --ServerApp.port={port} --IdentityProvider.token={token}"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}
    proc = subprocess.Popen(
        ["make", "-s", "lab", f"LAB_ARGS={args}"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/contents/chapters?token={token}", timeout=5) as r:
                    listing = json.load(r)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read().decode() if proc.stdout else ""
                    pytest.fail(f"make lab did not answer on {base}: {out[-2000:]}")
                time.sleep(0.5)
        names = {item["name"] for item in listing["content"]}
        assert "ch01_tiny_scheduler.ipynb" in names
        with urllib.request.urlopen(f"{base}/api/contents/labs?token={token}", timeout=10) as r:
            assert "lab01_spot_avoidance" in {item["name"] for item in json.load(r)["content"]}
        with urllib.request.urlopen(f"{base}/lab/tree/chapters?token={token}", timeout=10) as r:
            assert r.status == 200 and b"JupyterLab" in r.read()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
