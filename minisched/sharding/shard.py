"""One replica's part of a sharded scheduler: what it gives its Scheduler (a pod filter and two
plugins, see plugins.py), and the loop that keeps it current (Part II §4.3).

    shard = Shard(cluster, identity="sched-a")          # group "minisched", ledger on
    sched = Scheduler(cluster, **shard.scheduler_options())  # pod filter, plugins
    shard.attach(sched); shard.tick()                    # first lease and ring, before any pod
    sched.start(); shard.start()                         # renew / ring / cleanup thread

What each part does:

- Membership (membership.py): every `renew_period` (a third of the lease) the replica renews its own
  Lease `<group>-shard-<identity>` and lists the others. Who is live decides the ring. A joining
  replica owns nothing until its lease was written `join_settle` ago (a renew period and a half:
  every peer's heartbeat has seen it since); one whose renewals stopped for a lease duration owns
  nothing from that moment and rejoins the same way (`synced`, `lease_fresh`).
- Ownership (ring.py): a pending pod belongs to the member with the highest rendezvous score for
  "namespace/name", a member of a PodGroup (the scheduling.x-k8s.io/pod-group label) to the owner
  of its group (`owner_of`): a gang split over replicas would wait at Permit for members no one
  lets through. A pod another replica owns still counts here if it is nominated to a node
  (status.nominatedNodeName, its preemption's): our filters keep its room, as kube's do. Nodes are partitioned among the members (rendezvous with bounded loads,
  `Ring.partition`); a node's partition owner also cleans its ledger (a node gone from the cache,
  in no partition, goes by its rendezvous owner for "node:<name>"). When the ring changes, `tick()` asks the
  scheduler to queue the pods it now owns and to drop from its queue those it no longer owns. That
  is the drain step: a pod already in a scheduling or binding cycle is not interrupted, it finishes
  (and a second replica working on the same pod meanwhile is stopped by the fences below), so a
  hand-over pauses no one; the old owner lets go at its next tick, within a third of a lease.
- Node partitions, after Gödel's node shuffler: a replica chooses among its own nodes first, so two
  replicas rarely place on one node at once; a pod that fits nowhere there may go to any node
  (counted as a fallback) and the capacity ledger settles the rare collision. A node whose ledger
  refused a reservation is avoided for a renew period (our cache does not show yet what filled it).
  The NodePartition plugin (PreFilter) asks `nodes_to_try`.
- The fences. Pods: POST pods/binding answers 409 to the second binding, and to a binding whose
  resourceVersion precondition fails. Nodes (the CapacityFence plugin: Reserve, PreBind,
  Unreserve): `reserve` writes the pod's requests into the node's
  ledger under a resourceVersion precondition before the bind, `release` takes them back when the
  bind fails (unless the pod is on the node after all), `pod_gone` when a bound pod goes, and
  `cleanup()` removes the entries left behind by a replica that died between reserve and bind (the
  pod is gone, finished or bound to another node); a refused reservation first removes such
  entries from that node's ledger. An entry of a pod still pending is kept while its holder is in
  the ring (it may be about to bind), and removed once its holder left the ring or, for our own,
  when no binding of ours is underway. Removing it gives its room away, so the holder must not bind
  afterwards, even one paused between its lease check and its bind: the entry names the pod's
  resourceVersion that the holder decided on and its binding carries as a precondition, and the
  remover first writes to the pod (`_revoke`: an annotation), which bumps that version. If the
  answer shows the pod bound, the binding landed first and the entry stays; otherwise no binding
  carrying the old version can succeed any more, and the holder's gets 409, releases its own entry
  and requeues the pod. (A legitimate write to the pod between decision and bind also makes its
  binding a 409 and a retry: `bind_stale_versions` counts them.) The ledger's sum includes the pods
  our informer shows bound to the node without an entry (bound by kube-scheduler, say), and the
  ledgers of deleted nodes are deleted (`delete_orphans`; on a real cluster also by the garbage
  collector, through their ownerReference to the Node).

- What the fences do not cover. The ledger sums requests (CPU, memory, pods, extended resources)
  and nothing else. Two replicas deciding at once, each before its informer shows the other's pod,
  can still break a constraint that depends on *which* pods are where: two pods asking for one
  host port on one node, required inter-pod anti-affinity (two pods that must not share a zone or
  node placed into it together), topology-spread skew (each replica counts the spread without the
  other's in-flight pod, so maxSkew can be exceeded by one per replica), and a ReadWriteOncePod
  claim used by two pods at once. One kube-scheduler serialises these decisions; separate
  kube-schedulers have the same gaps; here they are narrowed, not closed: node partitions keep
  the node-local ones (host ports, RWOP on one node) to fallbacks, and a PodGroup's members are all
  one replica's. The kubelet refuses a host-port clash at admission; the others stand until the
  pods are moved. Fencing them would need a ledger entry per port, per topology domain and per
  claim, written in the same conditional update as the resources.

`capacity_fence=False` (`minisched run --no-capacity-fence`) skips the ledger (and the CapacityFence
plugin): replicas then share
nodes as separate kube-schedulers do, and over-commit them. `bind_fence=False` keeps the ledger but
binds without the resourceVersion precondition: a holder paused past its lease between its lease
check and its bind then binds into room given away. Both exist to show what the fences prevent.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from minisched.clock import Clock, RealClock, pause_unless_stopped
from minisched.cluster.base import Cluster, Object
from minisched.errors import ApiError, NotFound
from minisched.informer import ResourceEventHandlerFuncs, unwrap_tombstone
from minisched.informer.shared_informer import SharedIndexInformer
from minisched.meta import key_of
from minisched.resources import NODES, PODS
from minisched.scheduler.framework.interface import Handle, Plugin
from minisched.scheduler.framework.registry import PluginFactory, Registry
from minisched.scheduler.plugins import default_registry
from minisched.scheduler.plugins.helpers import node_allocatable
from minisched.scheduler.pod_info import PodInfo
from minisched.scheduler.queue import WILDCARD_EVENT
from minisched.scheduler.scheduler import Scheduler
from minisched.sharding.fence import CapacityLedger, Reservation
from minisched.sharding.membership import Membership
from minisched.sharding.plugins import FENCE, PARTITION, CapacityFence, NodePartition
from minisched.sharding.ring import Ring
from minisched.validation.podgroup import pod_group_of

__all__ = ["DEFAULT_GROUP", "Shard", "ShardStats", "owner_of"]

log = logging.getLogger(__name__)

DEFAULT_GROUP = "minisched"
# A clean-up prune that keeps losing the write race gives up after this many tries: the room is
# freed at the next round, and reservations (which need the ledger now) go first.
CLEANUP_ATTEMPTS = 5


@dataclass(frozen=True)
class ShardStats:
    """A replica's shard counters at one moment (what the metrics export)."""

    identity: str
    group: str
    members: int
    owned_pods: int  # pending pods of our profiles this replica owns
    partition_nodes: int
    scheduled: int  # pods this replica bound
    bind_conflicts: int  # 409s on pods/binding (someone else bound the pod first)
    fence_conflicts: int  # 409s on ledger writes, answered by a re-read
    fence_refusals: int  # reservations refused: the node was full on its ledger
    fallbacks: int  # cycles that left the partition
    not_owned: int  # pods popped after the ring gave them away (dropped)
    ring_changes: int
    pods_taken_over: int  # pending pods queued because the ring gave them to us
    pods_handed_off: int  # queued pods dropped because the ring gave them away
    ledger_pruned: int  # stale ledger entries removed
    renew_failures: int
    ledgers_deleted: int = 0  # ledgers of deleted nodes removed
    bind_stale_versions: int = 0  # of bind_conflicts: the resourceVersion precondition failed
    revocations: int = 0  # pods written to fence off a binding before its reservation was removed
    revoked_bound: int = 0  # ... whose answer showed the pod bound (the entry was kept)


