from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from minisched.objects import make_node, make_pod, taint
from minisched.scheduler.framework.algorithm import num_feasible_nodes_to_find
from minisched.scheduler.framework.cycle_state import BIND_RESOURCE_VERSION, CycleState
from minisched.scheduler.framework.diagnosis import fit_error_message
from minisched.scheduler.framework.interface import PreFilterResult
from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import in_tree_registry
from minisched.scheduler.snapshot import NodeTable

HEADER = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def table(*nodes: dict[str, Any]) -> NodeTable:
    t = NodeTable()
    for n in nodes:
        t.add_node(n)
    return t


def info(name: str, **kw: Any) -> PodInfo:
    return PodInfo.from_pod(make_pod(name, **kw))


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [(0, 50, 50), (0, 100, 100), (0, 1000, 420), (0, 5000, 500), (0, 6000, 300), (0, 100_000, 5000),
     (10, 500, 100), (30, 1000, 300), (100, 5000, 5000), (50, 99, 99)],
)
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def test_adaptive_sampling_rotates_the_start() -> None:
    t = table(*(make_node(f"n{i:03}") for i in range(200)))
    fw = Framework(seed=1)
    first = fw.schedule(info("a"), t.snapshot())
    assert first.evaluated == 100 and first.decision.evaluated_rows.tolist() == list(range(100))
    second = fw.schedule(info("b"), t.snapshot())
    assert second.decision.evaluated_rows.tolist() == list(range(100, 200))
    assert fw.algorithm.next_start_node_index == 0
    every = Framework(load_profiles({**HEADER, "percentageOfNodesToScore": 100})[0])
    assert every.schedule(info("c"), t.snapshot()).evaluated == 200


def test_sampling_counts_feasible_nodes_not_examined_ones() -> None:
    nodes = [make_node(f"n{i:03}", cpu="1" if i % 2 else "8") for i in range(300)]
    fw = Framework(seed=1)
    r = fw.schedule(info("big", cpu="4"), table(*nodes).snapshot())
    # 300 nodes -> 48% -> 144 feasible wanted; every second node fits, so 287 are examined
    assert r.feasible == 144 and r.evaluated == 287
    assert fw.algorithm.next_start_node_index == 287


def test_nominated_node_is_tried_first_and_wins_without_scoring() -> None:
    t = table(make_node("small", cpu="2"), make_node("big", cpu="64"))
    pod = make_pod("p", cpu="1")
    pod["status"] = {"nominatedNodeName": "small"}
    r = Framework(seed=1).schedule(PodInfo.from_pod(pod), t.snapshot())
    assert r.node == "small" and r.decision.nominated and r.evaluated == 1
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"  # no longer fits there
    r = Framework(seed=1).schedule(PodInfo.from_pod(pod), t.snapshot())
    assert r.node == "big" and not r.decision.nominated


def test_room_held_for_higher_priority_nominated_pods() -> None:
    t = table(make_node("a", cpu="2"), make_node("b", cpu="1"))
    waiting = info("waiting", cpu="2", priority=100)
    low = info("low", cpu="1", priority=1)
    r = Framework(seed=1).schedule(low, t.snapshot(), nominated=[("a", waiting)])
    assert r.node == "b"
    high = info("high", cpu="2", priority=1000)  # lower-priority nominations do not hold room against it
    assert Framework(seed=1).schedule(high, t.snapshot(), nominated=[("a", low)]).node == "a"


