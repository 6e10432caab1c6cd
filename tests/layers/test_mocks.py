"""Mocks that keep the interface honest: create_autospec of the Cluster protocol and of the
scheduler's handle refuse calls the real objects would refuse, so plugins tested against them are
tested against the interface they will meet."""

from __future__ import annotations

from unittest import mock

import pytest

from minisched.cluster.base import Cluster
from minisched.objects import make_pod
from minisched.scheduler.plugins import pod_dependencies
from minisched.scheduler.plugins.policy_filter import PolicyFilter
from minisched.scheduler.scheduler import SchedulerHandle
from minisched.validation.scheduling_policy import SCHEDULING_POLICIES, make_scheduling_policy


def test_an_autospecced_cluster_refuses_what_a_cluster_would() -> None:
    fake = mock.create_autospec(Cluster, instance=True)
    with pytest.raises(AttributeError):
        fake.lst("pods")  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="missing a required argument: 'resource'"):
        fake.list()  # type: ignore[call-arg]


def test_policy_filter_reads_policies_through_the_injected_cluster() -> None:
    fake = mock.create_autospec(Cluster, instance=True)
    fake.list.return_value = {"items": [make_scheduling_policy("gpu-only", 'hasLabel("gpu", "true")')]}
    plugin = PolicyFilter(cluster=fake)
    plugin.reload()
    fake.list.assert_called_once_with(SCHEDULING_POLICIES)
    assert [p.name for p in plugin.policies] == ["gpu-only"]


def test_pod_dependencies_asks_the_handle_which_pods_are_bound() -> None:
    handle = mock.create_autospec(SchedulerHandle, instance=True)
    handle.bound_node.side_effect = {"default/db": "n1"}.get
    plugin = pod_dependencies.new(None, handle)
    pod = make_pod("app")
    pod["metadata"]["annotations"] = {pod_dependencies.DEPENDS_ON_ANNOTATION: "db,cache"}
    assert plugin.pre_enqueue(pod).message() == "waiting for pods to be bound: [cache]"
    assert [c.args for c in handle.bound_node.call_args_list] == [("default/db",), ("default/cache",)]
