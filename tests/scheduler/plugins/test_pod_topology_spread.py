from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from minisched.objects import make_node, make_pod, taint
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo, PodSpecError
from minisched.scheduler.plugins import pod_topology_spread as pts
from minisched.scheduler.snapshot import NodeTable

PLUGIN = pts.PodTopologySpread()


def spread(pod: dict[str, Any], key: str = "zone", skew: int = 1, when: str = "DoNotSchedule",
           **extra: Any) -> dict[str, Any]:
    c = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
         "labelSelector": {"matchLabels": {"app": "web"}}, **extra}
    pod["spec"].setdefault("topologySpreadConstraints", []).append(c)
    return pod


def web(name: str, **kw: Any) -> dict[str, Any]:
    return make_pod(name, labels={"app": "web"}, **kw)


def cluster(layout: dict[str, tuple[str | None, int]], **node_kw: Any) -> tuple[NodeTable, list, dict]:
    """layout: node -> (zone or None, number of app=web pods on it)."""
    t = NodeTable()
    nodes, pods_on = [], {}
    for name, (zone, count) in layout.items():
        node = make_node(name, labels={"zone": zone} if zone else {}, **node_kw.get(name, {}))
        nodes.append(node)
        t.add_node(node)
        pods_on[name] = [PodInfo.from_pod(web(f"{name}-{i}")) for i in range(count)]
        for p in pods_on[name]:
            t.add_pod(name, p)
    return t.snapshot(), nodes, pods_on


def test_zone_spread_filter() -> None:
    # zone a holds 2, zone b holds 1, zone c 0: with maxSkew 1 only zone c can take the next one
    snap, nodes, pods_on = cluster({"a1": ("a", 2), "b1": ("b", 1), "c1": ("c", 0), "x": (None, 0)})
    pod = PodInfo.from_pod(spread(web("new")))
    r = PLUGIN.filter(CycleState(), pod, snap)
    assert r.passed.tolist() == [False, False, True, False]
    assert r.reasons_at(0) == (pts.ERR_CONSTRAINTS,) and r.code_at(0) == Code.UNSCHEDULABLE
    assert r.reasons_at(3) == (pts.ERR_MISSING_LABEL,) and r.code_at(3) == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    for row, node in enumerate(nodes):
        assert pts.filter_reason(pod, node, nodes, pods_on) == (r.reasons_at(row) or (None,))[0]


def test_pods_that_do_not_match_the_selector_do_not_count_and_min_domains() -> None:
    snap, _, _ = cluster({"a1": ("a", 1), "b1": ("b", 0)})
    other = PodInfo.from_pod(spread(make_pod("other", labels={"app": "db"})))  # does not match itself
    assert PLUGIN.filter(CycleState(), other, snap).passed.tolist() == [True, True]
    # minDomains 3 but only 2 domains: the global minimum counts as 0, so zone a (1 + 1 - 0 > 1) fails
    pod = PodInfo.from_pod(spread(web("p"), minDomains=3))
    assert PLUGIN.filter(CycleState(), pod, snap).passed.tolist() == [False, True]


def test_node_taints_policy_honor_leaves_tainted_domains_out() -> None:
    layout = {"a1": ("a", 0), "b1": ("b", 3), "c1": ("c", 3)}
    snap, _, _ = cluster(layout, a1={"taints": [taint("bad", "x")]})
    ignore = PodInfo.from_pod(spread(web("p")))  # default Ignore: zone a (0 pods) is the minimum
    assert PLUGIN.filter(CycleState(), ignore, snap).passed.tolist() == [True, False, False]
    honor = PodInfo.from_pod(spread(web("p"), nodeTaintsPolicy="Honor"))  # zone a does not count
    assert PLUGIN.filter(CycleState(), honor, snap).passed.tolist() == [True, True, True]


