"""VolumeBinding (PreFilter, Filter, Reserve, PreBind): a pod's PersistentVolumeClaims must exist
and be bound, or be bindable on the node: kube's delayed volume binding
(pkg/scheduler/framework/plugins/volumebinding, binder.go).

PreFilter sorts the pod's claims as kube's GetPodVolumeClaims does. A missing claim, a lost one or
one being deleted makes the pod unschedulable everywhere (UnschedulableAndUnresolvable, the
lister's message); an unbound claim whose class binds Immediately (or a claim pre-bound to a volume
the PV controller has not confirmed) waits for the PV controller ("pod has unbound immediate
PersistentVolumeClaims"). An unbound claim whose class is WaitForFirstConsumer is left to the
scheduler: it is bound once a node is chosen.

Filter, for each node: a bound claim's volume must admit the node ("node(s) didn't match
PersistentVolume's node affinity"; a volume that does not exist: "node(s) unavailable due to one or
more pvc(s) bound to non-existent pv(s)"). A delayed claim needs, on this node, an Available volume
of its class that fits it (FindMatchingVolume: capacity, access and volume modes, the claim's
selector, the volume's node affinity; the smallest that fits; two claims of one pod never share
one), or else a class whose provisioner can provision there (not `kubernetes.io/no-provisioner`,
and the node inside the class's allowedTopologies); otherwise "node(s) didn't find available
persistent volumes to bind". A claim that already carries `volume.kubernetes.io/selected-node`
(provisioning under way) fits only that node.

Reserve assumes the chosen node's bindings in an assume cache over the informers (kube's
AssumeCache): the volume's claimRef, the claim's selected-node annotation, as they will be written.
A second pod scheduled before the informers see the writes therefore cannot take the same volume.
Unreserve reverts them. PreBind writes them (PV: spec.claimRef, as kube's binder does; the PV
controller then binds both sides. Claim to provision: the selected-node annotation, which the
external provisioner waits for) and waits, up to bindTimeoutSeconds (kube's default 600), until
every claim is bound; a timeout fails the pod with kube's "binding volumes: context deadline
exceeded", and naming the claims still unbound.

Left out, on purpose: storage capacity (CSIStorageCapacity) checks and capacity scoring, in-tree to
CSI translation of PVs, volumeAttributesClass matching, and the check that an ephemeral volume's
claim is owned by the pod, and PreBind's early failure when the pod was deleted meanwhile (the
wait then runs to its timeout). Where kube polls its caches every second in PreBind, minisched polls every
0.1 s (reading informer caches costs nothing; the wait ends sooner).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.errors import ApiError
from minisched.resources import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES
from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cluster_event import NODE_ADD, NODE_LABEL_CHANGE
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle, PreFilterResult
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import (
    NodeSelectorTerm,
    PodInfo,
    PodSpecError,
    parse_node_selector_term,
)
from minisched.scheduler.plugins.node_affinity import requirement_mask
from minisched.scheduler.plugins.storage import (
    CSI_NODE_ADD,
    CSI_NODE_UPDATE,
    PV_ADD,
    PV_UPDATE,
    PVC_ADD,
    PVC_UPDATE,
    STORAGE_CLASS_ADD,
    STORAGE_CLASS_UPDATE,
    WAIT_FOR_FIRST_CONSUMER,
    StaticStorage,
    StorageLister,
    claim_class,
    claim_volumes,
    fully_bound,
    has_claims,
    name_of,
    namespace_of,
    not_found,
    storage_from,
)
from minisched.scheduler.snapshot import NodeTable
from minisched.selectors import from_label_selector_json
from minisched.volumes import (
    NOT_SUPPORTED_PROVISIONER,
    SELECTED_NODE,
    access_modes_fit,
    bind_volume_to_claim,
    claim_key,
    is_volume_bound_to_claim,
    node_affinity_matches,
    requested_storage,
    storage_of,
    topology_matches,
    volume_class,
    volume_mode_mismatch,
)

NAME = "VolumeBinding"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
# the reason bits of Filter's result, in the order kube appends its reasons
_REASONS = (NODE_CONFLICT, BIND_CONFLICT, PV_NOT_EXIST)
_NODE_CONFLICT_BIT, _BIND_CONFLICT_BIT, _PV_NOT_EXIST_BIT = 1, 2, 4
DEFAULT_BIND_TIMEOUT_SECONDS = 600
POLL_INTERVAL = 0.1  # seconds between two checks of the claims in PreBind
_STATE_KEY = "PreFilter" + NAME

MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"  # v1.MigratedPluginsAnnotationKey

Object = dict[str, Any]
BoolArray = npt.NDArray[np.bool_]


@dataclass
class PodVolumes:
    """What the pod needs done on one node (kube's PodVolumes): volumes to bind to claims, and
    claims to provision. After Reserve these are the assumed objects, as PreBind will write them."""

    labels: Mapping[str, str]
    static_bindings: list[tuple[Object, Object]] = field(default_factory=list)  # (claim, volume)
    dynamic_provisions: list[Object] = field(default_factory=list)  # claims


@dataclass
class _Claims:
    """What PreFilter found (kube's stateData): each bound claim's volume (None: missing), the
    unbound delayed claims, the volumes of their classes, and what Filter found per node."""

    volumes: tuple[tuple[str, Object | None], ...]
    delayed: tuple[Object, ...] = ()
    candidates: Mapping[str, tuple[Object, ...]] = field(default_factory=dict)  # class -> volumes
    storage: StorageLister = field(default_factory=StaticStorage)  # what classes are looked up in
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class AssumeCache:
    """kube's (passive) AssumeCache: a lister whose volumes and claims may be overlaid by assumed
    copies, written in Reserve before the API server has them. An assumed copy keeps the
    resourceVersion of the object it was made from; once the informer holds a newer version (the
    write, or anyone else's) that version wins and the assumption is dropped."""

    def __init__(self, storage: StorageLister) -> None:
        self.storage = storage
        self._lock = threading.Lock()
        self._volumes: dict[str, Object] = {}
        self._claims: dict[str, Object] = {}

    def volume(self, name: str) -> Object | None:
        return self._latest(self._volumes, name, self.storage.volume(name))

    def claim(self, namespace: str, name: str) -> Object | None:
        return self._latest(self._claims, f"{namespace}/{name}", self.storage.claim(namespace, name))

    def volumes(self) -> list[Object]:
        out = []
        for pv in self.storage.volumes():
            latest = self.volume(pv["metadata"]["name"])
            if latest is not None:
                out.append(latest)
        return out

    def storage_class(self, name: str) -> Object | None:
        return self.storage.storage_class(name)

    def csi_node(self, name: str) -> Object | None:
        return self.storage.csi_node(name)

    def _latest(self, assumed: dict[str, Object], key: str, api: Object | None) -> Object | None:
        with self._lock:
            mine = assumed.get(key)
            if mine is None:
                return api
            if api is None or _version(api) > _version(mine):
                del assumed[key]
                return api
            return mine

    def assume_volume(self, pv: Object) -> None:
        self._assume(self._volumes, pv["metadata"]["name"], pv, self.volume(pv["metadata"]["name"]),
                     "PersistentVolume")

    def assume_claim(self, pvc: Object) -> None:
        meta = pvc["metadata"]
        self._assume(self._claims, claim_key(pvc), pvc, self.claim(meta.get("namespace") or "", meta["name"]),
                     "PersistentVolumeClaim")

    def _assume(self, assumed: dict[str, Object], key: str, obj: Object, stored: Object | None, kind: str) -> None:
        if stored is None:
            raise LookupError(f'{kind} "{key}" not found')
        if _version(obj) < _version(stored):
            raise RuntimeError(f'{kind} "{key}" is out of sync (stored: {_version(stored)}, '
                               f"assume: {_version(obj)})")
        with self._lock:
            assumed[key] = obj

    def restore_volume(self, name: str) -> None:
        with self._lock:
            self._volumes.pop(name, None)

    def restore_claim(self, key: str) -> None:
        with self._lock:
            self._claims.pop(key, None)


def _version(obj: Mapping[str, Any]) -> int:
    text = (obj.get("metadata") or {}).get("resourceVersion") or "0"
    try:
        return int(text)
    except ValueError:
        return 0


def classify(pod: Object, namespace: str, storage: StorageLister) -> tuple[_Claims | None, Status]:
    """podHasPVCs + GetPodVolumeClaims: the bound claims' volumes and the delayed claims, or why the
    pod cannot go anywhere."""
    bound: list[tuple[str, Object | None]] = []
    delayed: list[Object] = []
    found_any = False
    immediate = False
    for name, ephemeral in claim_volumes(pod):
        found_any = True
        pvc = storage.claim(namespace, name)
        if pvc is None:
            why = (f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                   if ephemeral else not_found("persistentvolumeclaim", name))
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (why,), NAME)
        volume_name = str((pvc.get("spec") or {}).get("volumeName") or "")
        if (pvc.get("status") or {}).get("phase") == "Lost":
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (
                f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{volume_name}"',), NAME)
        if (pvc.get("metadata") or {}).get("deletionTimestamp"):
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (
                f'persistentvolumeclaim "{name}" is being deleted',), NAME)
        if fully_bound(pvc):
            bound.append((volume_name, storage.volume(volume_name)))
            continue
        class_name = claim_class(pvc)
        sc = storage.storage_class(class_name) if class_name else None
        # (a class without volumeBindingMode, only ever hand-made: the API server defaults it to Immediate)
        if sc is not None and sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER and not volume_name:
            delayed.append(pvc)
        else:
            immediate = True
    if not found_any:
        return None, Status.skip(NAME)
    if immediate:
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (UNBOUND_IMMEDIATE,), NAME)
    candidates: dict[str, tuple[Object, ...]] = {}
    for pvc in delayed:
        class_name = claim_class(pvc)
        if class_name not in candidates:
            candidates[class_name] = tuple(v for v in storage.volumes() if volume_class(v) == class_name)
    return _Claims(tuple(bound), tuple(delayed), candidates, storage), Status.success()


def volume_terms(pv: Object) -> tuple[NodeSelectorTerm, ...] | None:
    """The required node affinity of a PersistentVolume (None: any node will do)."""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if required is None:
        return None
    terms = required.get("nodeSelectorTerms") or []
    name = pv["metadata"]["name"]
    return tuple(parse_node_selector_term(t, f"persistentvolume {name}: spec.nodeAffinity.required."
                                             f"nodeSelectorTerms[{i}]") for i, t in enumerate(terms))


def _fields_match_no_name(term: NodeSelectorTerm) -> bool:
    # volume.CheckNodeAffinity matches a node built from labels alone: its name is ""
    return all(r.matches({r.key: ""}) for r in term.fields)


def node_matches(pv: Object, labels: Mapping[str, str]) -> bool:
    """The pure rule for one node (volume.CheckNodeAffinity)."""
    terms = volume_terms(pv)
    if terms is None:
        return True
    return any(not t.is_empty and all(r.matches(labels) for r in t.expressions) and _fields_match_no_name(t)
               for t in terms)


def node_mask(pv: Object, nodes: NodeTable) -> BoolArray:
    terms = volume_terms(pv)
    n = len(nodes)
    if terms is None:
        return np.ones(n, np.bool_)
    mask = np.zeros(n, np.bool_)
    for t in terms:
        if t.is_empty or not _fields_match_no_name(t):
            continue
        term = np.ones(n, np.bool_)
        for r in t.expressions:
            term &= requirement_mask(nodes, r)
        mask |= term
    return mask


def fits(claims: _Claims, labels: Mapping[str, str]) -> tuple[str, ...]:
    """checkBoundClaims for one node: () if it fits, else its one reason."""
    for _, pv in claims.volumes:
        if pv is None:
            return (PV_NOT_EXIST,)
        if not node_matches(pv, labels):
            return (NODE_CONFLICT,)
    return ()


@dataclass
class _Candidates:
    """One delayed claim's volumes after FindMatchingVolume's node-independent checks, with each
    volume's node affinity over the rows, computed once per Filter call (not once per node)."""

    claim: Object
    prebound: Object | None  # the first volume already bound to the claim: it alone decides
    prebound_rows: BoolArray | None
    volumes: list[Object]  # Available volumes that fit the claim, smallest first (ties: list order)
    rows: BoolArray  # [volume, row]: the volume's node affinity admits the row


def _affinity_rows(pv: Object, nodes: NodeTable) -> BoolArray:
    try:
        return node_mask(pv, nodes)
    except PodSpecError:  # CheckNodeAffinity fails on a malformed term: the volume fits no node
        return np.zeros(len(nodes), np.bool_)


def _candidates(pvc: Object, volumes: Sequence[Object], nodes: NodeTable) -> _Candidates:
    """FindMatchingVolume's checks that do not depend on the node, in its order."""
    requested = requested_storage(pvc)
    spec = pvc.get("spec") or {}
    selector = from_label_selector_json(spec["selector"]) if spec.get("selector") is not None else None
    wanted_class = claim_class(pvc)
    fitting: list[tuple[int, Object]] = []
    for pv in volumes:
        meta, pv_spec = pv.get("metadata") or {}, pv.get("spec") or {}
        if pv_spec.get("claimRef") and not is_volume_bound_to_claim(pv, pvc):
            continue
        size = storage_of(pv_spec.get("capacity"))
        if size < requested or volume_mode_mismatch(pvc, pv) or meta.get("deletionTimestamp"):
            continue
        if is_volume_bound_to_claim(pv, pvc):  # kube returns at it, whatever the node says
            return _Candidates(pvc, pv, _affinity_rows(pv, nodes), [], np.zeros((0, len(nodes)), np.bool_))
        if (pv.get("status") or {}).get("phase") != "Available":
            continue
        if selector is not None and not selector.matches(meta.get("labels") or {}):
            continue
        if volume_class(pv) != wanted_class or not access_modes_fit(pvc, pv):
            continue
        fitting.append((size, pv))
    fitting.sort(key=lambda sv: sv[0])  # stable: equal sizes keep the list's order, as kube's strict <
    ordered = [pv for _, pv in fitting]
    rows = (np.stack([_affinity_rows(pv, nodes) for pv in ordered]) if ordered
            else np.zeros((0, len(nodes)), np.bool_))
    return _Candidates(pvc, None, None, ordered, rows)


def find_pod_volumes(claims: _Claims, nodes: NodeTable) -> tuple[BoolArray, dict[int, PodVolumes]]:
    """FindPodVolumes for the delayed claims on every row: whether they can be satisfied there
    (else kube's ErrReasonBindConflict), and what to bind and provision on the rows where they can."""
    n = len(nodes)
    names = nodes.names
    selected: list[tuple[Object, str]] = []
    to_match: list[Object] = []
    for pvc in claims.delayed:
        node = ((pvc.get("metadata") or {}).get("annotations") or {}).get(SELECTED_NODE)
        if node is not None:  # provisioning already asked for on a node: only that one will do
            selected.append((pvc, node))
        else:
            to_match.append(pvc)
    candidates = [_candidates(pvc, claims.candidates.get(claim_class(pvc), ()), nodes)
                  for pvc in sorted(to_match, key=requested_storage)]  # smallest claims choose first
    ok = np.zeros(n, np.bool_)
    found: dict[int, PodVolumes] = {}
    for row in range(n):
        if any(node != names[row] for _, node in selected):
            continue
        volumes = PodVolumes({})
        to_provision = [pvc for pvc, _ in selected]
        chosen: set[str] = set()
        for cand in candidates:
            if cand.prebound is not None:
                pv: Object | None = cand.prebound if cand.prebound_rows is not None and cand.prebound_rows[row] else None
            else:
                pv = next((cand.volumes[i] for i in np.flatnonzero(cand.rows[:, row])
                           if cand.volumes[i]["metadata"]["name"] not in chosen), None)
            if pv is None:
                to_provision.append(cand.claim)
                continue
            chosen.add(pv["metadata"]["name"])
            volumes.static_bindings.append((cand.claim, pv))
        if to_provision and not _provisionable(to_provision, nodes, row, claims.storage):
            continue
        volumes.dynamic_provisions = to_provision
        volumes.labels = nodes.labels_at(row)
        ok[row] = True
        found[row] = volumes
    return ok, found


def _provisionable(pvcs: Sequence[Object], nodes: NodeTable, row: int, storage: StorageLister) -> bool:
    """checkVolumeProvisions: each claim's class has a provisioner that can provision on the row."""
    for pvc in pvcs:
        class_name = claim_class(pvc)
        if not class_name:
            raise ValueError(f'no class for claim "{claim_key(pvc)}"')
        sc = storage.storage_class(class_name)
        if sc is None:
            raise ValueError(f'failed to find storage class "{class_name}"')
        provisioner = str(sc.get("provisioner") or "")
        if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
            return False
        if sc.get("allowedTopologies") and not topology_matches(sc["allowedTopologies"], nodes.labels_at(row)):
            return False
    return True


class VolumeBinding:
    name = NAME
    reads_pods = False
    # Verdicts follow PVC/PV objects the node table does not version: never reuse them.
    reads_other_nodes = True

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        return [(signature.VOLUMES, signature.volumes_signer(pod))], Status.success()

    def __init__(self, storage: StorageLister, handle: Handle | None = None,
                 bind_timeout: float = DEFAULT_BIND_TIMEOUT_SECONDS) -> None:
        self.cache = AssumeCache(storage)
        self.storage: StorageLister = self.cache
        self.handle = handle
        self.bind_timeout = bind_timeout

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35's, with queueing hints on (its default): a StorageClass added or its
        allowedTopologies changed, one of the pod's claims added or updated, any PV added or updated,
        a node added or relabelled, a CSINode added or its migrated plugins changed. (kube's CSIDriver
        and CSIStorageCapacity registrations have no counterpart: minisched checks no capacity.)"""
        return [
            *ce.events(self.is_schedulable_after_storage_class_change, STORAGE_CLASS_ADD, STORAGE_CLASS_UPDATE),
            *ce.events(self.is_schedulable_after_persistent_volume_claim_change, PVC_ADD, PVC_UPDATE),
            *ce.events(None, PV_ADD, PV_UPDATE, NODE_ADD, NODE_LABEL_CHANGE),
            *ce.events(self.is_schedulable_after_csi_node_change, CSI_NODE_ADD, CSI_NODE_UPDATE),
        ]

    @staticmethod
    def is_schedulable_after_csi_node_change(pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterCSINodeChange: a new CSINode, or a change of the plugins it says
        are migrated to CSI (how in-tree volumes are translated)."""
        if old is None:
            return ce.QUEUE
        assert new is not None

        def migrated(csi_node: Object) -> object:
            return ((csi_node.get("metadata") or {}).get("annotations") or {}).get(MIGRATED_PLUGINS_ANNOTATION) or ""

        return ce.QUEUE if migrated(old) != migrated(new) else ce.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_persistent_volume_claim_change(pod: Object, old: Object | None,
                                                              new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPersistentVolumeClaimChange: a claim of the pod (by name, or the
        claim of one of its generic ephemeral volumes), in its namespace: almost any change of it
        may help."""
        assert new is not None
        if namespace_of(pod) != namespace_of(new):
            return ce.QUEUE_SKIP
        wanted = name_of(new)
        return ce.QUEUE if any(name == wanted for name, _ in claim_volumes(pod)) else ce.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_storage_class_change(pod: Object, old: Object | None,
                                                  new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterStorageClassChange: any new class; of an update, only a change of
        allowedTopologies (volumeBindingMode cannot change)."""
        if old is None:
            return ce.QUEUE
        assert new is not None
        # (apiequality.Semantic: no list and an empty one are equal)
        changed = (old.get("allowedTopologies") or []) != (new.get("allowedTopologies") or [])
        return ce.QUEUE if changed else ce.QUEUE_SKIP

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        if not has_claims(pod):
            return None, Status.skip(NAME)  # classify's podHasPVCs, without walking the volumes
        claims, status = classify(pod.pod, pod.namespace, self.storage)
        if claims is not None:
            state.write(_STATE_KEY, claims)
        return None, status

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        try:
            claims: _Claims = state.read(_STATE_KEY)
        except KeyError:  # a filter-only run (preemption's what-ifs): PreFilter's verdict again
            found, status = classify(pod.pod, pod.namespace, self.storage)
            if found is None:
                return _everywhere(status, n)
            claims = found
        reasons = np.zeros(n, np.uint8)
        undecided = np.ones(n, np.bool_)
        for _, pv in claims.volumes:  # checkBoundClaims: the first failing volume decides a node
            if pv is None:
                reasons[undecided] |= _PV_NOT_EXIST_BIT
                break
            try:
                conflict = undecided & ~node_mask(pv, nodes)
            except PodSpecError as e:
                raise ValueError(str(e)) from None
            reasons[conflict] |= _NODE_CONFLICT_BIT
            undecided &= ~conflict
        if claims.delayed:
            ok, planned = find_pod_volumes(claims, nodes)
            reasons[~ok] |= _BIND_CONFLICT_BIT
            with claims.lock:
                for row, volumes in planned.items():
                    if not reasons[row]:
                        claims.by_node[nodes.names[row]] = volumes
        if not reasons.any():
            return FilterResult.all_pass(n)
        return FilterResult(reasons == 0, reasons.astype(np.int64), _REASONS, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """AssumePodVolumes: the chosen node's bindings go into the assume cache."""
        try:
            claims: _Claims = state.read(_STATE_KEY)
        except KeyError:
            return Status.success()  # the pod has no claims (PreFilter skipped)
        volumes = claims.by_node.get(node_name)
        if volumes is None or self._all_bound(pod):
            claims.all_bound = True
            return Status.success()
        assumed_volumes: list[tuple[Object, Object]] = []
        assumed_claims: list[Object] = []
        try:
            for pvc, pv in volumes.static_bindings:
                new_pv, dirty = bind_volume_to_claim(pv, pvc)
                if dirty:
                    self.cache.assume_volume(new_pv)
                assumed_volumes.append((pvc, new_pv))
            for pvc in volumes.dynamic_provisions:
                clone = {**pvc, "metadata": {**pvc["metadata"],
                                             "annotations": {**(pvc["metadata"].get("annotations") or {}),
                                                             SELECTED_NODE: node_name}}}
                self.cache.assume_claim(clone)
                assumed_claims.append(clone)
        except (LookupError, RuntimeError) as err:
            self._revert(assumed_volumes, assumed_claims)
            return Status.from_error(err, NAME)
        volumes.static_bindings, volumes.dynamic_provisions = assumed_volumes, assumed_claims
        claims.all_bound = False
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """RevertAssumedPodVolumes."""
        try:
            claims: _Claims = state.read(_STATE_KEY)
        except KeyError:
            return
        volumes = claims.by_node.get(node_name)
        if volumes is not None:
            self._revert(volumes.static_bindings, volumes.dynamic_provisions)

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """BindPodVolumes: write the bindings, then wait until the PV controller (and, for claims to
        provision, the external provisioner) has bound every claim."""
        try:
            claims: _Claims = state.read(_STATE_KEY)
        except KeyError:
            return Status.success()
        if claims.all_bound:
            return Status.success()
        volumes = claims.by_node.get(node_name)
        if volumes is None:
            return Status.from_error(RuntimeError(f'no pod volume found for node "{node_name}"'), NAME)
        cluster = self.handle.cluster if self.handle is not None else None
        if cluster is None:
            return Status.from_error(RuntimeError("binding volumes: this scheduler has no cluster to write to"), NAME)
        written = 0
        try:
            for i, (_, pv) in enumerate(volumes.static_bindings):
                volumes.static_bindings[i] = (volumes.static_bindings[i][0], cluster.update(PERSISTENT_VOLUMES, pv))
                written += 1
            for i, pvc in enumerate(volumes.dynamic_provisions):
                volumes.dynamic_provisions[i] = cluster.update(PERSISTENT_VOLUME_CLAIMS, pvc)
                written += 1
        except ApiError as err:
            statics = len(volumes.static_bindings)
            self._revert(volumes.static_bindings[written:], volumes.dynamic_provisions[max(0, written - statics):])
            return Status.from_error(RuntimeError(f"binding volumes: {err}"), NAME)
        deadline = time.monotonic() + self.bind_timeout
        stopping = self.handle.stopping if self.handle is not None else threading.Event()  # never set
        while True:
            try:
                waiting_for = self._unbound(pod, node_name, volumes)
            except RuntimeError as err:
                return Status.from_error(RuntimeError(f"binding volumes: {err}"), NAME)
            if not waiting_for:
                return Status.success()
            if time.monotonic() >= deadline:
                return Status.from_error(TimeoutError(
                    f"binding volumes: context deadline exceeded (after {self.bind_timeout:g}s, "
                    f"bindTimeoutSeconds, still unbound: {', '.join(waiting_for)})"), NAME)
            if stopping.wait(POLL_INTERVAL):
                # kube's PreBind ends with its cancelled context: the pod stays pending, unbound,
                # for the next scheduler; what was written stays for the PV controller to finish
                return Status.from_error(RuntimeError(
                    f"binding volumes: context canceled (the scheduler is stopping; still unbound: "
                    f"{', '.join(waiting_for)})"), NAME)

    # --- helpers ------------------------------------------------------------------------------------

    def _all_bound(self, pod: PodInfo) -> bool:
        """arePodVolumesBound: every claim of the pod is bound already (in the assume cache)."""
        for name, _ in claim_volumes(pod.pod):
            pvc = self.cache.claim(pod.namespace, name)
            if pvc is None or not fully_bound(pvc):
                return False
        return True

    def _revert(self, bindings: Sequence[tuple[Object, Object]], provisions: Sequence[Object]) -> None:
        for _, pv in bindings:
            self.cache.restore_volume(pv["metadata"]["name"])
        for pvc in provisions:
            self.cache.restore_claim(claim_key(pvc))

    def _unbound(self, pod: PodInfo, node_name: str, volumes: PodVolumes) -> list[str]:
        """checkBindings: the claims not bound yet; raises when a binding can no longer happen."""
        storage = self.cache.storage  # the informers' objects (kube's GetAPIObj), not assumed ones
        unbound: list[str] = []
        for pvc_written, pv_written in volumes.static_bindings:
            name = pv_written["metadata"]["name"]
            pv = storage.volume(name)
            meta = pvc_written["metadata"]
            pvc = storage.claim(meta.get("namespace") or "", meta["name"])
            if pv is None or pvc is None:
                raise RuntimeError(f"failed to check binding: {'pv ' + name if pv is None else claim_key(pvc_written)}"
                                   " not found")
            if _version(pv_written) > _version(pv):  # the informer has not seen our write yet
                unbound.append(claim_key(pvc_written))
                continue
            if not node_affinity_matches(pv, volumes.labels):
                raise RuntimeError(f'pv "{name}" node affinity doesn\'t match node "{node_name}"')
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if not ref.get("uid"):
                raise RuntimeError(f'ClaimRef got reset for pv "{name}"')
            if not fully_bound(pvc):
                unbound.append(claim_key(pvc))
        for written in volumes.dynamic_provisions:
            meta = written["metadata"]
            pvc = storage.claim(meta.get("namespace") or "", meta["name"])
            if pvc is None:
                raise RuntimeError(f"failed to check provisioning pvc: {claim_key(written)} not found")
            if _version(written) > _version(pvc):
                unbound.append(claim_key(written))
                continue
            annotations = (pvc.get("metadata") or {}).get("annotations") or {}
            if SELECTED_NODE not in annotations:
                raise RuntimeError(f'selectedNode annotation reset for PVC "{meta["name"]}"')
            if annotations[SELECTED_NODE] != node_name:
                raise RuntimeError(f'provisioning failed for PVC "{meta["name"]}"')
            volume_name = (pvc.get("spec") or {}).get("volumeName")
            if volume_name:
                pv = storage.volume(volume_name)
                if pv is None:
                    unbound.append(claim_key(pvc))
                    continue
                if not node_affinity_matches(pv, volumes.labels):
                    raise RuntimeError(f'pv "{volume_name}" node affinity doesn\'t match node "{node_name}"')
            if not fully_bound(pvc):
                unbound.append(claim_key(pvc))
        return unbound


def _everywhere(status: Status, n: int) -> FilterResult:
    """A PreFilter status as a filter result: every row passes (skip) or fails for its reasons."""
    if status.is_success or status.is_skip:
        return FilterResult.all_pass(n)
    return FilterResult.fail_where(np.ones(n, np.bool_), status.message(), status.code)


def new(args: Mapping[str, Any] | None, handle: Handle | None, storage: StorageLister | None = None) -> VolumeBinding:
    args = dict(args or {})
    unknown = set(args) - {"bindTimeoutSeconds", "shape", "apiVersion", "kind"}
    if unknown:
        raise ValueError(f"{NAME} args: unknown field(s) {sorted(unknown)}")
    if args.get("shape"):
        raise ValueError(f"{NAME} args: shape needs the StorageCapacityScoring feature, which minisched does not have")
    timeout = args.get("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT_SECONDS)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise ValueError(f"{NAME} args: invalid BindTimeoutSeconds {timeout!r}, should not be a negative value "
                         "(a number of seconds)")
    return VolumeBinding(storage_from(handle, storage), handle, float(timeout))
