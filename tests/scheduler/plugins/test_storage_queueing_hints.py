"""The storage plugins' queueing hints, ported from kube-scheduler 1.35.4's tables
(pkg/scheduler/framework/plugins/{volumebinding,volumerestrictions,volumezone,nodevolumelimits}):
each case's name is kube's. kube's "unexpected objects" cases (a type-conversion error, which kube
answers Queue) are asked through `ask_hint`, which answers QUEUE for a hint that raises. Not ported:
the CSIStorageCapacity, CSIDriver and VolumeAttachment hints (minisched watches none of those)."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.objects import make_claim, make_csi_node, make_pod, make_storage_class, make_volume
from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework.cluster_event import QUEUE, QUEUE_SKIP, QueueingHint, ask_hint
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.plugins.node_volume_limits import NodeVolumeLimits
from minisched.scheduler.plugins.storage import (
    CSI_NODE_ADD,
    CSI_NODE_UPDATE,
    PV_ADD,
    PV_UPDATE,
    PVC_ADD,
    PVC_UPDATE,
    STORAGE_CLASS_ADD,
    STORAGE_CLASS_UPDATE,
)
from minisched.scheduler.plugins.volume_binding import MIGRATED_PLUGINS_ANNOTATION, VolumeBinding
from minisched.scheduler.plugins.volume_restrictions import VolumeRestrictions
from minisched.scheduler.plugins.volume_zone import BETA_ZONE, ZONE, VolumeZone

Object = dict[str, Any]
NOT_AN_OBJECT: Any = object()  # kube's new(struct{}) or "not-a-pvc": the hint cannot read it


def pod(name: str = "pod-a", *, namespace: str = "default", claims: tuple[str, ...] = (),
        volumes: tuple[Object, ...] = (), node_name: str | None = None) -> Object:
    return make_pod(name, namespace=namespace, claims=list(claims), volumes=list(volumes), node_name=node_name)


def ephemeral(name: str) -> Object:
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}


def hint_of(fn: Any, p: Object, old: Any, new: Any) -> QueueingHint:
    return ask_hint(fn, p, old, new)


# --- the registrations --------------------------------------------------------------------------------


def _registered(plugin: str) -> set[tuple[ce.ClusterEvent, bool]]:
    """(event, with a hint) for each event `plugin` registered in the default profile."""
    return {(event, reg.hint is not None) for event, regs in Framework().queueing_hints.items()
            for reg in regs if reg.plugin == plugin}


def test_the_storage_plugins_register_kube_1_35s_events() -> None:
    assert _registered("VolumeBinding") == {
        (STORAGE_CLASS_ADD, True), (STORAGE_CLASS_UPDATE, True), (PVC_ADD, True), (PVC_UPDATE, True),
        (PV_ADD, False), (PV_UPDATE, False), (ce.NODE_ADD, False), (ce.NODE_LABEL_CHANGE, False),
        (CSI_NODE_ADD, True), (CSI_NODE_UPDATE, True)}
    assert _registered("VolumeRestrictions") == {(ce.ASSIGNED_POD_DELETE, True), (ce.NODE_ADD, False),
                                                 (PVC_ADD, True)}
    assert _registered("VolumeZone") == {
        (STORAGE_CLASS_ADD, True), (ce.NODE_ADD, False), (ce.NODE_LABEL_CHANGE, False), (PVC_ADD, True),
        (PVC_UPDATE, True), (PV_ADD, True), (PV_UPDATE, True)}
    assert _registered("NodeVolumeLimits") == {(CSI_NODE_ADD, False), (CSI_NODE_UPDATE, True),
                                               (ce.ASSIGNED_POD_DELETE, True), (PVC_ADD, True)}


# --- VolumeBinding ------------------------------------------------------------------------------------------


def csi_node(migrated: str | None) -> Object:
    node = make_csi_node("csinode-a", {})
    if migrated is not None:
        node["metadata"]["annotations"] = {MIGRATED_PLUGINS_ANNOTATION: migrated}
    return node


@pytest.mark.parametrize(("old", "new", "want"), [
    pytest.param(NOT_AN_OBJECT, NOT_AN_OBJECT, QUEUE, id="unexpected objects are passed"),
    pytest.param(None, csi_node(None), QUEUE, id="CSINode is newly created"),
    pytest.param(csi_node("test1"), csi_node("test1, test2"), QUEUE, id="CSINode's migrated-plugins annotations is added"),
    pytest.param(csi_node("test1"), csi_node("test2"), QUEUE, id="CSINode's migrated-plugins annotation is updated"),
    pytest.param(csi_node("test1"), csi_node("test1"), QUEUE_SKIP,
                 id="CSINode is updated but migrated-plugins annotation gets unchanged"),
])
def test_volume_binding_is_schedulable_after_csi_node_change(old: Any, new: Any, want: QueueingHint) -> None:
    """kube's TestIsSchedulableAfterCSINodeChange."""
    assert hint_of(VolumeBinding.is_schedulable_after_csi_node_change, pod(), old, new) is want


