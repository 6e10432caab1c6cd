"""DefaultPreemption: when no node fits, make room by evicting lower-priority pods.

kube-scheduler's plugins/defaultpreemption and framework/preemption (preemption.go), step by step:

1. Eligibility. A pod with preemptionPolicy Never does not preempt. A pod already nominated to a
   node where lower-priority pods are still terminating waits for them rather than preempting again.
2. Candidates. Only nodes that failed Filter with Unschedulable (not UnschedulableAndUnresolvable:
   evicting pods cannot fix a taint or an affinity miss). On each, from a random offset, until
   max(10% of nodes, 100) candidates are found: take every pod of lower priority off the node; if the
   pod still does not fit, the node is no candidate. Otherwise put the victims back one at a time
   in order of importance (higher priority, then earlier start), those whose eviction would violate
   a PodDisruptionBudget first, and keep back each one whose return still lets the pod fit. The
   ones that cannot come back are the victims: a minimal set, not the smallest possible one.
3. Choice, by kube's tie-breakers: fewest PDB violations, then the lowest priority among the
   highest-priority victims, the lowest sum of victim priorities, the fewest victims, the latest
   start time of the highest-priority victims, then the first.
4. Action. Each victim gets condition DisruptionTarget (reason PreemptionByScheduler) and is deleted
   (or evicted through the Eviction API); lower-priority pods nominated to the same node lose
   their nomination. The preemptor is nominated to the node (status.nominatedNodeName) and waits in
   the queue; when the victims are gone it is tried again, nominated node first. As in kube
   since 1.33 (SchedulerAsyncPreemption), those API calls run on worker threads, not in the
   scheduling cycle (the victims but the last in parallel, then the last), and the preemptor is
   held in the queue until its last victim's deletion has started (asyncPreemption: false makes
   them in the cycle). The condition goes out as a strategic merge patch computed from the
   cached copy, as kube's PatchPodStatus: no GET of the victim.

PodDisruptionBudgets come from the scheduler's PDB informer (kube's pdbLister), never from a LIST on
the scheduling loop's path. Until that informer has synced, or when it cannot be read, preemption
fails with an error status (the pod backs off and tries again): "no PDBs known" never silently
turns into "there are no PDBs".

`select_victims_on_node` and `pick_one_node` are plain functions over PodInfos so that a chapter
can call them on their own.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from minisched.clock import rfc3339
from minisched.errors import ApiError, NotFound
from minisched.resources import POD_DISRUPTION_BUDGETS, PODS
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import OneNodeWhatIfFilter, PreFilterExtensions
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.selectors import from_label_selector_json

Object = dict[str, Any]

log = logging.getLogger(__name__)

NAME = "DefaultPreemption"

MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


# A pod that never started counts as starting now (kube's GetPodStartTime), i.e. the latest.
_NOT_STARTED = float("inf")


class Fits(Protocol):
    """Would `pod` pass every Filter plugin on the single node of `table`?"""

    def __call__(self, state: CycleState, pod: PodInfo, table: Any) -> Status: ...


@dataclass
class Candidate:
    node_name: str
    victims: list[PodInfo] = field(default_factory=list)  # most important first
    num_pdb_violations: int = 0


@dataclass
class Pdb:
    """What preemption needs of a PodDisruptionBudget."""

    namespace: str
    name: str
    selector: Any
    disruptions_allowed: int
    disrupted_pods: frozenset[str]

    @classmethod
    def from_object(cls, pdb: Object) -> Pdb:
        meta, spec, status = pdb.get("metadata") or {}, pdb.get("spec") or {}, pdb.get("status") or {}
        raw_selector = spec.get("selector")
        # kube: a nil or empty PDB selector matches no pod here
        selector = from_label_selector_json(raw_selector) if raw_selector else None
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            selector=selector if selector is not None and not selector.empty() else None,
            disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
            disrupted_pods=frozenset((status.get("disruptedPods") or {}).keys()),
        )

    def matches(self, pod: PodInfo) -> bool:
        if self.selector is None or pod.namespace != self.namespace:
            return False
        return bool(self.selector.matches((pod.pod.get("metadata") or {}).get("labels") or {}))


def more_important(a: PodInfo, b: PodInfo) -> bool:
    """kube's MoreImportantPod: higher priority, then the one that started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return _start(a) < _start(b)


def _start(p: PodInfo) -> float:
    return p.started if p.started is not None else _NOT_STARTED


def _importance_key(p: PodInfo) -> tuple[int, float]:
    return (-p.priority, _start(p))


