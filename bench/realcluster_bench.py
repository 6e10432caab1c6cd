"""minisched and kube-scheduler side by side on a real control plane (a benchmark, not a test).

Backlog drain, once per scheduler, each on a fresh control plane (etcd + kube-apiserver + KWOK):
create the KWOK nodes, pre-create every pod (pending, schedulerName of the profile), then start
exactly one scheduler and wait until a watch observer has seen every pod bound. Both schedulers get
the same configuration (controlplane.observe.matched_scheduler_config: minisched's plugin set with
kube's weights, percentageOfNodesToScore 100, client qps/burst 5000) and run as separate processes
(`minisched run --config ...` in a subprocess), measured alike from /proc.

Then the ceiling: on another fresh control plane, the same pods bound by a tight client (a thread
pool POSTing pods/binding round-robin over the nodes) with no scheduling at all.

Printed per run, from one watch observer's 1-second samples of pods bound:
- pods/s: average over the makespan (first to last binding), p50 and p99 of the 1-second samples;
- creation-to-bound latency p50 / p99 on the observer's clock (in a backlog drain mostly queueing);
- scheduler CPU-seconds per 1,000 pods and peak RSS (/proc/<pid>/stat and VmHWM);
- minisched's CPU per pod by thread (/proc/<pid>/task/*/schedstat, by thread name: `minisched run`
  names its OS threads), the binding workers summed as one line, "bind-*";
- kube-apiserver, etcd and KWOK CPU-seconds over the drain, to show where the machine's time went;
- the machine's CPU per pod (scheduler or binding clients + API server + etcd + KWOK + this
  process's watch observer) and the rate at which that would saturate every core: on a machine
  the API server shares, a scheduler's pods/s cannot pass cores / (CPU per pod), so the summary
  says how much CPU per pod 90% of the ceiling leaves, beside what the API server alone spent.

    .venv/bin/python bench/realcluster_bench.py [--nodes 500] [--pods 5000] [--runs kube,minisched,ceiling]
        [--bind-workers 64] [--repeat 1] [--ceiling-processes 4] [--ceiling-threads 16] [--no-kwok] [--json out.json]
        [--minisched-tree DIR ...]  (another checkout's minisched, run right after this one's each round)

Needs the control-plane binaries (`make controlplane`); without them it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

PROFILE = "bench"
NAMESPACE = "bench"


def _nodes(count: int, kwok: bool) -> list[dict[str, Any]]:
    from minisched.controlplane import fake_node

    nodes = []
    for i in range(count):
        node = fake_node(f"node-{i:04d}", cpu="4", memory="32Gi", pods="110",
                         labels={"topology.kubernetes.io/zone": f"z{i % 3}"})
        if not kwok:  # nobody heartbeats: create them Ready and without KWOK's annotation
            node["metadata"]["annotations"] = {}
            node["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        nodes.append(node)
    return nodes


def _pods(count: int) -> list[dict[str, Any]]:
    from minisched.objects import make_pod

    # scheduler_perf's SchedulingBasic pod: 100m / 500Mi.
    return [make_pod(f"pod-{i:05d}", namespace=NAMESPACE, cpu="100m", memory="500Mi", scheduler_name=PROFILE)
            for i in range(count)]


def _prepare(cp: Any, nodes: int, pods: int, kwok: bool) -> tuple[Any, float]:
    """Nodes and the pending backlog on a fresh control plane; returns (cluster, pods created per s)."""
    from minisched.cluster.real import RealCluster
    from minisched.controlplane import node_is_ready, wait_for

    cluster = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
    cluster.create("namespaces", {"metadata": {"name": NAMESPACE}})
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: cluster.create("nodes", n), _nodes(nodes, kwok)))
    wait_for(lambda: sum(node_is_ready(n) for n in cluster.list("nodes")["items"]) == nodes, 300,
             "every node Ready")
    t0 = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda p: cluster.create("pods", p), _pods(pods)))
    return cluster, pods / (time.monotonic() - t0)


def _usage(cp: Any) -> dict[str, float]:
    from minisched.controlplane.observe import process_usage

    return {name: process_usage(proc.pid).cpu_seconds for name, proc in cp.processes.items()
            if name in ("kube-apiserver", "etcd", "kwok") and proc.running()}


def _summary(obs: Any, pods: int, started: float) -> dict[str, Any]:
    from minisched.controlplane.observe import per_second, percentile

    bound = obs.bound_times()
    first, last = bound[0], bound[-1]
    samples = per_second(bound, first, last)
    full = samples[:-1] if len(samples) > 1 else samples  # the last second is partial
    latencies = [r.bound - r.created for r in obs.pods.values() if r.bound is not None]
    return {
        "pods": pods,
        "makespan_s": round(last - first, 2),
        "start_to_first_bind_s": round(first - started, 2),
        "pods_per_s_avg": round(len(bound) / max(1e-9, last - first), 1),
        "pods_per_s_p50": percentile([float(s) for s in full], 50),
        "pods_per_s_p99": percentile([float(s) for s in full], 99),
        "latency_p50_s": round(percentile(latencies, 50), 2),
        "latency_p99_s": round(percentile(latencies, 99), 2),
        "samples": samples,
        "overcommits": len(obs.overcommits),
        "watch_restarts": obs.watch_restarts,
    }


def _server_side(cluster: Any) -> dict[str, Any]:
    """Per-second bindings as the API server stamped them (PodScheduled=True lastTransitionTime,
    1 s resolution): a check on the observer, whose samples lag when the machine is saturated."""
    from datetime import datetime

    stamps = []
    for pod in cluster.list("pods", NAMESPACE)["items"]:
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "True" and c.get("lastTransitionTime"):
                stamps.append(datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00")).timestamp())
    if not stamps:
        return {}
    first = min(stamps)
    samples = [0] * (int(max(stamps) - first) + 1)
    for t in stamps:
        samples[int(t - first)] += 1
    return {"server_stamped": len(stamps), "server_seconds": len(samples), "server_samples": samples,
            "server_pods_per_s": round(len(stamps) / len(samples), 1)}


def run_scheduler(which: str, nodes: int, pods: int, kwok: bool, bind_workers: int,
                  minisched_tree: Path | None = None) -> dict[str, Any]:
    """`minisched_tree`: run that checkout's minisched (a worktree of another commit) instead of
    this one's, on this tree's control plane and observer."""
    from minisched.controlplane import ControlPlane, ControlPlaneOptions
    from minisched.controlplane.observe import (
        PodObserver,
        matched_scheduler_config,
        process_usage,
        thread_cpu_seconds,
    )
    from minisched.perf.backends import minisched_process_tree

    config = matched_scheduler_config(PROFILE)
    with ControlPlane(ControlPlaneOptions(start_kwok=kwok, ready_timeout=120)) as cp:
        cluster, create_rate = _prepare(cp, nodes, pods, kwok)
        node_objects = cluster.list("nodes")["items"]
        with PodObserver(cluster, namespace=NAMESPACE, nodes=node_objects) as obs:
            obs.wait_for(lambda o: len(o.pods) >= pods, 120, "the observer to see every pod")
            before = _usage(cp)
            started, observer_cpu0 = time.monotonic(), time.process_time()
            minisched: subprocess.Popen[bytes] | None = None
            if which == "kube":
                pid = cp.start_scheduler(config, name="kube-scheduler").pid
            else:
                cfg = cp.work_dir / "minisched-config.yaml"
                cfg.write_text(yaml.safe_dump(config))
                log = open(cp.log_dir / "minisched.log", "wb")  # noqa: SIM115 - closed below
                # this checkout's when no other tree is given, whatever the working directory (the
                # venv's editable install may point at another checkout)
                cwd, env = minisched_process_tree(minisched_tree or Path(__file__).resolve().parents[1])
                minisched = subprocess.Popen(
                    [sys.executable, "-m", "minisched.cli", "run", "--kubeconfig", str(Path(cp.kubeconfig).resolve()),
                     "--config", str(cfg.resolve()), "--bind-workers", str(bind_workers)],
                    stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env)
                pid = minisched.pid
            try:
                obs.wait_for(lambda o: o.bound_count() >= pods, 1800, f"{which} to bind every pod")
                usage = process_usage(pid)
                after = _usage(cp)
                observer_cpu = time.process_time() - observer_cpu0
                settled_cpu = _settled_cpu(pid)
                threads = thread_cpu_seconds(pid) if which != "kube" else {}
            finally:
                if minisched is not None:
                    minisched.terminate()
                    minisched.wait(60)
                    log.close()
            result = _summary(obs, pods, started)
        result.update(_server_side(cluster))
        cluster.close()
    result.update({
        "scheduler": which if minisched_tree is None else f"{which}@{minisched_tree.name}",
        "nodes": nodes,
        "kwok": kwok,
        "create_pods_per_s": round(create_rate, 1),
        "cpu_s_per_1000_pods": round(usage.cpu_seconds / pods * 1000, 2),
        "cpu_s_per_1000_pods_settled": round(settled_cpu / pods * 1000, 2),
        "peak_rss_mib": round(usage.peak_rss_bytes / 2**20, 1),
        "component_cpu_s": {k: round(after.get(k, 0) - v, 1) for k, v in before.items()},
        # the whole process's life (start-up and the initial lists included), settled, per pod
        "thread_cpu_us_per_pod": {name: round(cpu / pods * 1e6) for name, cpu in
                                  sorted(threads.items(), key=lambda kv: -kv[1]) if cpu > 0},
    })
    result.update(_machine_cpu(pods, which, usage.cpu_seconds, result["component_cpu_s"], observer_cpu))
    return result


def _settled_cpu(pid: int, timeout: float = 30.0) -> float:
    """The scheduler's CPU-seconds once it has gone quiet after the last binding (under 2% of a core
    over half a second): what it still had queued then (a Scheduled Event per pod, written behind
    the bindings) is part of its cost per pod too, and a writer that lags would otherwise hide it."""
    from minisched.controlplane.observe import process_usage

    last = process_usage(pid).cpu_seconds
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = process_usage(pid).cpu_seconds
        if now - last < 0.01:
            return now
        last = now
    return last


def _warm(_: int) -> None:
    import kubernetes.config  # noqa: F401 - the import is the warm-up

    import minisched.cluster.real  # noqa: F401


def _bind_slice(kubeconfig: str, first: int, step: int, pods: int, nodes: int, threads: int) -> tuple[int, float]:
    """One ceiling process: bind pods first, first+step, ... round-robin over the nodes; returns
    (pods bound, this process's CPU-seconds doing it)."""
    from minisched.cluster.real import RealCluster

    cpu0 = time.process_time()
    cluster = RealCluster.from_kubeconfig(path=kubeconfig)
    indices = range(first, pods, step)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: cluster.bind(NAMESPACE, f"pod-{i:05d}", f"node-{i % nodes:04d}"), indices))
    cluster.close()
    return len(indices), time.process_time() - cpu0