class Shard:
    """One replica: what its Scheduler is given (`scheduler_options`: a pod filter, and the plugins
    of plugins.py, which call back here), and its upkeep."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        identity: str,
        group: str = DEFAULT_GROUP,
        namespace: str = "kube-system",
        lease_duration: float = 15.0,
        clock: Clock | None = None,
        capacity_fence: bool = True,
        bind_fence: bool = True,
        cleanup_period: float | None = None,
        join_settle: float | None = None,
    ) -> None:
        if not group:
            raise ValueError("a shard group needs a name (it prefixes the leases and ledgers)")
        self.cluster = cluster
        self.identity, self.group, self.namespace = identity, group, namespace
        self.clock: Clock = clock or RealClock()
        self.membership = Membership(cluster, identity=identity, namespace=namespace, prefix=f"{group}-shard-",
                                     clock=self.clock, lease_duration=lease_duration)
        self.ledger: CapacityLedger | None = (
            CapacityLedger(cluster, holder=identity, namespace=namespace, prefix=f"{group}-capacity-")
            if capacity_fence else None
        )
        # Bindings carry the resourceVersion their reservation names, and a reservation of a pending
        # pod is removed for another holder only after a write to the pod (`_revoke`). Off
        # (`bind_fence=False`, only to show the gap it closes): a holder paused between its lease
        # check and its bind still binds into room given away meanwhile.
        self.fence_bindings = self.ledger is not None and bind_fence
        self.revocations = 0  # pods written to fence off a binding of a reservation removed as stale
        self.revoked_bound = 0  # ... whose answer showed the pod bound: the entry was kept
        self.cleanup_period = lease_duration if cleanup_period is None else cleanup_period
        # How long a (re)joining replica waits after its lease is written before it adopts a ring
        # and schedules: long enough for every peer's heartbeat to come round and see the lease
        # (one renew period), plus half of one for a heartbeat that runs late on a loaded machine.
        self.join_settle = 1.5 * self.membership.renew_period if join_settle is None else join_settle
        if self.join_settle < 0:
            raise ValueError(f"join_settle must be >= 0 seconds, got {join_settle}")
        self._renewed_at: float | None = None  # monotonic start of the last renewal that succeeded
        self._joined_at: float | None = None  # monotonic end of the renewal that (re)joined the ring
        self.scheduler: Scheduler | None = None
        self._pods: SharedIndexInformer | None = None  # the scheduler's pod informer (attach)
        self._pod_filter: Callable[[Object], bool] | None = None  # the one scheduler_options gave
        self._lock = threading.Lock()
        self._ring = Ring([])
        self._partition: frozenset[str] | None = frozenset()
        self._partition_of: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # (ring members, node names)
        self._gone: collections.deque[tuple[str, str]] = collections.deque()  # (node, uid) to release
        self._requests_of: dict[str, dict[str, int]] = {}  # bound pod UID -> its ledger requests (bound_on)
        self._full: dict[str, float] = {}  # node -> until when to avoid it (its ledger refused us)
        self._avoid_ended = False  # a node left _full since the last heartbeat
        self._next_cleanup = 0.0
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None  # the heartbeat
        self._upkeep_thread: threading.Thread | None = None
        self.fallbacks = 0
        self.fence_refusals = 0  # reservations the ledger refused (the node was full)
        self.ring_changes = 0
        self.pods_taken_over = 0
        self.pods_handed_off = 0
        self.renew_failures = 0
        self.ledgers_deleted = 0  # ledgers of deleted nodes removed by delete_orphans
        # (time on the clock, members) at every ring change: the replica's view of hand-overs
        self.history: list[tuple[float, tuple[str, ...]]] = []

    # -- what the Scheduler is given -----------------------------------------------------------------

    def scheduler_options(self, **options: Any) -> dict[str, Any]:
        """Scheduler keyword arguments that make a Scheduler this replica: `options` (any the
        Scheduler takes) with the ring as its pod filter (after the caller's, if any), and the
        shard's plugins added to its registry (the default one if none) and enabled in every
        profile (`profile_plugins`: profiles swapped in later keep them too)."""
        registry = Registry(options.pop("registry", None) or default_registry())
        factories = self._plugin_factories()
        for name, factory in factories.items():
            registry.register(name, factory)
        options["registry"] = registry
        options["profile_plugins"] = (*options.pop("profile_plugins", ()), *factories)
        caller_filter: Callable[[Object], bool] | None = options.pop("pod_filter", None)
        self._pod_filter = self.owns if caller_filter is None else _both(caller_filter, self.owns)
        options["pod_filter"] = self._pod_filter
        return options

    def _plugin_factories(self) -> dict[str, PluginFactory]:
        def partition(_args: Mapping[str, Any] | None, _handle: Handle | None) -> Plugin:
            return NodePartition(self)

        def fence(_args: Mapping[str, Any] | None, _handle: Handle | None) -> Plugin:
            return CapacityFence(self)

        return {PARTITION: partition, **({FENCE: fence} if self.ledger is not None else {})}

    # -- what the Scheduler and the plugins ask ------------------------------------------------------

    @property
    def ring(self) -> Ring:
        return self._ring

    def owns(self, pod: Object) -> bool:
        ring = self._ring
        if not ring.members or not self.lease_fresh():
            return False
        return owner_of(ring, pod) == self.identity

    def partition(self) -> frozenset[str] | None:
        """The nodes the ring gives this replica (None: alone, every node is ours)."""
        ring, sched = self._ring, self.scheduler
        if len(ring) <= 1 or sched is None:
            return None
        names = sched.cache.node_names()
        key = (ring.members, tuple(names))  # the names, not their count: a node replaced by another
        if key != self._partition_of:
            self._partition = frozenset(ring.partition(names)[self.identity]) if self.identity in ring \
                else frozenset()
            self._partition_of = key
        return self._partition

    def nodes_to_try(self, fallback: bool) -> Collection[str] | None:
        avoid = self._avoided()
        if not fallback:
            part = self.partition()
            if part is None:
                return None if not avoid else self._all_but(avoid)
            return part - avoid if avoid else part
        return self._all_but(avoid) if avoid else None

    def _all_but(self, avoid: Collection[str]) -> frozenset[str]:
        sched = self.scheduler
        names = sched.cache.node_names() if sched is not None else []
        return frozenset(n for n in names if n not in avoid)

    def _avoided(self) -> frozenset[str]:
        """Nodes whose ledger refused us within the last renew period: our cache does not show what
        filled them yet, so the same choice would be refused again."""
        if not self._full:
            return frozenset()
        now = self.clock.monotonic()
        with self._lock:
            for node in [n for n, until in self._full.items() if until <= now]:
                del self._full[node]
                self._avoid_ended = True
            return frozenset(self._full)

    def _retry_after_avoiding(self) -> None:
        """A node avoided after a refusal may be tried again: move the pods parked unschedulable
        meanwhile (no cluster event says that a ledger has room again: its ConfigMap is not watched)."""
        self._avoided()
        with self._lock:
            ended, self._avoid_ended = self._avoid_ended, False
        if ended and self.scheduler is not None:
            self.scheduler.queue.move_all_to_active_or_backoff(WILDCARD_EVENT)

    def fallback(self, pod_key: str) -> None:
        with self._lock:
            self.fallbacks += 1

    def allocatable_of(self, node: str) -> dict[str, int]:
        sched = self.scheduler
        node_obj = sched.cache.node(node) if sched is not None else None
        return node_allocatable(node_obj) if node_obj is not None else {}

    def reserve(self, info: PodInfo, node: str, allocatable: Mapping[str, int], *,
                resource_version: str = "") -> bool:
        if self.ledger is None:
            return True
        requests = _requests(info.requests)
        uid = _uid(info.uid, info.key)
        node_obj = self.scheduler.cache.node(node) if self.scheduler is not None else None
        node_uid = str(((node_obj or {}).get("metadata") or {}).get("uid") or "")
        rv = resource_version if self.fence_bindings else ""
        if self._reserve(node, uid, requests, allocatable, info.key, node_uid, rv):
            return True
        # Refused. Entries of pods deleted or bound elsewhere may hold the room: the node's owner
        # removes them only every cleanup period, and not at all while the ring views disagree.
        if self._prune_stale(node) and self._reserve(node, uid, requests, allocatable, info.key, node_uid, rv):
            return True
        with self._lock:
            self._full[node] = self.clock.monotonic() + self.membership.renew_period
            self.fence_refusals += 1
        return False

    def _reserve(self, node: str, uid: str, requests: dict[str, int], allocatable: Mapping[str, int], key: str,
                 node_uid: str, resource_version: str) -> bool:
        assert self.ledger is not None
        if not self.ledger.reserve(node, uid, requests, allocatable, pod=key, bound=self.bound_on(node),
                                   node_uid=node_uid, resource_version=resource_version):
            return False
        if not self.lease_fresh():
            # Our lease may have lapsed while we reserved (a pause): the peers may have taken the pod
            # and pruned our entries as a dead holder's. Send nothing; the pod is theirs now. (A pause
            # after this check is the bind fence's: the peers revoke before they prune, see _revoke.)
            self.ledger.release(node, uid)
            return False
        return True

    def bound_on(self, node: str) -> list[Reservation]:
        """The pods our informer shows bound to `node` (not finished), as ledger entries of holder
        "bound": the ledger counts them even without an entry of their own (pods bound by
        kube-scheduler, by a replica without the fence, or whose entry was pruned)."""
        informer = self._pods
        if informer is None:
            return []
        out = []
        for pod in informer.store.by_index(NODE_INDEX, node):
            meta = pod.get("metadata") or {}
            uid = str(meta.get("uid") or "")
            if uid and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                requests = self._requests_of.get(uid)
                if requests is None:  # parsed once per pod, not once per reservation on its node
                    requests = self._requests_of[uid] = _requests(PodInfo.from_pod(pod).requests)
                out.append(Reservation(uid, key_of(pod), "bound", requests))
        return out

    def release(self, info: PodInfo, node: str) -> None:
        """The bind failed as the scheduler saw it. Release the room unless the pod is on `node` after
        all: a binding whose answer was lost (a timeout) may have landed, and a 409 may answer a
        binding of ours that already did (a pod retried while our informer lagged: the reserve found
        our own entry and said yes). Releasing then would free room a bound pod uses, the next pod
        gets it, and the node is over-committed. When in doubt (the pod cannot be read) keep it: the
        clean-up removes an entry whose pod went elsewhere."""
        if self.ledger is None:
            return
        uid = _uid(info.uid, info.key)
        namespace, _, name = info.key.partition("/")
        try:
            pod = self.cluster.get(PODS, name, namespace)
        except NotFound:
            pod = None
        except ApiError as err:
            log.warning("%s: not releasing %s on %s: cannot read the pod (%s); the clean-up will",
                        self.identity, info.key, node, err)
            return
        same_pod = pod is not None and (not info.uid or str((pod.get("metadata") or {}).get("uid") or "") == info.uid)
        if same_pod and pod is not None and str((pod.get("spec") or {}).get("nodeName") or "") == node:
            log.info("%s: %s is bound to %s after all: its reservation stays", self.identity, info.key, node)
            return
        self.ledger.release(node, uid)

    def pod_gone(self, pod: Object, node: str) -> None:
        """A pod bound to `node` was deleted or finished: its room may be released."""
        # Called on the informer's thread: no API call here, the shard's loop releases it.
        if self.ledger is not None:
            meta = pod.get("metadata") or {}
            self._requests_of.pop(str(meta.get("uid") or ""), None)
            self._gone.append((node, _uid(str(meta.get("uid") or ""), key_of(pod))))

    # -- upkeep ---------------------------------------------------------------------------------------

    def attach(self, scheduler: Scheduler) -> None:
        """The scheduler whose queue follows the ring (built with `**shard.scheduler_options()`)."""
        ours = all(isinstance(p := fwk.plugins.get(PARTITION), NodePartition) and p.shard is self
                   for fwk in scheduler.frameworks.values())
        if not ours or scheduler.pod_filter is None or scheduler.pod_filter not in (self.owns, self._pod_filter):
            raise ValueError("attach the Shard whose options the Scheduler was built with "
                             "(Scheduler(..., **shard.scheduler_options()))")
        self.scheduler = scheduler
        # the bound pods of a node, for the ledger's view of it (bound_on): an index on the pod
        # informer the scheduler starts (the factory's one pod informer, shared: our own reference
        # to it, rather than the scheduler's private field), and our own handler on it for the
        # bound pods that go (their room is released)
        self._pods = scheduler.factory.informer_for(PODS, indexers={NODE_INDEX: _node_of})
        self._pods.add_event_handler(ResourceEventHandlerFuncs(update=self._on_pod_update, delete=self._on_pod_delete))

    def _on_pod_update(self, old: Object, new: Object) -> None:
        if _bound_live(old) and not _bound_live(new):  # finished
            self.pod_gone(old, str(old["spec"]["nodeName"]))

    def _on_pod_delete(self, obj: Any) -> None:
        pod = unwrap_tombstone(obj)
        if pod is not None and _bound_live(pod):
            self.pod_gone(pod, str(pod["spec"]["nodeName"]))

    def tick(self) -> bool:
        """`heartbeat()`, then release the reservations of pods gone since. True if the ring changed."""
        changed = self.heartbeat()
        self._release_gone()
        return changed

    def lease_fresh(self) -> bool:
        """True while no peer can have seen our lease expire: the last renewal that succeeded
        started less than a lease duration ago (peers time a lease from when they saw it change,
        which is after it was written). A replica paused or cut off past that stops owning pods
        at once, before its heartbeat has run again, and rejoins with a settle (see `synced`)."""
        renewed = self._renewed_at
        return renewed is not None and self.clock.monotonic() - renewed < self.membership.lease_duration

    def synced(self) -> bool:
        """The membership view may be used: our lease is fresh and was written at least
        `join_settle` ago, so every peer's heartbeat has seen it since (they stopped scheduling the
        pods it gives us) and our own list of the leases is a full one."""
        joined = self._joined_at
        return (joined is not None and self.lease_fresh()
                and self.clock.monotonic() - joined >= self.join_settle)

    def heartbeat(self) -> bool:
        """Renew our lease, read the members, and if the ring changed, requeue what moved. No ledger
        write here: nothing that retries under contention. True if the ring changed.

        Until `synced()` the ring stays empty (this replica owns nothing, schedules nothing): a
        replica that adopted the first list it read would see only the peers that started before
        it, own their pods too, and race them for every pod until their views and its agree (the
        3-replica start-up that ran at 0.38x one replica)."""
        started = self.clock.monotonic()
        try:
            self.membership.renew()
        except ApiError as err:
            with self._lock:
                self.renew_failures += 1
            log.warning("%s: renewing lease %s failed: %s", self.identity, self.membership.lease_name, err)
        else:
            ended = self.clock.monotonic()
            with self._lock:
                previous = self._renewed_at
                if previous is None or ended - previous >= self.membership.lease_duration:
                    # first renewal, or the lease may have lapsed in the peers' eyes: (re)join
                    self._joined_at = ended
                    if previous is not None:
                        log.info("%s: lease %s not renewed for %.1f s: rejoining the ring", self.identity,
                                    self.membership.lease_name, ended - previous)
                self._renewed_at = started
        try:
            members = self.membership.member_identities()
        except ApiError as err:
            log.warning("%s: listing the shard leases failed: %s; keeping ring %s", self.identity, err,
                        list(self._ring.members))
            return False
        if not self.synced():
            members = []  # not in the ring yet (settling), or out of it (lapsed): own nothing
        changed = self._set_members(members)
        self._retry_after_avoiding()
        return changed

    def _set_members(self, members: list[str]) -> bool:
        ring = Ring(members)
        if ring.members == self._ring.members:
            return False
        log.info("%s: ring %s -> %s", self.identity, list(self._ring.members), list(ring.members))
        self._ring = ring
        with self._lock:
            self.ring_changes += 1
            self.history.append((self.clock.now(), ring.members))
        if self.scheduler is not None:
            added, dropped = self.scheduler.resync_ownership()
            with self._lock:
                self.pods_taken_over += added
                self.pods_handed_off += dropped
        return True

    def _release_gone(self) -> None:
        ledger = self.ledger
        while ledger is not None:
            try:
                node, uid = self._gone.popleft()
            except IndexError:  # none left (the loop's thread and a caller of tick() may both pop)
                return
            if self._owns_node(node):  # the node's owner releases; the cleanup catches the rest
                try:
                    ledger.prune(node, _of_pod(uid), attempts=CLEANUP_ATTEMPTS)
                except (ApiError, RuntimeError) as err:
                    log.warning("%s: releasing %s on %s failed: %s", self.identity, uid, node, err)

    def _owns_node(self, node: str) -> bool:
        """This replica cleans `node`'s ledger: the node is in its partition (the one the ring gives
        it to place on, so one replica per node while the views agree, and a departed owner's nodes
        pass to their new partition owners with the ring). A node not in our cache (deleted, or
        not seen yet) is in no partition: its rendezvous owner has it."""
        ring = self._ring
        if not ring.members or self.identity not in ring:
            return False
        part = self.partition()
        if part is None:  # alone in the ring: every node
            return True
        if node in part:
            return True
        sched = self.scheduler
        known = sched is not None and sched.cache.node(node) is not None
        return not known and ring.owner_of_node(node) == self.identity

    def _nodes_to_clean(self, nodes: list[str]) -> list[str]:
        """Of `nodes` (in our cache), those whose ledgers this replica cleans: its partition."""
        if not self._ring.members or self.identity not in self._ring:
            return []
        part = self.partition()
        return nodes if part is None else [n for n in nodes if n in part]

    def cleanup(self) -> int:
        """Remove stale entries from the ledgers of the nodes in this replica's partition: entries of pods
        that are gone (checked with a GET, not only the informer, which may lag), finished, or bound
        to another node, and duplicates of a pod bound here. Returns how many were removed."""
        ledger, sched = self.ledger, self.scheduler
        if ledger is None or sched is None or self._pods is None:
            return 0
        by_uid: dict[str, Object] = {}
        for pod in self._pods.store.list():
            uid = (pod.get("metadata") or {}).get("uid")
            if uid:
                by_uid[str(uid)] = pod
        removed = 0
        for node in self._nodes_to_clean(sched.cache.node_names()):
            try:
                entries = ledger.reservations(node)
                stale = self._stale(node, entries, by_uid)
                if stale:
                    removed += ledger.prune(node, self._still_stale(stale), attempts=CLEANUP_ATTEMPTS)
            except (ApiError, RuntimeError, ValueError) as err:
                log.warning("%s: cleaning the ledger of %s failed: %s", self.identity, node, err)
        self.delete_orphans()
        return removed

    def delete_orphans(self) -> int:
        """Delete the ledgers of nodes that are gone, those the ring gives us (a ledger's node key
        has an owner whether or not the node exists). The API server's garbage collector does the
        same through the ledger's ownerReference to its Node; the embedded cluster has none, and a
        ledger created before the node was in our cache has no owner. A GET confirms that the node
        is gone (our informer may not have it yet), and the delete's resourceVersion precondition
        keeps a ledger written since. Returns how many were deleted."""
        ledger, sched = self.ledger, self.scheduler
        if ledger is None or sched is None or not self.synced():
            return 0
        known = set(sched.cache.node_names())
        deleted = 0
        try:
            for node, cm in ledger.ledgers().items():
                if node in known or not self._owns_node(node):
                    continue
                try:
                    self.cluster.get(NODES, node)
                    continue  # there after all (our informer is behind)
                except NotFound:
                    pass
                if ledger.delete_ledger(node, cm):
                    deleted += 1
                    log.info("%s: deleted the capacity ledger of node %s (the node is gone)", self.identity, node)
        except ApiError as err:
            log.warning("%s: deleting the ledgers of deleted nodes failed: %s", self.identity, err)
        with self._lock:
            self.ledgers_deleted += deleted
        return deleted

    def _prune_stale(self, node: str) -> int:
        """Remove the stale entries on `node`'s ledger, whoever owns the node; how many went."""
        ledger, sched = self.ledger, self.scheduler
        if ledger is None or sched is None or self._pods is None:
            return 0
        store = self._pods.store
        try:
            entries = ledger.reservations(node)
            by_uid: dict[str, Object] = {}
            for r in entries.values():
                pod = store.get_by_key(r.pod) if r.pod else None
                if pod is not None and str((pod.get("metadata") or {}).get("uid") or "") == r.uid:
                    by_uid[r.uid] = pod
            stale = self._stale(node, entries, by_uid)
            return ledger.prune(node, self._still_stale(stale), attempts=CLEANUP_ATTEMPTS) if stale else 0
        except (ApiError, RuntimeError, ValueError) as err:
            log.warning("%s: cleaning the ledger of %s failed: %s", self.identity, node, err)
            return 0

    def _stale(self, node: str, entries: Mapping[str, Reservation], by_uid: Mapping[str, Object]) -> set[_Entry]:
        """The entries on `node` (uid, holder, resourceVersion) that hold room no pod will use: the
        pod is gone, finished or bound to another node; a second holder's entry for a pod bound
        here; or the pod is still pending and its holder will not bind it: the holder left the ring
        (its lease expired), or is this replica with no binding of the pod underway (a bind that
        failed or timed out without landing). "Will not bind it" is made true, not guessed: the
        holder may only be paused between its lease check and its bind, so the pod is first written
        (`_revoke`), which refuses every binding that carries the version the entry names; if the
        answer shows the pod bound, the bind landed first and the entry stays."""
        stale: set[_Entry] = set()
        kept_bound: set[str] = set()
        live = set(self._ring.members) if self.synced() else None  # None: our view is not to be trusted
        for key in sorted(entries):
            r = entries[key]
            pod = by_uid.get(r.uid)
            if pod is None:
                pod = self._fetch(r)
                if pod is None:
                    stale.add(_entry(r))  # deleted (or never existed under this UID)
                    continue
            bound_to = str((pod.get("spec") or {}).get("nodeName") or "")
            finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if finished or (bound_to and bound_to != node):
                stale.add(_entry(r))
            elif bound_to == node:
                if r.uid in kept_bound:
                    stale.add(_entry(r))  # a second holder's entry for a pod bound here
                kept_bound.add(r.uid)
            elif live is not None and (r.holder not in live or r.holder == self.identity) \
                    and not self._binding_underway(r):
                # pending as the server says now? With a version to fence, after fencing it
                fresh = self._revoke(node, r) if r.resource_version else self._fetch(r)
                if fresh is None or not (fresh.get("spec") or {}).get("nodeName"):
                    stale.add(_entry(r))
        return stale

    def _revoke(self, node: str, r: Reservation) -> Object | None:
        """Fence off the binding of entry `r` before it is removed: a merge patch of an annotation
        on its pod (naming the holder, the node and the entry's version, so the value is new and the
        write bumps the pod's resourceVersion past the one the holder's binding carries). Either the
        holder's binding was stored before this write, and the answer shows the pod bound (keep the
        entry), or it is stored after it, and the server refuses it (409: the resourceVersion
        precondition). The answer: the pod (None if gone, or another pod by that name)."""
        namespace, _, name = r.pod.partition("/")
        if not namespace or not name:
            return None
        value = f"{r.holder} on {node} at resourceVersion {r.resource_version} (by {self.identity})"
        try:
            pod = self.cluster.patch(PODS, name, {"metadata": {"annotations": {REVOKED_ANNOTATION: value}}}, namespace)
        except NotFound:
            return None
        with self._lock:
            self.revocations += 1
        if str((pod.get("metadata") or {}).get("uid") or "") != r.uid:
            return None
        if (pod.get("spec") or {}).get("nodeName"):
            with self._lock:
                self.revoked_bound += 1
            log.info("%s: %s was bound before its reservation by %s on %s could be revoked: it stays",
                     self.identity, r.pod, r.holder, node)
        return pod

    def _still_stale(self, stale: set[_Entry]) -> Callable[[Reservation], bool]:
        """The prune's predicate, asked under the node's lock: an entry found stale as it was then
        (an entry rewritten since, for a newer version of its pod, was not revoked), unless a binding
        of ours started on it meanwhile (our reservations of that node wait for the lock)."""
        return lambda r: _entry(r) in stale and not self._binding_underway(r)

    def _binding_underway(self, r: Reservation) -> bool:
        """Our own entry of a pod this replica has assumed (a binding in flight, or bound and not yet
        confirmed): it must stay. Other holders' entries: False (their liveness decides)."""
        sched = self.scheduler
        return r.holder == self.identity and sched is not None and bool(r.pod) and sched.cache.is_assumed(r.pod)

    def _fetch(self, r: Reservation) -> Object | None:
        """The pod of a reservation, from the API server (None: gone, or another pod by that name)."""
        namespace, _, name = r.pod.partition("/")
        if not namespace or not name:
            return None
        try:
            pod = self.cluster.get(PODS, name, namespace)
        except NotFound:
            return None
        return pod if str((pod.get("metadata") or {}).get("uid") or "") == r.uid else None

    # -- the loop ---------------------------------------------------------------------------------------

    def start(self) -> None:
        """Renew and read the ring every renew period on one thread; release the room of pods gone
        and run `cleanup()` every cleanup period on another. The heartbeat never waits behind the
        clean-up: its ledger writes retry under the same contention as everyone's reservations, and
        a renewal that slips past the lease drops this replica out of everyone's ring."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._heartbeat_loop, name=f"shard-{self.identity}", daemon=True)
        self._upkeep_thread = threading.Thread(target=self._upkeep_loop, name=f"shard-upkeep-{self.identity}",
                                               daemon=True)
        self._thread.start()
        self._upkeep_thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.heartbeat()
            except Exception:  # the heartbeat must outlive any one failure
                log.exception("%s: shard heartbeat failed", self.identity)
            pause_unless_stopped(self.clock, self._wake, self._stop, self._next_heartbeat_in())

    def _next_heartbeat_in(self) -> float:
        """A renew period; while settling, only until the settle is over (then the ring is read)."""
        period = self.membership.renew_period
        joined = self._joined_at
        if joined is None or self.synced():
            return period
        left = joined + self.join_settle - self.clock.monotonic()
        return min(period, max(0.01, left + 0.001))

    def _upkeep_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._release_gone()
                if self.clock.monotonic() >= self._next_cleanup:
                    self._next_cleanup = self.clock.monotonic() + self.cleanup_period
                    self.cleanup()
            except Exception:
                log.exception("%s: shard upkeep failed", self.identity)
            pause_unless_stopped(self.clock, self._wake, self._stop, self.membership.renew_period)

    def stop(self, timeout: float = 5.0, *, release: bool = True) -> None:
        """Stop the loop and, with `release`, leave the ring at once (others need not wait out the
        lease). Call after the scheduler stopped, so no binding of ours is still in flight."""
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        for thread in (self._thread, self._upkeep_thread):
            if thread is not None:
                thread.join(timeout)
        if release:
            try:
                self.membership.release()
            except ApiError as err:
                log.warning("%s: releasing lease failed: %s; it expires on its own", self.identity, err)

    # -- reading --------------------------------------------------------------------------------------

    def owned_pods(self) -> int:
        sched = self.scheduler
        if sched is None or self._pods is None:
            return 0
        return sum(1 for pod in self._pods.store.list() if _pending_for(sched, pod) and self.owns(pod))

    def stats(self) -> ShardStats:
        sched = self.scheduler
        s = sched.stats if sched is not None else None
        ledger = self.ledger
        part = self.partition()
        with self._lock:
            return ShardStats(
                identity=self.identity, group=self.group, members=len(self._ring),
                owned_pods=self.owned_pods(),
                partition_nodes=len(part) if part is not None else (len(sched.cache.node_names()) if sched else 0),
                scheduled=s.bound if s else 0, bind_conflicts=s.bind_conflicts if s else 0,
                fence_conflicts=ledger.conflicts if ledger else 0, fence_refusals=self.fence_refusals,
                fallbacks=self.fallbacks, not_owned=s.not_owned if s else 0, ring_changes=self.ring_changes,
                pods_taken_over=self.pods_taken_over, pods_handed_off=self.pods_handed_off,
                ledger_pruned=ledger.pruned if ledger else 0, renew_failures=self.renew_failures,
                ledgers_deleted=self.ledgers_deleted,
                bind_stale_versions=s.bind_stale_versions if s else 0,
                revocations=self.revocations, revoked_bound=self.revoked_bound,
            )

    def __repr__(self) -> str:
        return f"Shard({self.identity!r}, group={self.group!r}, ring={list(self._ring.members)})"


def owner_of(ring: Ring, pod: Object) -> str:
    """The replica that schedules `pod` under `ring`: the owner of its PodGroup (the
    scheduling.x-k8s.io/pod-group label) if it has one, so a gang's members are all decided by one
    replica; else the owner of its "namespace/name"."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    group = pod_group_of(pod)
    if group:
        return ring.owner_of_group(namespace, group)
    return ring.owner_of_pod(namespace, str(meta.get("name") or ""))


