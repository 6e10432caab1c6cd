"""kube's own scheduler_perf workloads against minisched and kube-scheduler (a benchmark, not a test).

The workload files are read at run time from the k8s.io/kubernetes module in the Go module cache
(the version the control-plane build uses); nothing of them is copied here. Each workload runs on:

- `embedded`: minisched in this process on the embedded cluster;
- `minisched`: minisched as its own process on a fresh local control plane (etcd + kube-apiserver,
  nodes created Ready without KWOK, as scheduler_perf does);
- `kube`: kube-scheduler on a fresh control plane the same way, same plugin set and weights,
  percentageOfNodesToScore 100, client QPS/burst 5000 on both.

Printed per workload and backend: SchedulingThroughput as scheduler_perf computes it (average, p50,
p99 of its 1-second samples over the measured pods), the overall rate (measured pods / seconds from
the op's start to its last binding), each measured pod's time from its creation to its binding as
the driver's watch saw both (p50, p99: the scheduler's own latency, which the pods/s columns mix
with the driver's creation rate when the driver creates pods slower than the scheduler binds them), kube's `threshold` as a reference only (kube measures it on
large CI machines with an in-process API server: never compared), scheduler CPU-seconds per 1,000
measured pods and peak RSS (what is measured is said per backend), and any pod that should have been
scheduled and was not, or an over-committed node. Ops or options the driver cannot run are listed.

    .venv/bin/python bench/scheduler_perf_bench.py [--short | --performance] [--size 500Nodes]
        [--backends embedded,minisched,kube] [--scoring 100,default] [--mode backlog|arrival]
        [--budget-minutes 30] [--workloads SchedulingBasic,...] [--params initNodes=500,...] [--list] [--json out.json]

What is measured (`--mode`, printed with every figure):
- `backlog` (the default): the scheduler is stopped before the measured createPods op, every
  measured pod is created, then a fresh scheduler starts; pods/s runs from its readiness (/readyz:
  informers synced; a preemption workload's work comes before its first binding) to its
  last and CPU is the scheduler's over that window, so the driver's creation rate is in no figure.
  The `limit` column says whether the machine's cores were all busy (the scheduler, the API server
  and everything else on the machine shared them) or the scheduler had cores to spare.
- `arrival`: pods created while the scheduler runs, timed from the op's start (kube's own way);
  when the scheduler kept pace with the driver, the line says so: that rate is the driver's.

`--scoring 100,default` runs every workload and backend twice: percentageOfNodesToScore 100 for
both schedulers, then the field left out, so each uses its default (kube's adaptive rule, about 10%
of 5,000 nodes; minisched implements the same rule). The table at the end puts them side by side.

`--performance` runs kube's performance-labelled size of each test case (5,000 nodes; PreemptionBasic
1,000), smallest first, on minisched and kube-scheduler; a run past `--budget-minutes` stops and says
how far it got.

Default size: each test case's workload whose name starts with 500Nodes (or the nearest smaller /
larger unlabelled one: 1000Nodes for PreemptionBasic and SchedulingWithMixedChurn, 500Nodes/10Init/1kPods
for Unschedulable); --short runs the integration-test sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

# kube's performance-labelled size of each test case (the one with a threshold; the
# QueueingHintsEnabled / AsyncAPICallsEnabled variants differ only in feature gates).
PERFORMANCE_SIZES: dict[str, str] = {
    "SchedulingBasic": "5000Nodes_10000Pods",
    "SchedulingPodAntiAffinity": "5000Nodes_2000Pods",
    "SchedulingPodAffinity": "5000Nodes_5000Pods",
    "SchedulingPreferredPodAffinity": "5000Nodes_5000Pods",
    "SchedulingPreferredPodAntiAffinity": "5000Nodes_5000Pods",
    "SchedulingNodeAffinity": "5000Nodes_10000Pods",
    "TopologySpreading": "5000Nodes_5000Pods",
    "PreferredTopologySpreading": "5000Nodes_5000Pods",
    "PreemptionBasic": "1000Nodes",
    "Unschedulable": "5kNodes/100Init/10kPods",
    "SchedulingWithMixedChurn": "5000Nodes_10000Pods",
}
SCORING: dict[str, int | None] = {"100": 100, "default": None}  # percentageOfNodesToScore per setting
MIN_FREE_GIB = 4.0  # a 5,000-node control plane with two schedulers' worth of pods needs ~2-3 GiB

# For each test case, the workload run by default: the "a few minutes on 2 cores" size.
DEFAULT_SIZES: dict[str, str] = {
    "SchedulingBasic": "500Nodes",
    "SchedulingPodAntiAffinity": "500Nodes",
    "SchedulingPodAffinity": "500Nodes",
    "SchedulingPreferredPodAffinity": "500Nodes",
    "SchedulingPreferredPodAntiAffinity": "500Nodes",
    "SchedulingNodeAffinity": "500Nodes",
    "TopologySpreading": "500Nodes",
    "PreferredTopologySpreading": "500Nodes",
    "PreemptionBasic": "1000Nodes",
    "Unschedulable": "500Nodes/10Init/1kPods",
    "SchedulingWithMixedChurn": "1000Nodes",
}


def _fmt(v: float | None, width: int = 7) -> str:
    return f"{v:>{width}.1f}" if v is not None else f"{'-':>{width}}"


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1000:>7.0f}ms" if seconds is not None else f"{'-':>9}"


def run_one(workload: Any, backend_name: str, log: Any, *, percentage: int | None = 100, mode: str = "arrival",
            wait_timeout: float | None = None, minisched_tree: Path | None = None) -> Any:
    from minisched.perf.backends import EmbeddedMinisched, RealScheduler
    from minisched.perf.driver import run_workload

    if backend_name == "embedded":
        return run_workload(workload, EmbeddedMinisched(percentage_of_nodes_to_score=percentage), log=log,
                            mode=mode, wait_timeout=wait_timeout)
    from minisched.cluster.real import RealCluster
    from minisched.controlplane import ControlPlane, ControlPlaneOptions

    with ControlPlane(ControlPlaneOptions(start_kwok=False, ready_timeout=120)) as cp:
        cluster = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        try:
            which = "kube-scheduler" if backend_name == "kube" else "minisched"
            tree = minisched_tree if which == "minisched" else None
            backend = RealScheduler(which, cluster, cp, percentage_of_nodes_to_score=percentage, source_tree=tree)
            return run_workload(workload, backend, log=log, mode=mode, wait_timeout=wait_timeout)
        finally:
            cluster.close()


def free_memory_gib() -> float:
    """MemAvailable from /proc/meminfo, in GiB."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    return float("inf")


