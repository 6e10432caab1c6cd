"""How often a bounded queue drops: the M/M/1/K formula and a simulation that checks it.

A producer offers items at Poisson rate λ, one consumer serves them in exponential time of rate μ,
and at most K items are in the system (one in service, K−1 waiting). A Go channel of buffer B with
one receiving goroutine is K = B + 1: the receiver holds one item while it works. The fraction of
offered items dropped is the probability an arrival finds the system full,

    P_K = (1 − ρ) ρ^K / (1 − ρ^(K+1)),   ρ = λ/μ   (and 1/(K+1) when ρ = 1),

by PASTA (Poisson arrivals see time averages). `simulate_drops` runs the same system event by event
on a `VirtualClock` through the real `DroppingQueue`, so the formula checks the queue and the
queue checks the formula.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from minisched.clock import VirtualClock
from minisched.concurrency.dropping import DroppingQueue

__all__ = ["DropSimulation", "mm1k_drop_fraction", "simulate_drops", "simulate_ticker_drops"]


def mm1k_drop_fraction(arrival_rate: float, service_rate: float, capacity: int) -> float:
    """P_K of an M/M/1/K queue: the long-run fraction of arrivals that find it full."""
    if arrival_rate <= 0 or service_rate <= 0:
        raise ValueError(f"rates must be positive, got λ={arrival_rate}, μ={service_rate}")
    if capacity < 1:
        raise ValueError(f"capacity K counts the item in service, so K >= 1; got {capacity}")
    rho = arrival_rate / service_rate
    if math.isclose(rho, 1.0):
        return 1.0 / (capacity + 1)
    return (1 - rho) * rho**capacity / (1 - rho ** (capacity + 1))


@dataclass(frozen=True)
class DropSimulation:
    offered: int
    dropped: int
    served: int
    virtual_seconds: float

    @property
    def drop_fraction(self) -> float:
        return self.dropped / self.offered


def simulate_drops(
    arrival_rate: float,
    service_rate: float,
    buffer: int,
    *,
    arrivals: int = 50_000,
    seed: int = 0,
    clock: VirtualClock | None = None,
) -> DropSimulation:
    """Poisson arrivals offered to a `DroppingQueue(buffer)` with one exponential server that takes
    an item out of the queue when it starts serving it (so K = buffer + 1). Time is a VirtualClock,
    moved from event to event: the run takes no real time and is the same for the same seed."""
    if arrivals < 1:
        raise ValueError(f"simulate at least one arrival, got {arrivals}")
    rng = random.Random(seed)
    clock = clock or VirtualClock()
    start = clock.monotonic()
    q: DroppingQueue[int] = DroppingQueue(buffer)
    next_arrival = start + rng.expovariate(arrival_rate)
    service_ends: float | None = None  # None: the server is idle
    offered = served = 0
    while offered < arrivals:
        if service_ends is not None and service_ends <= next_arrival:
            clock.set(service_ends)
            served += 1
            service_ends = None
        else:
            clock.set(next_arrival)
            q.offer(offered)
            offered += 1
            next_arrival = clock.monotonic() + rng.expovariate(arrival_rate)
        if service_ends is None and len(q):
            q.get_nowait()
            service_ends = clock.monotonic() + rng.expovariate(service_rate)
    return DropSimulation(offered, q.dropped, served, clock.monotonic() - start)


def simulate_ticker_drops(
    period: float,
    service_mean: float,
    buffer: int,
    *,
    ticks: int = 50_000,
    exponential_service: bool = True,
    seed: int = 0,
    clock: VirtualClock | None = None,
) -> DropSimulation:
    """The book's producer (§2.3): a ticker offering one item every `period` to a
    `DroppingQueue(buffer)`, one consumer serving each in `service_mean` on average (exponential
    with `exponential_service`, else exactly `service_mean`). Arrivals are evenly spaced, not
    Poisson, so the M/M/1/K formula does not apply: below capacity a ticker drops fewer items than
    a Poisson stream of the same rate, and with fixed service times none. Event by event on a
    `VirtualClock`, like `simulate_drops`."""
    if period <= 0 or service_mean <= 0:
        raise ValueError(f"period and service time must be positive, got period={period}, service_mean={service_mean}")
    if ticks < 1:
        raise ValueError(f"simulate at least one tick, got {ticks}")
    rng = random.Random(seed)
    clock = clock or VirtualClock()
    start = clock.monotonic()
    q: DroppingQueue[int] = DroppingQueue(buffer)
    service_ends: float | None = None
    offered = served = 0
    while offered < ticks:
        next_tick = start + (offered + 1) * period
        if service_ends is not None and service_ends <= next_tick:
            clock.set(service_ends)
            served += 1
            service_ends = None
        else:
            clock.set(next_tick)
            q.offer(offered)
            offered += 1
        if service_ends is None and len(q):
            q.get_nowait()
            took = rng.expovariate(1 / service_mean) if exponential_service else service_mean
            service_ends = clock.monotonic() + took
    return DropSimulation(offered, q.dropped, served, clock.monotonic() - start)
