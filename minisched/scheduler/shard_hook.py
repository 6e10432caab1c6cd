"""What a Scheduler asks when it is one replica among several that share a cluster (Part II §4.3).

The scheduler layer knows nothing of leases, rings or ledgers (minisched.sharding, a layer above,
implements this protocol); it only asks four questions at four places in a pod's life:

- `owns(pod)`: is this pending pod mine to schedule? Asked when the informer queues a pod, when a
  pod is popped (the ring may have moved meanwhile: a pod no longer ours is dropped there, the
  drain step) and before a failed pod is put back.
- `nodes_to_try(fallback)`: the nodes this replica may choose from: first its own partition, and if
  no node fits there, with `fallback=True`, every node (None: no restriction). Nodes whose ledger
  just refused a reservation are left out of both for a moment. The scheduling cycle filters and
  scores over every node, so spreading and affinity still count the whole cluster; only the choice
  is restricted. `fallback()` counts the cycles that went on to the second set.
- `reserve(info, node, allocatable, resource_version=...)` right before POST pods/binding: record
  the pod's requests on the node's ledger, naming the pod's resourceVersion the cycle decided on;
  False means the ledger is full (another replica got there first) and the pod goes back to the
  queue, nothing sent. `release(info, node)` after a bind that failed. With `fence_bindings` the
  binding then carries that resourceVersion as a precondition: a replica that takes the
  reservation away writes to the pod first, and the binding is refused (409).
- `pod_gone(pod, node)`: a bound pod was deleted or finished; its room may be released.

The Scheduler calls them from its loop and its binding threads: implementations are thread-safe.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

from minisched.scheduler.pod_info import PodInfo

Object = dict[str, Any]

__all__ = ["ShardHook"]


class ShardHook(Protocol):
    fence_bindings: bool  # bindings carry the resourceVersion reserve() was given, as a precondition

    def owns(self, pod: Object) -> bool:
        """True if this replica schedules `pod` (a pending pod) under the current ring."""
        ...

    def nodes_to_try(self, fallback: bool) -> Collection[str] | None:
        """The node names a pod may be placed on: the partition (`fallback=False`), then any node
        (`fallback=True`); None: no restriction."""
        ...

    def fallback(self, pod_key: str) -> None:
        """The pod fit nowhere in the partition and the cycle went on over all nodes."""
        ...

    def reserve(self, info: PodInfo, node: str, allocatable: Mapping[str, int], *,
                resource_version: str = "") -> bool:
        """Reserve the pod's requests on `node` before binding, for the pod at `resource_version`
        (as the scheduling cycle saw it); False: no room there (refused)."""
        ...

    def release(self, info: PodInfo, node: str) -> None:
        """Give back a reservation whose bind failed or was never sent."""
        ...

    def pod_gone(self, pod: Object, node: str) -> None:
        """A pod bound to `node` was deleted or finished."""
        ...
