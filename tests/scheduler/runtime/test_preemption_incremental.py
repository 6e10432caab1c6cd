"""The incremental dry run (one working copy per node, kube's SelectVictimsOnNode) against the full
re-filter it replaced: on randomized small clusters both must find the same candidates, victims,
PDB violations and nominated node, with PreFilter state moved by AddPod/RemovePod (pod
anti-affinity, whose verdict a victim's removal changes), PDBs, and pods nominated to nodes."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.resources import POD_DISRUPTION_BUDGETS
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.default_preemption import (
    DefaultPreemption,
    RefilterNode,
    pick_one_node,
    select_victims_on_node,
)
from minisched.scheduler.plugins.node_resources_fit import FitWhatIf
from minisched.scheduler.scheduler import Scheduler

ANTI_APP = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "noisy"}}, "topologyKey": "kubernetes.io/hostname"}]}}
SEEDS = 60
SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "web"}}}]


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster()
    yield c
    c.close()


def _pod(name: str, priority: int, cpu: int, *, node: str | None = None, labels: dict[str, str] | None = None,
         affinity: Any = None, started: float | None = None, spread: Any = None) -> dict[str, Any]:
    pod = make_pod(name, cpu=f"{cpu}m", memory=None, node_name=node, labels=labels, affinity=affinity)
    pod["spec"]["priority"] = priority
    if spread:
        pod["spec"]["topologySpreadConstraints"] = spread
    if started is not None:
        pod.setdefault("status", {})["startTime"] = f"2026-01-01T00:{int(started) // 60:02d}:{int(started) % 60:02d}Z"
    return pod


def _random_cluster(rng: random.Random, cluster: EmbeddedCluster) -> tuple[Scheduler, PodInfo, list[Any]]:
    sched = Scheduler(cluster, seed=rng.randrange(1000))
    for i in range(rng.randint(2, 7)):
        name = f"n{i}"
        sched.cache.add_node(make_node(name, cpu=str(rng.choice([2, 3, 4])), pods=str(rng.choice([3, 4, 110])),
                                       labels={"kubernetes.io/hostname": name, "zone": f"z{i % 2}"}))
        for j in range(rng.randint(1, 5)):
            labels = {"app": rng.choice(["web", "noisy", "batch"])}
            sched.cache.add_pod(_pod(f"p{i}-{j}", rng.choice([0, 5, 10, 100, 2000]), rng.choice([300, 500, 900, 1200]),
                                     node=name, labels=labels, started=rng.randrange(3600)))
    if rng.random() < 0.7:
        cluster.create(POD_DISRUPTION_BUDGETS, {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": rng.choice(["web", "batch"])}}},
            "status": {"disruptionsAllowed": rng.randint(0, 1)}})
    kind = rng.choice(["plain", "anti", "spread"])
    preemptor = _pod("vip", 1000, rng.choice([1000, 1500, 2000, 2500]), labels={"app": "web"},
                     affinity=ANTI_APP if kind == "anti" else None, spread=SPREAD if kind == "spread" else None)
    nominated = []
    for k in range(rng.randint(0, 2)):
        waiting = PodInfo.from_pod(_pod(f"waiting{k}", rng.choice([500, 1000, 3000]), rng.choice([300, 900])))
        nominated.append((f"n{rng.randrange(2)}", waiting))
    return sched, PodInfo.from_pod(preemptor), nominated


def _dry_run(sched: Scheduler, pod: PodInfo, nominated: list[Any], incremental: bool) -> tuple[Any, ...]:
    fwk = sched.frameworks["minisched"]
    plugin = next(p for p in fwk.points.post_filter if isinstance(p, DefaultPreemption))
    snapshot = sched.cache.snapshot()
    state = CycleState()
    result = fwk.schedule(pod, snapshot, state=state, nominated=nominated)
    if result.node is not None or result.diagnosis is None:
        return ("fits",)  # nothing to preempt (the node is a random pick among ties)
    plugin.incremental = incremental
    plugin.rng.seed(11)
    candidates, status = plugin.find_candidates(state, pod, snapshot, result.diagnosis.statuses())
    best = pick_one_node(candidates)
    return ([(c.node_name, [v.name for v in c.victims], c.num_pdb_violations) for c in candidates],
            best.node_name if best else None, status.code, status.message())


@pytest.mark.parametrize("seed", range(SEEDS))
def test_incremental_dry_run_finds_what_the_full_refilter_finds(cluster: EmbeddedCluster, seed: int) -> None:
    rng = random.Random(seed)
    sched, pod, nominated = _random_cluster(rng, cluster)
    full = _dry_run(sched, pod, nominated, incremental=False)
    incremental = _dry_run(sched, pod, nominated, incremental=True)
    assert incremental == full


def test_the_random_clusters_exercise_what_the_incremental_path_changes(
        cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parity above is worth something only if the seeds reach candidates with victims put
    back, PDB violations, anti-affinity and nominated nodes, and NodeResourcesFit's one-node
    what-if answering (with and without pods nominated to the node)."""
    seen = {"candidates": 0, "reprieved": 0, "violations": 0, "anti": 0, "spread": 0, "nominated": 0,
            "what-if": 0, "what-if nominated": 0}
    asked = [0]
    status = FitWhatIf.status

    def counted(self: FitWhatIf) -> Status:
        asked[0] += 1
        return status(self)

    monkeypatch.setattr(FitWhatIf, "status", counted)
    for seed in range(SEEDS):
        c = EmbeddedCluster()
        try:
            rng = random.Random(seed)
            sched, pod, nominated = _random_cluster(rng, c)
            asked[0] = 0
            out = _dry_run(sched, pod, nominated, incremental=True)
            seen["what-if"] += asked[0] > 0
            seen["what-if nominated"] += asked[0] > 0 and bool(nominated)
            if out[0] == "fits" or not out[0]:
                continue
            seen["candidates"] += 1
            seen["violations"] += any(v for _, _, v in out[0])
            seen["anti"] += pod.pod_affinity is not None
            seen["spread"] += bool(pod.pod["spec"].get("topologySpreadConstraints"))
            seen["nominated"] += bool(nominated)
            lower = {n: [p for p in sched.cache.snapshot().pods_on(n) if p.priority < pod.priority]
                     for n, _, _ in out[0]}
            seen["reprieved"] += any(len(v) < len(lower[n]) for n, v, _ in out[0])
        finally:
            c.close()
    assert all(n >= 3 for n in seen.values()), seen


