"""§4.1: SchedulerPluginConfig objects set a profile's plugins at run time; the framework is swapped
only between scheduling cycles."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.cluster.embedded import EmbeddedCluster
from minisched.controllers.plugin_config import (
    SCHEDULER_PLUGIN_CONFIG_CRD,
    SCHEDULER_PLUGIN_CONFIGS,
    SCORE_PLUGINS,
    PluginConfigController,
    ToggleRun,
    expected_signature,
    install_crd,
    make_plugin_config,
    profile_from_object,
    toggle_while_scheduling,
)
from minisched.errors import Invalid
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.framework.decision import Decision
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import in_tree_registry, wasm
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import wait_for_nodes, wait_until

CONFIG_A = [{"name": "NodeResourcesFit", "weight": 5}]
CONFIG_B = [{"name": "TaintToleration", "enabled": False}, {"name": "ImageLocality", "weight": 3}]


def test_the_crd_enumerates_exactly_the_registered_plugins() -> None:
    enum = SCHEDULER_PLUGIN_CONFIG_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["plugins"]["items"]["properties"]["name"]["enum"]
    assert set(enum) == set(in_tree_registry())
    assert {"NodeResourcesFit", "ImageLocality", "TaintToleration", "WasmPlugin"} <= set(SCORE_PLUGINS)
    assert not {"NodePorts", "PrioritySort", "DefaultBinder", "NodeName"} & set(SCORE_PLUGINS)


@pytest.mark.parametrize("plugins, field, words", [
    ([{"name": "NodeResourcesFit", "weight": 0}], "spec.plugins[0].weight", "greater than or equal to 1"),
    ([{"name": "NodeResourcesFit", "weight": 101}], "spec.plugins[0].weight", "less than or equal to 100"),
    ([{"name": "NoSuchPlugin"}], "spec.plugins[0].name", "Unsupported value"),
    ([{"name": "NodePorts", "weight": 2}], "spec.plugins[0].weight", "only meaningful for Score plugins"),
])
def test_the_api_server_refuses_bad_configs_with_422(cluster: Cluster, plugins: list[dict[str, Any]], field: str,
                                                     words: str) -> None:
    install_crd(cluster)
    with pytest.raises(Invalid) as err:
        cluster.create(SCHEDULER_PLUGIN_CONFIGS, make_plugin_config("bad", plugins))
    assert err.value.status == 422
    assert any(c.field == field and words in c.message for c in err.value.causes), err.value.causes


@pytest.fixture
def cluster_with_nodes() -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster()
    install_crd(c)
    for i in range(12):
        c.create(NODES, make_node(f"n{i:02d}", cpu="64", memory="256Gi", pods="200"))
    yield c
    c.close()


def _signature(d: Decision) -> tuple[Any, ...]:
    return tuple(d.filter_plugins), tuple((name, s.weight) for name, s in d.score_plugins.items())


def _expected(sched: Scheduler, *configs: list[dict[str, Any]] | None) -> list[tuple[Any, ...]]:
    """The decision signature each configuration gives a pod like the test's (None: the base profile)."""
    info = PodInfo.from_pod(make_pod("probe"))
    out = []
    for config in configs:
        profile = (sched.frameworks["minisched"].profile if config is None
                   else profile_from_object(make_plugin_config("minisched", config)))
        fwk = sched.build_framework(profile)
        out.append(_signature(fwk.schedule(info, sched.cache.snapshot()).decision))
    return out