def split_by_pdb_violation(pods: Sequence[PodInfo], pdbs: Sequence[Pdb]) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non_violating), each keeping `pods`' order (kube's filterPodsWithPDBViolation):
    evicting a pod uses up one allowed disruption of every PDB that selects it; once some PDB has
    none left, the pod is violating."""
    allowed = [p.disruptions_allowed for p in pdbs]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod in pods:
        violates = False
        for i, pdb in enumerate(pdbs):
            if not pdb.matches(pod) or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                violates = True
        (violating if violates else non_violating).append(pod)
    return violating, non_violating


class WorkingNode(Protocol):
    """One node's what-if copy during the dry run (kube's nodeInfoCopy and its CycleState copy):
    pods come off and go back one at a time, and `fits` asks the filters about the copy as it is."""

    def remove(self, p: PodInfo) -> Status: ...

    def add(self, p: PodInfo) -> Status: ...

    def fits(self) -> Status: ...


class RefilterNode:
    """A WorkingNode over `fits(removed)`: each question re-asks with the whole list of pods taken
    off. The simple form (what a chapter passes, and what tests pin the incremental path against)."""

    def __init__(self, fits: Callable[[list[PodInfo]], Status]) -> None:
        self._fits = fits
        self.removed: list[PodInfo] = []

    def remove(self, p: PodInfo) -> Status:
        self.removed.append(p)
        return Status.success()

    def add(self, p: PodInfo) -> Status:
        self.removed.remove(p)
        return Status.success()

    def fits(self) -> Status:
        return self._fits(list(self.removed))


class _DryRunError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def select_victims_on_node(
    pod: PodInfo,
    node_pods: Iterable[PodInfo],
    fits: Callable[[list[PodInfo]], Status] | WorkingNode,
    pdbs: Sequence[Pdb] = (),
) -> tuple[list[PodInfo] | None, int, Status]:
    """The minimal victims on one node, kube's SelectVictimsOnNode.

    `fits` is the node's working copy (a WorkingNode), or `fits(removed)` answering whether `pod`
    passes the filters with `removed` taken off the node. As kube: every lower-priority pod comes
    off, the pod must then fit; the PDB-violating ones, then the others, each in order of importance,
    go back one at a time and stay if the pod still fits. Returns (victims most important first,
    PDB violations, status); victims is None when the node is no candidate, and status then says why."""
    node = RefilterNode(fits) if callable(fits) else fits
    lower = [p for p in node_pods if p.priority < pod.priority]
    if not lower:
        return None, 0, Status.unschedulable(NO_VICTIMS, plugin=NAME, unresolvable=True)
    victims: list[PodInfo] = []
    violations = 0
    try:
        for p in lower:
            _checked(node.remove(p))
        status = node.fits()
        if not status.is_success:
            return None, 0, status
        lower.sort(key=_importance_key)
        violating, non_violating = split_by_pdb_violation(lower, pdbs)

        def reprieve(p: PodInfo) -> bool:
            _checked(node.add(p))
            if node.fits().is_success:
                return True
            _checked(node.remove(p))
            victims.append(p)
            return False

        for p in violating:
            if not reprieve(p):
                violations += 1
        for p in non_violating:
            reprieve(p)
    except _DryRunError as err:
        return None, 0, err.status
    if not victims:  # kube: a node that needs no victims is an error, never a candidate
        return None, 0, Status.from_error(
            RuntimeError("expected at least one victim pod on the node"), plugin=NAME)
    victims.sort(key=_importance_key)
    return victims, violations, Status.success()


def _checked(status: Status) -> None:
    if not status.is_success:
        raise _DryRunError(status)


def terminating_by_preemption(pod: Object) -> bool:
    """kube's podTerminatingByPreemption: being deleted, and its first DisruptionTarget condition
    is True with reason PreemptionByScheduler (a pod terminating for another reason does not make
    its node's nominee wait)."""
    if not (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "DisruptionTarget":
            return c.get("status") == "True" and c.get("reason") == "PreemptionByScheduler"
    return False


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate | None:
    """kube's pickOneNodeForPreemption: each criterion keeps the best; ties go to the next."""
    if not candidates:
        return None
    remaining = list(candidates)
    for criterion in (
        lambda c: c.num_pdb_violations,
        lambda c: c.victims[0].priority if c.victims else -(2**31),
        lambda c: sum(v.priority + 2**31 for v in c.victims),  # kube shifts priorities to be positive
        lambda c: len(c.victims),
        lambda c: -_earliest_start_of_highest(c.victims),  # latest start wins
    ):
        values = [criterion(c) for c in remaining]  # once each: a hundred candidates, five criteria
        best = min(values)
        remaining = [c for c, v in zip(remaining, values, strict=True) if v == best]
        if len(remaining) == 1:
            break
    return remaining[0]


def _earliest_start_of_highest(victims: Sequence[PodInfo]) -> float:
    if not victims:
        return _NOT_STARTED
    top = max(v.priority for v in victims)
    return min(_start(v) for v in victims if v.priority == top)


def offset_and_num_candidates(
    num_nodes: int, rng: random.Random, percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE,
    absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE,
) -> tuple[int, int]:
    """kube's GetOffsetAndNumCandidates: a random start, and max(percentage% of nodes, absolute)."""
    n = max(num_nodes * percentage // 100, absolute)
    return (rng.randrange(num_nodes) if num_nodes else 0), min(n, num_nodes)


class _IncrementalNode:
    """kube's SelectVictimsOnNode working copy: one private one-node table and one CycleState copy
    for the whole dry run on a node. A pod taken off or put back changes the table by that pod and
    the PreFilter state through the RemovePod / AddPod extensions (InterPodAffinity's topology
    counts), nothing is rebuilt. `fits` is kube's RunFilterPluginsWithNominatedPods: with the pods
    nominated to the node (of at least the pod's priority) put on for a moment, then without them.
    After the first success, the filters that do not read pods (`pod_blind`) are not asked again:
    with the same node and only pods changing, they would answer the same."""

    __slots__ = ("_handle", "_pod", "_node", "_view", "_state", "_pod_blind", "_blind_skipped")

    def __init__(self, handle: Any, state: CycleState, pod: PodInfo, table: Any, node_name: str,
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
        remove = getattr(self._handle, "run_pre_filter_extension_remove_pod", None)
        return remove(self._state, self._pod, p, self._node) if remove is not None else Status.success()

    def add(self, p: PodInfo) -> Status:
        self._view.add_pod(self._node, p)
        add = getattr(self._handle, "run_pre_filter_extension_add_pod", None)
        return add(self._state, self._pod, p, self._node) if add is not None else Status.success()

    def fits(self) -> Status:
        run, view, node = self._handle.run_filter_plugins, self._view, self._node
        nominated = self._state.nominated.get(node)
        if nominated:
            # put on for this question only the nominated pods the node does not hold already
            # (kube's addGENominatedPods on a copy; adding a pod twice counts it once)
            added = [p for p in nominated if not view.has_pod(node, p.key)]
            with_them = self._state.clone()
            add = getattr(self._handle, "run_pre_filter_extension_add_pod", None)
            try:
                for p in added:
                    view.add_pod(node, p)
                    if add is not None:
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


class _WhatIfPlan:
    """One preemptor's dry run without one-node tables, usable when every Filter plugin it would
    be asked about is pod-blind or offers a one-node what-if (NodeResourcesFit's, in plain Python).
    The pod-blind filters' verdicts cannot change as pods come and go, so they are asked once, over
    the whole snapshot (each row's verdict is the one-row table's), on the first question that
    needs them; the what-ifs answer for the rest. As kube's RunFilterPlugins, a question's answer
    is the first rejection in profile order."""

    def __init__(self, framework: Any, state: CycleState, pod: PodInfo, table: Any, blind: frozenset[str],
                 what_if: frozenset[str], extensions: frozenset[str]) -> None:
        active = [p for p in framework.points.filter if p.name not in state.skip_filter]
        self.usable = all(p.name in blind or p.name in what_if for p in active)
        self.what_if_plugins = [(i, p) for i, p in enumerate(active) if p.name not in blind]
        self._blind_index = {p.name: i for i, p in enumerate(active) if p.name in blind}
        # with no PreFilter extension running for this pod, AddPod/RemovePod would do nothing
        self.extensions = any(name not in state.skip_filter for name in extensions)
        self._framework, self._state, self._pod, self._table = framework, state, pod, table
        self._blind: dict[str, Status] | None = None

    def blind_rejection(self, node_name: str) -> tuple[int, Status] | None:
        """(profile position, status) of the first pod-blind filter rejecting the node, if any."""
        if not self._blind_index:
            return None
        if self._blind is None:
            only = self._state.clone()
            only.skip_filter |= {p.name for _, p in self.what_if_plugins}
            self._blind = self._framework.run_filters(only, self._pod, self._table)
        status = self._blind[node_name]
        return None if status.is_success else (self._blind_index[status.plugin], status)


class _WhatIfNode:
    """The working copy of a _WhatIfPlan: the node's pods as a dict and one what-if per filter that
    reads pods; a pod taken off or put back moves the what-ifs (and the PreFilter state through
    RemovePod / AddPod, when an extension runs). No table is built or changed. `fits` is kube's
    RunFilterPluginsWithNominatedPods, as _IncrementalNode's; the pod-blind filters count until
    the node first passed."""

    __slots__ = ("_handle", "_pod", "_node", "_state", "_plan", "_on", "_what_ifs", "_blind_pending")

    def __init__(self, handle: Any, state: CycleState, pod: PodInfo, table: Any, node_name: str,
                 plan: _WhatIfPlan) -> None:
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


@dataclass
class _Run:
    """One preemptor's victims' calls under way: how many of the victims before the last are not
    done yet, and whether any call failed."""

    candidate: Candidate
    pod: PodInfo
    victims: list[PodInfo]
    pending: int = 0
    failed: bool = False


class PdbsUnavailable(Exception):
    """The PodDisruptionBudgets are not known (informer not synced, or the API cannot be read)."""


class DefaultPreemption:
    """The PostFilter plugin. Needs from its handle: `cluster`, `snapshot()`, `event_recorder`, a
    way to run the Filter plugins on a one-node table (`run_filter_plugins(state, pod, table)`),
    and `pod_disruption_budgets()`: the PDBs from an informer's cache, raising PdbsUnavailable
    until it has synced (a handle without it: one LIST per attempt, errors raised)."""

    name = NAME
    # The Scheduler starts a PodDisruptionBudget informer for profiles with a plugin saying this.
    uses_pod_disruption_budgets = True

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        args = dict(args or {})
        self.handle = handle
        self.percentage = int(args.get("minCandidateNodesPercentage", MIN_CANDIDATE_NODES_PERCENTAGE))
        self.absolute = int(args.get("minCandidateNodesAbsolute", MIN_CANDIDATE_NODES_ABSOLUTE))
        if not 0 <= self.percentage <= 100 or self.absolute < 0:
            raise ValueError(
                f"{NAME} args: minCandidateNodesPercentage must be 0..100 and minCandidateNodesAbsolute "
                f">= 0, got {self.percentage} and {self.absolute}"
            )
        self.use_eviction = bool(args.get("useEviction", False))
        grace = args.get("victimGracePeriodSeconds")
        self.victim_grace_period: int | None = None if grace is None else int(grace)
        self.rng = random.Random(args.get("seed"))
        self.scheduler_name = str(args.get("schedulerName", "minisched"))
        # Set by the Scheduler: the queue's nominator, to clear lower-priority nominations.
        self.nominator: Any = None
        self.victims_total = 0
        self.attempts_total = 0
        # the dry run on one working copy per node, as kube; False: the full re-filter per question
        self.incremental = True
        # kube's SchedulerAsyncPreemption (on by default since 1.33): the victims' API calls run off
        # the scheduling cycle, and the preemptor is held back (kube's PreEnqueue) until the last
        # victim's deletion has started. False: the calls run inside the cycle, as before 1.33.
        self.async_preemption = bool(args.get("asyncPreemption", True))
        self._lock = threading.Lock()
        self._preempting: set[str] = set()  # preemptor uids whose victims' calls are under way
        self._last_victim: dict[str, tuple[str, str]] = {}  # preemptor uid -> (namespace, name)
        # worked out once per profile: _filter_kinds, _pod_blind_filters
        self._kinds: tuple[Any, tuple[int, int], tuple[Any, frozenset[str], frozenset[str], frozenset[str]]] | None = None
        self._blind: tuple[Any, int, frozenset[str]] | None = None
        # wired by the scheduler: run a job on its preemption workers; activate a pod
        self.submit: Callable[[Callable[[Any], None], Any], None] | None = None
        self.activate: Callable[[Object], None] | None = None

    # --- PostFilter ---------------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[str | None, Status]:
        """(node to nominate, status). The node is None when the pod may not preempt (keep any
        nomination it has), "" when preemption found no candidate (clear it)."""
        self.attempts_total += 1
        table = self.handle.snapshot()
        ok, why = self.eligible(pod, table, statuses)
        if not ok:
            return None, Status.unschedulable(f"preemption: {why}", plugin=NAME)
        try:
            candidates, status = self.find_candidates(state, pod, table, statuses)
        except PdbsUnavailable as unknown:
            # Preempting without knowing the budgets could evict exactly the pods they protect.
            return None, Status.from_error(unknown, plugin=NAME)
        if not candidates and status.code == Code.ERROR:
            return None, status.with_plugin(NAME)
        if not candidates:
            # "": any earlier nomination is void. The message reads as kube's, e.g. "preemption:
            # 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption
            # victims found for incoming pod." (a FitError text, with its period).
            return "", Status(status.code, (f"preemption: {status.message()}",), NAME)
        best = pick_one_node(candidates)
        assert best is not None
        if self.async_preemption and self.submit is not None:  # without workers (no Scheduler): in the cycle
            self.prepare_candidate_async(best, pod)
        else:
            err = self.prepare_candidate(best, pod, table)
            if err is not None:
                return None, Status.from_error(err, plugin=NAME)
        self.victims_total += len(best.victims)
        return best.node_name, Status.success()

    def eligible(self, pod: PodInfo, table: Any, statuses: Mapping[str, Status]) -> tuple[bool, str]:
        """kube's PodEligibleToPreemptOthers."""
        if (pod.pod.get("spec") or {}).get("preemptionPolicy") == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        nominated = pod.nominated_node_name
        if nominated:
            status = statuses.get(nominated)
            if status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""  # that node cannot help any more: look elsewhere
            for p in table.pods_on(nominated) if table.row(nominated) is not None else ():
                if p.priority < pod.priority and terminating_by_preemption(p.pod):
                    return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def find_candidates(
        self, state: CycleState, pod: PodInfo, table: Any, statuses: Mapping[str, Status]
    ) -> tuple[list[Candidate], Status]:
        """Dry-run preemption over the nodes where it might help (kube's findCandidates)."""
        total = len(table)
        potential = [n for n in table.names if (s := statuses.get(n)) is None
                     or s.code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE]
        if not potential:
            return [], Status.unschedulable(f"0/{total} nodes are available: {total} {NOT_HELPFUL}.", plugin=NAME)
        pdbs = self._pdbs()
        offset, wanted = offset_and_num_candidates(len(potential), self.rng, self.percentage, self.absolute)
        hopeless = self._hopeless(pod, table, statuses, state.nominated)
        # kube's DryRunPreemption keeps at most `wanted` candidates of each kind (non-violating and
        # PDB-violating) and stops once it has one non-violating and `wanted` in all; it runs the
        # nodes in parallel, this in their order from the offset (kube's order with one worker).
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        failures: dict[str, int] = {}
        errors: list[Status] = []
        blind = self._pod_blind_filters()
        plan = self._what_if_plan(state, pod, table)

        def working(state: CycleState, pod: PodInfo, table: Any, node_name: str) -> WorkingNode:
            if self.incremental:
                return self._working_node(state, pod, table, node_name, blind, plan)
            return self._refilter_node(state, pod, table, node_name)

        for i in range(len(potential)):
            node_name = potential[(offset + i) % len(potential)]
            short = hopeless(node_name)
            if short:
                for reason in short:
                    failures[reason] = failures.get(reason, 0) + 1
                continue
            victims, violations, status = select_victims_on_node(
                pod, table.pods_on(node_name), working(state, pod, table, node_name), pdbs)
            if victims is None:
                if status.code == Code.ERROR:
                    errors.append(status)
                for reason in status.reasons or (status.message(),):
                    failures[reason] = failures.get(reason, 0) + 1
                continue
            kind = violating if violations else non_violating
            if len(kind) < wanted:
                kind.append(Candidate(node_name, victims, violations))
            if non_violating and len(non_violating) + len(violating) >= wanted:
                break
        candidates = non_violating + violating
        if candidates:
            return candidates, Status.success()
        if errors:  # kube: an error on some node, and no candidate anywhere, fails the preemption
            return [], errors[0]
        unhelpful = total - len(potential)
        if unhelpful:
            failures[NOT_HELPFUL] = failures.get(NOT_HELPFUL, 0) + unhelpful
        parts = ", ".join(sorted(f"{n} {r}" for r, n in failures.items()))  # sorted as kube's FitError
        return [], Status.unschedulable(f"0/{total} nodes are available: {parts}.", plugin=NAME)

    @staticmethod
    def _hopeless(
        pod: PodInfo, table: Any, statuses: Mapping[str, Status], nominated: Mapping[str, list[PodInfo]] | None = None
    ) -> Callable[[str], list[str] | None]:
        """A shortcut for the common hopeless case, exact for NodeResourcesFit rejections: nodes that
        failed only for resources and where evicting every lower-priority pod would still leave too
        little (counting the pods nominated there), with the reasons the dry run would give
        ("Insufficient cpu", "Too many pods"), found without running the filters on a what-if copy
        of each node."""
        resources = [r for r, amount in pod.requests.items() if amount]
        alloc = {r: table.allocatable(r).tolist() for r in [*resources, "pods"]}
        used = {r: table.requested(r).tolist() for r in [*resources, "pods"]}

        def check(name: str) -> list[str] | None:
            # Pods nominated there (of the preemptor's priority or higher) hold room the table does
            # not show: the dry run's first question puts them on with every lower pod off
            # (kube's RunFilterPluginsWithNominatedPods), so they count here the same way.
            status = statuses.get(name)
            if status is None or status.plugin != "NodeResourcesFit" or not status.reasons:
                return None
            held = [p for p in nominated.get(name) or () if not table.has_pod(name, p.key)] if nominated else []
            row = table.row(name)
            lower = [p for p in table.pods_on(name) if p.priority < pod.priority]
            if row is None or not lower:
                return None  # no victims: select_victims_on_node answers that without filtering
            short = set()
            if used["pods"][row] - len(lower) + len(held) + 1 > alloc["pods"][row]:
                short.add("pods")
            for r in resources:
                freed = sum(p.requests.get(r, 0) for p in lower)
                taken = sum(p.requests.get(r, 0) for p in held)
                if used[r][row] - freed + taken + pod.requests[r] > alloc[r][row]:
                    short.add(r)
            if not short:
                return None
            # Removing pods never makes an earlier filter fail, so NodeResourcesFit stays the first
            # failure, and its reasons are the resources still short (in its order).
            reasons = [m for m in status.reasons if _reason_resource(m) in short]
            return reasons if len(reasons) == len(short) else None

        return check

    def _working_node(self, state: CycleState, pod: PodInfo, table: Any, node_name: str,
                      pod_blind: frozenset[str] = frozenset(), plan: _WhatIfPlan | None = None) -> WorkingNode:
        """The node's working copy for the incremental dry run; a handle that cannot tell the
        PreFilter state about a pod put back (no AddPod extension) gets the full re-filter."""
        handle = self.handle
        if not hasattr(handle, "run_pre_filter_extension_add_pod") and hasattr(
                handle, "run_pre_filter_extension_remove_pod"):
            return self._refilter_node(state, pod, table, node_name)
        if plan is not None and plan.usable:
            return _WhatIfNode(handle, state, pod, table, node_name, plan)
        return _IncrementalNode(handle, state, pod, table, node_name, pod_blind)

    def _what_if_plan(self, state: CycleState, pod: PodInfo, table: Any) -> _WhatIfPlan | None:
        """A _WhatIfPlan for this preemptor, None where the handle is not the framework's."""
        kinds = self._filter_kinds()
        if kinds is None:
            return None
        framework, blind, what_if, extensions = kinds
        return _WhatIfPlan(framework, state, pod, table, blind, what_if, extensions)

    def _filter_kinds(self) -> tuple[Any, frozenset[str], frozenset[str], frozenset[str]] | None:
        """(framework, the pod-blind filters that judge a row alone, those with a one-node what-if,
        the PreFilter plugins with AddPod/RemovePod extensions), worked out once per profile
        (isinstance against a Protocol is slow to ask per dry run). None without the framework's
        own one-node filter run and PreFilter extensions behind the handle.

        A what-if stands in for a plugin only if PreFilter extensions move nothing it reads; a
        pod-blind filter is asked over the whole table only if a row's verdict is its own
        (`reads_other_nodes` is not set)."""
        framework = getattr(self.handle, "framework", None)
        points = getattr(framework, "points", None)
        if points is None or not hasattr(framework, "run_filters_on_one_node") \
                or not hasattr(framework, "run_filters") \
                or not hasattr(self.handle, "run_pre_filter_extension_add_pod"):
            return None
        cached = self._kinds
        if cached is not None and cached[0] is framework and cached[1] == (len(points.filter), len(points.pre_filter)):
            return cached[2]
        with_extensions = {p.name for p in points.filter if isinstance(p, PreFilterExtensions)}
        blind = frozenset(p.name for p in points.filter if p.name in self._pod_blind_filters()
                          and not getattr(p, "reads_other_nodes", False))
        what_if = frozenset(p.name for p in points.filter if isinstance(p, OneNodeWhatIfFilter)
                            and p.name not in with_extensions)
        extensions = frozenset(p.name for p in points.pre_filter if isinstance(p, PreFilterExtensions))
        kinds = (framework, blind, what_if, extensions)
        self._kinds = (framework, (len(points.filter), len(points.pre_filter)), kinds)
        return kinds

    def _pod_blind_filters(self) -> frozenset[str]:
        """Filter plugins whose verdict on a node cannot change when pods come and go there: they
        declare `reads_pods = False` and keep no PreFilter state that AddPod/RemovePod move. Once a
        node passed every filter with its victims off, only the others can answer differently."""
        framework = getattr(self.handle, "framework", None)
        points = getattr(framework, "points", None)
        if points is None:
            return frozenset()
        cached = self._blind
        if cached is not None and cached[0] is points.filter and cached[1] == len(points.filter):
            return cached[2]
        blind = frozenset(p.name for p in points.filter
                          if getattr(p, "reads_pods", True) is False and not isinstance(p, PreFilterExtensions))
        self._blind = (points.filter, len(points.filter), blind)
        return blind

    def _refilter_node(self, state: CycleState, pod: PodInfo, table: Any, node_name: str) -> WorkingNode:
        """The dry run as a full re-filter (minisched's first form, kept as the reference the
        incremental path is tested against): each question builds a one-node table without the
        removed pods and a fresh PreFilter state with RemovePod run for each of them."""
        run = self.handle.run_filter_plugins
        # kube's SelectVictimsOnNode runs RunFilterPluginsWithNominatedPods: the pods nominated to
        # this node keep their room in the what-if too (a handle without it: the plain filters)
        run_nominated = getattr(self.handle, "run_filter_plugins_with_nominated_pods", None)
        # PreFilter state counted over the whole cluster (InterPodAffinity's topology counts) must
        # forget the victims too: kube's SelectVictimsOnNode runs RemovePod on a cloned state
        remove = getattr(self.handle, "run_pre_filter_extension_remove_pod", None)

        def fits(removed: list[PodInfo]) -> Status:
            s = state.clone()
            if remove is not None:
                for victim in removed:
                    status = remove(s, pod, victim, node_name)
                    if not status.is_success:
                        return status
            if run_nominated is not None:
                return run_nominated(s, pod, table, node_name, removed)
            return run(s, pod, table.for_node(node_name, removed=removed))

        return RefilterNode(fits)

    def _pdbs(self) -> list[Pdb]:
        lister = getattr(self.handle, "pod_disruption_budgets", None)
        if lister is not None:
            items = lister()
        else:
            cluster = getattr(self.handle, "cluster", None)
            if cluster is None:
                return []  # a bare handle (unit tests of the algorithm): no PDB API at all
            try:
                items = cluster.list(POD_DISRUPTION_BUDGETS)["items"]
            except ApiError as err:
                raise PdbsUnavailable(f"cannot list PodDisruptionBudgets: {err}") from err
        return [Pdb.from_object(p) for p in items]

    # --- acting on the choice ---------------------------------------------------------------------

    def prepare_candidate(self, candidate: Candidate, pod: PodInfo, table: Any) -> ApiError | None:
        """Mark and delete the victims, clear lower-priority nominations on the node (kube's
        prepareCandidate). Returns the first API error that stops it, if any."""
        for victim in candidate.victims:
            err = self._preempt_one(candidate, pod, victim)
            if err is not None:
                return err
        self._clear_lower_nominations(pod, candidate.node_name)
        return None

    def prepare_candidate_async(self, candidate: Candidate, pod: PodInfo) -> None:
        """kube's prepareCandidateAsync: the same calls as prepare_candidate on a worker thread, so
        the scheduling loop goes on to the next pod at once. Victims already being deleted need no
        call. Until the last victim's deletion has started, running_preemption() holds the
        preemptor back from another attempt; on an API error the preemptor is activated, so it is
        not left waiting for deletions that will never come."""
        victims = [v for v in candidate.victims if not (v.pod.get("metadata") or {}).get("deletionTimestamp")]
        if not victims:
            return
        assert self.submit is not None
        with self._lock:
            self._preempting.add(pod.uid)
        self.submit(self._preempt, (candidate, pod, victims))

    def _preempt(self, job: tuple[Candidate, PodInfo, list[PodInfo]]) -> None:
        """One preemptor's calls, on a preemption worker. As kube's prepareCandidateAsync: every
        victim but the last at once (here: each a job of its own on the same workers, so idle
        workers take them in parallel), then the last one, once all the others are done."""
        candidate, pod, victims = job
        run = _Run(candidate, pod, victims)
        try:
            self._clear_lower_nominations(pod, candidate.node_name)
        except Exception:  # a bug must not leave the preemptor held for ever
            log.exception("preemption for %s failed", pod.key)
            run.failed = True
        others = victims[:-1]
        if not others:
            self._preempt_last(run)
            return
        run.pending = len(others)
        for victim in others[1:]:
            try:
                self._submit_victim(run, victim)
            except RuntimeError:  # the workers are shut down: make the call here
                self._preempt_victim((run, victim))
        self._preempt_victim((run, others[0]))

    def _submit_victim(self, run: _Run, victim: PodInfo) -> None:
        assert self.submit is not None
        self.submit(self._preempt_victim, (run, victim))

    def _preempt_victim(self, job: tuple[_Run, PodInfo]) -> None:
        """One victim that is not the last; the job that finishes the last of them goes on to the
        preemptor's last victim."""
        run, victim = job
        try:
            failed = self._preempt_one(run.candidate, run.pod, victim) is not None
        except Exception:
            log.exception("preempting %s for %s failed", victim.key, run.pod.key)
            failed = True
        with self._lock:
            run.failed = run.failed or failed
            run.pending -= 1
            done = run.pending == 0
        if done:
            self._preempt_last(run)

    def _preempt_last(self, run: _Run) -> None:
        pod = run.pod
        failed = run.failed
        try:
            last = run.victims[-1]
            with self._lock:
                # registered before its deletion, so that the deletion's event finds it (kube's
                # lastVictimsPendingPreemption)
                self._last_victim[pod.uid] = (last.namespace, last.name)
            failed = self._preempt_one(run.candidate, pod, last) is not None or failed
        except Exception:  # a bug must not leave the preemptor held for ever
            log.exception("preemption for %s failed", pod.key)
            failed = True
        finally:
            with self._lock:
                self._preempting.discard(pod.uid)
                self._last_victim.pop(pod.uid, None)
        if failed and self.activate is not None:
            self.activate(pod.pod)

    def _preempt_one(self, candidate: Candidate, pod: PodInfo, victim: PodInfo) -> ApiError | None:
        cluster = self.handle.cluster
        try:
            self._mark_disruption_target(cluster, victim)
            if self.use_eviction:
                cluster.evict(victim.namespace, victim.name, grace_period_seconds=self.victim_grace_period)
            else:
                cluster.delete(PODS, victim.name, victim.namespace, grace_period_seconds=self.victim_grace_period)
        except NotFound:
            return None  # already gone: the room is free anyway
        except ApiError as err:
            log.warning("preempting %s for %s: %s", victim.key, pod.key, err)
            return err
        recorder = getattr(self.handle, "event_recorder", None)
        if recorder is not None:
            recorder.event(victim.pod, "Normal", "Preempted",
                           f"Preempted by pod {pod.uid} on node {candidate.node_name}")
        return None

    def running_preemption(self, uid: str) -> bool:
        """kube's IsPodRunningPreemption: the preemptor's victims are still being asked to go. Once
        the last victim is gone from the informer's store, or its deletion has started, it is not."""
        if uid not in self._preempting:  # the common case, asked on every queue move: no lock
            return False
        with self._lock:
            if uid not in self._preempting:
                return False
            last = self._last_victim.get(uid)
        if last is None:
            return True  # the calls have not reached the last victim yet
        lookup = getattr(self.handle, "pod_object", None)
        victim = lookup(*last) if lookup is not None else None
        return victim is not None and not (victim.get("metadata") or {}).get("deletionTimestamp")

    def _mark_disruption_target(self, cluster: Any, victim: PodInfo) -> None:
        """Set condition DisruptionTarget on the victim, as kube's PreemptPod: the new status is
        computed from the scheduler's cached copy (kube's UpdatePodCondition: no call when the
        condition is already there as wanted; the transition time kept when only the reason or
        message changes) and sent as a strategic merge patch (kube's util.PatchPodStatus), which the
        server merges by condition type into the conditions it has now. No GET of the victim, and
        no lost update of a condition another writer set since the cache saw the pod."""
        message = f"{self.scheduler_name}: preempting to accommodate a higher priority pod"
        cached = [c for c in (victim.pod.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
        old = next((c for c in cached if c.get("type") == "DisruptionTarget"), None)
        if old is not None and old.get("status") == "True" and old.get("reason") == "PreemptionByScheduler" \
                and old.get("message") == message:
            return  # already marked: kube's UpdatePodCondition reports no change and sends nothing
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                     "message": message}
        if old is not None and old.get("status") == "True" and old.get("lastTransitionTime"):
            condition["lastTransitionTime"] = old["lastTransitionTime"]
        else:
            condition["lastTransitionTime"] = rfc3339(_now(self.handle))
        # The element order of the cached copy, a new condition last, as kube's two-way patch says
        # it ($setElementOrder); conditions the cache has not seen keep their place.
        order = [{"type": c["type"]} for c in cached if c.get("type")]
        if old is None:
            order.append({"type": "DisruptionTarget"})
        status: Object = {"conditions": [condition]}
        if len(order) > 1:
            status["$setElementOrder/conditions"] = order
        cluster.patch(PODS, victim.name, {"status": status}, victim.namespace, subresource="status",
                      patch_type="strategic")

    def _clear_lower_nominations(self, pod: PodInfo, node_name: str) -> None:
        nominator = self.nominator
        if nominator is None:
            return
        for other in nominator.nominated_pods().get(node_name, []):
            priority = int((other.get("spec") or {}).get("priority") or 0)
            meta = other.get("metadata") or {}
            if priority < pod.priority and f"{meta.get('namespace')}/{meta.get('name')}" != pod.key:
                nominator.delete_nominated(other)
                recorder = getattr(self.handle, "event_recorder", None)
                if recorder is not None and hasattr(recorder, "set_nominated_node"):
                    recorder.set_nominated_node(other, "")


def _reason_resource(reason: str) -> str:
    """The resource a NodeResourcesFit reason is about: "Insufficient cpu" -> cpu."""
    if reason == "Too many pods":
        return "pods"
    return reason.removeprefix("Insufficient ")


def _now(handle: Any) -> float:
    clock = getattr(handle, "clock", None)
    if clock is not None:
        return float(clock.now())
    import time

    return time.time()


def new(args: Mapping[str, Any] | None, handle: Any) -> DefaultPreemption:
    """The registry's factory."""
    return DefaultPreemption(args, handle)
