"""A stand-in for kube-controller-manager's PersistentVolume controller, and an opt-in fake
external provisioner: what the embedded cluster lacks for volumes to bind.

Nothing in the embedded cluster binds volumes: a new PersistentVolume stays Pending and a claim
stays unbound, where kind's (and any cluster's) kube-controller-manager would bind them. The
scheduler's delayed binding (VolumeBinding's PreBind) relies on that controller: it writes a
volume's claimRef, or a claim's `volume.kubernetes.io/selected-node`, and waits for the claim to be
bound. `PersistentVolumeController(cluster)` does the part of the PV controller
(pkg/controller/volume/persistentvolume, syncVolume and syncUnboundClaim) that this needs:

- a volume without a claimRef, or pre-bound to a claim not bound yet, becomes Available;
- a volume whose claim is gone becomes Released (the reclaim policy is not carried out);
- an unbound claim gets a volume: one pre-bound to it (a claimRef naming it, which is what the
  scheduler writes), or else, unless its class is WaitForFirstConsumer, the smallest Available
  volume that fits (FindMatchingVolume, shared with the scheduler in minisched.volumes). Binding sets the volume's claimRef and phase Bound, the claim's
  spec.volumeName, its bind-completed annotation and phase Bound, as the controller does;
- a claim with nothing to bind to (of a WaitForFirstConsumer class: once the scheduler has selected
  its node), of a class whose provisioner is external (not `kubernetes.io/...`), is handed to that
  provisioner: the controller annotates it with
  `volume.kubernetes.io/storage-provisioner` (and the beta key) and waits, as kube's does.

Not done: the reclaim policy (deleting or recycling a Released volume), in-tree provisioners, events,
volume-mode and attributes-class rules beyond matching. On a real cluster kube-controller-manager
does all of this; run this only on one without it.

`FakeProvisioner(name)`, given to the controller, plays an external provisioner for the classes
whose `provisioner` is `name`, and only those (every other class is provisioned by no one, as on a
cluster without that provisioner): for a claim handed to it (and, for a WaitForFirstConsumer class,
once the scheduler has selected a node) it creates the volume `pvc-<claim uid>`, pre-bound to the
claim, of the claim's size and class, with node affinity to the selected node (a node-local volume,
as kind's local-path provisioner makes). Tests and chapters name a class for it.

Like the Kubelet stand-in it uses only the Cluster API. `sync()` runs one pass; `start()` runs passes
on a thread until `stop()`, as the controller would run alongside the scheduler.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from minisched.clock import RealClock, rfc3339
from minisched.cluster.base import Cluster
from minisched.errors import AlreadyExists, Conflict, NotFound
from minisched.resources import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES
from minisched.volumes import (
    BETA_STORAGE_PROVISIONER,
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    PROVISIONED_BY,
    SELECTED_NODE,
    STORAGE_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    access_modes_fit,
    annotations_of,
    claim_class,
    claim_key,
    claim_ref,
    find_matching_volume,
    is_volume_bound_to_claim,
)

Object = dict[str, Any]
log = logging.getLogger("minisched.cluster.embedded.volumes")

FAKE_PROVISIONER = "minisched.dev/fake-provisioner"
HOSTNAME_LABEL = "kubernetes.io/hostname"


class FakeProvisioner:
    """An external provisioner for the classes whose `provisioner` is `name` (see the module)."""

    def __init__(self, name: str = FAKE_PROVISIONER) -> None:
        if not name or name.startswith("kubernetes.io/"):
            raise ValueError(f"a fake external provisioner needs a name outside kubernetes.io/, got {name!r}")
        self.name = name

    def volume_for(self, claim: Object, storage_class: Object) -> Object | None:
        """The volume to create for `claim`, or None while it must wait (a delayed class whose claim
        has no selected node yet)."""
        meta = claim["metadata"]
        node = annotations_of(claim).get(SELECTED_NODE)
        if storage_class.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER and not node:
            return None
        spec = claim.get("spec") or {}
        volume: Object = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"pvc-{meta['uid']}", "annotations": {PROVISIONED_BY: self.name}},
            "spec": {
                "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")},
                "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "storageClassName": storage_class["metadata"]["name"],
                "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
                "claimRef": claim_ref(claim),
                "hostPath": {"path": f"/var/minisched/volumes/pvc-{meta['uid']}"},
            },
        }
        if node:
            volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]}]}}
        return volume


class PersistentVolumeController:
    """The PV controller's binding, for a cluster that has none (see the module)."""

    def __init__(self, cluster: Cluster, *, provisioners: Iterable[FakeProvisioner] = (),
                 interval: float = 0.05) -> None:
        self.cluster = cluster
        self.provisioners = {p.name: p for p in provisioners}
        self.interval = interval
        self.clock = getattr(cluster, "clock", None) or RealClock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- running ------------------------------------------------------------------------------------

    def start(self) -> PersistentVolumeController:
        if self._thread is not None:
            raise RuntimeError("this PersistentVolumeController is running already")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="pv-controller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> PersistentVolumeController:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception:  # the next pass tries again, as the controller's resync would
                log.exception("PV controller pass failed")
            self._stop.wait(self.interval)

    # --- one pass ---------------------------------------------------------------------------------

    def sync(self) -> dict[str, int]:
        """One pass over every volume and claim. Returns how many were bound, made Available,
        Released, handed to a provisioner and provisioned."""
        counts = {"bound": 0, "available": 0, "released": 0, "handed": 0, "provisioned": 0}
        volumes = {v["metadata"]["name"]: v for v in self.cluster.list(PERSISTENT_VOLUMES)["items"]}
        claims = {claim_key(c): c for c in self.cluster.list(PERSISTENT_VOLUME_CLAIMS)["items"]}
        classes = {c["metadata"]["name"]: c for c in self.cluster.list(STORAGE_CLASSES)["items"]}
        for pv in volumes.values():
            with contextlib.suppress(NotFound, Conflict):  # changed under us: the next pass sees it
                self._sync_volume(pv, claims, counts)
        volumes = {v["metadata"]["name"]: v for v in self.cluster.list(PERSISTENT_VOLUMES)["items"]}
        for pvc in claims.values():
            with contextlib.suppress(NotFound, Conflict, AlreadyExists):
                self._sync_claim(pvc, volumes, classes, counts)
        return counts

    def _sync_volume(self, pv: Object, claims: Mapping[str, Object], counts: dict[str, int]) -> None:
        ref = (pv.get("spec") or {}).get("claimRef")
        phase = (pv.get("status") or {}).get("phase")
        if not ref or not ref.get("uid"):  # free, or pre-bound to a claim the claim sync will bind
            if phase != "Available":
                self._volume_phase(pv, "Available")
                counts["available"] += 1
            return
        claim = claims.get(f"{ref.get('namespace') or ''}/{ref.get('name') or ''}")
        if claim is None or claim["metadata"].get("uid") != ref.get("uid"):
            if phase != "Released":
                self._volume_phase(pv, "Released")
                counts["released"] += 1
            return
        if (claim.get("spec") or {}).get("volumeName") == pv["metadata"]["name"] and phase != "Bound":
            self._volume_phase(pv, "Bound")

    def _sync_claim(self, pvc: Object, volumes: Mapping[str, Object], classes: Mapping[str, Object],
                    counts: dict[str, int]) -> None:
        if BIND_COMPLETED in annotations_of(pvc) and (pvc.get("status") or {}).get("phase") == "Bound":
            return
        if (pvc.get("metadata") or {}).get("deletionTimestamp"):
            return
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        if volume_name:  # pre-bound claim (or a binding half done): bind to that volume if it is free
            pv = volumes.get(volume_name)
            if pv is not None and (not (pv.get("spec") or {}).get("claimRef") or is_volume_bound_to_claim(pv, pvc)):
                self._bind(pv, pvc)
                counts["bound"] += 1
            return
        class_name = claim_class(pvc)
        sc = classes.get(class_name) if class_name else None
        # a delayed class: only a volume pre-bound to the claim (by the scheduler, or by hand) is
        # bound here, even once a node is selected; then the claim goes to its provisioner
        delayed = sc is not None and sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER
        fitting = [v for v in volumes.values() if access_modes_fit(pvc, v)]
        pv = find_matching_volume(pvc, fitting, None, delay_binding=delayed)
        if pv is not None:
            self._bind(pv, pvc)
            counts["bound"] += 1
            return
        if (delayed and SELECTED_NODE not in annotations_of(pvc)) or sc is None or not class_name:
            return  # waits for its first consumer, or for a volume made by hand
        provisioner = str(sc.get("provisioner") or "")
        if not provisioner or provisioner.startswith("kubernetes.io/"):
            return  # no in-tree provisioner here (kube: a ProvisioningFailed event, retried)
        annotations = annotations_of(pvc)
        if annotations.get(STORAGE_PROVISIONER) != provisioner:
            pvc = self.cluster.patch(PERSISTENT_VOLUME_CLAIMS, pvc["metadata"]["name"], {"metadata": {"annotations": {
                STORAGE_PROVISIONER: provisioner, BETA_STORAGE_PROVISIONER: provisioner}}},
                pvc["metadata"]["namespace"])
            counts["handed"] += 1
        fake = self.provisioners.get(provisioner)
        if fake is None:
            return  # an external provisioner this cluster does not run: the claim stays Pending
        volume = fake.volume_for(pvc, sc)
        if volume is not None:
            self.cluster.create(PERSISTENT_VOLUMES, volume)
            counts["provisioned"] += 1

    # --- writes -------------------------------------------------------------------------------------

    def _bind(self, pv: Object, pvc: Object) -> None:
        """bindVolumeToClaim, then bindClaimToVolume, then both phases Bound (the controller's order)."""
        meta, pv_name = pvc["metadata"], pv["metadata"]["name"]
        if not is_volume_bound_to_claim(pv, pvc) or not ((pv.get("spec") or {}).get("claimRef") or {}).get("uid"):
            patch: Object = {"spec": {"claimRef": claim_ref(pvc)}}
            if not is_volume_bound_to_claim(pv, pvc):
                patch["metadata"] = {"annotations": {BOUND_BY_CONTROLLER: "yes"}}
            pv = self.cluster.patch(PERSISTENT_VOLUMES, pv_name, patch)
        if (pv.get("status") or {}).get("phase") != "Bound":
            self._volume_phase(pv, "Bound")
        annotations = {BIND_COMPLETED: "yes"}
        if not (pvc.get("spec") or {}).get("volumeName"):
            annotations[BOUND_BY_CONTROLLER] = "yes"
        self.cluster.patch(PERSISTENT_VOLUME_CLAIMS, meta["name"],
                           {"spec": {"volumeName": pv_name}, "metadata": {"annotations": annotations}},
                           meta["namespace"])
        pv_spec = pv.get("spec") or {}
        self.cluster.patch(PERSISTENT_VOLUME_CLAIMS, meta["name"], {"status": {
            "phase": "Bound", "accessModes": list(pv_spec.get("accessModes") or ()),
            "capacity": dict(pv_spec.get("capacity") or {})}}, meta["namespace"], subresource="status")

    def _volume_phase(self, pv: Object, phase: str) -> None:
        self.cluster.patch(PERSISTENT_VOLUMES, pv["metadata"]["name"], {"status": {
            "phase": phase, "lastPhaseTransitionTime": rfc3339(self.clock.now())}}, subresource="status")
