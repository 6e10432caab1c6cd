"""Rate-limited logging: one line per kind of message per interval, with a count of the rest.

During an outage every request fails the same way; logging each failure buries the one line that
matters under thousands (a 7 s API server restart produced thousands of retry warnings). klog has
no such filter, but client-go's reflector logs a failing list+watch once per backoff step for the
same reason. Here a `logging.Filter` keyed by the message template (not the formatted text, which
differs per pod or URL) lets the first record of a kind through, drops the rest for `interval`
seconds, and appends "(N similar messages suppressed)" to the next one it lets through.

    install(logging.getLogger("urllib3.connectionpool"), interval=10.0, match="Retrying")
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["RateLimitFilter", "install"]


class RateLimitFilter(logging.Filter):
    def __init__(
        self,
        interval: float = 10.0,
        *,
        match: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Limit records whose message template contains `match` (all records when None)."""
        super().__init__()
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self.interval = interval
        self.match = match
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[tuple[str, int], float] = {}
        self._suppressed: dict[tuple[str, int], int] = {}
        self.suppressed_total = 0

    def filter(self, record: logging.LogRecord) -> bool:
        template = str(record.msg)
        if self.match is not None and self.match not in template:
            return True
        key = (template, record.levelno)
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                self.suppressed_total += 1
                return False
            self._last[key] = now
            skipped = self._suppressed.pop(key, 0)
        if skipped:
            record.msg = f"{template} ({skipped} similar messages suppressed in the last {self.interval:g} s)"
        return True


def install(logger: logging.Logger, interval: float = 10.0, *, match: str | None = None) -> RateLimitFilter:
    """Add a RateLimitFilter for `match` to `logger`, once (a second call returns the first filter)."""
    for existing in logger.filters:
        if isinstance(existing, RateLimitFilter) and existing.match == match:
            return existing
    limiter = RateLimitFilter(interval, match=match)
    logger.addFilter(limiter)
    return limiter