def run_ceiling(nodes: int, pods: int, kwok: bool, processes: int, threads: int) -> dict[str, Any]:
    """Bindings only: how fast this API server takes pods/binding from clients that decide nothing.
    Several processes, so the Python client's GIL is not what is measured."""
    from minisched.controlplane import ControlPlane, ControlPlaneOptions
    from minisched.controlplane.observe import PodObserver

    spawn = multiprocessing.get_context("spawn")
    with ControlPlane(ControlPlaneOptions(start_kwok=kwok, ready_timeout=120)) as cp, \
            ProcessPoolExecutor(processes, mp_context=spawn) as workers:
        # Warm the workers up (interpreter start, imports) before the clock starts.
        list(workers.map(_warm, range(processes)))
        cluster, create_rate = _prepare(cp, nodes, pods, kwok)
        with PodObserver(cluster, namespace=NAMESPACE) as obs:
            obs.wait_for(lambda o: len(o.pods) >= pods, 120, "the observer to see every pod")
            before = _usage(cp)
            started, observer_cpu0 = time.monotonic(), time.process_time()
            slices = list(workers.map(_bind_slice, [str(cp.kubeconfig)] * processes, range(processes),
                                      [processes] * processes, [pods] * processes, [nodes] * processes,
                                      [threads] * processes))
            client_seconds = time.monotonic() - started
            assert sum(n for n, _ in slices) == pods
            obs.wait_for(lambda o: o.bound_count() >= pods, 300, "the observer to see every binding")
            after = _usage(cp)
            observer_cpu = time.process_time() - observer_cpu0
            result = _summary(obs, pods, started)
        result.update(_server_side(cluster))
        cluster.close()
    result.update({
        "scheduler": f"ceiling ({processes}x{threads} binders)",
        "nodes": nodes,
        "kwok": kwok,
        "create_pods_per_s": round(create_rate, 1),
        "client_binds_per_s": round(pods / client_seconds, 1),
        "component_cpu_s": {k: round(after.get(k, 0) - v, 1) for k, v in before.items()},
    })
    result.update(_machine_cpu(pods, "binding clients", sum(cpu for _, cpu in slices), result["component_cpu_s"],
                               observer_cpu))
    return result


