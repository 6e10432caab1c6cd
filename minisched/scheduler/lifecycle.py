"""A pod's life in the scheduler and a PodGroup's, as explicit transition tables (Part II §5).

The book's "state machine as code": every (state, event) pair is written down, so adding a state
or an event forces a decision for every row and column. Each entry is one of

- a state: the event moves the object there;
- IGNORE: the event is expected in that state and changes nothing (say, a second delete);
- REFUSE: the event must not happen in that state: the code that fired it has a bug, and
  `IllegalTransition` names the state and the event.

`check_exhaustive` proves a table covers every pair (tests and import time run it). The tables
are not a model beside the code: SchedulingQueue moves a pod between its heaps and maps by
looking up QUEUE_TRANSITIONS, SchedulerCache decides what assume/confirm/forget/expire do by
CACHE_TRANSITIONS, and Coscheduling keeps each group's phase by GROUP_TRANSITIONS.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Final, TypeVar


class Verdict(enum.Enum):
    IGNORE = "ignore"
    REFUSE = "refuse"


IGNORE: Final = Verdict.IGNORE
REFUSE: Final = Verdict.REFUSE


class IllegalTransition(RuntimeError):
    """An event arrived in a state where the table refuses it."""

    def __init__(self, table: str, state: enum.Enum, event: enum.Enum, subject: str = "") -> None:
        self.state, self.event = state, event
        who = f" for {subject}" if subject else ""
        super().__init__(f"{table}: event {event.name} is refused in state {state.name}{who}")


S = TypeVar("S", bound=enum.Enum)
E = TypeVar("E", bound=enum.Enum)
Table = Mapping[tuple[S, E], "S | Verdict"]


def check_exhaustive(table: Mapping[tuple[S, E], S | Verdict], states: Iterable[S], events: Iterable[E]) -> None:
    """Raise ValueError naming every (state, event) pair the table leaves out, and any entry
    that is not a state of the machine or a verdict."""
    states, events = list(states), list(events)
    missing = [f"({s.name}, {e.name})" for s in states for e in events if (s, e) not in table]
    extra = [f"({s.name}, {e.name})" for (s, e) in table if s not in states or e not in events]
    bad = [f"({s.name}, {e.name}) -> {v!r}" for (s, e), v in table.items()
           if not isinstance(v, Verdict) and v not in states]
    problems = []
    if missing:
        problems.append(f"{len(missing)} pairs missing: {', '.join(missing)}")
    if extra:
        problems.append(f"entries for unknown states or events: {', '.join(extra)}")
    if bad:
        problems.append(f"targets that are no state: {', '.join(bad)}")
    if problems:
        raise ValueError("transition table is not exhaustive: " + "; ".join(problems))


def step(name: str, table: Mapping[tuple[S, E], S | Verdict], state: S, event: E, subject: str = "") -> S:
    """The state after `event` (the same state for IGNORE); IllegalTransition for REFUSE."""
    target = table[state, event]
    if target is REFUSE:
        raise IllegalTransition(name, state, event, subject)
    if target is IGNORE:
        return state
    return target


# --- a pending pod in the scheduling queue ---------------------------------------------------------------


class QueueState(enum.Enum):
    ABSENT = "absent"  # not in the queue: never seen, assumed (left the queue), or deleted
    GATED = "gated"  # held by a PreEnqueue plugin
    ACTIVE = "active"
    BACKOFF = "backoff"
    UNSCHEDULABLE = "unschedulable"
    IN_FLIGHT = "in-flight"  # popped, its scheduling cycle running


class QueueEvent(enum.Enum):
    ARRIVE_GATED = enum.auto()  # a new pending pod that PreEnqueue holds
    ARRIVE_READY = enum.auto()  # a new pending pod that PreEnqueue lets through
    # an update, an event its gating plugin registered, or Activate lets a gated pod out: to activeQ;
    # PreEnqueue, asked on the way (kube's moveToActiveQ), may hold it still
    GATE_OPENED = enum.auto()
    # the same, but the pod is still backing off from a failed attempt that PreEnqueue held it after
    # (kube's requeuePodWithQueueingStrategy: isPodBackingoff -> moveToBackoffQ): to backoffQ. A pod
    # gated since it arrived never failed and has no backoff
    GATE_OPENED_BACKING_OFF = enum.auto()
    # on its way to activeQ or backoffQ, PreEnqueue asked again holds it (kube's moveToActiveQ and,
    # with SchedulerPopFromBackoffQ, moveToBackoffQ run the PreEnqueue plugins)
    GATE_CLOSED = enum.auto()
    POP = enum.auto()
    DONE = enum.auto()  # the cycle assumed it on a node (or gave it up): it leaves the queue
    REJECT = enum.auto()  # the cycle found no node: park until an event may help
    RETRY = enum.auto()  # an error, or an event a rejecting plugin registered came during its attempt: back off
    BACKOFF_EXPIRED = enum.auto()
    MOVE_READY = enum.auto()  # a cluster event (or the 5-minute flush) moves it, backoff over
    MOVE_BACKING_OFF = enum.auto()  # moved, but its backoff has not expired
    BIND_FAILED = enum.auto()  # its binding cycle failed with an error, or as RETRY: back off
    BIND_REJECTED = enum.auto()  # Permit rejected it (or timed out): park as unschedulable
    DELETE = enum.auto()  # deleted, or bound by someone else


Q, QE = QueueState, QueueEvent

QUEUE_TRANSITIONS: dict[tuple[QueueState, QueueEvent], QueueState | Verdict] = {
    # a pod not in the queue
    (Q.ABSENT, QE.ARRIVE_GATED): Q.GATED,
    (Q.ABSENT, QE.ARRIVE_READY): Q.ACTIVE,
    (Q.ABSENT, QE.GATE_OPENED): REFUSE,
    (Q.ABSENT, QE.GATE_OPENED_BACKING_OFF): REFUSE,
    (Q.ABSENT, QE.GATE_CLOSED): Q.GATED,  # its binding failed, and PreEnqueue holds it on the way back
    (Q.ABSENT, QE.POP): REFUSE,
    (Q.ABSENT, QE.DONE): IGNORE,  # deleted during its cycle
    (Q.ABSENT, QE.REJECT): IGNORE,  # deleted during its cycle: dropped, not requeued
    (Q.ABSENT, QE.RETRY): IGNORE,
    (Q.ABSENT, QE.BACKOFF_EXPIRED): REFUSE,
    (Q.ABSENT, QE.MOVE_READY): REFUSE,
    (Q.ABSENT, QE.MOVE_BACKING_OFF): REFUSE,
    (Q.ABSENT, QE.BIND_FAILED): Q.BACKOFF,
    (Q.ABSENT, QE.BIND_REJECTED): Q.UNSCHEDULABLE,
    (Q.ABSENT, QE.DELETE): IGNORE,
    # held by PreEnqueue
    (Q.GATED, QE.ARRIVE_GATED): REFUSE,  # a known pod's add is an update
    (Q.GATED, QE.ARRIVE_READY): REFUSE,
    (Q.GATED, QE.GATE_OPENED): Q.ACTIVE,
    (Q.GATED, QE.GATE_OPENED_BACKING_OFF): Q.BACKOFF,
    # let out, PreEnqueue asked on its way holds it still: it stays (kube's moveToActiveQ leaves it
    # with the unschedulable pods)
    (Q.GATED, QE.GATE_CLOSED): IGNORE,
    (Q.GATED, QE.POP): REFUSE,
    (Q.GATED, QE.DONE): REFUSE,
    (Q.GATED, QE.REJECT): REFUSE,
    (Q.GATED, QE.RETRY): REFUSE,
    (Q.GATED, QE.BACKOFF_EXPIRED): REFUSE,
    (Q.GATED, QE.MOVE_READY): REFUSE,  # only PreEnqueue lets a gated pod out
    (Q.GATED, QE.MOVE_BACKING_OFF): REFUSE,
    (Q.GATED, QE.BIND_FAILED): IGNORE,  # already back (an update re-added it)
    (Q.GATED, QE.BIND_REJECTED): IGNORE,
    (Q.GATED, QE.DELETE): Q.ABSENT,
    # waiting its turn
    (Q.ACTIVE, QE.ARRIVE_GATED): REFUSE,
    (Q.ACTIVE, QE.ARRIVE_READY): REFUSE,
    (Q.ACTIVE, QE.GATE_OPENED): REFUSE,
    (Q.ACTIVE, QE.GATE_OPENED_BACKING_OFF): REFUSE,
    (Q.ACTIVE, QE.GATE_CLOSED): REFUSE,  # it goes nowhere but to a pop
    (Q.ACTIVE, QE.POP): Q.IN_FLIGHT,
    (Q.ACTIVE, QE.DONE): REFUSE,
    (Q.ACTIVE, QE.REJECT): REFUSE,
    (Q.ACTIVE, QE.RETRY): REFUSE,
    (Q.ACTIVE, QE.BACKOFF_EXPIRED): REFUSE,
    (Q.ACTIVE, QE.MOVE_READY): REFUSE,
    (Q.ACTIVE, QE.MOVE_BACKING_OFF): REFUSE,
    (Q.ACTIVE, QE.BIND_FAILED): IGNORE,
    (Q.ACTIVE, QE.BIND_REJECTED): IGNORE,
    (Q.ACTIVE, QE.DELETE): Q.ABSENT,
    # backing off
    (Q.BACKOFF, QE.ARRIVE_GATED): REFUSE,
    (Q.BACKOFF, QE.ARRIVE_READY): REFUSE,
    (Q.BACKOFF, QE.GATE_OPENED): REFUSE,
    (Q.BACKOFF, QE.GATE_OPENED_BACKING_OFF): REFUSE,
    (Q.BACKOFF, QE.GATE_CLOSED): Q.GATED,  # its backoff ended, PreEnqueue holds it (SchedulerPopFromBackoffQ off)
    (Q.BACKOFF, QE.POP): REFUSE,
    (Q.BACKOFF, QE.DONE): REFUSE,
    (Q.BACKOFF, QE.REJECT): REFUSE,
    (Q.BACKOFF, QE.RETRY): REFUSE,
    (Q.BACKOFF, QE.BACKOFF_EXPIRED): Q.ACTIVE,
    (Q.BACKOFF, QE.MOVE_READY): REFUSE,
    (Q.BACKOFF, QE.MOVE_BACKING_OFF): REFUSE,
    (Q.BACKOFF, QE.BIND_FAILED): IGNORE,
    (Q.BACKOFF, QE.BIND_REJECTED): IGNORE,
    (Q.BACKOFF, QE.DELETE): Q.ABSENT,
    # parked until an event may help
    (Q.UNSCHEDULABLE, QE.ARRIVE_GATED): REFUSE,
    (Q.UNSCHEDULABLE, QE.ARRIVE_READY): REFUSE,
    (Q.UNSCHEDULABLE, QE.GATE_OPENED): REFUSE,
    (Q.UNSCHEDULABLE, QE.GATE_OPENED_BACKING_OFF): REFUSE,
    (Q.UNSCHEDULABLE, QE.GATE_CLOSED): Q.GATED,  # an event moved it, PreEnqueue holds it
    (Q.UNSCHEDULABLE, QE.POP): REFUSE,
    (Q.UNSCHEDULABLE, QE.DONE): REFUSE,
    (Q.UNSCHEDULABLE, QE.REJECT): REFUSE,
    (Q.UNSCHEDULABLE, QE.RETRY): REFUSE,
    (Q.UNSCHEDULABLE, QE.BACKOFF_EXPIRED): REFUSE,
    (Q.UNSCHEDULABLE, QE.MOVE_READY): Q.ACTIVE,
    (Q.UNSCHEDULABLE, QE.MOVE_BACKING_OFF): Q.BACKOFF,
    (Q.UNSCHEDULABLE, QE.BIND_FAILED): IGNORE,
    (Q.UNSCHEDULABLE, QE.BIND_REJECTED): IGNORE,
    (Q.UNSCHEDULABLE, QE.DELETE): Q.ABSENT,
    # being tried
    (Q.IN_FLIGHT, QE.ARRIVE_GATED): REFUSE,
    (Q.IN_FLIGHT, QE.ARRIVE_READY): REFUSE,
    (Q.IN_FLIGHT, QE.GATE_OPENED): REFUSE,
    (Q.IN_FLIGHT, QE.GATE_OPENED_BACKING_OFF): REFUSE,
    (Q.IN_FLIGHT, QE.GATE_CLOSED): Q.GATED,  # its attempt failed, and PreEnqueue holds it on the way back
    (Q.IN_FLIGHT, QE.POP): REFUSE,
    (Q.IN_FLIGHT, QE.DONE): Q.ABSENT,
    (Q.IN_FLIGHT, QE.REJECT): Q.UNSCHEDULABLE,
    (Q.IN_FLIGHT, QE.RETRY): Q.BACKOFF,
    (Q.IN_FLIGHT, QE.BACKOFF_EXPIRED): REFUSE,
    (Q.IN_FLIGHT, QE.MOVE_READY): REFUSE,
    (Q.IN_FLIGHT, QE.MOVE_BACKING_OFF): REFUSE,
    (Q.IN_FLIGHT, QE.BIND_FAILED): IGNORE,  # re-added by an update while binding
    (Q.IN_FLIGHT, QE.BIND_REJECTED): IGNORE,
    (Q.IN_FLIGHT, QE.DELETE): Q.ABSENT,
}


# --- a pod in the scheduler's cache ------------------------------------------------------------------------


class CacheState(enum.Enum):
    ABSENT = "absent"
    ASSUMED = "assumed"  # counted on its node before the binding lands
    BOUND = "bound"  # the informer shows it bound (confirmed, or bound by anyone)


class CacheEvent(enum.Enum):
    ASSUME = enum.auto()
    FINISH_BINDING = enum.auto()  # the bind call returned: the expiry clock starts
    INFORMER_ADD = enum.auto()  # the informer shows it assigned (confirms an assumption)
    FORGET = enum.auto()  # the binding failed: give the room back
    EXPIRE = enum.auto()  # bound but never confirmed within the TTL
    REMOVE = enum.auto()  # deleted, or finished


C, CE = CacheState, CacheEvent

CACHE_TRANSITIONS: dict[tuple[CacheState, CacheEvent], CacheState | Verdict] = {
    (C.ABSENT, CE.ASSUME): C.ASSUMED,
    (C.ABSENT, CE.FINISH_BINDING): IGNORE,  # forgotten or removed meanwhile
    (C.ABSENT, CE.INFORMER_ADD): C.BOUND,
    (C.ABSENT, CE.FORGET): IGNORE,
    (C.ABSENT, CE.EXPIRE): REFUSE,  # only assumed pods expire
    (C.ABSENT, CE.REMOVE): IGNORE,
    (C.ASSUMED, CE.ASSUME): REFUSE,  # assumed twice: the scheduler tried a pod it already placed
    (C.ASSUMED, CE.FINISH_BINDING): C.ASSUMED,
    (C.ASSUMED, CE.INFORMER_ADD): C.BOUND,
    (C.ASSUMED, CE.FORGET): C.ABSENT,
    (C.ASSUMED, CE.EXPIRE): C.ABSENT,
    (C.ASSUMED, CE.REMOVE): C.ABSENT,
    (C.BOUND, CE.ASSUME): REFUSE,
    (C.BOUND, CE.FINISH_BINDING): IGNORE,  # the informer was faster than the bind call's return
    (C.BOUND, CE.INFORMER_ADD): C.BOUND,
    (C.BOUND, CE.FORGET): IGNORE,  # someone bound it: the server's word stands
    (C.BOUND, CE.EXPIRE): REFUSE,
    (C.BOUND, CE.REMOVE): C.ABSENT,
}


# --- a PodGroup under Coscheduling ------------------------------------------------------------------------


class GroupState(enum.Enum):
    PENDING = "pending"  # no member holds room
    GATHERING = "gathering"  # some members wait at Permit, holding room
    SCHEDULED = "scheduled"  # minMember members placed: released to bind


class GroupEvent(enum.Enum):
    MEMBER_WAITS = enum.auto()  # a member reached Permit short of the quorum
    QUORUM = enum.auto()  # the member that completes minMember: all waiting ones are allowed
    REJECTED = enum.auto()  # PostFilter, a timeout or a failed binding rejected the waiting members
    MEMBERS_GONE = enum.auto()  # fewer than minMember members are placed or exist any more


G, GE = GroupState, GroupEvent

GROUP_TRANSITIONS: dict[tuple[GroupState, GroupEvent], GroupState | Verdict] = {
    (G.PENDING, GE.MEMBER_WAITS): G.GATHERING,
    (G.PENDING, GE.QUORUM): G.SCHEDULED,  # minMember 1, or the rest already placed
    (G.PENDING, GE.REJECTED): IGNORE,
    (G.PENDING, GE.MEMBERS_GONE): IGNORE,
    (G.GATHERING, GE.MEMBER_WAITS): G.GATHERING,
    (G.GATHERING, GE.QUORUM): G.SCHEDULED,
    (G.GATHERING, GE.REJECTED): G.PENDING,
    (G.GATHERING, GE.MEMBERS_GONE): G.PENDING,
    (G.SCHEDULED, GE.MEMBER_WAITS): G.GATHERING,  # members were lost since: gather again
    (G.SCHEDULED, GE.QUORUM): G.SCHEDULED,  # a replacement member
    (G.SCHEDULED, GE.REJECTED): G.PENDING,  # a member's binding failed after the release
    (G.SCHEDULED, GE.MEMBERS_GONE): G.PENDING,
}


check_exhaustive(QUEUE_TRANSITIONS, QueueState, QueueEvent)
check_exhaustive(CACHE_TRANSITIONS, CacheState, CacheEvent)
check_exhaustive(GROUP_TRANSITIONS, GroupState, GroupEvent)


# --- reading a table ----------------------------------------------------------------------------------------


def transition_edges(table: Mapping[tuple[S, E], S | Verdict]) -> dict[tuple[S, S], list[E]]:
    """The moves a table makes, for drawing it: (from, to) -> the events that take it there, in the
    table's order. IGNORE and REFUSE move nothing and are left out, as is an event that leaves the
    state where it is (a self-loop says nothing a diagram of moves needs)."""
    edges: dict[tuple[S, S], list[E]] = {}
    for (state, event), target in table.items():
        if isinstance(target, Verdict) or target == state:
            continue
        edges.setdefault((state, target), []).append(event)
    return edges


def transition_grid(table: Mapping[tuple[S, E], S | Verdict], states: Iterable[S], events: Iterable[E]) -> str:
    """The table as text, a row per state and a numbered column per event: `·` for IGNORE, `✗` for
    REFUSE, otherwise the first two letters of the new state; a key to the columns below."""
    states, events = list(states), list(events)
    width = max(len(s.name) for s in states)
    marks = {IGNORE: "·", REFUSE: "✗"}
    lines = [" " * width + " " + " ".join(f"{i:>2}" for i in range(1, len(events) + 1))]
    for s in states:
        cells = []
        for e in events:
            target = table[s, e]
            cells.append(f"{marks[target] if isinstance(target, Verdict) else target.name[:2]:>2}")
        lines.append(f"{s.name:>{width}} " + " ".join(cells))
    lines.append("")
    lines.append("   ".join(f"{i}={e.name}" for i, e in enumerate(events, 1)))
    lines.append("·=IGNORE  ✗=REFUSE, otherwise the first letters of the new state")
    return "\n".join(lines)
