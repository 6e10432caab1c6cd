"""PodTopologySpread: cases from kube v1.35's filtering_test.go (TestSingleConstraint) and
scoring_test.go (TestPodTopologySpreadScore), the default constraints (System and List) with
selectors from Services and controllers, and the vectorised plugin against the pure rules."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from minisched.objects import make_node, make_pod, taint
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.profile import default_profile, load_profiles
from minisched.scheduler.framework.runtime import Framework, SimpleHandle
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo, PodSpecError
from minisched.scheduler.plugins import pod_topology_spread as pts
from minisched.scheduler.snapshot import NodeTable

Object = dict[str, Any]
HOST = pts.HOSTNAME
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


def pod(name: str = "p", labels: dict[str, str] | None = None, *constraints: Object, namespace: str = "default",
        node: str | None = None, owner: tuple[str, str, str] | None = None, terminating: bool = False,
        node_selector: dict[str, str] | None = None) -> Object:
    p = make_pod(name, labels=labels if labels is not None else {"foo": ""}, namespace=namespace, node_name=node,
                 node_selector=node_selector)
    if constraints:
        p["spec"]["topologySpreadConstraints"] = list(constraints)
    if owner:
        api_version, kind, owner_name = owner
        p["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": owner_name,
                                             "uid": "u-" + owner_name, "controller": True}]
    if terminating:
        p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return p


def tsc(skew: int, key: str, when: str, selector: Object | None = FOO, **extra: Any) -> Object:
    c: Object = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def node(name: str, **labels: str) -> Object:
    n = make_node(name)
    n["metadata"]["labels"] = {k.replace("__", "/").replace("_", "."): v for k, v in labels.items()} \
        if "host" not in labels else {**labels}
    return n


def hosts(*names: str) -> list[Object]:
    out = []
    for n in names:
        obj = make_node(n)
        obj["metadata"]["labels"] = {HOST: n}
        out.append(obj)
    return out


def zoned(*spec: tuple[str, str], key: str = "zone", host_key: str = "node") -> list[Object]:
    out = []
    for name, zone in spec:
        obj = make_node(name)
        obj["metadata"]["labels"] = {key: zone, host_key: name} if zone else {host_key: name}
        out.append(obj)
    return out


def existing(spread: dict[str, int], labels: dict[str, str] | None = None, namespace: str = "default") -> list[Object]:
    return [pod(f"{n}-{i}-{namespace}", labels, namespace=namespace, node=n)
            for n, count in spread.items() for i in range(count)]


def table(nodes: list[Object], pods: list[Object]) -> tuple[NodeTable, dict[str, list[PodInfo]]]:
    t = NodeTable()
    pods_on: dict[str, list[PodInfo]] = {n["metadata"]["name"]: [] for n in nodes}
    for n in nodes:
        t.add_node(n)
    for p in pods:
        info = PodInfo.from_pod(p)
        t.add_pod(p["spec"]["nodeName"], info)
        pods_on[p["spec"]["nodeName"]].append(info)
    return t.snapshot(), pods_on


def codes(plugin: pts.PodTopologySpread, incoming: Object, nodes: list[Object], pods: list[Object]) -> list[str]:
    snap, pods_on = table(nodes, pods)
    info = PodInfo.from_pod(incoming)
    state = CycleState()
    _, status = plugin.pre_filter(state, info, snap)
    if status.is_skip:
        return ["Success"] * len(nodes)
    r = plugin.filter(state, info, snap)
    constraints, _ = pts.pod_constraints(info, pts.DO_NOT_SCHEDULE, plugin.args, plugin.lister)
    out = []
    for row, n in enumerate(nodes):
        pure = pts.filter_reason(info, n, nodes, pods_on, constraints)
        assert (r.reasons_at(row) or (None,))[0] == pure
        out.append("Success" if r.passed[row] else r.code_at(row).name)
    return out


def scores(plugin: pts.PodTopologySpread, incoming: Object, nodes: list[Object], pods: list[Object],
           failed: tuple[str, ...] = ()) -> list[int]:
    snap, pods_on = table(nodes, pods)
    info = PodInfo.from_pod(incoming)
    rows = np.array([i for i, n in enumerate(nodes) if n["metadata"]["name"] not in failed], np.intp)
    state = CycleState()
    if not plugin.pre_score(state, info, snap, rows).is_success:
        return [-1] * len(rows)
    raw = plugin.score(state, info, snap, rows)
    constraints, own = pts.pod_constraints(info, pts.SCHEDULE_ANYWAY, plugin.args, plugin.lister)
    feasible = [nodes[int(r)] for r in rows]
    pure = [pts.score_of(info, n, feasible, nodes, pods_on, constraints, own or not plugin.system_defaulted)
            for n in feasible]
    assert raw.tolist() == [0 if s is None else s for s in pure]
    normalized = plugin.normalize_score(state, info, raw).tolist()
    assert normalized == pts.normalize([0 if s is None else s for s in pure], [s is None for s in pure])
    return normalized


PLAIN = pts.PodTopologySpread(pts.SpreadArgs(pts.LIST), None)  # no default constraints
DNS, SA = pts.DO_NOT_SCHEDULE, pts.SCHEDULE_ANYWAY
FOUR = zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))
OK, NO, NEVER = "Success", "UNSCHEDULABLE", "UNSCHEDULABLE_AND_UNRESOLVABLE"


@pytest.mark.parametrize(
    ("name", "incoming", "nodes", "pods", "want"),
    [
        ("no existing pods", pod("p", None, tsc(1, "zone", DNS)), FOUR, [], [OK] * 4),
        ("no existing pods, incoming pod doesn't match itself", pod("p", None, tsc(1, "zone", DNS, BAR)), FOUR, [],
         [OK] * 4),
        ("existing pods in a different namespace do not count", pod("p", None, tsc(1, "zone", DNS)), FOUR,
         existing({"node-a": 1}, namespace="ns1") + existing({"node-a": 1}, namespace="ns2")
         + existing({"node-x": 1, "node-y": 1}), [OK, OK, NO, NO]),
        ("existing pods do not match null selector", pod("p", None, tsc(1, "zone", DNS, None)), FOUR,
         existing({"node-x": 1, "node-y": 1}), [OK] * 4),
        ("pods spread across zones as 3/3, all nodes fit", pod("p", None, tsc(1, "zone", DNS)), FOUR,
         existing({"node-a": 2, "node-b": 1, "node-y": 3}), [OK] * 4),
        ("pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
         pod("p", None, tsc(1, "zone", DNS)),
         zoned(("node-a", "zone1"), ("node-b", ""), ("node-x", "zone2"), ("node-y", "zone2")),
         existing({"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1}), [OK, NEVER, NO, NO]),
        ("minDomains above the domains: the global minimum is 0",
         pod("p", None, tsc(1, "zone", DNS, minDomains=3)), FOUR, existing({"node-a": 1, "node-x": 1}),
         [NO, NO, NO, NO]),
        ("terminating pods do not count", pod("p", None, tsc(1, "zone", DNS)), FOUR,
         [pod("t1", node="node-a", terminating=True), pod("t2", node="node-a", terminating=True)], [OK] * 4),
        ("nodeTaintsPolicy Honor leaves a tainted domain out",
         pod("p", None, tsc(1, "zone", DNS, nodeTaintsPolicy="Honor")),
         [*zoned(("node-a", "zone1")), *zoned(("node-x", "zone2"))], existing({"node-x": 2}), [OK, OK]),
    ],
)
def test_filter_cases_from_kube(name: str, incoming: Object, nodes: list[Object], pods: list[Object],
                                want: list[str]) -> None:
    if "Taints" in name:
        nodes[0]["spec"]["taints"] = [taint("bad", "x")]
    assert codes(PLAIN, incoming, nodes, pods) == want, name


@pytest.mark.parametrize(
    ("name", "incoming", "nodes", "pods", "failed", "want"),
    [
        ("one constraint on node, all 4 nodes are candidates (2/1/0/3)", pod("p", None, tsc(1, HOST, SA)),
         hosts("node-a", "node-b", "node-c", "node-d"), existing({"node-a": 2, "node-b": 1, "node-d": 3}), (),
         [20, 60, 100, 0]),
        ("one constraint on node, null selector", pod("p", None, tsc(1, HOST, SA, None)),
         hosts("node-a", "node-b", "node-c", "node-d"), existing({"node-a": 2, "node-b": 1, "node-d": 3}), (),
         [100, 100, 100, 100]),
        ("one constraint on zone, 3 out of 4 nodes are candidates", pod("p", None, tsc(1, "zone", SA)),
         zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"),
               host_key=HOST),
         existing({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}), ("node-y",), [75, 75, 100]),
        ("two constraints on zone and node, 2 out of 4 nodes are candidates",
         pod("p", None, tsc(1, "zone", SA), tsc(1, HOST, SA)),
         zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"),
               host_key=HOST),
         existing({"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}), ("node-b", "node-y"), [100, 63]),
        ("existing pods in a different namespace do not count", pod("p", None, tsc(1, HOST, SA)),
         hosts("node-a", "node-b"), existing({"node-a": 1}, namespace="ns1") + existing({"node-a": 1, "node-b": 2}),
         (), [100, 33]),
        ("terminating pods should be excluded", pod("p", None, tsc(1, HOST, SA)), hosts("node-a", "node-b"),
         [pod("p-a", node="node-a", terminating=True), pod("p-b", node="node-b")], (), [100, 0]),
        ("minDomains has no effect when ScheduleAnyway", pod("p", None, tsc(2, "node", SA, minDomains=10)),
         zoned(("node-a", ""), ("node-b", ""), ("node-c", "")), existing({"node-a": 2, "node-b": 2, "node-c": 1}),
         (), [75, 75, 100]),
        ("matchLabelKeys ANDed with an empty labelSelector",
         pod("p", {"foo": "", "bar": ""}, tsc(1, "zone", SA, {}, matchLabelKeys=["foo"]),
             tsc(1, HOST, SA, {}, matchLabelKeys=["bar"])),
         zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2"), host_key=HOST),
         [pod("p-a1", {"foo": ""}, node="node-a"), pod("p-b1", {"foo": "", "bar": ""}, node="node-b"),
          pod("p-y1", {"foo": ""}, node="node-c"), pod("p-y2", {"bar": ""}, node="node-c")], (), [60, 20, 60, 100]),
    ],
)
def test_score_cases_from_kube(name: str, incoming: Object, nodes: list[Object], pods: list[Object],
                               failed: tuple[str, ...], want: list[int]) -> None:
    if "minDomains" in name:  # kube's case has the API server's check off: minDomains with ScheduleAnyway
        incoming["spec"]["topologySpreadConstraints"][0].pop("minDomains")
    assert scores(PLAIN, incoming, nodes, pods, failed) == want, name


# ---- default constraints ------------------------------------------------------------------------
def service(name: str, selector: dict[str, str] | None, namespace: str = "default") -> Object:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector, "ports": [{"port": 80}]} if selector is not None else {"ports": []}}


def workload(kind: str, name: str, selector: Any, namespace: str = "default") -> Object:
    api = "v1" if kind == "ReplicationController" else "apps/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector}}


def system(*objects: Object) -> pts.PodTopologySpread:
    return pts.PodTopologySpread(pts.SpreadArgs(), pts.StaticWorkloads(objects))


def test_system_defaulting_nodes_without_zone_pods_match_service() -> None:
    """kube's "system defaulting, nodes don't have zone, pods match service": 4/3/2/1 -> 44/66/77/100."""
    plugin = system(service("s", {"foo": ""}))
    got = scores(plugin, pod("p"), hosts("node-a", "node-b", "node-c", "node-d"),
                 existing({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}))
    assert got == [44, 66, 77, 100]


