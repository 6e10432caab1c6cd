"""Per-thread CPU of a scheduler process, as bench/realcluster_bench.py reads it: OS thread names
(minisched names its threads from `minisched run` on; Python before 3.14 does not) and
/proc/<pid>/task/*/stat summed by name, a pool's numbered threads as one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from minisched.perf.backends import minisched_process_tree

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")

CHILD = """
import json, os, threading, time
from minisched.controlplane.observe import thread_cpu_seconds
from minisched.observability.threadnames import name_os_threads
name_os_threads()
done = threading.Event()
spun = threading.Barrier(4)
def spin():
    t = time.thread_time()
    while time.thread_time() - t < 0.15:
        pass
    spun.wait()
    done.wait()
threads = [threading.Thread(target=spin, name=name) for name in ("bind-1", "bind-2", "scheduler-loop")]
for t in threads:
    t.start()
spun.wait()
comms = sorted(open(f"/proc/self/task/{t.native_id}/comm").read().strip() for t in threads)
print(json.dumps(comms))
print(json.dumps(thread_cpu_seconds(os.getpid())))
done.set()
"""


def test_minisched_threads_have_their_names_in_proc_and_a_pool_counts_as_one_line() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True,
                         timeout=60).stdout.splitlines()
    assert json.loads(out[0]) == ["bind-1", "bind-2", "scheduler-loop"]
    by_name = json.loads(out[1])
    assert set(by_name) >= {"bind-*", "scheduler-loop"}
    assert "bind-1" not in by_name
    assert by_name["bind-*"] >= 0.25  # two workers' ~0.15 s each, in clock ticks
    assert by_name["scheduler-loop"] >= 0.1


def test_another_trees_scheduler_runs_from_inside_that_tree(tmp_path: Path) -> None:
    assert minisched_process_tree(None) == (None, None)
    with pytest.raises(ValueError, match="no minisched/cli.py there"):
        minisched_process_tree(tmp_path)
    (tmp_path / "minisched").mkdir()
    (tmp_path / "minisched" / "cli.py").write_text("")
    cwd, env = minisched_process_tree(tmp_path)
    assert cwd == tmp_path.resolve()
    assert env is not None and env["PYTHONPATH"] == str(tmp_path.resolve())