def test_a_thousand_cycles_with_the_config_toggled_each_use_one_whole_generation(
        cluster_with_nodes: EmbeddedCluster) -> None:
    cluster = cluster_with_nodes
    sched = Scheduler(cluster, keep_decisions=5000, bind_workers=4)
    sched.start(loop=False)
    controller = PluginConfigController(sched, cluster)
    controller.start()
    try:
        wait_for_nodes(sched, 12)
        base, sig_a, sig_b = _expected(sched, None, CONFIG_A, CONFIG_B)
        assert len({base, sig_a, sig_b}) == 3
        cycles = 1000
        for i in range(cycles):
            cluster.create(PODS, make_pod(f"p{i:04d}", cpu="10m", memory="16Mi"))
        wait_until(lambda: sum(sched.pending_pods().values()) == cycles, timeout=30, what="pods queued")
        cluster.create(SCHEDULER_PLUGIN_CONFIGS, make_plugin_config("minisched", CONFIG_A))
        for i in range(cycles):
            if i % 5 == 4:  # toggle every few cycles, while the controller works on its own thread
                cluster.patch(SCHEDULER_PLUGIN_CONFIGS, "minisched",
                              {"spec": {"plugins": CONFIG_B if (i // 5) % 2 == 0 else CONFIG_A}})
            assert sched.schedule_one(timeout=5)
        sched.wait_for_bindings()
        decisions = list(sched.decisions.values())
        assert len(decisions) == cycles
        seen = [_signature(d) for d in decisions]
        strays = [s for s in seen if s not in (base, sig_a, sig_b)]
        assert not strays, f"{len(strays)} decisions with a mixed plugin set, e.g. {strays[0]}"
        assert seen.count(sig_a) > 10 and seen.count(sig_b) > 10  # both really ran
        # how many of the 200 toggles the controller's thread took in time depends on the machine's
        # load (a level-based controller coalesces updates); that it swapped many times does not
        changes = sum(1 for x, y in zip(seen, seen[1:], strict=False) if x != y)
        assert changes >= 5 and len(controller.reconciler.swaps) >= 5, (changes, len(controller.reconciler.swaps))
    finally:
        controller.stop()
        sched.stop()


def _condition(cluster: Cluster, name: str) -> dict[str, Any] | None:
    status = cluster.get(SCHEDULER_PLUGIN_CONFIGS, name).get("status") or {}
    return next(iter(status.get("conditions") or []), None)


def test_a_config_that_does_not_build_keeps_the_old_framework_and_says_why(
        cluster_with_nodes: EmbeddedCluster) -> None:
    cluster = cluster_with_nodes
    sched = Scheduler(cluster)
    sched.start()
    controller = PluginConfigController(sched, cluster)
    controller.start()
    try:
        cluster.create(SCHEDULER_PLUGIN_CONFIGS, make_plugin_config("minisched", CONFIG_A))
        wait_until(lambda: (_condition(cluster, "minisched") or {}).get("status") == "True", what="A applied")
        cluster.create(PODS, make_pod("first"))
        wait_until(lambda: sched.frameworks["minisched"].weights.get("NodeResourcesFit") == 5, what="A in use")
        good = sched.frameworks["minisched"]
        cluster.patch(SCHEDULER_PLUGIN_CONFIGS, "minisched", {"spec": {"plugins": [
            {"name": "WasmPlugin", "weight": 2, "args": {"path": "/nonexistent/scorer.wat"}}]}})
        cond = wait_until(lambda: (c := _condition(cluster, "minisched")) and c["status"] == "False" and c,
                          what="the failure reported")
        assert cond["reason"] == "BuildFailed" and "does not exist" in cond["message"] and cond["observedGeneration"] == 2
        cluster.create(PODS, make_pod("second"))
        wait_until(lambda: cluster.get(PODS, "second", "default")["spec"].get("nodeName"), what="second bound")
        assert sched.frameworks["minisched"] is good  # the old plugins kept running
        sched.recorder.flush()
        events = [e for e in cluster.list("events", "default")["items"] if e.get("reason") == "FailedApply"]
        assert events and "does not exist" in events[0]["message"]
        # fixed: a real guest this time
        cluster.patch(SCHEDULER_PLUGIN_CONFIGS, "minisched", {"spec": {"plugins": [
            {"name": "WasmPlugin", "weight": 2, "args": {"path": str(wasm.guest_path("least_allocated"))}}]}})
        wait_until(lambda: (_condition(cluster, "minisched") or {}).get("status") == "True", what="fixed applied")
        cluster.create(PODS, make_pod("third"))
        wait_until(lambda: "WasmPlugin" in sched.frameworks["minisched"].plugins, what="wasm plugin in use")
        # deleting the object returns to the profile the scheduler started with
        cluster.delete(SCHEDULER_PLUGIN_CONFIGS, "minisched")
        wait_until(lambda: controller.applied.get("minisched") == 0, what="the base profile handed over")
        cluster.create(PODS, make_pod("fourth"))  # the next cycle takes it
        wait_until(lambda: "WasmPlugin" not in sched.frameworks["minisched"].plugins
                   and sched.frameworks["minisched"].weights["NodeResourcesFit"] == 1, what="base profile back")
    finally:
        controller.stop()
        sched.stop()


def test_an_object_for_a_profile_the_scheduler_does_not_have_is_reported(cluster_with_nodes: EmbeddedCluster) -> None:
    cluster = cluster_with_nodes
    sched = Scheduler(cluster)
    controller = PluginConfigController(sched, cluster)
    controller.start()
    try:
        cluster.create(SCHEDULER_PLUGIN_CONFIGS, make_plugin_config("someone-else", CONFIG_A))
        cond = wait_until(lambda: _condition(cluster, "someone-else"), what="reported")
        assert cond["status"] == "False" and cond["reason"] == "UnknownProfile"
    finally:
        controller.stop()


def test_the_app_behind_minisched_run_applies_configs_on_every_backend(cluster: Cluster) -> None:
    from minisched.app import SchedulerApp

    cluster.create(NODES, make_node("cfg-n1"))
    cluster.create(NODES, make_node("cfg-n2"))
    app = SchedulerApp(cluster, plugin_config=True)
    stop = threading.Event()
    thread = threading.Thread(target=app.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: app.plugin_config_controller is not None, timeout=30, what="controller running")
        cluster.create(SCHEDULER_PLUGIN_CONFIGS, make_plugin_config("minisched", CONFIG_B))
        wait_until(lambda: (_condition(cluster, "minisched") or {}).get("status") == "True", timeout=30,
                   what="applied")
        cluster.create(PODS, make_pod("cfg-pod"))
        wait_until(lambda: cluster.get(PODS, "cfg-pod", "default")["spec"].get("nodeName"), timeout=30, what="bound")
        assert app.scheduler is not None
        fwk = app.scheduler.frameworks["minisched"]
        assert "TaintToleration" not in fwk.plugins and fwk.weights["ImageLocality"] == 3
        status = cluster.get(SCHEDULER_PLUGIN_CONFIGS, "minisched")["status"]
        assert status["observedGeneration"] == 1 and "TaintToleration" not in status["appliedPlugins"]
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def test_a_toggle_run_counts_changes_takeovers_lags_and_superseded_generations() -> None:
    run = ToggleRun(configs=["A", "A", "A", "B", "B", "A"], generations=[1, 1, 1, 2, 2, 5],
                    edits=[(1, 2), (3, 3), (4, 4), (4, 5)])
    assert run.changes() == 2
    assert run.takeovers() == [3, 5]
    assert run.first_cycle_of() == {1: 0, 2: 3, 5: 5}
    assert run.never_ran() == [3, 4]  # written, then overwritten before a cycle took them
    assert run.lags() == [2, 1]


def test_toggling_while_scheduling_runs_each_cycle_with_the_generation_it_reports(
        cluster_with_nodes: EmbeddedCluster) -> None:
    cluster = cluster_with_nodes
    sched = Scheduler(cluster, keep_decisions=500)
    sched.start(loop=False)
    controller = PluginConfigController(sched, cluster)
    controller.start()
    try:
        wait_for_nodes(sched, 12)
        probe = make_pod("probe", cpu="10m", memory="16Mi")
        allowed = {"A": expected_signature(sched, CONFIG_A, probe), "B": expected_signature(sched, CONFIG_B, probe)}
        obj = cluster.create(SCHEDULER_PLUGIN_CONFIGS, make_plugin_config("minisched", CONFIG_A))
        wait_until(lambda: controller.applied.get("minisched") == obj["metadata"]["generation"], timeout=30,
                   what="A handed over")
        cycles = 120
        for i in range(cycles):
            cluster.create(PODS, make_pod(f"t{i:03d}", cpu="10m", memory="16Mi"))
        wait_until(lambda: sum(sched.pending_pods().values()) == cycles, timeout=30, what="pods queued")
        run = toggle_while_scheduling(sched, cluster, controller, {"A": CONFIG_A, "B": CONFIG_B}, allowed, cycles,
                                      every=3)
        assert len(run.configs) == len(run.generations) == cycles and "MIXED" not in run.configs
        assert [c for c, _ in run.edits] == list(range(2, cycles, 3))
        written = {obj["metadata"]["generation"]: "A"} | {g: "AB"[k % 2 == 0] for k, (_, g) in enumerate(run.edits)}
        # every cycle ran the configuration that its generation wrote: the bookkeeping is the truth
        assert all(written[g] == c for g, c in zip(run.generations, run.configs, strict=True))
        assert run.generations == sorted(run.generations)  # never back to an older generation
        assert set(run.never_ran()) | set(run.first_cycle_of()) >= {g for _, g in run.edits}
        assert all(lag >= 0 for lag in run.lags())
    finally:
        controller.stop()
        sched.stop()
