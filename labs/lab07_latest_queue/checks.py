"""Lab 7 checks (public).

    python -m labs.lab07_latest_queue.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import random
import sys
from typing import Any

from labs.harness import Check, call_within, main, wait_until
from minisched.cluster.embedded import EmbeddedCluster
from minisched.concurrency.mm1k import mm1k_drop_fraction
from minisched.informer.factory import SharedInformerFactory
from minisched.informer.handlers import ResourceEventHandlerFuncs
from minisched.objects import make_pod

LAB = "lab07_latest_queue"


def offers_without_blocking(module: Any) -> None:
    """Fails at once, saying so, when offer() waits on a full queue: every check that fills a queue
    would otherwise hang until its time limit."""
    q = module.new(1)
    call_within(2.0, "offer() into an empty LatestQueue(1)", lambda: q.offer("first"))
    call_within(2.0, "offer() into a full LatestQueue(1), nobody reading (it must drop the oldest, never wait)",
                lambda: q.offer("second"))


def check_keeps_newest(module: Any) -> None:
    q = module.new(3)
    answers = [call_within(2.0, f"offer({i}) into LatestQueue(3) holding {min(i - 1, 3)} items, nobody reading",
                           lambda i=i: q.offer(i)) for i in range(1, 6)]
    assert answers == [True, True, True, False, False], (
        f"maxsize 3, offering 1..5: expected offer() to answer [True, True, True, False, False] "
        f"(False: the oldest was dropped), got {answers}")
    assert (q.accepted, q.dropped, len(q)) == (5, 2, 3), (
        f"expected accepted 5, dropped 2, 3 waiting; got accepted {q.accepted}, dropped {q.dropped}, {len(q)} waiting")
    got = [q.get(timeout=0) for _ in range(3)]
    assert got == [3, 4, 5], f"the newest three should be kept, oldest first: expected [3, 4, 5], got {got}"
    empty = q.get(timeout=0)
    assert empty is None, f"get(timeout=0) on an empty queue: expected None, got {empty!r}"


def simulate(module: Any, load: float, buffer: int, arrivals: int, seed: int) -> tuple[float, list[int]]:
    """M/M/1/K through your queue, event by event (no real time): Poisson arrivals of rate `load`
    offered to LatestQueue(buffer), one exponential server of rate 1 that takes an item when it
    starts serving it. Returns the drop fraction and the items served, in order."""
    rng = random.Random(seed)
    q = module.new(buffer)
    now, next_arrival, service_ends = 0.0, rng.expovariate(load), None
    offered, served = 0, []
    while offered < arrivals:
        if service_ends is not None and service_ends <= next_arrival:
            now, service_ends = service_ends, None
        else:
            now = next_arrival
            q.offer(offered)
            offered += 1
            next_arrival = now + rng.expovariate(load)
        if service_ends is None and len(q):
            served.append(q.get(timeout=0))
            service_ends = now + rng.expovariate(1.0)
    return q.dropped / offered, served


def check_mm1k(module: Any) -> None:
    offers_without_blocking(module)
    for buffer in (1, 8):
        for load in (0.9, 1.2):
            formula = mm1k_drop_fraction(load, 1.0, buffer + 1)
            dropped, served = simulate(module, load, buffer, 20_000, seed=buffer)
            assert abs(dropped - formula) < 0.02, (
                f"buffer {buffer}, load {load}: M/M/1/K says {formula:.4f} of the items are dropped, "
                f"your queue dropped {dropped:.4f}")
            assert served == sorted(served), f"buffer {buffer}, load {load}: items came out of order: {served[:12]}..."


def check_informer_handler(module: Any) -> None:
    offers_without_blocking(module)
    q = module.new(4)
    q.offer("warm-up")
    q.get(timeout=0)  # fails here first, not in the informer's thread
    cluster = EmbeddedCluster()
    factory = SharedInformerFactory(cluster)
    delivered: list[str] = []

    def add(pod: dict[str, Any], initial: bool) -> None:
        q.offer(pod["metadata"]["name"])
        delivered.append(pod["metadata"]["name"])

    try:
        factory.informer_for("pods").add_event_handler(ResourceEventHandlerFuncs(add=add))
        factory.start()
        for i in range(10):
            cluster.create("pods", make_pod(f"pod-{i}"))
        wait_until(lambda: len(delivered) == 10,
                   f"the informer's handler offered {len(delivered)} of 10 pods: did offer() block?")
        kept = [q.get(timeout=0) for _ in range(len(q))]
        assert kept == ["pod-6", "pod-7", "pod-8", "pod-9"] and q.dropped == 6, (
            "10 pods through an informer's handler into LatestQueue(4), nobody reading: expected the newest four "
            f"['pod-6', 'pod-7', 'pod-8', 'pod-9'] kept and 6 dropped; got {kept}, {q.dropped} dropped")
    finally:
        factory.shutdown()
        cluster.close()


CHECKS = [
    Check("keeps the newest, drops the oldest, counts it", check_keeps_newest,
          "when len(self._items) == self.maxsize: popleft() the oldest, count it, then append the new one.",
          points=2),
    Check("drops as often as M/M/1/K predicts", check_mm1k,
          "get(timeout=0) takes the oldest item if there is one, else returns None at once."),
    Check("behind a pod informer's event handler", check_informer_handler,
          "offer() must never wait: the informer calls it on its own thread for every pod.", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
