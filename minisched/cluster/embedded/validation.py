"""Validation: what kube-apiserver rejects with 422 Invalid (field causes) or 400 BadRequest.

Kept to the checks minisched's users run into (names, containers, quantities, what a pod update
may change), with the real server's field paths and wording. Not a full port of
pkg/apis/core/validation.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from minisched.errors import BadRequest, Cause
from minisched.resources import (
    CRDS,
    LIMIT_RANGES,
    NAMESPACES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    RUNTIME_CLASSES,
    SERVICES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
    Resource,
)
from minisched.selectors import validate_label_key, validate_label_value

from .placement_validation import (
    gated_update_causes,
    label_map_causes,
    label_name_causes,
    label_value_errors,
    placement_causes,
    set_operator_causes,
)
from .resource_names import is_extended, is_hugepages, is_native, overcommit_allowed
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
    causes += label_map_causes("metadata.labels", meta.get("labels"))
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
            pull = c.get("imagePullPolicy")
            if pull is not None and pull not in PULL_POLICIES:
                causes.append(not_supported(f"{path}.imagePullPolicy", pull, PULL_POLICIES))
            causes += _port_causes(f"{path}.ports", c.get("ports"))
            if spec.get("hostNetwork"):
                for j, port in enumerate(c.get("ports") or []):
                    if port.get("hostPort") != port.get("containerPort"):
                        causes.append(invalid_value(f"{path}.ports[{j}].hostPort", port.get("hostPort"),
                                                    "must match `containerPort` when `hostNetwork` is true"))
            if group == "initContainers":  # each init container on its own, the containers together
                causes += _host_port_duplicates(f"spec.{group}", [(i, c)])
            causes += resource_requirements_causes(f"{path}.resources", c.get("resources") or {})
    causes += _host_port_duplicates("spec.containers", list(enumerate(containers)))
    causes += _volume_causes(spec.get("volumes") or [])
    # validateOverhead reuses the container rules with the overhead as limits (hence the path)
    causes += resource_requirements_causes("spec.overhead", {"limits": spec.get("overhead") or {}})
    if spec.get("resources") is not None:
        causes += resource_requirements_causes("spec.resources", spec["resources"] or {}, pod_level=True)
    causes += _pod_level_causes(spec)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in ("Always", "OnFailure", "Never"):
        causes.append(not_supported("spec.restartPolicy", policy, ["Always", "OnFailure", "Never"]))
    dns = spec.get("dnsPolicy")
    if dns is not None and dns not in DNS_POLICIES:
        causes.append(not_supported("spec.dnsPolicy", dns, DNS_POLICIES))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and not 1 <= int(deadline) <= 2147483647:
        causes.append(invalid_value("spec.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, inclusive"))
    node_name = spec.get("nodeName")
    if node_name:
        problem = dns1123_subdomain_problem(str(node_name))
        if problem:
            causes.append(invalid_value("spec.nodeName", node_name, problem))
    causes += label_map_causes("spec.nodeSelector", spec.get("nodeSelector"))
    gates: set[str] = set()
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        name = str(gate.get("name") or "")
        problem = validate_label_key(name)
        if problem:
            causes.append(invalid_value(f"spec.schedulingGates[{i}]", name, problem))
        elif name in gates:
            causes.append(Cause(f"spec.schedulingGates[{i}]", f'Duplicate value: "{name}"', "FieldValueDuplicate"))
        gates.add(name)
    causes += _node_affinity_causes("spec.affinity.nodeAffinity", (spec.get("affinity") or {}).get("nodeAffinity"))
    causes += placement_causes("spec", spec)
    causes += toleration_causes("spec.tolerations", spec.get("tolerations") or [])
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




def toleration_causes(path: str, tolerations: list[Object]) -> list[Cause]:
    """ValidateTolerations (the Lt/Gt operators are behind an alpha gate, so not supported)."""
    causes: list[Cause] = []
    for i, t in enumerate(tolerations):
        where = f"{path}[{i}]"
        key, operator, value = t.get("key") or "", t.get("operator") or "", t.get("value") or ""
        effect = t.get("effect") or ""
        if key:
            causes += label_name_causes(f"{where}.key", key)
        elif operator != "Exists":
            causes.append(invalid_value(f"{where}.operator", operator, 'operator must be Exists when `key` is empty, '
                                                                       'which means "match all values and all keys"'))
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            causes.append(invalid_value(f"{where}.effect", effect,
                                        "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if operator in ("Equal", ""):
            problem = validate_label_value(value)
            if problem:
                causes.append(invalid_value(f"{where}.operator", value, problem))
        elif operator == "Exists":
            if value:
                causes.append(invalid_value(f"{where}.operator", value, "value must be empty when `operator` is 'Exists'"))
        elif operator in ("Lt", "Gt"):
            causes.append(not_supported(f"{where}.operator", operator, ["Equal", "Exists", "Lt", "Gt"]))
        else:
            causes.append(not_supported(f"{where}.operator", operator, ["Equal", "Exists"]))
        if effect and effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            causes.append(not_supported(f"{where}.effect", effect, ["NoExecute", "NoSchedule", "PreferNoSchedule"]))
    return causes


def _node_affinity_causes(path: str, affinity: Any) -> list[Cause]:
    """validateNodeAffinity: the required node selector and the preferred terms."""
    if not isinstance(affinity, dict):
        return []
    causes: list[Cause] = []
    required_selector = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required_selector is not None:
        terms_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = (required_selector or {}).get("nodeSelectorTerms") or []
        if not terms:
            causes.append(required(terms_path, "must have at least one node selector term"))
        for i, term in enumerate(terms):
            causes += node_selector_term_causes(f"{terms_path}[{i}]", term or {})
    for i, pref in enumerate(affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        where = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        weight = pref.get("weight") or 0
        if not 1 <= int(weight) <= 100:
            causes.append(invalid_value(f"{where}.weight", weight, "must be in the range 1-100"))
        # preferred terms may hold any value (they can still match on a one-node cluster)
        causes += node_selector_term_causes(f"{where}.preference", pref.get("preference") or {}, check_values=False)
    return causes


def node_selector_term_causes(path: str, term: Object, *, check_values: bool = True) -> list[Cause]:
    """ValidateNodeSelectorTerm: each requirement's operator, key and (unless told not to) values."""
    causes: list[Cause] = []
    for j, rq in enumerate(term.get("matchExpressions") or []):
        where = f"{path}.matchExpressions[{j}]"
        operator, values = rq.get("operator") or "", rq.get("values") or []
        known = set_operator_causes(where, operator, values)
        if known is not None:
            causes += known
        elif operator in ("Gt", "Lt"):
            if len(values) != 1:
                causes.append(required(f"{where}.values",
                                       "must be specified single value when `operator` is 'Lt' or 'Gt'"))
        else:
            causes.append(invalid_value(f"{where}.operator", operator, "not a valid selector operator"))
        causes += label_name_causes(f"{where}.key", rq.get("key") or "")
        for k, value in enumerate(values if check_values else ()):
            problems = label_value_errors(value) if isinstance(value, str) else ["must be a string"]
            causes += [invalid_value(f"{where}.values[{k}]", value, msg) for msg in problems]
    for j, rq in enumerate(term.get("matchFields") or []):
        where = f"{path}.matchFields[{j}]"
        operator = rq.get("operator") or ""
        if operator in ("In", "NotIn"):
            if len(rq.get("values") or []) != 1:
                causes.append(required(f"{where}.values", "must be only one value when `operator` is 'In' or "
                                                          "'NotIn' for node field selector"))
        else:
            causes.append(invalid_value(f"{where}.operator", operator, "not a valid selector operator"))
        if rq.get("key") != "metadata.name":
            causes.append(invalid_value(f"{where}.key", rq.get("key") or "", "not a valid field selector key"))
    return causes


