"""Several profiles in one scheduler: each pod is scheduled by the profile its schedulerName names."""

from __future__ import annotations

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import bound_pods, node_of, wait_for_nodes, wait_until

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: spreader
- schedulerName: packer
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}, {name: ImageLocality}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 1}]}}
"""


def test_each_pod_goes_to_the_profile_it_names() -> None:
    cluster = EmbeddedCluster()
    try:
        cluster.create(NODES, make_node("busy", cpu="4"))
        cluster.create(NODES, make_node("idle", cpu="4"))
        cluster.create(PODS, make_pod("resident", cpu="2", node_name="busy", scheduler_name="other"))
        with Scheduler(cluster, config=CONFIG) as sched:
            assert sorted(sched.frameworks) == ["packer", "spreader"]
            wait_for_nodes(sched, 2)
            wait_until(lambda: sched.cache.pod_count() == 1, what="resident pod in the cache")
            cluster.create(PODS, make_pod("spread", cpu="500m", scheduler_name="spreader"))
            cluster.create(PODS, make_pod("pack", cpu="500m", scheduler_name="packer"))
            cluster.create(PODS, make_pod("nobody", scheduler_name="minisched"))
            wait_until(lambda: len(bound_pods(cluster)) == 3, what="two pods bound")
            assert node_of(cluster, "spread") == "idle", "LeastAllocated spreads"
            assert node_of(cluster, "pack") == "busy", "MostAllocated packs"
            assert sched.queue.where("default/nobody") is None, "no profile named minisched here"
    finally:
        cluster.close()
