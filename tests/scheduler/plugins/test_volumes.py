"""The volume plugins, table-driven, with cases taken from kube's own plugin tests (volumebinding,
volumezone, volumerestrictions, nodevolumelimits), and the pure per-node rule beside the vectorised
filter."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.objects import make_claim, make_csi_node, make_node, make_pod, make_storage_class, make_volume
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import node_volume_limits, volume_binding, volume_restrictions, volume_zone
from minisched.scheduler.plugins.storage import StaticStorage
from tests.scheduler.plugins.randomcluster import table_of

Object = dict[str, Any]
NS = "default"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"

WAIT = make_storage_class("wait", binding_mode="WaitForFirstConsumer")
IMMEDIATE = make_storage_class("immediate", binding_mode="Immediate")
LOCAL = make_storage_class("local", provisioner="kubernetes.io/no-provisioner", binding_mode="WaitForFirstConsumer")


def available(pv: Object) -> Object:
    """A volume as the PV controller leaves a new one it has not bound: phase Available."""
    return {**pv, "status": {"phase": "Available"}}


def run(module: Any, pod: Object, nodes: list[Object], storage: list[Object],
        placed: dict[str, list[Object]] | None = None) -> tuple[Any, list[tuple[str, ...]], Code | None]:
    """PreFilter, then (unless it stopped the pod or skipped) Filter on every node: (prefilter status,
    per-node reasons, the filter's code)."""
    plugin = module.new(None, None, StaticStorage(storage))
    state, info, table = CycleState(), PodInfo.from_pod(pod), table_of(nodes, placed)
    _, status = plugin.pre_filter(state, info, table)
    if not status.is_success:
        return status, [], None
    result = plugin.filter(state, info, table)
    return status, [result.reasons_at(i) for i in range(len(table))], result.code


def bound(claim: str, volume: str, **kwargs: Any) -> Object:
    return make_claim(claim, volume_name=volume, **kwargs)


def affinity(key: str, *values: str) -> list[Object]:
    return [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]


# --- VolumeBinding --------------------------------------------------------------------------------


@pytest.mark.parametrize(("case", "pod", "storage", "prefilter", "reasons"), [
    ("pod has no pvcs", make_pod("p"), [], (Code.SKIP, ()), None),
    ("all bound", make_pod("p", claims=["pvc-a"]),
     [bound("pvc-a", "pv-a", storage_class="wait"), make_volume("pv-a", storage_class="wait"), WAIT],
     (Code.SUCCESS, ()), [(), ()]),
    ("pvc does not exist", make_pod("p", claims=["pvc-a"]), [],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('persistentvolumeclaim "pvc-a" not found',)), None),
    ("part of the pvcs do not exist", make_pod("p", claims=["pvc-a", "pvc-b"]),
     [bound("pvc-a", "pv-a"), make_volume("pv-a")],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('persistentvolumeclaim "pvc-b" not found',)), None),
    ("immediate claim not bound", make_pod("p", claims=["pvc-a"]),
     [make_claim("pvc-a", storage_class="immediate"), IMMEDIATE],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("pod has unbound immediate PersistentVolumeClaims",)), None),
    ("claim without a class is immediate", make_pod("p", claims=["pvc-a"]), [make_claim("pvc-a", storage_class="")],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("pod has unbound immediate PersistentVolumeClaims",)), None),
    ("pre-bound but not confirmed counts as immediate", make_pod("p", claims=["pvc-a"]),
     [{**make_claim("pvc-a", storage_class="wait"), "spec": {**make_claim("x")["spec"], "volumeName": "pv-a"}}, WAIT],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("pod has unbound immediate PersistentVolumeClaims",)), None),
    ("wait for first consumer, a class that provisions: every node", make_pod("p", claims=["pvc-a"]),
     [make_claim("pvc-a", storage_class="wait"), WAIT], (Code.SUCCESS, ()), [(), ()]),
    ("wait for first consumer, nothing to bind nor provision", make_pod("p", claims=["pvc-a"]),
     [make_claim("pvc-a", storage_class="local"), LOCAL],
     (Code.SUCCESS, ()), [(volume_binding.BIND_CONFLICT,), (volume_binding.BIND_CONFLICT,)]),
    ("wait for first consumer, a local volume on node-b", make_pod("p", claims=["pvc-a"]),
     [make_claim("pvc-a", storage_class="local"), LOCAL,
      available(make_volume("pv-b", storage_class="local", node_affinity=affinity("foo", "barbar")))],
     (Code.SUCCESS, ()), [(volume_binding.BIND_CONFLICT,), ()]),
    ("a bound volume's conflict and a delayed claim's, on one node", make_pod("p", claims=["pvc-a", "pvc-b"]),
     [bound("pvc-a", "pv-a"), make_volume("pv-a", node_affinity=affinity("foo", "barbar")),
      make_claim("pvc-b", storage_class="local"), LOCAL,
      available(make_volume("pv-b", storage_class="local", node_affinity=affinity("foo", "barbar")))],
     (Code.SUCCESS, ()), [(volume_binding.NODE_CONFLICT, volume_binding.BIND_CONFLICT), ()]),
    ("lost claim", make_pod("p", claims=["pvc-a"]),
     [{**bound("pvc-a", "pv-gone"), "status": {"phase": "Lost"}}],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
      ('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-gone"',)), None),
    ("ephemeral claim not yet created", make_pod("p", volumes=[{"name": "scratch", "ephemeral": {}}]), [],
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
      ('waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"',)), None),
    ("pv not found", make_pod("p", claims=["pvc-a"]), [bound("pvc-a", "pv-a")],
     (Code.SUCCESS, ()), [(volume_binding.PV_NOT_EXIST,), (volume_binding.PV_NOT_EXIST,)]),
    ("bound volume's node affinity", make_pod("p", claims=["pvc-a"]),
     [bound("pvc-a", "pv-a"), make_volume("pv-a", node_affinity=affinity("foo", "bar"))],
     (Code.SUCCESS, ()), [(), (volume_binding.NODE_CONFLICT,)]),
    ("two volumes, one conflicting", make_pod("p", claims=["pvc-a", "pvc-b"]),
     [bound("pvc-a", "pv-a"), make_volume("pv-a"), bound("pvc-b", "pv-b"),
      make_volume("pv-b", node_affinity=affinity("kubernetes.io/hostname", "node-b"))],
     (Code.SUCCESS, ()), [(volume_binding.NODE_CONFLICT,), ()]),
])
def test_volume_binding(case: str, pod: Object, storage: list[Object], prefilter: tuple[Code, tuple[str, ...]],
                        reasons: list[tuple[str, ...]] | None) -> None:
    nodes = [make_node("node-a", labels={"foo": "bar"}), make_node("node-b", labels={"foo": "barbar"})]
    status, got, code = run(volume_binding, pod, nodes, storage)
    assert (status.code, status.reasons) == prefilter
    if reasons is not None:
        assert got == reasons
        if any(got):
            assert code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize("labels", [{}, {"foo": "bar"}, {"foo": "baz", "zone": "a"}, {"zone": "b"}])
