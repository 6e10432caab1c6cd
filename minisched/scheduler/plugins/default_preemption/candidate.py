"""A candidate node for preemption and the choice among candidates (kube's Candidate,
SelectCandidate and pickOneNodeForPreemption): fewest PDB violations, then the lowest priority
among the highest-priority victims, the lowest sum of victim priorities, the fewest victims, the
latest start time of the highest-priority victims, then the first."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.default_preemption.importance import NOT_STARTED, start_time

MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100


@dataclass
class Candidate:
    node_name: str
    victims: list[PodInfo] = field(default_factory=list)  # most important first
    num_pdb_violations: int = 0


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
        return NOT_STARTED
    top = max(v.priority for v in victims)
    return min(start_time(v) for v in victims if v.priority == top)


def offset_and_num_candidates(
    num_nodes: int, rng: random.Random, percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE,
    absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE,
) -> tuple[int, int]:
    """kube's GetOffsetAndNumCandidates: a random start, and max(percentage% of nodes, absolute)."""
    n = max(num_nodes * percentage // 100, absolute)
    return (rng.randrange(num_nodes) if num_nodes else 0), min(n, num_nodes)
