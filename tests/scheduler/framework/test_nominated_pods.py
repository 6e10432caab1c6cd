"""Pods nominated by earlier preemptions, as kube's RunFilterPluginsWithNominatedPods treats them:
a node where some wait (at least the incoming pod's priority) is filtered with them added and again
without them; only that node's own nominated pods are added; scoring never counts them. The first
three tests failed when minisched added every nominated pod to the whole snapshot instead."""

from __future__ import annotations

from typing import Any

from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def table(*nodes: dict[str, Any], pods: tuple[tuple[str, dict[str, Any]], ...] = ()) -> NodeTable:
    t = NodeTable()
    for n in nodes:
        t.add_node(n)
    for node, pod in pods:
        pod["spec"]["nodeName"] = node
        t.add_pod(node, PodInfo.from_pod(pod))
    return t


def info(name: str, **kw: Any) -> PodInfo:
    return PodInfo.from_pod(make_pod(name, **kw))


def test_scoring_does_not_count_nominated_pods() -> None:
    # "a" is twice "b": with the plain snapshot LeastAllocated prefers it. The pod nominated to "a"
    # leaves room for the new pod, so "a" stays feasible, and kube scores it without that pod.
    nodes = table(make_node("a", cpu="8", memory="16Gi"), make_node("b", cpu="4", memory="8Gi"))
    waiting = info("waiting", cpu="6", memory="1Gi", priority=100)
    r = Framework(seed=1).schedule(info("new", cpu="1", memory="1Gi"), nodes.snapshot(), nominated=[("a", waiting)])
    assert r.node == "a"
    assert sorted(r.decision.node_names[int(row)] for row in r.decision.feasible_rows) == ["a", "b"]


def test_a_nominated_pod_does_not_satisfy_required_pod_affinity() -> None:
    # The only pod the new one may sit beside is merely nominated: kube's second pass (without it)
    # rejects the node, so the pod waits instead of relying on a pod that may never arrive.
    nodes = table(make_node("a", labels={HOST: "a"}), make_node("b", labels={HOST: "b"}))
    waiting = info("waiting", labels={"app": "db"}, priority=100)
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST}]}}
    r = Framework(seed=1).schedule(info("web", labels={"app": "web"}, affinity=affinity), nodes.snapshot(),
                                   nominated=[("a", waiting)])
    assert r.node is None and r.status.is_rejected
    assert "InterPodAffinity" in r.diagnosis.unschedulable_plugins


def test_only_the_nodes_own_nominated_pods_count_for_topology_spread() -> None:
    # zone z1 = {a, b}, z2 = {c}; one app=s pod runs on c and one is nominated to a. Judging c, kube
    # adds only c's nominated pods (none): z1 has 0, so a second pod in z2 would make skew 2 > 1.
    nodes = table(make_node("a", labels={ZONE: "z1", HOST: "a"}), make_node("b", labels={ZONE: "z1", HOST: "b"}),
                  make_node("c", labels={ZONE: "z2", HOST: "c"}),
                  pods=(("c", make_pod("running", labels={"app": "s"})),))
    pod = make_pod("new", labels={"app": "s"})
    pod["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                                 "labelSelector": {"matchLabels": {"app": "s"}}}]
    waiting = info("waiting", labels={"app": "s"}, priority=100)
    r = Framework(seed=1).schedule(PodInfo.from_pod(pod), nodes.snapshot(), nominated=[("a", waiting)])
    feasible = sorted(r.decision.node_names[int(row)] for row in r.decision.feasible_rows)
    assert feasible == ["a", "b"]


def test_a_node_rejected_only_with_its_nominated_pods_reports_that_rejection() -> None:
    nodes = table(make_node("a", cpu="2"))
    waiting = info("waiting", cpu="2", priority=100)
    r = Framework(seed=1).schedule(info("new", cpu="1"), nodes.snapshot(), nominated=[("a", waiting)])
    assert r.node is None
    assert r.diagnosis.message() == "0/1 nodes are available: 1 Insufficient cpu."
    assert r.diagnosis.unschedulable_plugins == {"NodeResourcesFit"}


def test_the_nominated_node_fast_path_also_keeps_room_for_others() -> None:
    # the pod's own nominated node "a" now also holds a higher-priority nomination that fills it
    nodes = table(make_node("a", cpu="2"), make_node("b", cpu="2"))
    pod = make_pod("p", cpu="1", priority=10)
    pod["status"] = {"nominatedNodeName": "a"}
    higher = info("higher", cpu="2", priority=100)
    r = Framework(seed=1).schedule(PodInfo.from_pod(pod), nodes.snapshot(), nominated=[("a", higher)])
    assert r.node == "b" and not r.decision.nominated


def test_one_pass_and_node_by_node_agree_when_filters_read_only_their_node() -> None:
    # Plain pods (no affinity or spreading): the with-nominated verdicts come from one vectorised
    # pass; they must equal judging each nominated node on its own one-node copy.
    nodes = table(*(make_node(f"n{i}", cpu="4") for i in range(6)))
    nominated = [(f"n{i}", info(f"w{i}", cpu=str(i), priority=100)) for i in range(6)]
    pod = info("new", cpu="2")
    fw = Framework(seed=1)
    r = fw.schedule(pod, nodes.snapshot(), nominated=nominated)
    feasible = sorted(r.decision.node_names[int(row)] for row in r.decision.feasible_rows)
    assert feasible == ["n0", "n1", "n2"]
    from minisched.scheduler.framework.cycle_state import CycleState

    state = CycleState()  # PreFilter's state and the nominations, as the cycle left them
    fw.schedule(pod, nodes.snapshot(), state=state, nominated=nominated)
    one_by_one = {name: fw._filter_with_added(state, pod, nodes.snapshot(), name).is_success for name in state.nominated}
    vectorised = {name: s.is_success for name, s in fw.verdicts_with_nominated(state, pod, nodes.snapshot()).items()}
    assert one_by_one == vectorised == {f"n{i}": i <= 2 for i in range(6)}