@pytest.mark.parametrize(("p", "old", "new", "want"), [
    pytest.param(pod(volumes=({"name": "scratch", "emptyDir": {}},)), make_claim("pvc-b"), make_claim("pvc-b"),
                 QUEUE_SKIP, id="pod has no pvc or ephemeral volumes"),
    pytest.param(pod(namespace="ns-a", claims=("pvc-a", "pvc-b")), None, make_claim("pvc-b"), QUEUE_SKIP,
                 id="pvc with the same name as the one used by the pod in a different namespace is modified"),
    pytest.param(pod(claims=("pvc-a", "pvc-c")), make_claim("pvc-b"), make_claim("pvc-b"), QUEUE_SKIP,
                 id="pod has no pvc that is being modified"),
    pytest.param(pod(volumes=(ephemeral("ephemeral-a"), ephemeral("ephemeral-c"))), make_claim("pod-a-ephemeral-b"),
                 make_claim("pod-a-ephemeral-b"), QUEUE_SKIP, id="pod has no generic ephemeral volume that is being modified"),
    pytest.param(pod(claims=("pvc-a", "pvc-b")), make_claim("pvc-b"), make_claim("pvc-b"), QUEUE,
                 id="pod has the pvc that is being modified"),
    pytest.param(pod(volumes=(ephemeral("ephemeral-a"), ephemeral("ephemeral-b"))), make_claim("pod-a-ephemeral-b"),
                 make_claim("pod-a-ephemeral-b"), QUEUE, id="pod has the generic ephemeral volume that is being modified"),
    pytest.param(pod(), NOT_AN_OBJECT, NOT_AN_OBJECT, QUEUE, id="type conversion error"),
])
def test_volume_binding_is_schedulable_after_persistent_volume_claim_change(p: Object, old: Any, new: Any,
                                                                            want: QueueingHint) -> None:
    """kube's TestIsSchedulableAfterPersistentVolumeClaimChange."""
    assert hint_of(VolumeBinding.is_schedulable_after_persistent_volume_claim_change, p, old, new) is want


def storage_class(allowed_topologies: list[Object] | None = None) -> Object:
    sc = make_storage_class("sc-a")
    if allowed_topologies is not None:
        sc["allowedTopologies"] = allowed_topologies
    return sc


@pytest.mark.parametrize(("old", "new", "want"), [
    pytest.param(None, storage_class(), QUEUE, id="When a new StorageClass is created, it returns Queue"),
    pytest.param(storage_class(), storage_class([{"matchLabelExpressions": [
        {"key": "kubernetes.io/hostname", "values": ["node-a"]}]}]), QUEUE,
        id="When the AllowedTopologies are changed, it returns Queue"),
    pytest.param(storage_class(), storage_class(), QUEUE_SKIP,
                 id="When there are no changes to the StorageClass, it returns QueueSkip"),
    pytest.param(NOT_AN_OBJECT, NOT_AN_OBJECT, QUEUE, id="type conversion error"),
    # not kube's: no list and an empty one are equal to apiequality.Semantic
    pytest.param(storage_class(), storage_class([]), QUEUE_SKIP, id="allowedTopologies set to an empty list"),
])
def test_volume_binding_is_schedulable_after_storage_class_change(old: Any, new: Any, want: QueueingHint) -> None:
    """kube's TestIsSchedulableAfterStorageClassChange."""
    assert hint_of(VolumeBinding.is_schedulable_after_storage_class_change, pod(), old, new) is want


# --- VolumeRestrictions -------------------------------------------------------------------------------------

GCE, GCE2 = {"name": "v", "gcePersistentDisk": {"pdName": "foo"}}, {"name": "v", "gcePersistentDisk": {"pdName": "bar"}}
AWS, AWS2 = ({"name": "v", "awsElasticBlockStore": {"volumeID": "foo"}},
             {"name": "v", "awsElasticBlockStore": {"volumeID": "bar"}})
