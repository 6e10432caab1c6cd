"""Rate limiters: how long to wait before retrying an item (client-go util/workqueue).

Each is a small object with three methods, and they compose (`MaxOfRateLimiter`):

- `when(item)`: record one more failure of `item` and return the delay before its retry (seconds);
- `forget(item)`: the item succeeded; stop tracking it (its next failure starts from scratch);
- `num_requeues(item)`: failures recorded since the last forget.

The controller default is the larger of a per-item exponential backoff (5 ms doubling to 1000 s)
and an overall token bucket (10 retries per second, bursts of 100), so one bad item backs off on
its own while a storm of failures cannot flood the API server.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Protocol, runtime_checkable

from minisched.clock import Clock, RealClock


@runtime_checkable
class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float: ...

    def forget(self, item: Hashable) -> None: ...

    def num_requeues(self, item: Hashable) -> int: ...


class ItemExponentialFailureRateLimiter:
    """base_delay * 2**failures, capped at max_delay (client-go: 5 ms, 1000 s by default)."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay < 0 or max_delay < 0:
            raise ValueError(f"delays must not be negative: base_delay={base_delay}, max_delay={max_delay}")
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            exp = self._failures.get(item, 0)
            self._failures[item] = exp + 1
        if exp >= 1024:  # 2.0**1024 overflows a float; long past any cap anyway
            return self.max_delay
        return min(self.base_delay * 2.0**exp, self.max_delay)

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class ItemFastSlowRateLimiter:
    """fast_delay for the first max_fast_attempts failures of an item, slow_delay after."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        if fast_delay < 0 or slow_delay < 0 or max_fast_attempts < 0:
            raise ValueError(
                f"fast_delay, slow_delay and max_fast_attempts must not be negative: "
                f"{fast_delay}, {slow_delay}, {max_fast_attempts}"
            )
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts
        self._attempts: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            attempts = self._attempts.get(item, 0) + 1
            self._attempts[item] = attempts
        return self.fast_delay if attempts <= self.max_fast_attempts else self.slow_delay

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._attempts.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._attempts.get(item, 0)


class BucketRateLimiter:
    """A token bucket shared by all items (golang.org/x/time/rate, as client-go uses it).

    The bucket holds up to `burst` tokens and refills at `qps` per second. Each when() takes a
    token; when none is left it still takes one (the count goes negative) and returns how long
    until that token will have been refilled: a reservation, like rate.Limiter.Reserve().Delay().
    It tracks no items, so forget() does nothing and num_requeues() is always 0.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self.qps = qps
        self.burst = burst
        self._clock: Clock = clock or RealClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            now = self._clock.monotonic()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def tokens(self) -> float:
        """Tokens available now (negative: reservations outstanding)."""
        with self._lock:
            now = self._clock.monotonic()
            return min(float(self.burst), self._tokens + (now - self._last) * self.qps)

    def forget(self, item: Hashable) -> None:
        pass

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay any of its limiters asks for. Every limiter records every failure."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one rate limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max([limiter.when(item) for limiter in self.limiters])

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


class WithMaxWaitRateLimiter:
    """Another limiter's delay, but never longer than max_delay."""

    def __init__(self, limiter: RateLimiter, max_delay: float) -> None:
        self.limiter = limiter
        self.max_delay = max_delay

    def when(self, item: Hashable) -> float:
        return min(self.limiter.when(item), self.max_delay)

    def forget(self, item: Hashable) -> None:
        self.limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.limiter.num_requeues(item)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    """client-go's DefaultControllerRateLimiter: max(5 ms * 2^n capped at 1000 s, 10 qps burst 100)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )
