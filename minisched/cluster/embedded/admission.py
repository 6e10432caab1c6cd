"""Defaulting and the admission plugins whose effects minisched relies on.

What kube-apiserver adds to a new pod before storing it: defaulted fields (pkg/apis/core/v1
defaults), the Priority plugin's spec.priority / preemptionPolicy, DefaultTolerationSeconds'
not-ready/unreachable tolerations, and status {phase: Pending, qosClass}.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
            resources = c.setdefault("resources", {})
            limits = resources.get("limits") or {}
            if limits:  # requests default to limits, per resource
                requests = resources.setdefault("requests", {})
                for name, value in limits.items():
                    requests.setdefault(name, value)
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
    name = (pod.get("metadata") or {}).get("name") or ""
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
