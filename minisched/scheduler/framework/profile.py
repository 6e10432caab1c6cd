"""Profiles: which plugins run at each extension point, with which weights and args.

A profile is named by the schedulerName pods ask for. Profiles load from a YAML shaped like
kube-scheduler's KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) and merge with the
defaults the way kube-scheduler merges them: the defaults are "multiPoint" plugins; a plugin listed
again replaces its default entry in place (so its weight is the new one), `disabled` removes
defaults ("*" removes them all), and plugins enabled at a single extension point come first there.

    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    percentageOfNodesToScore: 100
    profiles:
    - schedulerName: minisched
      plugins:
        score:
          disabled: [{name: ImageLocality}]
          enabled: [{name: NodeResourcesFit, weight: 5}]
      pluginConfig:
      - name: NodeResourcesFit
        args: {scoringStrategy: {type: MostAllocated}}
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from minisched.objects import DEFAULT_SCHEDULER_NAME
from minisched.scheduler.framework.interface import EXTENSION_POINTS

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"


@dataclass(frozen=True)
class PluginRef:
    name: str
    weight: int = 0  # only meaningful for Score; 0 means "default" (1)


@dataclass(frozen=True)
class PluginSet:
    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[str, ...] = ()


# kube-scheduler's default multiPoint set (apis/config/v1/default_plugins.go, with the
# DynamicResources its applyFeatureGates adds), in its order.
DEFAULT_MULTI_POINT: tuple[PluginRef, ...] = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeRestrictions"),
    PluginRef("NodeVolumeLimits"),
    PluginRef("VolumeBinding"),
    PluginRef("VolumeZone"),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    # kube 1.35 adds DynamicResources (weight 2) before DefaultPreemption; minisched's has its
    # PostFilter ("no new claims to deallocate") and refuses pods with claims (see its module)
    PluginRef("DynamicResources", 2),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
)


@dataclass(frozen=True)
class Profile:
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    multi_point: PluginSet = PluginSet(DEFAULT_MULTI_POINT)
    points: Mapping[str, PluginSet] = field(default_factory=dict)  # per extension point, as written
    plugin_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None  # None: the configuration's (0 = adaptive)

    def plugin_names(self) -> list[str]:
        """Every plugin the profile may use, in first-mention order."""
        seen: dict[str, None] = {}
        for ref in self.multi_point.enabled:
            seen.setdefault(ref.name)
        for ps in self.points.values():
            for ref in ps.enabled:
                seen.setdefault(ref.name)
        return list(seen)

    def enabled_at(self, point: str, implements: Callable[[str], bool]) -> list[str]:
        """The plugins that run at `point`, in order (kube's expandMultiPointPlugins)."""
        specific = self.points.get(point, PluginSet())
        disabled = set(specific.disabled)
        enabled = [ref.name for ref in specific.enabled]
        if "*" in disabled:
            return enabled
        overrides: list[str] = []
        multi: list[str] = []
        for ref in self.multi_point.enabled:
            if not implements(ref.name) or ref.name in disabled:
                continue
            if ref.name in enabled:
                overrides.append(ref.name)
                continue
            if ref.name in multi:
                raise ValueError(f"profile {self.scheduler_name!r}: plugin {ref.name!r} is enabled twice in multiPoint")
            multi.append(ref.name)
        ordered = [n for n in enabled if n in overrides] + multi + [n for n in enabled if n not in overrides]
        return ordered

    def score_weight(self, name: str) -> int:
        """The weight of score plugin `name`: score-point setting first, then multiPoint; 0 -> 1."""
        for ref in self.points.get("score", PluginSet()).enabled:
            if ref.name == name:
                return ref.weight or 1
        for ref in self.multi_point.enabled:
            if ref.name == name:
                return ref.weight or 1
        return 1

    def args_for(self, name: str) -> Mapping[str, Any] | None:
        return self.plugin_args.get(name)


def default_profile(scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> Profile:
    return Profile(scheduler_name)


def _merge(default: PluginSet, custom: PluginSet) -> PluginSet:
    """kube's mergePluginSet: custom entries replace defaults of the same name in place."""
    disabled = set(custom.disabled) | set(default.disabled)
    custom_by_name = {ref.name: i for i, ref in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled:
        for ref in default.enabled:
            if ref.name in disabled:
                continue
            if ref.name in custom_by_name:
                i = custom_by_name[ref.name]
                ref = custom.enabled[i]
                replaced.add(i)
            enabled.append(ref)
    enabled += [ref for i, ref in enumerate(custom.enabled) if i not in replaced]
    return PluginSet(tuple(enabled), tuple(custom.disabled) + tuple(default.disabled))


def _plugin_set(raw: Any, where: str) -> PluginSet:
    if raw is None:
        return PluginSet()
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a map with enabled/disabled lists")
    unknown = set(raw) - {"enabled", "disabled"}
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}")
    enabled = []
    for i, p in enumerate(raw.get("enabled") or []):
        if not isinstance(p, Mapping) or not p.get("name"):
            raise ValueError(f"{where}.enabled[{i}] needs a name")
        weight = p.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
            raise ValueError(f"{where}.enabled[{i}].weight {weight!r} must be a non-negative integer")
        enabled.append(PluginRef(str(p["name"]), weight))
    disabled = []
    for i, p in enumerate(raw.get("disabled") or []):
        if not isinstance(p, Mapping) or not p.get("name"):
            raise ValueError(f"{where}.disabled[{i}] needs a name")
        disabled.append(str(p["name"]))
    return PluginSet(tuple(enabled), tuple(disabled))


def _percentage(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise ValueError(f"{where} {value!r} must be an integer in 0..100")
    return value


def profiles_from_config(config: Mapping[str, Any]) -> list[Profile]:
    """Profiles from a KubeSchedulerConfiguration object (already parsed from YAML/JSON)."""
    if config.get("apiVersion") != API_VERSION or config.get("kind") != KIND:
        raise ValueError(
            f"expected apiVersion {API_VERSION} and kind {KIND}, got "
            f"{config.get('apiVersion')!r} / {config.get('kind')!r}"
        )
    default_pct = _percentage(config.get("percentageOfNodesToScore"), "percentageOfNodesToScore")
    raw_profiles = config.get("profiles") or [{"schedulerName": DEFAULT_SCHEDULER_NAME}]
    profiles: list[Profile] = []
    names: set[str] = set()
    for i, raw in enumerate(raw_profiles):
        where = f"profiles[{i}]"
        name = str(raw.get("schedulerName") or DEFAULT_SCHEDULER_NAME)
        if name in names:
            raise ValueError(f"{where}: schedulerName {name!r} is used by two profiles")
        names.add(name)
        plugins = raw.get("plugins") or {}
        unknown = set(plugins) - set(EXTENSION_POINTS) - {"multiPoint"}
        if unknown:
            raise ValueError(f"{where}.plugins: unknown extension point(s) {sorted(unknown)}")
        multi = _merge(PluginSet(DEFAULT_MULTI_POINT), _plugin_set(plugins.get("multiPoint"), f"{where}.plugins.multiPoint"))
        points = {p: _plugin_set(plugins.get(p), f"{where}.plugins.{p}") for p in EXTENSION_POINTS if p in plugins}
        args: dict[str, Mapping[str, Any]] = {}
        for j, pc in enumerate(raw.get("pluginConfig") or []):
            if not isinstance(pc, Mapping) or not pc.get("name"):
                raise ValueError(f"{where}.pluginConfig[{j}] needs a name")
            if pc["name"] in args:
                raise ValueError(f"{where}.pluginConfig: {pc['name']!r} is configured twice")
            args[str(pc["name"])] = dict(pc.get("args") or {})
        pct = _percentage(raw.get("percentageOfNodesToScore"), f"{where}.percentageOfNodesToScore")
        profiles.append(Profile(name, multi, points, args, pct if pct is not None else default_pct))
    return profiles


def load_profiles(source: str | Path | Mapping[str, Any]) -> list[Profile]:
    """Profiles from a KubeSchedulerConfiguration: a path to a YAML file, YAML text, or a dict."""
    if isinstance(source, Mapping):
        return profiles_from_config(source)
    looks_like_path = isinstance(source, Path) or ("\n" not in source and ": " not in source)
    if looks_like_path:
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"scheduler configuration file {str(path)!r} does not exist")
        text = path.read_text()
    else:
        text = str(source)
    config = yaml.safe_load(text)
    if not isinstance(config, Mapping):
        raise ValueError("a KubeSchedulerConfiguration must be a YAML map")
    return profiles_from_config(config)


def plugins_by_point(profile: Profile, implements: Callable[[str, str], bool]) -> dict[str, Sequence[str]]:
    """{point: [plugin names]} for every extension point; `implements(plugin, point)`."""
    return {point: profile.enabled_at(point, functools.partial(_flip, implements, point)) for point in EXTENSION_POINTS}


def _flip(implements: Callable[[str, str], bool], point: str, name: str) -> bool:
    return implements(name, point)