# Resources a container may ask for without a domain (helper.IsStandardContainerResourceName).
_STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")


PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
POD_LEVEL_RESOURCES = ["cpu", "hugepages-", "memory"]


def _host_port_duplicates(path: str, containers: list[tuple[int, Object]]) -> list[Cause]:
    """AccumulateUniqueHostPorts: one (protocol, hostIP, hostPort) per pod (per init container)."""
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, c in containers:
        for j, port in enumerate(c.get("ports") or []):
            if not port.get("hostPort"):
                continue
            key = f"{port.get('protocol') or ''}/{port.get('hostIP') or ''}/{port['hostPort']}"
            if key in seen:
                causes.append(Cause(f"{path}[{i}].ports[{j}].hostPort", f'Duplicate value: "{key}"',
                                    "FieldValueDuplicate"))
            seen.add(key)
    return causes


def _volume_causes(volumes: list[Object]) -> list[Cause]:
    """ValidateVolumes, in part: names (a DNS label, once each) and a claim name for a claim."""
    causes: list[Cause] = []
    names: set[str] = set()
    for i, v in enumerate(volumes):
        name = str(v.get("name") or "")
        if not name:
            causes.append(required(f"spec.volumes[{i}].name"))
        else:
            problem = dns1123_label_problem(name)
            if problem:
                causes.append(invalid_value(f"spec.volumes[{i}].name", name, problem))
            elif name in names:
                causes.append(Cause(f"spec.volumes[{i}].name", f'Duplicate value: "{name}"', "FieldValueDuplicate"))
        names.add(name)
        claim = v.get("persistentVolumeClaim")
        if claim is not None and not claim.get("claimName"):
            causes.append(required(f"spec.volumes[{i}].persistentVolumeClaim.claimName"))
    return causes


