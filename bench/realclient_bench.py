"""RealCluster's client CPU per API call and per watch event, against a real local API server (a
benchmark, not a test).

On one fresh control plane (etcd + kube-apiserver, no KWOK), a node and `--pods` pending pods; then,
for each client form in turn (alternating, `--rounds` times), one thread binds a slice of the pods
and writes a Scheduled Event for each (minisched's two calls per pod), and one watch of the pods
from resourceVersion 0 decodes every pod as an ADDED event. Only the calling thread's CPU is
counted (time.thread_time), so the API server's work on the same cores is not; wall time per call
is printed too but depends on the server and the load.

Client forms: `current` is minisched.cluster.real as it is in this checkout; `--baseline REV` loads
minisched/cluster/real.py from a git revision (e.g. main) as a second module, so before and after
run side by side in one sitting. `--profile` prints cProfile's top functions for the current form.

`--scheduler`: instead, for each form on a fresh control plane, an in-process Scheduler (64 binding
workers, the default profile) drains `--pods` pods over `--nodes` nodes, and each thread's CPU is
read from its pthread CPU clock: where minisched's CPU per pod goes (the scheduling loop, the
binding workers, the event writer, the pod reflector and informer).

    .venv/bin/python bench/realclient_bench.py [--pods 3000] [--rounds 2] [--baseline main] [--profile]
    .venv/bin/python bench/realclient_bench.py --scheduler [--nodes 500] [--pods 5000] [--baseline main]

Needs the control-plane binaries (`make controlplane`); without them it says so and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib.util
import io
import pstats
import re
import subprocess
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

NAMESPACE = "clientbench"
ROOT = Path(__file__).resolve().parent.parent


def _baseline_module(rev: str) -> types.ModuleType:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:minisched/cluster/real.py"],
                            check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader(f"real_at_{rev}", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    exec(compile(source, f"{rev}:minisched/cluster/real.py", "exec"), module.__dict__)  # noqa: S102
    return module


def _event(name: str, i: int) -> dict[str, Any]:
    """What EventRecorder writes for a Scheduled pod (core/v1)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name}.{i:x}", "namespace": NAMESPACE},
        "involvedObject": {"kind": "Pod", "namespace": NAMESPACE, "name": name, "uid": f"uid-{i}",
                           "apiVersion": "v1", "resourceVersion": "1"},
        "reason": "Scheduled", "message": f"Successfully assigned {NAMESPACE}/{name} to node-0",
        "type": "Normal", "source": {"component": "minisched"},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1, "action": "Binding",
        "reportingComponent": "minisched", "reportingInstance": "minisched-bench",
    }


def _calls(cluster: Any, names: list[str], offset: int) -> dict[str, float]:
    """Bind each pod and write its Event; thread CPU and wall per call, in µs."""
    bind_cpu = event_cpu = bind_wall = event_wall = 0.0
    for i, name in enumerate(names):
        c0, w0 = time.thread_time(), time.perf_counter()
        cluster.bind(NAMESPACE, name, "node-0")
        c1, w1 = time.thread_time(), time.perf_counter()
        cluster.create("events", _event(name, offset + i), NAMESPACE)
        c2, w2 = time.thread_time(), time.perf_counter()
        bind_cpu += c1 - c0
        event_cpu += c2 - c1
        bind_wall += w1 - w0
        event_wall += w2 - w1
    n = len(names) / 1e6
    return {"bind_cpu_us": bind_cpu / n, "event_cpu_us": event_cpu / n,
            "bind_wall_us": bind_wall / n, "event_wall_us": event_wall / n}


def _watch(cluster: Any, expected: int) -> dict[str, float]:
    """Every pod as an ADDED event from resourceVersion 0; thread CPU per event in µs."""
    c0, w0 = time.thread_time(), time.perf_counter()
    watch = cluster.watch("pods", NAMESPACE, resource_version="0", timeout_seconds=30)
    seen = 0
    for event in watch:
        assert event["object"]["metadata"]["name"]
        seen += 1
        if seen >= expected:
            watch.stop()
    c1, w1 = time.thread_time(), time.perf_counter()
    if seen < expected:
        raise RuntimeError(f"the watch ended after {seen} of {expected} events")
    return {"watch_cpu_us_per_event": (c1 - c0) / seen * 1e6, "watch_wall_us_per_event": (w1 - w0) / seen * 1e6}


def _profile(cluster: Any, names: list[str], offset: int, pods: int) -> str:
    profiler = cProfile.Profile(time.thread_time)  # CPU, not wall: waits on the server are not ours
    profiler.enable()
    _calls(cluster, names, offset)
    _watch(cluster, pods)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(30)
    return out.getvalue()


