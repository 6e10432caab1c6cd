"""The PersistentVolume rules that the PV controller and the scheduler's VolumeBinding share, as
k8s.io/component-helpers/storage/volume states them: which class a claim asks for, whether a
volume is bound to a claim, whether a volume's node affinity admits a node, and which available
volume best fits a claim (FindMatchingVolume: the smallest that fits).

They live below both users: the embedded cluster's PV controller (minisched.cluster.embedded.volumes)
and the VolumeBinding plugin (minisched.scheduler.plugins.volume_binding) call the same functions,
so the two cannot disagree on what "matches" means.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from minisched.errors import BadRequest
from minisched.quantity import value
from minisched.selectors import (
    DOES_NOT_EXIST,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_IN,
    Requirement,
    from_label_selector_json,
)

Object = dict[str, Any]

# annotations (component-helpers/storage/volume/helpers.go)
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
# a class whose volumes are made by hand (local volumes): nothing provisions it
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

_NODE_SELECTOR_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST,
                            "Gt": GREATER_THAN, "Lt": LESS_THAN}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def claim_class(pvc: Mapping[str, Any]) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation wins over the field."""
    annotations = annotations_of(pvc)
    if BETA_CLASS_ANNOTATION in annotations:
        return str(annotations[BETA_CLASS_ANNOTATION])
    return str((pvc.get("spec") or {}).get("storageClassName") or "")


def volume_class(pv: Mapping[str, Any]) -> str:
    """GetPersistentVolumeClass: the beta annotation wins over the field."""
    annotations = annotations_of(pv)
    if BETA_CLASS_ANNOTATION in annotations:
        return str(annotations[BETA_CLASS_ANNOTATION])
    return str((pv.get("spec") or {}).get("storageClassName") or "")


def fully_bound(pvc: Mapping[str, Any]) -> bool:
    """Bound by the PV controller: a volume name and the bind-completed annotation."""
    return bool((pvc.get("spec") or {}).get("volumeName")) and BIND_COMPLETED in annotations_of(pvc)


def claim_key(pvc: Mapping[str, Any]) -> str:
    meta = pvc.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def claim_ref(pvc: Mapping[str, Any]) -> Object:
    """reference.GetReference for a claim: what a volume's spec.claimRef holds once bound."""
    meta = pvc.get("metadata") or {}
    ref: Object = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": meta.get("namespace") or "",
                   "name": meta.get("name") or "", "uid": meta.get("uid") or ""}
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


def is_volume_bound_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> bool:
    """IsVolumeBoundToClaim: the claimRef names the claim (and its uid, if the ref has one)."""
    ref = (pv.get("spec") or {}).get("claimRef")
    if not ref:
        return False
    meta = pvc.get("metadata") or {}
    if ref.get("name") != meta.get("name") or (ref.get("namespace") or "") != (meta.get("namespace") or ""):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def bind_volume_to_claim(pv: Object, pvc: Mapping[str, Any]) -> tuple[Object, bool]:
    """GetBindVolumeToClaim: a copy of `pv` whose claimRef names `pvc` (with its uid), marked
    bound-by-controller when it was not pre-bound; and whether anything changed."""
    should_mark = not is_volume_bound_to_claim(pv, pvc)
    new = copy.deepcopy(pv)
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    meta = pvc.get("metadata") or {}
    dirty = False
    if (ref.get("name") != meta.get("name") or (ref.get("namespace") or "") != (meta.get("namespace") or "")
            or (ref.get("uid") or "") != (meta.get("uid") or "")):
        new.setdefault("spec", {})["claimRef"] = claim_ref(pvc)
        dirty = True
    annotations = new.setdefault("metadata", {}).setdefault("annotations", {})
    if should_mark and BOUND_BY_CONTROLLER not in annotations:
        annotations[BOUND_BY_CONTROLLER] = "yes"
        dirty = True
    return new, dirty


def storage_of(quantities: Mapping[str, Any] | None) -> int:
    """The `storage` entry of a requests/capacity map in bytes (0 when absent)."""
    text = (quantities or {}).get("storage")
    return value(text) if text is not None else 0


def requested_storage(pvc: Mapping[str, Any]) -> int:
    return storage_of(((pvc.get("spec") or {}).get("resources") or {}).get("requests"))