def test_failed_scheduling_message_in_kube_form() -> None:
    nodes = [make_node(f"c{i}", cpu="1") for i in range(3)] + [
        make_node(f"t{i}", cpu="8", taints=[taint("dedicated", "infra")]) for i in range(2)]
    r = Framework(seed=1).schedule(info("p", cpu="2"), table(*nodes).snapshot())
    assert r.node is None and r.status.code == Code.UNSCHEDULABLE
    want = "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient cpu."
    assert r.status.message() == want == r.diagnosis.message() == r.decision.message
    statuses = r.diagnosis.statuses()
    # kube 1.35: 2 cpus asked of a 1-cpu node is beyond its allocatable: no eviction can help
    assert statuses["c0"] == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient cpu",), "NodeResourcesFit")
    assert statuses["t0"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and statuses["t0"].plugin == "TaintToleration"
    assert r.diagnosis.unschedulable_plugins == {"NodeResourcesFit", "TaintToleration"}
    assert r.diagnosis.all_unresolvable


def test_every_reason_of_a_node_is_counted_and_sorted_as_strings() -> None:
    nodes = [make_node(f"n{i}", cpu="1", memory="1Gi") for i in range(2)]
    r = Framework(seed=1).schedule(info("p", cpu="2", memory="2Gi"), table(*nodes).snapshot())
    assert r.status.message() == "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."
    assert fit_error_message(12, {"y": 2, "x": 10}) == "0/12 nodes are available: 10 x, 2 y."
    # PostFilter's message comes after a space, with whatever period it has (kube v1.35's FitError.Error)
    assert fit_error_message(3, {}, pre_filter_msg="pre", post_filter_msg="preemption: not eligible.") == (
        "0/3 nodes are available: pre. preemption: not eligible.")


def test_no_nodes() -> None:
    r = Framework().schedule(info("p"), NodeTable().snapshot())
    assert r.status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert r.status.message() == "no nodes available to schedule pods"


def test_unreadable_pod_comes_back_with_the_reason() -> None:
    pod = make_pod("bad", cpu="1.2.3")
    parsed, r = Framework().schedule_object(pod, table(make_node("n")).snapshot())
    assert parsed is None and r.node is None
    assert r.status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "quantity '1.2.3' is not valid" in r.status.message() and "pod default/bad" in r.status.message()


def test_ties_are_broken_at_random() -> None:
    t = table(make_node("a"), make_node("b"), make_node("c"))
    chosen = {Framework(seed=s).schedule(info("p"), t.snapshot()).node for s in range(30)}
    assert chosen == {"a", "b", "c"}
    assert len({Framework(seed=7).schedule(info("p"), t.snapshot()).node for _ in range(5)}) == 1


def test_decision_record() -> None:
    t = table(make_node("roomy", cpu="16"), make_node("tight", cpu="2"), make_node("full", cpu="1"),
              make_node("tainted", taints=[taint("x", "y")]))
    r = Framework(seed=1).schedule(info("p", cpu="1500m"), t.snapshot())
    d = r.decision
    assert r.node == "roomy" == d.chosen and d.evaluated == 4 and d.feasible == 2
    verdicts = d.filter_verdicts()
    assert verdicts["full"]["NodeResourcesFit"] == "Insufficient cpu"
    assert verdicts["tainted"]["TaintToleration"] == "node(s) had untolerated taint(s)"
    assert verdicts["roomy"]["NodeResourcesFit"] == "passed"
    scores = d.scores()
    assert scores["roomy"]["TaintToleration"] == {"raw": 0, "normalized": 100, "weighted": 300}
    assert scores["roomy"]["NodeResourcesFit"]["raw"] > scores["tight"]["NodeResourcesFit"]["raw"]
    rows = d.rows()
    assert rows[0]["node"] == "roomy" and rows[0]["chosen"] and rows[0]["total"] == d.final_scores()["roomy"]
    assert {r["node"]: r.get("filtered_by") for r in rows[2:]} == {"full": "NodeResourcesFit", "tainted": "TaintToleration"}
    doc = json.loads(d.to_annotation())
    assert doc["chosen"] == "roomy" and doc["feasible"] == 2
    assert doc["filtered"] == {"NodeResourcesFit: Insufficient cpu": 1, "TaintToleration: node(s) had untolerated taint(s)": 1}
    assert doc["scores"][0]["node"] == "roomy"
    sim = d.simulator_annotations()
    prefix = "kube-scheduler-simulator.sigs.k8s.io/"
    assert sim[prefix + "selected-node"] == "roomy"
    filters = json.loads(sim[prefix + "filter-result"])
    assert filters["tainted"] == {"NodeUnschedulable": "passed", "NodeName": "passed",
                                  "TaintToleration": "node(s) had untolerated taint(s)"}  # stops there, as kube
    assert filters["full"]["NodeResourcesFit"] == "Insufficient cpu"
    final = json.loads(sim[prefix + "finalscore-result"])
    assert final["roomy"]["TaintToleration"] == "300"
    assert set(json.loads(sim[prefix + "score-result"])) == {"roomy", "tight"}


# ---- custom plugins through the registry ----
class Gate:
    name = "Gate"

    def __init__(self, args: Mapping[str, Any] | None) -> None:
        self.mode = (args or {}).get("mode", "pass")
        self.calls: list[str] = []

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        if self.mode == "reject":
            return None, Status.unschedulable("pod is not welcome")
        if self.mode == "only-b":
            return PreFilterResult(frozenset({"b"})), Status.success()
        if self.mode == "boom":
            raise RuntimeError("plugin bug")
        return None, Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: np.ndarray) -> np.ndarray:
        return np.full(len(rows), 1000 if self.mode == "bad-score" else 1, np.int64)

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.calls.append(f"reserve {node_name}")
        return Status.unschedulable("no") if self.mode == "deny-reserve" else Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.calls.append(f"unreserve {node_name}")

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return (Status.wait(), 5.0) if self.mode == "wait" else (Status.success(), 0.0)


