"""Opportunistic batching (kube 1.35's OpportunisticBatching): which pods sign, the hint path, and
every reason the kept scores are flushed, pinned to kube's batch.go / schedule_one.go rules."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from minisched.objects import DEFAULT_SCHEDULER_NAME, make_node, make_pod
from minisched.scheduler.framework import batch as b
from minisched.scheduler.framework import signature as signing
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.features import check_feature_gates, parse_feature_gates
from minisched.scheduler.framework.interface import FilterResult, PreFilterResult
from minisched.scheduler.framework.profile import Profile, load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import in_tree_registry
from minisched.scheduler.snapshot import NodeTable

CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
# kube's default profile spreads every pod by default (PodTopologySpread's System defaulting), which
# makes every pod unsignable; with List and no default constraints, plain pods sign.
NO_DEFAULT_SPREAD = {"name": "PodTopologySpread", "args": {"defaultingType": "List"}}


def batchable_profile(**extra: Any) -> Profile:
    return load_profiles({**CONFIG, "profiles": [{"pluginConfig": [NO_DEFAULT_SPREAD], **extra}]})[0]


def info(name: str, **kw: Any) -> PodInfo:
    return PodInfo.from_pod(make_pod(name, **kw))


def table(n: int = 12, cpu_m: int = 3000, step_m: int = 150) -> NodeTable:
    """Nodes of growing size, each too small for two 3-CPU pods: one pod fills a node, and the
    scores (least allocated) differ from node to node."""
    t = NodeTable()
    for i in range(n):
        t.add_node(make_node(f"n{i:02d}", cpu=f"{cpu_m + step_m * i}m", memory="16Gi"))
    return t


class Counting:
    """A filter and score plugin that counts the rows it judged (and signs nothing)."""

    name = "Counting"
    reads_pods = False

    def __init__(self) -> None:
        self.filtered = 0
        self.scored = 0

    def sign_pod(self, pod: PodInfo) -> tuple[list[signing.Fragment], Status]:
        return [], Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        self.filtered += len(nodes)
        return FilterResult.all_pass(len(nodes))

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: Any) -> Any:
        self.scored += len(rows)
        return np.zeros(len(rows), np.int64)


def counting_framework(**kw: Any) -> tuple[Framework, Counting]:
    counter = Counting()
    registry = in_tree_registry()
    registry.register("Counting", lambda args, handle: counter)
    profile = batchable_profile(plugins={"filter": {"enabled": [{"name": "Counting"}]},
                                         "score": {"enabled": [{"name": "Counting"}]}})
    return Framework(profile, registry, seed=1, **kw), counter


# -- signatures -------------------------------------------------------------------------------------------

def test_the_default_profile_signs_no_pod_as_kube_whose_default_spreading_refuses_all() -> None:
    fwk = Framework(seed=1)
    assert fwk.unsignable_plugins == []  # every in-tree plugin can sign...
    assert fwk.sign_pod(info("p")) is None  # ...but PodTopologySpread's System defaults refuse
    spread = fwk.plugins["PodTopologySpread"]
    assert spread.may_batch(info("p")).is_rejected and spread.refuses_every_pod  # type: ignore[attr-defined]
    assert fwk.signer.refuses_every_pod  # so batching calls no signer at all
    assert fwk.pod_signature(info("p")) is not None  # the reuse cache, which asks no consent, still signs


def test_equal_pods_sign_equal_and_a_differing_field_breaks_equality() -> None:
    fwk = Framework(batchable_profile())
    base = fwk.sign_pod(info("a", cpu="1", labels={"app": "web"}))
    assert base is not None
    assert fwk.sign_pod(info("b", cpu="1", labels={"app": "web"})) == base  # name and uid do not count
    assert dict(base)[signing.SCHEDULER_NAME] == DEFAULT_SCHEDULER_NAME
    differing = {
        "cpu": info("c", cpu="2", labels={"app": "web"}),
        "memory": info("c", cpu="1", memory="1Gi", labels={"app": "web"}),
        "labels": info("c", cpu="1", labels={"app": "db"}),  # InterPodAffinity: others' terms may select it
        "image": info("c", cpu="1", labels={"app": "web"}, image="nginx"),
        "node selector": info("c", cpu="1", labels={"app": "web"}, node_selector={"zone": "a"}),
        "tolerations": info("c", cpu="1", labels={"app": "web"},
                            tolerations=[{"key": "k", "operator": "Exists"}]),
        "host ports": info("c", cpu="1", labels={"app": "web"}, host_ports=[80]),
        "volumes": info("c", cpu="1", labels={"app": "web"},
                        volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]),
        "node name": info("c", cpu="1", labels={"app": "web"}, node_name="n1"),
    }
    for field, pod in differing.items():
        sig = fwk.sign_pod(pod)
        assert sig is not None and sig != base, field


def test_config_maps_and_secrets_do_not_count_and_toleration_order_does_not_either() -> None:
    fwk = Framework(batchable_profile())
    plain = fwk.sign_pod(info("a"))
    with_config = fwk.sign_pod(info("b", volumes=[{"name": "c", "configMap": {"name": "x"}},
                                                  {"name": "s", "secret": {"secretName": "y"}}]))
    assert plain == with_config
    t1, t2 = {"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}
    assert fwk.sign_pod(info("c", tolerations=[t1, t2])) == fwk.sign_pod(info("d", tolerations=[t2, t1]))


@pytest.mark.parametrize("pod", [
    make_pod("aff", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kubernetes.io/hostname"}]}}),
    make_pod("anti", affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": {"a": "b"}},
                                          "topologyKey": "kubernetes.io/hostname"}}]}}),
    {**make_pod("spread"), "spec": {**make_pod("spread")["spec"], "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"a": "b"}}}]}},
    {**make_pod("claims"), "spec": {**make_pod("claims")["spec"], "resourceClaims": [
        {"name": "gpu", "resourceClaimName": "gpu-claim"}]}},
], ids=["pod-affinity", "pod-anti-affinity", "spread-constraints", "resource-claims"])
def test_pods_kube_refuses_to_sign(pod: dict[str, Any]) -> None:
    assert Framework(batchable_profile()).sign_pod(PodInfo.from_pod(pod)) is None


def test_listed_default_constraints_refuse_too_and_ignoring_existing_terms_drops_labels() -> None:
    spread = {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}
    listed = load_profiles({**CONFIG, "profiles": [{"pluginConfig": [spread]}]})[0]
    assert Framework(listed).sign_pod(info("p")) is None
    ignoring = batchable_profile(pluginConfig=[NO_DEFAULT_SPREAD, {
        "name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": True}}])
    fwk = Framework(ignoring)
    assert fwk.sign_pod(info("a", labels={"x": "1"})) == fwk.sign_pod(info("b", labels={"x": "2"}))


def test_a_plugin_without_sign_pod_makes_every_pod_unsignable() -> None:
    class Opaque:
        name = "Opaque"

        def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
            return FilterResult.all_pass(len(nodes))

    registry = in_tree_registry()
    registry.register("Opaque", lambda args, handle: Opaque())
    fwk = Framework(batchable_profile(plugins={"filter": {"enabled": [{"name": "Opaque"}]}}), registry)
    assert fwk.signer.signers is None and fwk.unsignable_plugins == ["Opaque"]
    assert fwk.sign_pod(info("p")) is None


def flushes(fwk: Framework) -> dict[str, int]:
    assert fwk.batch is not None
    return {k: v for k, v in fwk.batch.stats.flushed.items() if v}


def start(fwk: Framework, t: NodeTable, cycle: int = 1) -> str:
    first = fwk.schedule(info("p0", cpu="3"), t.snapshot(), cycle=cycle)
    assert first.node is not None
    t.add_pod(first.node, info("p0", cpu="3"))
    return first.node


# -- the hint path ----------------------------------------------------------------------------------------

def test_the_next_pod_gets_the_next_best_node_without_a_scoring_pass() -> None:
    t = table()
    fwk, counter = counting_framework()
    first = fwk.schedule(info("p0", cpu="3"), t.snapshot())
    assert first.node is not None and not first.decision.hinted
    totals = first.decision.final_scores()
    assert len(set(totals.values())) == len(totals)  # no ties: the order is fixed
    order = sorted(totals, key=lambda n: -totals[n])
    assert order[0] == first.node
    t.add_pod(first.node, info("p0", cpu="3"))
    assert fwk.batch is not None and fwk.batch.remaining() == order[1:]
    for i in range(1, 5):
        filtered, scored = counter.filtered, counter.scored
        pod = info(f"p{i}", cpu="3")
        result = fwk.schedule(pod, t.snapshot())
        assert result.node == order[i] and result.decision.hinted
        assert result.decision.evaluated == result.decision.feasible == 1  # a record of that node alone
        assert [row["node"] for row in result.decision.rows()] == [order[i]]
        assert counter.scored == scored  # no Score
        # filters ran on two nodes only: the one chosen last (NodeResourcesFit rejects the pod there,
        # so the check stops before Counting), then the hint (every filter)
        assert counter.filtered - filtered == 1
        t.add_pod(result.node, pod)
    assert fwk.batch.stats.attempts == {b.NO_HINT: 1, b.HINT_USED: 4, b.HINT_NOT_USED: 0}
    assert fwk.batch.stats.batched_pods == 4


def test_with_batching_off_the_same_stream_is_fully_scored_and_lands_the_same() -> None:
    on_table, off_table = table(), table()
    on, _ = counting_framework()
    off, counter = counting_framework(batching=False)
    assert off.batch is None
    for i in range(10):
        pod = info(f"p{i}", cpu="3")
        a, c = on.schedule(pod, on_table.snapshot()), off.schedule(pod, off_table.snapshot())
        assert a.node == c.node and not c.decision.hinted
        on_table.add_pod(a.node, pod)
        off_table.add_pod(c.node, pod)
    assert counter.scored == sum(12 - i for i in range(10))  # every cycle scored every free node


def test_a_hint_that_no_longer_fits_runs_the_full_cycle() -> None:
    t = table()
    fwk, counter = counting_framework()
    first = start(fwk, t)
    assert fwk.batch is not None
    hint = fwk.batch.remaining()[0]
    t.add_pod(hint, info("other", cpu="3"))  # someone else took the next best node
    scored = counter.scored
    second = fwk.schedule(info("p1", cpu="3"), t.snapshot())
    assert second.node not in (first, hint) and not second.decision.hinted
    assert counter.scored > scored
    assert fwk.batch.stats.attempts[b.HINT_NOT_USED] == 1
    # a fresh list from this cycle's scores: every free node but the one it chose
    assert set(fwk.batch.remaining()) == set(t.names) - {first, hint, second.node}


def test_a_nominated_node_wins_over_the_hint() -> None:
    t = table()
    fwk, _ = counting_framework()
    start(fwk, t)
    assert fwk.batch is not None
    nominated = fwk.batch.remaining()[-1]
    pod = PodInfo.from_pod({**make_pod("p1", cpu="3"), "status": {"nominatedNodeName": nominated}})
    result = fwk.schedule(pod, t.snapshot())
    assert result.node == nominated and result.decision.nominated and not result.decision.hinted
    assert fwk.batch.stats.attempts[b.HINT_NOT_USED] == 1
    assert fwk.batch.stats.flushed[b.EMPTY_LIST] == 1 and fwk.batch.state is None


# -- why kept scores cannot serve a cycle ----------------------------------------------------------------

def test_flush_when_the_signature_differs() -> None:
    t = table()
    fwk, _ = counting_framework()
    start(fwk, t)
    assert not fwk.schedule(info("p1", cpu="3", memory="1Gi"), t.snapshot()).decision.hinted
    assert flushes(fwk) == {b.POD_INCOMPATIBLE: 1}


def test_flush_when_a_cycle_was_skipped() -> None:
    t = table()
    fwk, _ = counting_framework()
    start(fwk, t, cycle=1)
    assert not fwk.schedule(info("p1", cpu="3"), t.snapshot(), cycle=3).decision.hinted
    assert flushes(fwk) == {b.POD_SKIPPED: 1}


def test_after_a_failed_cycle_kube_counts_a_skipped_one() -> None:
    """kube 1.35.4 stores nothing for a failed cycle, so the next one is not last + 1: pod_skipped
    (its pod_failed reason is never recorded)."""
    t = table()
    fwk, _ = counting_framework()
    start(fwk, t, cycle=1)
    assert fwk.schedule(info("huge", cpu="64"), t.snapshot(), cycle=2).node is None
    assert not fwk.schedule(info("p1", cpu="3"), t.snapshot(), cycle=3).decision.hinted
    assert flushes(fwk) == {b.POD_INCOMPATIBLE: 1, b.POD_SKIPPED: 1}


def test_flush_when_the_last_cycle_did_not_succeed() -> None:
    kept = b.OpportunisticBatch(lambda pod: (("sig", 1),))
    kept.store_schedule_results((("sig", 1),), "", "n1", b.SortedScoredNodes.of(["n2", "n3"]), 1)
    kept.last.succeeded = False
    assert kept.get_node_hint(info("p"), 2, lambda node: True) == ("", (("sig", 1),))
    assert kept.stats.flushed[b.POD_FAILED] == 1


def test_flush_when_the_kept_scores_are_older_than_500_ms() -> None:
    now = [100.0]
    t = table()
    fwk, _ = counting_framework(clock=lambda: now[0])
    start(fwk, t)
    now[0] += 0.4
    second = fwk.schedule(info("p1", cpu="3"), t.snapshot())
    assert second.decision.hinted and second.node is not None
    t.add_pod(second.node, info("p1", cpu="3"))
    now[0] += 0.2  # 0.6 s after the list was made (a used hint does not renew it)
    assert not fwk.schedule(info("p2", cpu="3"), t.snapshot()).decision.hinted
    assert flushes(fwk) == {b.EXPIRED: 1}


def test_flush_when_the_last_node_still_fits() -> None:
    t = table()
    fwk, _ = counting_framework()
    first = fwk.schedule(info("p0", cpu="1"), t.snapshot())  # small: a node takes several
    t.add_pod(first.node, info("p0", cpu="1"))
    assert not fwk.schedule(info("p1", cpu="1"), t.snapshot()).decision.hinted
    assert flushes(fwk) == {b.NODE_NOT_FULL: 1}


def test_flush_when_the_last_node_is_gone() -> None:
    t = table()
    fwk, _ = counting_framework()
    node = start(fwk, t)
    t.remove_node(node)
    assert not fwk.schedule(info("p1", cpu="3"), t.snapshot()).decision.hinted
    assert flushes(fwk) == {b.NODE_MISSING: 1}


def test_one_feasible_node_leaves_nothing_to_keep_and_unsignable_pods_keep_nothing() -> None:
    t = table(n=1)
    fwk, _ = counting_framework()
    fwk.schedule(info("p0", cpu="3"), t.snapshot())
    assert flushes(fwk) == {b.EMPTY_LIST: 1}
    plain = Framework(seed=1)  # the default profile: no pod signs
    plain.schedule(info("p0", cpu="3"), table().snapshot())
    assert flushes(plain) == {b.POD_NOT_BATCHABLE: 1}


def test_kube_batch_cases() -> None:
    """kube's TestBatchBasic, on the state machine alone."""
    def run(first_nodes: list[str] | None, second_sig: str = "sig", cycle: int = 2, rejects: bool = True,
            stored: bool = True) -> tuple[str, list[str]]:
        sig = {"s": (("k", "sig"),)}
        kept = b.OpportunisticBatch(lambda pod: sig["s"])
        assert kept.get_node_hint(info("p1"), 1, lambda n: True)[0] == ""
        if stored:
            kept.store_schedule_results(sig["s"], "", "n3",
                                        None if first_nodes is None else b.SortedScoredNodes.of(first_nodes), 1)
        sig["s"] = (("k", second_sig),)
        hint, _ = kept.get_node_hint(info("p2"), cycle, lambda n: rejects)
        kept.store_schedule_results(sig["s"], hint, "n1", None, cycle)
        return hint, kept.remaining()

    assert run(["n1"]) == ("n1", [])
    assert run(["n1"], second_sig="sig2") == ("", [])
    assert run(["n1"], rejects=False) == ("", [])  # not one pod per node
    assert run(["n1"], stored=False) == ("", [])  # the first pod did not schedule
    assert run([]) == ("", [])
    assert run(None) == ("", [])
    assert run(["n1"], cycle=3) == ("", [])  # another profile's pod came between
    assert run(["n1", "n2"]) == ("n1", ["n2"])  # the rest stays for the next pod


