"""§4.4 leader election on a Lease: acquire, renew, release, fail-over, races, and no double binding."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from minisched.clock import VirtualClock, parse_rfc3339
from minisched.cluster import Cluster
from minisched.controllers.leaderelection import LeaderElector
from minisched.deadline import Context, background
from minisched.errors import Conflict, ServiceUnavailable
from minisched.resources import LEASES
from tests.chapters45.helpers import alive_threads, drive, drive_until, eventually

NS = "kube-system"


class Partition:
    """A cluster seen through a link that can be cut: while cut, every call fails with 503."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self.cut = False

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._cluster, name)
        if not callable(target):
            return target

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.cut:
                raise ServiceUnavailable("connection refused (partitioned)")
            return target(*args, **kwargs)

        return guarded


class Candidate:
    """An elector plus a record of what its callbacks heard, on the virtual clock."""

    def __init__(self, cluster: Any, identity: str, clock: VirtualClock, **kw: Any) -> None:
        self.clock = clock
        self.started: list[float] = []
        self.stopped: list[float] = []
        self.new_leaders: list[str] = []
        self.leading_ctx: Context | None = None
        self.elector = LeaderElector(
            cluster, name="minisched", namespace=NS, identity=identity, clock=clock,
            on_started_leading=self._started, on_stopped_leading=lambda: self.stopped.append(clock.now()),
            on_new_leader=self.new_leaders.append, rng=random.Random(identity), **kw,
        )
        self.ctx = background(clock, name=identity).with_cancel()
        self.thread: threading.Thread | None = None

    def _started(self, ctx: Context) -> None:
        self.leading_ctx = ctx
        self.started.append(self.clock.now())

    def start(self) -> Candidate:
        self.thread = self.elector.start(self.ctx)
        return self

    def leading(self) -> bool:
        return bool(self.started) and self.leading_ctx is not None and not self.leading_ctx.done()


def lease(cluster: Cluster) -> dict[str, Any]:
    return cluster.get(LEASES, "minisched", NS)


def test_first_candidate_creates_and_renews_the_lease(embedded_cluster: Cluster, virtual_clock: VirtualClock) -> None:
    a = Candidate(embedded_cluster, "sched-a", virtual_clock).start()
    eventually(lambda: bool(a.started), what="sched-a to lead")
    spec = lease(embedded_cluster)["spec"]
    assert spec["holderIdentity"] == "sched-a" and spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == spec["renewTime"] == "2026-01-01T00:00:00.000000Z"  # MicroTime
    drive(virtual_clock, 6.0)
    spec = lease(embedded_cluster)["spec"]
    assert spec["acquireTime"] == "2026-01-01T00:00:00.000000Z"
    renewed = parse_rfc3339(spec["renewTime"]) - parse_rfc3339(spec["acquireTime"])
    assert 4.0 <= renewed <= 6.0, f"renewed every 2 s, last at +{renewed}"
    assert a.elector.is_leader() and a.elector.leader() == "sched-a" and a.new_leaders == ["sched-a"]
    a.ctx.cancel()
    a.thread.join(5)  # type: ignore[union-attr]
    assert a.stopped and lease(embedded_cluster)["spec"]["holderIdentity"] == "", "released on cancel"


def test_fail_over_when_the_leader_stops(cluster: Cluster, virtual_clock: VirtualClock) -> None:
    a = Candidate(cluster, "sched-a", virtual_clock).start()
    eventually(lambda: a.leading(), what="sched-a to lead")
    b = Candidate(cluster, "sched-b", virtual_clock).start()
    drive(virtual_clock, 5.0, resting=alive_threads(a, b))
    assert not b.started and b.elector.leader() == "sched-a", "b follows while a renews"
    a.ctx.cancel("rolling update")
    a.thread.join(5)  # type: ignore[union-attr]
    took = drive_until(virtual_clock, lambda: bool(b.started), limit=10, what="sched-b to take over",
                       resting=alive_threads(b))
    assert took <= 2.0 * (1 + 1.2) + 0.5, "a released lease is taken on b's next retry, not after 15 s"
    spec = lease(cluster)["spec"]
    assert spec["holderIdentity"] == "sched-b" and spec["leaseTransitions"] == 1
    assert b.new_leaders == ["sched-a", "sched-b"]
    b.ctx.cancel()
    b.thread.join(5)  # type: ignore[union-attr]


def test_fail_over_when_the_leader_loses_the_lease(cluster: Cluster, virtual_clock: VirtualClock) -> None:
    link = Partition(cluster)
    a = Candidate(link, "sched-a", virtual_clock).start()
    eventually(lambda: a.leading(), what="sched-a to lead")
    b = Candidate(cluster, "sched-b", virtual_clock).start()
    drive(virtual_clock, 3.0, resting=alive_threads(a, b))
    cut_at = virtual_clock.now()
    link.cut = True  # a can no longer reach the API server; it cannot release either
    # small virtual steps: on a real API server each of a's failing renewals takes real time, and a
    # thread starved on a loaded machine would see the clock jump past its renew deadline
    drive_until(virtual_clock, lambda: bool(b.started), limit=30, step=0.05, what="sched-b to take over",
                resting=alive_threads(a, b))
    assert a.stopped, "a must have stopped leading"
    a_stop, b_start = a.stopped[0], b.started[0]
    assert a_stop < b_start, "the old leader gives up (renew deadline) before the new one starts (lease expiry)"
    assert a_stop - cut_at <= 10.0 + 2.0 + 0.5, "a stops within renew_deadline of its last good renewal"
    assert b_start - cut_at >= 15.0 - 2.0 * 2.2, "b waits a whole lease duration of unchanged record"
    assert a.leading_ctx is not None and a.leading_ctx.done(), "a's leading context is cancelled"
    assert not a.elector.is_leader() and b.elector.is_leader()
    spec = lease(cluster)["spec"]
    assert spec["holderIdentity"] == "sched-b" and spec["leaseTransitions"] == 1
    assert a.elector.check_health() is None, "a gave up cleanly: it is not stuck believing it leads"
    b.ctx.cancel()
    b.thread.join(5)  # type: ignore[union-attr]


