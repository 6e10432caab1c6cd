"""Registry: plugin name -> factory(args, handle), as kube's runtime.Registry.

Out-of-tree plugins are added the same way the built-in ones are:
    registry = in_tree_registry(); registry.register("MyPlugin", lambda args, handle: MyPlugin(args))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from minisched.scheduler.framework.interface import Handle, Plugin

PluginFactory = Callable[[Mapping[str, Any] | None, Handle | None], Plugin]


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

    def create(self, name: str, args: Mapping[str, Any] | None, handle: Handle | None) -> Plugin:
        factory = self.get(name)
        if factory is None:
            known = ", ".join(sorted(self))
            raise ValueError(f"plugin {name!r} is not registered (registered: {known})")
        plugin = factory(args, handle)
        if getattr(plugin, "name", None) != name:
            raise ValueError(f"factory for {name!r} made a plugin named {getattr(plugin, 'name', None)!r}")
        return plugin