def workload_cost(workload: Any) -> int:
    """Nodes times pods the workload creates: its runs are ordered by it, smallest first."""
    nodes = sum(int(op.get("count") or 0) for op in workload.ops if op["opcode"] == "createNodes")
    pods = sum(int(op.get("count") or 0) for op in workload.ops if op["opcode"] == "createPods")
    return max(1, nodes) * max(1, pods)


def side_by_side(rows: list[dict[str, Any]], backends: list[str]) -> str:
    """The markdown table: one row per workload and scoring setting, each backend's figures beside
    the other's. `rows` are `row_of()` dicts."""
    by_key: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_key.setdefault((r["workload"], r["scoring"]), {})[r["backend"]] = r
    head = ["workload", "scoring"]
    for field in ("pods/s", "CPU-s / 1k pods", "peak RSS MiB", "limit"):
        head += [f"{b} {field}" for b in backends]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (workload, scoring), runs in by_key.items():
        cells = [workload, scoring]
        for key in ("pods_per_s", "cpu_s_per_1000_pods", "peak_rss_mib", "limit"):
            for b in backends:
                value = runs.get(b, {}).get(key)
                cells.append("-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def row_of(result: Any, backend: str, scoring: str) -> dict[str, Any]:
    """One run's table row: pods/s is, for a backlog drain, measured pods over the seconds from the
    scheduler's readiness to its last binding (SchedulingThroughput's average skips the seconds
    before the first binding, which in a preemption workload hold most of the work); for arrival,
    SchedulingThroughput's average (overall when it has no samples). `limit` says what bounded
    it, or what stopped the run."""
    t = result.throughput[-1] if result.throughput else None
    rate = None
    if t is not None:
        rate = t.overall if t.mode == "backlog" or t.average is None else t.average
    if not result.ok:
        limit = f"stopped: {result.problems()}"
    elif t is None:
        limit = "no measured op"
    else:
        limit = f"{t.mode}; {t.limit}" if t.limit else t.mode
    return {"workload": result.workload, "backend": backend, "scoring": scoring, "pods_per_s": rate,
            "cpu_s_per_1000_pods": result.cpu_seconds_per_1000_pods,
            "peak_rss_mib": result.peak_rss_bytes / 2**20 if result.peak_rss_bytes else None, "limit": limit}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--short", action="store_true", help="the smallest integration-test workload of each")
    sizes.add_argument("--performance", action="store_true",
                       help="kube's performance-labelled size of each (5,000 nodes), smallest first")
    parser.add_argument("--size", help="workload name to run in every test case that has it (e.g. 5000Nodes)")
    parser.add_argument("--backends", help="embedded, minisched, kube (default: all three; --performance: "
                                           "minisched,kube)")
    parser.add_argument("--scoring", default="100,default",
                        help="percentageOfNodesToScore settings: 100 and/or default (each scheduler's own)")
    parser.add_argument("--mode", choices=("backlog", "arrival"), default="backlog",
                        help="backlog: measured pods created before the scheduler starts (the scheduler's "
                             "rate); arrival: created while it runs (kube's way; may measure the driver)")
    parser.add_argument("--budget-minutes", type=float,
                        help="stop a run that has not scheduled a wait's pods within this many minutes")
    parser.add_argument("--workloads", help="comma-separated test cases (default: the issue's eleven)")
    parser.add_argument("--params", help="override workload params, e.g. initNodes=500,initPods=2000,measurePods=500 "
                                          "(PreemptionBasic at 500 nodes); the workload's name says so")
    parser.add_argument("--list", action="store_true", help="list the workloads and what the driver cannot run")
    parser.add_argument("--verbose", action="store_true", help="print each op as it runs")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--minisched-tree", type=Path, action="append", default=[],
                        help="run the minisched backend's scheduler from this source tree (e.g. a git worktree "
                             "of an earlier commit) instead of this one: before/after figures; repeat for "
                             "several, each run beside this tree's; the driver and control plane are this tree's")
    args = parser.parse_args(argv)

    from minisched.perf import (
        ISSUE_WORKLOADS,
        WorkloadError,
        WorkloadFilesNotFound,
        load_test_cases,
        scheduler_perf_root,
    )
    from minisched.perf.driver import unsupported_parts

    try:
        root = scheduler_perf_root()
        cases = load_test_cases(root)
    except WorkloadFilesNotFound as err:
        print(f"skipped: {err}")
        return 0
    names = [n.strip() for n in (args.workloads or ",".join(ISSUE_WORKLOADS)).split(",") if n.strip()]
    missing = [n for n in names if n not in cases]
    if missing:
        parser.error(f"no such test case(s) {missing} in {root}")
    scorings = [x.strip() for x in args.scoring.split(",") if x.strip()]
    if not scorings or set(scorings) - set(SCORING):
        parser.error(f"--scoring {args.scoring!r}: a comma-separated subset of {', '.join(SCORING)}")
    default_backends = "minisched,kube" if args.performance else "embedded,minisched,kube"
    backends = [b.strip() for b in (args.backends or default_backends).split(",") if b.strip()]
    if set(backends) - {"embedded", "minisched", "kube"}:
        parser.error(f"unknown backend(s) {sorted(set(backends) - {'embedded', 'minisched', 'kube'})}")
    if set(backends) & {"minisched", "kube"}:
        from minisched.controlplane import BinariesNotFound, find_binaries

        try:
            find_binaries()
        except BinariesNotFound as err:
            print(f"note: real-cluster backends skipped: {err}")
            backends = [b for b in backends if b == "embedded"]

    overrides: dict[str, int] = {}
    for item in (args.params or "").split(","):
        if item.strip():
            key, sep, value = item.partition("=")
            if not sep or not value.strip().isdigit():
                parser.error(f"--params: {item!r} is not name=<integer>")
            overrides[key.strip()] = int(value)
    workloads = []
    references: dict[str, tuple[str, float] | None] = {n: cases[n].reference_threshold() for n in names}
    for n in names:
        tc = cases[n]
        if args.short:
            workloads.append(tc.smallest("integration-test"))
            continue
        size = args.size or (PERFORMANCE_SIZES if args.performance else DEFAULT_SIZES).get(n)
        if size is None or size not in tc.workload_names():
            parser.error(f"{n} has no workload {size!r}; it has {tc.workload_names()}")
        try:
            workloads.append(tc.workload(size, overrides))
        except WorkloadError as err:
            parser.error(str(err))
    if args.performance:
        workloads.sort(key=workload_cost)

    print(f"kube's scheduler_perf workloads from {root}")
    from minisched.perf import NEEDS_INTER_POD_AFFINITY
    from minisched.perf.backends import has_inter_pod_affinity

    no_ipa = sorted(set(names) & NEEDS_INTER_POD_AFFINITY) if not has_inter_pod_affinity() else []
    if no_ipa:
        print(f"note: minisched has no InterPodAffinity plugin yet, so neither scheduler runs it (one plugin set "
              f"for both): the pod (anti-)affinity terms of {', '.join(no_ipa)} are ignored by both")
    if args.list:
        for w in workloads:
            print(f"{w.full_name}: params {dict(w.params)}, labels {list(w.labels)}, threshold {w.threshold} "
                  f"(kube's reference: {references[w.test_case]}), "
                  f"featureGates {dict(w.feature_gates)} (ignored)")
            for u in unsupported_parts(w):
                print(f"    not run: {u}")
        return 0
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at start: figures are measured under whatever "
          f"else runs on this machine; mode {args.mode}: " + (
              "measured pods created before the scheduler starts, so every pods/s is the scheduler's"
              if args.mode == "backlog" else
              "measured pods created while the scheduler runs, so a scheduler that keeps pace measures the driver"),
          flush=True)
    log = print if args.verbose else None
    wait_timeout = args.budget_minutes * 60 if args.budget_minutes else None
    results = []
    rows: list[dict[str, Any]] = []
    # each --minisched-tree is a column of its own, run beside this tree's minisched (interleaved)
    trees: dict[str, Path | None] = {}
    for b in backends:
        trees[b] = None
        if b == "minisched":
            for tree in args.minisched_tree:
                if not (tree / "minisched" / "cli.py").is_file():
                    parser.error(f"--minisched-tree {tree}: no minisched/cli.py there")
                trees[f"minisched@{tree.name}"] = tree
    backends = list(trees)
    for w in workloads:
        for scoring in scorings:
            for column, tree in trees.items():
                b = column.partition("@")[0]
                free = free_memory_gib()
                if b != "embedded" and free < MIN_FREE_GIB:
                    print(f"{w.full_name:<48} {column:<9} not run: {free:.1f} GiB of memory available, "
                          f"a control plane at this size needs ~{MIN_FREE_GIB:.0f}", flush=True)
                    continue
                r = run_one(w, b, log, percentage=SCORING[scoring], mode=args.mode, wait_timeout=wait_timeout,
                            minisched_tree=tree)
                r.backend = f"{r.backend} scoring={scoring}"
                b = column
                results.append(r)
                rows.append(row_of(r, b, scoring))
                _print_run(r, w, b, references[w.test_case], scoring)
    print(f"load at end {os.getloadavg()[0]:.1f}")
    if rows:
        rate = ("measured pods / (last binding - scheduler ready)" if args.mode == "backlog"
                else "SchedulingThroughput avg")
        print(f"\nside by side (mode {args.mode}; pods/s is {rate}; CPU-s per 1,000 measured pods "
              f"of the scheduler process" + (" over the drain, from its readiness to its last binding" if args.mode == "backlog" else "")
              + "; embedded: the whole bench process):")
        print(side_by_side(rows, backends), flush=True)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2, default=str))
    return 0 if all(r.ok for r in results) else 1


