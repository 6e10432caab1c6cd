"""Defaulting and the admission plugins whose effects minisched relies on.

What kube-apiserver adds to a new pod before storing it: defaulted fields (pkg/apis/core/v1
defaults), the Priority plugin's spec.priority / preemptionPolicy, DefaultTolerationSeconds'
not-ready/unreachable tolerations, and status {phase: Pending, qosClass}.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minisched.resources import Resource

from .statuses import forbidden
from .validation import parse_quantity

Object = dict[str, Any]

DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_GRACE_SECONDS = 30
DEFAULT_TOLERATION_SECONDS = 300
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"

# PriorityClasses every kube-apiserver creates at start-up.
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def default_pod(pod: Object) -> None:
    spec = pod.setdefault("spec", {})
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            image = str(c.get("image") or "")
            latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
            c.setdefault("imagePullPolicy", "Always" if latest and "@" not in image else "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            for port in c.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
                    if spec.get("hostNetwork") and not port.get("hostPort"):
                        port["hostPort"] = port.get("containerPort")
            resources = c.setdefault("resources", {})
            limits = resources.get("limits") or {}
            if limits:  # requests default to limits, per resource
                requests = resources.setdefault("requests", {})
                for name, value in limits.items():
                    requests.setdefault(name, value)
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict) and set(volume) <= {"name"}:
            volume["emptyDir"] = {}  # SetDefaults_Volume: a volume without a source is an emptyDir
    tolerations = spec.get("tolerations") or []
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(_tolerates_no_execute(t, key) for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    spec["tolerations"] = tolerations
    merge_match_label_keys(pod)


def merge_match_label_keys(pod: Object) -> None:
    """kube-apiserver's mutatePodAffinity (PrepareForCreate, MatchLabelKeysInPodAffinity, on by
    default): each pod affinity term's matchLabelKeys / mismatchLabelKeys become In / NotIn
    requirements on the pod's own value of the key, appended to its labelSelector (a term without
    a labelSelector selects nothing and is left alone). The scheduler reads only the selector."""
    affinity = (pod.get("spec") or {}).get("affinity")
    if not isinstance(affinity, dict):
        return
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for part in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(part)
        if not isinstance(rules, dict):
            continue
        terms = list(rules.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [w.get("podAffinityTerm") for w in rules.get("preferredDuringSchedulingIgnoredDuringExecution") or []
                  if isinstance(w, dict)]
        for term in terms:
            if not isinstance(term, dict) or not isinstance(term.get("labelSelector"), dict):
                continue
            added = [{"key": k, "operator": op, "values": [labels[k]]}
                     for field, op in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn"))
                     for k in term.get(field) or [] if k in labels]
            if added:  # a new selector: a caller's objects may share one between terms
                selector = term["labelSelector"]
                term["labelSelector"] = {**selector, "matchExpressions": list(selector.get("matchExpressions") or []) + added}


def _tolerates_no_execute(t: Object, key: str) -> bool:
    if t.get("effect") not in ("NoExecute", None, ""):
        return False
    return t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists")


def qos_class(pod: Object) -> str:
    """BestEffort, Burstable or Guaranteed (pkg/apis/core/helper/qos), from cpu and memory."""
    containers = (pod.get("spec") or {}).get("containers") or []
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        for name in ("cpu", "memory"):
            if name in requests or name in limits:
                any_set = True
            if name not in limits or parse_quantity(requests.get(name, limits[name])) != parse_quantity(limits[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def admit_priority(pod: Object, find_class: Callable[[str], Object | None],
                   global_default: Callable[[], Object | None]) -> None:
    """The Priority admission plugin: resolve priorityClassName to spec.priority."""
    from minisched.resources import PODS

    spec = pod.setdefault("spec", {})
    name = admission_name(pod)
    class_name = spec.get("priorityClassName")
    if class_name:
        pc = find_class(class_name)
        if pc is None:
            raise forbidden(PODS, name, f"no PriorityClass with name {class_name} was found")
        value, policy = int(pc.get("value") or 0), pc.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY
    else:
        pc = global_default()
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
            value, policy = int(pc.get("value") or 0), pc.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY
        else:
            value, policy = 0, PREEMPT_LOWER_PRIORITY
    given = spec.get("priority")
    if given is not None and int(given) != value:
        raise forbidden(PODS, name, (
            f"the integer value of priority ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {value} from the given PriorityClass name"
        ))
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise forbidden(PODS, name, (
            f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; priority "
            f"admission controller computed {policy} from the given PriorityClass name"
        ))
    spec["priority"] = value
    spec["preemptionPolicy"] = policy


def pod_status_on_create(pod: Object) -> None:
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(pod)}


def default_node_status(node: Object) -> None:
    """kube's SetDefaults_NodeStatus (pkg/apis/core/v1/defaults.go), run on every decoded Node
    (create, update, status update, patch): a node that reports no allocatable can allocate its
    whole capacity. Only a missing (or null) allocatable is defaulted; an empty capacity leaves it
    alone (Go omits the empty map it would copy)."""
    status = node.get("status")
    if not isinstance(status, dict) or status.get("allocatable") is not None:
        return
    capacity = status.get("capacity")
    if isinstance(capacity, dict) and capacity:
        status["allocatable"] = dict(capacity)


def default_priority_class(pc: Object) -> None:
    pc.setdefault("preemptionPolicy", PREEMPT_LOWER_PRIORITY)
    pc.setdefault("value", 0)


def default_namespace(ns: Object) -> None:
    name = ns["metadata"]["name"]
    ns["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    ns.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    ns["status"] = {"phase": "Active"}


def empty_pdb_status(pdb: Object) -> None:
    pdb["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}


def crd_status(crd: Object, now: str) -> None:
    spec = crd.get("spec") or {}
    stored = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    crd["status"] = {
        "acceptedNames": dict(spec.get("names") or {}),
        "storedVersions": stored,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
    }


def default_workload(resource: Resource, obj: Object) -> None:
    """The defaults kube-apiserver gives the workload objects minisched reads (SetDefaults_Service,
    SetDefaults_ReplicationController, SetDefaults_ReplicaSet/StatefulSet): replicas 1, an RC's
    selector and labels from its template, a Service's type, affinity and port protocols. (A real
    server also allocates a Service's clusterIP; the embedded one has no IP allocator.)"""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if resource.kind == "Service":
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
        return
    spec.setdefault("replicas", 1)
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if resource.kind == "ReplicationController" and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = obj.setdefault("metadata", {})
        if not meta.get("labels"):
            meta["labels"] = dict(labels)
    if resource.kind == "StatefulSet":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        spec.setdefault("revisionHistoryLimit", 10)
    obj.setdefault("status", {"replicas": 0})


