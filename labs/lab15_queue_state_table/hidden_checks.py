"""Lab 15 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import inspect
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from labs.borrowed import reloaded_with
from labs.harness import Check
from labs.lab15_queue_state_table.checks import LAB, E, Q, table
from minisched.exhibits.queue_machine import queue_machine
from minisched.scheduler.lifecycle import IGNORE, QUEUE_TRANSITIONS, REFUSE, QueueEvent, QueueState

MUST_REFUSE = [(Q.ABSENT, E.POP), (Q.ABSENT, E.MOVE_READY), (Q.ACTIVE, E.DONE), (Q.ACTIVE, E.MOVE_READY),
               (Q.BACKOFF, E.POP), (Q.BACKOFF, E.MOVE_READY), (Q.UNSCHEDULABLE, E.POP),
               (Q.UNSCHEDULABLE, E.BACKOFF_EXPIRED), (Q.IN_FLIGHT, E.POP), (Q.IN_FLIGHT, E.ARRIVE_READY)]
MUST_IGNORE = [(Q.ACTIVE, E.BIND_FAILED), (Q.BACKOFF, E.BIND_REJECTED), (Q.UNSCHEDULABLE, E.BIND_FAILED),
               (Q.IN_FLIGHT, E.BIND_REJECTED), (Q.ABSENT, E.RETRY), (Q.ABSENT, E.DONE)]


def check_refusals(module: Any) -> None:
    t = table(module)
    wrong = [f"({s.name}, {e.name}) is {getattr(t[s, e], 'name', t[s, e])}, should be REFUSE"
             for s, e in MUST_REFUSE if t[s, e] is not REFUSE]
    wrong += [f"({s.name}, {e.name}) is {getattr(t[s, e], 'name', t[s, e])}, should be IGNORE"
              for s, e in MUST_IGNORE if t[s, e] is not IGNORE]
    assert not wrong, "; ".join(wrong)


# every pair the README's rules let happen, with where it goes; every other pair is REFUSE
_LATE = {E.BIND_FAILED: IGNORE, E.BIND_REJECTED: IGNORE}
_HELD = {E.GATE_CLOSED: Q.GATED}
RULES: dict[QueueState, dict[QueueEvent, Any]] = {  # (Q and E are aliases: values to mypy)
    Q.ABSENT: {E.ARRIVE_GATED: Q.GATED, E.ARRIVE_READY: Q.ACTIVE, E.DONE: IGNORE, E.REJECT: IGNORE, E.RETRY: IGNORE,
               E.BIND_FAILED: Q.BACKOFF, E.BIND_REJECTED: Q.UNSCHEDULABLE, E.DELETE: IGNORE, **_HELD},
    Q.GATED: {E.GATE_OPENED: Q.ACTIVE, E.GATE_OPENED_BACKING_OFF: Q.BACKOFF, E.GATE_CLOSED: IGNORE, **_LATE,
              E.DELETE: Q.ABSENT},
    Q.ACTIVE: {E.POP: Q.IN_FLIGHT, **_LATE, E.DELETE: Q.ABSENT},
    Q.BACKOFF: {E.BACKOFF_EXPIRED: Q.ACTIVE, **_HELD, **_LATE, E.DELETE: Q.ABSENT},
    Q.UNSCHEDULABLE: {E.MOVE_READY: Q.ACTIVE, E.MOVE_BACKING_OFF: Q.BACKOFF, **_HELD, **_LATE, E.DELETE: Q.ABSENT},
    Q.IN_FLIGHT: {E.DONE: Q.ABSENT, E.REJECT: Q.UNSCHEDULABLE, E.RETRY: Q.BACKOFF, **_HELD, **_LATE,
                  E.DELETE: Q.ABSENT},
}


def _name(value: Any) -> str:
    return str(getattr(value, "name", value))


def check_every_rule(module: Any) -> None:
    t = table(module)
    wrong = [f"({s.name}, {e.name}) is {_name(t[s, e])}, the rules say {_name(RULES[s].get(e, REFUSE))}"
             for s in Q for e in E if t[s, e] is not RULES[s].get(e, REFUSE)]
    assert not wrong, f"{len(wrong)} pairs differ from the README's rules: {'; '.join(wrong[:5])}"


def check_hypothesis(module: Any) -> None:
    search = settings(max_examples=30, stateful_step_count=10, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    steps: list[str] = []
    try:
        run_state_machine_as_test(queue_machine(table(module), steps), settings=search)
    except AssertionError as err:
        raise AssertionError(f"random operations on a queue with your table went wrong: "
                             f"{' -> '.join(steps)}: {str(err).strip().splitlines()[0]}") from None


def _decoy(original: object) -> dict[Any, Any]:
    """A table with minisched's keys and every answer IGNORE: a table copied from minisched's, however
    it was reached, comes out different when the exercise is loaded with this one in its place."""
    return dict.fromkeys(original, IGNORE)  # type: ignore[call-overload]


def check_own_table(module: Any) -> None:
    assert module.TRANSITIONS is not QUEUE_TRANSITIONS, "TRANSITIONS is minisched's own table: write yours"
    source = inspect.getsource(module)
    assert "QUEUE_TRANSITIONS" not in source, "the exercise names QUEUE_TRANSITIONS: write the table from the rules"
    mine = dict(table(module))
    again = reloaded_with(LAB, module, [QUEUE_TRANSITIONS], _decoy)
    changed = sorted(f"({s.name}, {e.name})" for (s, e), v in mine.items() if again.TRANSITIONS.get((s, e)) is not v)
    assert not changed, (
        f"with minisched's QUEUE_TRANSITIONS replaced by a decoy, your TRANSITIONS changed at {', '.join(changed[:4])}"
        f"{'...' if len(changed) > 4 else ''}: it is copied from minisched's table (by getattr, a copy, or a queue's "
        f"default), not written from the rules")


CHECKS = [
    Check("refuses what must not happen, ignores late news", check_refusals,
          "a late BIND_FAILED/BIND_REJECTED for a pod already queued is IGNORE; a pop outside ACTIVE is REFUSE."),
    Check("every pair as the README's rules say", check_every_rule,
          "read each state's rule in the README again for the pair named: what it allows, and that everything "
          "else is REFUSE."),
    Check("hypothesis finds no wrong turn in random operations", check_hypothesis,
          "run minisched.exhibits.queue_machine with your table, as chapter 5 does."),
    Check("the table is written, not borrowed", check_own_table, "write the rows from the README's rules; nothing of minisched's table, whatever the route "
          "(getattr, a copy, SchedulingQueue's default)."),
]