def resource_requirements_causes(path: str, res: Object, *, pod_level: bool = False) -> list[Cause]:
    """validateResourceRequirements, in its order: each limit's name and value, then each request's
    name, value and its relation to the limit (<= it; == it where overcommit is not allowed)."""
    causes: list[Cause] = []
    raw_requests, raw_limits = res.get("requests") or {}, res.get("limits") or {}
    limits: dict[str, Fraction] = {}
    names_of = _pod_resource_causes if pod_level else _container_resource_causes
    for rname, raw in (raw_limits.items() if isinstance(raw_limits, dict) else ()):
        limits[rname] = amount = parse_quantity(raw)
        causes += names_of(f"{path}.limits[{rname}]", rname, amount, raw)
        causes += _hugepage_causes(f"{path}.limits[{rname}]", rname, amount, raw)
    for rname, raw in (raw_requests.items() if isinstance(raw_requests, dict) else ()):
        amount = parse_quantity(raw)
        causes += names_of(f"{path}.requests[{rname}]", rname, amount, raw)
        if rname in limits:
            if amount != limits[rname] and not overcommit_allowed(rname):
                causes.append(invalid_value(f"{path}.requests", str(raw),
                                            f"must be equal to {rname} limit of {raw_limits[rname]}"))
            elif amount > limits[rname]:
                causes.append(invalid_value(f"{path}.requests", str(raw),
                                            f"must be less than or equal to {rname} limit of {raw_limits[rname]}"))
        elif not overcommit_allowed(rname):
            causes.append(required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
        causes += _hugepage_causes(f"{path}.requests[{rname}]", rname, amount, raw)
    names = set(raw_limits) | set(raw_requests) if isinstance(raw_limits, dict) and isinstance(raw_requests, dict) else set()
    if any(is_hugepages(n) for n in names) and not names & {"cpu", "memory"}:
        causes.append(forbidden_field(path, "HugePages require cpu or memory"))
    return causes


def _hugepage_causes(path: str, name: str, amount: Fraction, raw: Any) -> list[Cause]:
    """validateResourceQuantityHugePageValue: a positive whole number of pages."""
    if not is_hugepages(name):
        return []
    try:
        page = parse_quantity(name[len("hugepages-"):])
    except BadRequest:
        return []  # an unknown page size: the name check speaks for it
    if amount > 0 and page > 0 and math.ceil(amount) % page == 0:
        return []
    return [invalid_value(path, str(raw), f"{raw} is not positive integer multiple of {name}")]


# helper.IsStandardResourceName: names without a domain that any resource list may hold
_STANDARD_RESOURCES = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "resourcequotas", "services",
    "replicationcontrollers", "secrets", "configmaps", "persistentvolumeclaims", "storage", "requests.storage",
    "services.nodeports", "services.loadbalancers",
})


