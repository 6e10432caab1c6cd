"""§4.4 Leader election on a coordination.k8s.io/v1 Lease, as client-go's tools/leaderelection does it.

Several replicas of a scheduler run; one leads and schedules, the others wait. The "election" is
not a vote: it is an optimistic write race on one Lease object.

- The lease's spec says who holds it (holderIdentity), for how long (leaseDurationSeconds), when
  it was taken (acquireTime) and last renewed (renewTime, both MicroTime), and how many times it
  changed hands (leaseTransitions).
- Everyone reads the lease every `retry_period` (2 s, plus up to 1.2x jitter). A candidate may
  take it only when it has seen the *same* record for a whole lease duration (15 s) by its own
  clock, never by comparing renewTime with its clock (clocks of two machines disagree; elapsed
  time on one machine does not).
- Every write carries the resourceVersion that was read, so of two replicas writing at once the
  API server accepts one and answers 409 Conflict to the other, which simply tries again later.
- The leader renews every `retry_period`; if it cannot renew within `renew_deadline` (10 s) it
  stops leading (its `on_started_leading` context is cancelled) and Run returns. kube-scheduler
  then exits, to restart as a candidate.
- Because renew_deadline < lease_duration, an old leader gives up before anyone else may take the
  lease, if both clocks run at the same rate. That is the only protection: there is no fencing
  token, so a leader paused longer than that (GC, SIGSTOP) can still act. The API server's 409 on
  pods/binding is what keeps a pod from being bound twice.

Everything runs on a `Clock`, so the chapter's fail-over runs on a `VirtualClock` in milliseconds.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minisched.clock import Clock, RealClock, parse_rfc3339, rfc3339_micro
from minisched.cluster.base import Cluster, Object
from minisched.deadline import Context, ContextError, call
from minisched.errors import ApiError, Conflict, NotFound
from minisched.resources import LEASES

__all__ = ["JITTER_FACTOR", "LeaderElectionRecord", "LeaderElector", "describe"]

JITTER_FACTOR = 1.2  # client-go's JitterFactor for the acquire loop

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaderElectionRecord:
    """A Lease's spec, as client-go's resourcelock.LeaderElectionRecord. Times are epoch seconds."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: float | None = None
    renew_time: float | None = None
    lease_transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Object) -> LeaderElectionRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=parse_rfc3339(spec["acquireTime"]) if spec.get("acquireTime") else None,
            renew_time=parse_rfc3339(spec["renewTime"]) if spec.get("renewTime") else None,
            lease_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> Object:
        spec: Object = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.lease_transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = rfc3339_micro(self.acquire_time)
        if self.renew_time is not None:
            spec["renewTime"] = rfc3339_micro(self.renew_time)
        return spec


