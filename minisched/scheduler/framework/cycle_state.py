"""CycleState: what plugins remember between extension points within one scheduling attempt."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minisched.scheduler.snapshot import NodeTable

# The pod's resourceVersion the Bind plugin sends with the Binding as a precondition: the pod as the
# scheduling cycle decided on it. A sharded replica's capacity fence (a PreBind plugin) writes it
# (Part II §4.3: another replica may fence the binding off by writing to the pod); without it the
# binding carries only the pod's UID, as kube-scheduler's does.
BIND_RESOURCE_VERSION = "minisched.io/bind-resource-version"
# The Status a binding cycle failed with, written before Unreserve runs: an Unreserve plugin may need
# to tell a refusal from a lost answer (a Timeout: the binding may have landed after all).
BINDING_STATUS = "minisched.io/binding-status"

# the kube convention for the keys of entries written in PreFilter and PreScore
_SCHEDULING_CYCLE_PREFIXES = ("PreFilter", "PreScore")


class CycleState:
    """A per-attempt dictionary, as kube's framework.CycleState: PreFilter writes, Filter reads.

    Keys are conventionally "<Extension><Plugin>" (e.g. "PreScoreNodeResourcesFit"). `skip_filter`
    and `skip_score` hold the plugins whose PreFilter/PreScore returned Skip this cycle."""

    __slots__ = ("_data", "skip_filter", "skip_score", "record", "nominated", "snapshot")

    def __init__(self, *, record: bool = True) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        self.record = record  # keep the per-node decision record for this attempt
        # node -> pods nominated there by earlier preemptions that this pod must leave room for
        # (priority at least its own; kube's PodNominator as RunFilterPluginsWithNominatedPods asks it)
        self.nominated: dict[str, list[Any]] = {}
        # the node table this attempt is judged on (the framework sets it): a PostFilter or Permit
        # plugin counts on it, not on the handle's latest snapshot, which moves between cycles
        self.snapshot: NodeTable | None = None

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        """The value under `key`; KeyError naming the key when a plugin reads what nobody wrote."""
        try:
            return self._data[key]
        except KeyError:
            raise KeyError(f"cycle state has no {key!r} (did its PreFilter/PreScore run?)") from None

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def drop_scheduling_cycle_entries(self, binding_cycle_plugins: Collection[str]) -> None:
        """Forget the "PreFilter<Plugin>" and "PreScore<Plugin>" entries of every plugin not among
        `binding_cycle_plugins` (those with Reserve, Permit, PreBind, Bind or PostBind), once the
        scheduling cycle is over. A binding waits with its state, up to max_bindings_in_flight of
        them at once, and PodTopologySpread's and InterPodAffinity's entries hold node-length
        arrays (~0.5 MB per pod at 5,000 nodes); nothing after Permit reads them. kube keeps them,
        its versions of those entries being per-domain maps a few KB in size.

        The cycle's node table (`snapshot`) goes too: each cycle's table differs from the last in
        the columns its assumed pod changed (copies of node-length arrays), so bindings in flight
        that kept theirs held hundreds of tables (+68 MiB of peak RSS in a 2,000-node, 4,000-pod
        scheduler_perf drain; a binding-cycle plugin that wants one asks the handle's latest)."""
        self.snapshot = None
        for key in [k for k in self._data if k.startswith(_SCHEDULING_CYCLE_PREFIXES)]:
            plugin = key.removeprefix("PreFilter") if key.startswith("PreFilter") else key.removeprefix("PreScore")
            if plugin not in binding_cycle_plugins:
                del self._data[key]

    def clone(self) -> CycleState:
        """A copy for preemption's what-if runs; values are shared (plugins treat them as immutable)."""
        c = CycleState(record=self.record)
        c._data = dict(self._data)
        c.skip_filter = set(self.skip_filter)
        c.skip_score = set(self.skip_score)
        c.nominated = self.nominated
        c.snapshot = self.snapshot
        return c
