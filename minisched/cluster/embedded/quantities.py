"""Quantities in stored objects, written back in canonical form, as kube-apiserver writes them.

A resource.Quantity is decoded from the request and encoded again with Quantity.String(), so what a
client reads back is the canonical text: "1000m" -> "1", "0.5" -> "500m", "2048Mi" -> "2Gi", and a
malformed one fails decoding (400 BadRequest) before any admission or validation runs. This module
knows where each built-in kind keeps its quantities.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

from minisched.errors import BadRequest
from minisched.quantity import canonical, parse_quantity
from minisched.resources import (
    LIMIT_RANGES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    RUNTIME_CLASSES,
    Resource,
)

from .validation import parse_quantity as check_quantity

Object = dict[str, Any]
_ResourceLists = Callable[[Object], Iterator[Object]]


def canonicalize(resource: Resource, obj: Object) -> None:
    """Rewrite every quantity of `obj` in place in its canonical text; 400 for a malformed one."""
    walker = _WALKERS.get(resource)
    if walker is None:
        return
    for resource_list in walker(obj):
        for name, raw in list(resource_list.items()):
            resource_list[name] = canonical_text(raw, resource.kind)
    if resource == PODS:  # the one quantity that is not in a resource list
        for v in _get(obj, "spec", "volumes") or []:
            empty_dir = _get(v, "emptyDir")
            if isinstance(empty_dir, dict) and empty_dir.get("sizeLimit") is not None:
                empty_dir["sizeLimit"] = canonical_text(empty_dir["sizeLimit"], resource.kind)


def canonical_text(raw: Any, kind: str) -> str:
    if isinstance(raw, str):
        return _canonical_str(raw, kind)
    check_quantity(raw, kind)
    return canonical(parse_quantity(raw))


@lru_cache(maxsize=4096)
def _canonical_str(raw: str, kind: str) -> str:
    check_quantity(raw, kind)  # the real server's 400 and its wording
    try:
        return canonical(parse_quantity(raw))
    except ValueError:
        raise BadRequest(f'{kind} in version "v1" cannot be handled as a {kind}: unable to parse quantity '
                         f"{raw!r}") from None


def _dicts(*candidates: Any) -> Iterator[Object]:
    for c in candidates:
        if isinstance(c, dict):
            yield c


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _requirements(res: Any) -> Iterator[Object]:
    if isinstance(res, dict):
        yield from _dicts(res.get("requests"), res.get("limits"))


def _pod(pod: Object) -> Iterator[Object]:
    spec = pod.get("spec")
    if isinstance(spec, dict):
        for group in ("initContainers", "containers", "ephemeralContainers"):
            for c in spec.get(group) or []:
                if isinstance(c, dict):
                    yield from _requirements(c.get("resources"))
        yield from _dicts(spec.get("overhead"))
        yield from _requirements(spec.get("resources"))
        for v in spec.get("volumes") or []:
            if isinstance(v, dict):
                yield from _requirements(_get(v, "ephemeral", "volumeClaimTemplate", "spec", "resources"))
    status = pod.get("status")
    if isinstance(status, dict):
        yield from _requirements(status.get("resources"))
        for group in ("initContainerStatuses", "containerStatuses"):
            for cs in status.get(group) or []:
                if isinstance(cs, dict):
                    yield from _dicts(cs.get("allocatedResources"))
                    yield from _requirements(cs.get("resources"))


def _node(node: Object) -> Iterator[Object]:
    yield from _dicts(_get(node, "status", "capacity"), _get(node, "status", "allocatable"))


def _limit_range(lr: Object) -> Iterator[Object]:
    for item in _get(lr, "spec", "limits") or []:
        if isinstance(item, dict):
            yield from _dicts(*(item.get(k) for k in ("max", "min", "default", "defaultRequest",
                                                       "maxLimitRequestRatio")))


def _runtime_class(rc: Object) -> Iterator[Object]:
    yield from _dicts(_get(rc, "overhead", "podFixed"))


def _claim(pvc: Object) -> Iterator[Object]:
    yield from _requirements(_get(pvc, "spec", "resources"))
    yield from _dicts(_get(pvc, "status", "capacity"), _get(pvc, "status", "allocatedResources"))


def _volume(pv: Object) -> Iterator[Object]:
    yield from _dicts(_get(pv, "spec", "capacity"))


_WALKERS: dict[Resource, _ResourceLists] = {
    PODS: _pod,
    NODES: _node,
    LIMIT_RANGES: _limit_range,
    RUNTIME_CLASSES: _runtime_class,
    PERSISTENT_VOLUME_CLAIMS: _claim,
    PERSISTENT_VOLUMES: _volume,
}