RBD = {"name": "v", "rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
RBD2 = {"name": "v", "rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
ISCSI = {"name": "v", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01",
                                "fsType": "ext4", "lun": 0}}
ISCSI2 = {"name": "v", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01",
                                 "fsType": "ext4", "lun": 0}}


@pytest.mark.parametrize(("p", "deleted", "want"), [
    pytest.param(pod(volumes=(GCE,)), pod("gone", volumes=(GCE,)), QUEUE, id="queue-new-object-gcedisk-conflict"),
    pytest.param(pod(volumes=(GCE,)), pod("gone", volumes=(GCE2,)), QUEUE_SKIP, id="skip-new-object-gcedisk-no-conflict"),
    pytest.param(pod(volumes=(AWS,)), pod("gone", volumes=(AWS,)), QUEUE, id="queue-new-object-awsdisk-conflict"),
    pytest.param(pod(volumes=(AWS,)), pod("gone", volumes=(AWS2,)), QUEUE_SKIP, id="skip-new-object-awsdisk-no-conflict"),
    pytest.param(pod(volumes=(RBD,)), pod("gone", volumes=(RBD,)), QUEUE, id="queue-new-object-rbddisk-conflict"),
    pytest.param(pod(volumes=(RBD,)), pod("gone", volumes=(RBD2,)), QUEUE_SKIP, id="skip-new-object-rbddisk-no-conflict"),
    pytest.param(pod(volumes=(ISCSI,)), pod("gone", volumes=(ISCSI,)), QUEUE, id="queue-new-object-iscsidisk-conflict"),
    pytest.param(pod(volumes=(ISCSI,)), pod("gone", volumes=(ISCSI2,)), QUEUE_SKIP,
                 id="skip-new-object-iscsidisk-no-conflict"),
    pytest.param(pod("pod1", claims=("claim-rwop",)), pod("pod2", claims=("claim-rwop",)), QUEUE, id="queue-has-same-claim"),
    pytest.param(pod("pod1", claims=("claim-1-rwop",)), pod("pod2", claims=("claim-2-rwop",)), QUEUE_SKIP,
                 id="skip-no-same-claim"),
    # not kube's: a pod of another namespace frees nothing this pod needs
    pytest.param(pod("pod1", claims=("c",)), pod("pod2", namespace="other", claims=("c",)), QUEUE_SKIP,
                 id="skip-other-namespace"),
])
def test_volume_restrictions_is_schedulable_after_pod_deleted(p: Object, deleted: Object, want: QueueingHint) -> None:
    """kube's Test_isSchedulableAfterPodDeleted."""
    assert hint_of(VolumeRestrictions.is_schedulable_after_pod_deleted, p, deleted, None) is want


POD_WITH_ONE_PVC = pod("pod-with-one-pvc", claims=("claim-with-rwx-1",), node_name="node-1")
POD_WITH_TWO_PVCS = pod("pod-with-two-pvcs", claims=("claim-with-rwx-1", "claim-with-rwx-2"), node_name="node-1")
POD_WITH_NOT_EQUAL_NAMESPACE = pod("pod-with-one-pvc", namespace="kube-system", claims=("claim-with-rwx-1",),
                                   node_name="claim-with-rwx-2")
PVC1 = make_claim("claim-with-rwx-1", access_modes=("ReadWriteMany",))
PVC2 = make_claim("claim-with-rwx-2", access_modes=("ReadWriteMany",))


@pytest.mark.parametrize(("p", "new", "want"), [
    pytest.param(POD_WITH_TWO_PVCS, PVC1, QUEUE, id="queue-new-object-pvc-belong-pod"),
    pytest.param(POD_WITH_ONE_PVC, PVC2, QUEUE_SKIP, id="skip-new-object-unused"),
    pytest.param(POD_WITH_ONE_PVC, PVC2, QUEUE_SKIP, id="skip-nil-old-object"),
    pytest.param(POD_WITH_ONE_PVC, PVC2, QUEUE_SKIP, id="skip-new-object-not-belong-pod"),
    pytest.param(POD_WITH_NOT_EQUAL_NAMESPACE, PVC1, QUEUE_SKIP, id="skip-new-object-namespace-not-equal-pod"),
])
def test_volume_restrictions_is_schedulable_after_persistent_volume_claim_change(p: Object, new: Object,
                                                                                 want: QueueingHint) -> None:
    """kube's Test_isSchedulableAfterPersistentVolumeClaimChange (the Add hint)."""
    assert hint_of(VolumeRestrictions.is_schedulable_after_persistent_volume_claim_added, p, None, new) is want