# -- the switch -------------------------------------------------------------------------------------------

def test_feature_gates_parse_and_check() -> None:
    assert check_feature_gates({}) == {"OpportunisticBatching": True, "SchedulerPopFromBackoffQ": True}
    assert check_feature_gates(parse_feature_gates("OpportunisticBatching=false"))["OpportunisticBatching"] is False
    with pytest.raises(ValueError, match="unrecognized feature gate: Nope"):
        check_feature_gates({"Nope": True})
    with pytest.raises(ValueError, match="Name=true or Name=false"):
        parse_feature_gates("OpportunisticBatching")


class _PinnedTo:
    """A PreFilter that leaves one node (as a shard's NodePartition leaves its partition): the
    plugins still see every node, only the choice is narrowed."""

    name = "PinnedTo"
    node = ""

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult, Status]:
        return PreFilterResult(frozenset({self.node})), Status.success()


@pytest.mark.parametrize(("seed", "percentage"), [(1, 100), (2, 0), (3, 50)])
def test_on_random_clusters_every_hinted_node_passes_a_fresh_cycles_filters(seed: int, percentage: int) -> None:
    import random

    from tests.scheduler.plugins.randomcluster import random_node, random_pod

    rng = random.Random(seed)
    t = NodeTable()
    names = [f"n{i}" for i in range(120)]
    for name in names:
        node = random_node(rng, name)
        node["status"]["allocatable"]["pods"] = "1"  # every pod fills its node
        t.add_node(node)
    profile = load_profiles({**CONFIG, "percentageOfNodesToScore": percentage,
                             "profiles": [{"pluginConfig": [NO_DEFAULT_SPREAD]}]})[0]
    on, fresh = Framework(profile, seed=seed), Framework(profile, seed=seed, batching=False)
    pinned = _PinnedTo()
    registry = in_tree_registry()
    registry.register(pinned.name, lambda args, handle: pinned)
    pinned_profile = load_profiles({**CONFIG, "percentageOfNodesToScore": percentage, "profiles": [
        {"pluginConfig": [NO_DEFAULT_SPREAD], "plugins": {"preFilter": {"enabled": [{"name": pinned.name}]}}}]})[0]
    fresh_on_one_node = Framework(pinned_profile, registry, seed=seed, batching=False)
    signable = (pod for pod in (random_pod(rng, f"s{i}") for i in range(1000))  # and fitting 10 nodes or more
                if on.sign_pod(PodInfo.from_pod(pod)) is not None
                and fresh.schedule(PodInfo.from_pod(pod), t.snapshot()).feasible >= 10)
    shapes = [next(signable), next(signable), random_pod(rng, "any")]
    placed: list[tuple[str, PodInfo]] = []
    hinted = 0
    for i in range(300):
        shape = shapes[0] if rng.random() < 0.7 else rng.choice(shapes)  # mostly one Deployment
        pod = PodInfo.from_pod({**shape, "metadata": {"name": f"p{i}", "namespace": "default"}})
        snap = t.snapshot()
        result = on.schedule(pod, snap)
        if result.decision.hinted:
            hinted += 1
            pinned.node = result.node or ""
            assert fresh_on_one_node.schedule(pod, snap).node == result.node, i
        if result.node is not None:
            t.add_pod(result.node, pod)
            placed.append((result.node, pod))
        if rng.random() < 0.1 and placed:  # a pod finishes: its node is free again
            node, gone = placed.pop(rng.randrange(len(placed)))
            t.remove_pod(node, gone)
    assert on.batch is not None and hinted == on.batch.stats.attempts[b.HINT_USED] > 0