def test_score_prefers_emptier_domains() -> None:
    snap, nodes, pods_on = cluster({"a1": ("a", 3), "b1": ("b", 1), "c1": ("c", 0), "x": (None, 0)})
    pod = PodInfo.from_pod(spread(web("p"), when="ScheduleAnyway"))
    state = CycleState()
    rows = np.arange(4, dtype=np.intp)
    assert PLUGIN.pre_score(state, pod, snap, rows).is_success
    raw = PLUGIN.score(state, pod, snap, rows)
    for row, node in enumerate(nodes):
        want = pts.score_of(pod, node, nodes, nodes, pods_on)
        assert raw[row] == (0 if want is None else want)
    normalized = PLUGIN.normalize_score(state, pod, raw)
    assert normalized[2] == 100 and normalized[0] < normalized[1] < normalized[2] and normalized[3] == 0


def test_bad_constraints_are_named() -> None:
    with pytest.raises(PodSpecError, match=r"topologySpreadConstraints\[0\].maxSkew 0"):
        PodInfo.from_pod(spread(web("p"), skew=0))
    with pytest.raises(PodSpecError, match="whenUnsatisfiable 'Sometimes'"):
        PodInfo.from_pod(spread(web("p"), when="Sometimes"))


@pytest.mark.parametrize("seed", range(30))
def test_vectorised_agrees_with_the_pure_rule(seed: int) -> None:
    rng = random.Random(seed)
    zones = ["a", "b", "c", None]
    t = NodeTable()
    nodes, pods_on = [], {}
    for i in range(rng.randint(3, 9)):
        name = f"n{i}"
        labels = {k: v for k, v in (("zone", rng.choice(zones)), ("rack", rng.choice(["r1", "r2", None])),
                                     ("tier", rng.choice(["x", "y"]))) if v}
        node = make_node(name, labels=labels, taints=[taint("t", "1")] if rng.random() < 0.2 else None)
        nodes.append(node)
        t.add_node(node)
        pods_on[name] = []
        for j in range(rng.randint(0, 4)):
            app = rng.choice(["web", "db"])
            p = PodInfo.from_pod(make_pod(f"{name}-{j}", labels={"app": app},
                                          namespace=rng.choice(["default", "other"])))
            pods_on[name].append(p)
            t.add_pod(name, p)
    pod_obj = make_pod("incoming", labels={"app": rng.choice(["web", "db"])},
                       node_selector={"tier": "x"} if rng.random() < 0.3 else None)
    for _ in range(rng.randint(1, 2)):
        spread(pod_obj, key=rng.choice(["zone", "rack", "kubernetes.io/hostname"]), skew=rng.randint(1, 2),
               when=rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
               nodeTaintsPolicy=rng.choice(["Honor", "Ignore"]), nodeAffinityPolicy=rng.choice(["Honor", "Ignore"]))
    pod = PodInfo.from_pod(pod_obj)
    snap = t.snapshot()
    r = PLUGIN.filter(CycleState(), pod, snap)
    for row, node in enumerate(nodes):
        assert (r.reasons_at(row) or (None,))[0] == pts.filter_reason(pod, node, nodes, pods_on), (seed, row)
    rows = np.flatnonzero(r.passed).astype(np.intp)
    feasible = [nodes[int(i)] for i in rows]
    raw = PLUGIN.score(CycleState(), pod, snap, rows)
    for i, node in zip(raw, feasible, strict=True):
        want = pts.score_of(pod, node, feasible, nodes, pods_on)
        assert i == (0 if want is None else want), seed


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
        pod = PodInfo.from_pod(spread(web(f"p{i}")))
        result = fw.schedule(pod, t.snapshot())
        assert result.node is not None
        t.add_pod(result.node, pod)
        zone = t.node(result.node)["metadata"]["labels"]["zone"]
        placed[zone] = placed.get(zone, 0) + 1
        assert max(placed.values()) - min(placed.get(z, 0) for z in "abc") <= 1
