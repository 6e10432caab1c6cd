"""Work queues for controllers, modelled on client-go's util/workqueue.

- `Queue`: dedup plus one worker per key; get()/done(); shut_down() and shut_down_with_drain().
- `DelayingQueue`: add_after(item, seconds) on a Clock.
- `RateLimitingQueue`: add_rate_limited(item), forget(item), num_requeues(item).
- Rate limiters (`rate_limiters`) and metrics hooks (`metrics`).

A controller's worker::

    queue = RateLimitingQueue(name="pods")   # default_controller_rate_limiter()
    while True:
        key, shutdown = queue.get()
        if shutdown:
            return
        try:
            reconcile(key)
            queue.forget(key)                  # success: its next failure starts at 5 ms again
        except Exception:
            queue.add_rate_limited(key)        # retry after 5 ms, 10 ms, 20 ms ... (max 1000 s)
        finally:
            queue.done(key)                    # lets the key be handed out again
"""

from minisched.workqueue.delaying_queue import DelayingQueue
from minisched.workqueue.metrics import (
    InMemoryMetricsProvider,
    MetricsProvider,
    NoopMetricsProvider,
    set_provider,
)
from minisched.workqueue.queue import Queue
from minisched.workqueue.rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)
from minisched.workqueue.rate_limiting_queue import RateLimitingQueue

__all__ = [
    "BucketRateLimiter",
    "DelayingQueue",
    "InMemoryMetricsProvider",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "MetricsProvider",
    "NoopMetricsProvider",
    "Queue",
    "RateLimiter",
    "RateLimitingQueue",
    "WithMaxWaitRateLimiter",
    "default_controller_rate_limiter",
    "set_provider",
]