def merge_spread_match_label_keys(pod: Object) -> None:
    """kube-apiserver 1.34+ (MatchLabelKeysInPodTopologySpreadSelectorMerge, on by default): each
    topologySpreadConstraint's matchLabelKeys become `key In (the pod's value)` expressions of its
    labelSelector at creation (a nil selector stays nil: it matches nothing anyway)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
        if not isinstance(c, dict) or not c.get("matchLabelKeys") or not isinstance(c.get("labelSelector"), dict):
            continue
        expressions = c["labelSelector"].setdefault("matchExpressions", [])
        for key in c["matchLabelKeys"]:
            if key in labels:
                expressions.append({"key": key, "operator": "In", "values": [labels[key]]})


def default_pod_level_requests(pod: Object) -> None:
    """kube's defaultPodRequests: with pod-level limits, a missing pod-level request of a supported
    resource (cpu, memory, hugepages-*) becomes the containers' aggregate request when they set one
    and the resource may be overcommitted (not hugepages), else the pod-level limit."""
    from .validation import aggregate_container_requests

    spec = pod.get("spec") or {}
    resources = spec.get("resources")
    if not isinstance(resources, dict) or not resources.get("limits"):
        return
    requests = dict(resources.get("requests") or {})

    def supported(name: str) -> bool:
        return name in ("cpu", "memory") or name.startswith("hugepages-")

    for name, amount in aggregate_container_requests(spec).items():
        if name not in requests and supported(name) and not name.startswith("hugepages-"):
            requests[name] = amount.canonical()
    for name, limit in resources["limits"].items():
        if name not in requests and supported(name):
            requests[name] = limit
    if requests:
        resources["requests"] = requests
# --- RuntimeClass (plugin/pkg/admission/runtimeclass) ------------------------------------------


def admit_runtime_class(pod: Object, find_class: Callable[[str], Object | None]) -> Object | None:
    """The RuntimeClass plugin's mutating step: the named class must exist; its overhead becomes the
    pod's (a different one given in the pod is refused) and its scheduling constraints are merged
    into the pod's node selector and tolerations. Returns the class, for `validate_runtime_class`."""
    from minisched.resources import PODS

    spec = pod.setdefault("spec", {})
    class_name = spec.get("runtimeClassName")
    if class_name is None:
        return None
    name = admission_name(pod)
    rc = find_class(class_name)
    if rc is None:
        raise forbidden(PODS, name, f'pod rejected: RuntimeClass "{class_name}" not found')
    overhead = (rc.get("overhead") or {}).get("podFixed")
    if overhead is not None:
        if spec.get("overhead") is not None and not _same_resources(spec["overhead"], overhead):
            raise forbidden(PODS, name, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
        spec["overhead"] = dict(overhead)
    scheduling = rc.get("scheduling") or {}
    if scheduling:
        selector = dict(spec.get("nodeSelector") or {})
        for key, value in (scheduling.get("nodeSelector") or {}).items():
            if key in selector and selector[key] != value:
                raise forbidden(PODS, name, (f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                                             f"pod.spec.nodeSelector[{key}] = {selector[key]}"))
            selector[key] = value
        if selector:
            spec["nodeSelector"] = selector
        merged = merge_tolerations(list(spec.get("tolerations") or []), list(scheduling.get("tolerations") or []))
        if merged:
            spec["tolerations"] = merged
    return rc


def validate_runtime_class(pod: Object, rc: Object | None) -> None:
    """The RuntimeClass plugin's validating step: an overhead only as the class defines it."""
    from minisched.resources import PODS

    spec = pod.get("spec") or {}
    overhead = ((rc or {}).get("overhead") or {}).get("podFixed")
    if overhead is not None:
        if not _same_resources(spec.get("overhead"), overhead):
            raise forbidden(PODS, admission_name(pod),
                            "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
    elif spec.get("overhead") is not None:
        raise forbidden(PODS, admission_name(pod),
                        "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")


def admission_name(obj: Object) -> str:
    """The name admission errors use: the name, else the generateName prefix (extractResourceName)."""
    meta = obj.get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "")


def _same_resources(a: Any, b: Any) -> bool:
    """Semantic equality of two resource lists (quantities compared by value)."""
    if not isinstance(a, dict) or not isinstance(b, dict) or set(a) != set(b):
        return False
    return all(parse_quantity(a[k]) == parse_quantity(b[k]) for k in a)


def merge_tolerations(first: list[Object], second: list[Object]) -> list[Object]:
    """pkg/util/tolerations.MergeTolerations: both lists, minus any toleration another one covers."""
    everything = first + second
    merged: list[Object] = []
    for i, t in enumerate(everything):
        if any(_is_superset(kept, t) for kept in merged):
            continue
        if any(t != later and _is_superset(later, t) for later in everything[i + 1:]):
            continue
        merged.append(t)
    return merged


def _is_superset(ss: Object, t: Object) -> bool:
    if ss == t:
        return True
    if t.get("key", "") != ss.get("key", "") and (ss.get("key") or ss.get("operator") != "Exists"):
        return False
    if t.get("effect", "") != ss.get("effect", "") and ss.get("effect"):
        return False
    if ss.get("effect") == "NoExecute" and ss.get("tolerationSeconds") is not None and (
            t.get("tolerationSeconds") is None or t["tolerationSeconds"] > ss["tolerationSeconds"]):
        return False
    operator = ss.get("operator") or "Equal"
    if operator == "Equal":
        return t.get("operator") == "Equal" and t.get("value", "") == ss.get("value", "")
    return operator == "Exists"


# --- storage: defaults, DefaultStorageClass and StorageObjectInUseProtection --------------------

PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def is_default_class(sc: Object) -> bool:
    return ((sc.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"


def admit_claim(pvc: Object, default_class: Callable[[], Object | None]) -> None:
    """A new PersistentVolumeClaim: v1 defaults, the DefaultStorageClass plugin (a claim that names
    no class gets the default one) and StorageObjectInUseProtection's finalizer; status Pending."""
    spec = pvc.setdefault("spec", {})
    spec.setdefault("volumeMode", "Filesystem")
    annotations = (pvc.get("metadata") or {}).get("annotations") or {}
    if spec.get("storageClassName") is None and "volume.beta.kubernetes.io/storage-class" not in annotations:
        sc = default_class()
        if sc is not None:
            spec["storageClassName"] = sc["metadata"]["name"]
    _protect(pvc, PVC_PROTECTION)
    pvc["status"] = {"phase": "Pending"}


def admit_volume(pv: Object, now: str) -> None:
    """A new PersistentVolume: v1 defaults and StorageObjectInUseProtection's finalizer; Pending."""
    spec = pv.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    _protect(pv, PV_PROTECTION)
    pv["status"] = {"phase": "Pending", "lastPhaseTransitionTime": now}


def default_storage_class(sc: Object) -> None:
    sc.setdefault("reclaimPolicy", "Delete")
    sc.setdefault("volumeBindingMode", "Immediate")


def _protect(obj: Object, finalizer: str) -> None:
    finalizers = obj["metadata"].setdefault("finalizers", [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)
