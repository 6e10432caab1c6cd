"""SchedulerPluginConfig: a custom resource that sets a profile's plugins at run time (Part II §4.1).

    apiVersion: scheduling.minisched.dev/v1alpha1
    kind: SchedulerPluginConfig
    metadata: {name: minisched}            # the profile (schedulerName) it configures
    spec:
      plugins:
      - {name: NodeResourcesFit, weight: 5}
      - {name: ImageLocality, enabled: false}
      - {name: WasmPlugin, weight: 2, args: {path: /labs/scorer.wat}}
      percentageOfNodesToScore: 50

Each entry changes kube's default multiPoint set as a KubeSchedulerConfiguration profile would: an
enabled plugin is added (or its default entry replaced, so its weight is the new one), a disabled
one removed, args become its pluginConfig. Deleting the object returns the profile to the one the
scheduler started with.

The CRD is generated from the pydantic model with the chapter 3.1 machinery, so the API server
itself refuses what the model refuses, with a 422: a plugin name outside the registry (an enum), a
weight outside 1..100, a weight on a plugin that does not score (a CEL rule). What the schema
cannot know (a wasm file that does not exist, args a plugin rejects) is found when the controller
builds the framework: the old framework keeps running, and the object's status gets the condition
Applied=False with the reason, plus a Warning event.

The controller (controller-runtime shaped: informer -> work queue -> reconcile(request)) never edits
a running framework: it builds a whole new one and hands it to `Scheduler.swap_framework`, which the
scheduling loop takes between two cycles. kube-scheduler does not do this at all: its plugin set is
fixed for the life of the process (a new configuration means a restart; scheduler-plugins#137
asked for hot reload and was closed). Volcano reloads, and once shipped a reload that never reached
its running workers (volcano#5553): hence a swap at the cycle boundary and a test of it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from minisched.clock import Clock, RealClock, rfc3339
from minisched.cluster.base import Cluster
from minisched.controllers.controller import Controller
from minisched.controllers.reconciler import Kind, Request, Result, raw_kind
from minisched.errors import ApiError, NotFound
from minisched.informer import SharedInformerFactory
from minisched.resources import Resource
from minisched.scheduler.framework.profile import API_VERSION as CONFIG_API_VERSION
from minisched.scheduler.framework.profile import KIND as CONFIG_KIND
from minisched.scheduler.framework.profile import Profile, profiles_from_config
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.scheduler import Scheduler
from minisched.validation.crd import crd_for
from minisched.validation.model import ResourceModel, cel_rules

Object = dict[str, Any]
log = logging.getLogger(__name__)

GROUP = "scheduling.minisched.dev"
VERSION = "v1alpha1"
KIND = "SchedulerPluginConfig"
PLURAL = "schedulerpluginconfigs"
APPLIED = "Applied"


def _registered_plugins() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every in-tree plugin name, those that Score), from the registry itself, so the CRD's enum
    never drifts from what the scheduler can build."""
    from minisched.scheduler.framework.interface import ScorePlugin
    from minisched.scheduler.framework.runtime import SimpleHandle
    from minisched.scheduler.plugins import in_tree_registry

    names, scores = [], []
    for name, factory in in_tree_registry().items():
        names.append(name)
        if name == "WasmPlugin":  # scores when its module exports score; cannot be built without one
            scores.append(name)
            continue
        try:
            plugin = factory(None, SimpleHandle())
        except Exception:  # a plugin that needs args to exist: not asked about weights here
            continue
        if isinstance(plugin, ScorePlugin):
            scores.append(name)
    return tuple(names), tuple(scores)


PLUGIN_NAMES, SCORE_PLUGINS = _registered_plugins()
if TYPE_CHECKING:
    PluginName = str
else:
    PluginName = Literal[PLUGIN_NAMES]  # the registry's names, an enum in the CRD
MAX_WEIGHT = 100


