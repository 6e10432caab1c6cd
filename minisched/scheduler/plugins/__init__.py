"""The default plugins, one a module, each with its NAME, a pure per-node rule and the vectorised
framework methods; `in_tree_registry()` maps their names to factories."""

from __future__ import annotations

import importlib

from minisched.scheduler.framework.registry import Registry
from minisched.scheduler.plugins import (
    default_binder,
    image_locality,
    inter_pod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_resources_balanced_allocation,
    node_resources_fit,
    node_unschedulable,
    pod_topology_spread,
    priority_sort,
    scheduling_gates,
    taint_toleration,
)

_MODULES = (
    scheduling_gates,
    priority_sort,
    node_unschedulable,
    node_name,
    taint_toleration,
    node_affinity,
    node_ports,
    node_resources_fit,
    inter_pod_affinity,
    node_resources_balanced_allocation,
    image_locality,
    default_binder,
    pod_topology_spread,  # registered, not in the default profile (see its module)
)


def in_tree_registry() -> Registry:
    """Every built-in plugin, including DefaultPreemption when its module is present."""
    registry = Registry()
    for module in _MODULES:
        registry.register(module.NAME, module.new)
    try:  # DefaultPreemption lives with the runtime (it evicts through the API)
        preemption = importlib.import_module("minisched.scheduler.plugins.default_preemption")
    except ModuleNotFoundError as e:
        if e.name != "minisched.scheduler.plugins.default_preemption":
            raise
    else:
        registry.register(preemption.NAME, preemption.new)
    return registry