def test_system_defaults_skip_pods_nothing_selects() -> None:
    plugin = system(service("s", {"app": "other"}), service("headless-no-selector", None))
    info = PodInfo.from_pod(pod("p"))
    snap, _ = table(hosts("a", "b"), [])
    assert plugin.pre_score(CycleState(), info, snap, np.arange(2, dtype=np.intp)).is_skip
    assert plugin.pre_filter(CycleState(), info, snap)[1].is_skip  # System defaults never filter


@pytest.mark.parametrize(
    ("owner", "objects", "selector_keys"),
    [
        (("apps/v1", "ReplicaSet", "web-123"), [workload("ReplicaSet", "web-123", {"matchLabels": {"app": "web"}})],
         ["app"]),
        (("apps/v1", "StatefulSet", "db"), [workload("StatefulSet", "db", {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web"]}]})], ["app"]),
        (("v1", "ReplicationController", "rc"), [workload("ReplicationController", "rc", {"app": "web"})], ["app"]),
        # a Service and the controller: both selectors, ANDed
        (("apps/v1", "ReplicaSet", "web-123"), [workload("ReplicaSet", "web-123", {"matchLabels": {"app": "web"}}),
                                                 service("svc", {"tier": "front"})], ["tier", "app"]),
        # a Deployment is not one of kube's four: only Services count then
        (("apps/v1", "Deployment", "web"), [workload("ReplicaSet", "web", {"matchLabels": {"app": "web"}})], []),
        # a controller the listers do not know: nothing
        (("apps/v1", "ReplicaSet", "gone"), [], []),
        # a Service in another namespace does not select the pod
        (None, [service("svc", {"app": "web"}, namespace="other")], []),
    ],
)
def test_default_selector_from_services_and_controllers(owner: Any, objects: list[Object],
                                                        selector_keys: list[str]) -> None:
    info = PodInfo.from_pod(pod("p", {"app": "web", "tier": "front"}, owner=owner))
    selector = pts.default_selector(info, pts.StaticWorkloads(objects))
    assert [r.key for r in selector.requirements] == selector_keys


def test_system_defaults_spread_a_replicasets_pods_by_host_and_zone() -> None:
    rs = workload("ReplicaSet", "web-1", {"matchLabels": {"app": "web"}})
    plugin = system(rs)
    owner = ("apps/v1", "ReplicaSet", "web-1")
    nodes = []
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("nozone", None)):
        n = make_node(name)
        n["metadata"]["labels"] = {HOST: name, **({pts.ZONE: zone} if zone else {})}
        nodes.append(n)
    pods = [pod(f"w{i}", {"app": "web"}, node=n, owner=owner) for i, n in enumerate(["a1", "a1", "a2"])]
    pods += [pod("other", {"app": "db"}, node="b1")]  # not selected: does not count
    got = scores(plugin, pod("new", {"app": "web"}, owner=owner), nodes, pods)
    # raw: a1 = 2*ln(6)+2 + 3*ln(5)+4 -> 14, a2 = ln(6)+2 + 3*ln(5)+4 -> 13, b1 = 2 + 4 = 6; the
    # zoneless node is not ignored under system defaults (kube's requireAllTopologies is false) and
    # gets only the hostname term, 2, so it scores best; its "" zone makes three zone domains
    assert got == [14, 21, 71, 100]


def test_list_defaulting_with_a_do_not_schedule_default() -> None:
    args = pts.SpreadArgs.parse({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]})
    plugin = pts.PodTopologySpread(args, pts.StaticWorkloads([service("s", {"foo": ""})]))
    assert codes(plugin, pod("p"), FOUR, existing({"node-a": 1})) == [NO, NO, OK, OK]
    # a pod with constraints of its own ignores the defaults (kube: defaults only without any)
    own = pod("p", None, tsc(5, "zone", SA))
    assert codes(plugin, own, FOUR, existing({"node-a": 1})) == [OK] * 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"defaultingType": "Sometimes"}, 'defaultingType: Unsupported value: "Sometimes"'),
        ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]},
         'when .defaultingType is "System", .defaultConstraints must be empty'),
        ({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}]},
         "must not define a selector"),
        ({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}, "maxSkew 0"),
        ({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}, "Duplicate value"),
        ({"defaultConstraint": []}, "unknown field"),
    ],
)
def test_args_are_validated_as_kube_does(args: Object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("(", r"\(")):
        pts.SpreadArgs.parse(args)


