"""§4.3 Event sourcing: scheduling decisions as an append-only log, and read models rebuilt by replay.

Each event has the book's schema: eventId, eventType, aggregateId, version, timestamp, payload,
correlationId. The aggregate here is a pod ("namespace/name"); its events say what the scheduler
decided about it: queued, an attempt failed, scheduled (bound) to a node, binding failed,
preempted, deleted.

The log lives in SQLite (stdlib `sqlite3`, in memory or in a file):

- append-only: triggers reject UPDATE and DELETE, so history cannot be rewritten in place;
- optimistic concurrency: `append(..., expected_version=n)` succeeds only if the aggregate's
  latest version is still n, checked in the same write transaction; otherwise `VersionConflict`
  says what was expected and what was found. A UNIQUE(aggregate_id, version) constraint backs
  this up, even across processes sharing the file;
- a global `position` orders all events, so a projection replays them in commit order.

A projection folds events into a read model. `PodPlacements` is the scheduler's: where each pod
is, how many attempts it took, why it last failed. `replay(log, projection)` rebuilds one from
nothing; `EventLog.subscribe` keeps one up to date live. The chapter's test checks both agree,
and agree with the cluster.

What this log is not: the source of truth for bindings. The API server is; the log records what
this scheduler saw and did. The version check protects the log's own order (no lost or
interleaved appends per pod); it does not stop two schedulers from binding a pod, the API
server's 409 does.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from minisched.clock import Clock, RealClock, rfc3339_micro
from minisched.observability.logging import current_correlation_id

__all__ = [
    "Event",
    "EventLog",
    "EventTypes",
    "PodPlacement",
    "PodPlacements",
    "Projection",
    "VersionConflict",
    "replay",
]


class EventTypes:
    """The scheduling decisions the log records."""

    QUEUED = "PodQueued"
    ATTEMPT_FAILED = "SchedulingAttemptFailed"
    SCHEDULED = "PodScheduled"
    BINDING_FAILED = "BindingFailed"
    PREEMPTED = "PodPreempted"
    DELETED = "PodDeleted"

    ALL = frozenset({QUEUED, ATTEMPT_FAILED, SCHEDULED, BINDING_FAILED, PREEMPTED, DELETED})


class VersionConflict(Exception):
    """An append expected an aggregate version that is no longer the latest."""

    def __init__(self, aggregate_id: str, expected: int, actual: int) -> None:
        super().__init__(
            f"version conflict on {aggregate_id!r}: the append expected version {expected}, "
            f"but the log is at version {actual}; read the new events and decide again"
        )
        self.aggregate_id, self.expected, self.actual = aggregate_id, expected, actual


@dataclass(frozen=True)
class Event:
    event_id: str
    event_type: str
    aggregate_id: str
    version: int
    timestamp: float
    payload: dict[str, Any]
    correlation_id: str | None
    position: int = 0  # order in the whole log, from 1

    def to_dict(self) -> dict[str, Any]:
        """The book's JSON shape (camelCase keys, RFC 3339 timestamp with microseconds)."""
        return {
            "eventId": self.event_id,
            "eventType": self.event_type,
            "aggregateId": self.aggregate_id,
            "version": self.version,
            "timestamp": rfc3339_micro(self.timestamp),
            "payload": self.payload,
            "correlationId": self.correlation_id,
        }


