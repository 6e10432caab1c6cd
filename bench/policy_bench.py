"""What a §3.2 policy costs: compiling it, and filtering nodes with it per node and vectorised.

Prints, for the book's GPU policy (and a wider one):
  compile     parse + check, microseconds per policy (median of many),
  per-node    Policy.evaluate over every node of the snapshot, one node at a time,
  vectorised  PolicyFilter's evaluate_rows over the whole snapshot at once,
  filter      PolicyFilter.filter (vectorised + explaining the failing nodes),
at 100, 1,000 and 5,000 nodes, in microseconds per pod (median and p90 over repeated runs).

    .venv/bin/python bench/policy_bench.py [--sizes 100,1000,5000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from minisched.objects import make_node, make_pod, taint, toleration
from minisched.policy import compile_policy
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.policy_filter import PolicyFilter, evaluate_rows
from minisched.scheduler.snapshot import NodeTable
from minisched.validation.scheduling_policy import make_scheduling_policy

BOOK = """and(
  hasLabel("node.kubernetes.io/instance-type", "g4dn.xlarge"),
  matchesTaint("nvidia.com/gpu", "NoSchedule", "Equal"),
  not(hasLabel("environment", "staging"))
)"""
WIDE = ('or(and(labelIn("zone", ["a", "b"]), cpuAtLeast("8"), toleratesNodeTaints()), '
        'and(hasLabelKey("gpu"), memoryAtLeast("32Gi"), not(hasTaint("maintenance", "NoSchedule"))))')


def build(num_nodes: int, rng: random.Random) -> NodeTable:
    table = NodeTable()
    for i in range(num_nodes):
        gpu = rng.random() < 0.3
        labels = {"zone": rng.choice("abc"), "environment": rng.choice(["prod", "staging"])}
        if gpu:
            labels.update({"node.kubernetes.io/instance-type": "g4dn.xlarge", "gpu": "true"})
        taints = [taint("nvidia.com/gpu", "present")] if gpu else []
        if rng.random() < 0.1:
            taints.append(taint("maintenance", "", "NoSchedule"))
        table.add_node(make_node(f"node-{i:05}", cpu=rng.choice(["4", "8", "16"]),
                                 memory=rng.choice(["16Gi", "32Gi", "64Gi"]), labels=labels, taints=taints))
    return table


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(0)
    pod = make_pod("train", tolerations=[toleration("nvidia.com/gpu", "present", "NoSchedule")])
    info = PodInfo.from_pod(pod)
    for name, text in (("book", BOOK), ("wide", WIDE)):
        med, p90 = timed(lambda text=text: compile_policy(text), args.repeat * 10)
        print(f"{name}: compile {med:,.0f} µs (p90 {p90:,.0f} µs)")
    print(f"{'policy':6} {'nodes':>6} {'per-node µs':>14} {'vectorised µs':>14} {'filter µs':>12} {'speed-up':>9}  passed")
    for size in (int(s) for s in args.sizes.split(",")):
        table = build(size, rng)
        for name, text in (("book", BOOK), ("wide", WIDE)):
            policy = compile_policy(text)
            plugin = PolicyFilter([make_scheduling_policy(name, text)])
            nodes = [table.node_at(i) for i in range(len(table))]
            per_node, _ = timed(lambda policy=policy, nodes=nodes: [policy.evaluate(n, pod) for n in nodes],
                                max(3, args.repeat // 5))
            vec, _ = timed(lambda policy=policy, table=table: evaluate_rows(policy.expr, pod, table), args.repeat)
            filt, _ = timed(lambda plugin=plugin, table=table: plugin.filter(CycleState(), info, table),
                            max(3, args.repeat // 5))
            passed = int(evaluate_rows(policy.expr, pod, table).sum())
            print(f"{name:6} {size:6,} {per_node:14,.0f} {vec:14,.0f} {filt:12,.0f} {per_node / vec:8.0f}x  {passed:,}")


if __name__ == "__main__":
    main()
