"""Small helpers over objects' metadata, as client-go's meta and cache key functions."""

from __future__ import annotations

import copy
from typing import Any

Object = dict[str, Any]


def name_of(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def namespace_of(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def uid_of(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def resource_version_of(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def labels_of(obj: Object) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Object) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def key_of(obj: Object) -> str:
    """client-go's MetaNamespaceKeyFunc: "namespace/name", or "name" for cluster-scoped objects."""
    meta = obj.get("metadata") or {}  # name_of/namespace_of inlined: called several times per watch event
    name = meta.get("name")
    if not name:
        raise ValueError("object has no metadata.name, so it has no key")
    ns = meta.get("namespace")
    return f"{ns}/{name}" if ns else str(name)


def split_key(key: str) -> tuple[str, str]:
    """(namespace, name) of a key; namespace is "" for cluster-scoped keys."""
    parts = key.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format: {key!r}")


def deep_copy(obj: Object) -> Object:
    return copy.deepcopy(obj)