class PluginEntry(ResourceModel):
    model_config = cel_rules({
        "rule": "!has(self.weight) || self.name in [" + ", ".join(f"'{n}'" for n in SCORE_PLUGINS) + "]",
        "message": "weight is only meaningful for Score plugins",
        "fieldPath": ".weight",
    })

    # maxLength bounds the CEL rule's estimated cost on a real API server (an unbounded string is
    # costed as if it could fill the whole request)
    name: PluginName = Field(description="A plugin in minisched's registry.", json_schema_extra={"maxLength": 64})
    weight: int | None = Field(None, ge=1, le=MAX_WEIGHT, description="Score weight, 1..100.")
    enabled: bool = Field(True, description="false removes the plugin from the profile.")
    args: dict[str, Any] | None = Field(None, description="The plugin's args (its pluginConfig).")


class SchedulerPluginConfigSpec(ResourceModel):
    plugins: list[PluginEntry] = Field(max_length=32, description="Changes to kube's default plugin set.")
    percentage_of_nodes_to_score: int | None = Field(None, ge=0, le=100)


class Condition(ResourceModel):
    type: str = Field(max_length=64)
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(max_length=128)
    message: str = Field(max_length=4096)
    observed_generation: int | None = None
    last_transition_time: str | None = None


class SchedulerPluginConfigStatus(ResourceModel):
    observed_generation: int | None = None
    applied_plugins: list[str] | None = None
    conditions: list[Condition] | None = None


class SchedulerPluginConfig(ResourceModel):
    api_version: Literal["scheduling.minisched.dev/v1alpha1"]
    kind: Literal["SchedulerPluginConfig"]
    metadata: dict[str, Any]
    spec: SchedulerPluginConfigSpec


SCHEDULER_PLUGIN_CONFIG_CRD: dict[str, Any] = crd_for(
    SchedulerPluginConfigSpec,
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural=PLURAL,
    short_names=["spc"],
    scope="Cluster",
    status=SchedulerPluginConfigStatus,
    printer_columns=[{"name": "Applied", "type": "string", "jsonPath": ".status.conditions[0].status"},
                     {"name": "Generation", "type": "integer", "jsonPath": ".status.observedGeneration"}],
    description="The plugins, weights and args of one minisched profile (metadata.name is its schedulerName).",
)
SCHEDULER_PLUGIN_CONFIGS = Resource.from_crd(SCHEDULER_PLUGIN_CONFIG_CRD)


def make_plugin_config(profile: str, plugins: list[Mapping[str, Any]], *,
                       percentage_of_nodes_to_score: int | None = None) -> Object:
    spec: Object = {"plugins": [dict(p) for p in plugins]}
    if percentage_of_nodes_to_score is not None:
        spec["percentageOfNodesToScore"] = percentage_of_nodes_to_score
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": profile}, "spec": spec}


