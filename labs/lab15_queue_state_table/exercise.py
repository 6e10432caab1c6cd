"""Lab 15 starter: write the scheduling queue's transition table (see README.md)."""

from __future__ import annotations

from minisched.scheduler.lifecycle import IGNORE, REFUSE, QueueEvent, QueueState, Verdict

Q, E = QueueState, QueueEvent

TRANSITIONS: dict[tuple[QueueState, QueueEvent], QueueState | Verdict] = {
    # held by PreEnqueue: written for you, as an example
    (Q.GATED, E.ARRIVE_GATED): REFUSE,  # a known pod's add is an update
    (Q.GATED, E.ARRIVE_READY): REFUSE,
    (Q.GATED, E.GATE_OPENED): Q.ACTIVE,
    (Q.GATED, E.GATE_OPENED_BACKING_OFF): Q.BACKOFF,  # let out while a failed attempt's backoff lasts
    (Q.GATED, E.GATE_CLOSED): IGNORE,  # let out, but PreEnqueue asked on the way holds it still: it stays
    (Q.GATED, E.POP): REFUSE,
    (Q.GATED, E.DONE): REFUSE,
    (Q.GATED, E.REJECT): REFUSE,
    (Q.GATED, E.RETRY): REFUSE,
    (Q.GATED, E.BACKOFF_EXPIRED): REFUSE,
    (Q.GATED, E.MOVE_READY): REFUSE,  # only PreEnqueue lets a gated pod out
    (Q.GATED, E.MOVE_BACKING_OFF): REFUSE,
    (Q.GATED, E.BIND_FAILED): IGNORE,  # already back (an update re-added it)
    (Q.GATED, E.BIND_REJECTED): IGNORE,
    (Q.GATED, E.DELETE): Q.ABSENT,
    # your rows here: ABSENT, ACTIVE, BACKOFF, UNSCHEDULABLE, IN_FLIGHT
}
