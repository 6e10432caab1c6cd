"""The side-by-side helpers, checked on the embedded cluster (fast, no control plane needed)."""

from __future__ import annotations

import os

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.controlplane.observe import (
    MATCHED_PLUGINS,
    PodObserver,
    matched_scheduler_config,
    per_second,
    percentile,
    pod_requests,
    process_usage,
)
from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.profile import DEFAULT_MULTI_POINT, load_profiles


def test_matched_config_gives_minisched_its_default_plugins_and_weights() -> None:
    (profile,) = load_profiles(matched_scheduler_config("x"))
    assert profile.scheduler_name == "x"
    assert profile.percentage_of_nodes_to_score == 100
    assert [(r.name, r.weight) for r in profile.multi_point.enabled] == [
        (r.name, r.weight) for r in DEFAULT_MULTI_POINT
    ]
    assert [n for n, _ in MATCHED_PLUGINS] == [r.name for r in DEFAULT_MULTI_POINT]
    with pytest.raises(ValueError, match="0..100"):
        matched_scheduler_config("x", percentage_of_nodes_to_score=101)


def test_pod_requests_sum_containers_take_the_largest_init_container_and_add_overhead() -> None:
    pod = make_pod("p", cpu="250m", memory="1Gi")
    pod["spec"]["containers"].append({"name": "b", "resources": {"requests": {"cpu": "1"}}})
    pod["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "2", "memory": "1Mi"}}}]
    pod["spec"]["overhead"] = {"cpu": "10m"}
    assert pod_requests(pod) == {"cpu": 2010, "memory": 2**30, "pods": 1}


def test_observer_counts_bindings_node_changes_and_overcommit() -> None:
    cluster = EmbeddedCluster()
    node = cluster.create("nodes", make_node("n1", cpu="1", memory="1Gi", pods="10"))
    cluster.create("nodes", make_node("n2"))
    with PodObserver(cluster, namespace="default", nodes=[node]) as obs:
        cluster.create("pods", make_pod("a", cpu="600m", memory="100Mi"))
        cluster.create("pods", make_pod("b", cpu="600m", memory="100Mi"))
        cluster.bind("default", "a", "n1")
        obs.wait_for(lambda o: o.bound_count() == 1, 5, "a bound")
        assert not obs.overcommits
        cluster.bind("default", "b", "n1")  # the API server does not check room: 1.2 CPU on a 1-CPU node
        obs.wait_for(lambda o: o.overcommits, 5, "the over-commit")
        assert obs.overcommits[0].node == "n1" and obs.overcommits[0].resource == "cpu"
        cluster.delete("pods", "b", "default", grace_period_seconds=0)
        obs.wait_for(lambda o: o.pods["default/b"].deleted, 5, "b deleted")
        # A pod whose nodeName changes (impossible through the API, so fed in directly) is noted.
        moved = dict(cluster.get("pods", "a", "default"))
        moved["spec"] = {**moved["spec"], "nodeName": "n2"}
        with obs._cond:
            obs._apply("MODIFIED", moved, 0.0)
        rec = obs.record("default/a")
        assert rec is not None and rec.bindings == 1 and rec.node == "n1" and rec.node_changes == ["n2"]
    assert obs.error is None


def test_observer_wait_for_times_out_with_what_it_waited_for() -> None:
    with PodObserver(EmbeddedCluster()) as obs, pytest.raises(TimeoutError, match="pods that never come"):
        obs.wait_for(lambda o: len(o.pods) > 0, 0.2, "pods that never come")


def test_statistics_helpers() -> None:
    assert per_second([0.1, 0.2, 1.5, 2.9], 0.0, 3.0) == [2, 1, 1]
    assert percentile([], 50) == 0.0
    assert percentile([float(i) for i in range(101)], 99) == 99.0


def test_process_usage_reads_this_process() -> None:
    sum(i * i for i in range(200_000))  # some CPU
    usage = process_usage(os.getpid())
    assert usage.cpu_seconds > 0
    assert usage.peak_rss_bytes > 10 * 2**20


def test_observer_counts_bound_pods_under_its_lock() -> None:
    """bound_count() read the record dict while the watch thread added to it ("dictionary changed
    size during iteration" ended a 10-minute soak at 6 minutes): it now holds the observer's lock,
    so while another thread holds it, the count waits."""
    import threading

    with PodObserver(EmbeddedCluster()) as obs:
        counted = threading.Event()
        with obs._cond:
            counter = threading.Thread(target=lambda: (obs.bound_count(), counted.set()), daemon=True)
            counter.start()
            assert not counted.wait(0.3), "bound_count() read the records without the observer's lock"
        assert counted.wait(30)