def framework_with_gate(mode: str) -> Framework:
    registry = in_tree_registry()
    registry.register("Gate", lambda args, handle: Gate(args))
    profile = load_profiles({**HEADER, "profiles": [{
        "plugins": {"multiPoint": {"enabled": [{"name": "Gate"}]}},
        "pluginConfig": [{"name": "Gate", "args": {"mode": mode}}],
    }]})[0]
    return Framework(profile, registry, seed=1)


def test_pre_filter_rejection_replaces_the_per_node_part() -> None:
    r = framework_with_gate("reject").schedule(info("p"), table(make_node("a"), make_node("b")).snapshot())
    assert r.status.message() == "0/2 nodes are available: pod is not welcome."
    assert r.status.plugin == "Gate" and r.diagnosis.statuses()["a"].plugin == "Gate"


def test_pre_filter_result_narrows_the_nodes() -> None:
    t = table(make_node("a", cpu="64"), make_node("b"))
    assert framework_with_gate("only-b").schedule(info("p"), t.snapshot()).node == "b"
    r = framework_with_gate("only-b").schedule(info("p", cpu="10"), t.snapshot())
    assert r.status.message() == "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't satisfy plugin(s) [Gate]."


def test_plugin_errors_become_error_statuses() -> None:
    r = framework_with_gate("boom").schedule(info("p"), table(make_node("a")).snapshot())
    assert r.status.is_error and r.status.plugin == "Gate"
    assert r.status.message() == 'running PreFilter plugin "Gate": plugin bug'  # kube's wrapping
    r = framework_with_gate("bad-score").schedule(info("p"), table(make_node("a"), make_node("b")).snapshot())
    assert r.status.is_error and "invalid score 1000" in r.status.message() and r.status.plugin == "Gate"


def test_reserve_permit_and_unreserve() -> None:
    fw = framework_with_gate("deny-reserve")
    state, pod = CycleState(), info("p")
    status = fw.run_reserve(state, pod, "a")
    assert status.is_rejected and status.plugin == "Gate"
    fw.run_unreserve(state, pod, "a")
    assert fw.plugins["Gate"].calls == ["reserve a", "unreserve a"]  # type: ignore[attr-defined]
    status, timeouts = framework_with_gate("wait").run_permit(state, pod, "a")
    assert status.is_wait and timeouts == {"Gate": 5.0}
    assert framework_with_gate("pass").run_permit(state, pod, "a")[0].is_success


def test_filter_only_view_for_preemption() -> None:
    t = table(make_node("a", cpu="2"))
    victim = info("victim", cpu="2")
    t.add_pod("a", victim)
    fw = Framework()
    snap = t.snapshot()
    preemptor = info("pre", cpu="1")
    state = CycleState()  # what PreFilter wrote in the failed cycle, as preemption gets it
    fw.schedule(preemptor, snap, state=state)
    assert fw.run_filters(state, preemptor, snap)["a"].reasons == ("Insufficient cpu",)
    assert fw.run_filters(state.clone(), preemptor, snap.for_node("a", removed=[victim]))["a"].is_success


