"""minisched against kube-scheduler, pod for pod, on two fresh control planes with the same nodes and pods.

Both schedulers run the same plugin set with the same weights (controlplane.observe.
matched_scheduler_config) and score every node. Pods go one at a time in the same order (create,
wait until bound or reported unschedulable, then the next), so each decision is made on the same
cluster state; concurrency would make the comparison meaningless.

kube-scheduler runs first. Then minisched, and after each of its decisions the minisched cluster is
steered back to kube-scheduler's state wherever they differ (the pod is replaced by one created
already bound to kube's node, or removed if kube left it pending), so one tie broken the other way
does not change every later decision. Every difference is classified with minisched's decision
record: a tie (kube's node had the same top total in minisched's scoring) or unexplained (with the
plugin scores of both nodes). The report goes to test-logs/differential.md.
"""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from minisched.cluster.real import RealCluster
from minisched.controlplane import ControlPlane, ControlPlaneOptions, fake_node, node_is_ready, wait_for
from minisched.controlplane.observe import PodObserver, matched_scheduler_config
from minisched.objects import make_pod, taint, toleration
from minisched.scheduler.scheduler import Scheduler
from tests.plugins.controlplane import require_binaries

pytestmark = [pytest.mark.realcluster, pytest.mark.slow]

PROFILE = "side-by-side"
NS = "diff"
NODES = 60
PODS = 400
SEED = 20261129
REPORT = Path(__file__).resolve().parents[2] / "test-logs" / "differential.md"


# ------------------------------------------------------------------------------------------ the workload


def workload_nodes(rng: random.Random) -> list[dict[str, Any]]:
    """Varied capacity, zones, disks, taints (NoSchedule and PreferNoSchedule), one cordoned node."""
    nodes = []
    for i in range(NODES):
        cpu = rng.choice(["2", "4", "8", "16"])
        memory = rng.choice(["8Gi", "16Gi", "32Gi", "64Gi"])
        pods = "110" if i % 10 else "8"
        labels = {"topology.kubernetes.io/zone": f"z{i % 3}", "disk": "ssd" if i % 4 == 0 else "hdd"}
        taints = []
        if i % 12 == 5:
            taints.append(taint("dedicated", "infra", "NoSchedule"))
        if i % 7 == 3:
            taints.append(taint("spot", "true", "PreferNoSchedule"))
        node = fake_node(f"node-{i:02d}", cpu=cpu, memory=memory, pods=pods, labels=labels, taints=taints)
        if i == NODES - 1:
            node["spec"]["unschedulable"] = True
        nodes.append(node)
    return nodes


HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def _term(app: str, topology_key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology_key}


def workload_pods(rng: random.Random) -> list[dict[str, Any]]:
    pods = []
    for i in range(PODS):
        kind = rng.random()
        cpu: str | None = rng.choice(["100m", "250m", "500m", "1", "2", "3"])
        memory: str | None = rng.choice(["128Mi", "512Mi", "1Gi", "2Gi", "4Gi", "6Gi"])
        options: dict[str, Any] = {}
        if kind < 0.08:  # best effort: scored with kube's non-zero defaults (100m, 200Mi)
            cpu = memory = None
        if rng.random() < 0.25:
            options["tolerations"] = [toleration("dedicated", "infra", "NoSchedule")]
        if rng.random() < 0.15:
            options["tolerations"] = [*options.get("tolerations", []), toleration("spot", "true", "PreferNoSchedule")]
        roll = rng.random()
        if roll < 0.12:
            options["node_selector"] = {"disk": "ssd"}
        elif roll < 0.27:
            zones = rng.sample(["z0", "z1", "z2"], 2)
            options["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": zones}]}]}}}
        elif roll < 0.45:
            options["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": rng.choice([1, 20, 80]),
                 "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}},
                {"weight": rng.choice([5, 50]),
                 "preference": {"matchExpressions": [
                     {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["z2"]}]}},
            ]}}
        if rng.random() < 0.06:
            options["host_ports"] = [rng.choice([8080, 9090])]
        # InterPodAffinity: replicas of 8 services, some one per host, some near another service
        app, other = f"svc-{rng.randrange(8)}", f"svc-{rng.randrange(8)}"
        options["labels"] = {"app": app}
        pod_affinity: dict[str, Any] = {}
        roll = rng.random()
        if roll < 0.25:
            pod_affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(app, HOST)]}
        elif roll < 0.35:
            pod_affinity["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": rng.choice([10, 60]), "podAffinityTerm": _term(app, ZONE)}]}
        elif roll < 0.5:
            pod_affinity["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": rng.choice([5, 40]), "podAffinityTerm": _term(other, ZONE)}]}
        elif roll < 0.58:
            pod_affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(other, ZONE)]}
        if pod_affinity:
            options["affinity"] = {**(options.get("affinity") or {}), **pod_affinity}
        if kind > 0.97:  # can never fit: more CPU than any node has
            cpu = "32"
        pods.append(make_pod(f"p-{i:03d}", namespace=NS, cpu=cpu, memory=memory, scheduler_name=PROFILE, **options))
    return pods


