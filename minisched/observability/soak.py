"""A soak: rounds of pods created, bound and deleted through a running scheduler, with memory
sampled after every round (Part II §2.4–2.5).

A long-running scheduler must hold its memory flat: every pod it learns about it must also forget
(the informer's store, the scheduler's cache, the queue, decision records), and bounded buffers
must actually be bounded. After a warm-up (the embedded server's watch history and the scheduler's
bounded logs fill up, allocator pools and caches reach their working size), what the process holds
after a full collection should stop growing; `SoakResult.growth_after_warmup` measures it.

Events the scheduler writes ("Scheduled") are deleted at the end of each round when
`expire_events` is set: the API server drops events after an hour (--event-ttl), a soak does not
run that long, and on the embedded cluster they would otherwise live in our own process.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from minisched.cluster.base import Cluster
from minisched.errors import NotFound
from minisched.objects import make_pod
from minisched.observability.runtime import GCPauseRecorder, MemorySample, MemoryWatch
from minisched.resources import EVENTS, PODS
from minisched.scheduler.scheduler import Scheduler

__all__ = ["CollectorPhase", "CollectorPhases", "SoakResult", "print_verdicts", "run_soak"]


@dataclass
class SoakResult:
    rounds: int
    pods_per_round: int
    samples: list[MemorySample] = field(default_factory=list)
    round_seconds: list[float] = field(default_factory=list)

    @property
    def pods(self) -> int:
        return self.rounds * self.pods_per_round

    def series(self, name: str) -> np.ndarray:
        return np.array([getattr(s, name) for s in self.samples], dtype=np.int64)

    def growth_after_warmup(self, warmup: int, name: str = "allocated_blocks") -> int:
        """How much `name` grew from the end of round `warmup` to the last round (may be < 0)."""
        if not 0 < warmup < len(self.samples):
            raise ValueError(f"warm-up must leave rounds to compare: {warmup} of {len(self.samples)}")
        values = self.series(name)
        return int(values[-1] - values[warmup - 1])

    def slope_after_warmup(self, warmup: int, name: str = "allocated_blocks") -> float:
        """Least-squares growth per round of `name` after the warm-up (a leak is a steady slope)."""
        values = self.series(name)[warmup - 1 :].astype(np.float64)
        if values.size < 2:
            raise ValueError("need at least two rounds after the warm-up to fit a slope")
        return float(np.polyfit(np.arange(values.size), values, 1)[0])


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"soak: {what} within {timeout:.0f} s")
        time.sleep(0.005)


def run_soak(
    cluster: Cluster,
    scheduler: Scheduler,
    watch: MemoryWatch,
    *,
    rounds: int,
    pods_per_round: int,
    namespace: str = "default",
    prefix: str = "soak",
    expire_events: bool = True,
    round_timeout: float = 120.0,
    budget_seconds: float | None = None,
    min_rounds: int = 1,
    on_round: Callable[[int, MemorySample], None] | None = None,
) -> SoakResult:
    """Run `rounds` rounds on a started `scheduler`: create `pods_per_round` small pods, wait
    until the scheduler has bound them all, delete them (grace period 0), wait until its cache has
    forgotten them, then `watch.sample(collect=True)`. The cluster needs nodes with room for one
    round of pods (100m CPU, 64Mi each).

    With `budget_seconds`, rounds after the first `min_rounds` start only while the budget lasts
    (a notebook on a loaded machine does fewer rounds; `SoakResult.rounds` says how many ran)."""
    if rounds < 1 or pods_per_round < 1:
        raise ValueError(f"a soak needs at least one round of one pod, got {rounds} x {pods_per_round}")
    result = SoakResult(0, pods_per_round)
    soak_started = time.perf_counter()
    for r in range(rounds):
        if budget_seconds is not None and r >= min_rounds and time.perf_counter() - soak_started > budget_seconds:
            break
        started = time.perf_counter()
        names = [f"{prefix}-{r}-{i}" for i in range(pods_per_round)]
        baseline_pods = scheduler.cache.pod_count()
        bound_before = scheduler.stats.bound
        for name in names:
            cluster.create(PODS, make_pod(name, namespace=namespace, cpu="100m", memory="64Mi"), namespace)
        _wait(lambda b=bound_before: scheduler.stats.bound - b >= pods_per_round, round_timeout,  # type: ignore[misc]
              f"round {r}: {pods_per_round} pods bound")  # fmt: skip
        scheduler.wait_for_bindings(round_timeout)
        for name in names:
            with contextlib.suppress(NotFound):
                cluster.delete(PODS, name, namespace, grace_period_seconds=0)
        _wait(lambda b=baseline_pods: scheduler.cache.pod_count() <= b, round_timeout,  # type: ignore[misc]
              f"round {r}: the scheduler's cache forgets the deleted pods")  # fmt: skip
        # the round's events written: the recorder writes them on its own thread, behind the bindings
        # (a real API server's writes lag most), and a write still queued at the sample below is
        # memory held for the moment, which the next round's sample would compare as growth
        if not scheduler.recorder.flush(round_timeout):
            raise TimeoutError(f"round {r}: the scheduler's events not written within {round_timeout:g} s")
        if expire_events:
            for event in cluster.list(EVENTS, namespace)["items"]:
                if event["involvedObject"].get("name", "").startswith(f"{prefix}-"):
                    with contextlib.suppress(NotFound):
                        cluster.delete(EVENTS, event["metadata"]["name"], namespace)
        result.round_seconds.append(time.perf_counter() - started)
        sample = watch.sample(f"round {r}", collect=True)
        result.samples.append(sample)
        result.rounds += 1
        if on_round is not None:
            on_round(r, sample)
    return result


def print_verdicts(checks: Sequence[tuple[str, bool]], overall: str) -> bool:
    """Print PASS or FAIL before each check's description, then before `overall` (PASS only when
    every check passed); return that overall verdict. The soak benches judge "flat" with it."""
    if not checks:
        raise ValueError("no checks to judge")
    print()
    for what, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {what}")
    passed = all(ok for _, ok in checks)
    print(f"{'PASS' if passed else 'FAIL'}  {overall}")
    return passed


@dataclass(frozen=True)
class CollectorPhase:
    """What the collector did in one phase of a soak: collections it chose to run itself per
    1,000 pods (by generation), their pauses, and the harness's forced full collections."""

    name: str
    rounds: int
    pods: int
    automatic_per_1000_pods: tuple[float, float, float]
    automatic_pause_p50: tuple[float, float, float]  # seconds, NaN where it ran none
    automatic_pause_max: float  # seconds, over every generation
    forced_full_p50: float  # seconds: the harness's gc.collect() after each round