def test_node_name_affinity_narrows_in_prefilter_as_kube_reports_it() -> None:
    # a pod pinned by matchFields to a node whose host port is taken; kube 1.35.4 gives the nodes
    # outside NodeAffinity's PreFilterResult "node(s) didn't satisfy plugin(s) [NodeAffinity]"
    # (schedule_one.go:542; older releases said "node is filtered out by the prefilter result")
    t = table(make_node("n1"), make_node("n2"), make_node("n3"))
    t.add_pod("n1", info("holder", host_ports=[80]))
    pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    r = Framework(seed=1).schedule(info("p", host_ports=[80], affinity=pinned), t.snapshot())
    assert r.status.message() == ("0/3 nodes are available: 1 node(s) didn't have free ports for the requested "
                                  "pod ports, 2 node(s) didn't satisfy plugin(s) [NodeAffinity].")
    statuses = r.diagnosis.statuses()
    assert statuses["n2"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and statuses["n1"].plugin == "NodePorts"


def test_conflicting_node_name_terms_reject_in_prefilter() -> None:
    conflict = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]},
                         {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}
    r = Framework(seed=1).schedule(info("p", affinity=conflict), table(make_node("n1"), make_node("n2")).snapshot())
    assert r.status.message() == "0/2 nodes are available: pod affinity terms conflict."
    assert r.status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and r.diagnosis.all_unresolvable


def test_filters_with_nothing_to_check_are_skipped() -> None:
    r = Framework(seed=1).schedule(info("plain"), table(make_node("a"), make_node("b")).snapshot())
    assert "NodePorts" not in r.decision.filter_plugins and "NodeAffinity" not in r.decision.filter_plugins
    r = Framework(seed=1).schedule(info("web", host_ports=[80], node_selector={"kubernetes.io/hostname": "a"}),
                                   table(make_node("a"), make_node("b")).snapshot())
    assert {"NodePorts", "NodeAffinity"} <= set(r.decision.filter_plugins) and r.node == "a"


def test_prefilter_plugins_that_narrow_the_nodes_are_rejectors_too() -> None:
    # kube's RunPreFilterPlugins returns pluginsWithNodes as the diagnosis' unschedulable plugins:
    # a pod pinned to a node by name (NodeAffinity's PreFilter result) that does not fit there waits
    # for NodeAffinity's events as well as NodeResourcesFit's (a new node may be the one it names)
    pod = make_pod("pinned", cpu="2")
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}}
    r = Framework(seed=1).schedule(PodInfo.from_pod(pod), table(make_node("a", cpu="1"), make_node("b", cpu="4")).snapshot())
    assert r.node is None
    assert r.diagnosis.unschedulable_plugins == {"NodeResourcesFit", "NodeAffinity"}


# ---- PostFilter, as kube's RunPostFilterPlugins ----
class _PostFilterPlugin:
    """Says `code` (with the nomination `node`) at PostFilter, and counts its calls."""

    def __init__(self, name: str, code: Code, node: str | None = None) -> None:
        self.name, self.code, self.node = name, code, node
        self.calls = 0

    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]) -> tuple[str | None, Status]:
        self.calls += 1
        return self.node, Status(self.code, ("injected status",))


def post_filter_framework(*plugins: _PostFilterPlugin) -> Framework:
    registry = in_tree_registry()
    def factory(plugin: _PostFilterPlugin) -> Any:
        return lambda args, handle: plugin

    for plugin in plugins:
        registry.register(plugin.name, factory(plugin))
    profile = load_profiles({**HEADER, "profiles": [{"plugins": {"postFilter": {
        "disabled": [{"name": "*"}], "enabled": [{"name": p.name} for p in plugins]}}}]})[0]
    return Framework(profile, registry, seed=1)


def run_post_filter(*plugins: _PostFilterPlugin) -> tuple[str | None, Status, str]:
    """(nomination, status, the diagnosis' PostFilter message) after a pod fit no node."""
    fw = post_filter_framework(*plugins)
    r = fw.schedule(info("p", cpu="8"), table(make_node("a", cpu="1")).snapshot())
    assert r.node is None and r.diagnosis is not None
    node, status = fw.run_post_filter(CycleState(), info("p", cpu="8"), r.diagnosis)
    return node, status, r.diagnosis.post_filter_msg