def _machine_cpu(pods: int, client: str, client_cpu: float, components: dict[str, float],
                 observer_cpu: float) -> dict[str, Any]:
    """Where the machine's CPU went per pod, and the pods/s at which it would fill every core."""
    parts = {client: client_cpu, **components, "observer": observer_cpu}
    per_pod_ms = {k: round(v / pods * 1e3, 3) for k, v in parts.items()}
    total = sum(parts.values()) / pods
    return {"cpu_ms_per_pod": per_pod_ms, "machine_cpu_ms_per_pod": round(total * 1e3, 3),
            "cpu_bound_pods_per_s": round((os.cpu_count() or 1) / total, 1) if total > 0 else None}


def _print(r: dict[str, Any]) -> None:
    line = (f"{r['scheduler']:<28} {r['pods_per_s_avg']:>8.1f} pods/s avg  p50 {r['pods_per_s_p50']:>6.0f}  "
            f"p99 {r['pods_per_s_p99']:>6.0f}  makespan {r['makespan_s']:>6.1f}s  "
            f"latency p50 {r['latency_p50_s']:.2f}s p99 {r['latency_p99_s']:.2f}s")
    if "cpu_s_per_1000_pods" in r:
        line += (f"  CPU {r['cpu_s_per_1000_pods']:.2f}s/1000 pods ({r['cpu_s_per_1000_pods_settled']:.2f} settled)"
                 f"  peak RSS {r['peak_rss_mib']:.0f} MiB")
    if "client_binds_per_s" in r:
        line += f"  (client-side {r['client_binds_per_s']:.1f} binds/s)"
    line += f"  start->first bind {r['start_to_first_bind_s']:.1f}s  load {r.get('load_before', 0):.1f}"
    print(line, flush=True)
    if "server_pods_per_s" in r:
        print(f"{'':<28} server-stamped ({r['server_stamped']} pods): {r['server_pods_per_s']:.1f} pods/s over {r['server_seconds']} "
              f"whole seconds; per second {r['server_samples']}", flush=True)
    print(f"{'':<28} other CPU-s over the drain: {r['component_cpu_s']}; pods created at "
          f"{r['create_pods_per_s']:.0f}/s; over-commits {r['overcommits']}", flush=True)
    if r.get("thread_cpu_us_per_pod"):
        parts = _thread_parts(r["thread_cpu_us_per_pod"])
        print(f"{'':<28} its threads, CPU µs per pod (settled; 'bind-*' is every binding worker; 'python' the main thread, start-up): {parts}",
              flush=True)
    if "machine_cpu_ms_per_pod" in r:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in r["cpu_ms_per_pod"].items())
        bound = r["cpu_bound_pods_per_s"]
        limit = ("the cores (its rate is within 15% of it)" if bound and r["pods_per_s_avg"] >= 0.85 * bound
                 else "the scheduler (cores to spare)")
        print(f"{'':<28} machine CPU per pod {r['machine_cpu_ms_per_pod']:.2f} ms ({parts}): every core busy at "
              f"{bound:.0f} pods/s; limit: {limit}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--runs", default="kube,minisched,ceiling",
                        help="comma-separated: kube, minisched, ceiling (each on a fresh control plane)")
    parser.add_argument("--bind-workers", type=int, default=64,
                        help="minisched's binding threads (default 64, its connection pool's size)")
    parser.add_argument("--repeat", type=int, default=1, help="run the whole sequence this many times")
    parser.add_argument("--ceiling-processes", type=int, default=4, help="binding client processes")
    parser.add_argument("--ceiling-threads", type=int, default=16, help="binding threads per process")
    parser.add_argument("--no-kwok", action="store_true",
                        help="nodes created Ready with no KWOK (no pod status updates competing for CPU)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--minisched-tree", type=Path, action="append", default=[],
                        help="also run the minisched from this source tree (e.g. a git worktree of an earlier "
                             "commit), right after this tree's in each round: before/after figures; repeatable")
    args = parser.parse_args(argv)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = set(runs) - {"kube", "minisched", "ceiling"}
    if unknown or args.nodes < 1 or args.pods < 1:
        parser.error(f"unknown run(s) {sorted(unknown)}" if unknown else "--nodes and --pods must be >= 1")
    for tree in args.minisched_tree:
        if not (tree / "minisched" / "cli.py").is_file():
            parser.error(f"--minisched-tree {tree}: no minisched/cli.py there")
        if "minisched" not in runs:
            parser.error("--minisched-tree runs beside this tree's minisched: put minisched in --runs")
    # each tree's run comes right after this tree's minisched: interleaved, so the load is alike
    plan: list[tuple[str, Path | None]] = []
    for which in runs:
        plan.append((which, None))
        if which == "minisched":
            plan.extend(("minisched", tree) for tree in args.minisched_tree)

    from minisched.controlplane import BinariesNotFound, find_binaries

    try:
        find_binaries()
    except BinariesNotFound as err:
        print(f"skipped: {err}")
        return 0
    kwok = not args.no_kwok
    print(f"backlog drain: {args.nodes} nodes ({'KWOK' if kwok else 'no KWOK'}), {args.pods} pods of 100m/500Mi; "
          f"matched plugins, percentageOfNodesToScore 100, client qps/burst 5000; {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    print("measured: the scheduler's rate. Every pod exists before the scheduler (or the ceiling's binders) "
          "starts, and pods/s runs from the first binding to the last, so no creation rate is in it; "
          "'every core busy at' says when the machine's cores, not the scheduler, bound it", flush=True)
    results = []
    for round_ in range(args.repeat):
        if args.repeat > 1:
            print(f"-- round {round_ + 1} of {args.repeat}", flush=True)
        for which, tree in plan:
            load = os.getloadavg()[0]
            if which == "ceiling":
                r = run_ceiling(args.nodes, args.pods, kwok, args.ceiling_processes, args.ceiling_threads)
            else:
                r = run_scheduler(which, args.nodes, args.pods, kwok, args.bind_workers, tree)
            r["round"] = round_
            r["load_before"] = round(load, 2)
            results.append(r)
            _print(r)
    rates: dict[str, list[float]] = {}
    server: dict[str, list[float]] = {}
    for r in results:
        name = r["scheduler"].split()[0]
        rates.setdefault(name, []).append(r["pods_per_s_avg"])
        server.setdefault(name, []).append(r.get("server_pods_per_s", 0.0))
    print("pods/s, median (min-max) over rounds; observer / server-stamped:")
    for name in rates:
        print(f"  {name:<10} {statistics.median(rates[name]):7.1f} ({min(rates[name]):.1f}-{max(rates[name]):.1f})"
              f"   {statistics.median(server[name]):7.1f} ({min(server[name]):.1f}-{max(server[name]):.1f})")
    _cpu_medians(results)
    med = {name: statistics.median(v) for name, v in rates.items()}
    if "kube" in med and "minisched" in med:
        print(f"minisched / kube-scheduler pods/s: {med['minisched'] / med['kube']:.2f} (target >= 1.00)")
    if "ceiling" in med and "minisched" in med:
        print(f"minisched / Binding ceiling: {med['minisched'] / med['ceiling']:.2f} (target >= 0.90)")
        _ceiling_budget(results, med["ceiling"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def _cpu_medians(results: list[dict[str, Any]]) -> None:
    """Each scheduler's CPU per pod (settled) and its threads', median over rounds, with the load."""
    names = dict.fromkeys(r["scheduler"] for r in results if "cpu_s_per_1000_pods_settled" in r)
    if not names:
        return
    print("scheduler CPU ms per pod (settled), median (min-max) over rounds, load average before each run; "
          "threads in µs per pod, median:")
    for name in names:
        rs = [r for r in results if r["scheduler"] == name]
        cpu = [r["cpu_s_per_1000_pods_settled"] for r in rs]
        loads = ", ".join(f"{r['load_before']:.1f}" for r in rs)
        print(f"  {name:<24} {statistics.median(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f})  load {loads}")
        threads = dict.fromkeys(t for r in rs for t in r.get("thread_cpu_us_per_pod", {}))
        if threads:
            medians = {t: statistics.median(r.get("thread_cpu_us_per_pod", {}).get(t, 0) for r in rs) for t in threads}
            print("    " + _thread_parts(medians))


def _thread_parts(us_per_pod: dict[str, float], least: float = 5.0) -> str:
    """'name µs, ...' for the threads that spent at least `least` µs per pod, the rest summed."""
    shown = {name: v for name, v in us_per_pod.items() if v >= least}
    rest = sum(v for name, v in us_per_pod.items() if name not in shown)
    text = ", ".join(f"{name} {v:.0f}" for name, v in sorted(shown.items(), key=lambda kv: -kv[1]))
    others = len(us_per_pod) - len(shown)
    return text + (f", {others} others {rest:.0f}" if others else "")


def _ceiling_budget(results: list[dict[str, Any]], ceiling: float) -> None:
    """What 90% of the ceiling leaves per pod on this machine's cores, beside what the API server
    and etcd alone spent per pod of each scheduler's traffic (bind, Events, the watches it is served)."""
    cores = os.cpu_count() or 1
    budget = cores / (0.9 * ceiling) * 1e3
    print(f"at 0.90 of the ceiling ({0.9 * ceiling:.0f} pods/s) {cores} cores leave {budget:.2f} ms of CPU per pod "
          f"for everything; spent per pod (median over rounds):")
    for name in ("ceiling", "minisched", "kube"):
        rs = [r for r in results if r["scheduler"].split()[0] == name and "cpu_ms_per_pod" in r]
        if not rs:
            continue
        server = statistics.median(sum(v for k, v in r["cpu_ms_per_pod"].items() if k in ("kube-apiserver", "etcd"))
                                   for r in rs)
        total = statistics.median(r["machine_cpu_ms_per_pod"] for r in rs)
        print(f"  {name:<10} API server + etcd {server:.2f} ms, whole machine {total:.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