def test_in_the_default_profile_with_weight_two() -> None:
    profile = default_profile()
    assert ("PodTopologySpread", 2) in [(r.name, r.weight) for r in profile.multi_point.enabled]
    names = [r.name for r in profile.multi_point.enabled]
    assert names.index("NodeResourcesFit") < names.index("PodTopologySpread") < names.index("DefaultPreemption")
    fw = Framework(profile, handle=SimpleHandle(workloads=pts.StaticWorkloads(())))
    assert "PodTopologySpread" in fw.plugin_names("score")


def test_bad_constraints_are_named() -> None:
    with pytest.raises(PodSpecError, match=r"topologySpreadConstraints\[0\].maxSkew 0"):
        PodInfo.from_pod(pod("p", None, tsc(0, "zone", DNS)))
    with pytest.raises(PodSpecError, match="whenUnsatisfiable 'Sometimes'"):
        PodInfo.from_pod(pod("p", None, tsc(1, "zone", "Sometimes")))


def test_preemption_view_uses_the_whole_cluster_domains() -> None:
    """Filter on a one-node what-if view (preemption, the nominated node) judges by PreFilter's
    domain counts over every node, moved by the pods removed in the view (kube's RemovePod)."""
    nodes = zoned(("node-a", "zone1"), ("node-x", "zone2"))
    snap, _ = table(nodes, existing({"node-a": 2}))
    info = PodInfo.from_pod(pod("p", None, tsc(1, "zone", DNS)))
    state = CycleState()
    PLAIN.pre_filter(state, info, snap)
    alone = snap.for_node("node-a")
    assert not PLAIN.filter(state, info, alone).passed[0]  # 2 + 1 - 0 > 1: zone2 has none
    victims = list(snap.pods_on("node-a"))
    assert PLAIN.filter(state, info, snap.for_node("node-a", removed=victims)).passed[0]
    assert PLAIN.filter(state, info, snap.for_node("node-a", removed=victims[:1])).passed[0] is np.False_


