"""PodDependencies: a pod annotated minisched.io/depends-on waits at PreEnqueue until the pods it
names are bound, shows why (PodScheduled=False, SchedulingGated), and goes as soon as they bind."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.plugins.pod_dependencies import (
    DEPENDS_ON_ANNOTATION,
    BadDependencies,
    PodDependencies,
    dependencies,
)
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import node_of, wait_for_nodes, wait_until

CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "minisched",
                  "plugins": {"preEnqueue": {"enabled": [{"name": "PodDependencies"}]}}}],
}


def pod(name: str, depends_on: str | None = None, **kw: Any) -> dict[str, Any]:
    obj = make_pod(name, **kw)
    if depends_on is not None:
        obj["metadata"].setdefault("annotations", {})[DEPENDS_ON_ANNOTATION] = depends_on
    return obj


def scheduled_condition(cluster: Cluster, name: str) -> tuple[str, str, str] | None:
    for c in cluster.get(PODS, name, "default")["status"].get("conditions") or []:
        if c["type"] == "PodScheduled":
            return c["status"], c.get("reason", ""), c.get("message", "")
    return None


def test_the_annotation_parses_or_names_the_bad_entry() -> None:
    assert dependencies(pod("a", " db, cache ,db")) == ["db", "cache"]
    assert dependencies(pod("a")) == [] and dependencies(pod("a", "  ")) == []
    with pytest.raises(BadDependencies, match=r"'Db_1' is not a pod name"):
        dependencies(pod("a", "cache,Db_1"))


def test_pre_enqueue_waits_for_unbound_pods_and_names_a_cycle() -> None:
    bound = {"default/volume": "n1"}
    plugin = PodDependencies(bound.get)
    assert plugin.pre_enqueue(pod("db", "volume")).is_success
    status = plugin.pre_enqueue(pod("app", "db,volume"))
    assert status.message() == "waiting for pods to be bound: [db]" and status.plugin == "PodDependencies"
    plugin.pre_enqueue(pod("a", "b"))
    assert plugin.pre_enqueue(pod("b", "a")).message() == \
        "dependency cycle: default/b -> default/a -> default/b (each waits for the next)"
    assert plugin.pre_enqueue(pod("self", "self")).message() == \
        "dependency cycle: default/self -> default/self (each waits for the next)"
    plugin.pre_enqueue(pod("x", "y"))
    plugin.pre_enqueue(pod("y", "z"))
    # x waits for y, y for z, z for x
    assert plugin.pre_enqueue(pod("z", "x")).message() == \
        "dependency cycle: default/z -> default/x -> default/y -> default/z (each waits for the next)"
    plugin.forget("default/a")
    assert plugin.pre_enqueue(pod("b", "a")).message() == "waiting for pods to be bound: [a]"
    assert plugin.pre_enqueue(pod("bad", "x,")).message().endswith("'' is not a pod name "
                                                                 "(comma-separated names of pods in the same namespace)")


def test_a_pod_waits_for_its_dependency_and_goes_when_it_binds(cluster: Cluster) -> None:
    cluster.create(NODES, make_node("mini-a", cpu="4"))
    with Scheduler(cluster, config=CONFIG) as sched:
        wait_for_nodes(sched, 1, timeout=30)
        # db needs a node labelled tier=db that does not exist yet: it stays pending
        db = pod("db")
        db["spec"]["nodeSelector"] = {"tier": "db"}
        cluster.create(PODS, db)
        cluster.create(PODS, pod("app", "db,cache"))
        cluster.create(PODS, pod("cache"))
        wait_until(lambda: node_of(cluster, "cache") == "mini-a", timeout=30, what="cache bound")
        sched.recorder.flush()
        wait_until(lambda: scheduled_condition(cluster, "app") == (
            "False", "SchedulingGated", "waiting for pods to be bound: [db]"), timeout=30, what="app gated on db")
        assert sched.queue.where("default/app") == "gated"
        assert node_of(cluster, "app") is None
        cluster.create(NODES, make_node("mini-db", cpu="4", labels={"tier": "db"}))
        wait_until(lambda: node_of(cluster, "db") == "mini-db", timeout=30, what="db bound")
        wait_until(lambda: node_of(cluster, "app") is not None, timeout=30, what="app bound after db")
        assert scheduled_condition(cluster, "app")[0] == "True"  # type: ignore[index]


def test_pods_in_a_cycle_wait_and_say_so(embedded_cluster: Cluster) -> None:
    cluster = embedded_cluster
    cluster.create(NODES, make_node("mini-a", cpu="4"))
    with Scheduler(cluster, config=CONFIG) as sched:
        wait_for_nodes(sched, 1, timeout=30)
        cluster.create(PODS, pod("a", "b"))
        cluster.create(PODS, pod("b", "a"))
        wait_until(lambda: sched.queue.pending_pods()["gated"] == 2, timeout=30, what="both gated")
        sched.recorder.flush()
        wait_until(lambda: (scheduled_condition(cluster, "b") or ("", "", ""))[2].startswith("dependency cycle"),
                   timeout=30, what="cycle reported")
        assert scheduled_condition(cluster, "b")[2] == (  # type: ignore[index]
            "dependency cycle: default/b -> default/a -> default/b (each waits for the next)")


def test_without_the_plugin_the_annotation_means_nothing(embedded_cluster: Cluster) -> None:
    # the control for the tests above
    cluster = embedded_cluster
    cluster.create(NODES, make_node("mini-a", cpu="4"))
    with Scheduler(cluster) as sched:
        wait_for_nodes(sched, 1, timeout=30)
        cluster.create(PODS, pod("app", "db"))
        wait_until(lambda: node_of(cluster, "app") == "mini-a", timeout=30, what="app bound")