def test_a_node_needing_no_victims_is_an_error_not_a_candidate() -> None:
    """kube's DryRunPreemption: success with no victims is "expected at least one victim pod"."""
    low = PodInfo.from_pod(_pod("low", 0, 100, node="n1"))
    victims, _, status = select_victims_on_node(PodInfo.from_pod(_pod("p", 10, 100)), [low],
                                                lambda removed: Status.success())
    assert victims is None and status.is_error


def test_refilter_node_puts_back_and_takes_off_by_the_list() -> None:
    asked: list[list[str]] = []

    def fits(removed: list[PodInfo]) -> Status:
        asked.append(sorted(p.name for p in removed))
        return Status.success() if len(removed) >= 1 else Status.unschedulable("Insufficient cpu")

    a, b = PodInfo.from_pod(_pod("a", 5, 100, node="n1")), PodInfo.from_pod(_pod("b", 1, 100, node="n1"))
    victims, violations, status = select_victims_on_node(PodInfo.from_pod(_pod("p", 10, 100)), [a, b],
                                                         RefilterNode(fits))
    # both off; a (more important) back: fits with b off; b back: does not fit, so b is the victim
    assert asked == [["a", "b"], ["b"], []]
    assert [v.name for v in victims or []] == ["b"] and violations == 0 and status.is_success


class _Picky:
    """A pod-blind Filter plugin after NodeResourcesFit that rejects node n1 and n2 (resolvable)."""

    name = "Picky"
    reads_pods = False

    def filter(self, state: Any, pod: Any, nodes: Any) -> Any:
        import numpy as np

        from minisched.scheduler.framework.interface import FilterResult

        return FilterResult.fail_where(np.array([n in ("n1", "n2") for n in nodes.names]), "picky says no")


def test_without_tables_the_first_rejection_in_profile_order_is_the_answer(cluster: EmbeddedCluster) -> None:
    """The table-less dry run asks pod-blind filters once over the snapshot and the what-ifs per
    question; a node's answer must still be the first rejection in profile order: on n1 only the
    pod-blind filter rejects (the victims off make room), on n2 NodeResourcesFit, earlier in the
    profile, rejects too, so its reason is the answer."""
    from minisched.scheduler.plugins import in_tree_registry

    registry = in_tree_registry()
    registry.register("Picky", lambda args, handle: _Picky())
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "minisched", "plugins": {"filter": {"enabled": [{"name": "Picky"}]}}}]}
    sched = Scheduler(cluster, config=config, registry=registry, seed=3)
    for name, cpu in (("n1", "2"), ("n2", "1500m")):
        sched.cache.add_node(make_node(name, cpu=cpu, pods="110", labels={"kubernetes.io/hostname": name}))
        sched.cache.add_pod(_pod(f"low-{name}", 0, 1500 if name == "n1" else 500, node=name))
    sched.cache.add_pod(_pod("high-n2", 2000, 1000, node="n2"))
    pod = PodInfo.from_pod(_pod("vip", 1000, 1000))
    fwk = sched.frameworks["minisched"]
    plugin = next(p for p in fwk.points.post_filter if isinstance(p, DefaultPreemption))
    plugin.evaluator.shortcut = False  # every node dry-run
    snapshot = sched.cache.snapshot()
    answers = []
    for incremental in (True, False):
        state = CycleState()
        result = fwk.schedule(pod, snapshot, state=state)
        assert result.node is None and result.diagnosis is not None
        plugin.incremental = incremental
        if incremental:
            plan = plugin.evaluator.working_nodes.what_if_plan(state, pod, snapshot)
            assert plan is not None and plan.usable, "the table-less path is the one under test"
        candidates, status = plugin.find_candidates(state, pod, snapshot, result.diagnosis.statuses())
        answers.append((candidates, status.message()))
    assert answers[0] == answers[1] == ([], "0/2 nodes are available: 1 Insufficient cpu, 1 picky says no.")