def _pod_resource_causes(path: str, name: str, amount: Fraction, raw: Any) -> list[Cause]:
    """validatePodResourceName (cpu, memory and hugepages only), then ValidateResourceQuantityValue."""
    problem = validate_label_key(name)
    if problem:
        return [invalid_value(path, name, problem)]
    if name not in ("cpu", "memory") and not is_hugepages(name):
        return [not_supported(path, name, POD_LEVEL_RESOURCES)]
    return [invalid_value(path, str(raw), "must be greater than or equal to 0")] if amount < 0 else []


def _container_resource_causes(path: str, name: str, amount: Fraction, raw: Any) -> list[Cause]:
    """validateContainerResourceName, then ValidateResourceQuantityValue."""
    causes: list[Cause] = []
    problem = validate_label_key(name)  # IsQualifiedName, the same rule as a label key
    if problem:
        causes.append(invalid_value(path, name, problem))
    elif "/" not in name and name not in _STANDARD_RESOURCES and not is_hugepages(name):
        causes.append(invalid_value(path, name, "must be a standard resource type or fully qualified"))
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not is_hugepages(name):
            return causes + [invalid_value(path, name, "must be a standard resource for containers")]
    elif not is_native(name) and not is_extended(name):
        return causes + [invalid_value(path, name, "doesn't follow extended resource name standard")]
    if amount < 0:
        causes.append(invalid_value(path, str(raw), "must be greater than or equal to 0"))
    if is_extended(name) and math.ceil(amount * 1000) % 1000 != 0:  # MilliValue()%1000
        causes.append(invalid_value(path, str(raw), "must be an integer"))
    return causes


def _port_causes(path: str, ports: Any) -> list[Cause]:
    """validateContainerPorts: port numbers in range, a supported protocol, unique names."""
    causes: list[Cause] = []
    names: set[str] = set()
    for i, port in enumerate(ports or []):
        where = f"{path}[{i}]"
        name = port.get("name") or ""
        if name:
            if name in names:
                causes.append(Cause(f"{where}.name", f'Duplicate value: "{name}"', "FieldValueDuplicate"))
            names.add(name)
        container_port = port.get("containerPort") or 0
        if not container_port:
            causes.append(required(f"{where}.containerPort"))
        elif not 1 <= int(container_port) <= 65535:
            causes.append(invalid_value(f"{where}.containerPort", container_port, PORT_RANGE_MSG))
        host_port = port.get("hostPort") or 0
        if host_port and not 1 <= int(host_port) <= 65535:
            causes.append(invalid_value(f"{where}.hostPort", host_port, PORT_RANGE_MSG))
        protocol = port.get("protocol")
        if not protocol:
            causes.append(required(f"{where}.protocol"))
        elif protocol not in ("SCTP", "TCP", "UDP"):
            causes.append(not_supported(f"{where}.protocol", protocol, ["SCTP", "TCP", "UDP"]))
    return causes


PORT_RANGE_MSG = "must be between 1 and 65535, inclusive"


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
    if old_gates:  # while gated, node selector and node affinity may change (mutable pod scheduling
        masked.pop("nodeSelector", None)  # directives), pod (anti-)affinity may not: its matchLabelKeys
        affinity = masked.get("affinity")  # were merged into its selectors at creation
        rest = {k: v for k, v in affinity.items() if k != "nodeAffinity"} if isinstance(affinity, dict) else {}
        if rest:
            masked["affinity"] = rest
        else:
            masked.pop("affinity", None)
    return masked


