"""Opportunistic batching: kube-scheduler 1.35's OpportunisticBatching (KEP-5598, beta, on by default).

A Deployment scaling up sends a stream of pods that ask the same question. When each pod fills a
node (one pod per node), the scores of the other nodes do not change from one pod to the next, so
the sorted scores of one cycle answer the next: its best node that is still free. kube keeps them
(pkg/scheduler/framework/runtime/batch.go) and minisched does the same, rule for rule:

- The pod's signature is the profile's one (signature.py, the same the reuse cache keys on),
  when no plugin refuses to batch this pod (pod affinity, topology spreading, defaulted spreading,
  resource claims: `PodSigner.batch_signature`, kube's SignPod); otherwise, or when a plugin of
  the profile has no `sign_pod`, the pod has no signature and no batching.
- After scoring, the chosen node is popped and the rest kept, sorted, with the signature
  (`store_schedule_results`).
- The next cycle (`get_node_hint`, right after PreFilter) gets the next node of that list as a
  hint when: there is a list, this cycle is the next one (cycle count + 1: no pod of another
  profile, no failed pod in between), the last cycle succeeded, the signature is equal, the list is
  younger than 500 ms, the node chosen last still exists and now *rejects* this pod (it is full:
  otherwise it might be best again, and the old order would be wrong).
- The hint is then judged like a nominated node: if it passes the filters the pod goes there
  without a scoring pass; otherwise the full cycle runs.

The counters are kube's metrics, under its label values: scheduler_batch_attempts_total{result}
(no_hint, hint_used, hint_not_used) and scheduler_batch_cache_flushed_total{reason}.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.features import OPPORTUNISTIC_BATCHING
from minisched.scheduler.framework.signature import Signature
from minisched.scheduler.framework.types import PodInfo

MAX_BATCH_AGE = 0.5  # seconds (kube's maxBatchAge)

# scheduler_batch_attempts_total{result}
NO_HINT = "no_hint"
HINT_USED = "hint_used"
HINT_NOT_USED = "hint_not_used"
ATTEMPT_RESULTS = (NO_HINT, HINT_USED, HINT_NOT_USED)
# scheduler_batch_cache_flushed_total{reason}
POD_FAILED = "pod_failed"  # kube 1.35.4 never records it: a failed cycle stores nothing, so the
# next cycle is not last + 1 and the flush is counted as pod_skipped
POD_SKIPPED = "pod_skipped"
NODE_MISSING = "node_missing"
NODE_NOT_FULL = "node_not_full"
EMPTY_LIST = "empty_list"
EXPIRED = "expired"
POD_INCOMPATIBLE = "pod_incompatible"
POD_NOT_BATCHABLE = "pod_not_batchable"
FLUSH_REASONS = (POD_FAILED, POD_SKIPPED, NODE_MISSING, NODE_NOT_FULL, EMPTY_LIST, EXPIRED, POD_INCOMPATIBLE,
                 POD_NOT_BATCHABLE)


class SortedScoredNodes:
    """The feasible nodes of a scored cycle but the chosen one, best total first (kube's
    sortedNodeScores after its Pop). Sorted on the first pop: a list nobody asks for costs nothing.
    Equal totals come in random order (kube's Randomizer), or in row order without `rng`."""

    def __init__(self, names: Sequence[str], rows: npt.NDArray[np.intp], totals: npt.NDArray[np.int64],
                 rng: np.random.Generator | None = None, chosen: int | None = None) -> None:
        self._names = names
        self._rows = rows  # the scored rows, and their totals; `chosen` (a position in them) is left out
        self._totals = totals
        self._rng = rng  # orders equal totals at random (kube: its Randomizer); None: row order
        self._chosen = chosen
        self._order: list[str] | None = None
        self._next = 0

    @classmethod
    def of(cls, names: Iterable[str]) -> SortedScoredNodes:
        """A list in the given order (tests)."""
        listed = list(names)
        out = cls(listed, np.arange(len(listed), dtype=np.intp), np.zeros(len(listed), np.int64))
        out._order = listed
        return out

    def _sorted(self) -> list[str]:
        if self._order is None:
            rows, totals = self._rows, self._totals
            if self._chosen is not None:
                keep = np.ones(rows.size, np.bool_)
                keep[self._chosen] = False
                rows, totals = rows[keep], totals[keep]
            if self._rng is not None:
                order = np.lexsort((self._rng.random(totals.size), -totals))
            else:
                order = np.argsort(-totals, kind="stable")
            names = self._names
            self._order = [names[int(rows[i])] for i in order]
        return self._order

    def pop(self) -> str:
        order = self._sorted()
        name = order[self._next]
        self._next += 1
        return name

    def remaining(self) -> list[str]:
        return self._sorted()[self._next:]

    def __len__(self) -> int:
        return len(self._rows) - (self._chosen is not None) - self._next


@dataclass
class BatchStats:
    """kube's batch metrics for one profile: attempts by result, flushes by reason."""

    attempts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ATTEMPT_RESULTS, 0))
    flushed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FLUSH_REASONS, 0))
    batched_pods: int = 0  # pods placed on their hint (kube's TotalBatchedPods)


