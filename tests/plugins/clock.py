"""Fixtures for time."""

from __future__ import annotations

import pytest

from minisched.clock import VirtualClock


@pytest.fixture
def virtual_clock() -> VirtualClock:
    return VirtualClock()
