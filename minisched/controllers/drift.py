"""§2.5: drift between desired and observed state, detected by (version, hash, timestamp), and healed
with bounded retries.

The book compares a (version, hash, timestamp) triple from two machines and checks the version
first, so an identical object with a new version is reported as a mismatch, and a timestamp
difference between two machines' clocks is called "clock drift". With the Kubernetes API each part
of the triple means something precise, and the order matters:

- hash: sha256 of the fields we manage (canonical JSON). Different from the desired hash → the
  content drifted: somebody changed what we own. This is the only real drift.
- version: the object's resourceVersion. Opaque — only "equal or not" means anything. A new
  version with the same hash means somebody wrote *something* (a label we don't manage, status):
  worth recording, not worth acting on.
- timestamp: when *we* observed the object, on our clock. An observation older than `max_age`
  (a stalled watch, an old cache) cannot support a verdict either way: re-read before acting.
  Comparing timestamps from two machines measures their clock skew, not drift.

Healing (`DriftHealer`) re-applies the managed fields with optimistic concurrency (an update that
carries the resourceVersion we read, so a concurrent write is a 409 and we re-read and retry),
recreates a missing object, and re-reads a stale observation — each with a bounded number of
attempts (tenacity, sleeping on our Clock). An object that drifts again right after every heal is
being fought over by another writer: after `max_consecutive_heals` the healer stops and reports it
as CONTESTED instead of fighting forever.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from minisched.clock import Clock, RealClock
from minisched.cluster.base import Cluster
from minisched.controllers.reconciler import Kind, Request, Result, raw_kind
from minisched.errors import AlreadyExists, Conflict, NotFound
from minisched.meta import key_of, resource_version_of
from minisched.resources import Resource

Object = dict[str, Any]


class DriftKind(StrEnum):
    IN_SYNC = "InSync"
    VERSION_CHANGED = "VersionChanged"  # written by someone, managed content unchanged
    CONTENT_DRIFT = "ContentDrift"
    MISSING = "Missing"
    STALE_OBSERVATION = "StaleObservation"


def _get_path(obj: Object, path: str) -> Any:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set_path(obj: Object, path: str, value: Any) -> None:
    parts = path.split(".")
    node = obj
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = copy.deepcopy(value)


def content_hash(obj: Object, fields: Sequence[str]) -> str:
    """sha256 over the managed fields (dotted paths), as canonical JSON: key order never matters."""
    managed = {path: _get_path(obj, path) for path in fields}
    text = json.dumps(managed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Observation:
    """An object as read (None: it did not exist), and when, on the observer's clock."""

    obj: Object | None
    observed_at: float


@dataclass(frozen=True)
class DriftReport:
    key: str
    kind: DriftKind
    desired_hash: str
    observed_hash: str | None
    version: str | None  # the observed resourceVersion
    known_version: str | None  # the version we last saw in sync
    age: float  # seconds since the observation

    def __str__(self) -> str:
        short = (self.observed_hash or "-")[:8]
        return (f"{self.key}: {self.kind} (desired {self.desired_hash[:8]}, observed {short}, "
                f"version {self.version} vs known {self.known_version}, age {self.age:g} s)")  # fmt: skip


def detect_drift(
    key: str,
    desired: Object,
    observation: Observation,
    *,
    fields: Sequence[str],
    known_version: str | None,
    now: float,
    max_age: float,
) -> DriftReport:
    """The verdict, checks in the order that makes each one meaningful (see the module doc)."""
    desired_hash = content_hash(desired, fields)
    age = now - observation.observed_at
    obj = observation.obj
    if age > max_age:
        kind = DriftKind.STALE_OBSERVATION
    elif obj is None:
        kind = DriftKind.MISSING
    elif content_hash(obj, fields) != desired_hash:
        kind = DriftKind.CONTENT_DRIFT
    elif known_version is not None and resource_version_of(obj) != known_version:
        kind = DriftKind.VERSION_CHANGED
    else:
        kind = DriftKind.IN_SYNC
    return DriftReport(
        key, kind, desired_hash, None if obj is None else content_hash(obj, fields),
        None if obj is None else resource_version_of(obj), known_version, age,
    )  # fmt: skip


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int  # total tries, first included
    initial_wait: float = 0.1  # seconds, doubled per retry
    max_wait: float = 2.0


