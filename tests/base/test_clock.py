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
