"""The preemption dry run alone: ms per DefaultPreemption.find_candidates, incremental vs full re-filter.

The cluster is kube's PreemptionBasic shape (scheduler_perf's misc/performance-config.yaml): nodes of
4 CPU / 32Gi / 110 pods, each holding 4 low-priority pods of 900m / 500Mi, and a preemptor of
priority 10 asking 3000m / 500Mi, so every node is a candidate with 3 victims. The plugin set is the
scheduler_perf driver's (minisched.perf.backends.perf_scheduler_config). `--nominated K` nominates
K earlier preemptors to nodes first (after a wave of preemptions most nodes hold one), which the dry
run must respect on those nodes.

For each form the same offset is used (the plugin's random source is reseeded), and the bench checks
that both forms found the same candidates with the same victims; then it times them in alternating
rounds and prints the median and range of ms per dry run, and CPU-ms (thread time).

    .venv/bin/python bench/preemption_bench.py [--nodes 1000] [--rounds 5] [--nominated 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.perf.backends import SCHEDULER_NAME, perf_scheduler_config
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.scheduler import Scheduler


def build(nodes: int, nominated: int) -> tuple[Any, Any, PodInfo, list[tuple[str, PodInfo]]]:
    cluster = EmbeddedCluster()
    sched = Scheduler(cluster, config=perf_scheduler_config(SCHEDULER_NAME))
    for i in range(nodes):
        node = make_node(f"node-{i}", cpu="4", memory="32Gi", pods=110)
        sched.cache.add_node(node)
        for j in range(4):
            pod = make_pod(f"low-{i}-{j}", cpu="900m", memory="500Mi", node_name=node["metadata"]["name"])
            pod["spec"]["priority"] = 0
            pod["spec"]["schedulerName"] = SCHEDULER_NAME
            sched.cache.add_pod(pod)

    def preemptor(name: str) -> PodInfo:
        pod = make_pod(name, cpu="3000m", memory="500Mi")
        pod["spec"]["priority"] = 10
        pod["spec"]["schedulerName"] = SCHEDULER_NAME
        return PodInfo.from_pod(pod)

    waiting = [(f"node-{i * max(1, nodes // max(nominated, 1)) % nodes}", preemptor(f"nominated-{i}"))
               for i in range(nominated)]
    return sched, sched.frameworks[SCHEDULER_NAME], preemptor("high"), waiting


def dry_run(sched: Any, fwk: Any, pod: PodInfo, waiting: list[tuple[str, PodInfo]],
            incremental: bool) -> tuple[float, float, list[tuple[str, list[str], int]]]:
    plugin = next(p for p in fwk.points.post_filter if p.name == "DefaultPreemption")
    snapshot = sched.cache.snapshot()
    state = CycleState()
    result = fwk.schedule(pod, snapshot, state=state, nominated=waiting)
    assert result.node is None and result.diagnosis is not None, "the preemptor must fit nowhere"
    statuses = result.diagnosis.statuses()
    plugin.incremental = incremental
    plugin.rng.seed(7)  # the same offset for both forms
    w0, c0 = time.perf_counter(), time.thread_time()
    candidates, status = plugin.find_candidates(state, pod, snapshot, statuses)
    wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
    assert candidates, status
    return wall, cpu, [(c.node_name, [v.name for v in c.victims], c.num_pdb_violations) for c in candidates]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nominated", type=int, default=0, help="earlier preemptors nominated to nodes")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.rounds < 1 or args.nominated < 0:
        parser.error("--nodes and --rounds must be >= 1, --nominated >= 0")
    sched, fwk, pod, waiting = build(args.nodes, args.nominated)
    print(f"{args.nodes} nodes x 4 low-priority pods, {args.nominated} nominated; {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f} at start")
    forms = {"full re-filter": False, "incremental": True}
    found = {name: dry_run(sched, fwk, pod, waiting, inc)[2] for name, inc in forms.items()}
    same = found["full re-filter"] == found["incremental"]
    print(f"candidates: {len(found['incremental'])} (same nodes, victims and violations in both forms: {same})")
    walls: dict[str, list[float]] = {n: [] for n in forms}
    cpus: dict[str, list[float]] = {n: [] for n in forms}
    for _ in range(args.rounds):
        for name, inc in forms.items():
            wall, cpu, _ = dry_run(sched, fwk, pod, waiting, inc)
            walls[name].append(wall * 1000)
            cpus[name].append(cpu * 1000)
    for name in forms:
        w, c = walls[name], cpus[name]
        print(f"{name:<15} {statistics.median(w):8.1f} ms per dry run ({min(w):.1f}-{max(w):.1f})  "
              f"CPU {statistics.median(c):8.1f} ms")
    ratio = statistics.median(cpus["full re-filter"]) / statistics.median(cpus["incremental"])
    print(f"incremental is {ratio:.2f}x less CPU; load {os.getloadavg()[0]:.1f} at end")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