@dataclass
class _State:
    signature: Signature
    nodes: SortedScoredNodes
    created: float


@dataclass
class _Cycle:
    count: int = 0
    chosen: str = ""
    succeeded: bool = False


class OpportunisticBatch:
    """One profile's batch state (kube's OpportunisticBatch). `clock` gives seconds (monotonic);
    `sign` signs a pod (the framework's sign_pod with its plugins)."""

    def __init__(self, sign: Callable[[PodInfo], Signature | None], *, clock: Callable[[], float] = time.monotonic,
                 max_age: float = MAX_BATCH_AGE) -> None:
        self.sign = sign
        self.clock = clock
        self.max_age = max_age
        self.state: _State | None = None
        self.last = _Cycle()
        self.stats = BatchStats()

    def get_node_hint(self, pod: PodInfo, cycle: int, last_node_rejects: Callable[[str], bool | None]
                      ) -> tuple[str, Signature | None]:
        """(hint or "", the pod's signature). `last_node_rejects(node)`: None if the node is gone,
        else whether the filters reject the pod there now (kube's RunFilterPlugins)."""
        signature = self.sign(pod)
        if not self._compatible(signature, cycle, last_node_rejects):
            self.stats.attempts[NO_HINT] += 1
            return "", signature
        assert self.state is not None
        return self.state.nodes.pop(), signature

    def _compatible(self, signature: Signature | None, cycle: int,
                    last_node_rejects: Callable[[str], bool | None]) -> bool:
        state = self.state
        if state is None or len(state.nodes) == 0:
            return False
        if cycle != self.last.count + 1:  # a pod of another profile, or a failed one, came between
            return self._flush(POD_SKIPPED)
        if not self.last.succeeded:
            return self._flush(POD_FAILED)
        if signature is None or signature != state.signature:
            return self._flush(POD_INCOMPATIBLE)
        if self.clock() > state.created + self.max_age:
            return self._flush(EXPIRED)
        rejects = last_node_rejects(self.last.chosen)
        if rejects is None:
            return self._flush(NODE_MISSING)
        if not rejects:  # the node chosen last could be best again: the old order says nothing
            return self._flush(NODE_NOT_FULL)
        return True

    def _flush(self, reason: str) -> bool:
        """kube's logUnusableState: count why the state cannot serve this cycle. As in kube, only
        store_schedule_results replaces or drops the state itself."""
        self.stats.flushed[reason] += 1
        return False

    def store_schedule_results(self, signature: Signature | None, hinted: str, chosen: str,
                               others: SortedScoredNodes | None, cycle: int) -> None:
        """After a cycle chose `chosen`: remember the cycle; keep the state if the hint was used,
        else keep `others` (the rest, sorted) for the next pod of this signature."""
        self.last = _Cycle(cycle, chosen, True)
        if hinted and hinted == chosen:
            self.stats.attempts[HINT_USED] += 1
            self.stats.batched_pods += 1
            return
        if hinted:
            self.stats.attempts[HINT_NOT_USED] += 1
        if signature is not None and others is not None and len(others) > 0:
            self.state = _State(signature, others, self.clock())
        else:
            self._flush(EMPTY_LIST if others is None or len(others) == 0 else POD_NOT_BATCHABLE)
            self.state = None

    def remaining(self) -> list[str]:
        """The nodes the next hints would come from, in order (for notebooks and tests)."""
        return [] if self.state is None else self.state.nodes.remaining()


__all__ = [
    "OPPORTUNISTIC_BATCHING",
    "MAX_BATCH_AGE",
    "BatchStats",
    "OpportunisticBatch",
    "SortedScoredNodes",
]
