"""One pod signature for both cross-cycle caches: OpportunisticBatching and the reuse cache agree on
whether two pods are alike, because both key on the profile's one signer (signature.py). Two pods
that differ only in something a plugin reads are told apart by both; two that differ only in what
no plugin reads are alike for both. Only batching's refusals (pod affinity, spreading, claims)
are batching's own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from minisched.objects import make_pod
from minisched.scheduler.framework.profile import Profile, load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.signature import Signature
from minisched.scheduler.framework.types import PodInfo

CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
# without PodTopologySpread's default constraints, batching refuses no plain pod
NO_DEFAULT_SPREAD = {"name": "PodTopologySpread", "args": {"defaultingType": "List"}}
ZONE = "topology.kubernetes.io/zone"


def batchable_profile() -> Profile:
    return load_profiles({**CONFIG, "profiles": [{"pluginConfig": [NO_DEFAULT_SPREAD]}]})[0]


def cache_keys(fwk: Framework) -> tuple[Callable[[PodInfo], Signature | None], Callable[[PodInfo], Signature | None]]:
    """What each cache itself keys a pod on: batching's signer and the reuse cache's."""
    assert fwk.batch is not None and fwk.algorithm.reuse is not None
    return fwk.batch.sign, fwk.algorithm.reuse.sign


def pod(name: str = "p", *, spec: dict[str, Any] | None = None, **kw: Any) -> PodInfo:
    kw.setdefault("cpu", "1")
    kw.setdefault("labels", {"app": "web"})
    made = make_pod(name, **kw)
    if spec:
        made = {**made, "spec": {**made["spec"], **spec}}
    return PodInfo.from_pod(made)


def claims(name: str) -> dict[str, Any]:
    return {"resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}


def spread(key: str) -> dict[str, Any]:
    return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}]}


def anti_affinity(key: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": key}]}}


# (what the second pod changes, the second pod): each differs from pod() in one thing a plugin reads
DIFFERING = {
    "cpu (NodeResourcesFit)": pod(cpu="2"),
    "memory (NodeResourcesFit)": pod(memory="1Gi"),
    "labels (InterPodAffinity: others' terms may select it)": pod(labels={"app": "db"}),
    "image (ImageLocality)": pod(image="nginx"),
    "node selector (NodeAffinity)": pod(node_selector={"zone": "a"}),
    "node affinity (NodeAffinity)": pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}]}}}),
    "tolerations (TaintToleration)": pod(tolerations=[{"key": "k", "operator": "Exists"}]),
    "host ports (NodePorts)": pod(host_ports=[80]),
    "volumes (volume plugins)": pod(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]),
    "node name (NodeName)": pod(node_name="n1"),
}
# each differs from pod() only in what no plugin reads
ALIKE = {
    "name": pod("other"),
    "a ConfigMap volume": pod(volumes=[{"name": "c", "configMap": {"name": "x"}}]),
    "an annotation": PodInfo.from_pod({**make_pod("p", cpu="1", labels={"app": "web"}),
                                       "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"},
                                                    "annotations": {"note": "x"}}}),
}


@pytest.mark.parametrize("change", DIFFERING)
def test_both_caches_tell_apart_pods_that_differ_in_what_a_plugin_reads(change: str) -> None:
    batch_key, reuse_key = cache_keys(Framework(batchable_profile(), reuse_min_nodes=0))
    base, other = pod(), DIFFERING[change]
    assert batch_key(base) is not None and batch_key(other) is not None  # batching takes both
    assert batch_key(base) != batch_key(other), f"batching thinks pods alike that differ in {change}"
    assert reuse_key(base) != reuse_key(other), f"reuse thinks pods alike that differ in {change}"


@pytest.mark.parametrize("change", ALIKE)
def test_both_caches_take_pods_alike_that_differ_in_what_no_plugin_reads(change: str) -> None:
    batch_key, reuse_key = cache_keys(Framework(batchable_profile(), reuse_min_nodes=0))
    base, other = pod(), ALIKE[change]
    assert batch_key(base) is not None
    assert batch_key(base) == batch_key(other), change
    assert reuse_key(base) == reuse_key(other), change


@pytest.mark.parametrize(("what", "spec", "affinity"), [
    ("pod anti-affinity", {}, (anti_affinity(ZONE), anti_affinity("kubernetes.io/hostname"))),
    ("spread constraints", (spread(ZONE), spread("kubernetes.io/hostname")), None),
    ("resource claims", (claims("a"), claims("b")), None),
])
def test_batching_refuses_but_reuse_still_tells_such_pods_apart(what: str, spec: Any, affinity: Any) -> None:
    """The refusals are batching's alone: the reuse cache, which re-judges changed nodes and skips
    cycles whose filters read other nodes, still keys such pods on what the plugins read."""
    batch_key, reuse_key = cache_keys(Framework(batchable_profile(), reuse_min_nodes=0))
    if affinity is not None:
        a, b = pod(affinity=affinity[0]), pod(affinity=affinity[1])
    else:
        a, b = pod(spec=spec[0]), pod(spec=spec[1])
    assert batch_key(a) is None and batch_key(b) is None, what
    assert reuse_key(a) is not None and reuse_key(b) is not None, what
    assert reuse_key(a) != reuse_key(b), what


def test_the_default_profile_batches_nothing_but_reuse_signs_with_the_same_signer() -> None:
    """kube's default profile: PodTopologySpread's System default constraints refuse every pod to
    batching, while reuse is on; its key is the framework's one signature."""
    fwk = Framework(reuse_min_nodes=0)
    batch_key, reuse_key = cache_keys(fwk)
    base = pod()
    assert batch_key(base) is None
    assert reuse_key(base) == fwk.pod_signature(base) is not None
    for change, other in DIFFERING.items():
        assert reuse_key(base) != reuse_key(other), change


def test_tolerations_sign_alike_in_any_order_and_apart_in_any_field() -> None:
    sign = Framework(reuse_min_nodes=0).pod_signature
    a = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
    b = {"key": "j", "operator": "Exists"}
    assert sign(pod(tolerations=[a, b])) == sign(pod(tolerations=[b, a]))
    for field, value in (("key", "k2"), ("value", "w"), ("effect", "NoExecute")):
        assert sign(pod(tolerations=[{**a, field: value}, b])) != sign(pod(tolerations=[a, b])), field
    exists = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
    assert sign(pod(tolerations=[{**a, "value": ""}, b])) != sign(pod(tolerations=[exists, b]))  # the operator
    assert sign(pod(tolerations=[a, a, b])) != sign(pod(tolerations=[a, b]))  # a repeat counts


def test_volume_sources_are_written_once_per_pod_info_and_afresh_for_a_copy() -> None:
    from dataclasses import replace

    from minisched.scheduler.framework.signature import volumes_signer

    token = {"name": "kube-api-access-x1", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
    pod = make_pod("p", cpu="100m")
    pod["spec"]["volumes"] = [token, {"name": "cfg", "configMap": {"name": "c"}}]
    info = PodInfo.from_pod(pod)
    signed = volumes_signer(info)
    assert signed == ('{"projected":{"sources":[{"serviceAccountToken":{"path":"token"}}]}}',)  # no configMap
    pod["spec"]["volumes"] = []  # (a PodInfo's object never changes: this shows what is kept)
    assert volumes_signer(info) is signed  # kept, not written again
    assert volumes_signer(replace(info, pod=pod)) == ()  # a copy keeps nothing of the original's
