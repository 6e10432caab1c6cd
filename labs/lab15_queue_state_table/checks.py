"""Lab 15 checks (public).

    python -m labs.lab15_queue_state_table.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import sys
from typing import Any

from labs.harness import Check, main
from minisched.clock import VirtualClock
from minisched.objects import make_pod
from minisched.scheduler.lifecycle import IllegalTransition, QueueEvent, QueueState, check_exhaustive
from minisched.scheduler.queue import WILDCARD_EVENT, SchedulingQueue

LAB = "lab15_queue_state_table"
Q, E = QueueState, QueueEvent


def table(module: Any) -> Any:
    """The student's table, refused with the missing pairs named when it is not exhaustive."""
    t = module.TRANSITIONS
    missing = {s: [e.name for e in QueueEvent if (s, e) not in t] for s in QueueState}
    rows = [f"{s.name} ({', '.join(es) if len(es) < len(QueueEvent) else 'the whole row'})"
            for s, es in missing.items() if es]
    assert not rows, f"your table is not exhaustive: {sum(map(len, missing.values()))} pairs missing: {'; '.join(rows)}"
    try:
        check_exhaustive(t, QueueState, QueueEvent)
    except ValueError as err:
        raise AssertionError(str(err)) from None
    return t


def queue(module: Any, **options: Any) -> tuple[SchedulingQueue, VirtualClock]:
    clock = VirtualClock()
    return SchedulingQueue(clock=clock, transitions=table(module), **options), clock


class Quota:
    """A PreEnqueue plugin that holds every pod while its namespace's quota is used up."""

    def __init__(self) -> None:
        self.full = False

    def __call__(self, pod: dict[str, Any]) -> str | None:
        return "Quota" if self.full else None


class Walk:
    """Drive one queue and say, on a wrong turn, the whole path that led there."""

    def __init__(self, module: Any, **options: Any) -> None:
        self.queue, self.clock = queue(module, **options)
        self.path: list[str] = []

    def do(self, what: str, action: Any) -> Any:
        self.path.append(what)
        try:
            return action()
        except IllegalTransition as err:
            raise AssertionError(f"after {' -> '.join(self.path)}: your table refused it ({err})") from None

    def expect(self, pod: str, where: str | None) -> None:
        got = self.queue.where(f"default/{pod}")
        assert got == where, (f"after {' -> '.join(self.path)}: pod {pod} should be "
                              f"{where or 'out of the queue'}, it is {got or 'out of the queue'}")


def check_life(module: Any) -> None:
    w = Walk(module)
    w.do("add p", lambda: w.queue.add(make_pod("p")))
    w.expect("p", "active")
    attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
    w.expect("p", "in-flight")
    w.do("reject p (no node fits)", lambda: w.queue.add_unschedulable(attempt, rejected_by=["NodeAffinity"]))
    w.expect("p", "unschedulable")
    w.do("a cluster event at once", lambda: w.queue.move_all_to_active_or_backoff(WILDCARD_EVENT))
    w.expect("p", "backoff")  # its 1 s backoff has not expired
    w.clock.advance(2.5)
    w.do("2.5 s later, the backoff flush", w.queue.flush_backoff_completed)
    w.expect("p", "active")  # its backoff ended in the last 1 s window, which has passed
    attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
    w.do("a cluster event during its attempt", lambda: w.queue.move_all_to_active_or_backoff(WILDCARD_EVENT))
    w.do("reject p again", lambda: w.queue.add_unschedulable(attempt, rejected_by=["NodeAffinity"]))
    w.expect("p", "backoff")  # the event may be what it needed
    attempt = w.do("pop with activeQ empty (takes it from backoffQ)", lambda: w.queue.pop(timeout=0))
    assert attempt is not None, f"after {' -> '.join(w.path)}: pop() found no pod"
    w.expect("p", "in-flight")
    w.do("an error in its cycle", lambda: w.queue.add_unschedulable(attempt, error=True))
    w.expect("p", "backoff")
    w.do("pop with activeQ empty", lambda: w.queue.pop(timeout=0))
    w.expect("p", "backoff")  # a pod that failed with an error waits its backoff out
    w.clock.advance(5)
    w.do("5 s later, the backoff flush", w.queue.flush_backoff_completed)
    w.expect("p", "active")
    attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
    w.do("done (assumed on a node)", lambda: w.queue.done(attempt.key))
    w.expect("p", None)


def check_deleted(module: Any) -> None:
    w = Walk(module)
    w.do("add a", lambda: w.queue.add(make_pod("a")))
    attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
    w.do("delete a during its cycle", lambda: w.queue.delete(make_pod("a")))
    w.expect("a", None)
    w.do("its cycle rejects it", lambda: w.queue.add_unschedulable(attempt, rejected_by=["NodeAffinity"]))
    w.expect("a", None)  # dropped, not requeued
    w.do("delete a again", lambda: w.queue.delete(make_pod("a")))
    w.expect("a", None)
    w.do("add b", lambda: w.queue.add(make_pod("b")))
    attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
    w.do("an error in its cycle", lambda: w.queue.add_unschedulable(attempt, error=True))
    w.do("delete b while it backs off", lambda: w.queue.delete(make_pod("b")))
    w.expect("b", None)
    w.do("add c", lambda: w.queue.add(make_pod("c")))
    attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
    w.do("reject c", lambda: w.queue.add_unschedulable(attempt, rejected_by=["NodeAffinity"]))
    w.do("delete c while unschedulable", lambda: w.queue.delete(make_pod("c")))
    w.expect("c", None)
    w.do("add d (gated)", lambda: w.queue.add(make_pod("d", scheduling_gates=["example.com/wait"])))
    w.expect("d", "gated")
    w.do("delete d", lambda: w.queue.delete(make_pod("d")))
    w.expect("d", None)