@pytest.mark.parametrize("seed", range(40))
def test_vectorised_agrees_with_the_pure_rule(seed: int) -> None:
    rng = random.Random(seed)
    zones = ["a", "b", "c", "", None]
    nodes: list[Object] = []
    for i in range(rng.randint(3, 9)):
        labels = {k: v for k, v in (("zone", rng.choice(zones)), ("rack", rng.choice(["r1", "r2", None])),
                                     ("tier", rng.choice(["x", "y"])), (HOST, f"n{i}"),
                                     (pts.ZONE, rng.choice(["z1", "z2", None]))) if v is not None}
        n = make_node(f"n{i}", taints=[taint("t", "1")] if rng.random() < 0.2 else None)
        n["metadata"]["labels"] = labels
        nodes.append(n)
    rs = workload("ReplicaSet", "rs", {"matchLabels": {"app": "web"}})
    owner = ("apps/v1", "ReplicaSet", "rs")
    pods = []
    for n in nodes:
        for j in range(rng.randint(0, 4)):
            pods.append(pod(f"{n['metadata']['name']}-{j}", {"app": rng.choice(["web", "db"])},
                            namespace=rng.choice(["default", "default", "other"]), node=n["metadata"]["name"],
                            terminating=rng.random() < 0.1, owner=owner if rng.random() < 0.5 else None))
    own = rng.random() < 0.7
    constraints = []
    if own:
        for _ in range(rng.randint(1, 2)):
            constraints.append(tsc(rng.randint(1, 2), rng.choice(["zone", "rack", HOST]), rng.choice([DNS, SA]),
                                   rng.choice([{"matchLabels": {"app": "web"}}, {}, None]),
                                   nodeTaintsPolicy=rng.choice(["Honor", "Ignore"]),
                                   nodeAffinityPolicy=rng.choice(["Honor", "Ignore"])))
    incoming = pod("incoming", {"app": rng.choice(["web", "db"])}, *constraints, owner=owner,
                   node_selector={"tier": "x"} if rng.random() < 0.3 else None)
    plugin = system(rs) if rng.random() < 0.5 else pts.PodTopologySpread(
        pts.SpreadArgs.parse({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": rng.choice([DNS, SA])}]}),
        pts.StaticWorkloads([rs]))
    verdicts = codes(plugin, incoming, nodes, pods)  # asserts vectorised == pure per node
    failed = tuple(n["metadata"]["name"] for n, v in zip(nodes, verdicts, strict=True) if v != OK)
    if len(failed) < len(nodes):
        scores(plugin, incoming, nodes, pods, failed)  # asserts vectorised == pure, raw and normalized


def test_in_a_profile_with_reuse_on() -> None:
    profile = load_profiles({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                             "profiles": [{"plugins": {"multiPoint": {"enabled": [
                                 {"name": "PodTopologySpread", "weight": 2}]}}}]})[0]
    fw = Framework(profile, seed=1, reuse_min_nodes=0)
    assert fw.reuse and "PodTopologySpread" in fw.plugin_names("filter")
    t = NodeTable()
    for i, zone in enumerate("aabbcc"):
        t.add_node(make_node(f"n{i}", labels={"zone": zone}))
    placed: dict[str, int] = {}
    for i in range(12):  # identical pods: reuse must not hide the moving domain counts
        info = PodInfo.from_pod(pod(f"p{i}", {"app": "web"}, tsc(1, "zone", DNS, {"matchLabels": {"app": "web"}})))
        result = fw.schedule(info, t.snapshot())
        assert result.node is not None
        t.add_pod(result.node, info)
        zone = t.node(result.node)["metadata"]["labels"]["zone"]
        placed[zone] = placed.get(zone, 0) + 1
        assert max(placed.values()) - min(placed.get(z, 0) for z in "abc") <= 1


def test_code_names() -> None:
    assert Code.UNSCHEDULABLE.name == NO and Code.UNSCHEDULABLE_AND_UNRESOLVABLE.name == NEVER


def test_a_pod_rejected_for_skew_is_retried_when_a_domain_fills() -> None:
    """PodTopologySpread's events (kube's EventsToRegister): an assigned pod added or a node gone
    moves a pod it rejected; events it does not care about leave the pod where it is."""
    from minisched.scheduler.queue import (
        ASSIGNED_POD_ADD,
        NODE_ALLOCATABLE_CHANGE,
        NODE_DELETE,
        SchedulingQueue,
    )

    hints = {"minisched": Framework().queueing_hints}  # make_pod's profile
    selected = make_pod("other", labels={"foo": ""}, node_name="n1")  # the constraint selects it
    for event, new in ((ASSIGNED_POD_ADD, selected), (NODE_DELETE, None)):
        q = SchedulingQueue(queueing_hints=hints)
        p = pod("skewed", None, tsc(1, "zone", DNS))
        q.add(p, PodInfo.from_pod(p))
        qpi = q.pop(timeout=1)
        assert qpi is not None
        q.add_unschedulable(qpi, rejected_by={"PodTopologySpread"})
        assert q.move_all_to_active_or_backoff(NODE_ALLOCATABLE_CHANGE) == 0
        assert q.move_all_to_active_or_backoff(event, None, new) == 1


def test_args_from_a_scheduler_configuration() -> None:
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": {
                  "defaultingType": "List", "defaultConstraints": [
                      {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}}]}]}
    handle = SimpleHandle(workloads=pts.StaticWorkloads([service("s", {"foo": ""})]))
    fw = Framework(load_profiles(config)[0], handle=handle)
    snap, _ = table(FOUR, existing({"node-a": 1}))
    result = fw.schedule(PodInfo.from_pod(pod("p")), snap)
    assert result.node in ("node-x", "node-y")  # the List default is a hard constraint here
    bad = {**config, "profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": {
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}}]}]}
    with pytest.raises(ValueError, match="defaultingType is \"System\""):
        Framework(load_profiles(bad)[0], handle=handle)


def test_no_node_has_the_key_but_another_node_label_column_exists() -> None:
    """Every node lacks the constraint's key although the key exists in the table's vocabulary (a
    node that had it was relabelled): all fail as missing the label, none crashes."""
    t = NodeTable()
    t.add_node(make_node("a", labels={"zone": "z1"}))
    t.add_node(make_node("b"))
    t.update_node(make_node("a"))  # the zone column stays, every entry -1
    info = PodInfo.from_pod(pod("p", None, tsc(1, "zone", DNS)))
    r = PLAIN.filter(CycleState(), info, t.snapshot())
    assert r.passed.tolist() == [False, False] and r.reasons_at(0) == (pts.ERR_MISSING_LABEL,)
