"""Lab 13 checks (public).

    python -m labs.lab13_wasm_scorer.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import wasmtime

from labs.harness import Check, main, schedule_pods
from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import CPU, MEMORY, PodInfo
from minisched.scheduler.plugins import wasm
from minisched.scheduler.snapshot import NodeTable

LAB = "lab13_wasm_scorer"
GENEROUS = {"timeoutSeconds": 60}  # a wall-clock limit only for runaways: the machine may be busy


@contextmanager
def guest_file(module: Any) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scorer.wat"
        path.write_text(module.WAT)
        yield str(path)


def scorer(module: Any, **args: Any) -> wasm.WasmPlugin:
    """WasmPlugin built from the student's text; a text that does not compile is a failed check."""
    with guest_file(module) as path:
        try:
            plugin = wasm.build("WasmPlugin", {"path": path, **GENEROUS, **args})
        except (wasmtime.WasmtimeError, ValueError) as err:
            raise AssertionError(f"your WAT does not make a scorer module: {err}") from None
    assert hasattr(plugin, "score"), "your module does not export score"
    return plugin


def run(plugin: wasm.WasmPlugin, table: NodeTable, pod: PodInfo, rows: Any = None) -> list[int]:
    rows = np.arange(len(table), dtype=np.intp) if rows is None else np.asarray(rows, np.intp)
    try:
        return [int(s) for s in plugin.score(CycleState(), pod, table, rows)]
    except wasm.WasmTrap as trap:
        code = trap.trap_code.name if trap.trap_code is not None else "?"
        extra = " (the starter's `unreachable`: write the score loop)" if code == "UNREACHABLE" else ""
        raise AssertionError(f"your guest trapped on {len(rows)} node(s): {trap}{extra}") from None
    except wasm.WasmGuestError as err:
        raise AssertionError(f"your guest failed: {err}") from None


def part(alloc: int, used: int) -> int:
    return 0 if alloc <= 0 or used > alloc else used * 100 // alloc


def expected(table: NodeTable, pod: PodInfo, rows: Any = None) -> list[int]:
    rows = range(len(table)) if rows is None else rows
    cpu_a, cpu_r = table.allocatable(CPU), table.requested(CPU)
    mem_a, mem_r = table.allocatable(MEMORY), table.requested(MEMORY)
    return [(part(int(cpu_a[i]), int(cpu_r[i]) + pod.request(CPU))
             + part(int(mem_a[i]), int(mem_r[i]) + pod.request(MEMORY))) // 2 for i in rows]


def fixed_table() -> NodeTable:
    """Chapter 4.2's table: eight nodes of growing size, half of them with a pod already."""
    table = NodeTable()
    for i in range(8):
        table.add_node(make_node(f"node-{i}", cpu=str(2 + 2 * i), memory=f"{4 + 4 * i}Gi"))
    for i in range(0, 8, 2):
        table.add_pod(f"node-{i}", PodInfo.from_pod(make_pod(f"running-{i}", cpu="1", memory="2Gi")))
    return table.snapshot()


def uniform(n: int) -> NodeTable:
    table = NodeTable()
    for i in range(n):
        table.add_node(make_node(f"u{i}", cpu="8", memory="32Gi"))
    return table.snapshot()


POD = PodInfo.from_pod(make_pod("incoming", cpu="1500m", memory="3Gi"))


def check_scores(module: Any) -> None:
    plugin, table = scorer(module), fixed_table()
    got, want = run(plugin, table, POD), expected(table, POD)
    assert got == want, f"scores of the chapter's eight nodes for a 1500m/3Gi pod: expected {want}, got {got}"
    rows = [1, 4, 6]
    got = run(plugin, table, POD, rows)
    assert got == expected(table, POD, rows), (
        f"scoring only rows {rows}: expected {expected(table, POD, rows)}, got {got}")


def fuel_of(plugin: wasm.WasmPlugin, n: int) -> int:
    run(plugin, uniform(n), POD)
    return int(plugin.sandbox.last_fuel)


def check_fuel(module: Any) -> None:
    plugin = scorer(module)
    sizes = [0, 10, 20, 40]
    fuel = [fuel_of(plugin, n) for n in sizes]
    per_node = {(fuel[i + 1] - fuel[i]) / (sizes[i + 1] - sizes[i]) for i in range(len(sizes) - 1)}
    assert len(per_node) == 1, f"fuel for {sizes} uniform nodes: {fuel}: the cost per node should be one constant"
    (cost,) = per_node
    assert 0 < cost <= 1000, f"each node costs {cost} fuel: expected some work per node, at most 1,000 fuel"
    exact = scorer(module, fuel=fuel[-1])
    run(exact, uniform(40), POD)  # a budget of exactly what 40 nodes cost is enough
    short = scorer(module, fuel=fuel[2])
    try:
        short.score(CycleState(), POD, uniform(40), np.arange(40, dtype=np.intp))
    except wasm.WasmTrap as trap:
        code = trap.trap_code.name if trap.trap_code is not None else "?"
        assert code == "OUT_OF_FUEL", f"a budget for 20 nodes on 40 nodes: expected trap OUT_OF_FUEL, got {code}"
    else:
        raise AssertionError(f"a budget of {fuel[2]} fuel (what 20 nodes cost) did not stop a call over 40 nodes")


def config(path: str) -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "minisched",
                          "plugins": {"score": {"enabled": [{"name": "WasmPlugin", "weight": 10}]}},
                          "pluginConfig": [{"name": "WasmPlugin", "args": {"path": path, **GENEROUS}}]}]}


def check_packs(module: Any) -> None:
    run(scorer(module), fixed_table(), POD)  # fails here, with the guest's own message, first
    nodes = [make_node("small", cpu="4", memory="16Gi"), make_node("large", cpu="32", memory="128Gi")]
    pods = [make_pod(f"job-{i}", cpu="1", memory="1Gi") for i in range(3)]
    with guest_file(module) as path:
        placed = schedule_pods(nodes, pods, config=config(path))
    assert placed == {f"default/job-{i}": "small" for i in range(3)}, (
        f"with your scorer at weight 10, three 1-CPU pods should pack onto the small node; got {placed}")


CHECKS = [
    Check("scores most allocated, exactly", check_scores,
          "per node: ((cpu_req + pod_cpu) * 100 / cpu_alloc + (mem_req + pod_mem) * 100 / mem_alloc) / 2; "
          "column c, row i is at input_offset + (c * n + i) * 8; scores go in column 6.", points=2),
    Check("a fixed fuel cost per node, and a budget that stops it", check_fuel,
          "one pass over the nodes, the same instructions for each; no loop that can run on."),
    Check("a scheduler with your scorer packs pods", check_packs,
          "the fullest node that still fits scores highest.", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
