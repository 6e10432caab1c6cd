"""The binding path's CPU per pod, in process (a benchmark, not a test; issue 27).

minisched schedules a backlog of identical pods with the matched profile, kube's metrics observer
and an event recorder (as `minisched run` does), on an embedded cluster or a real control plane
(etcd + kube-apiserver, nodes created Ready). Every binding cycle (the job a binding worker runs:
Permit wait, PreBind, Bind, PostBind, the cache's finish-binding, queue bookkeeping, metrics, the
Scheduled event's hand-off) is timed on its thread's CPU clock (time.thread_time), and so is the
cluster's bind call inside it. Printed per run, in µs per pod:

- cycle: the binding cycle's CPU on the binding thread;
- bind call: the part of it in `cluster.bind` (on a real control plane the Binding's JSON, the
  HTTP/1.1 request and response on a pooled connection; embedded, the in-memory store's write);
- rest: cycle less bind call, the Python around the call that this bench is for;
- workers: every binding thread's CPU from /proc (the above plus the workers' own queueing).

    .venv/bin/python bench/binding_bench.py [--real] [--nodes 100] [--pods 3000] [--bind-workers 64]
        [--repeat 3] [--tree DIR ...] [--profile N]

`--tree DIR` also runs the bench with that checkout's minisched (a worktree of another commit),
alternating with this one's run by run, and prints the medians side by side: before/after figures on
a shared machine. `--profile N` prints the N functions the binding cycles spent most time in
(cProfile on each binding thread's CPU clock, merged; figures under a profiler are inflated).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

PROFILE = "bench"
NAMESPACE = "bench"


def _cluster(real: bool) -> tuple[Any, Any]:
    """(cluster, control plane or None)."""
    if not real:
        from minisched.cluster.embedded import EmbeddedCluster

        return EmbeddedCluster(), None
    from minisched.cluster.real import RealCluster
    from minisched.controlplane import ControlPlane, ControlPlaneOptions

    cp = ControlPlane(ControlPlaneOptions(start_kwok=False, ready_timeout=120))
    cp.__enter__()
    return RealCluster.from_kubeconfig(path=str(cp.kubeconfig)), cp


def _populate(cluster: Any, nodes: int, pods: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from minisched.controlplane import fake_node
    from minisched.objects import make_pod

    cluster.create("namespaces", {"metadata": {"name": NAMESPACE}})
    node_objects = []
    for i in range(nodes):
        node = fake_node(f"node-{i:04d}", cpu="64", memory="256Gi", pods="1000")
        node["metadata"]["annotations"] = {}
        node["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        node_objects.append(node)
    pod_objects = [make_pod(f"pod-{i:05d}", namespace=NAMESPACE, cpu="100m", memory="500Mi",
                            scheduler_name=PROFILE) for i in range(pods)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: cluster.create("nodes", n), node_objects))
        list(pool.map(lambda p: cluster.create("pods", p), pod_objects))


def run(real: bool, nodes: int, pods: int, bind_workers: int, profile: int) -> dict[str, Any]:
    from minisched.controlplane.observe import matched_scheduler_config, thread_cpu_seconds
    from minisched.observability.metrics import SchedulerMetrics
    from minisched.observability.threadnames import name_os_threads
    from minisched.scheduler.events import EventRecorder
    from minisched.scheduler.scheduler import Scheduler

    name_os_threads()
    cluster, cp = _cluster(real)
    try:
        _populate(cluster, nodes, pods)
        sched = Scheduler(cluster, config=matched_scheduler_config(PROFILE), bind_workers=bind_workers,
                          observer=SchedulerMetrics(), recorder=EventRecorder(cluster))
        # one slot per binding thread, each written by its own thread only: no lock on the measured path
        cycle_cpu: dict[int, float] = {}
        bind_cpu: dict[int, float] = {}
        profilers: dict[int, cProfile.Profile] = {}
        cycle = sched._binding_cycle
        bind = cluster.bind

        def timed_bind(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return bind(*args, **kwargs)
            finally:
                me = threading.get_ident()
                bind_cpu[me] = bind_cpu.get(me, 0.0) + time.thread_time() - t0

        def timed_cycle(a: Any) -> None:
            me = threading.get_ident()
            prof = None
            if profile:
                prof = profilers.get(me) or profilers.setdefault(me, cProfile.Profile(time.thread_time))
                prof.enable()
            t0 = time.thread_time()
            try:
                cycle(a)
            finally:
                cycle_cpu[me] = cycle_cpu.get(me, 0.0) + time.thread_time() - t0
                if prof is not None:
                    prof.disable()

        cluster.bind = timed_bind
        sched._binding_cycle = timed_cycle  # type: ignore[method-assign]  # looked up on the instance at each submit
        started = time.monotonic()
        sched.start()
        deadline = started + 600
        while sched.stats.bound < pods:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{sched.stats.bound} of {pods} bound after 600 s")
            time.sleep(0.05)
        seconds = time.monotonic() - started
        workers = thread_cpu_seconds(os.getpid()).get("bind-*", 0.0)
        sched.stop()
    finally:
        cluster.close()
        if cp is not None:
            cp.__exit__(None, None, None)
    result = {
        "pods": pods,
        "pods_per_s": round(pods / seconds, 1),
        "cycle_us": sum(cycle_cpu.values()) / pods * 1e6,
        "bind_call_us": sum(bind_cpu.values()) / pods * 1e6,
        "workers_us": workers / pods * 1e6,
    }
    result["rest_us"] = result["cycle_us"] - result["bind_call_us"]
    if profilers:
        stats = pstats.Stats(*profilers.values()) if len(profilers) > 1 else pstats.Stats(next(iter(profilers.values())))
        stats.sort_stats("tottime").print_stats(profile)
        stats.sort_stats("cumulative").print_stats(profile)
    return result


def _child(tree: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    """One run in a fresh interpreter, with `tree`'s minisched (None: this checkout's)."""
    from minisched.perf.backends import minisched_process_tree

    # this checkout's when no tree is given, whatever the working directory (the venv's editable
    # install may point at another checkout)
    cwd, env = minisched_process_tree(tree or Path(__file__).resolve().parents[1])
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--nodes", str(args.nodes), "--pods",
           str(args.pods), "--bind-workers", str(args.bind_workers)] + (["--real"] if args.real else [])
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        raise RuntimeError(f"binding bench child failed ({tree or 'this tree'}):\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


FIELDS = ("cycle_us", "bind_call_us", "rest_us", "workers_us", "pods_per_s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real", action="store_true", help="a real control plane (default: embedded cluster)")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--bind-workers", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="also run with this checkout's minisched, alternating; repeatable")
    parser.add_argument("--profile", type=int, default=0, help="print the top N functions (one run, this tree)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child or args.profile:
        result = run(args.real, args.nodes, args.pods, args.bind_workers, args.profile)
        print(json.dumps(result))
        return 0
    if args.real:
        from minisched.controlplane import BinariesNotFound, find_binaries

        try:
            find_binaries()
        except BinariesNotFound as err:
            print(f"skipped: {err}")
            return 0
    trees: dict[str, Path | None] = {"this tree": None, **{f"{t}": t for t in args.tree}}
    print(f"binding path, {'real control plane' if args.real else 'embedded cluster'}: {args.nodes} nodes, "
          f"{args.pods} pods, {args.bind_workers} binding workers; {os.cpu_count()} CPUs; µs of CPU per pod",
          flush=True)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for round_ in range(args.repeat):
        for name, tree in trees.items():
            load = os.getloadavg()[0]
            r = _child(tree, args)
            r["load"] = load
            results[name].append(r)
            print(f"  round {round_ + 1} {name:<28} load {load:4.1f}  " +
                  "  ".join(f"{f} {r[f]:7.1f}" for f in FIELDS), flush=True)
    print(f"median over {args.repeat} rounds (min-max):")
    for name, rs in results.items():
        cells = []
        for f in FIELDS:
            values = [r[f] for r in rs]
            cells.append(f"{f} {statistics.median(values):7.1f} ({min(values):.0f}-{max(values):.0f})")
        loads = ", ".join(f"{r['load']:.1f}" for r in rs)
        print(f"  {name:<28} " + "  ".join(cells) + f"  load {loads}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
