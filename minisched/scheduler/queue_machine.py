"""A hypothesis state machine for the scheduling queue: random operations on a real
SchedulingQueue, checked after every step against what kube's PriorityQueue promises (a plain
reference written from the rules, not from QUEUE_TRANSITIONS).

`queue_machine(transitions)` builds the machine class for a queue using the given table, so a test
or a notebook can plant a bug in a copy of the table and watch hypothesis find and shrink it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from minisched.clock import VirtualClock
from minisched.objects import make_pod
from minisched.scheduler.lifecycle import QueueEvent, QueueState, Verdict
from minisched.scheduler.queue import WILDCARD_EVENT, QueuedPodInfo, SchedulingQueue

NAMES = ("a", "b", "c")


def queue_machine(transitions: dict[tuple[QueueState, QueueEvent], QueueState | Verdict] | None = None,
                  log: list[str] | None = None) -> type[RuleBasedStateMachine]:
    """The machine class; `log` (if given) collects each run's steps, so the last failing run can be
    shown."""

    class QueueMachine(RuleBasedStateMachine):
        @initialize()
        def setup(self) -> None:
            self.clock = VirtualClock()
            self.queue = SchedulingQueue(clock=self.clock, transitions=transitions)
            self.where: dict[str, str] = {}  # the reference: pod -> where it must be
            self.flying: dict[str, QueuedPodInfo] = {}
            self.moved_during: set[str] = set()
            self.assumed: dict[str, QueuedPodInfo] = {}  # left the queue (done): may come back on a bind failure
            self.attempts: dict[str, int] = {}
            self.failed_at: dict[str, float] = {}
            if log is not None:
                log.clear()

        def _note(self, text: str) -> None:
            if log is not None:
                log.append(text)

        def _free(self) -> list[str]:
            return [n for n in NAMES if n not in self.where and n not in self.assumed]

        @precondition(lambda self: bool(self._free()))
        @rule(data=st.data(), gated=st.booleans())
        def add(self, data: Any, gated: bool) -> None:
            name = data.draw(st.sampled_from(self._free()))
            self._note(f"add {name}{' (gated)' if gated else ''}")
            self.queue.add(make_pod(name, scheduling_gates=["example.com/wait"] if gated else None))
            self.where[name] = "gated" if gated else "active"
            self.attempts[name] = 0

        @precondition(lambda self: "gated" in self.where.values())
        @rule(data=st.data())
        def ungate(self, data: Any) -> None:
            name = data.draw(st.sampled_from(sorted(n for n, w in self.where.items() if w == "gated")))
            self._note(f"ungate {name}")
            old = make_pod(name, scheduling_gates=["example.com/wait"])
            self.queue.update(old, make_pod(name))
            self.where[name] = "active"

        @precondition(lambda self: "active" in self.where.values())
        @rule()
        def pop(self) -> None:
            qpi = self.queue.pop(timeout=0)
            active = [n for n, w in self.where.items() if w == "active"]
            self._note(f"pop -> {qpi.key.split('/')[1] if qpi else None}")
            if not active:
                assert qpi is None, f"popped {qpi.key if qpi else ''} with no pod active"
                return
            assert qpi is not None, f"nothing popped though {active} are active"
            name = qpi.key.split("/", 1)[1]
            assert name in active, f"popped {name}, which should be {self.where.get(name, 'gone')}"
            self.where[name] = "in-flight"
            self.flying[name] = qpi
            self.moved_during.discard(name)
            self.attempts[name] += 1

        @precondition(lambda self: bool(self.flying))
        @rule(data=st.data())
        def reject(self, data: Any) -> None:
            self._finish(data, "reject")

        @precondition(lambda self: bool(self.flying))
        @rule(data=st.data())
        def error(self, data: Any) -> None:
            self._finish(data, "error")

        @precondition(lambda self: bool(self.flying))
        @rule(data=st.data())
        def done(self, data: Any) -> None:
            self._finish(data, "done")

        def _finish(self, data: Any, outcome: str) -> None:
            name = data.draw(st.sampled_from(sorted(self.flying)))
            qpi = self.flying.pop(name)
            self._note(f"{outcome} {name}")
            live = self.where.get(name) == "in-flight"
            if outcome == "done":
                self.queue.done(qpi.key)
                if live:
                    del self.where[name]
                    self.assumed[name] = qpi
            else:
                self.queue.add_unschedulable(qpi, rejected_by=["NodeAffinity"] if outcome == "reject" else (),
                                             error=outcome == "error")
                if live:  # a pod deleted during its attempt is dropped
                    self.failed_at[name] = self.clock.monotonic()
                    retry = outcome == "error" or name in self.moved_during
                    self.where[name] = "backoff" if retry else "unschedulable"
            self.moved_during.discard(name)

        @precondition(lambda self: bool(self.assumed))
        @rule(data=st.data(), rejected=st.booleans())
        def binding_fails(self, data: Any, rejected: bool) -> None:
            name = data.draw(st.sampled_from(sorted(self.assumed)))
            qpi = self.assumed.pop(name)
            self._note(f"binding of {name} {'rejected' if rejected else 'failed'}")
            self.queue.requeue_after_bind_failure(qpi, rejected_by=["Coscheduling"] if rejected else None)
            if name not in self.where:
                self.where[name] = "unschedulable" if rejected else "backoff"
                self.failed_at[name] = self.clock.monotonic()

        @precondition(lambda self: bool(self.flying) or "unschedulable" in self.where.values())
        @rule()
        def cluster_event(self) -> None:
            self._note("cluster event")
            self.queue.move_all_to_active_or_backoff(WILDCARD_EVENT)
            self.moved_during |= set(self.flying)
            now = self.clock.monotonic()
            for name, w in list(self.where.items()):
                if w == "unschedulable":  # kube: 1 s backoff doubling per attempt, at most 10 s
                    backoff = min(1.0 * 2 ** (self.attempts[name] - 1), 10.0)
                    self.where[name] = "backoff" if now < self.failed_at[name] + backoff else "active"

        @precondition(lambda self: bool(self.where))
        @rule()
        def time_passes(self) -> None:
            self._note("11 s pass, backoffQ flushed")
            self.clock.advance(11)  # longer than the longest backoff (10 s)
            self.queue.flush_backoff_completed()
            for name, w in self.where.items():
                if w == "backoff":
                    self.where[name] = "active"

        @precondition(lambda self: bool(self.where) or bool(self.assumed))
        @rule(data=st.data())
        def delete(self, data: Any) -> None:
            name = data.draw(st.sampled_from(sorted({*self.where, *self.assumed})))
            self._note(f"delete {name}")
            self.queue.delete(make_pod(name))
            self.moved_during.discard(name)
            self.where.pop(name, None)
            self.assumed.pop(name, None)

        @invariant()
        def every_pod_is_where_the_rules_say(self) -> None:
            if not hasattr(self, "queue"):
                return
            for name in NAMES:
                expected = self.where.get(name)
                actual = self.queue.where(f"default/{name}")
                assert actual == expected, f"pod {name} is {actual or 'gone'}, should be {expected or 'gone'}"
            queued = sum(1 for w in self.where.values() if w != "in-flight")
            assert len(self.queue) == queued, f"the queue holds {len(self.queue)} pods, should be {queued}"

    return QueueMachine