# ------------------------------------------------------------------------------------------ one run


@dataclass
class Outcome:
    node: str | None  # None: reported unschedulable
    message: str = ""
    scores: dict[str, int] = field(default_factory=dict)  # minisched only: final score per feasible node
    plugin_scores: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)


def _start_cluster(cp: ControlPlane, nodes: list[dict[str, Any]]) -> RealCluster:
    cluster = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
    cluster.create("namespaces", {"metadata": {"name": NS}})
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: cluster.create("nodes", n), nodes))
    wait_for(lambda: sum(node_is_ready(n) for n in cluster.list("nodes")["items"]) == len(nodes), 120,
             "KWOK to report every node Ready")
    return cluster


def _decided(obs: PodObserver, key: str) -> bool:
    rec = obs.pods.get(key)
    return rec is not None and (rec.node is not None or rec.unschedulable)


def run_kube_scheduler(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, Outcome]:
    outcomes: dict[str, Outcome] = {}
    # envtest-style: both schedulers must see the same nodes, none tainted not-ready by a controller
    with ControlPlane(ControlPlaneOptions(), require_binaries()) as cp:
        cluster = _start_cluster(cp, nodes)
        try:
            cp.start_scheduler(matched_scheduler_config(PROFILE), name="kube-scheduler")
            with PodObserver(cluster, namespace=NS, nodes=cluster.list("nodes")["items"]) as obs:
                for pod in pods:
                    key = f"{NS}/{pod['metadata']['name']}"
                    cluster.create("pods", pod)
                    obs.wait_for(lambda o, k=key: _decided(o, k), 60, f"kube-scheduler to decide {key}")
                    rec = obs.pods[key]
                    outcomes[key] = Outcome(rec.node, rec.unschedulable_message)
                assert not obs.overcommits, obs.overcommits[:3]
        finally:
            cluster.close()
    return outcomes


@dataclass
class Comparison:
    key: str
    kube: Outcome
    mini: Outcome
    verdict: str  # "agree", "tie", "feasibility", "unexplained"
    detail: str = ""


def _classify(key: str, kube: Outcome, mini: Outcome) -> Comparison:
    if (kube.node is None) != (mini.node is None):
        who = "kube-scheduler" if kube.node else "minisched"
        return Comparison(key, kube, mini, "feasibility",
                          f"only {who} found a node; kube: {kube.node or kube.message}; "
                          f"minisched: {mini.node or mini.message}")
    if kube.node == mini.node:
        return Comparison(key, kube, mini, "agree")
    assert kube.node is not None and mini.node is not None
    top = max(mini.scores.values()) if mini.scores else None
    kube_score = mini.scores.get(kube.node)
    if kube_score is None:
        return Comparison(key, kube, mini, "unexplained",
                          f"kube-scheduler chose {kube.node}, which minisched found infeasible")
    if kube_score == top:
        tied = sorted(n for n, s in mini.scores.items() if s == top)
        return Comparison(key, kube, mini, "tie", f"{len(tied)} nodes tied at {top} in minisched's scoring")
    return Comparison(key, kube, mini, "unexplained",
                      f"minisched scored kube's {kube.node} {kube_score} and its own {mini.node} {top}: "
                      f"{json.dumps(mini.plugin_scores.get(kube.node))} vs "
                      f"{json.dumps(mini.plugin_scores.get(mini.node))}")


def run_minisched(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                  kube: dict[str, Outcome]) -> list[Comparison]:
    results: list[Comparison] = []
    # envtest-style: both schedulers must see the same nodes, none tainted not-ready by a controller
    with ControlPlane(ControlPlaneOptions(), require_binaries()) as cp:
        cluster = _start_cluster(cp, nodes)
        sched = Scheduler(cluster, config=matched_scheduler_config(PROFILE), keep_decisions=PODS * 4)
        try:
            sched.start()
            with PodObserver(cluster, namespace=NS, nodes=cluster.list("nodes")["items"]) as obs:
                for pod in pods:
                    name = pod["metadata"]["name"]
                    key = f"{NS}/{name}"
                    cluster.create("pods", pod)
                    obs.wait_for(lambda o, k=key: _decided(o, k), 60, f"minisched to decide {key}")
                    rec = obs.pods[key]
                    decision = sched.decisions[key]
                    mini = Outcome(rec.node, rec.unschedulable_message, decision.final_scores(),
                                   decision.scores())
                    results.append(_classify(key, kube[key], mini))
                    _steer(cluster, obs, pod, rec.node, kube[key].node)
                assert not obs.overcommits, obs.overcommits[:3]
        finally:
            sched.stop()
            cluster.close()
    return results


