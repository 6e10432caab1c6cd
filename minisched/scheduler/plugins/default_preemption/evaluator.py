"""The PostFilter flow of preemption (kube's preemption.Evaluator: Preempt, findCandidates,
DryRunPreemption, SelectCandidate), over what a preemption plugin decides (kube's
preemption.Interface, which DefaultPreemption implements):

1. Eligibility (the plugin's pod_eligible_to_preempt_others).
2. Candidates: only nodes that failed Filter with Unschedulable (not UnschedulableAndUnresolvable:
   evicting pods cannot fix a taint or an affinity miss). From a random offset, until enough
   candidates are found (the plugin's get_offset_and_num_candidates), each node is dry-run on its
   working copy (select_victims_on_node).
3. Choice among candidates (pick_one_node, kube's tie-breakers).
4. Action: the Executor's calls, on preemption workers (kube's SchedulerAsyncPreemption) or in
   the cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.default_preemption.candidate import Candidate, pick_one_node
from minisched.scheduler.plugins.default_preemption.executor import Executor
from minisched.scheduler.plugins.default_preemption.hopeless import hopeless_nodes
from minisched.scheduler.plugins.default_preemption.names import NAME
from minisched.scheduler.plugins.default_preemption.pdb import Pdb, PdbsUnavailable, list_pdbs
from minisched.scheduler.plugins.default_preemption.select_victims import WorkingNode
from minisched.scheduler.plugins.default_preemption.working_node import WorkingNodes

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_NODES = "no nodes available"  # kube's findCandidates error


class PreemptionInterface(Protocol):
    """What a preemption plugin decides for the Evaluator (kube's preemption.Interface)."""

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]: ...

    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, table: Any, statuses: Mapping[str, Status]) -> tuple[bool, str]: ...

    def select_victims_on_node(
        self, pod: PodInfo, node_pods: Sequence[PodInfo], node: WorkingNode, pdbs: Sequence[Pdb],
    ) -> tuple[list[PodInfo] | None, int, Status]: ...


class Evaluator:
    """kube's preemption.Evaluator for one plugin. `async_preemption`: the victims' calls run on
    the executor's workers when it has them; `shortcut`: nodes the resource arithmetic shows
    hopeless skip the dry run (hopeless.py; False dry-runs every node, as kube)."""

    def __init__(self, handle: Handle, interface: PreemptionInterface, executor: Executor, *,
                 async_preemption: bool = True) -> None:
        self.handle = handle
        self.interface = interface
        self.executor = executor
        self.working_nodes = WorkingNodes(handle)
        self.async_preemption = async_preemption
        self.shortcut = True

    def preempt(self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]) -> tuple[str | None, Status, int]:
        """kube's Preempt: (node to nominate, status, victims asked to go). The node is None when
        the pod may not preempt or an error stopped it (keep any nomination it has), "" when no
        node is a candidate (clear it). Messages are kube's, without the plugin's "preemption: "."""
        # the table this cycle judged the pod on (the handle's latest, for a state no cycle set)
        table = state.snapshot if state.snapshot is not None else self.handle.snapshot()
        ok, why = self.interface.pod_eligible_to_preempt_others(pod, table, statuses)
        if not ok:
            return None, Status.unschedulable(why, plugin=NAME), 0
        try:
            candidates, status = self.find_candidates(state, pod, table, statuses)
        except PdbsUnavailable as unknown:
            # Preempting without knowing the budgets could evict exactly the pods they protect.
            return None, Status.from_error(unknown, plugin=NAME), 0
        if not candidates and status.code == Code.ERROR:
            return None, status.with_plugin(NAME), 0
        if not candidates:
            # "": any earlier nomination is void. The message reads as kube's FitError text, e.g.
            # "0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No
            # preemption victims found for incoming pod." (with its period).
            return "", Status(status.code, status.reasons, NAME), 0
        best = pick_one_node(candidates)
        assert best is not None  # candidates is not empty
        if self.async_preemption and self.executor.submit is not None:  # without workers: in the cycle
            self.executor.prepare_candidate_async(best, pod)
        else:
            failed = self.executor.prepare_candidate(best, pod)
            if failed is not None:
                return None, Status.from_error(failed, plugin=NAME), 0
        return best.node_name, Status.success(), len(best.victims)

    def find_candidates(
        self, state: CycleState, pod: PodInfo, table: Any, statuses: Mapping[str, Status]
    ) -> tuple[list[Candidate], Status]:
        """The nodes where preemption might help, dry-run (kube's findCandidates and
        DryRunPreemption). Raises PdbsUnavailable when the budgets are not known."""
        total = len(table)
        if total == 0:
            return [], Status.from_error(RuntimeError(NO_NODES), plugin=NAME)
        potential = [n for n in table.names if (s := statuses.get(n)) is None
                     or s.code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE]
        if not potential:
            return [], Status.unschedulable(f"0/{total} nodes are available: {total} {NOT_HELPFUL}.", plugin=NAME)
        pdbs = list_pdbs(self.handle)
        offset, wanted = self.interface.get_offset_and_num_candidates(len(potential))
        return self.dry_run_preemption(state, pod, table, statuses, potential, pdbs, offset, wanted)

    def dry_run_preemption(
        self, state: CycleState, pod: PodInfo, table: Any, statuses: Mapping[str, Status],
        potential: Sequence[str], pdbs: Sequence[Pdb], offset: int, wanted: int,
    ) -> tuple[list[Candidate], Status]:
        """kube's DryRunPreemption: keeps at most `wanted` candidates of each kind (non-violating
        and PDB-violating) and stops once it has one non-violating and `wanted` in all. kube runs
        the nodes in parallel; this runs them in their order from the offset (kube's order with one
        worker). With no candidate: an error on some node fails the preemption, else the failures
        as kube's FitError text."""
        total = len(table)
        hopeless = hopeless_nodes(pod, table, statuses, state.nominated) if self.shortcut else None
        working = self.working_nodes.for_preemptor(state, pod, table)
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        failures: dict[str, int] = {}
        errors: list[Status] = []
        for i in range(len(potential)):
            node_name = potential[(offset + i) % len(potential)]
            short = hopeless(node_name) if hopeless is not None else None
            if short:
                for reason in short:
                    failures[reason] = failures.get(reason, 0) + 1
                continue
            victims, violations, status = self.interface.select_victims_on_node(
                pod, table.pods_on(node_name), working(node_name), pdbs)
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
        if errors:
            return [], errors[0]
        unhelpful = total - len(potential)
        if unhelpful:
            failures[NOT_HELPFUL] = failures.get(NOT_HELPFUL, 0) + unhelpful
        parts = ", ".join(sorted(f"{n} {r}" for r, n in failures.items()))  # sorted as kube's FitError
        return [], Status.unschedulable(f"0/{total} nodes are available: {parts}.", plugin=NAME)

    def running_preemption(self, uid: str) -> bool:
        """kube's IsPodRunningPreemption (see Executor.running_preemption)."""
        return self.executor.running_preemption(uid)

    def hold(self, uid: str) -> bool:
        """The queue's question before it moves or pops the preemptor (see Executor.hold)."""
        return self.executor.hold(uid)
