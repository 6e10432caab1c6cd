"""Each node's working copy for the dry run (kube's nodeInfoCopy and CycleState clone in
DryRunPreemption), in the three forms minisched has, all answering as kube's
RunFilterPluginsWithNominatedPods would on the copy:

- IncrementalNode: one private one-node table and one CycleState copy per node; a pod taken off
  or put back changes the table by that pod and the PreFilter state through the RemovePod /
  AddPod extensions. kube's form.
- WhatIfNode (a WhatIfPlan per preemptor): no table at all, when every Filter plugin asked is
  pod-blind or offers a one-node what-if (NodeResourcesFit's, in plain Python).
- RefilterNode over a full re-filter per question: minisched's first form, kept as the reference
  the other two are tested against (`WorkingNodes.incremental = False`).

WorkingNodes picks the form for a preemptor and remembers, per profile, which filters are which.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import (
    DeclaresPodReads,
    FilterPlugin,
    Handle,
    OneNodeWhatIfFilter,
    PreFilterExtensions,
    ReadsOtherNodes,
)
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.default_preemption.select_victims import RefilterNode, WorkingNode


class IncrementalNode:
    """kube's SelectVictimsOnNode working copy: one private one-node table and one CycleState copy
    for the whole dry run on a node. A pod taken off or put back changes the table by that pod and
    the PreFilter state through the RemovePod / AddPod extensions (InterPodAffinity's topology
    counts), nothing is rebuilt. `fits` is kube's RunFilterPluginsWithNominatedPods: with the pods
    nominated to the node (of at least the pod's priority) put on for a moment, then without them.
    After the first success, the filters that do not read pods (`pod_blind`) are not asked again:
    with the same node and only pods changing, they would answer the same."""

    __slots__ = ("_handle", "_pod", "_node", "_view", "_state", "_pod_blind", "_blind_skipped")

    def __init__(self, handle: Handle, state: CycleState, pod: PodInfo, table: Any, node_name: str,
                 pod_blind: frozenset[str]) -> None:
        self._handle = handle
        self._pod = pod
        self._node = node_name
        self._view = table.for_node(node_name)
        self._state = state.clone()
        self._pod_blind = pod_blind
        self._blind_skipped = False

    def remove(self, p: PodInfo) -> Status:
        self._view.remove_pod(self._node, p)
        return self._handle.run_pre_filter_extension_remove_pod(self._state, self._pod, p, self._node)

    def add(self, p: PodInfo) -> Status:
        self._view.add_pod(self._node, p)
        return self._handle.run_pre_filter_extension_add_pod(self._state, self._pod, p, self._node)

    def fits(self) -> Status:
        run, view, node = self._handle.run_filter_plugins, self._view, self._node
        nominated = self._state.nominated.get(node)
        if nominated:
            # put on for this question only the nominated pods the node does not hold already
            # (kube's addGENominatedPods on a copy; adding a pod twice counts it once)
            added = [p for p in nominated if not view.has_pod(node, p.key)]
            with_them = self._state.clone()
            add = self._handle.run_pre_filter_extension_add_pod
            try:
                for p in added:
                    view.add_pod(node, p)
                    status = add(with_them, self._pod, p, node)
                    if not status.is_success:
                        return status
                status = run(with_them, self._pod, view)
            finally:
                for p in added:
                    view.remove_pod(node, p)
            if not status.is_success:
                return status
        status = run(self._state, self._pod, view)
        if status.is_success and not self._blind_skipped:
            self._blind_skipped = True
            self._state.skip_filter |= self._pod_blind
        return status


class WhatIfPlan:
    """One preemptor's dry run without one-node tables, usable when every Filter plugin it would
    be asked about is pod-blind or offers a one-node what-if (NodeResourcesFit's, in plain Python).
    The pod-blind filters' verdicts cannot change as pods come and go, so they are asked once, over
    the whole snapshot (each row's verdict is the one-row table's), on the first question that
    needs them; the what-ifs answer for the rest. As kube's RunFilterPlugins, a question's answer
    is the first rejection in profile order."""

    def __init__(self, handle: Handle, state: CycleState, pod: PodInfo, table: Any, blind: frozenset[str],
                 what_if: frozenset[str], extensions: frozenset[str]) -> None:
        active = [p for p in handle.filter_plugins() if p.name not in state.skip_filter]
        self.usable = all(p.name in blind or p.name in what_if for p in active)
        # (only used when `usable`: then every one of them is a OneNodeWhatIfFilter)
        self.what_if_plugins = [(i, cast(OneNodeWhatIfFilter, p)) for i, p in enumerate(active) if p.name not in blind]
        self._blind_index = {p.name: i for i, p in enumerate(active) if p.name in blind}
        # with no PreFilter extension running for this pod, AddPod/RemovePod would do nothing
        self.extensions = any(name not in state.skip_filter for name in extensions)
        self._handle, self._state, self._pod, self._table = handle, state, pod, table
        self._blind: dict[str, Status] | None = None

    def blind_rejection(self, node_name: str) -> tuple[int, Status] | None:
        """(profile position, status) of the first pod-blind filter rejecting the node, if any."""
        if not self._blind_index:
            return None
        if self._blind is None:
            only = self._state.clone()
            only.skip_filter |= {p.name for _, p in self.what_if_plugins}
            self._blind = self._handle.run_filters(only, self._pod, self._table)
        status = self._blind[node_name]
        return None if status.is_success else (self._blind_index[status.plugin], status)


class WhatIfNode:
    """The working copy of a WhatIfPlan: the node's pods as a dict and one what-if per filter that
    reads pods; a pod taken off or put back moves the what-ifs (and the PreFilter state through
    RemovePod / AddPod, when an extension runs). No table is built or changed. `fits` is kube's
    RunFilterPluginsWithNominatedPods, as IncrementalNode's; the pod-blind filters count until
    the node first passed."""

    __slots__ = ("_handle", "_pod", "_node", "_state", "_plan", "_on", "_what_ifs", "_blind_pending")

    def __init__(self, handle: Handle, state: CycleState, pod: PodInfo, table: Any, node_name: str,
                 plan: WhatIfPlan) -> None:
        row = table.row(node_name)
        if row is None:
            raise KeyError(f"node {node_name!r} is not in the snapshot")
        self._handle = handle
        self._pod = pod
        self._node = node_name
        self._state = state.clone() if plan.extensions else state
        self._plan = plan
        self._on = {p.key: p for p in table.pods_on(node_name)}
        self._what_ifs = [(i, p.one_node_what_if(state, pod, table, row)) for i, p in plan.what_if_plugins]
        self._blind_pending = True

    def remove(self, p: PodInfo) -> Status:
        counted = self._on.pop(p.key, None)  # as the table: the pod it counted, none if not there
        if counted is not None:
            for _, w in self._what_ifs:
                w.remove(counted)
        if not self._plan.extensions:
            return Status.success()
        return self._handle.run_pre_filter_extension_remove_pod(self._state, self._pod, p, self._node)

    def add(self, p: PodInfo) -> Status:
        self._put(p)
        if not self._plan.extensions:
            return Status.success()
        return self._handle.run_pre_filter_extension_add_pod(self._state, self._pod, p, self._node)

    def _put(self, p: PodInfo) -> bool:
        if p.key in self._on:
            return False  # as the table: a pod already there counts once
        self._on[p.key] = p
        for _, w in self._what_ifs:
            w.add(p)
        return True

    def _take(self, p: PodInfo) -> None:
        del self._on[p.key]
        for _, w in self._what_ifs:
            w.remove(p)

    def _run(self) -> Status:
        blind = self._plan.blind_rejection(self._node) if self._blind_pending else None
        for i, w in self._what_ifs:
            if blind is not None and blind[0] < i:
                break
            status = w.status()
            if not status.is_success:
                return status
        return Status.success() if blind is None else blind[1]

    def fits(self) -> Status:
        nominated = self._state.nominated.get(self._node)
        if nominated:
            # the nominated pods the node does not hold already, on for this question only
            # (kube's addGENominatedPods on a copy; adding a pod twice counts it once)
            with_them = self._state.clone() if self._plan.extensions else None
            placed: list[PodInfo] = []
            try:
                for p in nominated:
                    if self._put(p):
                        placed.append(p)
                    elif not any(q.key == p.key for q in placed):
                        continue  # on the node already: not added, no AddPod
                    if with_them is not None:
                        status = self._handle.run_pre_filter_extension_add_pod(with_them, self._pod, p, self._node)
                        if not status.is_success:
                            return status
                status = self._run()
            finally:
                for p in placed:
                    self._take(p)
            if not status.is_success:
                return status
        status = self._run()
        if status.is_success:
            self._blind_pending = False
        return status



FilterKinds = tuple[frozenset[str], frozenset[str], frozenset[str]]


def _shape(filters: Sequence[FilterPlugin], pre_filters: Sequence[Any]) -> tuple[int, int, int]:
    """What a cached verdict about the profile's filters was worked out for: the list it read
    (the framework's own) and the lengths (a test may add a filter to it)."""
    return id(filters), len(filters), len(pre_filters)


class WorkingNodes:
    """Makes the nodes' working copies for one plugin's dry runs. `incremental` (default True):
    kube's one working copy per node; False: the full re-filter per question (the reference)."""

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.incremental = True
        # worked out once per profile: filter_kinds, pod_blind_filters
        self._kinds: tuple[tuple[int, int, int], FilterKinds] | None = None
        self._blind: tuple[tuple[int, int, int], frozenset[str]] | None = None

    def for_preemptor(self, state: CycleState, pod: PodInfo, table: Any) -> Callable[[str], WorkingNode]:
        """node name -> that node's fresh working copy, for one preemptor's dry run over `table`."""
        if not self.incremental:
            return lambda node_name: self.refilter_node(state, pod, table, node_name)
        blind = self.pod_blind_filters()
        plan = self.what_if_plan(state, pod, table)
        return lambda node_name: self.working_node(state, pod, table, node_name, blind, plan)

    def working_node(self, state: CycleState, pod: PodInfo, table: Any, node_name: str,
                     pod_blind: frozenset[str] = frozenset(), plan: WhatIfPlan | None = None) -> WorkingNode:
        """The node's working copy for the incremental dry run."""
        if plan is not None and plan.usable:
            return WhatIfNode(self.handle, state, pod, table, node_name, plan)
        return IncrementalNode(self.handle, state, pod, table, node_name, pod_blind)

    def what_if_plan(self, state: CycleState, pod: PodInfo, table: Any) -> WhatIfPlan:
        """A WhatIfPlan for this preemptor (`usable` says whether it can stand in for the tables)."""
        blind, what_if, extensions = self.filter_kinds()
        return WhatIfPlan(self.handle, state, pod, table, blind, what_if, extensions)

    def filter_kinds(self) -> FilterKinds:
        """(the pod-blind filters that judge a row alone, those with a one-node what-if, the
        PreFilter plugins with AddPod/RemovePod extensions), worked out once per profile
        (isinstance against a Protocol is slow to ask per dry run).

        A what-if stands in for a plugin only if PreFilter extensions move nothing it reads; a
        pod-blind filter is asked over the whole table only if a row's verdict is its own
        (`reads_other_nodes` is not set)."""
        filters, pre_filters = self.handle.filter_plugins(), self.handle.pre_filter_plugins()
        shape = _shape(filters, pre_filters)
        cached = self._kinds
        if cached is not None and cached[0] == shape:
            return cached[1]
        with_extensions = {p.name for p in filters if isinstance(p, PreFilterExtensions)}
        blind = frozenset(p.name for p in filters if p.name in self.pod_blind_filters()
                          and not (isinstance(p, ReadsOtherNodes) and p.reads_other_nodes))
        what_if = frozenset(p.name for p in filters if isinstance(p, OneNodeWhatIfFilter)
                            and p.name not in with_extensions)
        extensions = frozenset(p.name for p in pre_filters if isinstance(p, PreFilterExtensions))
        kinds = (blind, what_if, extensions)
        self._kinds = (shape, kinds)
        return kinds

    def pod_blind_filters(self) -> frozenset[str]:
        """Filter plugins whose verdict on a node cannot change when pods come and go there: they
        declare `reads_pods = False` and keep no PreFilter state that AddPod/RemovePod move. Once a
        node passed every filter with its victims off, only the others can answer differently."""
        filters = self.handle.filter_plugins()
        shape = _shape(filters, ())
        cached = self._blind
        if cached is not None and cached[0] == shape:
            return cached[1]
        blind = frozenset(p.name for p in filters
                          if isinstance(p, DeclaresPodReads) and p.reads_pods is False
                          and not isinstance(p, PreFilterExtensions))
        self._blind = (shape, blind)
        return blind

    def refilter_node(self, state: CycleState, pod: PodInfo, table: Any, node_name: str) -> WorkingNode:
        """The dry run as a full re-filter (minisched's first form, kept as the reference the
        incremental path is tested against): each question builds a one-node table without the
        removed pods and a fresh PreFilter state with RemovePod run for each of them."""
        handle = self.handle

        def fits(removed: list[PodInfo]) -> Status:
            # PreFilter state counted over the whole cluster (InterPodAffinity's topology counts)
            # must forget the victims too: kube's SelectVictimsOnNode runs RemovePod on a cloned
            # state, then RunFilterPluginsWithNominatedPods (the pods nominated to this node keep
            # their room in the what-if too)
            s = state.clone()
            for victim in removed:
                status = handle.run_pre_filter_extension_remove_pod(s, pod, victim, node_name)
                if not status.is_success:
                    return status
            return handle.run_filter_plugins_with_nominated_pods(s, pod, table, node_name, removed)

        return RefilterNode(fits)
