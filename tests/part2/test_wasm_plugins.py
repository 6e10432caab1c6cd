"""§4.2: plugins whose logic is a wasm module, under fuel, an epoch watchdog and a memory limit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import wasmtime

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import wasm
from minisched.scheduler.scheduler import Scheduler
from minisched.scheduler.snapshot import NodeTable
from tests.scheduler.runtime.helpers import node_of, wait_for_nodes, wait_until


def _table(n: int, seed: int = 3) -> NodeTable:
    rng = np.random.default_rng(seed)
    table = NodeTable()
    for i in range(n):
        table.add_node(make_node(f"n{i:03d}", cpu=f"{int(rng.integers(1, 16))}", memory=f"{int(rng.integers(1, 64))}Gi",
                                 pods=str(int(rng.integers(1, 4)))))
    for i in range(n // 2):
        info = PodInfo.from_pod(make_pod(f"on{i}", cpu=f"{int(rng.integers(100, 4000))}m", memory="2Gi"))
        table.add_pod(f"n{i:03d}", info)
    return table.snapshot()


def _plugin(guest: str, **args: Any) -> Any:
    return wasm.build("WasmPlugin", {"path": str(wasm.guest_path(guest)), **args})


POD = PodInfo.from_pod(make_pod("p", cpu="1500m", memory="3Gi"))


def _least_allocated(alloc: np.ndarray, used: np.ndarray) -> np.ndarray:
    ok = (alloc > 0) & (used <= alloc)
    return np.where(ok, (alloc - used) * 100 // np.where(alloc > 0, alloc, 1), 0)


def test_the_scorer_computes_least_allocated_in_one_call_and_per_node_alike() -> None:
    nodes = _table(40)
    rows = np.arange(40, dtype=np.intp)
    cpu, mem = nodes.allocatable("cpu"), nodes.allocatable("memory")
    expected = (_least_allocated(cpu, nodes.requested("cpu") + 1500)
                + _least_allocated(mem, nodes.requested("memory") + 3 * 2**30)) // 2
    batch, per_node = _plugin("least_allocated"), _plugin("least_allocated", calls="per-node")
    assert batch.score(CycleState(), POD, nodes, rows).tolist() == expected.tolist()
    assert per_node.score(CycleState(), POD, nodes, rows).tolist() == expected.tolist()
    assert batch.sandbox.calls == 1 and per_node.sandbox.calls == 40
    some = np.array([3, 7, 30], np.intp)
    assert batch.score(CycleState(), POD, nodes, some).tolist() == expected[some].tolist()


def test_the_filter_rejects_nodes_without_room_with_named_reasons() -> None:
    nodes = _table(40)
    plugin = _plugin("least_allocated", reasons=["Insufficient cpu", "Insufficient memory", "Too many pods"])
    result = plugin.filter(CycleState(), POD, nodes)
    too_little_cpu = nodes.requested("cpu") + 1500 > nodes.allocatable("cpu")
    too_many = nodes.requested("pods") >= nodes.allocatable("pods")
    too_little_mem = nodes.requested("memory") + 3 * 2**30 > nodes.allocatable("memory")
    assert result.passed.tolist() == (~(too_little_cpu | too_many | too_little_mem)).tolist()
    row = int(np.flatnonzero(too_little_cpu)[0])
    assert "Insufficient cpu" in result.reasons_at(row)


def _uniform(n: int) -> NodeTable:
    table = NodeTable()
    for i in range(n):
        table.add_node(make_node(f"u{i}", cpu="8", memory="32Gi"))
    return table.snapshot()


def test_fuel_is_exact_and_grows_linearly_with_the_nodes() -> None:
    plugin = _plugin("least_allocated")
    fuel = []
    for n in (10, 20, 30):
        plugin.score(CycleState(), POD, _uniform(n), np.arange(n, dtype=np.intp))
        fuel.append(plugin.sandbox.last_fuel)
    plugin.score(CycleState(), POD, _uniform(30), np.arange(30, dtype=np.intp))
    assert plugin.sandbox.last_fuel == fuel[2]  # the same work costs the same fuel, call after call
    assert fuel[1] - fuel[0] == fuel[2] - fuel[1] > 0  # same branches per node: a fixed cost per node
    plugin.score(CycleState(), POD, _table(30), np.arange(30, dtype=np.intp))
    assert plugin.sandbox.last_fuel != fuel[2]  # other data, other branches, other fuel


def test_the_runaway_guest_runs_out_of_fuel() -> None:
    plugin = _plugin("runaway", fuel=50_000)
    with pytest.raises(wasm.WasmTrap, match="ran out of fuel") as err:
        plugin.score(CycleState(), POD, _table(4), np.arange(4, dtype=np.intp))
    assert err.value.trap_code == wasmtime.TrapCode.OUT_OF_FUEL
    assert plugin.sandbox.last_fuel == 50_000 and plugin.sandbox.traps == 1


def test_the_watchdog_interrupts_a_guest_with_fuel_to_spare() -> None:
    plugin = _plugin("runaway", fuel=10**15, timeoutSeconds=0.05)
    started = time.perf_counter()
    with pytest.raises(wasm.WasmTrap) as err:
        plugin.score(CycleState(), POD, _table(4), np.arange(4, dtype=np.intp))
    assert err.value.trap_code == wasmtime.TrapCode.INTERRUPT
    assert 0.04 <= time.perf_counter() - started < 5.0


def test_the_memory_hog_stops_at_the_limit() -> None:
    plugin = _plugin("memory_hog", memoryLimitBytes=4 * 65536)
    with pytest.raises(wasm.WasmTrap) as err:
        plugin.score(CycleState(), POD, _table(4), np.arange(4, dtype=np.intp))
    assert err.value.trap_code == wasmtime.TrapCode.MEMORY_OUT_OF_BOUNDS
    # the instance is rebuilt after a trap and works again (with its initial page)
    assert plugin.sandbox.memory.data_len(plugin.sandbox.store) == 65536


def test_a_node_table_larger_than_the_memory_limit_is_an_error_not_a_crash() -> None:
    plugin = _plugin("least_allocated", memoryLimitBytes=65536)
    with pytest.raises(wasm.WasmGuestError, match="do not fit the memory limit"):
        plugin.score(CycleState(), POD, _table(2000), np.arange(2000, dtype=np.intp))


@pytest.mark.parametrize("args, message", [
    ({}, "path .* is required"),
    ({"path": "/nonexistent.wat"}, "does not exist"),
    ({"path": "x.wat", "fuel": -1}, "fuel must be a positive int"),
    ({"path": "x.wat", "fuels": 1}, r"unknown field\(s\) \['fuels'\]"),
    ({"path": "x.wat", "calls": "sometimes"}, "calls must be"),
])
def test_bad_args_are_refused_naming_the_problem(args: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        wasm.build("WasmPlugin", args)


def _config(guest: str, **args: Any) -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [
        {"schedulerName": "minisched", "plugins": {"multiPoint": {"enabled": [{"name": "WasmPlugin", "weight": 5}]}},
         "pluginConfig": [{"name": "WasmPlugin", "args": {"path": str(wasm.guest_path(guest)), **args}}]},
        {"schedulerName": "plain"}]}


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster()
    yield c
    c.close()


def test_a_wasm_scorer_from_profile_args_steers_pods(cluster: EmbeddedCluster) -> None:
    cluster.create(NODES, make_node("small", cpu="2", memory="4Gi"))
    cluster.create(NODES, make_node("large", cpu="32", memory="64Gi"))
    with Scheduler(cluster, config=_config("least_allocated")) as sched:
        wait_for_nodes(sched, 2)
        cluster.create(PODS, make_pod("p1", cpu="1"))
        wait_until(lambda: node_of(cluster, "p1"), what="p1 bound")
        assert node_of(cluster, "p1") == "large"
        assert sched.frameworks["minisched"].plugins["WasmPlugin"].sandbox.calls >= 1  # type: ignore[attr-defined]


def test_a_runaway_plugin_errors_the_cycle_the_pod_is_retried_and_the_scheduler_goes_on(
        cluster: EmbeddedCluster) -> None:
    cluster.create(NODES, make_node("n1"))
    cluster.create(NODES, make_node("n2"))
    with Scheduler(cluster, config=_config("runaway", fuel=20_000)) as sched:
        wait_for_nodes(sched, 2)
        cluster.create(PODS, make_pod("victim"))
        plugin: Any = sched.frameworks["minisched"].plugins["WasmPlugin"]
        wait_until(lambda: plugin.sandbox.traps >= 2, timeout=60, what="the pod tried again after backoff")
        # the trap is counted inside the plugin, the cycle's error a moment later by the scheduler
        wait_until(lambda: sched.stats.errors >= 2, what="both errored cycles counted")
        assert node_of(cluster, "victim") is None
        cluster.create(PODS, make_pod("other", scheduler_name="plain"))  # the scheduler keeps working
        wait_until(lambda: node_of(cluster, "other"), what="a pod of the other profile bound")
        sched.recorder.flush()
        events = [e for e in cluster.list("events", "default")["items"]
                  if e.get("reason") == "FailedScheduling" and (e.get("regarding") or e.get("involvedObject") or {}).get("name") == "victim"]
        assert events and "ran out of fuel" in (events[0].get("note") or events[0].get("message") or "")
