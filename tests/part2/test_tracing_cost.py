"""tracing_cost interleaves its settings; source_name keeps machine paths out of a profile report."""

from __future__ import annotations

import cProfile
import pstats

import pytest

from minisched.observability.tracing import ProfileEntry, source_name
from minisched.observability.tracing_cost import drain_cycles, tracing_cost
from minisched.widgets.charts import run_spread, span_waterfall


def test_settings_are_interleaved_in_a_rotating_order_with_a_run_each_per_round():
    calls = []

    def fake_drain(ratio, *, nodes, pods):
        calls.append(ratio)
        return [0.001 * (len(calls))], 0

    cost = tracing_cost({"a": None, "b": 0.5, "c": 1.0}, rounds=4, nodes=1, pods=1, drain=fake_drain)
    assert [cost.order(r) for r in range(4)] == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert calls[:4] == [None, 0.5, 1.0, 0.5]
    assert cost.medians("a") == [0.001, 0.006, 0.008, 0.010]
    assert cost.median("a") == pytest.approx(0.007)
    assert cost.spread("a") == (0.001, 0.010)


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="positive"):
        tracing_cost(rounds=0)
    with pytest.raises(ValueError, match="at least one setting"):
        tracing_cost({})


def test_a_real_drain_traces_what_its_ratio_says():
    cycles, traced = drain_cycles(1.0, nodes=2, pods=6)
    assert len(cycles) == 6 and traced == 6
    cycles, traced = drain_cycles(None, nodes=2, pods=6)
    assert len(cycles) == 6 and traced == 0


def test_source_names_hide_the_machine():
    assert source_name("/tmp/ipykernel_30547/471119056.py") == "<notebook cell>"
    import minisched.scheduler.queue as queue

    assert source_name(queue.__file__) == "minisched/scheduler/queue.py"
    assert source_name("/usr/lib/python3.11/json/decoder.py") == "decoder.py"
    assert source_name("~") == "~"


def test_profile_text_carries_no_absolute_path():
    import minisched.scheduler.queue as queue

    prof = cProfile.Profile()
    prof.enable()
    queue.SchedulingQueue()
    prof.disable()
    entry = ProfileEntry(span_id="0" * 16, trace_id=1, pod="default/p", stats=pstats.Stats(prof))
    text = entry.text(50)
    assert "minisched/scheduler/queue.py" in text
    assert queue.__file__ not in text
    assert queue.__file__ in entry.text(50, full_paths=True)
    assert entry.text(50) == text  # the entry's own stats were not renamed by the first call


def test_run_spread_draws_a_dot_per_run():
    fig = run_spread({"off": [1e-4, 2e-4], "on": [3e-4]}, xlabel="µs")
    lines = fig.axes[0].lines  # per setting: its dots, then its median
    assert len(lines) == 4
    assert list(lines[0].get_xdata()) == pytest.approx([100, 200]) and list(lines[1].get_xdata()) == pytest.approx([150, 150])
    with pytest.raises(ValueError):
        run_spread({"off": []}, xlabel="µs")


def test_span_waterfall_draws_each_span_from_its_start():
    fig = span_waterfall([(0, "attempt", 1_000, 11_000), (1, "Filter", 2_000, 4_000)], title="one")
    bars = fig.axes[0].patches
    assert [(b.get_x(), b.get_width()) for b in bars] == [(0.0, 10.0), (1.0, 2.0)]
    assert " Filter 2 µs" in {t.get_text() for t in fig.axes[0].texts}
    with pytest.raises(ValueError):
        span_waterfall([])