class LeaderElector:
    """One candidate for the lease `namespace/name`. `run(ctx)` campaigns, leads, and returns
    when leadership is lost or `ctx` ends."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        name: str,
        identity: str,
        namespace: str = "kube-system",
        clock: Clock | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started_leading: Callable[[Context], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        release_on_cancel: bool = True,
        rng: random.Random | None = None,
    ) -> None:
        # The same checks as client-go's NewLeaderElector, with the reason spelled out.
        if not identity:
            raise ValueError("leader election needs a non-empty identity (kube-scheduler uses hostname_uuid)")
        if not name:
            raise ValueError("leader election needs the lease's name")
        if lease_duration <= renew_deadline:
            raise ValueError(
                f"lease_duration ({lease_duration}) must be greater than renew_deadline ({renew_deadline}): "
                "an old leader must give up before a candidate may take over"
            )
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError(
                f"renew_deadline ({renew_deadline}) must be greater than {JITTER_FACTOR} * retry_period "
                f"({retry_period}), or a leader gets fewer than one renewal try before its deadline"
            )
        if min(lease_duration, renew_deadline, retry_period) <= 0:
            raise ValueError("lease_duration, renew_deadline and retry_period must all be positive")
        self.cluster = cluster
        self.name, self.namespace, self.identity = name, namespace, identity
        self.clock: Clock = clock or RealClock()
        self.lease_duration, self.renew_deadline, self.retry_period = (
            lease_duration,
            renew_deadline,
            retry_period,
        )
        self.release_on_cancel = release_on_cancel
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._observed: LeaderElectionRecord | None = None
        self._observed_raw: Object | None = (
            None  # the lease as last read or written (with its resourceVersion)
        )
        self._observed_time = 0.0  # clock.monotonic() when the record last changed
        self._reported_leader: str | None = None
        self._leading = False
        self.leading_thread: threading.Thread | None = None
        self.transitions_seen: list[str] = []  # holders as this elector saw them change, for the chapter

    # -- state ---------------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """True while run() leads: elected, and not yet given up (client-go looks only at the
        observed record, which still names us after a failed renewal; this does not)."""
        with self._lock:
            return self._leading and self._observed is not None and self._observed.holder_identity == self.identity

    def holds_lease(self) -> bool:
        """Fencing for writes only a leader may make (a bind): leading, and the last successful
        renewal is less than renew_deadline old on our own clock. A candidate takes over only
        lease_duration (> renew_deadline) after it last saw the lease change, so a leader that was
        paused (SIGSTOP, a long GC, a frozen VM) and resumes past that point says False here before
        its elector thread has even noticed, and a bind it was about to send is not sent."""
        with self._lock:
            leading = self._leading and self._observed is not None and self._observed.holder_identity == self.identity
            return leading and self.clock.monotonic() - self._observed_time < self.renew_deadline

    def leader(self) -> str | None:
        """The holder this elector last observed ("" when the lease is free); None before the first read."""
        with self._lock:
            return None if self._observed is None else self._observed.holder_identity

    @property
    def observed_record(self) -> LeaderElectionRecord | None:
        with self._lock:
            return self._observed

    def check_health(self, max_tolerable_expired: float = 20.0) -> str | None:
        """client-go's HealthzAdaptor: unhealthy only if this instance thinks it leads but has not
        renewed for lease_duration + `max_tolerable_expired` (kube-scheduler: 20 s): it is stuck."""
        with self._lock:
            leading = self._leading and self._observed is not None and self._observed.holder_identity == self.identity
            stale = self.clock.monotonic() - self._observed_time
        if leading and stale > self.lease_duration + max_tolerable_expired:
            return f"failed election to renew leadership on lease {self.namespace}/{self.name} ({stale:.1f} s ago)"
        return None

    # -- the loop ------------------------------------------------------------------------------------

    def run(self, ctx: Context) -> None:
        """Campaign until elected, lead until the lease is lost or `ctx` ends.

        As in client-go, `on_stopped_leading` runs whenever run() returns, elected or not."""
        try:
            if not self._acquire(ctx):
                return
            with self._lock:
                self._leading = True
            leading = ctx.with_cancel(name=f"leading {self.name}")
            if self._on_started is not None:
                started = self._on_started
                self.leading_thread = threading.Thread(
                    target=started, args=(leading,), name=f"leader-{self.identity}", daemon=True
                )
                self.leading_thread.start()
            try:
                self._renew(ctx)
            finally:
                with self._lock:
                    self._leading = False
                leading.cancel("leadership lost" if ctx.err() is None else "elector stopped")
                if self.release_on_cancel:
                    self._release(ctx)
        finally:
            if self._on_stopped is not None:
                self._on_stopped()

    def start(self, ctx: Context) -> threading.Thread:
        """run(ctx) on a daemon thread."""
        thread = threading.Thread(target=self.run, args=(ctx,), name=f"elector-{self.identity}", daemon=True)
        thread.start()
        return thread

    def _acquire(self, ctx: Context) -> bool:
        while not ctx.done():
            if self._try_acquire_or_renew(ctx):
                self._report_transition()
                return True
            self._report_transition()
            # wait.JitterUntil(retryPeriod, 1.2, sliding): retry .. retry * 2.2
            if ctx.wait(self.retry_period * (1 + JITTER_FACTOR * self._rng.random())):
                return False
        return False

    def _renew(self, ctx: Context) -> None:
        while not ctx.done():
            with ctx.with_timeout(self.renew_deadline, name="renew deadline") as attempt:
                renewed = False
                while not attempt.done():  # wait.PollImmediateUntil(retryPeriod, ..., renew deadline)
                    if self._try_acquire_or_renew(attempt):
                        renewed = True
                        break
                    if attempt.wait(self.retry_period):
                        break
            self._report_transition()
            if not renewed:
                return  # lost: failed to renew within renew_deadline (or ctx ended)
            if ctx.wait(self.retry_period):
                return

    def _try_acquire_or_renew(self, ctx: Context) -> bool:
        now = self.clock.now()
        desired = LeaderElectionRecord(
            holder_identity=self.identity,
            lease_duration_seconds=round(self.lease_duration),
            acquire_time=now,
            renew_time=now,
        )
        try:
            lease = call(ctx, self.cluster.get, LEASES, self.name, self.namespace)
        except NotFound:
            try:
                created = call(ctx, self.cluster.create, LEASES, self._lease_object(desired), self.namespace)
            except Exception as err:  # lost the create race (409), or API trouble
                self._log_failure("creating", err)
                return False
            self._observe(created, desired, changed=True)
            return True
        except Exception as err:  # API trouble or the context ended: not this round
            self._log_failure("retrieving", err)
            return False

        record = LeaderElectionRecord.from_lease(lease)
        with self._lock:
            changed = self._observed is None or record != self._observed
            if changed:
                self._observed, self._observed_raw = record, lease
                self._observed_time = self.clock.monotonic()
            else:
                self._observed_raw = lease
            valid = self._observed_time + record.lease_duration_seconds > self.clock.monotonic()
            if record.holder_identity and valid and record.holder_identity != self.identity:
                return False  # someone else holds a lease that has not expired by our clock
        if record.holder_identity == self.identity:
            desired = LeaderElectionRecord(
                self.identity,
                desired.lease_duration_seconds,
                record.acquire_time,
                now,
                record.lease_transitions,
            )
        else:
            desired = LeaderElectionRecord(
                self.identity, desired.lease_duration_seconds, now, now, record.lease_transitions + 1
            )
        updated_lease = dict(lease)
        updated_lease["spec"] = desired.to_spec()
        try:
            updated = call(ctx, self.cluster.update, LEASES, updated_lease)
        except Exception as err:  # 409: someone wrote first; or the API is unreachable
            self._log_failure("updating", err)
            return False
        self._observe(updated, desired, changed=True)
        return True

    def _log_failure(self, verb: str, err: Exception) -> None:
        """client-go logs these and tries again next period. API errors and timeouts are the
        expected kind; anything else is a bug worth seeing, so it is logged louder."""
        level = logging.INFO if isinstance(err, ApiError | ContextError) else logging.WARNING
        log.log(level, "error %s lease %s/%s: %s", verb, self.namespace, self.name, err,
                exc_info=level == logging.WARNING)

    def _observe(self, lease: Object, record: LeaderElectionRecord, *, changed: bool) -> None:
        with self._lock:
            self._observed, self._observed_raw = record, lease
            if changed:
                self._observed_time = self.clock.monotonic()

    def _report_transition(self) -> None:
        holder = self.leader()
        if holder is None or holder == self._reported_leader:
            return
        self._reported_leader = holder
        self.transitions_seen.append(holder)
        if self._on_new_leader is not None and holder:
            self._on_new_leader(holder)

    def _release(self, ctx: Context) -> None:
        """Hand the lease back at once (holder "" and a 1-second duration), so a successor need
        not wait out the 15 s. Only if we still hold it.

        A 409 here usually means one of our own renewals, abandoned when the context ended, landed
        after all: re-read, and release again if the lease still names us."""
        with self._lock:
            raw, observed = self._observed_raw, self._observed
        if raw is None or observed is None or observed.holder_identity != self.identity:
            return
        # The run context may already be cancelled: give the release its own short budget.
        budget = Context(self.clock, name="release").with_timeout(self.renew_deadline)
        try:
            for _ in range(3):
                current = LeaderElectionRecord.from_lease(raw)
                if current.holder_identity != self.identity:
                    return  # someone else holds it now
                now = self.clock.now()
                released = LeaderElectionRecord("", 1, now, now, current.lease_transitions)
                lease = dict(raw)
                lease["spec"] = released.to_spec()
                try:
                    updated = call(budget, self.cluster.update, LEASES, lease)
                except Conflict:
                    raw = call(budget, self.cluster.get, LEASES, self.name, self.namespace)
                    continue
                self._observe(updated, released, changed=True)
                return
        except Exception as err:
            self._log_failure("releasing", err)
        finally:
            budget.cancel()

    def _lease_object(self, record: LeaderElectionRecord) -> Object:
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record.to_spec(),
        }

    def __repr__(self) -> str:
        return (
            f"LeaderElector({self.identity!r}, lease={self.namespace}/{self.name}, leader={self.leader()!r})"
        )


def describe(lease: Object) -> dict[str, Any]:
    """The lease's spec fields in one flat dict, for printing."""
    spec = dict(lease.get("spec") or {})
    spec["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion")
    return spec