def test_volume_binding_pure_rule_agrees(labels: dict[str, str]) -> None:
    pv = make_volume("pv", node_affinity=[
        {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "Exists"}, {"key": "foo", "operator": "NotIn",
                                                                       "values": ["bar"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},  # never, as in kube
    ])
    table = table_of([make_node("n", labels=labels)])
    assert bool(volume_binding.node_mask(pv, table)[0]) == volume_binding.node_matches(pv, {
        **labels, "kubernetes.io/hostname": "n"})


# --- VolumeZone -----------------------------------------------------------------------------------


def zone_case(pv_labels: dict[str, str], node_labels: dict[str, str]) -> tuple[Object, list[Object], Object]:
    return (make_pod("p", claims=["pvc"]), [bound("pvc", "pv"), make_volume("pv", labels=pv_labels)],
            make_node("n", labels=node_labels))


@pytest.mark.parametrize(("case", "pv_labels", "node_labels", "fits"), [
    ("node without labels", {BETA_ZONE: "us-west1-a"}, {}, True),
    ("beta zone label matched", {BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, True),
    ("beta region label matched", {BETA_REGION: "us-west1"}, {BETA_REGION: "us-west1"}, True),
    ("beta region label doesn't match", {BETA_REGION: "us-west1"}, {BETA_REGION: "us-east1"}, False),
    ("beta zone label doesn't match", {BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-b"}, False),
    ("zone label matched", {ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, True),
    ("region label matched", {REGION: "us-west1"}, {REGION: "us-west1"}, True),
    ("region label doesn't match", {REGION: "us-west1"}, {REGION: "us-east1"}, False),
    ("zone label doesn't match", {ZONE: "us-west1-a"}, {ZONE: "us-west1-b"}, False),
    ("pv with zone and region, node with only zone", {ZONE: "us-west1-a", REGION: "us-west1"},
     {ZONE: "us-west1-a"}, False),
    ("pv with zone, node with beta zone", {ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-a"}, False),
    ("pv with beta label, node with ga label, matched", {BETA_ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, True),
    ("pv with beta label, node with ga label, don't match", {BETA_ZONE: "us-west1-a"}, {ZONE: "us-west1-b"}, False),
    ("multi-zone volume", {ZONE: "us-west1-a__us-west1-b"}, {ZONE: "us-west1-b"}, True),
    ("node without topology labels at all", {ZONE: "us-west1-a"}, {"other": "x"}, True),
])
def test_volume_zone(case: str, pv_labels: dict[str, str], node_labels: dict[str, str], fits: bool) -> None:
    pod, storage, node = zone_case(pv_labels, node_labels)
    status, reasons, code = run(volume_zone, pod, [node], storage)
    assert status.is_success
    assert reasons == [() if fits else (volume_zone.REASON,)]
    constraints, _ = volume_zone.topologies(pod, NS, StaticStorage(storage))
    assert volume_zone.fits(constraints, {**node_labels, "kubernetes.io/hostname": "n"}) == fits
    if not fits:
        assert code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize(("case", "storage", "expected"), [
    ("unbound volume with an empty storage class", [make_claim("pvc", storage_class="")],
     "PersistentVolumeClaim had no pv name and storageClass name"),
    ("unbound volume, class not found", [make_claim("pvc", storage_class="gone")],
     'storageclass.storage.k8s.io "gone" not found'),
    ("unbound volume, immediate binding", [make_claim("pvc", storage_class="immediate"), IMMEDIATE],
     "PersistentVolume had no name"),
    ("unbound volume, wait binding mode", [make_claim("pvc", storage_class="wait"), WAIT], None),
    ("claim not found", [], 'persistentvolumeclaim "pvc" not found'),
    ("volume not found", [bound("pvc", "pv")], 'persistentvolume "pv" not found'),
])
def test_volume_zone_prefilter(case: str, storage: list[Object], expected: str | None) -> None:
    status, _, _ = run(volume_zone, make_pod("p", claims=["pvc"]), [make_node("n")], storage)
    if expected is None:
        assert status.is_skip
    else:
        assert (status.code, status.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (expected,))


# --- VolumeRestrictions ---------------------------------------------------------------------------

GCE = {"name": "d", "gcePersistentDisk": {"pdName": "foo"}}
GCE_RO = {"name": "d", "gcePersistentDisk": {"pdName": "foo", "readOnly": True}}
GCE_OTHER = {"name": "d", "gcePersistentDisk": {"pdName": "bar"}}
EBS, EBS_OTHER = ({"name": "d", "awsElasticBlockStore": {"volumeID": v}} for v in ("foo", "bar"))
RBD = {"name": "d", "rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar"}}
RBD_OVERLAP = {"name": "d", "rbd": {"monitors": ["c", "b"], "pool": "foo", "image": "bar"}}
RBD_OTHER = {"name": "d", "rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar"}}
ISCSI, ISCSI_OTHER = ({"name": "d", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": q, "lun": 0}}
                      for q in ("iqn.2016-12.server:storage.target01", "iqn.2017-12.server:storage.target01"))
ISCSI_RO = {"name": "d", "iscsi": {**ISCSI["iscsi"], "readOnly": True}}


@pytest.mark.parametrize(("case", "new", "existing", "conflict"), [
    ("nothing", GCE, None, False),
    ("one gce state", GCE, GCE_OTHER, False),
    ("same gce state", GCE, GCE, True),
    ("same gce, both read-only", GCE_RO, GCE_RO, False),
    ("same gce, one read-only", GCE_RO, GCE, True),
    ("different ebs", EBS, EBS_OTHER, False),
    ("same ebs", EBS, EBS, True),
    ("rbd, different monitors", RBD, RBD_OTHER, False),
    ("rbd, overlapping monitors", RBD, RBD_OVERLAP, True),
    ("different iscsi", ISCSI, ISCSI_OTHER, False),
    ("same iscsi", ISCSI, ISCSI, True),
    ("same iscsi, both read-only", ISCSI_RO, ISCSI_RO, False),
])
def test_volume_restrictions_inline_disks(case: str, new: Object, existing: Object | None, conflict: bool) -> None:
    pod = make_pod("p", volumes=[new])
    placed = {"a": [make_pod("q", volumes=[existing])]} if existing else {}
    status, reasons, code = run(volume_restrictions, pod, [make_node("a"), make_node("b")], [], placed)
    assert status.is_success
    assert reasons == [(volume_restrictions.DISK_CONFLICT,) if conflict else (), ()]
    node_pods = [PodInfo.from_pod(p) for p in placed.get("a", [])]
    assert volume_restrictions.disk_fits(pod, node_pods) == (not conflict)
    if conflict:
        assert code == Code.UNSCHEDULABLE


def test_volume_restrictions_read_write_once_pod() -> None:
    rwop = make_claim("only-one", access_modes=("ReadWriteOncePod",))
    pod = make_pod("p", claims=["only-one"])
    status, reasons, _ = run(volume_restrictions, pod, [make_node("a"), make_node("b")], [rwop])
    assert status.is_success and reasons == [(), ()]
    status, reasons, code = run(volume_restrictions, pod, [make_node("a"), make_node("b")], [rwop],
                                {"a": [make_pod("user", claims=["only-one"])]})
    assert reasons == [(volume_restrictions.RWOP_CONFLICT,)] * 2 and code == Code.UNSCHEDULABLE
    other_namespace = make_pod("user", namespace="elsewhere", claims=["only-one"])
    _, reasons, _ = run(volume_restrictions, pod, [make_node("a")], [rwop], {"a": [other_namespace]})
    assert reasons == [()]
    status, _, _ = run(volume_restrictions, make_pod("p", claims=["gone"]), [make_node("a")], [])
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                             ('persistentvolumeclaim "gone" not found',))
    status, _, _ = run(volume_restrictions, make_pod("p", claims=["rwo"]), [make_node("a")], [make_claim("rwo")])
    assert status.is_skip


# --- NodeVolumeLimits -----------------------------------------------------------------------------

DRIVER = "ebs.csi.aws.com"


def csi_claims(*names: str) -> list[Object]:
    out: list[Object] = []
    for name in names:
        out += [bound(name, f"pv-{name}"), make_volume(f"pv-{name}", csi_driver=DRIVER)]
    return out


@pytest.mark.parametrize(("case", "new", "existing", "limit", "fits"), [
    ("under the limit", ["a"], ["b"], 2, True),
    ("at the limit", ["a", "b"], ["c"], 2, False),
    ("the same volume counts once", ["a"], ["a", "b"], 2, True),
    ("no limit published", ["a", "b", "c"], ["d"], None, True),
    ("zero allowed", ["a"], [], 0, False),
])
def test_node_volume_limits(case: str, new: list[str], existing: list[str], limit: int | None, fits: bool) -> None:
    storage = csi_claims("a", "b", "c", "d") + [make_csi_node("n", {DRIVER: limit})]
    pod = make_pod("p", claims=new)
    placed = {"n": [make_pod("q", claims=existing)]} if existing else {}
    status, reasons, code = run(node_volume_limits, pod, [make_node("n"), make_node("free")], storage, placed)
    assert status.is_success
    assert reasons == [() if fits else (node_volume_limits.REASON,), ()]
    lister = StaticStorage(storage)
    new_volumes, _ = node_volume_limits.attachable(pod, NS, lister, new_pod=True)
    old = [node_volume_limits.attachable(p, NS, lister, new_pod=False)[0] for p in placed.get("n", [])]
    assert node_volume_limits.fits(new_volumes, old, node_volume_limits.limits(lister.csi_node("n"))) == fits
    if not fits:
        assert code == Code.UNSCHEDULABLE


def test_node_volume_limits_counts_claims_to_be_provisioned_by_their_class() -> None:
    sc = make_storage_class("csi", provisioner=DRIVER)
    storage = [sc, make_claim("new", storage_class="csi"), make_csi_node("n", {DRIVER: 1})] + csi_claims("old")
    _, reasons, _ = run(node_volume_limits, make_pod("p", claims=["new"]), [make_node("n")], storage,
                        {"n": [make_pod("q", claims=["old"])]})
    assert reasons == [(node_volume_limits.REASON,)]


def test_node_volume_limits_missing_claim_fails_every_node() -> None:
    _, reasons, code = run(node_volume_limits, make_pod("p", claims=["gone"]), [make_node("a"), make_node("b")], [])
    assert reasons == [('looking up PVC default/gone: persistentvolumeclaim "gone" not found',)] * 2
    assert code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize(("volume", "claims"), [
    ({"name": "kube-api-access-x", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}, False),
    ({"name": "data", "persistentVolumeClaim": {"claimName": "data"}}, True),
    ({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}, True),
])
def test_the_volume_plugins_skip_a_pod_without_claims_at_once(volume: dict, claims: bool) -> None:
    from minisched.scheduler.framework.cycle_state import CycleState
    from minisched.scheduler.framework.listers import StaticStorage
    from minisched.scheduler.plugins.node_volume_limits import NodeVolumeLimits
    from minisched.scheduler.plugins.storage import has_claims
    from minisched.scheduler.plugins.volume_binding import VolumeBinding
    from minisched.scheduler.plugins.volume_zone import VolumeZone
    from minisched.scheduler.snapshot import NodeTable

    pod = make_pod("p")
    pod["spec"]["volumes"] = [volume]
    info = PodInfo.from_pod(pod)
    assert has_claims(info) is claims
    storage = StaticStorage()
    # with a claim (missing here): judged, not skipped; VolumeZone reads persistentVolumeClaim volumes only
    zoned = claims and "persistentVolumeClaim" in volume
    for plugin, judged in ((NodeVolumeLimits(storage), claims), (VolumeBinding(storage), claims),
                           (VolumeZone(storage), zoned)):
        _, status = plugin.pre_filter(CycleState(), info, NodeTable())
        assert status.is_skip is not judged, plugin.name
