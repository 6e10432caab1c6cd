"""Fault hooks for reliability tests: what a real API server and network do to clients.

    cluster.faults.fail_next(3)                   # the next 3 requests answer 503
    cluster.faults.fail_next(1, Conflict("..."))  # or any ApiError
    cluster.faults.drop_watches()                 # every open watch ends as if the connection closed
    cluster.faults.force_expiry()                 # history compacted: older versions now answer 410
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from minisched.errors import ApiError, ServiceUnavailable


class Faults:
    def __init__(self, drop: Callable[[], int], compact: Callable[[], int]) -> None:
        self._lock = threading.Lock()
        self._failures: list[tuple[ApiError, frozenset[str] | None]] = []
        self._drop = drop
        self._compact = compact
        self.injected = 0  # how many requests failed on purpose so far

    def fail_next(self, count: int = 1, error: ApiError | None = None, *, verbs: set[str] | None = None) -> None:
        """The next `count` requests (of `verbs` only, if given: get, list, create, update, patch,
        delete, watch, bind, evict) fail with `error` (default: 503 ServiceUnavailable)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, not {count}")
        err = error or ServiceUnavailable("the server is currently unable to handle the request (injected fault)")
        with self._lock:
            self._failures.extend([(err, frozenset(verbs) if verbs else None)] * count)

    def pending(self) -> int:
        with self._lock:
            return len(self._failures)

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()

    def check(self, verb: str) -> None:
        """Called by the cluster at the start of every request."""
        with self._lock:
            for i, (err, verbs) in enumerate(self._failures):
                if verbs is None or verb in verbs:
                    del self._failures[i]
                    self.injected += 1
                    raise type(err)(err.message, status=err.status, reason=err.reason,
                                    causes=err.causes, details=err.details)

    def drop_watches(self) -> int:
        """End every open watch stream (pending events are lost). Returns how many were open."""
        return self._drop()

    def force_expiry(self) -> int:
        """Compact every resource's watch history: watching from any version older than now answers
        410 Expired. Returns the resourceVersion the history now starts at."""
        return self._compact()