_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    position       INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id       TEXT    NOT NULL UNIQUE,
    event_type     TEXT    NOT NULL,
    aggregate_id   TEXT    NOT NULL,
    version        INTEGER NOT NULL CHECK (version >= 1),
    timestamp      REAL    NOT NULL,
    payload        TEXT    NOT NULL,
    correlation_id TEXT,
    UNIQUE (aggregate_id, version)
);
CREATE TRIGGER IF NOT EXISTS events_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only: events cannot be updated'); END;
CREATE TRIGGER IF NOT EXISTS events_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only: events cannot be deleted'); END;
"""


class EventLog:
    """An append-only event store in SQLite. Thread-safe; `path` ":memory:" or a file."""

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        clock: Clock | None = None,
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        self.path = str(path)
        self._clock = clock or RealClock()
        self._ids = id_factory or (lambda: "evt_" + uuid.uuid4().hex[:12])
        self._lock = threading.RLock()
        # Autocommit mode: transactions are opened explicitly with BEGIN IMMEDIATE.
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        if self.path != ":memory:":
            # WAL + synchronous=NORMAL: a commit survives a process crash without an fsync per
            # append (about 18x faster here, see bench/ch45_overheads.py); a power cut may lose the last few.
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._subscribers: list[Callable[[Event], None]] = []

    @staticmethod
    def sequential_ids(prefix: str = "evt_") -> Callable[[], str]:
        """Deterministic event ids (evt_000001, ...) for notebooks and tests."""
        counter = itertools.count(1)
        return lambda: f"{prefix}{next(counter):06d}"

    def append(
        self,
        aggregate_id: str,
        event_type: str,
        payload: dict[str, Any] | None = None,
        *,
        expected_version: int,
        correlation_id: str | None = None,
    ) -> Event:
        """Append one event as version expected_version + 1 of `aggregate_id`.

        `expected_version` is the version the caller decided on (0 for a new aggregate). The
        correlation id defaults to the one set by `minisched.observability.logging.correlation`."""
        if not aggregate_id:
            raise ValueError("an event needs an aggregate id")
        if event_type not in EventTypes.ALL:
            raise ValueError(f"unknown event type {event_type!r}; expected one of {sorted(EventTypes.ALL)}")
        if expected_version < 0:
            raise ValueError(f"expected_version must be >= 0, got {expected_version}")
        body = json.dumps(payload or {}, sort_keys=True)
        cid = correlation_id if correlation_id is not None else current_correlation_id()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # take the write lock before reading the version
            try:
                actual = self._version_locked(aggregate_id)
                if actual != expected_version:
                    raise VersionConflict(aggregate_id, expected_version, actual)
                event_id, ts = self._ids(), self._clock.now()
                cursor = self._db.execute(
                    "INSERT INTO events (event_id, event_type, aggregate_id, version, timestamp, payload, "
                    "correlation_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (event_id, event_type, aggregate_id, actual + 1, ts, body, cid),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            event = Event(event_id, event_type, aggregate_id, actual + 1, ts, json.loads(body), cid,
                          int(cursor.lastrowid or 0))
            for fn in self._subscribers:  # under the lock, so subscribers see events in log order
                fn(event)
        return event

    def version(self, aggregate_id: str) -> int:
        """The latest version of the aggregate; 0 if it has no events."""
        with self._lock:
            return self._version_locked(aggregate_id)

    def _version_locked(self, aggregate_id: str) -> int:
        row = self._db.execute("SELECT MAX(version) FROM events WHERE aggregate_id = ?", (aggregate_id,)).fetchone()
        return int(row[0] or 0)

    def read(self, aggregate_id: str | None = None, *, after: int = 0) -> list[Event]:
        """Events in log order, all or one aggregate's, with position > `after`."""
        query = ("SELECT position, event_id, event_type, aggregate_id, version, timestamp, payload, correlation_id "
                 "FROM events WHERE position > ?")
        args: list[Any] = [after]
        if aggregate_id is not None:
            query += " AND aggregate_id = ?"
            args.append(aggregate_id)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY position", args).fetchall()
        return [
            Event(event_id, event_type, aggregate, version, ts, json.loads(payload), cid, position)
            for position, event_id, event_type, aggregate, version, ts, payload, cid in rows
        ]

    def __iter__(self) -> Iterator[Event]:
        return iter(self.read())

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def subscribe(self, fn: Callable[[Event], None]) -> None:
        """Call `fn(event)` after each committed append (a live projection). `fn` must not append."""
        with self._lock:
            self._subscribers.append(fn)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Projection(Protocol):
    def apply(self, event: Event) -> None: ...


def replay(events: EventLog | Iterable[Event], projection: Projection) -> Projection:
    """Fold every event, in log order, into `projection` and return it."""
    for event in events.read() if isinstance(events, EventLog) else events:
        projection.apply(event)
    return projection


@dataclass
class PodPlacement:
    """The read model of one pod."""

    pod: str
    phase: str = "Pending"  # Pending, Scheduled, Deleted
    node: str | None = None
    attempts: int = 0
    last_failure: str | None = None
    version: int = 0
    uid: str | None = None  # a pod deleted and created again under the same name is a new incarnation


@dataclass
class PodPlacements:
    """Projection: every pod's placement, and the pods on each node.

    It checks the log as it folds: an event at or below the version it holds is a redelivery and
    is skipped (so replaying twice is harmless); a version that skips ahead is a gap, and a pod
    scheduled twice without a preemption or deletion in between is a bug: both raise instead of
    guessing."""

    pods: dict[str, PodPlacement] = field(default_factory=dict)

    def apply(self, event: Event) -> None:
        record = self.pods.setdefault(event.aggregate_id, PodPlacement(event.aggregate_id))
        if event.version <= record.version:
            return  # already applied (a redelivery): applying twice = applying once
        if event.version != record.version + 1:
            raise ValueError(
                f"event {event.event_id} is version {event.version} of {event.aggregate_id!r}, "
                f"but the projection is at version {record.version}: the log has a gap or is out of order"
            )
        record.version = event.version
        kind, payload = event.event_type, event.payload
        if kind == EventTypes.QUEUED:
            record.phase = "Pending"
        elif kind in (EventTypes.ATTEMPT_FAILED, EventTypes.BINDING_FAILED):
            record.attempts += 1
            record.last_failure = str(payload.get("reason") or payload.get("error") or kind)
        elif kind == EventTypes.SCHEDULED:
            new_incarnation = payload.get("uid") is not None and payload.get("uid") != record.uid
            if record.phase == "Scheduled" and not new_incarnation:
                raise ValueError(
                    f"{event.aggregate_id!r} scheduled twice: on {record.node!r}, then on {payload.get('node')!r}"
                )
            record.attempts += 1
            record.phase, record.node = "Scheduled", str(payload["node"])
            record.uid = payload.get("uid", record.uid)
        elif kind == EventTypes.PREEMPTED:
            record.phase, record.node = "Pending", None
        elif kind == EventTypes.DELETED:
            record.phase, record.node = "Deleted", None

    def bound(self) -> dict[str, str]:
        """pod -> node, for pods currently scheduled."""
        return {pod: r.node for pod, r in sorted(self.pods.items()) if r.phase == "Scheduled" and r.node}

    def by_node(self) -> dict[str, list[str]]:
        nodes: dict[str, list[str]] = {}
        for pod, node in self.bound().items():
            nodes.setdefault(node, []).append(pod)
        return nodes

    def pending(self) -> list[str]:
        return sorted(pod for pod, r in self.pods.items() if r.phase == "Pending")
