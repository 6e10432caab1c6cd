"""PodInfo: everything the scheduler needs from a pod, parsed once and checked once.

kube-scheduler parses a pod's requests, tolerations and affinity each time a plugin asks; here a pod
is read once when it enters the queue, so the hot path touches only plain tuples and ints. A pod
that cannot be read (a malformed quantity, an unknown affinity operator) raises PodSpecError whose
message names the field and the bad text, so the runtime can put exactly that in FailedScheduling.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from minisched.clock import parse_rfc3339
from minisched.quantity import parse_quantity

Object = dict[str, Any]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# kube-scheduler scores a container that requests nothing as if it asked for this much
# (pkg/scheduler/util/pod_resources.go), so empty pods do not all pile onto one node.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class PodSpecError(ValueError):
    """A pod the scheduler cannot read. The message names the pod, the field and the problem."""


def is_scalar_resource(name: str) -> bool:
    """Resources kube-scheduler tracks besides cpu/memory/ephemeral-storage/pods: extended resources
    ("example.com/gpu"), hugepages-* and attachable-volumes-*. Other names are ignored, as in kube."""
    if name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


_INT64 = re.compile(r"^[+-]?[0-9]+$")


def parse_int64(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64), which Gt/Lt use: None unless a plain 64-bit integer
    (Python's int() would also take " 5" and "1_0")."""
    if not _INT64.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


# Amounts are capped so that sums of many pods times MaxNodeScore (100) still fit in int64:
# 2**56 is 64 PiB of memory or 7e13 cores, far beyond any node, and an absurd "1e30" cannot
# overflow the numpy arithmetic into nonsense.
MAX_AMOUNT = 2**56


def resource_amount(name: str, text: Any) -> int:
    """A request or allocatable in scheduler units: millicores for cpu, whole units otherwise."""
    if type(text) is str:  # the usual case: a few distinct texts ("100m", "1Gi") over and over
        return _text_amount(name == CPU, text)
    return _amount(name == CPU, text)


def _amount(milli: bool, text: Any) -> int:
    q = parse_quantity(text)
    amount = q.milli_value() if milli else q.value()
    return max(-MAX_AMOUNT, min(amount, MAX_AMOUNT))