def pod_update_causes(old: Object, new: Object) -> list[Cause]:
    causes = pod_causes(new)
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    causes += gated_update_causes(old_spec, new_spec)
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
    return placement_causes(f"{path}.template.spec", pod_spec)


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
    causes += label_map_causes("spec.selector", spec.get("selector"))
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
    if resource == RUNTIME_CLASSES:
        return runtime_class_causes(obj)
    if resource == PERSISTENT_VOLUME_CLAIMS:
        return claim_causes(obj)
    if resource == PERSISTENT_VOLUMES:
        return volume_causes(obj)
    if resource == STORAGE_CLASSES:
        return storage_class_causes(obj)
    if resource == LIMIT_RANGES:
        from .limitranger import limit_range_causes

        return limit_range_causes(obj)
    return []


ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]

# PersistentVolumeSource's members: a PersistentVolume names exactly one
PV_SOURCES = frozenset({
    "gcePersistentDisk", "awsElasticBlockStore", "hostPath", "glusterfs", "nfs", "rbd", "iscsi", "cinder",
    "cephfs", "fc", "flocker", "flexVolume", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
    "photonPersistentDisk", "portworxVolume", "scaleIO", "local", "storageos", "csi",
})


def _access_mode_causes(path: str, modes: Any, required_detail: str) -> list[Cause]:
    if not modes:
        return [required(path, required_detail)]
    causes = [not_supported(path, m, ACCESS_MODES) for m in modes if m not in ACCESS_MODES]
    if "ReadWriteOncePod" in modes and any(m != "ReadWriteOncePod" and m in ACCESS_MODES for m in modes):
        causes.append(forbidden_field(path, "may not use ReadWriteOncePod with other access modes"))
    return causes


def claim_causes(pvc: Object) -> list[Cause]:
    """ValidatePersistentVolumeClaimSpec: access modes, a positive storage request, the volume mode."""
    spec = pvc.get("spec") or {}
    causes = _access_mode_causes("spec.accessModes", spec.get("accessModes"), "at least 1 access mode is required")
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if storage is None:
        causes.append(required("spec.resources[storage]"))
    elif parse_quantity(storage, "PersistentVolumeClaim") <= 0:
        causes.append(invalid_value("spec.resources[storage]", str(storage), "must be greater than zero"))
    mode = spec.get("volumeMode")
    if mode is not None and mode not in ("Block", "Filesystem"):
        causes.append(not_supported("spec.volumeMode", mode, ["Block", "Filesystem"]))
    return causes


def volume_causes(pv: Object) -> list[Cause]:
    """ValidatePersistentVolumeSpec, in part: access modes, a storage capacity, one volume source."""
    spec = pv.get("spec") or {}
    causes = _access_mode_causes("spec.accessModes", spec.get("accessModes"), "")
    capacity = spec.get("capacity") or {}
    if "storage" not in capacity:
        causes.append(required("spec.capacity"))
    sources = [k for k in spec if k in PV_SOURCES]
    if not sources:
        causes.append(required("spec", "must specify a volume type"))
    elif len(sources) > 1:
        causes.append(forbidden_field(f"spec.{sources[1]}", "may not specify more than 1 volume type"))
    return causes


def storage_class_causes(sc: Object) -> list[Cause]:
    causes: list[Cause] = []
    if not sc.get("provisioner"):
        causes.append(required("provisioner"))
    mode = sc.get("volumeBindingMode")
    if mode not in (None, "Immediate", "WaitForFirstConsumer"):
        causes.append(not_supported("volumeBindingMode", mode, ["Immediate", "WaitForFirstConsumer"]))
    return causes


def runtime_class_causes(rc: Object) -> list[Cause]:
    """ValidateRuntimeClass: the handler is a DNS label; overhead quantities are not negative."""
    causes: list[Cause] = []
    handler = rc.get("handler") or ""
    problem = dns1123_label_problem(handler) if isinstance(handler, str) else DNS1123_LABEL_MSG
    if problem:
        causes.append(invalid_value("handler", handler, problem))
    more, _ = _resource_list_causes("overhead.podFixed", (rc.get("overhead") or {}).get("podFixed"), "RuntimeClass")
    return causes + more
