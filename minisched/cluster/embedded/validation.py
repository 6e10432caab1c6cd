"""Validation: what kube-apiserver rejects with 422 Invalid (field causes) or 400 BadRequest.

Kept to the checks minisched's users run into (names, containers, quantities, what a pod update
may change), with the real server's field paths and wording. Not a full port of
pkg/apis/core/validation.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from minisched.errors import BadRequest, Cause
from minisched.resources import (
    CRDS,
    NAMESPACES,
    PODS,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    SERVICES,
    STATEFUL_SETS,
    Resource,
)
from minisched.selectors import validate_label_key, validate_label_value

from .statuses import forbidden_field, invalid_value, not_supported, required

Object = dict[str, Any]

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def dns1123_label_problem(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    return None if _DNS1123_LABEL.match(value) else DNS1123_LABEL_MSG


def dns1123_subdomain_problem(value: str) -> str | None:
    if len(value) > 253:
        return "must be no more than 253 characters"
    return None if _DNS1123_SUBDOMAIN.match(value) else DNS1123_SUBDOMAIN_MSG


# --- quantities -------------------------------------------------------------------------------

QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY = re.compile(QUANTITY_PATTERN)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}


def parse_quantity(text: Any, kind: str = "Pod") -> Fraction:
    """The value of a resource.Quantity. A malformed one fails JSON decoding on the real server,
    which answers 400 BadRequest (not 422), with this message."""
    if isinstance(text, str):
        return _parse_quantity_text(text, kind)
    return _parse_quantity(text, kind)


@lru_cache(maxsize=4096)
def _parse_quantity_text(text: str, kind: str) -> Fraction:
    return _parse_quantity(text, kind)  # the same few strings ("100m", "128Mi") come again and again


def _parse_quantity(text: Any, kind: str) -> Fraction:
    if isinstance(text, bool):
        raise BadRequest(f'{kind} in version "v1" cannot be handled as a {kind}: quantities must be strings')
    if isinstance(text, int | float):
        return Fraction(str(text))
    m = _QUANTITY.match(str(text))
    if not m:
        raise BadRequest(
            f'{kind} in version "v1" cannot be handled as a {kind}: quantities must match the regular '
            f"expression '{QUANTITY_PATTERN}'"
        )
    number, suffix = m.group(1), m.group(2)
    try:
        base = Fraction(number)
    except ValueError:
        raise BadRequest(f'{kind} in version "v1" cannot be handled as a {kind}: unable to parse quantity '
                         f"{text!r}") from None
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    if suffix[:1] in ("e", "E"):
        try:
            return base * Fraction(10) ** int(suffix[1:])
        except ValueError:
            pass
    raise BadRequest(f'{kind} in version "v1" cannot be handled as a {kind}: unable to parse quantity\'s suffix')


def _resource_list_causes(path: str, resources: Any, kind: str) -> tuple[list[Cause], dict[str, Fraction]]:
    causes: list[Cause] = []
    values: dict[str, Fraction] = {}
    if not isinstance(resources, dict):
        return causes, values
    for name, raw in resources.items():
        value = parse_quantity(raw, kind)
        values[name] = value
        if value < 0:
            causes.append(invalid_value(f"{path}[{name}]", str(raw), "must be greater than or equal to 0"))
    return causes, values


# --- metadata ---------------------------------------------------------------------------------


def metadata_causes(resource: Resource, obj: Object) -> list[Cause]:
    meta = obj.get("metadata") or {}
    causes: list[Cause] = []
    name = meta.get("name") or ""
    if not name:
        causes.append(required("metadata.name", "name or generateName is required"))
    elif resource == NAMESPACES:
        problem = "must not contain dots" if "." in name else dns1123_label_problem(name)
        if problem:
            causes.append(invalid_value("metadata.name", name, problem))
    elif resource == CRDS:
        pass  # checked against spec.names in crd_causes
    else:
        problem = dns1123_subdomain_problem(name)
        if problem:
            causes.append(invalid_value("metadata.name", name, problem))
    for key, value in (meta.get("labels") or {}).items():
        problem = validate_label_key(str(key))
        if problem:
            causes.append(invalid_value("metadata.labels", key, problem))
        problem = validate_label_value(value) if isinstance(value, str) else "must be a string"
        if problem:
            causes.append(invalid_value("metadata.labels", value, problem))
    return causes


# --- kinds ------------------------------------------------------------------------------------


def pod_causes(pod: Object) -> list[Cause]:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [required("spec.containers")]
    causes: list[Cause] = []
    containers = spec.get("containers") or []
    if not containers:
        causes.append(required("spec.containers"))
    for group in ("initContainers", "containers"):
        seen: set[str] = set()
        for i, c in enumerate(spec.get(group) or []):
            path = f"spec.{group}[{i}]"
            cname = c.get("name") or ""
            if not cname:
                causes.append(required(f"{path}.name"))
            elif dns1123_label_problem(cname):
                causes.append(invalid_value(f"{path}.name", cname, DNS1123_LABEL_MSG))
            elif cname in seen:
                causes.append(Cause(f"{path}.name", f'Duplicate value: "{cname}"', "FieldValueDuplicate"))
            seen.add(cname)
            if not c.get("image"):
                causes.append(required(f"{path}.image"))
            res = c.get("resources") or {}
            req_causes, requests = _resource_list_causes(f"{path}.resources.requests", res.get("requests"), "Pod")
            lim_causes, limits = _resource_list_causes(f"{path}.resources.limits", res.get("limits"), "Pod")
            causes += req_causes + lim_causes
            for rname, amount in requests.items():
                if rname in limits and amount > limits[rname]:
                    causes.append(invalid_value(
                        f"{path}.resources.requests", str(res["requests"][rname]),
                        f"must be less than or equal to {rname} limit of {res['limits'][rname]}",
                    ))
    causes += _pod_level_causes(spec)
    for i, c in enumerate(spec.get("topologySpreadConstraints") or []):
        if isinstance(c, dict) and c.get("matchLabelKeys") and c.get("labelSelector") is None:
            causes.append(forbidden_field(f"spec.topologySpreadConstraints[{i}].matchLabelKeys",
                                          "must not be specified when labelSelector is not set"))
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in ("Always", "OnFailure", "Never"):
        causes.append(not_supported("spec.restartPolicy", policy, ["Always", "OnFailure", "Never"]))
    for i, t in enumerate(spec.get("tolerations") or []):
        effect = t.get("effect")
        if effect and effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            causes.append(not_supported(f"spec.tolerations[{i}].effect", effect,
                                        ["NoExecute", "NoSchedule", "PreferNoSchedule"]))
    return causes


def aggregate_container_requests(spec: Object) -> dict[str, Any]:
    """kube's AggregateContainerRequests as exact Quantities: containers and sidecars summed, each
    regular init container (beside the sidecars started before it) as a peak."""
    from minisched.quantity import Quantity
    from minisched.quantity import parse_quantity as exact

    def requests(c: Object) -> dict[str, Quantity]:
        raw = (c.get("resources") or {}).get("requests") or {}
        return {k: exact(v) for k, v in raw.items()} if isinstance(raw, dict) else {}

    total: dict[str, Quantity] = {}
    for c in spec.get("containers") or []:
        for k, q in requests(c).items():
            total[k] = total[k] + q if k in total else q
    sidecars: dict[str, Quantity] = {}
    peak: dict[str, Quantity] = {}
    for c in spec.get("initContainers") or []:
        reqs = requests(c)
        if c.get("restartPolicy") == "Always":
            for k, q in reqs.items():
                total[k] = total[k] + q if k in total else q
                sidecars[k] = sidecars[k] + q if k in sidecars else q
            during = dict(sidecars)
        else:
            during = dict(reqs)
            for k, q in sidecars.items():
                during[k] = during[k] + q if k in during else q
        for k, q in during.items():
            if k not in peak or peak[k] < q:
                peak[k] = q
    for k, q in peak.items():
        if k not in total or total[k] < q:
            total[k] = q
    return total


def _pod_level_causes(spec: Object) -> list[Cause]:
    """Pod-level requests (spec.resources) must cover the containers' aggregate requests (kube's
    validatePodResourceConsistency)."""
    from minisched.quantity import parse_quantity as exact

    pod_level = (spec.get("resources") or {}).get("requests") or {}
    if not isinstance(pod_level, dict) or not pod_level:
        return []
    total = aggregate_container_requests(spec)
    causes = []
    for name, aggregate in sorted(total.items()):
        if name in pod_level and exact(pod_level[name]) < aggregate:
            causes.append(invalid_value(f"spec.resources.requests[{name}]", str(pod_level[name]),
                                        f"must be greater than or equal to aggregate container requests of "
                                        f"{aggregate.canonical()}"))
    return causes


# Fields a pod update may change (ValidatePodUpdate); everything else in spec is immutable.
POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
    "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
    "previously negative)"
)


def _mutable_masked(spec: Object, old: Object) -> Object:
    masked = dict(spec)
    for group in ("containers", "initContainers"):
        if group in masked:
            masked[group] = [{**c, "image": None} for c in masked[group]]
    masked.pop("activeDeadlineSeconds", None)
    masked.pop("terminationGracePeriodSeconds", None)
    old_tolerations = old.get("tolerations") or []
    new_tolerations = spec.get("tolerations") or []
    if all(t in new_tolerations for t in old_tolerations):
        masked.pop("tolerations", None)
    old_gates = old.get("schedulingGates") or []
    new_gates = spec.get("schedulingGates") or []
    if all(g in old_gates for g in new_gates):  # gates may only be removed
        masked.pop("schedulingGates", None)
    if old_gates:  # while gated, scheduling directives may be added (mutable pod scheduling directives)
        for name in ("nodeSelector", "affinity"):
            masked.pop(name, None)
    return masked


def pod_update_causes(old: Object, new: Object) -> list[Cause]:
    causes = pod_causes(new)
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if _mutable_masked(new_spec, old_spec) != _mutable_masked(old_spec, old_spec):
        causes.append(forbidden_field("spec", POD_UPDATE_FORBIDDEN))
    return causes


def node_causes(node: Object) -> list[Cause]:
    causes: list[Cause] = []
    status = node.get("status") or {}
    for field in ("capacity", "allocatable"):
        more, _ = _resource_list_causes(f"status.{field}", status.get(field), "Node")
        causes += more
    for i, t in enumerate((node.get("spec") or {}).get("taints") or []):
        # The real server reports taint problems under "metadata.taints" (sic), so do we.
        if not t.get("key"):
            causes.append(required(f"metadata.taints[{i}].key"))
        effect = t.get("effect")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            causes.append(not_supported(f"metadata.taints[{i}].effect", effect or "",
                                        ["NoSchedule", "PreferNoSchedule", "NoExecute"]))
    return causes


def pdb_causes(pdb: Object) -> list[Cause]:
    spec = pdb.get("spec") or {}
    if "minAvailable" in spec and "maxUnavailable" in spec:
        return [invalid_value("spec", spec, "minAvailable and maxUnavailable cannot be both set")]
    return []


def crd_causes(crd: Object) -> list[Cause]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes: list[Cause] = []
    group, plural = spec.get("group") or "", names.get("plural") or ""
    if not group:
        causes.append(required("spec.group"))
    if not plural:
        causes.append(required("spec.names.plural"))
    if not names.get("kind"):
        causes.append(required("spec.names.kind"))
    name = (crd.get("metadata") or {}).get("name") or ""
    if name and group and plural and name != f"{plural}.{group}":
        causes.append(invalid_value("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        causes.append(not_supported("spec.scope", scope or "", ["Cluster", "Namespaced"]))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(required("spec.versions"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(invalid_value("spec.versions", "", "must have exactly one version marked as storage version"))
    for i, v in enumerate(versions):
        if not (v.get("schema") or {}).get("openAPIV3Schema"):
            causes.append(required(f"spec.versions[{i}].schema.openAPIV3Schema"))
    return causes


_SELECTOR_MISMATCH = "`selector` does not match template `labels`"


def _selector_matches(selector: Object, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector against a label map (matchLabels and the set-based operators)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _template_causes(spec: Object, path: str) -> list[Cause]:
    template = spec.get("template")
    if not isinstance(template, dict):
        return [required(f"{path}.template")]
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, dict) or not pod_spec.get("containers"):
        return [required(f"{path}.template.spec.containers")]
    policy = pod_spec.get("restartPolicy", "Always")
    if policy != "Always":
        return [not_supported(f"{path}.template.spec.restartPolicy", policy, ["Always"])]
    return []


def workload_causes(resource: Resource, obj: Object) -> list[Cause]:
    """ReplicaSet, StatefulSet (apps/v1) and ReplicationController: a selector that is set, not
    empty, and matches the pod template's labels (kube's ValidateReplicaSetSpec and kin)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec.selector")] if resource != REPLICATION_CONTROLLERS else [required("spec.template")]
    causes: list[Cause] = []
    replicas = spec.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        causes.append(invalid_value("spec.replicas", replicas, "must be greater than or equal to 0"))
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if resource == REPLICATION_CONTROLLERS:
        selector = spec.get("selector") or {}  # defaulted from the template's labels on create
        if not selector:
            causes.append(required("spec.selector"))
        elif any(labels.get(k) != v for k, v in selector.items()):
            causes.append(invalid_value("spec.template.metadata.labels", labels, _SELECTOR_MISMATCH))
    else:
        selector = spec.get("selector")
        if not isinstance(selector, dict):
            causes.append(required("spec.selector"))
        elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
            causes.append(invalid_value("spec.selector", selector, "empty selector is invalid for deployment"))
        elif not _selector_matches(selector, labels):
            causes.append(invalid_value("spec.template.metadata.labels", labels, _SELECTOR_MISMATCH))
    return causes + _template_causes(spec, "spec")