def _print_run(r: Any, w: Any, b: str, ref: tuple[str, float] | None, scoring: str) -> None:
    t = r.throughput[-1] if r.throughput else None
    cpu = r.cpu_seconds_per_1000_pods
    rss = r.peak_rss_bytes / 2**20 if r.peak_rss_bytes else None
    threshold = w.threshold if w.threshold is not None else (ref[1] if ref else None)
    print(f"{w.full_name:<48} {b:<9} {scoring:<7} thr avg {_fmt(t.average if t else None)} p50 "
          f"{_fmt(t.percentile(50) if t else None)} p99 {_fmt(t.percentile(99) if t else None)}  "
          f"overall {_fmt(t.overall if t else None)} pods/s  "
          f"create->bound p50 {_ms(t.latency_p50 if t else None)} p99 {_ms(t.latency_p99 if t else None)}  "
          f"threshold {_fmt(threshold, 5)}  "
          f"CPU {_fmt(cpu, 6)} s/1k pods  RSS {_fmt(rss, 6)} MiB  wall {r.wall_seconds:5.1f}s  "
          f"load {os.getloadavg()[0]:.1f}  {r.problems()}", flush=True)
    if w.threshold is None and ref:
        print(f"{'':<10}threshold shown is kube's for {w.test_case}/{ref[0]} (reference only, never compared)")
    for u in r.unsupported:
        print(f"{'':<10}not run: {u}")
    for a in r.adaptations:
        print(f"{'':<10}adapted: {a}")
    if r.feature_gates:
        print(f"{'':<10}featureGates ignored: {r.feature_gates}")
    if t is None:
        return
    if t.mode == "backlog":
        print(f"{'':<10}measured: backlog drain of {t.pods} pods created in {t.create_seconds:.1f}s before the "
              f"scheduler started; ready {t.start_to_ready or 0:.1f}s, first binding {t.start_to_first_bind or 0:.1f}s "
              f"after its start; "
              f"limit: {t.limit}")
        if t.cpu is not None:
            parts = ", ".join(f"{k} {v / t.cpu.window_seconds:.2f}" for k, v in sorted(t.cpu.by_process.items()))
            print(f"{'':<10}cores used over the drain: {parts}, other processes "
                  f"{t.cpu.others / t.cpu.window_seconds:.2f} (machine {t.cpu.machine_busy:.0%} of {t.cpu.cores})")
    else:
        rate = f"{t.pods / t.create_seconds:.0f}/s" if t.create_seconds > 0 else "-"
        print(f"{'':<10}measured: arrival, pods created at {rate} by the driver while the scheduler ran; limit: {t.limit}")
        if t.kept_pace:
            print(f"{'':<10}WARNING: the scheduler kept pace with creation, so this pods/s is the driver's "
                  f"creation rate (a lower bound on the scheduler's); --mode backlog measures the scheduler")
    print(f"{'':<10}CPU and RSS measured on: {r.usage_note}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
