"""A sharded replica's two scheduling plugins (Part II §4.3), registered like any other plugin.

The scheduler knows nothing of rings, partitions or ledgers. A replica is an ordinary Scheduler
given three things by its Shard (`Shard.scheduler_options`): a pod filter (the ring's "is this
pending pod mine?"), and these two plugins, enabled in every profile:

- NodePartition (PreFilter): a PreFilterResult of the replica's own nodes (its partition, less the
  nodes whose ledger just refused it), so two replicas rarely place on one node at once. The
  filters and scores still see every node (spreading and affinity count the whole cluster); only
  the choice is narrowed. It is a first choice, not a limit (a WideningPreFilter): when no node in
  it fits, the scheduler runs the cycle once more over every node (a fallback, as Gödel's
  schedulers reach into other partitions), and the capacity fence settles the rare collision.
- CapacityFence (Reserve, PreBind, Unreserve): Reserve notes what the scheduling cycle decided on
  (the node's allocatable and the pod's resourceVersion: no API call in the scheduling cycle);
  PreBind writes the pod's requests into the node's capacity ledger under a resourceVersion
  precondition and hands the bind plugin that resourceVersion as the binding's precondition (a
  replica that takes the reservation away writes to the pod first, so this binding is then a 409).
  A refusal (another replica filled the node first) is Unschedulable, as any PreBind rejection: no
  binding is sent, the pod goes back to the queue with a FailedScheduling event, and any cluster
  event, or the end of the shard's avoiding that node, moves it again. Unreserve gives the room
  back when the binding cycle fails, unless the bind's answer was lost (a Timeout: it may have
  landed; the shard's clean-up removes the entry once the pod is elsewhere).

What the fence does not cover. The ledger sums requests (CPU, memory, pods, extended resources) and
nothing else. Two replicas deciding at once, each before its informer shows the other's pod, can
still break a constraint that depends on *which* pods are where: two pods asking for one host port
on one node, required inter-pod anti-affinity, topology-spread skew (maxSkew exceeded by up to one
per replica), and a ReadWriteOncePod claim used by two pods at once. The partitions narrow the
node-local ones (host ports, RWOP on one node) to fallbacks; a PodGroup's members are all one
replica's. Fencing them would need a ledger entry per port, per topology domain and per claim,
written in the same conditional update as the resources.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from minisched.errors import Timeout
from minisched.scheduler.framework.cycle_state import BIND_RESOURCE_VERSION, BINDING_STATUS, CycleState
from minisched.scheduler.framework.interface import PreFilterResult
from minisched.scheduler.framework.signature import Fragment
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

__all__ = ["FENCE", "PARTITION", "CapacityFence", "NodePartition", "ShardPlugins"]

log = logging.getLogger(__name__)

PARTITION = "NodePartition"
FENCE = "CapacityFence"

# cycle-state keys: the nodes PreFilter narrowed to (None: all); the wider set a second pass uses
_CHOSEN = "PreFilterNodePartition"
_WIDENED = "PreFilterNodePartitionWidened"
# (node allocatable, pod resourceVersion) as the scheduling cycle decided; the ledger holds our room
_DECIDED = "ReserveCapacityFence"
_RESERVED = "PreBindCapacityFence"


class ShardPlugins(Protocol):
    """What the two plugins ask of their replica (minisched.sharding.Shard implements it; called
    from the scheduling loop and the binding threads, so thread-safe)."""

    fence_bindings: bool  # bindings carry the resourceVersion reserve() was given, as a precondition

    def nodes_to_try(self, fallback: bool) -> Collection[str] | None:
        """The partition (`fallback=False`), then any node (`fallback=True`), less the nodes
        avoided after a refusal; None: no restriction."""
        ...

    def fallback(self, pod_key: str) -> None:
        """The pod fit nowhere in the partition and the cycle went on over more nodes."""
        ...

    def allocatable_of(self, node: str) -> dict[str, int]:
        """The node's allocatable as the scheduler's cache has it ({} if unknown)."""
        ...

    def reserve(self, info: PodInfo, node: str, allocatable: Mapping[str, int], *,
                resource_version: str = "") -> bool:
        """Reserve the pod's requests on `node`'s ledger; False: no room there (refused)."""
        ...

    def release(self, info: PodInfo, node: str) -> None:
        """Give back a reservation whose bind failed or was never sent."""
        ...


class NodePartition:
    """PreFilter: the replica's partition first; widened to every node when nothing there fits."""

    name = PARTITION

    def __init__(self, shard: ShardPlugins) -> None:
        self.shard = shard

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        widened = state.get(_WIDENED)  # (nodes,) on the second pass, from widen()
        names = widened[0] if widened is not None else self.shard.nodes_to_try(False)
        state.write(_CHOSEN, names)
        return (None if names is None else PreFilterResult(frozenset(names))), Status.success()

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[Fragment], Status]:
        """For OpportunisticBatching: the partition is the same for every pod (no fragment), so a
        Deployment's pods still batch. A hint outside the partition as it is now (the ring changed,
        a node is avoided) is not taken: the framework judges a hint within the PreFilterResult."""
        return (), Status.success()

    def widen(self, state: CycleState, pod: PodInfo, wider: CycleState) -> bool:
        first = state.get(_CHOSEN)
        if first is None:  # not narrowed: nothing wider to try
            return False
        names = self.shard.nodes_to_try(True)
        if names is not None and len(names) <= len(first):
            return False
        self.shard.fallback(pod.key)
        wider.write(_WIDENED, (names,))
        return True


class CapacityFence:
    """Reserve/PreBind/Unreserve: the pod's room on the node's capacity ledger around its bind."""

    name = FENCE

    def __init__(self, shard: ShardPlugins) -> None:
        self.shard = shard

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        # in the scheduling cycle, so no API call: what PreBind's ledger write needs, as decided
        version = str((pod.pod.get("metadata") or {}).get("resourceVersion") or "")
        state.write(_DECIDED, (self.shard.allocatable_of(node_name), version))
        return Status.success()

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        allocatable, version = state.read(_DECIDED)
        if not self.shard.reserve(pod, node_name, allocatable, resource_version=version):
            # another replica filled the node first (our cache did not show it yet): no binding sent
            return Status.unschedulable("the node's capacity ledger is full", plugin=self.name)
        state.write(_RESERVED, True)
        if self.shard.fence_bindings and version:
            # the version the reservation names: a replica that revokes it writes to the pod first,
            # and this binding is refused from then on
            state.write(BIND_RESOURCE_VERSION, version)
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        if not state.get(_RESERVED, False):
            return
        state.write(_RESERVED, False)
        failed: Status | None = state.get(BINDING_STATUS)
        if failed is not None and isinstance(failed.error, Timeout):
            # No answer: the binding may still land. The ledger keeps its room (the pod may use it on
            # a retry; the shard's clean-up removes it once the pod is elsewhere).
            return
        try:
            self.shard.release(pod, node_name)
        except Exception:  # the shard's clean-up removes it later (the pod is not bound there)
            log.exception("releasing %s's reservation on %s failed", pod.key, node_name)