def profile_from_object(obj: Object) -> Profile:
    """The profile an object describes, through the KubeSchedulerConfiguration loader (so the merge
    with the defaults is kube's). The spec is parsed with the model first: bad input is refused
    with the field named, also where no API server checked it."""
    spec = SchedulerPluginConfigSpec.model_validate(obj.get("spec") or {})
    enabled = [{"name": p.name, **({"weight": p.weight} if p.weight else {})} for p in spec.plugins if p.enabled]
    disabled = [{"name": p.name} for p in spec.plugins if not p.enabled]
    raw: Object = {"schedulerName": obj["metadata"]["name"],
                   "plugins": {"multiPoint": {"enabled": enabled, "disabled": disabled}},
                   "pluginConfig": [{"name": p.name, "args": p.args} for p in spec.plugins if p.args and p.enabled]}
    if spec.percentage_of_nodes_to_score is not None:
        raw["percentageOfNodesToScore"] = spec.percentage_of_nodes_to_score
    return profiles_from_config({"apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND, "profiles": [raw]})[0]


def plugin_signature(fwk: Framework) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    """(filter plugins, (score plugin, weight)...): what a decision record shows of a framework."""
    return tuple(fwk.plugin_names("filter")), tuple((p.name, fwk.weights[p.name]) for p in fwk.points.score)


class PluginConfigReconciler:
    """Reconcile(SchedulerPluginConfig) -> a framework built and swapped in, or a reported failure."""

    def __init__(self, scheduler: Scheduler, cluster: Cluster, lookup: Callable[[str], Object | None],
                 clock: Clock) -> None:
        self.scheduler = scheduler
        self.cluster = cluster
        self.lookup = lookup
        self.clock = clock
        self.base = {name: fwk.profile for name, fwk in scheduler.frameworks.items()}
        self.applied: dict[str, int] = {}  # profile -> generation swapped in (0: the base profile)
        self.failed: dict[str, tuple[int, str]] = {}  # profile -> (generation, why) that did not build
        self.swaps: list[tuple[str, int, Framework]] = []  # every framework handed to the scheduler
        self._lock = threading.Lock()

    @property
    def primary(self) -> Kind[Object]:
        return raw_kind(SCHEDULER_PLUGIN_CONFIGS)

    @property
    def owned(self) -> None:
        return None

    def reconcile(self, request: Request) -> Result:
        name = request.name
        obj = self.lookup(name)
        if name not in self.base:
            if obj is not None:
                self._report(obj, False, "UnknownProfile",
                             f"this scheduler has no profile {name!r} (it has {sorted(self.base)})")
            return Result()
        if obj is None:  # deleted: back to the profile the scheduler started with
            if self.applied.get(name, 0) != 0:
                self._swap(name, 0, self.scheduler.build_framework(self.base[name]))
            return Result()
        generation = int(obj["metadata"].get("generation") or 1)
        if self.applied.get(name) == generation or self.failed.get(name, (None,))[0] == generation:
            return Result()  # already done (a status write of ours, a resync)
        try:
            fwk = self.scheduler.build_framework(profile_from_object(obj))
        except Exception as err:  # any failure to build keeps the running framework
            message = f"{type(err).__name__}: {err}"
            with self._lock:
                self.failed[name] = (generation, message)
            log.info("SchedulerPluginConfig %s generation %d not applied: %s", name, generation, message)
            self._report(obj, False, "BuildFailed", f"kept the running plugins; this configuration fails: {message}")
            self.scheduler.recorder.event(obj, "Warning", "FailedApply", message[:1024])
            return Result()
        self._swap(name, generation, fwk)
        filters, scores = plugin_signature(fwk)
        self._report(obj, True, APPLIED, f"from the next scheduling cycle: filter {list(filters)}, "
                                          f"score {[f'{n}x{w}' for n, w in scores]}", fwk)
        return Result()

    def _swap(self, name: str, generation: int, fwk: Framework) -> None:
        with self._lock:
            self.applied[name] = generation
            self.failed.pop(name, None)
            self.swaps.append((name, generation, fwk))
        self.scheduler.swap_framework(fwk)

    def _report(self, obj: Object, ok: bool, reason: str, message: str, fwk: Framework | None = None) -> None:
        meta = obj["metadata"]
        generation = int(meta.get("generation") or 1)
        status = obj.get("status") or {}
        old = next((c for c in status.get("conditions") or [] if c.get("type") == APPLIED), None)
        value = "True" if ok else "False"
        when = old["lastTransitionTime"] if old and old.get("status") == value and old.get("lastTransitionTime") \
            else rfc3339(self.clock.now())
        new_status: Object = {
            "observedGeneration": generation,
            "conditions": [{"type": APPLIED, "status": value, "reason": reason, "message": message[:4096],
                            "observedGeneration": generation, "lastTransitionTime": when}],
        }
        if fwk is not None:
            new_status["appliedPlugins"] = sorted(fwk.plugins)
        try:
            self.cluster.patch(SCHEDULER_PLUGIN_CONFIGS, meta["name"], {"status": new_status}, subresource="status")
        except NotFound:
            pass  # deleted meanwhile
        except ApiError as err:  # the status is a report: failing to write it must not undo the swap
            log.warning("could not write the status of SchedulerPluginConfig %s: %s", meta["name"], err)


class PluginConfigController:
    """Watches SchedulerPluginConfig objects and swaps the scheduler's frameworks to match.

        controller = PluginConfigController(scheduler, cluster)
        controller.start()      # informer + one worker; the CRD must exist
        ...
        controller.stop()
    """

    def __init__(self, scheduler: Scheduler, cluster: Cluster, *, clock: Clock | None = None) -> None:
        self.factory = SharedInformerFactory(cluster)
        self.reconciler = PluginConfigReconciler(scheduler, cluster, self._lookup, clock or RealClock())
        self.controller: Controller[Object, Object] = Controller(
            "scheduler-plugin-config", self.reconciler, self.factory, clock=clock)

    def _lookup(self, name: str) -> Object | None:
        obj: Object | None = self.controller.primary_informer.store.get_by_key(name)
        return obj

    def start(self, sync_timeout: float = 30.0) -> None:
        self.controller.start(sync_timeout)

    def stop(self, timeout: float = 10.0) -> None:
        self.controller.stop(timeout)
        self.factory.shutdown(timeout)

    @property
    def applied(self) -> dict[str, int]:
        return dict(self.reconciler.applied)


def install_crd(cluster: Cluster, timeout: float = 60.0) -> None:
    """Create the CRD if absent, and return once the API server serves the resource: the CRD is
    Established and a list of the new resource answers (a real server's handler for a new CRD
    lags its Established condition briefly, answering 404 or 429 meanwhile)."""
    import contextlib
    import time

    from minisched.errors import AlreadyExists
    from minisched.resources import CRDS

    name = SCHEDULER_PLUGIN_CONFIG_CRD["metadata"]["name"]
    with contextlib.suppress(AlreadyExists):
        cluster.create(CRDS, SCHEDULER_PLUGIN_CONFIG_CRD)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        conditions = (cluster.get(CRDS, name).get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            try:
                cluster.list(SCHEDULER_PLUGIN_CONFIGS)
                return
            except ApiError as err:
                last = err
        time.sleep(0.1)
    raise TimeoutError(f"CRD {name} not served within {timeout:g} s" + (f" (last: {last})" if last else ""))


__all__ = [
    "PluginConfigController",
    "PluginConfigReconciler",
    "SCHEDULER_PLUGIN_CONFIGS",
    "SCHEDULER_PLUGIN_CONFIG_CRD",
    "SchedulerPluginConfig",
    "install_crd",
    "make_plugin_config",
    "plugin_signature",
    "profile_from_object",
]


# -- watching swaps land: what §4.1's chapter draws ----------------------------------------------------


def decision_signature(decision: Any) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    """A decision's plugin set: its Filter plugins, and its Score plugins with their weights."""
    return tuple(decision.filter_plugins), tuple((n, s.weight) for n, s in decision.score_plugins.items())


def expected_signature(scheduler: Scheduler, plugins: list[Mapping[str, Any]] | None, probe: Object) -> tuple[Any, ...]:
    """The signature a decision for `probe` has under a SchedulerPluginConfig with `plugins`
    (None: the profile the scheduler runs now), decided on a framework built aside, not swapped in."""
    from minisched.scheduler.framework.types import PodInfo

    profile = (scheduler.frameworks[PROFILE_FOR_TOGGLE].profile if plugins is None
               else profile_from_object(make_plugin_config(PROFILE_FOR_TOGGLE, plugins)))
    fwk = scheduler.build_framework(profile)
    return decision_signature(fwk.schedule(PodInfo.from_pod(probe), scheduler.cache.snapshot()).decision)


PROFILE_FOR_TOGGLE = "minisched"
MIXED = "MIXED"


@dataclasses.dataclass
class ToggleRun:
    """What `toggle_while_scheduling` saw. Per cycle: the configuration its decision's plugin set
    matches (MIXED if none) and the object's generation whose framework ran it (0: the scheduler's
    own profile, -1: a framework this controller did not hand over). `edits`: (the cycle an edit
    preceded, the generation it wrote)."""

    configs: list[str] = dataclasses.field(default_factory=list)
    generations: list[int] = dataclasses.field(default_factory=list)
    edits: list[tuple[int, int]] = dataclasses.field(default_factory=list)

    def changes(self) -> int:
        """Cycles whose configuration differs from the cycle before."""
        return sum(a != b for a, b in zip(self.configs, self.configs[1:], strict=False))

    def takeovers(self) -> list[int]:
        """Cycles that ran a newer generation than the cycle before (the loop took a swap)."""
        return [i for i in range(1, len(self.generations)) if self.generations[i] != self.generations[i - 1]]

    def first_cycle_of(self) -> dict[int, int]:
        """generation -> the first cycle that ran with it."""
        out: dict[int, int] = {}
        for i, g in enumerate(self.generations):
            out.setdefault(g, i)
        return out

    def never_ran(self) -> list[int]:
        """Generations written by an edit that no cycle ran with: superseded before they landed."""
        ran = self.first_cycle_of()
        return [g for _, g in self.edits if g not in ran]

    def lags(self) -> list[int]:
        """For each edit whose generation ran: cycles from the edit to its first cycle."""
        ran = self.first_cycle_of()
        return [ran[g] - cycle for cycle, g in self.edits if g in ran]


def toggle_while_scheduling(scheduler: Scheduler, cluster: Cluster, controller: PluginConfigController,
                            configs: Mapping[str, list[Mapping[str, Any]]], allowed: Mapping[str, tuple[Any, ...]],
                            cycles: int, *, every: int = 4, progress: Callable[[int], Any] | None = None) -> ToggleRun:
    """Run `cycles` scheduling cycles on this thread (pods must be queued), patching the
    SchedulerPluginConfig before every `every`-th cycle to the next of `configs` in turn, while
    the controller reconciles on its own thread. Each cycle is classified by `allowed`
    (label -> expected signature) and by the generation of the framework that ran it."""
    names = list(configs)
    if len(names) < 2 or every < 1:
        raise ValueError(f"need two configurations or more and every >= 1, got {names} and every={every}")
    run = ToggleRun()
    start_fwk = scheduler.frameworks[PROFILE_FOR_TOGGLE]
    start_generation = controller.reconciler.applied.get(PROFILE_FOR_TOGGLE, 0)
    for i in range(cycles):
        if i % every == every - 1:
            plugins = configs[names[(i // every + 1) % len(names)]]
            obj = cluster.patch(SCHEDULER_PLUGIN_CONFIGS, PROFILE_FOR_TOGGLE, {"spec": {"plugins": plugins}})
            run.edits.append((i, int(obj["metadata"]["generation"])))
        if not scheduler.schedule_one(timeout=5):
            raise TimeoutError(f"cycle {i}: no pod to schedule (queue {cycles} pods first)")
        decision = scheduler.decisions[next(reversed(scheduler.decisions))]
        signature = decision_signature(decision)
        run.configs.append(next((k for k, v in allowed.items() if v == signature), MIXED))
        ran = scheduler.frameworks[PROFILE_FOR_TOGGLE]  # swaps are taken only as a cycle starts
        handed = list(controller.reconciler.swaps)  # appended by the controller's thread
        run.generations.append(next((g for _, g, f in reversed(handed) if f is ran),
                                    start_generation if ran is start_fwk else -1))
        if progress is not None:
            progress(1)
    return run
