"""Several sharded replicas in one process, on one cluster and one clock, with a replica to pause.

An exhibit, not part of sharding itself (minisched.sharding is what a replica runs): what the
§4.3 notebook and tests/sharding run: each replica is a Scheduler with its Shard, reaching
the cluster through its own `PausableLink`. `pause(name)` makes that replica's writes hang (its
lease renewals, ledger writes and bindings), as a process stopped by SIGSTOP, a long GC pause or a
frozen VM looks from the API server, while its scheduling loop keeps deciding on what it last saw;
`resume(name)` lets every hung write go out, with decisions now stale. Time is the cluster's clock
(a VirtualClock in tests): `step(seconds)` moves it and lets every running replica renew and
re-read the ring, which is how a lease expires without waiting for it. With `threads=True` (the
real clock, e.g. on a real API server) each replica runs its Shard's own renew loop instead, and
time passes by itself.

The invariants are read from the API server: `bound_twice()` (pods whose binding succeeded for two
replicas, which pods/binding's 409 forbids) and `overcommitted()` (nodes whose bound pods request
more than allocatable, which only the capacity ledger prevents).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from minisched.clock import Clock
from minisched.cluster.base import Cluster, Object
from minisched.resources import NODES, PODS, ResourceLike
from minisched.scheduler.plugins.helpers import node_allocatable
from minisched.scheduler.pod_info import PodInfo
from minisched.scheduler.scheduler import Scheduler
from minisched.sharding.shard import DEFAULT_GROUP, Shard

__all__ = ["BindFenceRun", "LiveRun", "PausableLink", "PausedRun", "ShardedSim", "SimReplica", "overcommitted",
           "paused_before_bind_run", "paused_replica_live", "paused_replica_run"]

_WRITES = ("create", "update", "patch", "delete", "bind", "evict")


class PausableLink:
    """A `Cluster` whose writes hang while paused, and that records every binding that succeeded."""

    def __init__(self, cluster: Cluster, clock: Clock | None = None) -> None:
        self.cluster = cluster
        self.clock = clock
        # (clock.monotonic(), namespace/name, accepted) of every binding sent: a timeline of the replica
        self.log: list[tuple[float, str, bool]] = []
        self._running = threading.Event()
        self._running.set()
        self._lock = threading.Lock()
        self.bound: list[tuple[str, str, str]] = []  # (namespace/name, uid, node) of each bind that succeeded
        self.held = 0  # writes that waited out a pause
        self.errors: list[str] = []  # the errors bindings got

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def _gate(self) -> None:
        if not self._running.is_set():
            with self._lock:
                self.held += 1
            self._running.wait()

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None,
             resource_version: str | None = None) -> None:
        self._gate()
        try:
            self.cluster.bind(namespace, name, node_name, uid=uid, resource_version=resource_version)
        except Exception as err:
            with self._lock:
                self.errors.append(f"{type(err).__name__}: {err}")
                self.log.append((self._now(), f"{namespace}/{name}", False))
            raise
        with self._lock:
            self.bound.append((f"{namespace}/{name}", uid or "", node_name))
            self.log.append((self._now(), f"{namespace}/{name}", True))

    def _now(self) -> float:
        return self.clock.monotonic() if self.clock is not None else time.monotonic()

    def __getattr__(self, attr: str) -> Any:
        target = getattr(self.cluster, attr)
        if attr not in _WRITES:
            return target

        def gated(*args: Any, **kwargs: Any) -> Any:
            self._gate()
            return target(*args, **kwargs)

        return gated

    def create(self, resource: ResourceLike, obj: Object, namespace: str | None = None) -> Object:
        self._gate()
        return self.cluster.create(resource, obj, namespace)

    def update(self, resource: ResourceLike, obj: Object, *, subresource: str | None = None) -> Object:
        self._gate()
        return self.cluster.update(resource, obj, subresource=subresource)


@dataclass
class SimReplica:
    name: str
    link: PausableLink
    shard: Shard
    scheduler: Scheduler

    @property
    def paused(self) -> bool:
        return self.link.paused


class ShardedSim:
    """`replicas` sharded schedulers on `cluster`, driven by `clock`."""

    def __init__(
        self,
        cluster: Cluster,
        clock: Clock,
        names: Iterable[str] = ("sched-a", "sched-b", "sched-c"),
        *,
        capacity_fence: bool = True,
        bind_fence: bool = True,
        lease_duration: float = 15.0,
        group: str = DEFAULT_GROUP,
        namespace: str = "kube-system",
        bind_workers: int = 8,
        max_bindings_in_flight: int = 512,
        scheduler_options: dict[str, Any] | None = None,
        threads: bool = False,
    ) -> None:
        self.cluster, self.clock = cluster, clock
        self.threads = threads
        self.replicas: dict[str, SimReplica] = {}
        for name in names:
            link = PausableLink(cluster, clock)
            shard = Shard(link, identity=name, group=group, namespace=namespace, lease_duration=lease_duration,
                          clock=clock, capacity_fence=capacity_fence, bind_fence=bind_fence)
            sched = Scheduler(link, clock=clock, **shard.scheduler_options(
                bind_workers=bind_workers, max_bindings_in_flight=max_bindings_in_flight, **(scheduler_options or {})))
            shard.attach(sched)
            self.replicas[name] = SimReplica(name, link, shard, sched)
        self._started = False

    def __getitem__(self, name: str) -> SimReplica:
        return self.replicas[name]

    def start(self, timeout: float = 60.0) -> None:
        """Every replica writes its lease and starts its informers and loop (owning nothing yet);
        once the join settle has passed (see Shard.synced) each reads the ring and queues its pods.
        On a VirtualClock the clock is moved past the settle; with `threads` it passes by itself."""
        for r in self.replicas.values():
            r.shard.tick()
        for r in self.replicas.values():
            r.scheduler.start()
            if self.threads:
                r.shard.start()
        self._started = True
        if self.threads:
            _wait(lambda: all(r.shard.synced() and r.shard.ring.members for r in self.replicas.values()),
                  timeout, "every replica's ring to settle")
        else:
            self.step(max(r.shard.join_settle for r in self.replicas.values()))

    def running(self) -> list[SimReplica]:
        return [r for r in self.replicas.values() if not r.paused]

    def step(self, seconds: float) -> None:
        """Move the clock, then let every running replica renew, re-read the ring and clean up."""
        if self.threads:
            raise RuntimeError("step() moves a VirtualClock; with threads=True time passes by itself")
        self.clock.advance(seconds)  # type: ignore[attr-defined]
        for r in self.running():
            r.shard.tick()

    def advance(self, seconds: float) -> None:
        """Move the clock by `seconds` in steps of a renew period (a third of the lease), every
        running replica renewing at each: time passes as it does for live replicas."""
        period = min(r.shard.membership.renew_period for r in self.replicas.values())
        left = seconds
        while left > 1e-9:
            self.step(min(period, left))
            left -= period

    def cleanup(self) -> int:
        return sum(r.shard.cleanup() for r in self.running())

    def pause(self, name: str) -> None:
        self.replicas[name].link.pause()

    def resume(self, name: str) -> None:
        self.replicas[name].link.resume()

    def settle(self, timeout: float = 60.0, quiet: float = 0.2, step: float = 1.0) -> None:
        """Until the running replicas have nothing left to try: no pod active or in backoff, no
        binding in flight, for `quiet` real seconds. Moves the clock `step` seconds each round (backoffs
        elapse; leases are renewed as it goes)."""
        deadline = time.monotonic() + timeout
        calm_since: float | None = None
        while True:
            busy = any(_busy(r.scheduler) for r in self.running())
            now = time.monotonic()
            if not busy:
                calm_since = calm_since or now
                if now - calm_since >= quiet:
                    return
            else:
                calm_since = None
            if now > deadline:
                raise TimeoutError(f"replicas still busy after {timeout} s: "
                                   f"{ {r.name: r.scheduler.pending_pods() for r in self.running()} }")
            if not self.threads:
                self.step(step)
            time.sleep(0.02)

    def stop(self) -> None:
        for r in self.replicas.values():
            r.link.resume()  # hung writes go out (or fail) so the threads can end
        for r in self.replicas.values():
            if self._started:
                r.scheduler.stop(5.0)
            r.shard.stop(5.0, release=self.threads)

    def __enter__(self) -> ShardedSim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the invariants, from the API server --------------------------------------------------------------

    def binds(self) -> Counter[str]:
        """Successful bindings per pod (by UID), over every replica."""
        return Counter(uid for r in self.replicas.values() for _, uid, _ in list(r.link.bound))

    def bound_twice(self) -> list[str]:
        return sorted(uid for uid, n in self.binds().items() if n > 1)

    def bound_by(self) -> dict[str, int]:
        return {r.name: len(r.link.bound) for r in self.replicas.values()}

    def overcommitted(self, only: Iterable[str] | None = None) -> dict[str, dict[str, tuple[int, int]]]:
        return overcommitted(self.cluster, only)


def overcommitted(cluster: Cluster, only: Iterable[str] | None = None) -> dict[str, dict[str, tuple[int, int]]]:
    """node -> {resource: (requested by its bound pods, allocatable)} for every node (of `only`, if
    given) over allocatable in some resource, as the API server shows them now."""
    wanted = set(only) if only is not None else None
    nodes = {n["metadata"]["name"]: node_allocatable(n) for n in cluster.list(NODES)["items"]
             if wanted is None or n["metadata"]["name"] in wanted}
    used: dict[str, dict[str, int]] = {name: {} for name in nodes}
    for pod in cluster.list(PODS)["items"]:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node not in used or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        requests = dict(PodInfo.from_pod(pod).requests)
        requests["pods"] = 1
        for resource, amount in requests.items():
            used[node][resource] = used[node].get(resource, 0) + amount
    over: dict[str, dict[str, tuple[int, int]]] = {}
    for node, amounts in used.items():
        bad = {r: (v, nodes[node].get(r, 0)) for r, v in amounts.items() if v > nodes[node].get(r, 0)}
        if bad:
            over[node] = bad
    return over


def _busy(sched: Scheduler) -> bool:
    """A pod waits to be tried (active or backoff), a scheduling cycle runs, or a binding is in flight."""
    pending = sched.pending_pods()
    bindings_idle = sched.wait_for_bindings(timeout=0)  # answers at once: no binding running or not
    # the one private read left: the Scheduler offers no public "a cycle is running" (a popped pod
    # is in none of pending_pods' queues until its cycle ends), and a cycle hung on a paused
    # replica's ledger write must keep settle() waiting
    cycle_running = sched._cycle_pod is not None
    return bool(pending.get("active") or pending.get("backoff") or not bindings_idle or cycle_running)


@dataclass
class PausedRun:
    """What `paused_replica_run` saw (every figure read from the API server or the links)."""

    capacity_fence: bool
    pods: int
    slots: int  # pods the nodes hold by CPU
    bound: int
    bound_twice: list[str]
    overcommitted: dict[str, dict[str, tuple[int, int]]]
    node_cpu: dict[str, tuple[int, int]]  # node -> (millicores requested by bound pods, allocatable)
    owned_by_paused: int  # pods the ring gave the paused replica before it stopped
    taken_over: int  # of those, bound by the others while it was paused
    stale_bound: int  # bindings the paused replica sent after resuming that succeeded
    stale_conflicts: int  # ... answered 409 (the pod was bound meanwhile)
    stale_refused: int  # ... refused by the capacity ledger before any binding was sent
    held_writes: int  # writes the paused replica sent while paused (they waited)
    bound_by: dict[str, int]
    rings: dict[str, tuple[str, ...]]  # each replica's ring at the end
    seconds: float  # wall time of the run
    # on the virtual clock, seconds from the replicas' start: every binding sent (time, replica,
    # accepted), and when the paused replica stopped and resumed
    timeline: list[tuple[float, str, bool]] = field(default_factory=list)
    paused_from: float = 0.0
    # its last renewal was at the start (time 0): from here on the others may drop it from their ring
    lease_expired_at: float = 0.0
    resumed_at: float = 0.0


def paused_replica_run(
    *,
    capacity_fence: bool = True,
    nodes: int = 60,
    node_cpu: int = 32,
    pods: int = 2000,
    lease_duration: float = 15.0,
    paused: str = "sched-c",
    names: tuple[str, ...] = ("sched-a", "sched-b", "sched-c"),
    timeout: float = 120.0,
) -> PausedRun:
    """Three replicas on a fresh embedded cluster and a VirtualClock; `paused` stops (its writes
    hang) before `pods` 1-CPU pods arrive, so it decides its share on an empty cluster but sends
    nothing; the clock moves past its lease, the others take its pods over and fill the nodes;
    then it resumes and its decisions, stale by now, go out. The nodes hold fewer pods than come,
    so they are full when it resumes: without the capacity fence its late bindings over-commit them."""
    from minisched.clock import VirtualClock
    from minisched.cluster.embedded import EmbeddedCluster
    from minisched.objects import make_node, make_pod
    from minisched.sharding.ring import Ring

    began = time.monotonic()
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock=clock)
    for i in range(nodes):
        cluster.create(NODES, make_node(f"node-{i:03d}", cpu=str(node_cpu), memory=f"{node_cpu * 8}Gi", pods="110"))
    sim = ShardedSim(cluster, clock, names, capacity_fence=capacity_fence, lease_duration=lease_duration,
                     max_bindings_in_flight=pods)
    try:
        sim.start()
        t0 = clock.monotonic()
        ring = Ring(names)
        # Every replica is held while the pods arrive, so the paused one decides its whole share
        # before any other binding reaches its cache: its decisions are as stale as they can get
        # (in a real run that depends on who is faster; here it is made certain).
        for name in names:
            sim.pause(name)
        pod_names = [f"pod-{i:05d}" for i in range(pods)]
        for name in pod_names:
            cluster.create(PODS, make_pod(name, cpu="1", memory="1Gi"))
        owned = {n for n in pod_names if ring.owner_of_pod("default", n) == paused}
        _wait(lambda: sim[paused].scheduler.cache.assumed_count() == len(owned), timeout,
              "the paused replica's decisions")
        for name in names:
            if name != paused:
                sim.resume(name)
        sim.settle(timeout=timeout, step=lease_duration / 6)  # the others bind their own pods
        sim.advance(lease_duration + 1)  # the paused replica's lease expires: the others take its pods
        sim.settle(timeout=timeout, step=lease_duration / 6)
        before = len(sim[paused].link.bound)
        bound_meanwhile = {key.split("/", 1)[1] for r in sim.running() for key, _, _ in r.link.bound}
        taken = len(owned & bound_meanwhile)
        stats0 = sim[paused].scheduler.stats
        conflicts0, refusals0 = stats0.bind_conflicts, sim[paused].shard.fence_refusals
        resumed_at = clock.monotonic() - t0
        sim.resume(paused)
        # it renews (its lease had lapsed: it rejoins, owning nothing until its settle is over);
        # the others see it again
        sim.advance(sim[paused].shard.membership.renew_period + sim[paused].shard.join_settle)
        sim.settle(timeout=timeout, step=lease_duration / 6)
        stats = sim[paused].scheduler.stats
        held = sim[paused].link.held
        cpu: dict[str, tuple[int, int]] = {}
        alloc = {n["metadata"]["name"]: node_allocatable(n)["cpu"] for n in cluster.list(NODES)["items"]}
        used = dict.fromkeys(alloc, 0)
        bound = 0
        for pod in cluster.list(PODS)["items"]:
            node = pod["spec"].get("nodeName")
            if node:
                bound += 1
                used[node] += PodInfo.from_pod(pod).requests.get("cpu", 0)
        for node, total in alloc.items():
            cpu[node] = (used[node], total)
        return PausedRun(
            capacity_fence=capacity_fence, pods=pods, slots=nodes * node_cpu, bound=bound,
            bound_twice=sim.bound_twice(), overcommitted=sim.overcommitted(), node_cpu=cpu,
            owned_by_paused=len(owned), taken_over=taken,
            stale_bound=len(sim[paused].link.bound) - before,
            stale_conflicts=stats.bind_conflicts - conflicts0, stale_refused=sim[paused].shard.fence_refusals - refusals0,
            held_writes=held, bound_by=sim.bound_by(),
            rings={r.name: r.shard.ring.members for r in sim.replicas.values()},
            seconds=time.monotonic() - began,
            timeline=sorted((t - t0, r.name, ok) for r in sim.replicas.values() for t, _, ok in list(r.link.log)),
            paused_from=0.0, lease_expired_at=lease_duration, resumed_at=resumed_at,
        )
    finally:
        sim.stop()
        cluster.close()


@dataclass
class BindFenceRun:
    """What `paused_before_bind_run` saw."""

    bind_fence: bool
    holder: str  # the replica paused between its lease check and its bind
    peer: str
    filled_by_peer: str  # the node the peer's pod q was bound to while the holder was paused
    holder_answer: str  # what the holder's late binding of p got: "bound", or the API error
    p_node: str  # where p ended ("" if pending)
    p_binds: int  # successful bindings of p, over both replicas
    overcommitted: dict[str, dict[str, tuple[int, int]]]
    revocations: int  # pods the peer wrote before removing their reservations
    bind_stale_versions: int  # the holder's 409s on the resourceVersion precondition
    pruned: int  # ledger entries the peer removed


def paused_before_bind_run(
    cluster: Cluster | None = None,
    clock: Clock | None = None,
    *,
    bind_fence: bool = True,
    namespace: str = "default",
    scheduler_name: str = "minisched",
    group: str = "bind-fence",
    lease_namespace: str = "kube-system",
    lease_duration: float = 15.0,
    names: tuple[str, str] = ("sched-a", "sched-b"),
    timeout: float = 60.0,
    node_labels: dict[str, str] | None = None,
    add_node: Callable[[Object], Any] | None = None,
) -> BindFenceRun:
    """The gap the lease check after `reserve` leaves: the holder reserves n1 for pod p, checks its
    lease, and pauses before its bind; its lease lapses, the peer takes p over, removes the
    holder's reservation as a dead holder's and fills n1 with its own pod q (it schedules q first:
    higher priority); then the holder resumes and its binding of p goes out. Without the bind
    fence it lands: n1 holds p and q, 6 CPUs on 4. With it the peer wrote to p before removing the
    reservation and the binding, which carries p's old resourceVersion, gets 409; p is scheduled
    again (onto node n2, added then) and ends bound once.

    On a fresh embedded cluster and VirtualClock by default; given a `cluster` (a real API server)
    and a VirtualClock, the same steps on it (nodes `<group>-n1/-n2`, pods `<group>-p/-q`, all
    deleted at the end; the pods are `scheduler_name`'s, which no other scheduler serves). The
    peer's scheduling loop is driven by hand (one cycle at a time), the holder's runs by itself.
    `node_labels` label its nodes, become its pods' nodeSelector and scope its replicas' node
    informers (a chapter's own nodes only). `add_node` creates a node (default: a plain create);
    on kind give one that returns once the node is Ready and untainted (the workbook's
    `join_node_when_ready`): a node re-created under a name kind's node lifecycle controller still
    remembers starts tainted not-ready, and (with SchedulerPopFromBackoffQ off) on the VirtualClock
    the pod it rejects would sit in backoff for good."""
    from minisched.clock import VirtualClock
    from minisched.objects import make_node, make_pod, make_priority_class
    from minisched.resources import PRIORITY_CLASSES
    from minisched.sharding.ring import Ring

    own_cluster = cluster is None
    if cluster is None:
        from minisched.cluster.embedded import EmbeddedCluster

        clock = clock or VirtualClock()
        cluster = EmbeddedCluster(clock=clock)
    if not isinstance(clock, VirtualClock):
        raise ValueError("paused_before_bind_run moves time by hand: give it a VirtualClock")
    peer_name, holder_name = names
    ring = Ring(names)
    # p for the holder, q for the peer, by the ring of both
    p = next(f"{group}-p{i}" for i in range(1000) if ring.owner_of_pod(namespace, f"{group}-p{i}") == holder_name)
    q = next(f"{group}-q{i}" for i in range(1000) if ring.owner_of_pod(namespace, f"{group}-q{i}") == peer_name)
    n1, n2, high = f"{group}-n1", f"{group}-n2", f"{group}-high"
    create_node = add_node or (lambda node: cluster.create(NODES, node))
    create_node(make_node(n1, cpu="4", memory="16Gi", labels=node_labels))
    cluster.create(PRIORITY_CLASSES, make_priority_class(high, 1000))
    sim = ShardedSim(cluster, clock, names, bind_fence=bind_fence, lease_duration=lease_duration, group=group,
                     namespace=lease_namespace, scheduler_options=_scoped(scheduler_name, node_labels))
    holder, peer = sim[holder_name], sim[peer_name]
    try:
        paused = threading.Event()
        reserve = holder.shard.reserve

        def pause_after_reserving(info: PodInfo, node: str, allocatable: Any, *, resource_version: str = "") -> bool:
            reserved = reserve(info, node, allocatable, resource_version=resource_version)
            if reserved and info.name == p and not paused.is_set():  # lease checked: stop right before the bind
                holder.link.pause()
                paused.set()
            return reserved

        holder.shard.reserve = pause_after_reserving  # type: ignore[method-assign]
        for r in (holder, peer):
            r.shard.tick()
        holder.scheduler.start()
        peer.scheduler.start(loop=False)
        sim._started = True
        sim.step(max(r.shard.join_settle for r in (holder, peer)))
        cluster.create(PODS, make_pod(p, namespace=namespace, cpu="3", memory="1Gi", scheduler_name=scheduler_name,
                                      node_selector=node_labels), namespace)
        _wait(lambda: paused.is_set() and holder.link.held >= 1, timeout, "the holder paused at its bind")
        cluster.create(PODS, make_pod(q, namespace=namespace, cpu="3", memory="1Gi", priority_class_name=high,
                                      scheduler_name=scheduler_name, node_selector=node_labels), namespace)
        _wait(lambda: peer.scheduler.cache.pod_node(f"{namespace}/{q}") is None
              and q in {k.split("/", 1)[1] for k in _queued(peer.scheduler)}, timeout, "q in the peer's queue")
        # the holder's lease lapses (timed from when the peer last saw it change): the peer's ring
        # drops it, and p is the peer's
        sim.advance(lease_duration + peer.shard.membership.renew_period + 1)
        if holder_name in peer.shard.ring:
            raise RuntimeError(f"the peer's ring still has the paused holder: {peer.shard.ring}")
        _wait(lambda: {p, q} <= {k.split("/", 1)[1] for k in _queued(peer.scheduler)}, timeout,
              "p taken over by the peer")
        # q first (higher priority): its reservation is refused (the holder's entry holds n1), the
        # holder is out of the ring, so the peer removes that entry and reserves again
        peer.scheduler.schedule_one(timeout)
        peer.scheduler.wait_for_bindings(timeout)
        filled = str(cluster.get(PODS, q, namespace)["spec"].get("nodeName") or "")
        answer = "bound"
        failures_before = holder.scheduler.stats.bind_conflicts + holder.scheduler.stats.bind_errors
        holder.link.resume()  # the paused binding of p goes out now
        _wait(lambda: len(holder.link.bound) > 0 or holder.scheduler.stats.bind_conflicts
              + holder.scheduler.stats.bind_errors > failures_before, timeout, "the holder's late binding")
        holder.scheduler.wait_for_bindings(timeout)
        if not holder.link.bound:
            answer = holder.link.errors[-1] if holder.link.errors else "failed"
        # room for p elsewhere; time passes: the holder rejoins, the ring gives p back to it
        create_node(make_node(n2, cpu="4", memory="16Gi", labels=node_labels))
        sim.advance(holder.shard.membership.renew_period + holder.shard.join_settle + 1)
        deadline = time.monotonic() + timeout
        while not cluster.get(PODS, p, namespace)["spec"].get("nodeName") and time.monotonic() < deadline:
            sim.step(1.0)  # backoffs elapse
            time.sleep(0.02)
        for r in (holder, peer):
            r.scheduler.wait_for_bindings(timeout)
        p_uid = str(cluster.get(PODS, p, namespace)["metadata"]["uid"])
        return BindFenceRun(
            bind_fence=bind_fence, holder=holder_name, peer=peer_name, filled_by_peer=filled, holder_answer=answer,
            p_node=str(cluster.get(PODS, p, namespace)["spec"].get("nodeName") or ""),
            p_binds=sim.binds()[p_uid], overcommitted=sim.overcommitted([n1, n2]),
            revocations=peer.shard.revocations, bind_stale_versions=holder.scheduler.stats.bind_stale_versions,
            pruned=peer.shard.ledger.pruned if peer.shard.ledger is not None else 0,
        )
    finally:
        sim.stop()
        if own_cluster:
            cluster.close()
        else:
            _clean_up(cluster, namespace, [p, q], [n1, n2], group, lease_namespace)
            with contextlib.suppress(Exception):
                cluster.delete(PRIORITY_CLASSES, high)


@dataclass
class ShareRun:
    """What `work_share_run` saw: how the replicas split one backlog."""

    replicas: tuple[str, ...]
    pods: int
    bound: int
    owned: dict[str, int]  # pods the ring gives each replica
    bound_by: dict[str, int]  # bindings each replica sent that succeeded
    cycles: dict[str, int]  # scheduling cycles each replica ran
    in_partition: dict[str, int]  # of its bindings, those on a node of its own partition
    ledger_conflicts: int  # ledger writes answered 409 (two replicas on one node), over all replicas
    bound_twice: list[str]
    overcommitted: dict[str, dict[str, tuple[int, int]]]
    seconds: float  # wall time of the drain, from the pods' creation to the last binding


def work_share_run(
    replicas: int = 3,
    *,
    nodes: int = 9,
    node_cpu: int = 32,
    pods: int = 240,
    timeout: float = 120.0,
) -> ShareRun:
    """`replicas` sharded schedulers (sched-a, sched-b, ...) drain a backlog of `pods` 1-CPU pods on
    `nodes` nodes of a fresh embedded cluster and VirtualClock, nobody paused: who owned, scheduled
    and bound what, and whether they stayed in their partitions."""
    from minisched.clock import VirtualClock
    from minisched.cluster.embedded import EmbeddedCluster
    from minisched.objects import make_node, make_pod
    from minisched.sharding.ring import Ring

    if not 1 <= replicas <= 26:
        raise ValueError(f"replicas must be 1 to 26 (named sched-a to sched-z), got {replicas}")
    if pods > nodes * node_cpu:
        raise ValueError(f"{pods} 1-CPU pods do not fit {nodes} nodes of {node_cpu} CPUs: the run measures a drain")
    names = tuple(f"sched-{chr(ord('a') + i)}" for i in range(replicas))
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock=clock)
    node_names = [f"node-{i:03d}" for i in range(nodes)]
    for name in node_names:
        cluster.create(NODES, make_node(name, cpu=str(node_cpu), memory=f"{node_cpu * 8}Gi", pods="110"))
    sim = ShardedSim(cluster, clock, names, max_bindings_in_flight=pods)
    try:
        sim.start()
        ring = Ring(names)
        partition = ring.partition(node_names)
        pod_names = [f"pod-{i:05d}" for i in range(pods)]
        began = time.monotonic()
        for name in pod_names:
            cluster.create(PODS, make_pod(name, cpu="1", memory="1Gi"))
        _wait(lambda: _bound(cluster, "default", pod_names) == pods, timeout, "every pod bound")
        seconds = time.monotonic() - began
        sim.settle(timeout=timeout)
        owners = [ring.owner_of_pod("default", n) for n in pod_names]
        return ShareRun(
            replicas=names, pods=pods, bound=_bound(cluster, "default", pod_names),
            owned={n: owners.count(n) for n in names}, bound_by=sim.bound_by(),
            cycles={r.name: len(r.scheduler.stats.cycle_seconds) for r in sim.replicas.values()},
            in_partition={r.name: sum(node in partition[r.name] for _, _, node in list(r.link.bound))
                          for r in sim.replicas.values()},
            ledger_conflicts=sum(r.shard.ledger.conflicts for r in sim.replicas.values() if r.shard.ledger is not None),
            bound_twice=sim.bound_twice(), overcommitted=sim.overcommitted(), seconds=seconds,
        )
    finally:
        sim.stop()
        cluster.close()


def _queued(sched: Scheduler) -> set[str]:
    """The keys of the pods in `sched`'s queue (active, backoff or unschedulable)."""
    return {qpi.key for qpi in sched.queue.pods()}


@dataclass
class LiveRun:
    """What `paused_replica_live` saw."""

    pods: int
    bound: int
    bound_twice: list[str]
    overcommitted: dict[str, dict[str, tuple[int, int]]]
    owned_by_paused: int
    taken_over: int
    stale_bound: int
    held_writes: int
    seconds_to_take_over: float  # from the pause until the others' ring dropped the paused replica
    rings: dict[str, tuple[str, ...]]


def paused_replica_live(
    cluster: Cluster,
    *,
    namespace: str = "default",
    scheduler_name: str = "minisched",
    group: str = "shard-demo",
    lease_namespace: str = "default",
    lease_duration: float = 3.0,
    nodes: int = 12,
    node_cpu: int = 8,
    pods: int = 90,
    names: tuple[str, ...] = ("sched-a", "sched-b", "sched-c"),
    paused: str = "sched-c",
    timeout: float = 120.0,
    node_labels: dict[str, str] | None = None,
    add_node: Callable[[Object], Any] | None = None,
) -> LiveRun:
    """The paused-replica run on any cluster (a real API server too), on the real clock: each
    replica's Shard renews its lease on its own thread, so the paused one's lease really expires.
    Creates its nodes (`<group>-node-NN`, labelled `node_labels`, which its pods select and its
    replicas' node informers are scoped to; `add_node` as in `paused_before_bind_run`) and pods,
    and deletes them, the leases and the ledgers at the end."""
    from minisched.clock import RealClock
    from minisched.objects import make_node, make_pod
    from minisched.sharding.ring import Ring

    clock = RealClock()
    node_names = [f"{group}-node-{i:02d}" for i in range(nodes)]
    pod_names = [f"{group}-pod-{i:04d}" for i in range(pods)]
    create_node = add_node or (lambda node: cluster.create(NODES, node))
    for name in node_names:
        create_node(make_node(name, cpu=str(node_cpu), memory=f"{node_cpu * 8}Gi", labels=node_labels))
    sim = ShardedSim(cluster, clock, names, lease_duration=lease_duration, group=group,
                     namespace=lease_namespace, threads=True,
                     scheduler_options=_scoped(scheduler_name, node_labels))
    try:
        sim.start()
        _wait(lambda: all(set(node_names) <= set(r.scheduler.cache.node_names()) for r in sim.replicas.values()),
              timeout, "the nodes in every replica's cache")
        ring = Ring(names)
        owned = {n for n in pod_names if ring.owner_of_pod(namespace, n) == paused}
        sim.pause(paused)
        paused_at = time.monotonic()
        for name in pod_names:
            cluster.create(PODS, make_pod(name, namespace=namespace, cpu="1", memory="1Gi",
                                          scheduler_name=scheduler_name, node_selector=node_labels), namespace)
        others = [r for r in sim.replicas.values() if r.name != paused]
        _wait(lambda: all(paused not in r.shard.ring for r in others), timeout, "the paused replica's lease to expire")
        took = time.monotonic() - paused_at
        _wait(lambda: _bound(cluster, namespace, pod_names) == len(pod_names), timeout, "every pod bound")
        before = len(sim[paused].link.bound)
        sim.resume(paused)
        _wait(lambda: all(paused in r.shard.ring for r in sim.replicas.values()), timeout,
              "the resumed replica back in every ring (its own after its settle)")
        sim.settle(timeout=timeout)
        bound_meanwhile = {key.split("/", 1)[1] for r in others for key, _, _ in r.link.bound}
        return LiveRun(
            pods=pods, bound=_bound(cluster, namespace, pod_names), bound_twice=sim.bound_twice(),
            overcommitted=sim.overcommitted(node_names), owned_by_paused=len(owned),
            taken_over=len(owned & bound_meanwhile), stale_bound=len(sim[paused].link.bound) - before,
            held_writes=sim[paused].link.held, seconds_to_take_over=took,
            rings={r.name: r.shard.ring.members for r in sim.replicas.values()},
        )
    finally:
        sim.stop()
        _clean_up(cluster, namespace, pod_names, node_names, group, lease_namespace)


def _bound(cluster: Cluster, namespace: str, names: list[str]) -> int:
    wanted = set(names)
    return sum(1 for p in cluster.list(PODS, namespace)["items"]
               if p["metadata"]["name"] in wanted and p["spec"].get("nodeName"))


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout} s for {what}")
        time.sleep(0.05)


def _scoped(scheduler_name: str, node_labels: dict[str, str] | None) -> dict[str, Any]:
    """Scheduler options for the replicas of a run: one profile for `scheduler_name`, and with
    `node_labels` a node selector, so the replicas see (partition, reserve on, count) only the run's
    own nodes, not the cluster's others (kind's workers)."""
    from minisched.scheduler.framework.profile import default_profile

    options: dict[str, Any] = {"profiles": [default_profile(scheduler_name)]}
    if node_labels:
        options["node_selector"] = ",".join(f"{k}={v}" for k, v in sorted(node_labels.items()))
    return options


def _clean_up(cluster: Cluster, namespace: str, pods: list[str], nodes: list[str], group: str,
              lease_namespace: str) -> None:
    from minisched.errors import NotFound
    from minisched.resources import CONFIG_MAPS, LEASES

    for name in pods:
        with contextlib.suppress(NotFound):
            cluster.delete(PODS, name, namespace, grace_period_seconds=0)
    for name in nodes:
        with contextlib.suppress(NotFound):
            cluster.delete(NODES, name)
    for resource, prefix in ((LEASES, f"{group}-shard-"), (CONFIG_MAPS, f"{group}-capacity-")):
        for obj in cluster.list(resource, lease_namespace)["items"]:
            if obj["metadata"]["name"].startswith(prefix):
                with contextlib.suppress(NotFound):
                    cluster.delete(resource, obj["metadata"]["name"], lease_namespace)