# --- VolumeZone ---------------------------------------------------------------------------------------------


def claim(name: str, *, namespace: str = "default", volume_name: str = "") -> Object:
    c = make_claim(name, namespace=namespace)
    c["spec"]["volumeName"] = volume_name
    return c


def pod_with_volume(name: str, pvc: str) -> Object:  # kube's createPodWithVolume
    return pod(name, claims=(pvc,))


@pytest.mark.parametrize(("p", "old", "new", "want"), [
    pytest.param(pod_with_volume("pod_1", "PVC_1"), None, "not-a-pvc", QUEUE, id="error-wrong-new-object"),
    pytest.param(pod("pod_1"), None, claim("PVC_1", volume_name="Vol_1"), QUEUE_SKIP,
                 id="pvc-was-added-but-pod-refers-no-pvc"),
    pytest.param(pod_with_volume("pod_1", "PVC_2"), None, claim("PVC_1", volume_name="Vol_1"), QUEUE_SKIP,
                 id="pvc-was-added-and-pod-was-bound-to-different-pvc"),
    pytest.param(pod_with_volume("pod_1", "PVC_1"), None, claim("PVC_1", namespace="ns1", volume_name="Vol_1"),
                 QUEUE_SKIP, id="pvc-was-added-and-pod-was-bound-to-pvc-but-different-ns"),
    pytest.param(pod_with_volume("pod_1", "PVC_1"), None, claim("PVC_1", volume_name="Vol_1"), QUEUE,
                 id="pvc-was-added-and-pod-was-bound-to-the-pvc"),
    pytest.param(pod_with_volume("pod_1", "PVC_1"), claim("PVC_1"), claim("PVC_1", volume_name="Vol_1"), QUEUE,
                 id="pvc-was-updated-and-pod-was-bound-to-the-pvc"),
    pytest.param(pod("pod_1"), claim("PVC_1"), claim("PVC_1", volume_name="Vol_1"), QUEUE_SKIP,
                 id="pvc-was-updated-but-pod-refers-no-pvc"),
])
def test_volume_zone_is_schedulable_after_persistent_volume_claim_added(p: Object, old: Any, new: Any,
                                                                        want: QueueingHint) -> None:
    """kube's TestIsSchedulableAfterPersistentVolumeClaimAdded."""
    assert hint_of(VolumeZone.is_schedulable_after_persistent_volume_claim_change, p, old, new) is want


@pytest.mark.parametrize(("new", "want"), [
    pytest.param("not-a-storageclass", QUEUE, id="error-wrong-new-object"),
    pytest.param(make_storage_class("SC_1"), QUEUE_SKIP, id="sc-doesn't-have-volume-binding-mode"),
    pytest.param(make_storage_class("SC_1", binding_mode="WaitForFirstConsumer"), QUEUE,
                 id="new-sc-is-wait-for-first-consumer-mode"),
])
def test_volume_zone_is_schedulable_after_storage_class_added(new: Any, want: QueueingHint) -> None:
    """kube's TestIsSchedulableAfterStorageClassAdded."""
    assert hint_of(VolumeZone.is_schedulable_after_storage_class_added, pod_with_volume("pod_1", "PVC_1"),
                   None, new) is want


def volume(labels: dict[str, str] | None = None) -> Object:
    return make_volume("Vol_1", labels=labels)


@pytest.mark.parametrize(("old", "new", "want"), [
    pytest.param(None, "not-a-pv", QUEUE, id="error-wrong-new-object"),
    pytest.param("not-a-pv", volume(), QUEUE, id="error-wrong-old-object"),
    pytest.param(None, volume({BETA_ZONE: "us-west1-b"}), QUEUE, id="new-pv-was-added"),
    pytest.param(volume({BETA_ZONE: "us-west1-a"}), volume({BETA_ZONE: "us-west1-b"}), QUEUE,
                 id="pv-was-updated-and-changed-topology"),
    pytest.param(volume({BETA_ZONE: "us-west1-a"}), volume({BETA_ZONE: "us-west1-a", ZONE: "zone"}), QUEUE,
                 id="pv-was-updated-and-added-topology-label"),
    pytest.param(volume({BETA_ZONE: "us-west1-a", ZONE: "zone"}), volume({BETA_ZONE: "us-west1-a", ZONE: "zone"}),
                 QUEUE_SKIP, id="pv-was-updated-but-no-topology-is-changed"),
    # not kube's: a label other than the four topology ones, and zones listed in another order
    pytest.param(volume({ZONE: "a__b"}), volume({ZONE: "b__a", "team": "x"}), QUEUE_SKIP,
                 id="pv-was-updated-but-the-zones-are-the-same-set"),
])
def test_volume_zone_is_schedulable_after_persistent_volume_change(old: Any, new: Any, want: QueueingHint) -> None:
    """kube's TestIsSchedulableAfterPersistentVolumeChange."""
    assert hint_of(VolumeZone.is_schedulable_after_persistent_volume_change, pod_with_volume("pod_1", "PVC_1"),
                   old, new) is want


