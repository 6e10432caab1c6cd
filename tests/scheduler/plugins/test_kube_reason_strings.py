"""Every reason a default plugin gives a node or a pod, word for word as kube-scheduler 1.35.4's
source has it (the file:line of each, under pkg/scheduler/framework/plugins/ unless said
otherwise). Filter reasons are produced by running the plugin on a node that fails it; the rest
(PreFilter and PostFilter texts, and reasons behind storage or other pods) are pinned at the plugin's
constant, whose behaviour the plugin's own tests cover.

Left out because minisched does not produce them, on purpose: VolumeBinding's "node(s) did not have
enough free storage" (binder.go:68, storage capacity tracking), NodeAffinity's "node(s) didn't match
scheduler-enforced node affinity" (node_affinity.go:67, addedAffinity, refused at configuration),
and DynamicResources' allocation texts (DRA is not implemented). NodeUnschedulable's
ErrReasonUnknownCondition (node_unschedulable.go:49) and TaintToleration's ErrReasonNotMatch
(taint_toleration.go:53) are constants no Filter of 1.35.4 returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from minisched.objects import make_node, make_pod, taint
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import (
    inter_pod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    node_volume_limits,
    pod_topology_spread,
    scheduling_gates,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
)
from minisched.scheduler.plugins.default_preemption import evaluator, select_victims
from tests.scheduler.plugins.randomcluster import table_of

Object = dict[str, Any]


def _filter(plugin: Any, pod: Object, node: Object, placed: list[Object] = ()) -> tuple[str, ...]:  # type: ignore[assignment]
    """The reasons `plugin`'s Filter gives `node` (PreFilter first, as the framework runs it)."""
    state, info, table = CycleState(), PodInfo.from_pod(pod), table_of([node], {node["metadata"]["name"]: placed})
    if hasattr(plugin, "pre_filter"):
        plugin.pre_filter(state, info, table)
    return plugin.filter(state, info, table).reasons_at(0)


FILTERS: list[tuple[str, str, Callable[[], tuple[str, ...]]]] = [
    # nodeunschedulable/node_unschedulable.go:51, returned at :156
    ("node(s) were unschedulable", "NodeUnschedulable",
     lambda: _filter(node_unschedulable.new(None, None), make_pod("p"), {**make_node("n"), "spec": {"unschedulable": True}})),
    # nodename/node_name.go:43, returned at :82
    ("node(s) didn't match the requested node name", "NodeName",
     lambda: _filter(node_name.new(None, None), make_pod("p", node_name="elsewhere"), make_node("n"))),
    # tainttoleration/taint_toleration.go:131 (new in 1.35: no taint key or value)
    ("node(s) had untolerated taint(s)", "TaintToleration",
     lambda: _filter(taint_toleration.new(None, None), make_pod("p"), make_node("n", taints=[taint("k", "v")]))),
    # nodeaffinity/node_affinity.go:64, returned at :235
    ("node(s) didn't match Pod's node affinity/selector", "NodeAffinity",
     lambda: _filter(node_affinity.new(None, None), make_pod("p", node_selector={"zone": "a"}), make_node("n"))),
    # nodeports/node_ports.go:51, returned at :170
    ("node(s) didn't have free ports for the requested pod ports", "NodePorts",
     lambda: _filter(node_ports.new(None, None), make_pod("p", host_ports=[80]), make_node("n"),
                     [make_pod("holder", host_ports=[80])])),
    # noderesources/fit.go:656
    ("Too many pods", "NodeResourcesFit",
     lambda: _filter(node_resources_fit.new(None, None), make_pod("p"), make_node("n", pods="0"))),
    # noderesources/fit.go:673
    ("Insufficient cpu", "NodeResourcesFit",
     lambda: _filter(node_resources_fit.new(None, None), make_pod("p", cpu="8"), make_node("n", cpu="4"))),
    # noderesources/fit.go:683
    ("Insufficient memory", "NodeResourcesFit",
     lambda: _filter(node_resources_fit.new(None, None), make_pod("p", memory="8Gi"), make_node("n", memory="4Gi"))),
    # noderesources/fit.go:694
    ("Insufficient ephemeral-storage", "NodeResourcesFit",
     lambda: _filter(node_resources_fit.new(None, None), make_pod("p", extra_requests={"ephemeral-storage": "2Gi"}),
                     make_node("n", ephemeral_storage="1Gi"))),
    # noderesources/fit.go:726 (fmt.Sprintf("Insufficient %v", rName))
    ("Insufficient example.com/gpu", "NodeResourcesFit",
     lambda: _filter(node_resources_fit.new(None, None), make_pod("p", extra_requests={"example.com/gpu": "1"}),
                     make_node("n"))),
]


