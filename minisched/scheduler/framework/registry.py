"""Registry: plugin name -> factory(args, handle), as kube's runtime.Registry.

Out-of-tree plugins are added the same way the built-in ones are:
    registry = in_tree_registry(); registry.register("MyPlugin", lambda args, handle: MyPlugin(args))
or, from another installed package, as a Python entry point in the group `minisched.plugins`
whose name is the plugin's name and whose object is its factory (or a module with `new`):

    [project.entry-points."minisched.plugins"]
    NodeLabelScore = "minisched_plugin_example.node_label_score:new"

`entry_point_registry()` lists them without importing them; a plugin's module is imported the first
time a profile asks for it, so an installed but unused plugin costs nothing and cannot break others.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from minisched.scheduler.framework.interface import Handle, Plugin

# The framework always passes a Handle (its own copy: a SimpleHandle when it was given none).
PluginFactory = Callable[[Mapping[str, Any] | None, Handle], Plugin]


class Registry(dict[str, PluginFactory]):
    def register(self, name: str, factory: PluginFactory) -> None:
        if name in self:
            raise ValueError(f"a plugin named {name!r} is already registered")
        self[name] = factory

    def unregister(self, name: str) -> None:
        if name not in self:
            raise KeyError(f"no plugin named {name!r} is registered")
        del self[name]

    def merged(self, other: Mapping[str, PluginFactory]) -> Registry:
        out = Registry(self)
        for name, factory in other.items():
            out.register(name, factory)
        return out

    def create(self, name: str, args: Mapping[str, Any] | None, handle: Handle) -> Plugin:
        factory = self.get(name)
        if factory is None:
            known = ", ".join(sorted(self))
            raise ValueError(f"plugin {name!r} is not registered (registered: {known})")
        plugin = factory(args, handle)
        if getattr(plugin, "name", None) != name:
            raise ValueError(f"factory for {name!r} made a plugin named {getattr(plugin, 'name', None)!r}")
        return plugin


ENTRY_POINT_GROUP = "minisched.plugins"


class PluginLoadError(ValueError):
    """An entry point names a plugin that cannot be imported or is not a factory."""


def entry_point_registry(group: str = ENTRY_POINT_GROUP) -> Registry:
    """A factory per entry point in `group`, loading its target on first use."""
    registry = Registry()
    for ep in installed_entry_points(group):
        registry.register(ep.name, _lazy(ep))
    return registry


@functools.lru_cache(maxsize=8)
def installed_entry_points(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of `group`, scanned once per process (a scan reads every installed
    distribution's metadata, ~15 ms; call installed_entry_points.cache_clear() after installing)."""
    return tuple(sorted(entry_points(group=group), key=lambda e: e.name))


def _lazy(ep: EntryPoint) -> PluginFactory:
    loaded: list[PluginFactory] = []

    def factory(args: Mapping[str, Any] | None, handle: Handle) -> Plugin:
        if not loaded:
            loaded.append(_load(ep))
        return loaded[0](args, handle)

    return factory


def _load(ep: EntryPoint) -> PluginFactory:
    where = f"entry point {ep.name} = {ep.value!r} (group {ep.group}"
    where += f", from {ep.dist.name} {ep.dist.version})" if ep.dist is not None else ")"
    try:
        target = ep.load()
    except Exception as err:  # an import error in someone else's package: say whose
        raise PluginLoadError(f"{where} cannot be loaded: {type(err).__name__}: {err}") from err
    factory = getattr(target, "new", target)  # a module with new(args, handle), or the factory itself
    if not callable(factory):
        raise PluginLoadError(f"{where} is neither a plugin factory nor a module with new(args, handle)")
    return factory
