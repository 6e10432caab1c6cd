"""The pod index forgets what only deleted pods used (issue 11's long run, held flat in memory).

Real pods carry label values unique to them or to their owner: a Job's `batch.kubernetes.io/
controller-uid`, a StatefulSet's `statefulset.kubernetes.io/pod-name`, a Deployment's
`pod-template-hash` after each rollout; namespaces come and go (CI, previews); affinity terms name
such values. The index numbers every label value, namespace and affinity term it has seen; before
this fix those vocabularies only grew, so a scheduler running for weeks held one entry per pod it
ever placed. Compaction now renumbers them from the live slots: entries are counted after
thousands of pods churned, and the counts the index answers stay those of a loop over the pods."""

from __future__ import annotations

import numpy as np

from minisched.objects import make_node, make_pod
from minisched.scheduler import pod_index
from minisched.scheduler.framework.types import LabelSelector, PodInfo, Requirement
from minisched.scheduler.snapshot import NodeTable

CHURNED = 6_000
LIVE = 50  # pods placed at any one time
UID = "batch.kubernetes.io/controller-uid"


def job_pod(i: int) -> PodInfo:
    """Pod i of Job i // 3, in namespace ns-<i // 500>, with anti-affinity to its own Job's pods."""
    job = f"job-{i // 3}"
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"job-name": job}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return PodInfo.from_pod(make_pod(f"p{i}", namespace=f"ns-{i // 500}",
                                     labels={"app": "batch", "job-name": job, UID: f"uid-{i // 3:08d}"},
                                     affinity=affinity))


def churn(table: NodeTable, n: int) -> list[tuple[str, PodInfo]]:
    nodes = table.names
    live: list[tuple[str, PodInfo]] = []
    for i in range(n):
        node = nodes[i % len(nodes)]
        pod = job_pod(i)
        table.add_pod(node, pod)
        live.append((node, pod))
        if len(live) > LIVE:
            gone_node, gone = live.pop(0)
            table.remove_pod(gone_node, gone.key)
    return live


def table_with_nodes(n: int = 4) -> NodeTable:
    t = NodeTable()
    for i in range(n):
        t.add_node(make_node(f"n{i}"))
    return t


def test_vocabularies_stay_bounded_after_thousands_of_pods_churned() -> None:
    t = table_with_nodes()
    churn(t, CHURNED)
    pc = t.indexed_pods()
    # What the live pods use, plus what the pods removed since the last compaction used (a
    # compaction comes after COMPACT_MIN free slots at most): never one entry per pod ever seen.
    bound = LIVE + 1 + pod_index.COMPACT_MIN + 1
    known = pc.labels_known()
    assert len(known[UID]) <= bound, f"{len(known[UID])} controller-uid values held after {CHURNED:,} pods"
    assert len(known["job-name"]) <= bound
    assert len(known["app"]) == 1
    assert len(pc._ns_ids) <= 3, f"{len(pc._ns_ids)} namespaces held, of {CHURNED // 500} ever used"
    assert len(pc.terms) <= bound and len(pc._term_ids) == len(pc.terms)
    assert pc.slots <= bound


def test_a_label_key_no_live_pod_carries_is_dropped() -> None:
    t = table_with_nodes()
    pods = [PodInfo.from_pod(make_pod(f"once-{i}", labels={f"key-{i}": "v"})) for i in range(pod_index.COMPACT_MIN + 1)]
    for p in pods:
        t.add_pod("n0", p)
    for p in pods:
        t.remove_pod("n0", p.key)
    pc = t.indexed_pods()
    assert pc.slots == 0 and not pc.labels_known(), sorted(pc.labels_known())[:5]


def test_counts_and_terms_after_renumbering_are_those_of_a_loop() -> None:
    t = table_with_nodes()
    snap_before = t.snapshot()
    live = churn(t, 3_000)
    pc = t.indexed_pods()
    assert pc.slots < 3_000, "compaction ran"
    for node, pod in live[-5:]:
        job = dict(pod.labels)["job-name"]
        sel = LabelSelector((Requirement("job-name", "In", (job,)),))
        looped = t.count_pods(lambda p, job=job, ns=pod.namespace: p.namespace == ns and dict(p.labels)["job-name"] == job)
        assert t.count_matching(sel, pod.namespace).tolist() == looped.tolist()
        assert looped[t.row(node)] >= 1
    # every live entry names its own pod's term, through the renumbered term ids
    slot, tid, _, _ = pc.term_entries()
    alive = pc.alive[slot]
    by_slot = {int(s): pc.terms[int(i)] for s, i in zip(slot[alive], tid[alive], strict=True)}
    names = {pc.node_rows[s] for s in by_slot}
    assert len(by_slot) == len(live) and names <= set(range(len(t)))
    expected = sorted(p.pod_affinity.required_anti_affinity[0].selector.requirements[0].values[0]  # type: ignore[union-attr]
                      for _, p in live)
    got = sorted(term.selector.requirements[0].values[0] for term in by_slot.values())  # type: ignore[union-attr]
    assert got == expected
    # a snapshot taken before keeps its own (empty) view; one taken now sees the same counts
    assert snap_before.count_matching(LabelSelector(()), "ns-0").tolist() == [0, 0, 0, 0]
    snap = t.snapshot()
    everyone = LabelSelector((Requirement("app", "In", ("batch",)),))
    ns = live[-1][1].namespace
    assert np.array_equal(snap.count_matching(everyone, ns), t.count_matching(everyone, ns))
