"""Watch: a bounded history of changes per resource, and one queue per open watch.

Like the API server's watch cache: every committed change of a resource is appended to that
resource's history (the last `window` changes) and to the queue of each open watch on it. A watch
from resourceVersion N replays the history after N; if the history no longer reaches back to N the
watch answers 410 Expired, as the real server does. Writers only append to queues; each consumer
filters by selector and copies objects in its own thread, so a slow consumer never blocks a writer.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from minisched.clock import Clock
from minisched.cluster.base import WatchEvent
from minisched.errors import ApiError, Expired
from minisched.selectors import FieldSelector, LabelSelector, object_fields

Object = dict[str, Any]
# A watch-list's marker after its initial events: sent as a BOOKMARK with this annotation "true".
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class Change:
    """One committed change. Objects are the store's own (never mutated after commit)."""

    rv: int
    type: str  # ADDED, MODIFIED or DELETED; INITIAL_EVENTS_END only in a watch-list's own queue
    obj: Object  # the new state; for DELETED the final state, carrying the deletion's resourceVersion
    old: Object | None  # the previous state, for MODIFIED (selectors may stop or start matching)
    namespace: str


class History:
    """The last `window` changes of one resource. Every change after `start_rv` is retained."""

    def __init__(self, window: int, start_rv: int) -> None:
        self.window = window
        self.start_rv = start_rv
        self.changes: deque[Change] = deque()

    def append(self, change: Change) -> None:
        self.changes.append(change)
        while len(self.changes) > self.window:
            self.start_rv = self.changes.popleft().rv

    def since(self, rv: int) -> list[Change]:
        if rv < self.start_rv:
            raise Expired(f"too old resource version: {rv} ({self.start_rv + 1})")
        if not self.changes or self.changes[-1].rv <= rv:
            return []
        return [c for c in self.changes if c.rv > rv]

    def compact(self, current_rv: int) -> None:
        self.changes.clear()
        self.start_rv = current_rv


