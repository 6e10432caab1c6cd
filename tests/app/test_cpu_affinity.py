"""pin_to_one_cpu: a scheduler's own process keeps its threads on one CPU (`minisched run --cpu`)."""

from __future__ import annotations

import os
import threading

import pytest

from minisched import cli
from minisched.app import check_cpu, pin_to_one_cpu

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                                reason="needs a platform that sets CPU affinity and a process allowed two CPUs")


def affinities() -> dict[int, set[int]]:
    return {int(tid): os.sched_getaffinity(int(tid)) for tid in os.listdir("/proc/self/task")}


def test_every_thread_goes_to_the_one_cpu_and_each_gets_its_own_cpus_back() -> None:
    allowed = os.sched_getaffinity(0)
    cpu = max(allowed)
    stop = threading.Event()
    earlier = threading.Thread(target=stop.wait, daemon=True)
    earlier.start()
    other = min(allowed)
    os.sched_setaffinity(earlier.native_id, {other})  # a thread that had CPUs of its own before
    restore = pin_to_one_cpu(cpu)
    try:
        later = threading.Thread(target=stop.wait, daemon=True)
        later.start()  # started after: inherits the pin
        assert set(map(frozenset, affinities().values())) == {frozenset({cpu})}
    finally:
        restore()
    assert os.sched_getaffinity(0) == allowed
    assert os.sched_getaffinity(earlier.native_id) == {other}
    assert os.sched_getaffinity(later.native_id) == allowed  # the process's CPUs, not the pin
    stop.set()
    earlier.join()
    later.join()


def test_by_default_the_cpu_is_the_one_the_process_runs_on() -> None:
    allowed = os.sched_getaffinity(0)
    restore = pin_to_one_cpu()
    try:
        [cpu] = os.sched_getaffinity(0)
        assert cpu in allowed
    finally:
        restore()
    assert os.sched_getaffinity(0) == allowed


def test_a_cpu_the_process_may_not_use_is_refused_by_name() -> None:
    allowed = os.sched_getaffinity(0)
    outside = max(allowed) + 1
    with pytest.raises(ValueError, match=f"CPU {outside} is not one this process may run on"):
        pin_to_one_cpu(outside)
    with pytest.raises(ValueError, match="'two' is not a CPU number"):
        check_cpu("two")
    assert os.sched_getaffinity(0) == allowed


def test_minisched_run_refuses_a_bad_cpu_before_it_connects(capsys: pytest.CaptureFixture[str]) -> None:
    outside = max(os.sched_getaffinity(0)) + 1
    assert cli.main(["run", "--embedded", "--cpu", str(outside)]) == 2
    assert f"--cpu (auto, all or a CPU number): CPU {outside} is not one this process may run on" in capsys.readouterr().err
    assert cli.main(["run", "--embedded", "--cpu", "-1"]) == 2
    assert "'-1' is not a CPU number" in capsys.readouterr().err
