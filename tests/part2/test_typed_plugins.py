"""Part II §2.2: typed plugins, extension points resolved once; no isinstance in the cycle."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import EXTENSION_POINTS, NormalizeScorePlugin
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.strategies import Admitter, Pipeline, Scorer, check_costs, sync
from minisched.scheduler.framework.strategies import protocol_checks as recording_protocol_checks
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable


@dataclass
class Node:
    name: str
    free: int
    zone: str


class FreeCapacity:
    name = "FreeCapacity"

    def score(self, item: Node) -> float:
        return float(item.free)


class ZoneA:
    name = "ZoneA"

    def admit(self, item: Node) -> bool:
        return item.zone == "a"

    def score(self, item: Node) -> float:  # two extension points in one plugin
        return 0.0


class Upper:
    def process(self, item: str) -> str:
        return item.upper()


@pytest.fixture(name="protocol_checks")
def _protocol_checks() -> Iterator[list[type]]:
    with recording_protocol_checks() as seen:
        yield seen


def test_pipeline_resolves_points_once_and_never_checks_in_the_cycle(protocol_checks: list[type]) -> None:
    pipeline: Pipeline[Node] = Pipeline([FreeCapacity(), ZoneA()], weights={"FreeCapacity": 2})
    assert set(protocol_checks) == {Admitter, Scorer}  # the build asked, once per plugin and point
    assert (pipeline.admitters, pipeline.scorers) == (1, 2)
    protocol_checks.clear()
    nodes = [Node("n1", 5, "a"), Node("n2", 9, "b"), Node("n3", 7, "a")]
    choice = pipeline.choose(nodes)
    assert choice.item == nodes[2] and choice.score == 14.0 and choice.admitted == 2
    assert protocol_checks == []


def test_pipeline_refuses_plugins_with_no_extension_point() -> None:
    with pytest.raises(TypeError, match="Upper"):
        Pipeline([FreeCapacity(), Upper()])
    with pytest.raises(ValueError, match="scorer"):
        Pipeline([_AdmitOnly()])


class _AdmitOnly:
    name = "AdmitOnly"

    def admit(self, item: object) -> bool:
        return True


def test_the_books_sync() -> None:
    assert sync(["a", "b"], Upper()) == ["A", "B"]


def test_protocol_checks_restores_isinstance() -> None:
    with recording_protocol_checks() as seen:
        assert isinstance(FreeCapacity(), Scorer) and not isinstance(Upper(), Scorer)
    assert seen == [Scorer, Scorer]
    isinstance(FreeCapacity(), Scorer)
    assert seen == [Scorer, Scorer]


def test_check_costs_measures_three_ways() -> None:
    costs = check_costs(FreeCapacity(), n=100)
    assert len(costs) == 3 and all(v > 0 for v in costs.values())


def test_framework_cycle_calls_no_protocol_isinstance(protocol_checks: list[type]) -> None:
    fw = Framework(seed=0)
    assert any(c in EXTENSION_POINTS.values() for c in protocol_checks)  # resolved at build
    assert NormalizeScorePlugin in protocol_checks
    table = NodeTable()
    for i in range(20):
        table.add_node(make_node(f"n{i}", cpu="4", memory="8Gi", labels={"zone": "abc"[i % 3]}))
    protocol_checks.clear()
    for i in range(5):
        pod = PodInfo.from_pod(make_pod(f"p{i}", cpu="500m"))
        state = CycleState()
        result = fw.schedule(pod, table.snapshot(), state=state)
        assert result.node is not None
        assert fw.run_reserve(state, pod, result.node).is_success
        assert fw.run_permit(state, pod, result.node)[0].is_success
        assert fw.run_pre_bind(state, pod, result.node).is_success
    assert protocol_checks == [], [c.__name__ for c in protocol_checks]


def test_extension_point_cost_asks_every_point_and_refuses_nothing_to_measure() -> None:
    from minisched.scheduler.framework.strategies import extension_point_cost

    with recording_protocol_checks() as asked:
        assert extension_point_cost(FreeCapacity(), [Scorer, Admitter], n=3) > 0
    assert asked == [Scorer, Admitter] * 3
    with pytest.raises(ValueError, match="at least one"):
        extension_point_cost(FreeCapacity(), [], n=3)


def test_cost_bars_draws_every_cost_on_a_log_axis() -> None:
    from minisched.widgets.charts import cost_bars

    fig = cost_bars({"isinstance": 2e-5, "hasattr": 6e-8}, title="checks")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and len(ax.patches) == 2
    assert [t.get_text() for t in ax.texts] == ["20,000 ns", "60 ns"]
    assert fig._repr_png_()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="positive"):
        cost_bars({"free": 0.0}, title="x")