class EmbeddedWatch:
    """An open watch stream (implements minisched.cluster.base.Watch)."""

    def __init__(
        self,
        *,
        lock: threading.RLock,
        clock: Clock,
        group: str,
        kind: str,
        namespace: str | None,
        label_selector: LabelSelector,
        field_selector: FieldSelector,
        allow_bookmarks: bool,
        timeout_seconds: float | None,
        bookmark_period: float,
        output: Callable[[Object], Object],
        bookmark_object: Callable[[int], Object],
        current_rv: Callable[[], int],
        on_close: Callable[[EmbeddedWatch], None],  # must take the cluster lock itself
        max_backlog: int | None = None,
    ) -> None:
        self._lock = lock  # the cluster's lock: taken only when no `_cond` is held
        self._cond = threading.Condition()
        self._clock = clock
        self._group, self._kind = group, kind
        self.namespace = namespace
        self._labels = label_selector
        self._fields = field_selector
        self._bookmarks = allow_bookmarks
        self._bookmark_period = bookmark_period
        self._output = output
        self._bookmark_object = bookmark_object
        self._current_rv = current_rv
        self._on_close = on_close
        self._queue: deque[Change] = deque()
        self.max_backlog = max_backlog
        self.overflowed = False  # closed because the consumer fell max_backlog events behind
        self._error: ApiError | None = None
        self._stopped = False
        self._finished = False
        self._last_rv = 0
        start = clock.monotonic()
        self._deadline = None if timeout_seconds is None else start + timeout_seconds
        self._next_bookmark = start + bookmark_period

    # Called by the cluster, holding its lock.
    def push(self, change: Change) -> None:
        with self._cond:
            if self._stopped:
                return
            if self.max_backlog is not None and len(self._queue) >= self.max_backlog:
                # Like the real watch cache with an unresponsive watcher: close the stream rather
                # than hold the writer or grow without bound. The client re-watches (maybe to a 410).
                self._queue.clear()
                self._stopped = True
                self.overflowed = True
                self._cond.notify_all()
                return
            self._queue.append(change)
            self._cond.notify()

    def limit_backlog(self, events: int | None) -> None:
        """From now on, close the stream if the consumer falls `events` behind (beyond the replay
        already queued)."""
        with self._cond:
            self.max_backlog = None if events is None else events + len(self._queue)

    def fail(self, error: ApiError) -> None:
        with self._cond:
            self._error = error
            self._cond.notify()

    def drop(self) -> None:
        """The connection dropped: pending events are lost and iteration ends."""
        with self._cond:
            self._queue.clear()
            self._stopped = True
            self._cond.notify_all()

    # The Watch protocol.
    def stop(self) -> None:
        self.drop()

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        while True:
            if self._finished:
                raise StopIteration
            change, end, bookmark_due = self._take()
            if end == "error":
                error = self._error
                self._finish()
                assert error is not None
                raise error
            if change is not None:
                event = self._view(change)
                if event is not None:
                    return event
                continue
            if bookmark_due or (end == "timeout" and self._bookmarks):
                bookmark = self._bookmark()
                if end:
                    self._finish()
                if bookmark is not None:
                    return bookmark
                continue
            if end:
                self._finish()
                raise StopIteration

    def _take(self) -> tuple[Change | None, str, bool]:
        with self._cond:
            while True:
                if self._error is not None:
                    return None, "error", False
                if self._queue:
                    return self._queue.popleft(), "", False
                if self._stopped:
                    return None, "stopped", False
                now = self._clock.monotonic()
                if self._deadline is not None and now >= self._deadline:
                    return None, "timeout", False
                if self._bookmarks and now >= self._next_bookmark:
                    self._next_bookmark = now + self._bookmark_period
                    return None, "", True
                waits = [t - now for t in (self._deadline, self._next_bookmark if self._bookmarks else None)
                         if t is not None]
                self._clock.wait(self._cond, min(waits) if waits else None)

    def _bookmark(self) -> WatchEvent | None:
        # Under the cluster lock, an empty queue means every change up to current_rv was delivered.
        with self._lock, self._cond:
            if self._queue:
                return None
            rv = self._current_rv()
        return {"type": "BOOKMARK", "object": self._bookmark_object(rv)}

    def _finish(self) -> None:
        with self._cond:
            self._stopped = True
            self._finished = True
        self._on_close(self)  # takes the cluster lock itself, so no _cond may be held here

    def _matches(self, obj: Object) -> bool:
        if not self._labels.empty() and not self._labels.matches((obj.get("metadata") or {}).get("labels")):
            return False
        return self._fields.empty() or self._fields.matches(object_fields(obj, self._group, self._kind))

    def _view(self, change: Change) -> WatchEvent | None:
        """The event this watcher sees: selectors turn MODIFIED into ADDED/DELETED at their edges."""
        if change.type == INITIAL_EVENTS_END:
            marker = self._bookmark_object(change.rv)
            marker["metadata"]["annotations"] = {INITIAL_EVENTS_END: "true"}
            return {"type": "BOOKMARK", "object": marker}
        new_ok = self._matches(change.obj)
        if change.type == "ADDED":
            return {"type": "ADDED", "object": self._output(change.obj)} if new_ok else None
        if change.type == "DELETED":
            return {"type": "DELETED", "object": self._output(change.obj)} if new_ok else None
        old_ok = change.old is not None and self._matches(change.old)
        if new_ok and old_ok:
            return {"type": "MODIFIED", "object": self._output(change.obj)}
        if new_ok:
            return {"type": "ADDED", "object": self._output(change.obj)}
        if old_ok and change.old is not None:
            gone = self._output(change.old)
            gone["metadata"]["resourceVersion"] = str(change.rv)
            return {"type": "DELETED", "object": gone}
        return None


class WatchHub:
    """Histories and open watches of every resource. The caller holds the cluster lock."""

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError(f"history_window must be at least 1, not {window}")
        self.window = window
        self._histories: dict[str, History] = {}
        self._floor = 0  # the oldest version any history may reach back to (moved by compact)
        self._watchers: dict[str, set[EmbeddedWatch]] = {}

    def history(self, storage: str) -> History:
        h = self._histories.get(storage)
        if h is None:
            # A resource nobody wrote yet has (trivially) every change since the last compaction.
            h = self._histories[storage] = History(self.window, self._floor)
        return h

    def publish(self, storage: str, change: Change) -> None:
        self.history(storage).append(change)
        for w in self._watchers.get(storage, ()):
            if w.namespace is None or w.namespace == change.namespace:
                w.push(change)

    def add(self, storage: str, watch: EmbeddedWatch) -> None:
        self._watchers.setdefault(storage, set()).add(watch)

    def remove(self, watch: EmbeddedWatch) -> None:
        for watchers in self._watchers.values():
            watchers.discard(watch)

    def open_watches(self) -> list[EmbeddedWatch]:
        return [w for ws in self._watchers.values() for w in ws]

    def compact(self, current_rv: int) -> None:
        for h in self._histories.values():
            h.compact(current_rv)
        self._floor = current_rv

    def forget(self, storage: str) -> None:
        self._histories.pop(storage, None)
