"""A delaying queue whose retries are spaced by a rate limiter (client-go RateLimitingInterface).

A worker that fails calls add_rate_limited(key) (the key comes back after the limiter's delay);
one that succeeds calls forget(key) so the key's next failure starts again from the shortest delay.
"""

from __future__ import annotations

from collections.abc import Hashable

from minisched.clock import Clock, RealClock
from minisched.workqueue.delaying_queue import DelayingQueue
from minisched.workqueue.metrics import MetricsProvider
from minisched.workqueue.queue import T
from minisched.workqueue.rate_limiters import RateLimiter, default_controller_rate_limiter


class RateLimitingQueue(DelayingQueue[T]):
    def __init__(
        self,
        rate_limiter: RateLimiter | None = None,
        name: str = "",
        *,
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        clock = clock or RealClock()
        super().__init__(name, clock=clock, metrics_provider=metrics_provider)
        self.rate_limiter: RateLimiter = rate_limiter or default_controller_rate_limiter(clock)

    def add_rate_limited(self, item: T) -> None:
        """Add `item` once the rate limiter allows (records one more failure for it)."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: Hashable) -> None:
        """Stop tracking `item`'s failures. It does not remove the item from the queue."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.rate_limiter.num_requeues(item)
