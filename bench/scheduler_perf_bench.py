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

    .venv/bin/python bench/scheduler_perf_bench.py [--short] [--size 500Nodes] [--backends embedded,minisched,kube]
        [--workloads SchedulingBasic,...] [--params initNodes=500,...] [--list] [--json out.json]

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


def run_one(workload: Any, backend_name: str, log: Any) -> Any:
    from minisched.perf.backends import EmbeddedMinisched, RealScheduler
    from minisched.perf.driver import run_workload

    if backend_name == "embedded":
        return run_workload(workload, EmbeddedMinisched(), log=log)
    from minisched.cluster.real import RealCluster
    from minisched.controlplane import ControlPlane, ControlPlaneOptions

    with ControlPlane(ControlPlaneOptions(start_kwok=False, ready_timeout=120)) as cp:
        cluster = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        try:
            which = "kube-scheduler" if backend_name == "kube" else "minisched"
            return run_workload(workload, RealScheduler(which, cluster, cp), log=log)
        finally:
            cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="the smallest integration-test workload of each")
    parser.add_argument("--size", help="workload name to run in every test case that has it (e.g. 5000Nodes)")
    parser.add_argument("--backends", default="embedded,minisched,kube")
    parser.add_argument("--workloads", help="comma-separated test cases (default: the issue's eleven)")
    parser.add_argument("--params", help="override workload params, e.g. initNodes=500,initPods=2000,measurePods=500 "
                                          "(PreemptionBasic at 500 nodes); the workload's name says so")
    parser.add_argument("--list", action="store_true", help="list the workloads and what the driver cannot run")
    parser.add_argument("--verbose", action="store_true", help="print each op as it runs")
    parser.add_argument("--json", type=Path, help="also write the results here")
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
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
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
        else:
            size = args.size or DEFAULT_SIZES.get(n)
            if size is None or size not in tc.workload_names():
                parser.error(f"{n} has no workload {size!r}; it has {tc.workload_names()}")
            try:
                workloads.append(tc.workload(size, overrides))
            except WorkloadError as err:
                parser.error(str(err))

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
          f"else runs on this machine", flush=True)
    log = print if args.verbose else None
    results = []
    for w in workloads:
        for b in backends:
            r = run_one(w, b, log)
            results.append(r)
            t = r.throughput[-1] if r.throughput else None
            cpu = r.cpu_seconds_per_1000_pods
            rss = r.peak_rss_bytes / 2**20 if r.peak_rss_bytes else None
            ref = references[w.test_case]
            threshold = w.threshold if w.threshold is not None else (ref[1] if ref else None)
            print(f"{w.full_name:<48} {b:<9} thr avg {_fmt(t.average if t else None)} p50 "
                  f"{_fmt(t.percentile(50) if t else None)} p99 {_fmt(t.percentile(99) if t else None)}  "
                  f"overall {_fmt(t.overall if t else None)} pods/s  "
                  f"create->bound p50 {_ms(t.latency_p50 if t else None)} p99 {_ms(t.latency_p99 if t else None)}  "
                  f"threshold {_fmt(threshold, 5)}  "
                  f"CPU {_fmt(cpu, 6)} s/1k pods  RSS {_fmt(rss, 6)} MiB  wall {r.wall_seconds:5.1f}s  "
                  f"{r.problems()}", flush=True)
            if w.threshold is None and ref:
                print(f"{'':<10}threshold shown is kube's for {w.test_case}/{ref[0]} (reference only, never compared)")
            for u in r.unsupported:
                print(f"{'':<10}not run: {u}")
            for a in r.adaptations:
                print(f"{'':<10}adapted: {a}")
            if r.feature_gates:
                print(f"{'':<10}featureGates ignored: {r.feature_gates}")
            print(f"{'':<10}CPU and RSS measured on: {r.usage_note}"
                  + (f"; measured pods created at {t.pods / t.create_seconds:.0f}/s by the driver"
                     if t and t.create_seconds > 0 else ""))
    print(f"load at end {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2, default=str))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
