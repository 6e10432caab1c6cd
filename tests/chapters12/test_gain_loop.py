"""§2.1 on a loop: the law actuating replicas, against the quantized model and the predicted ρ."""

from __future__ import annotations

import pytest

from minisched.cluster import Cluster
from minisched.controllers import replicaset as mrs
from minisched.controllers.controller import Controller
from minisched.controllers.gain_loop import GainLoop, MiniReplicaSetPlant, clamp_round, simulate_quantized
from minisched.informer import SharedInformerFactory
from minisched.resources import CRDS


class IdealPlant:
    """y = what was last actuated, at once."""

    def __init__(self, y0: int = 0) -> None:
        self.y = y0

    def actuate(self, replicas: int) -> None:
        self.y = replicas

    def observe(self) -> int:
        return self.y


def test_clamp_round() -> None:
    assert [clamp_round(x, 10) for x in (-3.2, 0.4, 0.6, 9.5, 12.0)] == [0, 0, 1, 10, 10]


def test_reference_above_the_actuator_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="max_replicas .5. must be at least the reference .10."):
        GainLoop(IdealPlant(), alpha=0.5, beta=0.1, reference=10, max_replicas=5)


@pytest.mark.parametrize(("alpha", "beta"), [(0.6, 0.3), (1.8, 0.3), (0.1, 0.0), (2.8, 0.3)])
def test_ideal_plant_follows_the_quantized_model(alpha: float, beta: float) -> None:
    run = GainLoop(IdealPlant(), alpha=alpha, beta=beta, reference=40, max_replicas=80).run_steps(25)
    assert run.observed == simulate_quantized(alpha, beta, 40, 80, 25)


def test_measured_rates_match_the_root_magnitude() -> None:
    slow = GainLoop(IdealPlant(), alpha=0.1, beta=0.0, reference=400, max_replicas=800).run_steps(30)
    assert slow.measured_rate() == pytest.approx(0.9, abs=0.01) and slow.predicted_radius == pytest.approx(
        0.9
    )
    growing = GainLoop(IdealPlant(58), alpha=2.8, beta=0.3, reference=60, max_replicas=120).run_steps(25)
    rate = growing.measured_rate()
    assert rate is not None and rate == pytest.approx(growing.predicted_radius, rel=0.1) and rate > 1
    assert growing.saturated and growing.settled_at() is None
    fast = GainLoop(IdealPlant(), alpha=0.6, beta=0.3, reference=40, max_replicas=80).run_steps(20)
    assert fast.settled_at() == 8


def test_on_the_cluster_the_loop_is_exactly_the_model(embedded_cluster: Cluster) -> None:
    embedded_cluster.create(CRDS, mrs.crd())
    embedded_cluster.create(mrs.RESOURCE, mrs.make_mini_replica_set("loop", 0))
    factory = SharedInformerFactory(embedded_cluster)
    controller = Controller("mrs", mrs.MiniReplicaSetReconciler(embedded_cluster, factory), factory)
    controller.start_informers()
    assert controller.wait_for_sync(10)
    try:
        run = GainLoop(MiniReplicaSetPlant(embedded_cluster, controller, "loop"), alpha=0.6, beta=0.3,
                       reference=12, max_replicas=24).run_steps(12)  # fmt: skip
        assert run.observed == simulate_quantized(0.6, 0.3, 12, 24, 12)
        assert run.observed[-1] == 12
    finally:
        factory.shutdown()