def test_two_candidates_racing_for_a_free_lease_elect_exactly_one(
    cluster: Cluster, virtual_clock: VirtualClock
) -> None:
    candidates = [Candidate(cluster, f"sched-{i}", virtual_clock).start() for i in range(3)]
    eventually(lambda: any(c.started for c in candidates), what="someone to lead")
    drive(virtual_clock, 20.0, resting=alive_threads(*candidates))
    leaders = [c for c in candidates if c.leading()]
    assert len(leaders) == 1
    holder = lease(cluster)["spec"]["holderIdentity"]
    assert leaders[0].elector.identity == holder
    assert all(c.elector.leader() == holder for c in candidates)
    for c in candidates:
        c.ctx.cancel()
        c.thread.join(5)  # type: ignore[union-attr]


def test_bad_timings_are_refused_with_the_reason(embedded_cluster: Cluster) -> None:
    with pytest.raises(ValueError, match="must be greater than renew_deadline"):
        LeaderElector(embedded_cluster, name="x", identity="a", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match=r"1.2 \* retry_period"):
        LeaderElector(embedded_cluster, name="x", identity="a", renew_deadline=4, retry_period=4)
    with pytest.raises(ValueError, match="identity"):
        LeaderElector(embedded_cluster, name="x", identity="")


def test_two_schedulers_never_bind_a_pod_twice(embedded_cluster: Cluster, virtual_clock: VirtualClock) -> None:
    """The old leader is paused past its lease (no fencing!) and keeps binding after b took over:
    the API server's 409 on pods/binding is what keeps each pod on one node."""
    from minisched.objects import make_node, make_pod

    for n in ("n1", "n2"):
        embedded_cluster.create("nodes", make_node(n))
    pods = [f"p{i}" for i in range(12)]
    binds: dict[str, list[str]] = {}
    conflicts: list[str] = []
    lock = threading.Lock()
    stalled = threading.Event()

    def scheduler(identity: str, node: str) -> Any:
        def lead(ctx: Context) -> None:
            for name in pods:
                if ctx.done():
                    return
                pod = embedded_cluster.get("pods", name, "default")
                if pod["spec"].get("nodeName"):
                    continue
                if identity == "sched-a" and name == "p6":
                    # Decided, then paused (GC, SIGSTOP) past its lease; it binds on waking,
                    # without looking at ctx again, as a thread stuck mid-cycle would.
                    stalled.wait(10)
                try:
                    embedded_cluster.bind("default", name, node)
                    with lock:
                        binds.setdefault(name, []).append(identity)
                except Conflict:
                    conflicts.append(f"{identity}:{name}")
        return lead

    for name in pods:
        embedded_cluster.create("pods", make_pod(name))
    link = Partition(embedded_cluster)
    a = Candidate(link, "sched-a", virtual_clock)
    a.elector._on_started = scheduler("sched-a", "n1")  # noqa: SLF001
    a.start()
    eventually(lambda: len(binds) == 6, what="sched-a to bind p0..p5 and stall")
    b = Candidate(embedded_cluster, "sched-b", virtual_clock)
    b.elector._on_started = scheduler("sched-b", "n2")  # noqa: SLF001
    b.start()
    link.cut = True  # a's elector cannot renew (its scheduler thread is stalled anyway)
    drive_until(virtual_clock, lambda: b.elector.is_leader(), limit=30, what="sched-b to lead")
    eventually(lambda: len(binds) == 12, what="sched-b to bind the rest")
    stalled.set()  # a wakes up and tries p6 again: the server says 409
    eventually(lambda: "sched-a:p6" in conflicts, what="sched-a's stale bind to be refused")
    assert all(len(who) == 1 for who in binds.values()), binds
    on_cluster = {p: embedded_cluster.get("pods", p, "default")["spec"]["nodeName"] for p in pods}
    assert on_cluster == {p: ("n1" if binds[p] == ["sched-a"] else "n2") for p in pods}
    b.ctx.cancel()
    a.ctx.cancel()


def test_healthz_adaptor_flags_a_leader_stuck_without_renewing(
    embedded_cluster: Cluster, virtual_clock: VirtualClock
) -> None:
    a = Candidate(embedded_cluster, "sched-a", virtual_clock).start()
    eventually(lambda: a.leading(), what="sched-a to lead")
    frozen = threading.Event()
    renewing = threading.Event()

    def stuck(ctx: Context) -> bool:  # the elector thread freezes mid-renewal (SIGSTOP, a deadlock)
        renewing.set()
        frozen.wait(10)
        return False

    a.elector._try_acquire_or_renew = stuck  # type: ignore[method-assign]  # noqa: SLF001
    drive_until(virtual_clock, renewing.is_set, limit=5, what="the next renewal")
    # Measure from the last renewal the elector recorded: under load its thread may have stamped it
    # a step or two later than the clock's position when the freeze was noticed.
    last_renewal = a.elector._observed_time  # noqa: SLF001
    virtual_clock.set(last_renewal + 15 + 20 - 0.5)
    assert a.elector.check_health() is None, "within lease duration + 20 s tolerance: still healthy"
    virtual_clock.advance(1)
    problem = a.elector.check_health()
    assert problem is not None and "failed election to renew leadership" in problem
    frozen.set()
    a.ctx.cancel()
    a.thread.join(5)  # type: ignore[union-attr]