@pytest.mark.parametrize(("kube", "plugin", "produce"), FILTERS, ids=[f"{p}: {k}" for k, p, _ in FILTERS])
def test_filter_reason_is_kube_1_35_4s(kube: str, plugin: str, produce: Callable[[], tuple[str, ...]]) -> None:
    assert produce() == (kube,), plugin


def test_node_affinity_pre_filter_conflict_is_kube_1_35_4s() -> None:
    # nodeaffinity/node_affinity.go:70, returned at :203: a term whose metadata.name requirements
    # (ANDed) leave no name: In [a] and In [b]
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]},
                            {"key": "metadata.name", "operator": "In", "values": ["b"]}]}
    pod = make_pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}})
    _, status = node_affinity.new(None, None).pre_filter(CycleState(), PodInfo.from_pod(pod), table_of([make_node("a")]))
    assert status.reasons == ("pod affinity terms conflict",)


def test_scheduling_gates_message_is_kube_1_35_4s() -> None:
    # schedulinggates/scheduling_gates.go:56: fmt.Sprintf("waiting for scheduling gates: %v", gates),
    # a Go []string printed with %v
    status = scheduling_gates.new(None, None).pre_enqueue(make_pod("p", scheduling_gates=["a", "b"]))
    assert status.reasons == ("waiting for scheduling gates: [a b]",)


CONSTANTS = [
    # interpodaffinity/filtering.go:39 (UnschedulableAndUnresolvable at :420)
    (inter_pod_affinity.ERR_AFFINITY, "node(s) didn't match pod affinity rules"),
    # interpodaffinity/filtering.go:41 (Unschedulable at :424)
    (inter_pod_affinity.ERR_ANTI_AFFINITY, "node(s) didn't match pod anti-affinity rules"),
    # interpodaffinity/filtering.go:37 (Unschedulable at :428)
    (inter_pod_affinity.ERR_EXISTING_ANTI_AFFINITY, "node(s) didn't satisfy existing pods anti-affinity rules"),
    # podtopologyspread/plugin.go:41 (Unschedulable at filtering.go:354)
    (pod_topology_spread.ERR_CONSTRAINTS, "node(s) didn't match pod topology spread constraints"),
    # podtopologyspread/plugin.go:43 (UnschedulableAndUnresolvable at filtering.go:334)
    (pod_topology_spread.ERR_MISSING_LABEL, "node(s) didn't match pod topology spread constraints (missing required label)"),
    # volumerestrictions/volume_restrictions.go:58 (Unschedulable at :320)
    (volume_restrictions.DISK_CONFLICT, "node(s) had no available disk"),
    # volumerestrictions/volume_restrictions.go:60 (Unschedulable at :297)
    (volume_restrictions.RWOP_CONFLICT, "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
                                        "access mode already in-use by another pod"),
    # volumezone/volume_zone.go:61 (UnschedulableAndUnresolvable at :241)
    (volume_zone.REASON, "node(s) had no available volume zone"),
    # nodevolumelimits/csi.go:43 (Unschedulable at :348)
    (node_volume_limits.REASON, "node(s) exceed max volume count"),
    # volumebinding/binder.go:66, :64, :70 (UnschedulableAndUnresolvable at volume_binding.go:440)
    (volume_binding.NODE_CONFLICT, "node(s) didn't match PersistentVolume's node affinity"),
    (volume_binding.BIND_CONFLICT, "node(s) didn't find available persistent volumes to bind"),
    (volume_binding.PV_NOT_EXIST, "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"),
    # volumebinding/volume_binding.go:378
    (volume_binding.UNBOUND_IMMEDIATE, "pod has unbound immediate PersistentVolumeClaims"),
    # defaultpreemption/default_preemption.go:246
    (select_victims.NO_VICTIMS, "No preemption victims found for incoming pod"),
    # preemption/preemption.go:310 (pkg/scheduler/framework/preemption)
    (evaluator.NOT_HELPFUL, "Preemption is not helpful for scheduling"),
]


@pytest.mark.parametrize(("ours", "kube"), CONSTANTS, ids=[k for _, k in CONSTANTS])
def test_reason_constant_is_kube_1_35_4s(ours: str, kube: str) -> None:
    assert ours == kube
