"""InterPodAffinity: kube's filtering_test.go and scoring_test.go cases (rewritten here), the pure
rules against the vectorised plugin, PreFilter extensions, and parsing."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo, PodSpecError
from minisched.scheduler.plugins import inter_pod_affinity as ipa
from minisched.scheduler.plugins.inter_pod_affinity import (
    ERR_AFFINITY,
    ERR_ANTI_AFFINITY,
    ERR_EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
    StaticNamespaces,
)
from minisched.scheduler.snapshot import NodeTable

Object = dict[str, Any]

SECURITY_SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}


def expr(key: str, op: str, *values: str) -> Object:
    e: Object = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def term(topology_key: str, *exprs: Object, match_labels: Mapping[str, str] | None = None,
         namespaces: Sequence[str] | None = None, namespace_selector: Object | None = None,
         no_selector: bool = False) -> Object:
    t: Object = {"topologyKey": topology_key}
    if not no_selector:
        sel: Object = {}
        if exprs:
            sel["matchExpressions"] = list(exprs)
        if match_labels:
            sel["matchLabels"] = dict(match_labels)
        t["labelSelector"] = sel
    if namespaces is not None:
        t["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        t["namespaceSelector"] = namespace_selector
    return t


def pod(name: str, labels: Mapping[str, str] | None = None, *, namespace: str = "default",
        affinity: Sequence[Object] = (), anti: Sequence[Object] = (),
        preferred: Sequence[tuple[int, Object]] = (), preferred_anti: Sequence[tuple[int, Object]] = ()) -> PodInfo:
    aff: Object = {}
    if affinity or preferred:
        aff["podAffinity"] = {}
        if affinity:
            aff["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = list(affinity)
        if preferred:
            aff["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in preferred]
    if anti or preferred_anti:
        aff["podAntiAffinity"] = {}
        if anti:
            aff["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = list(anti)
        if preferred_anti:
            aff["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in preferred_anti]
    return PodInfo.from_pod(make_pod(name, namespace=namespace, labels=dict(labels or {}), affinity=aff or None))


@dataclass
class Cluster:
    nodes: dict[str, dict[str, str]]  # node -> labels
    pods: list[tuple[str, PodInfo]] = field(default_factory=list)  # (node, pod)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)

    def build(self) -> tuple[NodeTable, list[Object], dict[str, list[PodInfo]]]:
        table = NodeTable()
        objs = [make_node(n, labels=labels) for n, labels in self.nodes.items()]
        for o in objs:
            table.add_node(o)
        pods_on: dict[str, list[PodInfo]] = {n: [] for n in self.nodes}
        for node, p in self.pods:
            table.add_pod(node, p)  # a pod on a node not in the cluster waits as an orphan, uncounted
            if node in pods_on:
                pods_on[node].append(p)
        return table.snapshot(), objs, pods_on


def run_filter(plugin: InterPodAffinity, incoming: PodInfo, c: Cluster) -> tuple[list[str | None], list[Code | None]]:
    """The vectorised verdict per node (reason, code), checked against the pure rule on the way."""
    table, objs, pods_on = c.build()
    state = CycleState()
    _, status = plugin.pre_filter(state, incoming, table)
    if status.is_skip:
        reasons: list[str | None] = [None] * len(table)
        codes: list[Code | None] = [None] * len(table)
    else:
        r = plugin.filter(state, incoming, table)
        reasons = [(r.reasons_at(i) or (None,))[0] for i in range(len(table))]
        assert all(len(r.reasons_at(i)) <= 1 for i in range(len(table)))  # kube gives one reason
        codes = [None if r.passed[i] else r.code_at(i) for i in range(len(table))]
    pure = [ipa.filter_reason(incoming, o, objs, pods_on, StaticNamespaces(c.namespaces)) for o in objs]
    assert reasons == pure
    return reasons, codes


NODE1 = {"machine1": {"region": "r1", "zone": "z11"}}
HAS_SECURITY_SCAN = [("machine1", pod("existing", SECURITY_SCAN))]

# (name, incoming, existing pods, expected reason on machine1) -- kube's TestRequiredAffinitySingleNode
SINGLE_NODE: list[tuple[str, PodInfo, list[tuple[str, PodInfo]], str | None]] = [
    ("no required pod affinity: fits a node without pods", pod("p"), [], None),
    ("affinity In matches the existing pod",
     pod("p", S1, affinity=[term("region", expr("service", "In", "securityscan", "value2"))]), HAS_SECURITY_SCAN, None),
    ("affinity NotIn matches the existing pod",
     pod("p", S1, affinity=[term("region", expr("service", "NotIn", "securityscan3", "value3"))]),
     HAS_SECURITY_SCAN, None),
    ("affinity in another namespace does not match",
     pod("p", S1, affinity=[term("region", expr("service", "In", "securityscan", "value2"), namespaces=["DiffNameSpace"])]),
     [("machine1", pod("existing", SECURITY_SCAN, namespace="ns"))], ERR_AFFINITY),
    ("unmatching selector (and the pod does not match itself)",
     pod("p", SECURITY_SCAN, affinity=[term("region", expr("service", "In", "antivirusscan", "value2"))]),
     HAS_SECURITY_SCAN, ERR_AFFINITY),
    ("several terms with different operators, all matched",
     pod("p", S1, affinity=[
         term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
         term("region", expr("service", "In", "securityscan"), expr("service", "NotIn", "WrongValue"))]),
     HAS_SECURITY_SCAN, None),
    ("terms are ANDed: one requirement fails",
     pod("p", S1, affinity=[
         term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
         term("region", expr("service", "In", "securityscan2"), expr("service", "NotIn", "WrongValue"))]),
     HAS_SECURITY_SCAN, ERR_AFFINITY),
    ("affinity and anti-affinity (on a key the node lacks) both satisfied",
     pod("p", S1, affinity=[term("region", expr("service", "In", "securityscan", "value2"))],
         anti=[term("node", expr("service", "In", "antivirusscan", "value2"))]),
     HAS_SECURITY_SCAN, None),
    ("and the existing pod's anti-affinity (on a key the node lacks) too",
     pod("p", S1, affinity=[term("region", expr("service", "In", "securityscan", "value2"))],
         anti=[term("node", expr("service", "In", "antivirusscan", "value2"))]),
     [("machine1", pod("existing", SECURITY_SCAN, anti=[term("node", expr("service", "In", "antivirusscan", "value2"))]))],
     None),
    ("affinity satisfied, anti-affinity in the zone not",
     pod("p", S1, affinity=[term("region", expr("service", "In", "securityscan", "value2"))],
         anti=[term("zone", expr("service", "In", "securityscan", "value2"))]),
     HAS_SECURITY_SCAN, ERR_ANTI_AFFINITY),
    ("the existing pod's anti-affinity rejects the pod (symmetry)",
     pod("p", SECURITY_SCAN, affinity=[term("region", expr("service", "In", "securityscan", "value2"))],
         anti=[term("node", expr("service", "In", "antivirusscan", "value2"))]),
     [("machine1", pod("existing", SECURITY_SCAN, anti=[term("zone", expr("service", "In", "securityscan", "value2"))]))],
     ERR_EXISTING_ANTI_AFFINITY),
    ("matching pod on a node outside the cluster, and the pod does not match itself",
     pod("p", SECURITY_SCAN, affinity=[term("region", expr("service", "NotIn", "securityscan", "value2"))]),
     [("machine2", pod("existing", SECURITY_SCAN))], ERR_AFFINITY),
    ("existing anti-affinity is respected when the pod has no affinity",
     pod("p", SECURITY_SCAN),
     [("machine1", pod("existing", SECURITY_SCAN, anti=[term("zone", expr("service", "In", "securityscan", "value2"))]))],
     ERR_EXISTING_ANTI_AFFINITY),
    ("existing anti-affinity that does not select the pod",
     pod("p", SECURITY_SCAN),
     [("machine1", pod("existing", SECURITY_SCAN, anti=[term("zone", expr("service", "NotIn", "securityscan", "value2"))]))],
     None),
    ("existing pod's anti-affinity with one matching term of two",
     pod("p", SECURITY_SCAN),
     [("machine1", pod("existing", S1, anti=[term("region", expr("service", "Exists")),
                                               term("region", expr("security", "Exists"))]))],
     ERR_EXISTING_ANTI_AFFINITY),
    ("incoming anti-affinity with one matching term of two",
     pod("p", SECURITY_SCAN, anti=[term("region", expr("service", "Exists")), term("region", expr("security", "Exists"))]),
     [("machine1", pod("existing", S1))], ERR_ANTI_AFFINITY),
    ("no labelSelector selects no pod",
     pod("p", S1, affinity=[term("region", no_selector=True)]), HAS_SECURITY_SCAN, ERR_AFFINITY),
    ("an empty labelSelector selects every pod in the namespace",
     pod("p", S1, affinity=[term("region")]), HAS_SECURITY_SCAN, None),
    ("anti-affinity with an empty selector and the existing pod in another namespace",
     pod("p", S1, anti=[term("region")]), [("machine1", pod("existing", SECURITY_SCAN, namespace="other"))], None),
]


@pytest.mark.parametrize("name,incoming,existing,want", SINGLE_NODE, ids=[c[0] for c in SINGLE_NODE])
def test_required_affinity_single_node(name: str, incoming: PodInfo, existing: list[tuple[str, PodInfo]],
                                       want: str | None) -> None:
    reasons, codes = run_filter(InterPodAffinity(), incoming, Cluster(dict(NODE1), existing))
    assert reasons == [want]
    if want == ERR_AFFINITY:
        assert codes == [Code.UNSCHEDULABLE_AND_UNRESOLVABLE]  # preemption cannot bring a pod in
    elif want is not None:
        assert codes == [Code.UNSCHEDULABLE]  # evicting the matching pods could help


THREE = {"machine1": {"region": "r1", "zone": "z11", "hostname": "h1"},
         "machine2": {"region": "r1", "zone": "z12", "hostname": "h2"},
         "machine3": {"region": "r2", "zone": "z21", "hostname": "h3"},
         "nolabels": {}}
FOO = {"foo": "bar"}

# kube's TestRequiredAffinityMultipleNodes, and a few more
MULTI_NODE: list[tuple[str, PodInfo, list[tuple[str, PodInfo]], list[str | None]]] = [
    ("affinity holds in the whole region of the matching pod",
     pod("p", affinity=[term("region", match_labels=FOO)]), [("machine1", pod("e", FOO))],
     [None, None, ERR_AFFINITY, ERR_AFFINITY]),
    ("anti-affinity keeps the pod out of the zone of a matching pod",
     pod("p", anti=[term("zone", match_labels=FOO)]), [("machine1", pod("e", FOO))],
     [ERR_ANTI_AFFINITY, None, None, None]),
    ("anti-affinity by region",
     pod("p", anti=[term("region", match_labels=FOO)]), [("machine3", pod("e", FOO))],
     [None, None, ERR_ANTI_AFFINITY, None]),
    ("existing anti-affinity by region keeps the matching pod out of the region",
     pod("p", FOO), [("machine2", pod("e", {"x": "y"}, anti=[term("region", match_labels=FOO)]))],
     [ERR_EXISTING_ANTI_AFFINITY, ERR_EXISTING_ANTI_AFFINITY, None, None]),
    ("first pod of a group: nothing matches anywhere, the pod matches itself; nodes need the key",
     pod("p", FOO, affinity=[term("zone", match_labels=FOO)]), [],
     [None, None, None, ERR_AFFINITY]),
    ("first pod, but it does not match its own term",
     pod("p", {"foo": "baz"}, affinity=[term("zone", match_labels=FOO)]), [],
     [ERR_AFFINITY] * 4),
    ("not the first pod: a match exists, so only its domain",
     pod("p", FOO, affinity=[term("zone", match_labels=FOO)]), [("machine2", pod("e", FOO))],
     [ERR_AFFINITY, None, ERR_AFFINITY, ERR_AFFINITY]),
    ("a match on a node without the topology label does not count (first-pod rule applies)",
     pod("p", FOO, affinity=[term("zone", match_labels=FOO)]), [("nolabels", pod("e", FOO))],
     [None, None, None, ERR_AFFINITY]),
    ("two affinity terms on different keys: the node must be in both domains",
     pod("p", affinity=[term("region", match_labels=FOO), term("zone", expr("app", "Exists"))]),
     [("machine1", pod("e", {"foo": "bar", "app": "x"}))],
     [None, ERR_AFFINITY, ERR_AFFINITY, ERR_AFFINITY]),
    ("affinity fails first, then anti-affinity, then existing pods'",
     pod("p", FOO, affinity=[term("region", match_labels={"app": "db"})], anti=[term("hostname", match_labels={"app": "db"})]),
     [("machine1", pod("db", {"app": "db"})),
      ("machine2", pod("guard", {"app": "g"}, anti=[term("zone", match_labels=FOO)]))],
     [ERR_ANTI_AFFINITY, ERR_EXISTING_ANTI_AFFINITY, ERR_AFFINITY, ERR_AFFINITY]),
    ("anti-affinity on a key no node has: every node passes",
     pod("p", anti=[term("invalid-node-label", match_labels=FOO)]), [("machine1", pod("e", FOO))],
     [None] * 4),
    ("hostname anti-affinity: one per node",
     pod("p", FOO, anti=[term("hostname", match_labels=FOO)]), [("machine1", pod("e", FOO)), ("machine3", pod("f", FOO))],
     [ERR_ANTI_AFFINITY, None, ERR_ANTI_AFFINITY, None]),
]


@pytest.mark.parametrize("name,incoming,existing,want", MULTI_NODE, ids=[c[0] for c in MULTI_NODE])
def test_required_affinity_multiple_nodes(name: str, incoming: PodInfo, existing: list[tuple[str, PodInfo]],
                                          want: list[str | None]) -> None:
    reasons, _ = run_filter(InterPodAffinity(), incoming, Cluster(dict(THREE), existing))
    assert reasons == want


TEAMS = {"team-a": {"team": "a"}, "team-b": {"team": "b"}, "default": {}}


@pytest.mark.parametrize("selector,want", [
    ({"matchLabels": {"team": "a"}}, [None, ERR_AFFINITY]),  # only team-a's pod counts
    ({}, [None, None]),  # the empty namespaceSelector: every namespace
    ({"matchLabels": {"team": "c"}}, [ERR_AFFINITY, ERR_AFFINITY]),
])
def test_namespace_selector(selector: Object, want: list[str | None]) -> None:
    nodes = {"n1": {"zone": "z1"}, "n2": {"zone": "z2"}}
    existing = [("n1", pod("a", FOO, namespace="team-a")), ("n2", pod("b", FOO, namespace="team-b"))]
    incoming = pod("p", affinity=[term("zone", match_labels=FOO, namespace_selector=selector)])
    plugin = InterPodAffinity(namespaces=StaticNamespaces(TEAMS))
    assert run_filter(plugin, incoming, Cluster(nodes, existing, TEAMS))[0] == want


def test_existing_pods_namespace_selector_reads_the_incoming_pods_namespace_labels() -> None:
    nodes = {"n1": {"zone": "z1"}, "n2": {"zone": "z2"}}
    guard = pod("g", anti=[term("zone", match_labels=FOO, namespace_selector={"matchLabels": {"team": "a"}})])
    plugin = InterPodAffinity(namespaces=StaticNamespaces(TEAMS))
    in_a = pod("p", FOO, namespace="team-a")
    in_b = pod("q", FOO, namespace="team-b")
    c = Cluster(nodes, [("n1", guard)], TEAMS)
    assert run_filter(plugin, in_a, c)[0] == [ERR_EXISTING_ANTI_AFFINITY, None]
    assert run_filter(plugin, in_b, c)[0] == [None, None]


def test_namespaces_default_to_the_pods_own() -> None:
    t = pod("p", namespace="ns1", affinity=[term("zone", match_labels=FOO)]).pod_affinity
    assert t is not None and t.required_affinity[0].namespaces == frozenset({"ns1"})
    listed = pod("p", namespace="ns1", affinity=[term("zone", match_labels=FOO, namespaces=["a", "b"])]).pod_affinity
    assert listed is not None and listed.required_affinity[0].namespaces == frozenset({"a", "b"})
    by_selector = pod("p", namespace="ns1", affinity=[term("zone", namespace_selector={})]).pod_affinity
    assert by_selector is not None and by_selector.required_affinity[0].namespaces == frozenset()


def test_pre_filter_skips_when_nothing_applies() -> None:
    table, _, _ = Cluster(dict(THREE), [("machine1", pod("e", FOO, anti=[term("zone", match_labels={"app": "x"})]))]).build()
    state = CycleState()
    _, status = InterPodAffinity().pre_filter(state, pod("p", FOO), table)
    assert status.is_skip  # the existing anti-affinity does not select this pod
    _, status = InterPodAffinity().pre_filter(state, pod("q", {"app": "x"}), table)
    assert status.is_success


@pytest.mark.parametrize("bad,message", [
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]}}, "topologyKey is empty"),
    ({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "topologyKey": "z"}]}},
     "not valid in a label selector"),
    ({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "podAffinityTerm": {"topologyKey": "z"}}]}}, "weight 0 must be an integer in 1..100"),
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "bad key!"}]}},
     "not a valid label key"),
])
def test_bad_terms_are_refused_with_the_field(bad: Object, message: str) -> None:
    with pytest.raises(PodSpecError, match=message):
        PodInfo.from_pod(make_pod("p", affinity=bad))


# ---------------------------------------------------------------- preemption's extensions
def test_removing_a_victim_lets_anti_affinity_pass() -> None:
    table, _, _ = Cluster({"n1": {"zone": "z1"}, "n2": {"zone": "z1"}},
                          [("n1", victim := pod("victim", FOO))]).build()
    incoming = pod("p", anti=[term("zone", match_labels=FOO)])
    plugin = InterPodAffinity()
    state = CycleState()
    plugin.pre_filter(state, incoming, table)
    assert plugin.filter(state, incoming, table).passed.tolist() == [False, False]
    what_if = state.clone()
    assert plugin.remove_pod(what_if, incoming, victim, "n1").is_success
    assert plugin.filter(what_if, incoming, table.for_node("n1", removed=[victim])).passed.tolist() == [True]
    assert plugin.filter(state, incoming, table).passed.tolist() == [False, False]  # the original is untouched
    assert plugin.add_pod(what_if, incoming, victim, "n2").is_success
    assert plugin.filter(what_if, incoming, table).passed.tolist() == [False, False]


def test_removing_a_pod_the_terms_do_not_select_changes_nothing() -> None:
    bystander = pod("bystander", {"foo": "other"}, anti=[term("zone", match_labels={"x": "y"})])
    table, _, _ = Cluster({"n1": {"zone": "z1"}, "n2": {"zone": "z2"}},
                          [("n1", pod("match", FOO)), ("n1", bystander)]).build()
    incoming = pod("p", FOO, affinity=[term("zone", match_labels=FOO)], anti=[term("zone", match_labels=FOO)])
    plugin = InterPodAffinity()
    state = CycleState()
    plugin.pre_filter(state, incoming, table)
    before = plugin.filter(state, incoming, table).reasons.tolist()
    assert before == [2, 1]  # n1: anti-affinity; n2: affinity
    plugin.remove_pod(state, incoming, bystander, "n1")
    assert plugin.filter(state, incoming, table).reasons.tolist() == before


@pytest.mark.parametrize("seed", range(25))
def test_add_and_remove_pod_match_a_fresh_pre_filter(seed: int) -> None:
    rng = random.Random(seed)
    table, nodes, placed = random_affinity_cluster(rng)
    incoming = random_affinity_pod(rng, "incoming")
    plugin = InterPodAffinity()
    state = CycleState()
    _, status = plugin.pre_filter(state, incoming, table)
    if status.is_skip:
        return
    for node, moved in [(n, p) for n, ps in placed.items() for p in ps]:
        _check_remove_then_add(plugin, state, incoming, table, nodes, placed, node, moved)


def _check_remove_then_add(plugin: InterPodAffinity, state: CycleState, incoming: PodInfo, table: NodeTable,
                           nodes: list[Object], placed: dict[str, list[PodInfo]], node: str, moved: PodInfo) -> None:
    what_if = state.clone()
    plugin.remove_pod(what_if, incoming, moved, node)
    without = NodeTable()
    for n in nodes:
        without.add_node(n)
    for n, ps in placed.items():
        for p in ps:
            if p is not moved:
                without.add_pod(n, p)
    fresh, snap = CycleState(), without.snapshot()
    _, fresh_status = plugin.pre_filter(fresh, incoming, snap)
    expected = plugin.filter(fresh, incoming, snap).reasons.tolist() if not fresh_status.is_skip else [0] * len(nodes)
    by_name = dict(zip(snap.names, expected, strict=True))
    got = plugin.filter(what_if, incoming, table).reasons.tolist()
    assert got == [by_name[name] for name in table.names]
    plugin.add_pod(what_if, incoming, moved, node)
    assert plugin.filter(what_if, incoming, table).reasons.tolist() == plugin.filter(state, incoming, table).reasons.tolist()


# ---------------------------------------------------------------- scoring (kube's TestPreferredAffinity)
def score_nodes(plugin: InterPodAffinity, incoming: PodInfo, c: Cluster) -> list[int] | None:
    """Normalised scores of every node, or None when PreScore skips; checked against the pure rule."""
    table, objs, pods_on = c.build()
    state = CycleState()
    rows = np.arange(len(table), dtype=np.intp)
    status = plugin.pre_score(state, incoming, table, rows)
    pure = ipa.topology_scores(incoming, objs, pods_on, hard_pod_affinity_weight=plugin.hard_pod_affinity_weight,
                               namespaces=StaticNamespaces(c.namespaces))
    if plugin.ignore_preferred_terms_of_existing_pods and not (
            incoming.pod_affinity and (incoming.pod_affinity.preferred_affinity or incoming.pod_affinity.preferred_anti_affinity)):
        pure = {}
    if status.is_skip:
        assert pure == {}
        return None
    raw = plugin.score(state, incoming, table, rows)
    assert raw.tolist() == [ipa.raw_score(o, pure) for o in objs]
    return plugin.normalize_score(state, incoming, raw).tolist()


REGIONS = {"machine1": {"region": "China"}, "machine2": {"region": "India"}, "machine3": {"az": "az1"}}
STAY_WITH_S1_IN_REGION = (5, term("region", expr("security", "In", "S1")))
STAY_WITH_S2_IN_REGION = (6, term("region", expr("security", "In", "S2")))
AWAY_FROM_S1_IN_AZ = (5, term("az", expr("security", "In", "S1")))


def test_no_affinity_anywhere_skips() -> None:
    assert score_nodes(InterPodAffinity(), pod("p"), Cluster(dict(REGIONS))) is None


def test_preferred_affinity_prefers_the_matching_domain() -> None:
    c = Cluster(dict(REGIONS), [("machine1", pod("a", S1)), ("machine2", pod("b", {"security": "S2"}))])
    assert score_nodes(InterPodAffinity(), pod("p", preferred=[STAY_WITH_S1_IN_REGION]), c) == [100, 0, 0]


def test_all_nodes_of_the_matching_domain_score_alike() -> None:
    nodes = {"machine1": {"region": "China"}, "machine2": {"region": "China", "az": "az1"}, "machine3": {"region": "India"}}
    c = Cluster(nodes, [("machine1", pod("a", S1))])
    assert score_nodes(InterPodAffinity(), pod("p", preferred=[STAY_WITH_S1_IN_REGION]), c) == [100, 100, 0]


def test_weights_add_up_and_anti_affinity_subtracts() -> None:
    nodes = {"machine1": {"region": "China", "az": "az1"}, "machine2": {"region": "India", "az": "az2"},
             "machine3": {"region": "China", "az": "az2"}}
    c = Cluster(nodes, [("machine1", pod("a", S1)), ("machine2", pod("b", {"security": "S2"})),
                        ("machine2", pod("c", {"security": "S2"}))])
    incoming = pod("p", preferred=[STAY_WITH_S1_IN_REGION, STAY_WITH_S2_IN_REGION], preferred_anti=[AWAY_FROM_S1_IN_AZ])
    # raw: machine1 5 - 5 = 0, machine2 2 * 6 = 12, machine3 5: normalised over 0..12
    assert score_nodes(InterPodAffinity(), incoming, c) == [0, 100, int(100 * (5 / 12))]


def test_existing_pods_terms_count_both_ways_and_hard_affinity_weight() -> None:
    nodes = {"machine1": {"region": "China"}, "machine2": {"region": "India"}, "machine3": {"region": "Mars"}}
    wants_s1 = pod("w", affinity=[term("region", expr("security", "In", "S1"))])
    prefers_s1 = pod("x", preferred=[(3, term("region", expr("security", "In", "S1")))])
    avoids_s1 = pod("y", preferred_anti=[(4, term("region", expr("security", "In", "S1")))])
    c = Cluster(nodes, [("machine1", wants_s1), ("machine2", prefers_s1), ("machine3", avoids_s1)])
    incoming = pod("p", S1)
    # raw with weight 1: 1, 3, -4 -> (1+4)/7, 7/7, 0
    assert score_nodes(InterPodAffinity(), incoming, c) == [int(100 * (5 / 7)), 100, 0]
    # hardPodAffinityWeight 10: 10, 3, -4 -> 100, (7/14), 0
    assert score_nodes(InterPodAffinity(10), incoming, c) == [100, 50, 0]
    # 0: the required term of machine1's pod does not count
    assert score_nodes(InterPodAffinity(0), incoming, c) == [int(100 * (4 / 7)), 100, 0]
    # ignorePreferredTermsOfExistingPods with no preferred terms of its own: skipped
    assert score_nodes(InterPodAffinity(ignore_preferred_terms_of_existing_pods=True), incoming, c) is None


def test_a_term_that_touches_a_domain_but_scores_zero_still_normalises() -> None:
    # kube's PreScore does not skip when a term matched (its map has an entry), even if sums cancel
    nodes = {"n1": {"zone": "a"}, "n2": {"zone": "b"}}
    c = Cluster(nodes, [("n1", pod("e", FOO))])
    incoming = pod("p", preferred=[(5, term("zone", match_labels=FOO))], preferred_anti=[(5, term("zone", match_labels=FOO))])
    assert score_nodes(InterPodAffinity(), incoming, c) == [0, 0]


def test_normalize_is_kubes_float_truncation() -> None:
    assert ipa.normalize(np.array([-5, 0, 3], np.int64)).tolist() == [0, 62, 100]
    assert ipa.normalize(np.array([7, 7], np.int64)).tolist() == [0, 0]


def test_args_are_checked() -> None:
    assert ipa.new({"hardPodAffinityWeight": 5}, None).hard_pod_affinity_weight == 5
    with pytest.raises(ValueError, match="hardPodAffinityWeight"):
        ipa.new({"hardPodAffinityWeight": 101}, None)
    with pytest.raises(ValueError, match="unknown field"):
        ipa.new({"hardPodAfinityWeight": 1}, None)


# ---------------------------------------------------------------- pure == vectorised on random clusters
ZONES = ["z1", "z2", "z3"]
APPS = ["web", "db", "cache"]


def random_selector(rng: random.Random) -> Object | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.15:
        return {}
    if roll < 0.6:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
    e: Object = {"key": rng.choice(["app", "tier"]), "operator": op}
    if op in ("In", "NotIn"):
        e["values"] = rng.sample(APPS + ["x"], rng.randint(1, 2))
    return {"matchExpressions": [e]}


def random_term(rng: random.Random) -> Object:
    t: Object = {"topologyKey": rng.choice(["zone", "kubernetes.io/hostname", "rack", "missing"])}
    sel = random_selector(rng)
    if sel is not None:
        t["labelSelector"] = sel
    roll = rng.random()
    if roll < 0.15:
        t["namespaces"] = rng.sample(["default", "other"], rng.randint(1, 2))
    elif roll < 0.25:
        t["namespaceSelector"] = rng.choice([{}, {"matchLabels": {"team": "a"}}, {"matchExpressions": [
            {"key": "team", "operator": "NotIn", "values": ["a"]}]}])
    return t


def random_affinity_pod(rng: random.Random, name: str) -> PodInfo:
    kinds = {k: [random_term(rng) for _ in range(rng.randint(0, 2))] if rng.random() < 0.35 else []
             for k in ("affinity", "anti")}
    prefs = {k: [(rng.randint(1, 100), random_term(rng)) for _ in range(rng.randint(1, 2))] if rng.random() < 0.3 else []
             for k in ("preferred", "preferred_anti")}
    labels = {"app": rng.choice(APPS)} if rng.random() < 0.8 else {}
    if rng.random() < 0.3:
        labels["tier"] = rng.choice(["x", "y"])
    return pod(name, labels, namespace=rng.choice(["default", "default", "other"]), **kinds, **prefs)


def random_affinity_cluster(rng: random.Random, num_nodes: int = 8, num_pods: int = 14
                            ) -> tuple[NodeTable, list[Object], dict[str, list[PodInfo]]]:
    table = NodeTable()
    nodes = []
    for i in range(num_nodes):
        labels = {"kubernetes.io/hostname": f"n{i}"}
        if rng.random() < 0.85:
            labels["zone"] = rng.choice(ZONES)
        if rng.random() < 0.5:
            labels["rack"] = rng.choice(["r1", "r2"])
        nodes.append(make_node(f"n{i}", labels=labels))
    for n in nodes:
        table.add_node(n)
    placed: dict[str, list[PodInfo]] = {n["metadata"]["name"]: [] for n in nodes}
    for i in range(num_pods):
        target = rng.choice(nodes)["metadata"]["name"]
        info = random_affinity_pod(rng, f"placed-{i}")
        table.add_pod(target, info)
        placed[target].append(info)
    if rng.random() < 0.3:  # exercise pod removal, and node removal with its row move
        node = rng.choice(list(placed))
        if placed[node]:
            gone = placed[node].pop(0)
            table.remove_pod(node, gone)
        snap = table.snapshot()
        victim = nodes.pop(rng.randrange(len(nodes)))["metadata"]["name"]
        table.remove_node(victim)
        del placed[victim]
        assert victim in snap.names
    return table.snapshot(), nodes, placed


NAMESPACES = StaticNamespaces({"default": {"team": "a"}, "other": {"team": "b"}})


@pytest.mark.parametrize("seed", range(80))
def test_vectorised_agrees_with_the_pure_rules(seed: int) -> None:
    rng = random.Random(seed)
    table, nodes, placed = random_affinity_cluster(rng)
    incoming = random_affinity_pod(rng, "incoming")
    by_name = {n["metadata"]["name"]: n for n in nodes}
    plugin = InterPodAffinity(rng.choice([0, 1, 7]), namespaces=NAMESPACES)
    state = CycleState()
    _, status = plugin.pre_filter(state, incoming, table)
    r = plugin.filter(state, incoming, table) if not status.is_skip else None
    for row, name in enumerate(table.names):
        want = ipa.filter_reason(incoming, by_name[name], nodes, placed, NAMESPACES)
        got = None if r is None else (r.reasons_at(row) or (None,))[0]
        assert got == want, (name, incoming.pod_affinity)
        if want is not None and r is not None:
            assert r.code_at(row) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE if want == ERR_AFFINITY else Code.UNSCHEDULABLE)
    rows = np.array(sorted(rng.sample(range(len(table)), rng.randint(1, len(table)))), np.intp)
    state = CycleState()
    status = plugin.pre_score(state, incoming, table, rows)
    pure = ipa.topology_scores(incoming, nodes, placed, hard_pod_affinity_weight=plugin.hard_pod_affinity_weight,
                               namespaces=NAMESPACES)
    if status.is_skip:
        assert pure == {}
        return
    raw = plugin.score(state, incoming, table, rows)
    assert raw.tolist() == [ipa.raw_score(by_name[table.names[r]], pure) for r in rows]


# ---------------------------------------------------------------- more of kube 1.35's filtering_test.go
R_CHINA, R_INDIA, R_CHINA_AZ1 = {"region": "China"}, {"region": "India"}, {"region": "China", "az": "az1"}
AB = {"nodeA": {"region": "r1", "zone": "z1", "hostname": "nodeA"},
      "nodeB": {"region": "r1", "zone": "z2", "hostname": "nodeB"}}
ABC_REGIONS = {"nodeA": R_CHINA, "nodeB": R_CHINA_AZ1, "nodeC": R_INDIA}

# (name, nodes, incoming, existing, expected reason per node)
KUBE_MULTI_NODE: list[tuple[str, dict[str, dict[str, str]], PodInfo, list[tuple[str, PodInfo]], list[str | None]]] = [
    ("first pod of a collection is not blocked when no existing pod matches all its terms",
     {"nodeA": {"zone": "az1", "hostname": "h1"}, "nodeB": {"zone": "az2", "hostname": "h2"}},
     pod("p", {"foo": "bar", "service": "securityscan"}, affinity=[
         term("zone", expr("foo", "In", "bar")), term("zone", expr("service", "In", "securityscan"))]),
     [("nodeA", pod("p1", {"foo": "bar"}))], [None, None]),
    ("the first pod can only go to nodes with the topology keys",
     {"nodeA": {"zoneLabel": "az1", "hostname": "h1"}, "nodeB": {"zoneLabel": "az2", "hostname": "h2"}},
     pod("p", {"foo": "bar", "service": "securityscan"}, affinity=[
         term("zone", expr("foo", "In", "bar")), term("zone", expr("service", "In", "securityscan"))]),
     [("nodeA", pod("p1", {"foo": "bar"}))], [ERR_AFFINITY, ERR_AFFINITY]),
    ("anti-affinity matches when any term matches",
     {"nodeA": {"region": "r1", "zone": "z1", "hostname": "nodeA"}, "nodeB": {"region": "r1", "zone": "z2", "hostname": "nodeB"}},
     pod("p", anti=[term("region", expr("foo", "In", "abc")), term("zone", expr("service", "In", "securityscan"))]),
     [("nodeA", pod("e", {"foo": "abc", "service": "securityscan"}))], [ERR_ANTI_AFFINITY, ERR_ANTI_AFFINITY]),
    ("a matching pod in another namespace does not count; the existing pod's term in its own namespace neither",
     ABC_REGIONS,
     pod("p", {"foo": "123"}, namespace="NS1", anti=[term("region", expr("foo", "In", "bar"))]),
     [("nodeA", pod("a", {"foo": "bar"}, namespace="NS1")),
      ("nodeC", pod("c", namespace="NS2", anti=[term("region", expr("foo", "In", "123"))]))],
     [ERR_ANTI_AFFINITY, ERR_ANTI_AFFINITY, None]),
    ("existing pod's term on a key no node has: skipped",
     AB, pod("p", {"foo": ""}), [("nodeA", pod("e", anti=[term("invalid-node-label", expr("foo", "Exists"))]))],
     [None, None]),
    ("existing pods' terms reject the pod on all nodes",
     AB, pod("p", {"foo": "", "bar": ""}),
     [("nodeA", pod("e1", anti=[term("zone", expr("foo", "Exists"))])),
      ("nodeA", pod("e2", anti=[term("region", expr("bar", "Exists"))]))],
     [ERR_EXISTING_ANTI_AFFINITY, ERR_EXISTING_ANTI_AFFINITY]),
    ("existing pod's terms: only the term whose key the nodes have counts",
     AB, pod("p", {"foo": "", "bar": ""}),
     [("nodeA", pod("e", anti=[term("invalid-node-label", expr("foo", "Exists")), term("zone", expr("bar", "Exists"))]))],
     [ERR_EXISTING_ANTI_AFFINITY, None]),
    ("incoming terms: only the term whose key the nodes have counts",
     AB, pod("p", anti=[term("invalid-node-label", expr("foo", "Exists")), term("zone", expr("bar", "Exists"))]),
     [("nodeA", pod("podA", {"foo": "", "bar": ""}))], [ERR_ANTI_AFFINITY, None]),
    ("incoming affinity: all terms must match the same pod",
     AB, pod("p", affinity=[term("region", expr("foo", "Exists")), term("zone", expr("bar", "Exists"))]),
     [("nodeA", pod("a", {"foo": ""})), ("nodeB", pod("b", {"bar": ""}))], [ERR_AFFINITY, ERR_AFFINITY]),
]


@pytest.mark.parametrize("name,nodes,incoming,existing,want", KUBE_MULTI_NODE, ids=[c[0] for c in KUBE_MULTI_NODE])
def test_kube_multiple_nodes(name: str, nodes: dict[str, dict[str, str]], incoming: PodInfo,
                             existing: list[tuple[str, PodInfo]], want: list[str | None]) -> None:
    assert run_filter(InterPodAffinity(), incoming, Cluster(dict(nodes), existing))[0] == want


KUBE_NAMESPACES = {"subteam1.team1": {"team": "team1"}, "subteam2.team1": {"team": "team1"},
                   "subteam1.team2": {"team": "team2"}, "subteam2.team2": {"team": "team2"}}
TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}
SCAN = expr("service", "In", "securityscan", "value2")


@pytest.mark.parametrize("name,incoming,existing_ns,want", [
    ("affinity with NamespaceSelector",
     pod("p", S1, affinity=[term("region", SCAN, namespace_selector=TEAM1)]), "subteam1.team1", None),
    ("affinity with non-matching NamespaceSelector",
     pod("p", S1, affinity=[term("region", SCAN, namespace_selector=TEAM1)]), "subteam1.team2", ERR_AFFINITY),
    ("anti-affinity with matching NamespaceSelector",
     pod("p", S1, namespace="subteam1.team1", anti=[term("zone", SCAN, namespace_selector=TEAM1)]), "subteam2.team1",
     ERR_ANTI_AFFINITY),
    ("anti-affinity with matching all NamespaceSelector",
     pod("p", S1, namespace="subteam1.team1", anti=[term("zone", SCAN, namespace_selector={})]), "subteam2.team1",
     ERR_ANTI_AFFINITY),
    ("anti-affinity with non-matching NamespaceSelector",
     pod("p", S1, namespace="subteam1.team1", anti=[term("zone", SCAN, namespace_selector=TEAM1)]), "subteam1.team2",
     None),
    # kube 1.35 keeps an incoming term's namespaceSelector and matches it against no labels (see
    # incoming_scope): NotIn team1 is then satisfied in every namespace, team1's too
    ("kube 1.35: an incoming NotIn namespaceSelector lets every namespace through",
     pod("p", S1, anti=[term("zone", SCAN, namespace_selector={
         "matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["team1"]}]})]),
     "subteam1.team1", ERR_ANTI_AFFINITY),
])
def test_kube_namespace_selector(name: str, incoming: PodInfo, existing_ns: str, want: str | None) -> None:
    plugin = InterPodAffinity(namespaces=StaticNamespaces(KUBE_NAMESPACES))
    c = Cluster(dict(NODE1), [("machine1", pod("e", SECURITY_SCAN, namespace=existing_ns))], KUBE_NAMESPACES)
    assert run_filter(plugin, incoming, c)[0] == [want]


def test_invalid_selector_values_are_refused_when_parsed() -> None:
    with pytest.raises(PodSpecError, match=r"values\[service\]: Invalid value: '\{\{.bad-value.\}\}'"):
        pod("p", affinity=[term("region", expr("service", "In", "{{.bad-value.}}"))])


# ---------------------------------------------------------------- kube 1.35's scoring_test.go (TestPreferredAffinity)
AZ1, AZ2, S2 = {"az": "az1"}, {"az": "az2"}, {"security": "S2"}
S1_IN = term("region", expr("security", "In", "S1"))
S2_IN = term("region", expr("security", "In", "S2"))
AFFINITY3 = [(8, term("region", expr("security", "NotIn", "S1"), expr("security", "In", "S2"))),
             (2, term("region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist")))]
HARD = [term("region", expr("security", "In", "S1", "value2")),
        term("region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist"))]
AWAY_S1_AZ = (5, term("az", expr("security", "In", "S1")))
AWAY_S2_AZ = (5, term("az", expr("security", "In", "S2")))
NS_SELECTED = (5, term("region", expr("security", "In", "S1"), namespaces=["subteam2.team2"], namespace_selector=TEAM1))


def nodes_of(*labels: dict[str, str]) -> dict[str, dict[str, str]]:
    return {f"node{i + 1}": dict(lab) for i, lab in enumerate(labels)}


KUBE_SCORING: list[tuple[str, PodInfo, list[tuple[str, PodInfo]], dict[str, dict[str, str]], list[int] | None]] = [
    ("all nodes are same priority as Affinity is nil", pod("p", S1), [],
     nodes_of(R_CHINA, R_INDIA, AZ1), None),
    ("pod that matches topology key & pods in nodes gets the high score",
     pod("p", S1, preferred=[(5, S1_IN)]),
     [("node1", pod("a", S1)), ("node2", pod("b", S2)), ("node3", pod("c", S1))],
     nodes_of(R_CHINA, R_INDIA, AZ1), [100, 0, 0]),
    ("nodes of the same topology value share the score",
     pod("p", preferred=[(5, S1_IN)]), [("node1", pod("a", S1))],
     nodes_of(R_CHINA, R_CHINA_AZ1, R_INDIA), [100, 100, 0]),
    ("the region with more matches scores higher",
     pod("p", S1, preferred=[(6, S2_IN)]),
     [("node1", pod("a", S2)), ("node1", pod("b", S2)), ("node2", pod("c", S2)), ("node3", pod("d", S2)),
      ("node4", pod("e", S2)), ("node5", pod("f", S2))],
     nodes_of(R_CHINA, R_INDIA, R_CHINA, R_CHINA, R_INDIA), [100, 0, 100, 100, 0]),
    ("different label operators, some match failures",
     pod("p", S1, preferred=AFFINITY3), [("node1", pod("a", S1)), ("node2", pod("b", S2)), ("node3", pod("c", S1))],
     nodes_of(R_CHINA, R_INDIA, AZ1), [20, 100, 0]),
    ("symmetry: existing pods' preferred affinity",
     pod("p", S2), [("node1", pod("a", S1, preferred=[(5, S1_IN)])), ("node2", pod("b", S2, preferred=[(6, S2_IN)]))],
     nodes_of(R_CHINA, R_INDIA, AZ1), [0, 100, 0]),
    ("symmetry with namespace selector",
     pod("p", S1, namespace="subteam1.team1"),
     [("node1", pod("a", S1, preferred=[NS_SELECTED])), ("node2", pod("b", S2, preferred=[(6, S2_IN)]))],
     nodes_of(R_CHINA, R_INDIA, AZ1), [100, 0, 0]),
    ("anti-affinity symmetry with namespace selector",
     pod("p", S1, namespace="subteam1.team1"),
     [("node1", pod("a", S1, preferred_anti=[NS_SELECTED])), ("node2", pod("b", S2, preferred=[(6, S2_IN)]))],
     nodes_of(R_CHINA, R_INDIA, AZ1), [0, 100, 100]),
    ("symmetry: existing pods' required affinity (hardPodAffinityWeight)",
     pod("p", S1), [("node1", pod("a", S1, affinity=HARD)), ("node2", pod("b", S2, affinity=HARD))],
     nodes_of(R_CHINA, R_INDIA, AZ1), [100, 100, 0]),
    ("anti-affinity: the node without matching pods scores high",
     pod("p", S1, preferred_anti=[AWAY_S1_AZ]), [("node1", pod("a", S1)), ("node2", pod("b", S2))],
     nodes_of(AZ1, R_CHINA), [0, 100]),
    ("anti-affinity: a node without the topology key scores high",
     pod("p", S1, preferred_anti=[AWAY_S1_AZ]), [("node1", pod("a", S1)), ("node2", pod("b", S1))],
     nodes_of(AZ1, R_CHINA), [0, 100]),
    ("anti-affinity symmetry",
     pod("p", S2), [("node1", pod("a", S1, preferred_anti=[AWAY_S2_AZ])), ("node2", pod("b", S2, preferred_anti=[AWAY_S1_AZ]))],
     nodes_of(AZ1, AZ2), [0, 100]),
    ("affinity and anti-affinity",
     pod("p", S1, preferred=[(8, term("region", expr("security", "In", "S1")))], preferred_anti=[AWAY_S2_AZ]),
     [("node1", pod("a", S1)), ("node2", pod("b", S1))], nodes_of(R_CHINA, AZ1), [100, 0]),
]


@pytest.mark.parametrize("name,incoming,existing,nodes,want", KUBE_SCORING, ids=[c[0] for c in KUBE_SCORING])
def test_kube_preferred_affinity(name: str, incoming: PodInfo, existing: list[tuple[str, PodInfo]],
                                 nodes: dict[str, dict[str, str]], want: list[int] | None) -> None:
    plugin = InterPodAffinity(1, namespaces=StaticNamespaces(KUBE_NAMESPACES))
    assert score_nodes(plugin, incoming, Cluster(nodes, existing, KUBE_NAMESPACES)) == want
