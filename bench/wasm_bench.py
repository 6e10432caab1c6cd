"""What a wasm plugin costs (Part II §4.2; a benchmark, not a test).

For N nodes: the bundled least-allocated scorer called once per cycle over the node table's
columns in linear memory, and called once per node (`calls: per-node`), both under the sandbox's
fuel and epoch watchdog; next to it the same score in numpy (what an in-tree plugin costs). Printed:
the median time of one Score call per cycle, per node, and the fuel it used.

    .venv/bin/python bench/wasm_bench.py [--sizes 100,1000,5000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def timed(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def numpy_score(nodes: Any) -> Any:
    """The same least-allocated score in numpy, as an in-tree plugin would compute it."""
    from minisched.scheduler.plugins import wasm

    cols = wasm.node_columns(nodes)
    out = []
    for a, u in ((cols[0], cols[1] + 500), (cols[2], cols[3] + 2**30)):
        out.append(np.where((a > 0) & (u <= a), (a - u) * 100 // np.maximum(a, 1), 0))
    return (out[0] + out[1]) // 2


def main() -> None:
    from minisched.objects import make_node, make_pod
    from minisched.scheduler.framework.cycle_state import CycleState
    from minisched.scheduler.framework.types import PodInfo
    from minisched.scheduler.plugins import wasm
    from minisched.scheduler.snapshot import NodeTable

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    pod = PodInfo.from_pod(make_pod("p", cpu="500m", memory="1Gi"))
    path = str(wasm.guest_path("least_allocated"))
    batch = wasm.build("WasmPlugin", {"path": path, "fuel": 10**9})
    per_node = wasm.build("WasmPlugin", {"path": path, "fuel": 10**9, "calls": "per-node", "timeoutSeconds": 60})
    print(f"{'nodes':>6} {'batch µs':>10} {'µs/node':>8} {'per-node µs':>12} {'µs/call':>8} {'numpy µs':>9} "
          f"{'fuel batch':>11} {'fuel/node':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        table = NodeTable()
        for i in range(n):
            table.add_node(make_node(f"n{i}", cpu=str(4 + i % 29), memory=f"{8 + i % 57}Gi"))
        nodes = table.snapshot()
        rows = np.arange(n, dtype=np.intp)
        state = CycleState()

        t_batch = timed(functools.partial(batch.score, state, pod, nodes, rows), args.repeat)
        fuel = batch.sandbox.last_fuel
        t_node = timed(functools.partial(per_node.score, state, pod, nodes, rows), 3)
        t_np = timed(functools.partial(numpy_score, nodes), args.repeat)
        print(f"{n:6d} {t_batch * 1e6:10.1f} {t_batch / n * 1e6:8.3f} {t_node * 1e6:12.1f} {t_node / n * 1e6:8.2f} "
              f"{t_np * 1e6:9.1f} {fuel:11d} {fuel / n:9.1f}")


if __name__ == "__main__":
    main()
