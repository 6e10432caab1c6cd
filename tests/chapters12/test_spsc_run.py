from __future__ import annotations

import pytest

from minisched.concurrency.spsc import SpscRun, run_spsc


def test_a_tiny_ring_delivers_every_item_once_in_order_and_both_sides_wait():
    run = run_spsc(items=20_000, capacity=4)
    assert run.in_order(20_000)
    assert run.found_full > 0 and run.found_empty > 0


def test_in_order_fails_on_a_lost_or_reordered_item():
    assert not SpscRun(received=[0, 2]).in_order(3)
    assert not SpscRun(received=[1, 0, 2]).in_order(3)
    assert SpscRun(received=[0, 1, 2]).in_order(3)


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError):
        run_spsc(items=-1)
    with pytest.raises(ValueError):
        run_spsc(items=10, capacity=3)   # the ring takes powers of two only
