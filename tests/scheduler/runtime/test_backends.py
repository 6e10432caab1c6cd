"""The same scheduler run on every backend: the embedded cluster and a real kube-apiserver."""

from __future__ import annotations

from minisched.cluster import Cluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.events import events_for
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import node_of, wait_for_nodes, wait_until


def test_binds_what_fits_and_explains_what_does_not(cluster: Cluster) -> None:
    cluster.create(NODES, make_node("mini-a", cpu="2"))
    cluster.create(NODES, make_node("mini-b", cpu="1"))
    with Scheduler(cluster, bind_workers=2) as sched:
        wait_for_nodes(sched, 2, timeout=30)
        cluster.create(PODS, make_pod("fits-a", cpu="1500m"))
        cluster.create(PODS, make_pod("fits-b", cpu="500m"))
        big = cluster.create(PODS, make_pod("too-big", cpu="4"))
        wait_until(lambda: node_of(cluster, "fits-a") == "mini-a", timeout=30, what="fits-a bound")
        wait_until(lambda: node_of(cluster, "fits-b") is not None, timeout=30, what="fits-b bound")
        wait_until(lambda: sched.pending_pods()["unschedulable"] == 1, timeout=30, what="too-big parked")
        sched.recorder.flush()
        (failed,) = wait_until(lambda: events_for(cluster, big, "FailedScheduling"), timeout=30,
                               what="FailedScheduling")
        # kube 1.35's DynamicResources PostFilter speaks first ("no new claims to deallocate")
        assert failed["message"] == (
            "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: "
            "0/2 nodes are available: "
            # kube 1.35: 4 cpus are beyond both nodes' allocatable, so preemption is not helpful
            "2 Preemption is not helpful for scheduling."
        )
        scheduled = events_for(cluster, cluster.get(PODS, "fits-a", "default"), "Scheduled")
        assert [e["message"] for e in scheduled] == ["Successfully assigned default/fits-a to mini-a"]
        pod = cluster.get(PODS, "too-big", "default")
        (cond,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")


def test_preemption_makes_room_for_a_higher_priority_pod(cluster: Cluster) -> None:
    from tests.scheduler.runtime.helpers import priority_classes

    priority_classes(cluster, **{"mini-low": 10, "mini-high": 1000})
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "minisched", "pluginConfig": [
                  {"name": "DefaultPreemption", "args": {"victimGracePeriodSeconds": 0}}]}]}
    cluster.create(NODES, make_node("mini-p", cpu="1"))
    cluster.create(PODS, make_pod("victim", cpu="1", memory=None, priority_class_name="mini-low", node_name="mini-p"))
    with Scheduler(cluster, config=config) as sched:
        wait_for_nodes(sched, 1, timeout=30)
        wait_until(lambda: sched.cache.pod_count() == 1, timeout=30, what="victim in the cache")
        cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="mini-high"))
        wait_until(lambda: node_of(cluster, "vip") == "mini-p", timeout=30, what="preemptor bound")
        assert "victim" not in {p["metadata"]["name"] for p in cluster.list(PODS, "default")["items"]}
        assert sched.stats.victims == 1
