"""Lab 15, the instructor's solution: the table written from the README's rules."""

from __future__ import annotations

from minisched.scheduler.lifecycle import IGNORE, REFUSE, QueueEvent, QueueState, Verdict

Q, E = QueueState, QueueEvent


def _row(state: QueueState, allowed: dict[QueueEvent, QueueState | Verdict]) -> dict[
        tuple[QueueState, QueueEvent], QueueState | Verdict]:
    """One state's row: the events it allows, every other event refused."""
    return {(state, event): allowed.get(event, REFUSE) for event in QueueEvent}


LATE_BINDING_FAILURES: dict[QueueEvent, QueueState | Verdict] = {E.BIND_FAILED: IGNORE, E.BIND_REJECTED: IGNORE}
HELD_ON_THE_WAY: dict[QueueEvent, QueueState | Verdict] = {E.GATE_CLOSED: Q.GATED}

TRANSITIONS: dict[tuple[QueueState, QueueEvent], QueueState | Verdict] = {
    **_row(Q.ABSENT, {E.ARRIVE_GATED: Q.GATED, E.ARRIVE_READY: Q.ACTIVE,
                      E.DONE: IGNORE, E.REJECT: IGNORE, E.RETRY: IGNORE,  # deleted during its cycle
                      E.BIND_FAILED: Q.BACKOFF, E.BIND_REJECTED: Q.UNSCHEDULABLE, E.DELETE: IGNORE,
                      **HELD_ON_THE_WAY}),  # its binding failed, and PreEnqueue holds it
    **_row(Q.GATED, {E.GATE_OPENED: Q.ACTIVE, E.GATE_OPENED_BACKING_OFF: Q.BACKOFF, E.GATE_CLOSED: IGNORE,
                     **LATE_BINDING_FAILURES, E.DELETE: Q.ABSENT}),
    **_row(Q.ACTIVE, {E.POP: Q.IN_FLIGHT, **LATE_BINDING_FAILURES, E.DELETE: Q.ABSENT}),
    **_row(Q.BACKOFF, {E.BACKOFF_EXPIRED: Q.ACTIVE, **HELD_ON_THE_WAY, **LATE_BINDING_FAILURES,
                       E.DELETE: Q.ABSENT}),
    **_row(Q.UNSCHEDULABLE, {E.MOVE_READY: Q.ACTIVE, E.MOVE_BACKING_OFF: Q.BACKOFF, **HELD_ON_THE_WAY,
                             **LATE_BINDING_FAILURES, E.DELETE: Q.ABSENT}),
    **_row(Q.IN_FLIGHT, {E.DONE: Q.ABSENT, E.REJECT: Q.UNSCHEDULABLE, E.RETRY: Q.BACKOFF, **HELD_ON_THE_WAY,
                         **LATE_BINDING_FAILURES, E.DELETE: Q.ABSENT}),
}
