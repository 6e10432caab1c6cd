"""LimitRange: its defaulting and validation, and the LimitRanger admission plugin (on by default).

Follows plugin/pkg/admission/limitranger: on pod creation, the mutating step fills container (and
init container) requests and limits from each LimitRange's `Container` defaults and records what it
set in the kubernetes.io/limit-ranger annotation; the validating step refuses (403) a pod outside a
`Container` or `Pod` item's min, max or maxLimitRequestRatio, with the plugin's messages. Pod updates
are not checked (their resources cannot change). Not covered: `PersistentVolumeClaim` items.
"""

from __future__ import annotations

from typing import Any

from minisched.errors import Cause
from minisched.quantity import Quantity, canonical, parse_quantity
from minisched.selectors import validate_label_key

from .resource_names import overcommit_allowed
from .statuses import invalid_value, required

Object = dict[str, Any]

ANNOTATION = "kubernetes.io/limit-ranger"
LIMIT_TYPES = ["Container", "Pod", "PersistentVolumeClaim"]
_MAX_MILLI = (2**63 - 1) // 1000  # resource.MaxMilliValue


# --- the LimitRange object ------------------------------------------------------------------


def default_limit_range(lr: Object) -> None:
    """SetDefaults_LimitRangeItem: for `Container` items, default <- max, defaultRequest <- default <- min."""
    for item in (lr.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        default = item.setdefault("default", {})
        default_request = item.setdefault("defaultRequest", {})
        for key, value in (item.get("max") or {}).items():
            default.setdefault(key, value)
        for key, value in default.items():
            default_request.setdefault(key, value)
        for key, value in (item.get("min") or {}).items():
            default_request.setdefault(key, value)


def limit_range_causes(lr: Object) -> list[Cause]:
    """ValidateLimitRange: known item types, each once; then per resource min <= defaultRequest <=
    default <= max, ratios >= 1, and default == defaultRequest where overcommit is not allowed."""

    causes: list[Cause] = []
    seen: set[str] = set()
    for i, item in enumerate((lr.get("spec") or {}).get("limits") or []):
        path = f"spec.limits[{i}]"
        kind = str(item.get("type") or "")
        problem = validate_label_key(kind)
        if problem:
            causes.append(invalid_value(f"{path}.type", kind, problem))
        elif "/" not in kind and kind not in LIMIT_TYPES:
            causes.append(invalid_value(f"{path}.type", kind, "must be a standard limit type or fully qualified"))
        if kind in seen:
            causes.append(Cause(f"{path}.type", f'Duplicate value: "{kind}"', "FieldValueDuplicate"))
        seen.add(kind)
        lists = {f: {k: parse_quantity(v) for k, v in (item.get(f) or {}).items()}
                 for f in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")}
        if kind == "Pod":
            for field in ("default", "defaultRequest"):
                if item.get(field):
                    causes.append(Cause(f"{path}.{field}", "Forbidden: may not be specified when `type` is 'Pod'",
                                        "FieldValueForbidden"))
                lists[field] = {}
        if kind == "PersistentVolumeClaim" and "storage" not in lists["min"] and "storage" not in lists["max"]:
            causes.append(required(f"{path}.limits", "either minimum or maximum storage value is required, but "
                                                     "neither was provided"))
        keys = set().union(*(set(v) for v in lists.values()))
        for k in sorted(keys):
            low, high = lists["min"].get(k), lists["max"].get(k)
            default, request = lists["default"].get(k), lists["defaultRequest"].get(k)
            ratio = lists["maxLimitRequestRatio"].get(k)
            if low is not None and high is not None and low.amount > high.amount:
                causes.append(invalid_value(f"{path}.min[{k}]", str(low), f"min value {low} is greater than max value "
                                                                          f"{high}"))
            if request is not None and low is not None and low.amount > request.amount:
                causes.append(invalid_value(f"{path}.defaultRequest[{k}]", str(request),
                                            f"min value {low} is greater than default request value {request}"))
            if request is not None and high is not None and request.amount > high.amount:
                causes.append(invalid_value(f"{path}.defaultRequest[{k}]", str(request),
                                            f"default request value {request} is greater than max value {high}"))
            if request is not None and default is not None and request.amount > default.amount:
                causes.append(invalid_value(f"{path}.defaultRequest[{k}]", str(request),
                                            f"default request value {request} is greater than default limit value "
                                            f"{default}"))
            if default is not None and low is not None and low.amount > default.amount:
                causes.append(invalid_value(f"{path}.default[{k}]", str(low),
                                            f"min value {low} is greater than default value {default}"))
            if default is not None and high is not None and default.amount > high.amount:
                causes.append(invalid_value(f"{path}.default[{k}]", str(high),
                                            f"default value {default} is greater than max value {high}"))
            if ratio is not None and ratio.amount < 1:
                causes.append(invalid_value(f"{path}.maxLimitRequestRatio[{k}]", str(ratio),
                                            f"ratio {ratio} is less than 1"))
            if (not overcommit_allowed(k) and default is not None and request is not None
                    and default.amount != request.amount):
                causes.append(invalid_value(f"{path}.defaultRequest[{k}]", str(request),
                                            f"default value {default} must equal to defaultRequest value {request} "
                                            f"in {k}"))
    return causes


# --- admission: the mutating step -------------------------------------------------------------


def apply_defaults(pod: Object, limit_ranges: list[Object]) -> None:
    """LimitRanger's Admit: each LimitRange in turn fills what its `Container` items default."""
    for lr in limit_ranges:
        requests: Object = {}
        limits: Object = {}
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type") == "Container":
                requests.update(item.get("defaultRequest") or {})
                limits.update(item.get("default") or {})
        if not requests and not limits:
            continue
        notes: list[str] = []
        spec = pod.get("spec") or {}
        for group, prefix in (("containers", "container"), ("initContainers", "init container")):
            for c in spec.get(group) or []:
                notes += _merge(c, requests, limits, prefix)
        if notes:
            pod["metadata"].setdefault("annotations", {})[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def _merge(container: Object, requests: Object, limits: Object, prefix: str) -> list[str]:
    resources = container.setdefault("resources", {})
    have_limits = resources.setdefault("limits", {})
    have_requests = resources.setdefault("requests", {})
    set_limits = sorted(k for k in limits if k not in have_limits)
    set_requests = sorted(k for k in requests if k not in have_requests)
    for k in set_limits:
        have_limits[k] = limits[k]
    for k in set_requests:
        have_requests[k] = requests[k]
    if not have_limits:
        del resources["limits"]
    if not have_requests:
        del resources["requests"]
    notes = []
    name = container.get("name") or ""
    if set_requests:
        notes.append(", ".join(set_requests) + f" request for {prefix} {name}")
    if set_limits:
        notes.append(", ".join(set_limits) + f" limit for {prefix} {name}")
    return notes


# --- admission: the validating step -----------------------------------------------------------


def violations(pod: Object, limit_range: Object) -> list[str]:
    """PodValidateLimitFunc: what `pod` breaks of one LimitRange (the 403's reasons, in order)."""
    errors: list[str] = []
    spec = pod.get("spec") or {}
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        kind = item.get("type")
        if kind == "Container":
            for c in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
                res = c.get("resources") or {}
                errors += _constraints(kind, item, _quantities(res.get("requests")), _quantities(res.get("limits")))
        elif kind == "Pod":
            errors += _constraints(kind, item, _pod_total(spec, "requests"), _pod_total(spec, "limits"))
    return errors


def _quantities(resource_list: Any) -> dict[str, Quantity]:
    return {k: parse_quantity(v) for k, v in (resource_list or {}).items()}


def _pod_total(spec: Object, field: str) -> dict[str, Quantity]:
    """limitranger's podRequests/podLimits: containers and sidecars summed, the largest init step."""
    total: dict[str, Quantity] = {}
    for c in spec.get("containers") or []:
        _add(total, _quantities((c.get("resources") or {}).get(field)))
    sidecars: dict[str, Quantity] = {}
    init_peak: dict[str, Quantity] = {}
    for c in spec.get("initContainers") or []:
        own = _quantities((c.get("resources") or {}).get(field))
        if c.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            step = dict(sidecars)
        else:
            step = dict(own)
            _add(step, sidecars)
        for k, q in step.items():
            if k not in init_peak or q.amount > init_peak[k].amount:
                init_peak[k] = q
    for k, q in init_peak.items():
        if k not in total or q.amount > total[k].amount:
            total[k] = q
    # pod-level resources (on by default since 1.34) override the sums for cpu and memory
    for k, q in _quantities((spec.get("resources") or {}).get(field)).items():
        if k in ("cpu", "memory"):
            total[k] = q
    return total


def _add(into: dict[str, Quantity], more: dict[str, Quantity]) -> None:
    for k, q in more.items():
        into[k] = into[k] + q if k in into else q


def _compared(request: Quantity | None, limit: Quantity | None, enforced: Quantity) -> tuple[int, int, int]:
    """requestLimitEnforcedValues: milli-units where nothing overflows, whole units otherwise."""
    values = [q.value() if q is not None else 0 for q in (request, limit, enforced)]
    if all(v <= _MAX_MILLI for v in values):
        values = [q.milli_value() if q is not None else 0 for q in (request, limit, enforced)]
    return values[0], values[1], values[2]


def _constraints(kind: str, item: Object, requests: dict[str, Quantity], limits: dict[str, Quantity]) -> list[str]:
    errors: list[str] = []
    for name, raw in (item.get("min") or {}).items():
        enforced = parse_quantity(raw)
        req, lim = requests.get(name), limits.get(name)
        req_v, lim_v, enf_v = _compared(req, lim, enforced)
        if req is None:
            errors.append(f"minimum {name} usage per {kind} is {canonical(enforced)}.  No request is specified")
        elif req_v < enf_v:
            errors.append(f"minimum {name} usage per {kind} is {canonical(enforced)}, but request is {canonical(req)}")
        elif lim is not None and lim_v < enf_v:
            errors.append(f"minimum {name} usage per {kind} is {canonical(enforced)}, but limit is {canonical(lim)}")
    for name, raw in (item.get("max") or {}).items():
        enforced = parse_quantity(raw)
        req, lim = requests.get(name), limits.get(name)
        req_v, lim_v, enf_v = _compared(req, lim, enforced)
        if lim is None:
            errors.append(f"maximum {name} usage per {kind} is {canonical(enforced)}.  No limit is specified")
        elif lim_v > enf_v:
            errors.append(f"maximum {name} usage per {kind} is {canonical(enforced)}, but limit is {canonical(lim)}")
        elif req is not None and req_v > enf_v:
            errors.append(f"maximum {name} usage per {kind} is {canonical(enforced)}, but request is {canonical(req)}")
    for name, raw in (item.get("maxLimitRequestRatio") or {}).items():
        enforced = parse_quantity(raw)
        req, lim = requests.get(name), limits.get(name)
        req_v, lim_v, _ = _compared(req, lim, enforced)
        if req is None or req_v == 0:
            errors.append(f"{name} max limit to request ratio per {kind} is {canonical(enforced)}, but no request "
                          "is specified or request is 0")
            continue
        if lim is None or lim_v == 0:
            errors.append(f"{name} max limit to request ratio per {kind} is {canonical(enforced)}, but no limit "
                          "is specified or limit is 0")
            continue
        ratio = lim_v / req_v
        observed, allowed = ratio, float(enforced.value())
        if enforced.value() <= _MAX_MILLI:
            observed, allowed = ratio * 1000, float(enforced.milli_value())
        if observed > allowed:
            errors.append(f"{name} max limit to request ratio per {kind} is {canonical(enforced)}, but provided "
                          f"ratio is {ratio:f}")
    return errors