class CollectorPhases:
    """The Python levers on the cyclic collector, pulled at round boundaries of a soak
    (`after_round` as `run_soak`'s `on_round`): after `warmup` rounds, `rounds_per_phase` rounds
    with the default collector, then `gc.freeze()` (everything alive moves to a permanent generation
    that collections skip), then also generation 0's threshold times `threshold_factor` (fewer
    young collections). `restore()` (or leaving the `with` block) unfreezes and puts the
    thresholds back, whatever happened."""

    NAMES = ("default collector", "after gc.freeze()", "frozen, threshold0 x{factor}")

    def __init__(self, warmup: int, rounds_per_phase: int, *, threshold_factor: int = 10) -> None:
        if warmup < 1 or rounds_per_phase < 1 or threshold_factor < 1:
            raise ValueError(f"collector phases need warmup >= 1, rounds_per_phase >= 1 and threshold_factor >= 1, "
                             f"got {warmup}, {rounds_per_phase}, {threshold_factor}")
        self.warmup, self.rounds_per_phase, self.threshold_factor = warmup, rounds_per_phase, threshold_factor
        self.defaults = gc.get_threshold()
        self.names = [n.format(factor=threshold_factor) for n in self.NAMES]
        self.starts: list[float] = []  # perf_counter() when each phase began
        self.rounds: list[int] = []
        self.ended: float | None = None

    @property
    def total_rounds(self) -> int:
        return self.warmup + 3 * self.rounds_per_phase

    def after_round(self, r: int, _sample: object = None) -> None:
        """Call after round `r` (0-based) ended; pulls the next lever at a phase boundary."""
        if self.ended is not None or r < self.warmup - 1:
            return
        if self.rounds:
            self.rounds[-1] += 1  # the round that just ended belonged to the current phase
        phase, into = divmod(r - (self.warmup - 1), self.rounds_per_phase)
        if into:
            return
        if phase == 3:
            self.restore()
            return
        if phase == 1:
            gc.freeze()
        elif phase == 2:
            th0, th1, th2 = self.defaults
            gc.set_threshold(th0 * self.threshold_factor, th1, th2)
        self.starts.append(time.perf_counter())
        self.rounds.append(0)

    def restore(self) -> None:
        if self.ended is None:
            self.ended = time.perf_counter()
        gc.unfreeze()
        gc.set_threshold(*self.defaults)

    def __enter__(self) -> CollectorPhases:
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def summary(self, recorder: GCPauseRecorder, pods_per_round: int) -> list[CollectorPhase]:
        """Per phase that ran: what `recorder` saw between its start and the next phase's."""
        ends = [*self.starts[1:], self.ended if self.ended is not None else time.perf_counter()]
        phases = []
        for name, since, until, rounds in zip(self.names, self.starts, ends, self.rounds, strict=False):
            pods = rounds * pods_per_round
            auto = [recorder.seconds(g, forced=False, since=since, until=until) for g in range(3)]
            forced = recorder.seconds(2, forced=True, since=since, until=until)
            every = np.concatenate(auto)
            phases.append(CollectorPhase(
                name, rounds, pods,
                tuple(a.size * 1000 / pods if pods else float("nan") for a in auto),  # type: ignore[arg-type]
                tuple(float(np.median(a)) if a.size else float("nan") for a in auto),  # type: ignore[arg-type]
                float(every.max()) if every.size else float("nan"),
                float(np.median(forced)) if forced.size else float("nan"),
            ))  # fmt: skip
        return phases
