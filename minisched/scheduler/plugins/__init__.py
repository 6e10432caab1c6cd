"""The default plugins, one a module, each with its NAME, a pure per-node rule and the vectorised
framework methods; `in_tree_registry()` maps their names to factories, and `default_registry()`
adds the out-of-tree plugins installed as entry points (group `minisched.plugins`)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from minisched.scheduler.framework.interface import Handle, Plugin
from minisched.scheduler.framework.registry import ENTRY_POINT_GROUP, Registry, entry_point_registry
from minisched.scheduler.plugins import (
    constraints,
    coscheduling,
    default_binder,
    dynamic_resources,
    image_locality,
    inter_pod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_resources_balanced_allocation,
    node_resources_fit,
    node_unschedulable,
    node_volume_limits,
    pod_dependencies,
    pod_topology_spread,
    priority_sort,
    scheduling_gates,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
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
    volume_restrictions,
    node_volume_limits,
    volume_binding,
    volume_zone,
    inter_pod_affinity,
    node_resources_balanced_allocation,
    image_locality,
    default_binder,
    pod_topology_spread,
    dynamic_resources,
    pod_dependencies,  # registered, not in the default profile (see its module)
    coscheduling,  # registered, not in the default profile (see its module)
    constraints,  # registered, not in the default profile (see its module)
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
    registry.register("WasmPlugin", _wasm_plugin)
    return registry


def _wasm_plugin(args: Mapping[str, Any] | None, handle: Handle | None) -> Plugin:
    """WasmPlugin, imported when a profile uses it (wasmtime is a heavy import)."""
    from minisched.scheduler.plugins import wasm

    return wasm.new(args, handle)


def default_registry(group: str = ENTRY_POINT_GROUP) -> Registry:
    """The in-tree plugins plus every plugin installed under the entry-point `group` (kube's
    scheduler binary built with out-of-tree plugins: app.WithPlugin). A name clash is an error."""
    return in_tree_registry().merged(entry_point_registry(group))