def service_causes(service: Object) -> list[Cause]:
    """A ClusterIP or NodePort/LoadBalancer service needs ports; a headless one may have none."""
    spec = service.get("spec") or {}
    causes: list[Cause] = []
    kind = spec.get("type", "ClusterIP")
    if kind not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        causes.append(not_supported("spec.type", kind, ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]))
    if not spec.get("ports") and spec.get("clusterIP") != "None" and kind != "ExternalName":
        causes.append(required("spec.ports"))
    for key, value in (spec.get("selector") or {}).items():
        problem = validate_label_key(str(key))
        if problem:
            causes.append(invalid_value("spec.selector", key, problem))
        problem = validate_label_value(value) if isinstance(value, str) else "must be a string"
        if problem:
            causes.append(invalid_value("spec.selector", value, problem))
    return causes


def kind_causes(resource: Resource, obj: Object) -> list[Cause]:
    """Validation of a new object of `resource`, beyond metadata."""
    if resource == PODS:
        return pod_causes(obj)
    if resource in (REPLICA_SETS, STATEFUL_SETS, REPLICATION_CONTROLLERS):
        return workload_causes(resource, obj)
    if resource == SERVICES:
        return service_causes(obj)
    if resource.plural == "nodes" and resource.group == "":
        return node_causes(obj)
    if resource.plural == "poddisruptionbudgets":
        return pdb_causes(obj)
    if resource == CRDS:
        return crd_causes(obj)
    return []
