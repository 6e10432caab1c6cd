"""Resource names as kube's validation helpers classify them (pkg/apis/core/helper): shared by
validation and the LimitRanger admission, neither of which may import the other."""

from __future__ import annotations


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_native(name: str) -> bool:
    """helper.IsNativeResource: no domain, or a kubernetes.io one."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain outside kubernetes.io, and not a quota "requests." name."""
    return not is_native(name) and not name.startswith("requests.")


def overcommit_allowed(name: str) -> bool:
    """helper.IsOvercommitAllowed: requests may sit below limits only for native, non-hugepage resources."""
    return is_native(name) and not is_hugepages(name)
