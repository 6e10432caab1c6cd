"""Opportunistic batching in the running scheduler: the queue's cycle count reaches the framework,
hints place a one-pod-per-node stream on distinct nodes, the counters reach /metrics under kube's
names, and the feature gate turns it off."""

from __future__ import annotations

import re

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.observability.batch_metrics import register_batch_metrics
from minisched.observability.metrics import SchedulerMetrics
from minisched.resources import NODES, PODS
from minisched.scheduler.framework import batch as b
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import bound_pods, wait_for_nodes, wait_until

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: minisched
  pluginConfig:
  - name: PodTopologySpread
    args: {defaultingType: List}
"""
NODE_COUNT, POD_COUNT = 16, 10


def run(gates: dict[str, bool] | None = None) -> tuple[Scheduler, dict[str, str], str]:
    cluster = EmbeddedCluster()
    try:
        for i in range(NODE_COUNT):
            cluster.create(NODES, make_node(f"n{i:02d}", cpu=f"{3000 + 100 * i}m"))
        metrics = SchedulerMetrics()
        # a virtual clock: kept scores never expire, so the counts below do not depend on load
        with Scheduler(cluster, config=CONFIG, clock=VirtualClock(), observer=metrics,
                       feature_gates=gates) as sched:
            register_batch_metrics(metrics.registry, lambda: sched.frameworks)
            wait_for_nodes(sched, NODE_COUNT)
            for i in range(POD_COUNT):
                cluster.create(PODS, make_pod(f"p{i}", cpu="3"))
            wait_until(lambda: len(bound_pods(cluster)) == POD_COUNT, what="every pod bound")
            return sched, bound_pods(cluster), metrics.exposition()
    finally:
        cluster.close()


def test_a_one_pod_per_node_stream_is_placed_from_hints() -> None:
    sched, bound, exposition = run()
    assert len(set(bound.values())) == POD_COUNT  # one pod per node: no node twice
    batch = sched.frameworks["minisched"].batch
    assert batch is not None
    used = batch.stats.attempts[b.HINT_USED]
    assert used >= 1 and batch.stats.batched_pods == used
    assert sum(batch.stats.attempts.values()) == POD_COUNT  # one attempt per cycle
    line = re.search(r'scheduler_batch_attempts_total\{profile="minisched",result="hint_used"\} (\S+)', exposition)
    assert line is not None and float(line.group(1)) == used
    assert 'scheduler_batch_cache_flushed_total{profile="minisched",reason="expired"} 0.0' in exposition


def test_the_feature_gate_turns_batching_off() -> None:
    sched, bound, exposition = run({"OpportunisticBatching": False})
    assert len(set(bound.values())) == POD_COUNT
    assert sched.frameworks["minisched"].batch is None
    assert "scheduler_batch_attempts_total{" not in exposition


def test_an_unknown_feature_gate_is_refused() -> None:
    cluster = EmbeddedCluster()
    try:
        with pytest.raises(ValueError, match="unrecognized feature gate: Batching"):
            Scheduler(cluster, feature_gates={"Batching": True})
    finally:
        cluster.close()


def test_minisched_run_refuses_a_bad_feature_gate_naming_it(capsys) -> None:  # type: ignore[no-untyped-def]
    from minisched.cli import main

    assert main(["run", "--embedded", "--feature-gates", "OpportunisticBatching=maybe"]) == 2
    assert "--feature-gates: feature gate 'OpportunisticBatching=maybe' must be written Name=true" in \
        capsys.readouterr().err
    assert main(["run", "--embedded", "--feature-gates", "SchedulerQueueingHints=true"]) == 2
    assert "unrecognized feature gate: SchedulerQueueingHints" in capsys.readouterr().err
