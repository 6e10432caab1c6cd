"""The reflector's backoff between failed attempts (client-go's exponential backoff manager).

Delays grow 0.8 s, 1.6 s, 3.2 s ... up to 30 s, each stretched by a random jitter (up to +100%) so
that many clients that failed together do not retry together. After 2 minutes without needing a
backoff the sequence starts again from 0.8 s.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from minisched.clock import Clock, RealClock


@dataclass
class ExponentialBackoff:
    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0  # a delay d becomes d + uniform(0, jitter * d)
    reset_after: float = 120.0
    clock: Clock = field(default_factory=RealClock)
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.cap < self.initial or self.factor < 1 or self.jitter < 0:
            raise ValueError(
                f"backoff needs 0 < initial <= cap, factor >= 1 and jitter >= 0; got initial={self.initial}, "
                f"cap={self.cap}, factor={self.factor}, jitter={self.jitter}"
            )
        self._lock = threading.Lock()
        self._next = self.initial
        self._last_start: float | None = None

    def next_delay(self) -> float:
        """The next delay to wait, in seconds (with jitter)."""
        with self._lock:
            now = self.clock.monotonic()
            if self._last_start is None or now - self._last_start > self.reset_after:
                self._next = self.initial
            self._last_start = now
            delay = self._next
            self._next = min(self._next * self.factor, self.cap)
        if self.jitter > 0:
            delay += self.rng.random() * self.jitter * delay
        return delay

    def reset(self) -> None:
        with self._lock:
            self._next = self.initial
            self._last_start = None
