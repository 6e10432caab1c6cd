"""The DefaultPreemption plugin (kube's plugins/defaultpreemption): its PostFilter, the decisions
kube's preemption.Interface leaves to the plugin (who may preempt, how many candidates, the dry run
on one node), and what the scheduler wires into it."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.runtime import SimpleHandle
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.default_preemption.args import DefaultPreemptionArgs
from minisched.scheduler.plugins.default_preemption.candidate import Candidate, offset_and_num_candidates
from minisched.scheduler.plugins.default_preemption.evaluator import Evaluator
from minisched.scheduler.plugins.default_preemption.executor import Executor
from minisched.scheduler.plugins.default_preemption.names import NAME
from minisched.scheduler.plugins.default_preemption.pdb import Pdb
from minisched.scheduler.plugins.default_preemption.select_victims import WorkingNode, select_victims_on_node

Object = dict[str, Any]


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


class DefaultPreemption:
    """The PostFilter plugin. Uses of its handle: `cluster`, `event_recorder`, the profile's
    Filter plugins and PreFilter extensions run on a node's working copy (the PluginsRunner
    methods), `pod_disruption_budgets()` (raising PdbsUnavailable until the informer has synced),
    the `nominator` (lower-priority nominations on the chosen node go) and `activate` (a preemptor
    whose calls failed is tried again). The cycle's table is the CycleState's `snapshot`.

    The scheduler sets `submit` (run a job on its preemption workers) and asks
    `hold(uid)` before letting a preemptor into another attempt."""

    name = NAME
    # The Scheduler starts a PodDisruptionBudget informer for profiles with a plugin saying this.
    uses_pod_disruption_budgets = True

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = DefaultPreemptionArgs.from_mapping(args)
        # without a handle (the args and the algorithm alone): one with no API and no framework
        self.handle: Handle = handle if handle is not None else SimpleHandle()
        handle = self.handle
        self.rng = random.Random(self.args.seed)
        self.victims_total = 0
        self.attempts_total = 0
        self.executor = Executor(handle, scheduler_name=self.args.scheduler_name, use_eviction=self.args.use_eviction,
                                 victim_grace_period=self.args.victim_grace_period_seconds)
        # kube's SchedulerAsyncPreemption (on by default since 1.33): the victims' API calls run off
        # the scheduling cycle, and the preemptor is held back (kube's PreEnqueue) until the last
        # victim's deletion has started. asyncPreemption: false makes the calls in the cycle.
        self.evaluator = Evaluator(handle, self, self.executor, async_preemption=self.args.async_preemption)

    # --- what the scheduler wires in ----------------------------------------------------------------

    @property
    def submit(self) -> Callable[[Callable[[Any], None], Any], None] | None:
        return self.executor.submit

    @submit.setter
    def submit(self, submit: Callable[[Callable[[Any], None], Any], None] | None) -> None:
        self.executor.submit = submit

    @property
    def incremental(self) -> bool:
        """The dry run on one working copy per node, as kube; False: a full re-filter per question."""
        return self.evaluator.working_nodes.incremental

    @incremental.setter
    def incremental(self, incremental: bool) -> None:
        self.evaluator.working_nodes.incremental = incremental

    def running_preemption(self, uid: str) -> bool:
        """kube's IsPodRunningPreemption: the preemptor's victims are still being asked to go."""
        return self.evaluator.running_preemption(uid)

    def hold(self, uid: str) -> bool:
        """kube's PreEnqueue for async preemption, asked by the queue before it moves or pops the
        preemptor; a pod held now is activated when its preemption's run ends."""
        return self.evaluator.hold(uid)

    # --- PostFilter -----------------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[str | None, Status]:
        """(node to nominate, status). The node is None when the pod may not preempt (keep any
        nomination it has), "" when preemption found no candidate (clear it). As kube's, every
        message says "preemption: " first."""
        self.attempts_total += 1
        node, status, victims = self.evaluator.preempt(state, pod, statuses)
        self.victims_total += victims
        message = status.message()
        if message:
            status = Status(status.code, (f"preemption: {message}",), NAME, status.error)
        return node, status

    def find_candidates(
        self, state: CycleState, pod: PodInfo, table: Any, statuses: Mapping[str, Status]
    ) -> tuple[list[Candidate], Status]:
        """The dry run over the nodes where preemption might help (the Evaluator's find_candidates)."""
        return self.evaluator.find_candidates(state, pod, table, statuses)

    # --- kube's preemption.Interface ------------------------------------------------------------------

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return offset_and_num_candidates(num_nodes, self.rng, self.args.min_candidate_nodes_percentage,
                                         self.args.min_candidate_nodes_absolute)

    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, table: Any, statuses: Mapping[str, Status]
    ) -> tuple[bool, str]:
        """kube's PodEligibleToPreemptOthers: not with preemptionPolicy Never; not while a
        lower-priority pod on the nominated node is still terminating by preemption (it waits for
        the room it made), unless that node now fails unresolvably."""
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

    def select_victims_on_node(
        self, pod: PodInfo, node_pods: Sequence[PodInfo], node: WorkingNode, pdbs: Sequence[Pdb],
    ) -> tuple[list[PodInfo] | None, int, Status]:
        return select_victims_on_node(pod, node_pods, node, pdbs)


def new(args: Mapping[str, Any] | None, handle: Handle) -> DefaultPreemption:
    """The registry's factory."""
    return DefaultPreemption(args, handle)