def _steer(cluster: RealCluster, obs: PodObserver, pod: dict[str, Any], mini: str | None, kube: str | None) -> None:
    """Make the minisched cluster hold what the kube-scheduler cluster held after this pod."""
    if mini == kube:
        return
    name = pod["metadata"]["name"]
    if kube is not None:  # the same pod, created already bound to kube's node
        twin = json.loads(json.dumps(pod))
        twin["metadata"]["name"] = f"{name}-as-kube"
        twin["spec"]["nodeName"] = kube
        cluster.create("pods", twin)
        obs.wait_for(lambda o: f"{NS}/{name}-as-kube" in o.pods, 30, "the steering pod")
    cluster.delete("pods", name, NS, grace_period_seconds=0)
    obs.wait_for(lambda o: o.pods[f"{NS}/{name}"].deleted, 30, f"{name} to be deleted")


# ------------------------------------------------------------------------------------------ the test


def write_report(results: list[Comparison], seconds: float) -> str:
    counts = {v: sum(1 for r in results if r.verdict == v and (r.kube.node or v == "feasibility"))
              for v in ("agree", "tie", "unexplained", "feasibility")}
    bound = sum(1 for r in results if r.kube.node)
    both_pending = sum(1 for r in results if r.kube.node is None and r.mini.node is None)
    # Where minisched's scoring had a single best node there is no tie to break: kube must agree.
    unique = [r for r in results if r.kube.node and r.mini.scores
              and list(r.mini.scores.values()).count(max(r.mini.scores.values())) == 1]
    unique_agree = sum(1 for r in unique if r.verdict == "agree")
    lines = [
        "# minisched vs kube-scheduler, pod for pod",
        "",
        f"{NODES} KWOK nodes, {PODS} pods one at a time (seed {SEED}), same plugins and weights, "
        f"percentageOfNodesToScore 100; {seconds:.0f}s.",
        "",
        f"- pods kube-scheduler bound: {bound}; left unschedulable: {len(results) - bound} "
        f"(minisched agreed on {both_pending} of them)",
        f"- feasibility agreed: {len(results) - counts['feasibility']}/{len(results)}",
        f"- same node: {counts['agree']}/{bound} bound pods ({100 * counts['agree'] / max(1, bound):.1f}%)",
        f"- pods with a single best node in minisched's scoring: {len(unique)}; kube-scheduler chose that "
        f"node for {unique_agree} of them",
        f"- different node, explained by a tie in minisched's scoring: {counts['tie']}",
        f"- different node, unexplained: {counts['unexplained']}",
        f"- agreement rate counting ties as agreement: "
        f"{100 * (counts['agree'] + counts['tie']) / max(1, bound):.1f}%",
        "",
        "## Every disagreement",
        "",
    ]
    for r in results:
        if r.verdict != "agree":
            lines.append(f"- {r.key}: {r.verdict}: kube-scheduler {r.kube.node or 'unschedulable'}, "
                         f"minisched {r.mini.node or 'unschedulable'}; {r.detail}")
    text = "\n".join(lines) + "\n"
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(text)
    return text


@pytest.mark.timeout(600)
def test_minisched_agrees_with_kube_scheduler_pod_for_pod() -> None:
    require_binaries()
    started = time.monotonic()
    nodes = workload_nodes(random.Random(SEED))
    pods = workload_pods(random.Random(SEED + 1))
    kube = run_kube_scheduler(nodes, pods)
    results = run_minisched(nodes, pods, kube)
    text = write_report(results, time.monotonic() - started)
    print("\n" + text)
    assert len(results) == PODS
    unschedulable = sum(1 for r in results if r.kube.node is None)
    assert 0 < unschedulable < PODS // 4, "the workload should have some, not many, unschedulable pods"
    feasibility = [r for r in results if r.verdict == "feasibility"]
    assert not feasibility, "\n".join(f"{r.key}: {r.detail}" for r in feasibility)
    # Same plugins, same weights, same state: a different node must be a tie, or one of us has a bug.
    unexplained = [r for r in results if r.verdict == "unexplained"]
    assert not unexplained, "\n".join(f"{r.key}: {r.detail}" for r in unexplained)