def _uid(uid: str, key: str) -> str:
    """The ledger key of a pod: its UID; a pod without one (made by hand, never on an API server)
    falls back to its "namespace/name" spelled as a key."""
    return uid or "name-" + key.replace("/", ".")


NODE_INDEX = "minisched.io/shard-node"
# Written on a pending pod by a replica about to remove another holder's reservation for it: the
# write fences off that holder's binding (see Shard._revoke).
REVOKED_ANNOTATION = "minisched.io/reservation-revoked"


def _pending_for(sched: Scheduler, pod: Object) -> bool:
    """Pending (no node, not finished) and for one of `sched`'s profiles, whichever replica owns it."""
    return (not (pod.get("spec") or {}).get("nodeName") and sched.responsible_for(pod)
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def _bound_live(pod: Object) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _both(first: Callable[[Object], bool], second: Callable[[Object], bool]) -> Callable[[Object], bool]:
    def both(pod: Object) -> bool:
        return first(pod) and second(pod)

    return both


def _node_of(pod: Object) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [str(node)] if node else []


def _requests(requests: Mapping[str, int]) -> dict[str, int]:
    """A pod's requests as a ledger entry holds them: nonzero amounts, and one of "pods"."""
    out = {r: int(v) for r, v in requests.items() if v}
    out["pods"] = 1
    return out


def _of_pod(uid: str) -> Callable[[Reservation], bool]:
    return lambda r: r.uid == uid


_Entry = tuple[str, str, str]  # a ledger entry as judged stale: (uid, holder, resourceVersion)


def _entry(r: Reservation) -> _Entry:
    return (r.uid, r.holder, r.resource_version)