# The Fraction arithmetic of an exact parse costs a few µs per quantity, most of parsing a pod;
# the result depends on the text alone, so it is kept (bounded: a cluster has few distinct texts).
_text_amount = functools.lru_cache(maxsize=4096)(_amount)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One matchExpressions / matchFields entry of a node selector term, already validated."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    number: int = 0  # the value of Gt/Lt

    def matches(self, labels: Mapping[str, str]) -> bool:
        """The pure, per-node meaning (kube's labels.Requirement.Matches)."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if not present:
            return False
        label = parse_int64(labels[self.key])
        if label is None:
            return False
        return label > self.number if self.operator == "Gt" else label < self.number


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """The requirements of a term are ANDed. A term with none matches no node (as in kube)."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()  # only metadata.name is a node field kube supports

    @property
    def is_empty(self) -> bool:
        return not self.expressions and not self.fields

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if self.is_empty:
            return False
        return all(r.matches(labels) for r in self.expressions) and all(
            r.matches({"metadata.name": node_name}) for r in self.fields
        )


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""  # "" tolerates every effect

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """kube's Toleration.ToleratesTaint."""
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == value


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector over pod labels: matchLabels and matchExpressions (In, NotIn, Exists,
    DoesNotExist), ANDed. The empty selector matches every pod."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One topologySpreadConstraint, with matchLabelKeys already folded into the selector."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule (a filter) or ScheduleAnyway (a score)
    selector: LabelSelector | None  # None: no labelSelector, which matches no pod
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"

    def counts(self, pod: PodInfo, namespace: str) -> bool:
        """Does `pod` count toward this constraint (same namespace, selected, not terminating)?"""
        return (
            self.selector is not None and pod.namespace == namespace and not pod.terminating
            and self.selector.matches(dict(pod.labels))
        )


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A pod as the scheduler sees it. `requests` are in scheduler units and count init and sidecar
    containers and overhead as kube-scheduler does; `nonzero_*` and `incoming_nonzero_*` are what
    scoring uses."""

    pod: Object = field(repr=False, compare=False)
    key: str
    namespace: str
    name: str
    uid: str
    requests: Mapping[str, int]  # without "pods": a pod always takes one pod slot
    nonzero_cpu: int  # what the pod counts for on its node (kube's PodInfo.CalculateResource)
    nonzero_memory: int
    # what the pod adds to NodeResourcesFit's score as the pod being scheduled (kube's
    # calculatePodResourceRequest): with pod-level requests, more than nonzero_* when a container
    # without a cpu or memory request sits beside one that has it, or beside overhead
    incoming_nonzero_cpu: int
    incoming_nonzero_memory: int
    priority: int = 0
    scheduler_name: str = ""
    node_name: str = ""
    nominated_node_name: str = ""
    tolerations: tuple[Toleration, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[NodeSelectorTerm, ...] | None = None  # None: no required node affinity
    preferred_terms: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    images: tuple[str, ...] = ()  # normalised, one per container (init containers included)
    scheduling_gates: tuple[str, ...] = ()
    created: float | None = None
    started: float | None = None
    labels: tuple[tuple[str, str], ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    terminating: bool = False  # metadata.deletionTimestamp is set
    pod_affinity: PodAffinity | None = None  # None: no podAffinity and no podAntiAffinity
    # values derived from the fields above, computed when first asked and kept (a PodInfo never
    # changes): e.g. the volume sources that four plugins sign every cycle (signature.volumes_signer).
    # Not an __init__ argument, so dataclasses.replace() starts a copy with none.
    memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_pod(cls, pod: Object, *, priority: int | None = None) -> PodInfo:
        """Parse `pod` (API JSON). `priority` overrides spec.priority (for a backend that does not
        resolve priorityClassName). Raises PodSpecError naming the pod and the bad field."""
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        key = f"{namespace}/{name}" if namespace else name
        try:
            return _parse(pod, meta, key, namespace, name, priority)
        except PodSpecError as e:
            raise PodSpecError(f"pod {key}: {e}") from None

    def request(self, resource: str) -> int:
        return self.requests.get(resource, 0)



def _parse(pod: Object, meta: Object, key: str, namespace: str, name: str, priority: int | None) -> PodInfo:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        raise PodSpecError("has no spec")
    containers = _list(spec, "containers")
    init_containers = _list(spec, "initContainers")
    requests, nonzero, incoming = _pod_requests(containers, init_containers, spec.get("overhead"),
                                                spec.get("resources"))
    if priority is None:
        raw = spec.get("priority", 0)
        if raw is None:
            raw = 0
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise PodSpecError(f"spec.priority {raw!r} is not an integer")
        priority = raw
    status = pod.get("status") or {}
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity")) or {}
    required_raw = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = None
    if required_raw is not None:
        terms = (required_raw or {}).get("nodeSelectorTerms") or []
        path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        required = tuple(_term(t, f"{path}[{i}]") for i, t in enumerate(terms))
    preferred = []
    for i, p in enumerate(affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        path = f"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        weight = p.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
            raise PodSpecError(f"{path}.weight {weight!r} must be an integer in 0..100")
        if weight:
            preferred.append((weight, _term(p.get("preference") or {}, f"{path}.preference")))
    raw_labels = meta.get("labels") or {}
    if not isinstance(raw_labels, dict):
        raise PodSpecError(f"metadata.labels {raw_labels!r} is not a map")
    labels = tuple(sorted((str(k), str(v)) for k, v in raw_labels.items()))
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, dict):
        raise PodSpecError(f"spec.nodeSelector {selector!r} is not a map")
    return PodInfo(
        pod=pod,
        key=key,
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        requests=requests,
        nonzero_cpu=nonzero.get(CPU, 0),
        nonzero_memory=nonzero.get(MEMORY, 0),
        incoming_nonzero_cpu=incoming.get(CPU, 0),
        incoming_nonzero_memory=incoming.get(MEMORY, 0),
        priority=priority,
        scheduler_name=str(spec.get("schedulerName") or ""),
        node_name=str(spec.get("nodeName") or ""),
        nominated_node_name=str(status.get("nominatedNodeName") or ""),
        tolerations=tuple(_toleration(t, i) for i, t in enumerate(spec.get("tolerations") or [])),
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        required_terms=required,
        preferred_terms=tuple(preferred),
        host_ports=_host_ports(containers, init_containers),
        images=tuple(normalized_image_name(str(c.get("image") or "")) for c in init_containers + containers),
        scheduling_gates=tuple(str(g.get("name") or "") for g in spec.get("schedulingGates") or []),
        created=_time(meta.get("creationTimestamp")),
        started=_time(status.get("startTime")),
        labels=labels,
        spread_constraints=tuple(
            _spread_constraint(c, i, dict(labels)) for i, c in enumerate(spec.get("topologySpreadConstraints") or [])
        ),
        terminating=bool(meta.get("deletionTimestamp")),
        pod_affinity=_pod_affinity(spec.get("affinity"), namespace),
    )


def _list(spec: Object, name: str) -> list[Object]:
    value = spec.get(name) or []
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise PodSpecError(f"spec.{name} is not a list of objects")
    return value


def _container_requests(container: Object, path: str) -> dict[str, int]:
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    if not isinstance(requests, dict) or not isinstance(limits, dict):
        raise PodSpecError(f"{path}.resources.requests/limits is not a map")
    # the API server defaults a missing request to its limit
    raw = {**limits, **requests} if limits else requests
    out: dict[str, int] = {}
    for resource, text in raw.items():
        if resource not in (CPU, MEMORY, EPHEMERAL_STORAGE) and not is_scalar_resource(resource):
            continue
        try:
            out[resource] = resource_amount(resource, text)
        except ValueError as e:
            raise PodSpecError(f"{path}.resources.requests[{resource}]: {e}") from None
    return out


def _non_missing(requests: dict[str, int], resources: Iterable[str] = (CPU, MEMORY)) -> dict[str, int]:
    """kube's NonMissingContainerRequests: a missing (not a zero) request of `resources` counts as
    the default."""
    defaults = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}
    if all(r in requests for r in resources):
        return requests
    out = dict(requests)
    for r in resources:
        out.setdefault(r, defaults[r])
    return out


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _pod_level_requests(raw: Any, containers: Mapping[str, int]) -> dict[str, int] | None:
    """spec.resources (pod-level resources, on by default since 1.34): the requests of the resources
    kube supports at pod level (cpu, memory, hugepages-*). A request missing beside a limit is
    defaulted as the API server does (defaultPodRequests): to the containers' aggregate request of
    an overcommittable resource if they set one, else to the limit. None when the pod sets no
    pod-level request (kube's IsPodLevelRequestsSet)."""
    if not raw:
        return None
    if not isinstance(raw, dict):
        raise PodSpecError("spec.resources is not a map")
    requests, limits = raw.get("requests") or {}, raw.get("limits") or {}
    if not isinstance(requests, dict) or not isinstance(limits, dict):
        raise PodSpecError("spec.resources.requests/limits is not a map")
    out: dict[str, int] = {}
    for resource, text in requests.items():
        if is_pod_level_resource(resource):
            out[resource] = _pod_level_amount("requests", resource, text)
    if limits:
        # defaultPodRequests: first the containers' aggregate of every overcommittable pod-level
        # resource (also one the limits leave out), then the limits
        for resource in (CPU, MEMORY):
            if resource in containers:
                out.setdefault(resource, containers[resource])
        for resource, text in limits.items():
            if is_pod_level_resource(resource) and resource not in out:
                out[resource] = _pod_level_amount("limits", resource, text)
    return out or None


def _pod_level_amount(field_name: str, resource: str, text: Any) -> int:
    try:
        return resource_amount(resource, text)
    except ValueError as e:
        raise PodSpecError(f"spec.resources.{field_name}[{resource}]: {e}") from None


def is_pod_level_resource(name: str) -> bool:
    """kube's IsSupportedPodLevelResource."""
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


def _pod_requests(
    containers: list[Object], init_containers: list[Object], overhead: Any, pod_level: Any = None
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """(requests, non-missing requests on a node, non-missing requests as the incoming pod): kube's
    resourcehelper.PodRequests without and with NonMissingContainerRequests, the latter as
    PodInfo.CalculateResource and as noderesources' calculatePodResourceRequest ask for it. Each
    container's quantities are parsed once for all three. Pod-level requests replace the
    containers' sum for the resources they set; overhead is added last."""
    app = [_container_requests(c, f"spec.containers[{i}]") for i, c in enumerate(containers)]
    init = [(_container_requests(c, f"spec.initContainers[{i}]"), c.get("restartPolicy") == "Always")
            for i, c in enumerate(init_containers)]
    extra: dict[str, int] = {}
    if overhead:
        if not isinstance(overhead, dict):
            raise PodSpecError("spec.overhead is not a map")
        for resource, text in overhead.items():
            if resource in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(resource):
                try:
                    extra[resource] = extra.get(resource, 0) + resource_amount(resource, text)
                except ValueError as e:
                    raise PodSpecError(f"spec.overhead[{resource}]: {e}") from None
    pod_requests = _pod_level_requests(pod_level, _sum_requests(app, init, {}) if pod_level else {})
    requests = _sum_requests(app, init, extra, pod_requests)
    # calculatePodResourceRequest (the incoming pod's part of NodeResourcesFit's score): every
    # container missing a cpu or memory request counts the default, whatever the pod level sets
    incoming = _sum_requests([_non_missing(r) for r in app], [(_non_missing(r), s) for r, s in init], extra,
                             pod_requests)
    if pod_requests is None:
        return requests, incoming, incoming
    # CalculateResource with pod-level requests (getNonMissingContainerRequests): the default
    # stands in only for a resource missing from the containers, the pod level and the overhead
    missing = [r for r in (CPU, MEMORY) if r not in requests]
    nonzero = _sum_requests([_non_missing(r, missing) for r in app],
                            [(_non_missing(r, missing), s) for r, s in init], extra, pod_requests)
    return requests, nonzero, incoming


def _sum_requests(
    app: list[dict[str, int]], init: list[tuple[dict[str, int], bool]], overhead: dict[str, int],
    pod_level: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """max(sum(containers) + sum(sidecars), each init container plus the sidecars started before
    it), then the pod-level requests in place of that for the resources they set, plus the pod
    overhead."""
    total: dict[str, int] = {}
    for reqs in app:
        _add(total, reqs)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for reqs, sidecar in init:
        if sidecar:  # a sidecar (restartPolicy Always) keeps running next to the app
            _add(total, reqs)
            _add(sidecars, reqs)
            _max(init_peak, sidecars)
        else:
            during = dict(reqs)
            _add(during, sidecars)
            _max(init_peak, during)
    _max(total, init_peak)
    if pod_level:
        total.update(pod_level)
    _add(total, overhead)
    return total


def _requirement(raw: Any, path: str, field_key: bool) -> Requirement:
    if not isinstance(raw, dict):
        raise PodSpecError(f"{path} is not an object")
    key, op = str(raw.get("key") or ""), raw.get("operator")
    values = raw.get("values") or []
    if not key:
        raise PodSpecError(f"{path}.key is empty")
    if not isinstance(values, list):
        raise PodSpecError(f"{path}.values is not a list")
    values_t = tuple(str(v) for v in values)
    if field_key:
        if key != "metadata.name":
            raise PodSpecError(f"{path}.key {key!r} is not a supported node field (only metadata.name)")
        if op not in ("In", "NotIn"):
            raise PodSpecError(f"{path}.operator {op!r} is not valid for a field (In or NotIn)")
    if op not in NODE_SELECTOR_OPERATORS:
        raise PodSpecError(
            f"{path}.operator {op!r} is not a valid node selector operator (one of {', '.join(NODE_SELECTOR_OPERATORS)})"
        )
    if op in ("In", "NotIn") and not values_t:
        raise PodSpecError(f"{path}: operator {op} needs at least one value")
    if op in ("Exists", "DoesNotExist") and values_t:
        raise PodSpecError(f"{path}: operator {op} takes no values, got {list(values_t)}")
    number = 0
    if op in ("Gt", "Lt"):
        if len(values_t) != 1:
            raise PodSpecError(f"{path}: operator {op} needs exactly one value, got {list(values_t)}")
        parsed = parse_int64(values_t[0])
        if parsed is None:
            raise PodSpecError(f"{path}: operator {op} needs an integer value, got {values_t[0]!r}")
        number = parsed
    return Requirement(key, op, values_t, number)


def _term(raw: Any, path: str) -> NodeSelectorTerm:
    if not isinstance(raw, dict):
        raise PodSpecError(f"{path} is not an object")
    exprs = raw.get("matchExpressions") or []
    fields = raw.get("matchFields") or []
    return NodeSelectorTerm(
        tuple(_requirement(e, f"{path}.matchExpressions[{i}]", False) for i, e in enumerate(exprs)),
        tuple(_requirement(f, f"{path}.matchFields[{i}]", True) for i, f in enumerate(fields)),
    )


def _label_selector(raw: Any, path: str) -> LabelSelector:
    if not isinstance(raw, dict):
        raise PodSpecError(f"{path} is not an object")
    reqs = []
    for key, value in (raw.get("matchLabels") or {}).items():
        reqs.append(Requirement(str(key), "In", (str(value),)))
    for i, e in enumerate(raw.get("matchExpressions") or []):
        r = _requirement(e, f"{path}.matchExpressions[{i}]", False)
        if r.operator in ("Gt", "Lt"):
            raise PodSpecError(f"{path}.matchExpressions[{i}].operator {r.operator!r} is not valid in a label selector")
        reqs.append(r)
    return LabelSelector(tuple(reqs))


def _spread_constraint(raw: Any, i: int, pod_labels: Mapping[str, str]) -> SpreadConstraint:
    path = f"spec.topologySpreadConstraints[{i}]"
    if not isinstance(raw, dict):
        raise PodSpecError(f"{path} is not an object")
    max_skew = raw.get("maxSkew")
    if isinstance(max_skew, bool) or not isinstance(max_skew, int) or max_skew < 1:
        raise PodSpecError(f"{path}.maxSkew {max_skew!r} must be an integer of at least 1")
    key = str(raw.get("topologyKey") or "")
    if not key:
        raise PodSpecError(f"{path}.topologyKey is empty")
    when = raw.get("whenUnsatisfiable")
    if when not in ("DoNotSchedule", "ScheduleAnyway"):
        raise PodSpecError(f"{path}.whenUnsatisfiable {when!r} is not DoNotSchedule or ScheduleAnyway")
    min_domains = raw.get("minDomains")
    if min_domains is not None and (isinstance(min_domains, bool) or not isinstance(min_domains, int)
                                    or min_domains < 1 or when != "DoNotSchedule"):
        raise PodSpecError(f"{path}.minDomains {min_domains!r} must be a positive integer, with DoNotSchedule")
    policies = {}
    for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
        value = raw.get(name) or default
        if value not in ("Honor", "Ignore"):
            raise PodSpecError(f"{path}.{name} {value!r} is not Honor or Ignore")
        policies[name] = value
    selector = None
    if raw.get("labelSelector") is not None:
        selector = _label_selector(raw["labelSelector"], f"{path}.labelSelector")
        # matchLabelKeys: the pod's own values for these keys narrow the selector (kube 1.27+)
        extra = tuple(
            Requirement(k, "In", (pod_labels[k],)) for k in raw.get("matchLabelKeys") or [] if k in pod_labels
        )
        selector = LabelSelector(selector.requirements + extra)
    return SpreadConstraint(
        max_skew, key, str(when), selector, min_domains, policies["nodeAffinityPolicy"], policies["nodeTaintsPolicy"]
    )


def spread_constraint(raw: Any, i: int, pod_labels: Mapping[str, str]) -> SpreadConstraint:
    """One topologySpreadConstraint parsed and checked (PodSpecError names the field); also how
    PodTopologySpreadArgs' default constraints are read."""
    return _spread_constraint(raw, i, pod_labels)


def _toleration(raw: Any, i: int) -> Toleration:
    path = f"spec.tolerations[{i}]"
    if not isinstance(raw, dict):
        raise PodSpecError(f"{path} is not an object")
    op = raw.get("operator") or "Equal"
    if op not in TOLERATION_OPERATORS:
        raise PodSpecError(f"{path}.operator {op!r} is not valid (Equal or Exists)")
    key, value, effect = str(raw.get("key") or ""), str(raw.get("value") or ""), str(raw.get("effect") or "")
    if not key and op != "Exists":
        raise PodSpecError(f"{path}: an empty key needs operator Exists")
    if op == "Exists" and value:
        raise PodSpecError(f"{path}: operator Exists takes no value, got {value!r}")
    if effect and effect not in TAINT_EFFECTS:
        raise PodSpecError(f"{path}.effect {effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
    return Toleration(key, op, value, effect)


def _host_ports(containers: Sequence[Object], init_containers: Sequence[Object] = ()) -> tuple[HostPort, ...]:
    """kube's GetHostPorts: the ports of the containers and of restartable (sidecar) init containers,
    which keep running beside them; a regular init container has exited before they start."""
    ports = []
    sidecars = [c for c in init_containers if c.get("restartPolicy") == "Always"]
    for c in [*sidecars, *containers]:  # kube's order
        for p in c.get("ports") or []:
            host_port = p.get("hostPort") or 0
            if isinstance(host_port, bool) or not isinstance(host_port, int) or not 0 <= host_port <= 65535:
                raise PodSpecError(f"container {c.get('name')!r} hostPort {host_port!r} is not a port number")
            if host_port > 0:
                ports.append(HostPort(host_port, str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "0.0.0.0")))
    return tuple(ports)


def normalized_image_name(name: str) -> str:
    """kube's ImageLocality normalisation: an image without a tag means ":latest"."""
    if name.rfind(":") <= name.rfind("/"):
        name += ":latest"
    return name


def _time(text: Any) -> float | None:
    if not text:
        return None
    try:
        return parse_rfc3339(str(text))
    except ValueError:
        return None


def parse_node_selector_term(raw: Any, path: str) -> NodeSelectorTerm:
    """A nodeSelectorTerm from API JSON (a pod's or a PersistentVolume's node affinity); raises
    PodSpecError naming `path` when it is malformed."""
    return _term(raw, path)


# ---- inter-pod affinity terms (InterPodAffinity reads them) ----
@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One PodAffinityTerm, parsed against its owner pod (kube's framework.AffinityTerm).

    `namespaces` is the explicit list, or the owner's own namespace when neither namespaces nor a
    namespaceSelector is given. `namespace_selector` None means none was given (it matches no
    namespace); the empty selector matches every namespace. matchLabelKeys / mismatchLabelKeys are
    not read here: kube-apiserver folds them into labelSelector when the pod is created."""

    selector: LabelSelector | None  # None: no labelSelector, which matches no pod
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None

    def matches(self, pod: PodInfo, namespace_labels: Mapping[str, str] | None) -> bool:
        """kube's AffinityTerm.Matches: `pod` is in one of the term's namespaces (by name, or by its
        namespace's labels, `namespace_labels`) and its labels match the selector."""
        if pod.namespace not in self.namespaces and not (
            self.namespace_selector is not None and self.namespace_selector.matches(namespace_labels or {})
        ):
            return False
        return self.selector is not None and self.selector.matches(dict(pod.labels))


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """A pod's podAffinity and podAntiAffinity, required and preferred."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_TOPOLOGY_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                           r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _affinity_term(raw: Any, path: str, namespace: str) -> AffinityTerm:
    if not isinstance(raw, dict):
        raise PodSpecError(f"{path} is not an object")
    key = str(raw.get("topologyKey") or "")
    if not key:
        raise PodSpecError(f"{path}.topologyKey is empty (kube requires one)")
    if not _TOPOLOGY_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise PodSpecError(f"{path}.topologyKey {key!r} is not a valid label key")
    selector = None
    if raw.get("labelSelector") is not None:
        selector = _label_selector(raw["labelSelector"], f"{path}.labelSelector")
        for r in selector.requirements:  # kube's LabelSelectorAsSelector refuses these
            for v in r.values:
                if len(v) > 63 or not _LABEL_VALUE.match(v):
                    raise PodSpecError(
                        f"{path}.labelSelector: values[{r.key}]: Invalid value: {v!r}: a valid label must be an empty "
                        "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
                        "an alphanumeric character")
    ns_selector = None
    if raw.get("namespaceSelector") is not None:
        ns_selector = _label_selector(raw["namespaceSelector"], f"{path}.namespaceSelector")
    names = raw.get("namespaces") or []
    if not isinstance(names, list):
        raise PodSpecError(f"{path}.namespaces is not a list")
    # kube's getNamespacesFromPodAffinityTerm: no namespaces and no selector -> the pod's own
    namespaces = frozenset(str(n) for n in names) if names or ns_selector is not None else frozenset({namespace})
    return AffinityTerm(selector, key, namespaces, ns_selector)


def _affinity_terms(raw: Any, path: str, namespace: str) -> tuple[AffinityTerm, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PodSpecError(f"{path} is not a list")
    return tuple(_affinity_term(t, f"{path}[{i}]", namespace) for i, t in enumerate(raw))


def _weighted_terms(raw: Any, path: str, namespace: str) -> tuple[WeightedAffinityTerm, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PodSpecError(f"{path} is not a list")
    out = []
    for i, w in enumerate(raw):
        if not isinstance(w, dict):
            raise PodSpecError(f"{path}[{i}] is not an object")
        weight = w.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise PodSpecError(f"{path}[{i}].weight {weight!r} must be an integer in 1..100")
        out.append(WeightedAffinityTerm(weight, _affinity_term(w.get("podAffinityTerm"), f"{path}[{i}].podAffinityTerm",
                                                               namespace)))
    return tuple(out)


def _pod_affinity(affinity: Any, namespace: str) -> PodAffinity | None:
    if not affinity:
        return None
    if not isinstance(affinity, dict):
        raise PodSpecError("spec.affinity is not an object")
    pa, anti = affinity.get("podAffinity"), affinity.get("podAntiAffinity")
    if pa is None and anti is None:
        return None
    for name, part in (("podAffinity", pa), ("podAntiAffinity", anti)):
        if part is not None and not isinstance(part, dict):
            raise PodSpecError(f"spec.affinity.{name} is not an object")
    pa, anti = pa or {}, anti or {}
    req, pref = "requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"
    return PodAffinity(
        _affinity_terms(pa.get(req), f"spec.affinity.podAffinity.{req}", namespace),
        _affinity_terms(anti.get(req), f"spec.affinity.podAntiAffinity.{req}", namespace),
        _weighted_terms(pa.get(pref), f"spec.affinity.podAffinity.{pref}", namespace),
        _weighted_terms(anti.get(pref), f"spec.affinity.podAntiAffinity.{pref}", namespace),
    )
