from __future__ import annotations

import threading
import time

import pytest

from minisched.clock import RealClock, VirtualClock, parse_rfc3339, rfc3339, rfc3339_micro


def test_virtual_clock_only_moves_when_told():
    clock = VirtualClock()
    start = clock.now()
    time.sleep(0.01)
    assert clock.now() == start
    clock.advance(2.5)
    assert clock.now() == start + 2.5
    assert clock.monotonic() == clock.now()
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_sleeper_wakes_when_the_clock_passes_its_deadline():
    clock = VirtualClock()
    woke = threading.Event()

    def sleeper() -> None:
        clock.sleep(10)
        woke.set()

    t = threading.Thread(target=sleeper)
    t.start()
    deadline = time.monotonic() + 2
    while not clock.has_waiters() and time.monotonic() < deadline:
        time.sleep(0.001)
    clock.advance(9.9)
    assert not woke.wait(0.1)
    clock.advance(0.1)
    assert woke.wait(2)
    t.join(2)


def test_wait_reports_timeout_on_virtual_time():
    clock = VirtualClock()
    cond = threading.Condition()
    result: list[bool] = []

    def waiter() -> None:
        with cond:
            while True:
                if not clock.wait(cond, 5):
                    result.append(False)
                    return

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    assert not result
    clock.advance(5)
    t.join(2)
    assert result == [False]


def test_real_clock_basics():
    clock = RealClock()
    a = clock.monotonic()
    clock.sleep(0.001)
    assert clock.monotonic() >= a


def test_timestamps_are_api_server_shaped():
    ts = VirtualClock.DEFAULT_START + 1.75
    assert rfc3339(ts) == "2026-01-01T00:00:01Z"
    assert rfc3339_micro(ts) == "2026-01-01T00:00:01.750000Z"
    assert parse_rfc3339("2026-01-01T00:00:01Z") == VirtualClock.DEFAULT_START + 1


def test_polling_wait_registers_once_per_deadline():
    clock = VirtualClock()
    cond = threading.Condition()
    with cond:
        for _ in range(5):
            clock.wait(cond, 30)
    assert len(clock._waiters) == 1
    clock.advance(30)
    assert not clock.has_waiters()


def test_run_for_moves_the_clock_by_exactly_the_time_asked_and_lets_sleepers_act_between_steps():
    from minisched.clock import run_for

    clock = VirtualClock()
    start = clock.now()
    ticks: list[float] = []
    stop = threading.Event()

    def ticker() -> None:  # wakes every virtual second, as an elector renewing its lease would
        while not stop.is_set() and len(ticks) < 4:
            clock.sleep(1.0)
            ticks.append(clock.now() - start)

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    time.sleep(0.05)
    run_for(clock, 3, step=0.5)
    assert clock.now() == start + 3
    assert ticks == [1.0, 2.0, 3.0]
    stop.set()
    clock.advance(1)
    thread.join(1)


def test_run_for_refuses_a_step_that_does_not_divide_the_time():
    from minisched.clock import run_for

    clock = VirtualClock()
    with pytest.raises(ValueError, match="does not divide"):
        run_for(clock, 1.0, step=0.3)
    with pytest.raises(ValueError):
        run_for(clock, 1.0, step=0)


def test_wait_until_returns_once_true_and_moves_virtual_time_only_when_asked():
    from minisched.clock import wait_until

    clock = VirtualClock()
    start = clock.now()
    wait_until(lambda: True, "nothing", clock=clock, step=1.0)
    assert clock.now() == start
    wait_until(lambda: clock.now() >= start + 5, "five virtual seconds", clock=clock, step=1.0, timeout=5)
    assert clock.now() == start + 5


def test_wait_until_names_what_it_waited_for_when_it_times_out():
    from minisched.clock import wait_until

    with pytest.raises(TimeoutError, match="the scheduler to bind"):
        wait_until(lambda: False, "the scheduler to bind", timeout=0.05)
    with pytest.raises(ValueError, match="needs the clock"):
        wait_until(lambda: False, "x", step=1.0)