S, E, U, UU = Code.SUCCESS, Code.ERROR, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize(("codes", "want"), [
    pytest.param([S], Status(S, ("injected status",)), id="a single plugin makes a Pod schedulable"),
    pytest.param([U, S], Status(S, ("injected status",)),
                 id="plugin1 failed to make a Pod schedulable, followed by plugin2 which makes the Pod schedulable"),
    pytest.param([S, U], Status(S, ("injected status",)),
                 id="plugin1 makes a Pod schedulable, followed by plugin2 which cannot make the Pod schedulable"),
    # (kube's name repeats the second case's; plugin1 errs: the error stands, naming plugin1)
    pytest.param([E, S], Status(E, ("injected status",), "TestPlugin1"),
                 id="plugin1 errs, followed by plugin2 which makes the Pod schedulable"),
    pytest.param([U, UU], Status(UU, ("injected status",), "TestPlugin2"),
                 id="plugin1 failed to make a Pod schedulable, followed by plugin2 which makes the Pod unresolvable"),
    pytest.param([U, U], Status(U, ("injected status", "injected status"), "TestPlugin1"),
                 id="both plugins failed to make a Pod schedulable"),
])
def test_post_filter_plugins(codes: list[Code], want: Status) -> None:
    """kube's TestPostFilterPlugins (pkg/scheduler/framework/runtime/framework_test.go)."""
    plugins = [_PostFilterPlugin(f"TestPlugin{i + 1}", code) for i, code in enumerate(codes)]
    _, status, message = run_post_filter(*plugins)
    assert status == want and message == want.message()


def test_post_filter_stops_at_unschedulable_and_unresolvable() -> None:
    """The plugin that says the pod cannot be helped ends PostFilter: the next one does not run, the
    status is its own (an earlier rejection's reasons go) and its nomination stands."""
    earlier = _PostFilterPlugin("Earlier", U, node="x")
    first, second = _PostFilterPlugin("First", UU, node=""), _PostFilterPlugin("Second", S, node="a")
    node, status, message = run_post_filter(earlier, first, second)
    assert (earlier.calls, first.calls, second.calls) == (1, 1, 0)
    assert status == Status(UU, ("injected status",), "First") and message == "injected status"
    assert node == ""


@pytest.mark.parametrize("code", [E, Code.SKIP, Code.WAIT])
def test_post_filter_treats_any_other_code_as_an_error(code: Code) -> None:
    """kube: "Any status other than Success, Unschedulable or UnschedulableAndUnresolvable is
    Error", with no nomination, and the plugins after it do not run."""
    first, second = _PostFilterPlugin("First", code, node="a"), _PostFilterPlugin("Second", S, node="a")
    node, status, _ = run_post_filter(first, second)
    assert status == Status(E, ("injected status",), "First") and node is None and second.calls == 0


def test_post_filter_keeps_the_last_nomination_of_the_plugins_that_rejected() -> None:
    """kube's `result`: the last meaningful (non-noop) PostFilterResult of the rejecting plugins."""
    node, status, _ = run_post_filter(_PostFilterPlugin("A", U, node=""), _PostFilterPlugin("B", U),
                                      _PostFilterPlugin("C", U, node="a"), _PostFilterPlugin("D", U))
    assert node == "a" and status.plugin == "A"


def test_past_permit_the_cycle_state_keeps_what_binding_cycle_plugins_may_read() -> None:
    state = CycleState()
    for key in ("PreFilterPodTopologySpread", "PreScoreInterPodAffinity", "PreFilterVolumeBinding",
                "PreScoreVolumeBinding", "PodTopologySpread.defaultSelector", BIND_RESOURCE_VERSION):
        state.write(key, key)
    state.snapshot = object()  # type: ignore[assignment]
    state.drop_scheduling_cycle_entries({"VolumeBinding", "DefaultBinder"})
    assert state.snapshot is None
    assert set(state._data) == {"PreFilterVolumeBinding", "PreScoreVolumeBinding",
                                "PodTopologySpread.defaultSelector", BIND_RESOURCE_VERSION}