# The book's table (re-pull 2, re-apply 3, clock drift 1), mapped onto the verdicts that need action.
DEFAULT_POLICY: dict[DriftKind, RetryPolicy] = {
    DriftKind.STALE_OBSERVATION: RetryPolicy(2),
    DriftKind.CONTENT_DRIFT: RetryPolicy(3),
    DriftKind.MISSING: RetryPolicy(3),
}


@dataclass
class HealResult:
    key: str
    detected: DriftKind
    action: str  # "none", "recorded", "re-read", "re-applied", "recreated", "gave up", "contested"
    attempts: int = 0
    ok: bool = True
    detail: str = ""


@dataclass
class _Track:
    known_version: str | None = None
    consecutive_heals: int = 0
    log: list[HealResult] = field(default_factory=list)


class DriftHealer:
    """Keeps objects of one resource at their desired managed fields.

    Also a Reconciler[Object, Object] (`reconcile`), so a `Controller` can run it on watch events,
    with `recheck_every` seconds of polling as the safety net for events that never come.
    """

    def __init__(
        self,
        cluster: Cluster,
        resource: Resource,
        desired: Sequence[Object],
        *,
        fields: Sequence[str],
        clock: Clock | None = None,
        max_age: float = 30.0,
        policy: dict[DriftKind, RetryPolicy] | None = None,
        max_consecutive_heals: int = 3,
        recheck_every: float = 60.0,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        """`sleep` waits between retries (default: the clock's sleep; with a VirtualClock and no
        other thread to move it, pass `clock.advance` so retries move time themselves)."""
        if not fields:
            raise ValueError(
                "DriftHealer needs at least one managed field path, e.g. 'data' or 'spec.replicas'"
            )
        self.cluster, self.resource, self.fields = cluster, resource, list(fields)
        self.desired = {key_of(obj): copy.deepcopy(obj) for obj in desired}
        self.clock: Clock = clock or RealClock()
        self.max_age, self.recheck_every = max_age, recheck_every
        self.policy = {**DEFAULT_POLICY, **(policy or {})}
        self.max_consecutive_heals = max_consecutive_heals
        self.tracks: dict[str, _Track] = {key: _Track() for key in self.desired}
        self._sleep = sleep or self.clock.sleep

    # -- Reconciler ---------------------------------------------------------------------------

    @property
    def primary(self) -> Kind[Object]:
        return raw_kind(self.resource)

    @property
    def owned(self) -> Kind[Object] | None:
        return None

    def reconcile(self, request: Request) -> Result:
        if request.key in self.desired:
            self.heal(request.key)
        return Result(requeue_after=self.recheck_every)

    # -- detect and heal ----------------------------------------------------------------------

    def observe(self, key: str) -> Observation:
        desired = self.desired[key]
        meta = desired["metadata"]
        try:
            obj: Object | None = self.cluster.get(self.resource, meta["name"], meta.get("namespace"))
        except NotFound:
            obj = None
        return Observation(obj, self.clock.now())

    def check(self, key: str, observation: Observation | None = None) -> DriftReport:
        if key not in self.desired:
            raise KeyError(
                f"{key!r} is not managed by this healer (managed: {', '.join(sorted(self.desired))})"
            )
        observation = observation or self.observe(key)
        return detect_drift(
            key, self.desired[key], observation, fields=self.fields,
            known_version=self.tracks[key].known_version, now=self.clock.now(), max_age=self.max_age,
        )  # fmt: skip

    def heal(self, key: str, observation: Observation | None = None) -> HealResult:
        """Check `key` and act on the verdict; every result is also kept in `history(key)`."""
        report = self.check(key, observation)
        track = self.tracks[key]
        if report.kind is DriftKind.IN_SYNC:
            track.consecutive_heals = 0
            result = HealResult(key, report.kind, "none")
        elif report.kind is DriftKind.VERSION_CHANGED:
            track.known_version = report.version
            track.consecutive_heals = 0
            result = HealResult(key, report.kind, "recorded", detail=f"now at version {report.version}")
        elif track.consecutive_heals >= self.max_consecutive_heals and report.kind is DriftKind.CONTENT_DRIFT:
            result = HealResult(key, report.kind, "contested", ok=False, detail=(
                f"drifted again after {track.consecutive_heals} heals in a row: another writer owns these "
                "fields; not fighting it"))  # fmt: skip
        else:
            result = self._act(key, report.kind)
        track.log.append(result)
        return result

    def history(self, key: str) -> list[HealResult]:
        return list(self.tracks[key].log)

    def _act(self, key: str, kind: DriftKind) -> HealResult:
        policy = self.policy[kind]
        action = {DriftKind.STALE_OBSERVATION: "re-read", DriftKind.CONTENT_DRIFT: "re-applied",
                  DriftKind.MISSING: "recreated"}[kind]  # fmt: skip
        retrying = Retrying(
            stop=stop_after_attempt(policy.attempts),
            wait=wait_exponential(multiplier=policy.initial_wait, max=policy.max_wait),
            retry=retry_if_exception_type((Conflict, AlreadyExists, NotFound, _StillStale)),
            sleep=self._sleep,
            reraise=False,
        )
        attempts = 0
        try:
            for attempt in retrying:
                with attempt:
                    attempts += 1
                    applied = self._apply_once(key, kind)
        except RetryError as error:
            cause = error.last_attempt.exception()
            return HealResult(key, kind, "gave up", attempts, ok=False,
                              detail=f"{attempts} attempts; last: {type(cause).__name__}: {cause}")  # fmt: skip
        track = self.tracks[key]
        track.known_version = resource_version_of(applied)
        if kind is not DriftKind.STALE_OBSERVATION:
            track.consecutive_heals += 1
        return HealResult(key, kind, action, attempts, detail=f"version {track.known_version}")

    def _apply_once(self, key: str, kind: DriftKind) -> Object:
        desired = self.desired[key]
        if kind is DriftKind.STALE_OBSERVATION:
            fresh = self.observe(key)
            if fresh.obj is None:
                raise _StillStale(f"{key} is gone; the next check will recreate it")
            # A fresh read: if it shows drift, act on that right away (inside the same budget).
            if content_hash(fresh.obj, self.fields) != content_hash(desired, self.fields):
                return self._reapply(fresh.obj)
            return fresh.obj
        if kind is DriftKind.MISSING:
            try:
                return self.cluster.create(self.resource, self._clean(desired))
            except AlreadyExists:
                live = self.observe(key).obj
                if live is None:
                    raise
                return (
                    self._reapply(live)
                    if content_hash(live, self.fields) != content_hash(desired, self.fields)
                    else live
                )
        live = self.observe(key).obj
        if live is None:
            raise NotFound(f"{key} disappeared while healing")
        return self._reapply(live)

    def _reapply(self, live: Object) -> Object:
        """Write the desired managed fields onto the live object, conditional on its version."""
        updated = copy.deepcopy(live)
        desired = self.desired[key_of(live)]
        for path in self.fields:
            _set_path(updated, path, _get_path(desired, path))
        return self.cluster.update(self.resource, updated)  # carries live's resourceVersion: 409 if it moved

    @staticmethod
    def _clean(desired: Object) -> Object:
        obj = copy.deepcopy(desired)
        for server_field in ("resourceVersion", "uid", "creationTimestamp", "generation"):
            obj.get("metadata", {}).pop(server_field, None)
        return obj


class _StillStale(Exception):
    """A re-read did not give a usable observation (retried, then reported)."""