def _scheduler_drain(module: types.ModuleType, nodes: int, pods: int) -> tuple[float, dict[str, float]]:
    """An in-process Scheduler on `module`'s RealCluster drains the backlog; (wall s, CPU s per thread
    kind), the kind being the thread's name without its number."""
    from minisched.controlplane import ControlPlane, ControlPlaneOptions
    from minisched.objects import make_node, make_pod
    from minisched.scheduler.scheduler import Scheduler

    with ControlPlane(ControlPlaneOptions(start_kwok=False, ready_timeout=120)) as cp:
        setup = module.RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        setup.create("namespaces", {"metadata": {"name": NAMESPACE}})
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: setup.create("nodes", make_node(f"node-{i:04d}", cpu="4", memory="32Gi",
                                                                    pods="110")), range(nodes)))
            list(pool.map(lambda i: setup.create("pods", make_pod(f"pod-{i:05d}", namespace=NAMESPACE, cpu="100m",
                                                                  memory="500Mi")), range(pods)))
        cluster = module.RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        sched = Scheduler(cluster, bind_workers=64)
        cpu: dict[int, tuple[str, float]] = {}
        here = threading.get_ident()

        def sample() -> None:  # a thread's clock is gone once it ends: keep the last reading
            for t in threading.enumerate():
                if t.ident is not None and t.ident != here:
                    with contextlib.suppress(OSError):
                        kind = "informer-handler" if t.name.startswith("informer-handler") else t.name
                        cpu[t.ident] = (re.sub(r"[-_ ]?\d+$", "", kind),
                                        time.clock_gettime(time.pthread_getcpuclockid(t.ident)))

        started = time.monotonic()
        sched.start()
        while sched.stats.bound < pods and time.monotonic() - started < 900:
            sample()
            time.sleep(0.05)
        wall = time.monotonic() - started
        sched.recorder.flush(60)
        sample()
        sched.stop()
        cluster.close()
        setup.close()
    if sched.stats.bound < pods:
        raise RuntimeError(f"{sched.stats.bound} of {pods} pods bound in 900 s")
    kinds: dict[str, float] = {}
    for kind, seconds in cpu.values():
        kinds[kind] = kinds.get(kind, 0.0) + seconds
    return wall, kinds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per client form")
    parser.add_argument("--baseline", help="git revision whose minisched/cluster/real.py runs beside this one")
    parser.add_argument("--profile", action="store_true", help="cProfile the current form (one more slice)")
    parser.add_argument("--scheduler", action="store_true", help="per-thread CPU of an in-process Scheduler's drain")
    parser.add_argument("--nodes", type=int, default=500, help="nodes for --scheduler")
    args = parser.parse_args(argv)

    from minisched.controlplane import ControlPlane, ControlPlaneOptions, binaries_available, how_to_build
    from minisched.objects import make_node, make_pod

    if not binaries_available():
        print(f"skipped: no control-plane binaries ({how_to_build()})")
        return 0
    import minisched.cluster.real as current

    forms: dict[str, types.ModuleType] = {"current": current}
    if args.baseline:
        forms = {f"baseline ({args.baseline})": _baseline_module(args.baseline), **forms}
    if args.scheduler:
        print(f"in-process Scheduler, {args.nodes} nodes, {args.pods} pods; CPU per pod by thread (µs)")
        for name, module in forms.items():
            wall, kinds = _scheduler_drain(module, args.nodes, args.pods)
            threads = "  ".join(f"{kind} {seconds / args.pods * 1e6:,.0f}"
                                for kind, seconds in sorted(kinds.items(), key=lambda kv: -kv[1]) if seconds > 0.05)
            print(f"{name:>22}: {args.pods / wall:,.0f} pods/s, all threads {sum(kinds.values()) / args.pods * 1e6:,.0f}"
                  f"  ({threads})")
        return 0
    slices = len(forms) * args.rounds + (1 if args.profile else 0)
    per_slice = args.pods // slices
    results: dict[str, list[dict[str, float]]] = {name: [] for name in forms}
    with ControlPlane(ControlPlaneOptions(start_kwok=False, ready_timeout=120)) as cp:
        setup = current.RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        setup.create("namespaces", {"metadata": {"name": NAMESPACE}})
        setup.create("nodes", make_node("node-0", cpu="100000", memory="10000Gi", pods="100000"))
        names = [f"pod-{i:05d}" for i in range(per_slice * slices)]
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda n: setup.create("pods", make_pod(n, namespace=NAMESPACE)), names))
        clusters = {name: module.RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
                    for name, module in forms.items()}
        for cluster in clusters.values():  # warm: connections open, code paths taken once
            cluster.get("namespaces", NAMESPACE)
            _watch(cluster, len(names))
        start = 0
        for _ in range(args.rounds):
            for name, cluster in clusters.items():
                chunk = names[start:start + per_slice]
                figures = _calls(cluster, chunk, start)
                figures.update(_watch(cluster, len(names)))
                results[name].append(figures)
                start += per_slice
        profile = (_profile(clusters["current"], names[start:start + per_slice], start, len(names))
                   if args.profile else "")
        for cluster in clusters.values():
            cluster.close()
        setup.close()
    print(f"{len(names)} pods, {per_slice} binds + events per slice, {args.rounds} alternating rounds; "
          "client thread CPU (wall) in µs")
    for name, rounds in results.items():
        def show(key: str, rounds: list[dict[str, float]] = rounds) -> str:
            return "/".join(f"{r[key]:,.0f}" for r in rounds)
        print(f"{name:>22}: bind {show('bind_cpu_us')} ({show('bind_wall_us')})  "
              f"event create {show('event_cpu_us')} ({show('event_wall_us')})  "
              f"watch per event {show('watch_cpu_us_per_event')} ({show('watch_wall_us_per_event')})")
    if profile:
        print(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
