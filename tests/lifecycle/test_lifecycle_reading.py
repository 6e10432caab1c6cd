"""transition_edges / transition_grid read a table for people (Part II §5's diagram and grid)."""

from __future__ import annotations

import pytest
from matplotlib.patches import FancyArrowPatch

from minisched.scheduler.lifecycle import (
    CACHE_TRANSITIONS,
    IGNORE,
    QUEUE_TRANSITIONS,
    CacheEvent,
    CacheState,
    QueueEvent,
    QueueState,
    transition_edges,
    transition_grid,
)
from minisched.widgets.charts import state_diagram

Q, QE = QueueState, QueueEvent


def test_edges_group_the_events_of_each_move_and_leave_out_verdicts():
    edges = transition_edges(QUEUE_TRANSITIONS)
    assert edges[Q.IN_FLIGHT, Q.ABSENT] == [QE.DONE, QE.DELETE]
    assert edges[Q.ACTIVE, Q.IN_FLIGHT] == [QE.POP]
    assert edges[Q.ABSENT, Q.BACKOFF] == [QE.BIND_FAILED]
    moves = sum(len(events) for events in edges.values())
    assert moves == sum(1 for (s, _), t in QUEUE_TRANSITIONS.items() if isinstance(t, QueueState) and t != s)
    assert all(src != dst for src, dst in edges)


def test_edges_follow_the_table_so_the_drawing_cannot_drift():
    changed = dict(QUEUE_TRANSITIONS)
    changed[Q.BACKOFF, QE.DELETE] = IGNORE
    changed[Q.IN_FLIGHT, QE.REJECT] = Q.BACKOFF
    edges = transition_edges(changed)
    assert (Q.BACKOFF, Q.ABSENT) not in edges
    assert edges[Q.IN_FLIGHT, Q.BACKOFF] == [QE.REJECT, QE.RETRY]
    assert (Q.IN_FLIGHT, Q.UNSCHEDULABLE) not in edges


def test_self_loops_are_not_moves():
    edges = transition_edges(CACHE_TRANSITIONS)
    assert (CacheState.ASSUMED, CacheState.ASSUMED) not in edges
    assert edges[CacheState.ASSUMED, CacheState.ABSENT] == [CacheEvent.FORGET, CacheEvent.EXPIRE, CacheEvent.REMOVE]


def test_grid_marks_verdicts_and_targets():
    lines = transition_grid(QUEUE_TRANSITIONS, list(Q), list(QE)).splitlines()
    assert lines[0].split() == [str(i) for i in range(1, 16)]
    assert lines[1].split() == ["ABSENT", "GA", "AC", "✗", "✗", "GA", "✗", "·", "·", "·", "✗", "✗", "✗", "BA", "UN", "·"]
    assert lines[2].split()[3:5] == ["AC", "BA"], "a gated pod let out: to activeQ, or still backing off to backoffQ"
    assert lines[-2].startswith("1=ARRIVE_GATED   2=ARRIVE_READY")


def test_diagram_draws_one_arrow_per_move_and_refuses_an_empty_machine():
    edges = transition_edges(QUEUE_TRANSITIONS)
    fig = state_diagram(edges, title="queue")
    arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == len(edges)
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert {s.name for s in Q} <= labels
    assert "DONE\nDELETE" in labels
    assert fig._repr_png_().startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="at least one move"):
        state_diagram({})
