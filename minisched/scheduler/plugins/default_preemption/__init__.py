"""DefaultPreemption: when no node fits, make room by evicting lower-priority pods.

kube-scheduler's plugins/defaultpreemption and framework/preemption, one concept a file:

- plugin.py: the DefaultPreemption plugin, its PostFilter and what kube's preemption.Interface
  leaves to it (eligibility: preemptionPolicy Never does not preempt, nor a pod whose nominated
  node still has lower-priority pods terminating by preemption); args.py: its args.
- evaluator.py: kube's preemption.Evaluator, the PostFilter flow: candidates (only nodes that failed
  Filter with Unschedulable, from a random offset, until max(10% of nodes, 100) are found), the
  dry run over them, the choice, the action.
- select_victims.py: the dry run on one node (kube's SelectVictimsOnNode): every lower-priority pod
  off, then put back in order of importance (importance.py), PDB-violating ones first (pdb.py),
  each that still lets the pod fit; working_node.py: the node's working copy it runs on;
  hopeless.py: minisched's shortcut past it for nodes short of resources whatever is evicted.
- candidate.py: a candidate and kube's tie-breakers between candidates.
- executor.py: the API calls (kube's prepareCandidate, async since 1.33, and PreemptPod):
  DisruptionTarget on each victim, its deletion or eviction, lower nominations cleared, the
  preemptor held until its last victim's deletion has started.

This package keeps the names the module default_preemption.py had: `select_victims_on_node` and
`pick_one_node` are plain functions over PodInfos so that a chapter can call them on their own.
"""

from minisched.scheduler.plugins.default_preemption.args import DefaultPreemptionArgs
from minisched.scheduler.plugins.default_preemption.candidate import (
    MIN_CANDIDATE_NODES_ABSOLUTE,
    MIN_CANDIDATE_NODES_PERCENTAGE,
    Candidate,
    offset_and_num_candidates,
    pick_one_node,
)
from minisched.scheduler.plugins.default_preemption.evaluator import (
    NOT_HELPFUL,
    Evaluator,
    PreemptionInterface,
)
from minisched.scheduler.plugins.default_preemption.executor import Executor, VictimPreemptionFailed
from minisched.scheduler.plugins.default_preemption.importance import more_important
from minisched.scheduler.plugins.default_preemption.names import NAME
from minisched.scheduler.plugins.default_preemption.pdb import Pdb, PdbsUnavailable, split_by_pdb_violation
from minisched.scheduler.plugins.default_preemption.plugin import (
    DefaultPreemption,
    new,
    terminating_by_preemption,
)
from minisched.scheduler.plugins.default_preemption.select_victims import (
    NO_VICTIMS,
    Fits,
    RefilterNode,
    WorkingNode,
    select_victims_on_node,
)

__all__ = [
    "MIN_CANDIDATE_NODES_ABSOLUTE",
    "MIN_CANDIDATE_NODES_PERCENTAGE",
    "NAME",
    "NOT_HELPFUL",
    "NO_VICTIMS",
    "Candidate",
    "DefaultPreemption",
    "DefaultPreemptionArgs",
    "Evaluator",
    "Executor",
    "Fits",
    "Pdb",
    "PdbsUnavailable",
    "PreemptionInterface",
    "RefilterNode",
    "VictimPreemptionFailed",
    "WorkingNode",
    "more_important",
    "new",
    "offset_and_num_candidates",
    "pick_one_node",
    "select_victims_on_node",
    "split_by_pdb_violation",
    "terminating_by_preemption",
]