def _node_selector_requirement(expr: Mapping[str, Any]) -> Requirement:
    op = _NODE_SELECTOR_OPERATORS.get(str(expr.get("operator") or ""))
    if op is None:
        raise BadRequest(f"{expr.get('operator')!r} is not a valid node selector operator")
    values = tuple(str(v) for v in expr.get("values") or ())
    if op in (GREATER_THAN, LESS_THAN) and len(values) != 1:
        raise BadRequest(f"operator {expr.get('operator')} needs exactly one value")
    return Requirement(str(expr.get("key") or ""), op, values)


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches nothing
    try:
        if not all(_node_selector_requirement(e).matches(labels) for e in exprs):
            return False
        # metadata.name is the one field a node selector may name
        return all(_node_selector_requirement(f).matches({str(f.get("key") or ""): name}) for f in fields)
    except BadRequest:
        return False  # NodeSelectorRequirementsAsSelector failed: the term selects nothing


def node_affinity_matches(pv: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """volume.CheckNodeAffinity: does the volume's required node affinity admit a node with these
    labels? (The node is built from labels alone, so a matchFields term sees the name "".)"""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if required is None:
        return True
    return any(_term_matches(t, labels, "") for t in required.get("nodeSelectorTerms") or [])


def topology_matches(allowed_topologies: Iterable[Mapping[str, Any]] | None, labels: Mapping[str, str]) -> bool:
    """v1helper.MatchTopologySelectorTerms: no terms allow every node; else one term must hold,
    each of its expressions naming a label the node has, with one of the values."""
    terms = list(allowed_topologies or [])
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchLabelExpressions") or []
        if exprs and all(labels.get(str(e.get("key"))) in {str(v) for v in e.get("values") or ()} for e in exprs):
            return True
    return False


def access_modes_fit(pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> bool:
    """CheckAccessModes: the volume offers every mode the claim asks for."""
    offered = set((pv.get("spec") or {}).get("accessModes") or ())
    return all(m in offered for m in (pvc.get("spec") or {}).get("accessModes") or ())


def volume_mode_mismatch(pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> bool:
    """CheckVolumeModeMismatches (both default to Filesystem)."""
    return (((pvc.get("spec") or {}).get("volumeMode") or "Filesystem")
            != ((pv.get("spec") or {}).get("volumeMode") or "Filesystem"))


def find_matching_volume(pvc: Mapping[str, Any], volumes: Iterable[Object], labels: Mapping[str, str] | None,
                         excluded: Iterable[str] = (), *, delay_binding: bool) -> Object | None:
    """FindMatchingVolume: a volume pre-bound to the claim (None if its node affinity rejects the
    node), else the smallest Available volume of the claim's class that has the capacity, access
    and volume modes, labels (the claim's selector) and node affinity (`labels` of the node; None:
    no node, as the PV controller asks) the claim needs. With `delay_binding` and no node, only
    pre-bound volumes count: the scheduler picks the others once it has chosen a node.

    Not checked: volumeAttributesClassName (minisched does not model VolumeAttributesClasses)."""
    excluded = set(excluded)
    spec = pvc.get("spec") or {}
    requested = requested_storage(pvc)
    wanted_class = claim_class(pvc)
    selector = from_label_selector_json(spec["selector"]) if spec.get("selector") is not None else None
    best: Object | None = None
    best_size = 0
    for pv in volumes:
        meta = pv.get("metadata") or {}
        if meta.get("name") in excluded:
            continue
        pv_spec = pv.get("spec") or {}
        if pv_spec.get("claimRef") and not is_volume_bound_to_claim(pv, pvc):
            continue
        size = storage_of(pv_spec.get("capacity"))
        if size < requested or volume_mode_mismatch(pvc, pv) or meta.get("deletionTimestamp"):
            continue
        affinity_ok = labels is None or node_affinity_matches(pv, labels)
        if is_volume_bound_to_claim(pv, pvc):
            return pv if affinity_ok else None
        if labels is None and delay_binding:
            continue
        if (pv.get("status") or {}).get("phase") != "Available":
            continue
        if selector is not None and not selector.matches(meta.get("labels") or {}):
            continue
        if volume_class(pv) != wanted_class or not affinity_ok:
            continue
        if labels is not None and not access_modes_fit(pvc, pv):
            continue
        if best is None or best_size > size:
            best, best_size = pv, size
    return best