def check_binding_failures(module: Any) -> None:
    w = Walk(module)
    for name in ("e", "r"):
        w.do(f"add {name}", lambda name=name: w.queue.add(make_pod(name)))
    attempts = {}
    for _ in range(2):
        attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
        w.do(f"done {attempt.key}", lambda attempt=attempt: w.queue.done(attempt.key))
        attempts[attempt.key.split("/")[1]] = attempt
    w.do("e's binding fails with an error", lambda: w.queue.requeue_after_bind_failure(attempts["e"]))
    w.expect("e", "backoff")
    w.do("Permit rejects r", lambda: w.queue.requeue_after_bind_failure(attempts["r"], rejected_by=["Coscheduling"]))
    w.expect("r", "unschedulable")


def check_held_on_the_way(module: Any) -> None:
    quota = Quota()
    w = Walk(module, pre_enqueue=[quota])

    def fill(full: bool) -> None:
        quota.full = full

    w.do("add a", lambda: w.queue.add(make_pod("a")))
    attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
    w.do("the quota fills up", lambda: fill(True))
    w.do("an error in a's cycle", lambda: w.queue.add_unschedulable(attempt, error=True))
    w.expect("a", "gated")  # on its way to backoffQ, PreEnqueue holds it
    w.do("the quota frees", lambda: fill(False))
    w.do("a is updated", lambda: w.queue.update(make_pod("a"), make_pod("a", labels={"team": "x"})))
    w.expect("a", "backoff")  # let out (the GATED row), its 1 s backoff from the error not over yet
    w.clock.advance(2.5)
    w.do("2.5 s later, the backoff flush", w.queue.flush_backoff_completed)
    w.expect("a", "active")
    attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
    w.do("done (assumed on a node)", lambda: w.queue.done(attempt.key))
    w.do("the quota fills up", lambda: fill(True))
    w.do("a's binding fails", lambda: w.queue.requeue_after_bind_failure(attempt))
    w.expect("a", "gated")
    w.do("the quota frees", lambda: fill(False))
    w.do("add b", lambda: w.queue.add(make_pod("b")))
    attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
    w.do("reject b", lambda: w.queue.add_unschedulable(attempt, rejected_by=["NodeAffinity"]))
    w.expect("b", "unschedulable")
    w.do("the quota fills up", lambda: fill(True))
    w.do("a cluster event", lambda: w.queue.move_all_to_active_or_backoff(WILDCARD_EVENT))
    w.expect("b", "gated")
    w = Walk(module, pre_enqueue=[quota], pop_from_backoff=False)
    w.path.append("a queue without SchedulerPopFromBackoffQ")
    w.do("the quota frees", lambda: fill(False))
    w.do("add c", lambda: w.queue.add(make_pod("c")))
    attempt = w.do("pop", lambda: w.queue.pop(timeout=0))
    w.do("an error in c's cycle", lambda: w.queue.add_unschedulable(attempt, error=True))
    w.expect("c", "backoff")  # PreEnqueue is asked when it leaves backoffQ, not on the way in
    w.do("the quota fills up", lambda: fill(True))
    w.clock.advance(5)
    w.do("5 s later, the backoff flush", w.queue.flush_backoff_completed)
    w.expect("c", "gated")


CHECKS = [
    Check("a pod's life: active, in flight, unschedulable, backoff, done", check_life,
          "IN_FLIGHT: DONE -> ABSENT, REJECT -> UNSCHEDULABLE, RETRY -> BACKOFF; UNSCHEDULABLE: MOVE_BACKING_OFF -> "
          "BACKOFF, MOVE_READY -> ACTIVE; BACKOFF: BACKOFF_EXPIRED -> ACTIVE (pop() with activeQ empty takes a "
          "rejected pod from backoffQ that way: BACKOFF_EXPIRED, then POP).", points=2),
    Check("deleted pods leave, and late news of them changes nothing", check_deleted,
          "DELETE -> ABSENT from every state a pod can be in; in ABSENT, DONE/REJECT/RETRY/DELETE are IGNORE."),
    Check("a failed binding brings the pod back", check_binding_failures,
          "in ABSENT: BIND_FAILED -> BACKOFF, BIND_REJECTED -> UNSCHEDULABLE."),
    Check("PreEnqueue holds a pod on its way back into the queues", check_held_on_the_way,
          "GATE_CLOSED -> GATED from every state a pod leaves for activeQ or backoffQ: IN_FLIGHT, ABSENT (a failed "
          "binding), UNSCHEDULABLE, BACKOFF."),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