# --- NodeVolumeLimits (kube's CSILimits) ---------------------------------------------------------------------

POD_EBS = pod("pod-ebs", claims=("csi-ebs.csi.aws.com-2",))


@pytest.mark.parametrize(("deleted", "scheduled", "want"), [
    pytest.param(pod("gone", claims=("placeholder",)), True, QUEUE, id="return a Queue when a deleted pod has a PVC"),
    pytest.param(pod("gone", volumes=({"name": "v", "awsElasticBlockStore": {}},)), True, QUEUE,
                 id="return a Queue when a deleted pod has a inline migratable volume"),
    pytest.param(pod("gone"), True, QUEUE_SKIP, id="return a QueueSkip when a deleted pod doesn't have any volume"),
    pytest.param(pod("gone", claims=("csi-ebs.csi.aws.com-0",)), False, QUEUE_SKIP,
                 id="return a QueueSkip when a deleted pod is not scheduled."),
])
def test_node_volume_limits_qhint(deleted: Object, scheduled: bool, want: QueueingHint) -> None:
    """kube's TestCSILimitsQHint (a pod deleted)."""
    if scheduled:
        deleted["spec"]["nodeName"] = "csiNode"
    assert hint_of(NodeVolumeLimits.is_schedulable_after_pod_deleted, POD_EBS, deleted, None) is want


@pytest.mark.parametrize(("p", "added", "want"), [
    pytest.param(pod(namespace="ns1"), make_claim("pvc", namespace="ns2"), QUEUE_SKIP,
                 id="a pod isn't in the same namespace as an added PVC"),
    pytest.param(pod(namespace="ns1", claims=("pvc1",)), make_claim("pvc1", namespace="ns1"), QUEUE,
                 id="a pod is in the same namespace as an added PVC"),
    pytest.param(pod("pod1", namespace="ns1", volumes=(ephemeral("ephemeral"),)),
                 make_claim("pod1-ephemeral", namespace="ns1"), QUEUE,
                 id="a pod has an ephemeral volume related to an added PVC"),
    pytest.param(pod(namespace="ns1", claims=("pvc1",)), make_claim("pvc2", namespace="ns1"), QUEUE_SKIP,
                 id="a pod doesn't have the same PVC as an added PVC"),
    pytest.param(pod(namespace="ns1"), make_claim("pvc2", namespace="ns1"), QUEUE_SKIP,
                 id="a pod doesn't have any PVC attached"),
])
def test_node_volume_limits_added_pvc_qhint(p: Object, added: Object, want: QueueingHint) -> None:
    """kube's TestCSILimitsAddedPVCQHint."""
    assert hint_of(NodeVolumeLimits.is_schedulable_after_pvc_added, p, None, added) is want


@pytest.mark.parametrize(("before", "after", "want"), [
    pytest.param(1, 2, QUEUE, id="limit raised, queue"),
    pytest.param(2, 1, QUEUE_SKIP, id="limit decreased, skip queueing"),
    pytest.param(1, 1, QUEUE_SKIP, id="limit unchanged, skip queueing"),
    # not kube's table, kube's rule: a driver that published no count counted 0
    pytest.param(None, 1, QUEUE, id="a limit published for a driver that had none"),
])
def test_node_volume_limits_after_csi_node_updated_qhint(before: int | None, after: int, want: QueueingHint) -> None:
    """kube's TestCSILimitsAfterCSINodeUpdatedQHint."""
    p = pod("test-pod", namespace="ns1", claims=("csi-ebs.csi.aws.com-0",))
    old, new = make_csi_node("test-node", {"ebs.csi.aws.com": before}), make_csi_node("test-node", {"ebs.csi.aws.com": after})
    assert hint_of(NodeVolumeLimits.is_schedulable_after_csi_node_updated, p, old, new) is want
