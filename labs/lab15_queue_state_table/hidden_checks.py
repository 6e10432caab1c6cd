"""Lab 15 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import inspect
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from labs.harness import Check
from labs.lab15_queue_state_table.checks import E, Q, table
from minisched.scheduler.lifecycle import IGNORE, QUEUE_TRANSITIONS, REFUSE
from minisched.scheduler.queue_machine import queue_machine

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


def check_hypothesis(module: Any) -> None:
    search = settings(max_examples=30, stateful_step_count=10, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    steps: list[str] = []
    try:
        run_state_machine_as_test(queue_machine(table(module), steps), settings=search)
    except AssertionError as err:
        raise AssertionError(f"random operations on a queue with your table went wrong: "
                             f"{' -> '.join(steps)}: {str(err).strip().splitlines()[0]}") from None


def check_own_table(module: Any) -> None:
    assert module.TRANSITIONS is not QUEUE_TRANSITIONS, "TRANSITIONS is minisched's own table: write yours"
    source = inspect.getsource(module)
    assert "QUEUE_TRANSITIONS" not in source, "the exercise names QUEUE_TRANSITIONS: write the table from the rules"
    table(module)


CHECKS = [
    Check("refuses what must not happen, ignores late news", check_refusals,
          "a late BIND_FAILED/BIND_REJECTED for a pod already queued is IGNORE; a pop outside ACTIVE is REFUSE."),
    Check("hypothesis finds no wrong turn in random operations", check_hypothesis,
          "run minisched.scheduler.queue_machine with your table, as chapter 5 does."),
    Check("the table is written, not borrowed", check_own_table, "write the rows from the README's rules."),
]
