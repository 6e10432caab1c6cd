"""Delivering notifications to handlers (client-go sharedProcessor and processorListener).

Each handler gets its own listener: an unbounded buffer and a thread that calls the handler, so a
slow handler delays only itself, never the informer or the other handlers. Each listener has its
own resync period; at a resync only the listeners that are due receive the Sync updates.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from minisched.clock import Clock
from minisched.informer.handlers import ResourceEventHandler
from minisched.informer.keys import DeletedFinalStateUnknown

Object = dict[str, Any]
log = logging.getLogger("minisched.informer")


@dataclass(frozen=True)
class AddNotification:
    obj: Object
    is_in_initial_list: bool


@dataclass(frozen=True)
class UpdateNotification:
    old: Object
    new: Object


@dataclass(frozen=True)
class DeleteNotification:
    obj: Object | DeletedFinalStateUnknown


Notification = AddNotification | UpdateNotification | DeleteNotification


class ProcessorListener:
    """One handler's buffer and delivery thread."""

    def __init__(self, handler: ResourceEventHandler, resync_period: float, clock: Clock) -> None:
        self.handler = handler
        self.requested_resync_period = resync_period
        self.resync_period = resync_period
        self._clock = clock
        self._cond = threading.Condition()
        self._buffer: deque[Notification | None] = deque()  # None: stop
        self._pending_initial = 0  # initial-list adds buffered or being handled
        self._next_resync = clock.monotonic() + resync_period
        self._thread: threading.Thread | None = None
        self.errors = 0

    def add(self, notification: Notification) -> None:
        with self._cond:
            if isinstance(notification, AddNotification) and notification.is_in_initial_list:
                self._pending_initial += 1
            self._buffer.append(notification)
            self._cond.notify()

    def initial_list_delivered(self) -> bool:
        with self._cond:
            return self._pending_initial == 0

    def pending(self) -> int:
        with self._cond:
            return len(self._buffer)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-handler {self.handler!r:.40}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        with self._cond:
            self._buffer.append(None)
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def should_resync(self, now: float) -> bool:
        with self._cond:
            return self.resync_period > 0 and now >= self._next_resync

    def determine_next_resync(self, now: float) -> None:
        with self._cond:
            self._next_resync = now + self.resync_period

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._buffer:
                    self._cond.wait()
                notification = self._buffer.popleft()
            if notification is None:
                return
            try:
                self._deliver(notification)
            except Exception:  # a handler's bug must not stop the informer
                self.errors += 1
                log.exception("informer handler %r failed", self.handler)
            finally:
                if isinstance(notification, AddNotification) and notification.is_in_initial_list:
                    with self._cond:
                        self._pending_initial -= 1

    def _deliver(self, n: Notification) -> None:
        if isinstance(n, AddNotification):
            self.handler.on_add(n.obj, n.is_in_initial_list)
        elif isinstance(n, UpdateNotification):
            self.handler.on_update(n.old, n.new)
        else:
            self.handler.on_delete(n.obj)


class SharedProcessor:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._listeners: list[ProcessorListener] = []
        self._syncing: list[ProcessorListener] = []
        self._started = False

    def add_listener(self, listener: ProcessorListener) -> None:
        with self._lock:
            self._listeners.append(listener)
            self._syncing.append(listener)
            if self._started:
                listener.start()

    def remove_listener(self, listener: ProcessorListener) -> bool:
        with self._lock:
            if listener not in self._listeners:
                return False
            self._listeners.remove(listener)
            if listener in self._syncing:
                self._syncing.remove(listener)
        if self._started:
            listener.stop(timeout=5)
        return True

    def listeners(self) -> list[ProcessorListener]:
        with self._lock:
            return list(self._listeners)

    def distribute(self, notification: Notification, sync: bool) -> None:
        with self._lock:
            for listener in self._syncing if sync else self._listeners:
                listener.add(notification)

    def run(self) -> None:
        with self._lock:
            self._started = True
            for listener in self._listeners:
                listener.start()

    def stop(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
            self._started = False
        for listener in listeners:
            listener.stop(timeout=5)

    def should_resync(self) -> bool:
        """Pick the listeners due for a resync (they alone get the coming Sync updates)."""
        with self._lock:
            now = self._clock.monotonic()
            self._syncing = []
            for listener in self._listeners:
                if listener.should_resync(now):
                    self._syncing.append(listener)
                    listener.determine_next_resync(now)
            return bool(self._syncing)

    def resync_check_period_changed(self, check_period: float) -> None:
        with self._lock:
            for listener in self._listeners:
                listener.resync_period = effective_resync_period(listener.requested_resync_period, check_period)


def effective_resync_period(requested: float, check_period: float) -> float:
    """A listener cannot resync more often than the informer checks (0: never)."""
    if requested == 0:
        return 0.0
    return max(requested, check_period)
