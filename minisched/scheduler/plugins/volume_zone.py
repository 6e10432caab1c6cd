"""VolumeZone (PreFilter, Filter): a pod whose bound PersistentVolumes carry zone or region labels
fits only nodes in one of those zones (regions), as kube's plugin: "node(s) had no available volume
zone". A node with none of the four topology labels is not constrained. Claims that are missing,
unnamed, or unbound under an Immediate class stop the pod in PreFilter with kube's messages; unbound
WaitForFirstConsumer claims are skipped (VolumeBinding speaks for them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle, PreFilterResult
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.storage import (
    PV_ADD,
    PV_UPDATE,
    PVC_ADD,
    PVC_UPDATE,
    STORAGE_CLASS_ADD,
    WAIT_FOR_FIRST_CONSUMER,
    StorageLister,
    claim_class,
    has_claims,
    name_of,
    namespace_of,
    not_found,
    storage_from,
)
from minisched.scheduler.snapshot import NodeTable

NAME = "VolumeZone"
REASON = "node(s) had no available volume zone"
_STATE_KEY = "PreFilter" + NAME

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}

Object = dict[str, Any]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Topology:
    """One topology label of one volume: the node must carry `key` with one of `values`."""

    volume: str
    key: str
    values: frozenset[str]


def zones(value: str) -> frozenset[str]:
    """volumehelpers.LabelZonesToSet: a multi-zone label joins zones with "__"."""
    return frozenset(z.strip() for z in value.split("__") if z.strip())


def topologies(pod: Object, namespace: str, storage: StorageLister) -> tuple[tuple[Topology, ...], Status]:
    """getPVbyPod: the topology constraints of the pod's claims' volumes, or why it fits nowhere."""
    out: list[Topology] = []
    unresolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    for v in (pod.get("spec") or {}).get("volumes") or []:
        if v.get("persistentVolumeClaim") is None:
            continue
        name = str(v["persistentVolumeClaim"].get("claimName") or "")
        if not name:
            return (), Status(unresolvable, ("PersistentVolumeClaim had no name",), NAME)
        pvc = storage.claim(namespace, name)
        if pvc is None:
            return (), Status(unresolvable, (not_found("persistentvolumeclaim", name),), NAME)
        pv_name = str((pvc.get("spec") or {}).get("volumeName") or "")
        if not pv_name:
            class_name = claim_class(pvc)
            if not class_name:
                return (), Status(unresolvable, ("PersistentVolumeClaim had no pv name and storageClass name",), NAME)
            sc = storage.storage_class(class_name)
            if sc is None:
                return (), Status(unresolvable, (not_found("storageclass.storage.k8s.io", class_name),), NAME)
            if sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER:
                continue
            return (), Status(unresolvable, ("PersistentVolume had no name",), NAME)
        pv = storage.volume(pv_name)
        if pv is None:
            return (), Status(unresolvable, (not_found("persistentvolume", pv_name),), NAME)
        labels = (pv.get("metadata") or {}).get("labels") or {}
        for key in TOPOLOGY_LABELS:
            if key in labels:
                out.append(Topology(pv_name, key, zones(str(labels[key]))))
    return tuple(out), Status.success()


def pv_topologies(pv: Object) -> list[tuple[str, frozenset[str]]]:
    """kube's getPVTopologies for comparing a volume before and after: (label, zones) for each
    topology label it carries, in kube's order; a value with an empty zone in it ("a____b") is
    skipped, as LabelZonesToSet refuses it."""
    labels = (pv.get("metadata") or {}).get("labels") or {}
    out = []
    for key in TOPOLOGY_LABELS:
        if key in labels:
            parts = [z.strip() for z in str(labels[key]).split("__")]
            if all(parts):
                out.append((key, frozenset(parts)))
    return out


def fits(constraints: tuple[Topology, ...], labels: Mapping[str, str]) -> bool:
    """The pure rule for one node."""
    if not any(k in labels for k in TOPOLOGY_LABELS):
        return True
    for t in constraints:
        value = labels.get(t.key, labels.get(_GA.get(t.key, t.key)))
        if value is None or value not in t.values:
            return False
    return True


def _value_in(nodes: NodeTable, key: str, values: frozenset[str]) -> BoolArray:
    col = nodes.label_column(key)
    ids = [i for i in (nodes.label_value_id(key, v) for v in values) if i is not None]
    if col is None or not ids:
        return np.zeros(len(nodes), np.bool_)
    return np.isin(col, ids)


def _has(nodes: NodeTable, key: str) -> BoolArray:
    col = nodes.label_column(key)
    return col >= 0 if col is not None else np.zeros(len(nodes), np.bool_)


class VolumeZone:
    name = NAME
    reads_pods = False
    reads_other_nodes = True  # follows PVC/PV objects the node table does not version: no reuse

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        return [(signature.VOLUMES, signature.volumes_signer(pod))], Status.success()

    def __init__(self, storage: StorageLister) -> None:
        self.storage = storage

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35's, with queueing hints on: a WaitForFirstConsumer StorageClass added, a node
        added or relabelled, one of the pod's claims added or updated (bound to a volume, say), a
        volume added or its topology labels changed."""
        return [
            *ce.events(self.is_schedulable_after_storage_class_added, STORAGE_CLASS_ADD),
            *ce.events(None, ce.NODE_ADD, ce.NODE_LABEL_CHANGE),
            *ce.events(self.is_schedulable_after_persistent_volume_claim_change, PVC_ADD, PVC_UPDATE),
            *ce.events(self.is_schedulable_after_persistent_volume_change, PV_ADD, PV_UPDATE),
        ]

    @staticmethod
    def is_schedulable_after_persistent_volume_claim_change(pod: Object, old: Object | None,
                                                              new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPersistentVolumeClaimChange: a claim the pod names (not a generic
        ephemeral volume's), in its namespace."""
        if new is None or namespace_of(new) != namespace_of(pod):
            return ce.QUEUE_SKIP
        wanted = name_of(new)
        named = any((v.get("persistentVolumeClaim") or {}).get("claimName") == wanted
                    for v in (pod.get("spec") or {}).get("volumes") or [] if v.get("persistentVolumeClaim") is not None)
        return ce.QUEUE if named else ce.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_storage_class_added(pod: Object, old: Object | None,
                                                 new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterStorageClassAdded: only a WaitForFirstConsumer class can help
        (an unbound claim of an Immediate class stops the pod until it is bound)."""
        assert new is not None
        return ce.QUEUE if new.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER else ce.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_persistent_volume_change(pod: Object, old: Object | None,
                                                      new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPersistentVolumeChange: a new volume, or a change of a volume's
        zone or region labels."""
        if old is None:
            return ce.QUEUE
        assert new is not None
        return ce.QUEUE if pv_topologies(old) != pv_topologies(new) else ce.QUEUE_SKIP

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        if not has_claims(pod):
            return None, Status.skip(NAME)  # no claim, no volume to take a zone from
        constraints, status = topologies(pod.pod, pod.namespace, self.storage)
        if not status.is_success:
            return None, status
        if not constraints:
            return None, Status.skip(NAME)
        state.write(_STATE_KEY, constraints)
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        try:
            constraints: tuple[Topology, ...] = state.read(_STATE_KEY)
        except KeyError:  # a filter-only run (preemption's what-ifs): compute what PreFilter would
            constraints, status = topologies(pod.pod, pod.namespace, self.storage)
            if not status.is_success:
                return FilterResult.fail_where(np.ones(n, np.bool_), status.message(), status.code)
        constrained = np.zeros(n, np.bool_)
        for key in TOPOLOGY_LABELS:
            constrained |= _has(nodes, key)
        ok = np.ones(n, np.bool_)
        for t in constraints:
            here = _has(nodes, t.key)
            # the label itself where the node has it, else its GA name (translateToGALabel)
            match = np.where(here, _value_in(nodes, t.key, t.values), _value_in(nodes, _GA.get(t.key, t.key), t.values))
            ok &= match
        failed = constrained & ~ok
        if not failed.any():
            return FilterResult.all_pass(n)
        return FilterResult.fail_where(failed, REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: Mapping[str, Any] | None, handle: Handle | None, storage: StorageLister | None = None) -> VolumeZone:
    return VolumeZone(storage_from(handle, storage))
