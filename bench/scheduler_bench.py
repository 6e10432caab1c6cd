"""Scheduler throughput and latency on the embedded cluster (a benchmark, not a test).

For each cluster size (100, 1,000, 5,000 nodes by default) and each kind of backlog (identical pods,
as a Deployment makes, which the framework's reuse of the last verdicts per pod shape speeds up;
and pods all of different shapes, which it cannot), in its own process (so peak RSS is that run's): create the nodes, start the Scheduler (informers, cache, queue, binding pool), create a
backlog of pending pods, then drain the queue by calling `schedule_one()` in a tight loop with
every default plugin on and percentageOfNodesToScore 100. Bindings run concurrently on the pool,
so the figures include their cost (the embedded API server, the informer confirming each binding,
the Scheduled event). The process is set up as `minisched run` sets up its own before the drain:
the cyclic collector (minisched.app.tune_collector_for_scheduling, with the set-up's heap frozen)
and every thread on one CPU (minisched.app.pin_to_one_cpu, `minisched run --cpu auto`).

Printed per size:
- decisions/s: scheduling cycles per second while draining (pop, snapshot, filter + score over all
  nodes, assume, hand-off to binding);
- bound/s: pods bound per second, from the first decision until the last binding returned;
- cycle p50/p99: one scheduling cycle's latency; beside it the loop thread's own CPU time in the
  cycle (p50/p99), so the difference is time the cycle waited (for the GIL or a lock) while the
  binding, event and informer threads ran;
- loop-only: the same loop on a second backlog with the informers stopped and bindings not started,
  so nothing competes for the GIL (the loop's own ceiling);
- algorithm: Framework.schedule alone, in the same process with nothing else running (what the
  numpy filter/score costs, without the loop, the API server and the GIL contention);
- CPU per pod: the whole process's CPU time (every thread) over the drain, per decision: steadier
  than the rates on a loaded machine (the drain is GIL-bound, so 1e6 / this is its ceiling);
- peak RSS of the process.

    .venv/bin/python bench/scheduler_bench.py [--sizes 100,1000,5000] [--pods 2000] [--bind-workers 4]

Instructions instead of time: `--instructions [--against DIR] [--cycles 500]` runs the loop-alone
drain under valgrind's callgrind, counting only the cycles drained, and prints instructions per
cycle for this checkout (and DIR's minisched, with this script's set-up). On a shared machine whose
speed moves the loop-alone rate by ±15% run to run, this figure moves by ~0.1%: the way to see a
change of a few percent in the loop's own work. (It counts work, not cache misses or the interpreter
lock's hand-offs; the timed runs above still say what a cycle costs.)

Before/after, side by side in one run: `--against DIR` (another checkout, e.g. made with
`git archive <commit> | tar -x -C DIR`) runs each size from this checkout and from DIR in turn,
`--rounds` times, and prints every run and the medians (on a loaded machine only runs made
together compare; the load average is printed with each).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

TARGET_PODS_PER_S_AT_1000 = 5_000
TARGET_P99_MS_AT_5000 = 2.0


def _cpu(i: int, varied: bool) -> str:
    # varied: every pod its own shape (no two consecutive pods alike), which defeats the framework's
    # reuse of the last verdicts for a pod shape; same: a Deployment-like stream of identical pods
    return f"{100 + i % 997}m" if varied else "100m"


def _scheduler_with_backlog(nodes: int, pods: int, bind_workers: int, varied: bool) -> tuple[Any, Any]:
    """(the embedded cluster, a started Scheduler) with `nodes` nodes listed and `pods` pods queued,
    the process set up as `minisched run` sets up its own: its collector set alike, what the set-up
    built (the nodes and the backlog, listed by the informers) frozen as the app freezes it, and its
    threads on one CPU."""
    from minisched.app import pin_to_one_cpu, tune_collector_for_scheduling
    from minisched.cluster.embedded import EmbeddedCluster
    from minisched.objects import make_node, make_pod
    from minisched.resources import NODES, PODS
    from minisched.scheduler.scheduler import Scheduler

    cluster = EmbeddedCluster(seed=1)
    for i in range(nodes):
        cluster.create(NODES, make_node(f"node-{i:05d}", cpu="32", memory="128Gi", pods="110",
                                        labels={"topology.kubernetes.io/zone": f"zone-{i % 3}"},
                                        images=[("registry.k8s.io/pause:3.10", 700_000)] if i % 2 else None))
    sched = Scheduler(cluster, bind_workers=bind_workers, percentage_of_nodes_to_score=100, seed=1,
                      keep_decisions=0)
    sched.start(loop=False)
    while len(sched.cache.node_names()) < nodes:
        time.sleep(0.01)
    for i in range(pods):
        cluster.create(PODS, make_pod(f"pod-{i:05d}", cpu=_cpu(i, varied), memory="200Mi"))
    while sched.pending_pods()["active"] < pods:
        time.sleep(0.01)
    tune_collector_for_scheduling()
    pin_to_one_cpu()
    return cluster, sched


def _loop_alone(sched: Any) -> None:
    """Informers stopped and bindings not started (pods stay assumed): nothing but the loop runs."""
    sched.factory.shutdown()
    sched._pool.submit = lambda fn, *a: sched._binding_slots.release()


def run_one(nodes: int, pods: int, bind_workers: int, varied: bool) -> dict[str, Any]:
    from minisched.objects import make_pod
    from minisched.resources import PODS
    from minisched.scheduler.framework.profile import default_profile
    from minisched.scheduler.framework.runtime import Framework

    cluster, sched = _scheduler_with_backlog(nodes, pods, bind_workers, varied)
    threads0 = _thread_cpu()
    cycle_cpu: list[float] = []
    scheduling_cycle = sched._scheduling_cycle

    def timed_cycle(qpi: Any) -> None:  # the loop thread's own CPU in each cycle
        c = time.thread_time()
        try:
            scheduling_cycle(qpi)
        finally:
            cycle_cpu.append(time.thread_time() - c)

    sched._scheduling_cycle = timed_cycle  # type: ignore[method-assign]
    t0, cpu0 = time.perf_counter(), time.process_time()
    decided = 0
    while sched.schedule_one(timeout=0):
        decided += 1
    t_decided = time.perf_counter() - t0
    sched._scheduling_cycle = scheduling_cycle  # type: ignore[method-assign]
    cycle_cpu.sort()
    sched.wait_for_bindings(120)
    t_bound = time.perf_counter() - t0
    cpu_per_pod = (time.process_time() - cpu0) / max(decided, 1)  # every thread: loop, binding, events, informers
    per_thread = {name: round(cpu / max(decided, 1) * 1e6, 1)
                  for name, cpu in sorted(_thread_cpu(threads0).items(), key=lambda kv: -kv[1]) if cpu > 0}
    cycles = sorted(sched.stats.cycle_seconds)
    bound = sched.stats.bound

    # the loop alone: a second backlog, drained with informers stopped and bindings not started
    # (pods stay assumed), so nothing competes with the loop for the GIL
    for i in range(pods):
        cluster.create(PODS, make_pod(f"solo-{i:05d}", cpu=_cpu(i + 1, varied), memory="200Mi"))
    while sched.pending_pods()["active"] < pods:
        time.sleep(0.01)
    _loop_alone(sched)
    sched.stats.cycle_seconds.clear()
    t0 = time.perf_counter()
    solo = 0
    while sched.schedule_one(timeout=0):
        solo += 1
    t_solo = time.perf_counter() - t0
    solo_cycles = sorted(sched.stats.cycle_seconds)
    sched.stop()

    # the algorithm alone, same snapshot shape, nothing else running
    fwk = Framework(replace(default_profile(), percentage_of_nodes_to_score=100), seed=1)
    table = sched.cache.snapshot()
    rounds = min(300, max(50, 20_000 // max(nodes, 1)))
    infos = [sched.pod_info(make_pod(f"probe-{i}", cpu=_cpu(i, varied), memory="200Mi")) for i in range(rounds)]
    algo = []
    for info in infos:
        s = time.perf_counter()
        fwk.schedule(info, table)
        algo.append(time.perf_counter() - s)
    cluster.close()
    return {
        "nodes": nodes, "pods": pods, "shapes": "varied" if varied else "same", "decided": decided, "bound": bound,
        "decisions_per_s": decided / t_decided, "bound_per_s": bound / t_bound, "cpu_us_per_pod": cpu_per_pod * 1e6,
        "p50_ms": _pct(cycles, 50) * 1e3, "p99_ms": _pct(cycles, 99) * 1e3,
        "cycle_cpu_p50_ms": _pct(cycle_cpu, 50) * 1e3, "cycle_cpu_p99_ms": _pct(cycle_cpu, 99) * 1e3,
        "solo_per_s": solo / t_solo, "solo_p50_ms": _pct(solo_cycles, 50) * 1e3,
        "solo_p99_ms": _pct(solo_cycles, 99) * 1e3,
        "algo_p50_ms": statistics.median(algo) * 1e3, "algo_p99_ms": _pct(sorted(algo), 99) * 1e3,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "thread_us_per_pod": per_thread,
    }


def count_one(nodes: int, pods: int, cycles: int, varied: bool) -> None:
    """The child of `--instructions`, run under callgrind with instrumentation off: set up the loop
    alone as run_one does, warm it up, then drain `cycles` cycles while the parent has
    instrumentation on. Talks to the parent on stdin/stdout."""
    _, sched = _scheduler_with_backlog(nodes, pods, 1, varied)
    _loop_alone(sched)
    for _ in range(min(100, pods - cycles)):  # the reuse cache filled, the code paths warm
        sched.schedule_one(timeout=0)
    print("ready", flush=True)
    sys.stdin.readline()
    done = sum(1 for _ in range(cycles) if sched.schedule_one(timeout=0))
    print(f"done {done}", flush=True)
    sys.stdin.readline()
    os._exit(0)  # no shutdown: the parent has what it came for


def _instructions(tree: str, nodes: int, args: argparse.Namespace, varied: bool) -> float:
    """Instructions executed per loop-alone cycle in checkout `tree` (this bench's set-up, that
    tree's minisched), counted by valgrind's callgrind over `args.cycles` cycles."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
               sys.executable, os.path.abspath(__file__), "--count-one", str(nodes), "--pods", str(args.pods),
               "--cycles", str(args.cycles)] + (["--varied"] if varied else [])
        child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True, env={**os.environ, "PYTHONPATH": tree})
        assert child.stdin is not None and child.stdout is not None

        def control(switch: str) -> None:
            subprocess.run(["callgrind_control", "-i", switch, str(child.pid)], check=True, capture_output=True)

        if child.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the loop-alone set-up in {tree} did not start under valgrind")
        control("on")
        child.stdin.write("go\n")
        child.stdin.flush()
        done = int(child.stdout.readline().split()[1])
        control("off")
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait()
        with open(out) as f:  # the dump's "totals:" line (its "summary:" header may say 0)
            total = max(int(line.split()[1]) for line in f if line.startswith(("summary:", "totals:")))
    return total / max(done, 1)


def _compare_instructions(args: argparse.Namespace, sizes: list[int]) -> None:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this": here, "against": os.path.abspath(args.against)} if args.against else {"this": here}
    print(f"instructions per loop-alone cycle (valgrind callgrind, {args.cycles} cycles after 100 to warm up, "
          f"{args.pods} pods): the machine's speed does not move this figure")
    for n in sizes:
        for shape in [sh for sh in args.shapes.split(",") if sh]:
            for name, tree in trees.items():
                count = _instructions(tree, n, args, shape == "varied")
                print(f"{name:>8} {n:>6} {shape:>7} {count / 1e3:>10,.0f}k instructions per cycle  ({tree})", flush=True)


def _thread_cpu(since: dict[str, float] | None = None) -> dict[str, float]:
    """CPU seconds per kind of thread (the loop is this, the main thread), from /proc/self/task's
    schedstat (Linux), minus `since`; threads named alike (bind-1, bind-2) are added up."""
    import re
    import threading

    names = {t.native_id: t.name for t in threading.enumerate()}
    names[threading.get_native_id()] = "scheduling loop"
    out: dict[str, float] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                cpu = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
        name = re.sub(r"[-_ ]?\d+$", "", names.get(int(tid), "other"))
        if name.startswith("informer-handler"):
            name = "informer handlers"
        out[name] = out.get(name, 0.0) + cpu
    if since is not None:
        out = {k: v - since.get(k, 0.0) for k, v in out.items()}
    return out


def _pct(data: list[float], q: float) -> float:
    if not data:
        return 0.0
    return data[min(len(data) - 1, int(round(q / 100 * (len(data) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--bind-workers", type=int, default=4)
    parser.add_argument("--against", help="another checkout to compare with, run alternately")
    parser.add_argument("--rounds", type=int, default=3, help="with --against: runs of each checkout per size")
    parser.add_argument("--shapes", default="same,varied", help="same, varied or both")
    parser.add_argument("--instructions", action="store_true",
                        help="count the instructions of a loop-alone cycle under valgrind (callgrind), this "
                             "checkout and --against's, instead of timing: steady on a noisy machine")
    parser.add_argument("--cycles", type=int, default=500, help="with --instructions: cycles counted")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--count-one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--varied", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(run_one(args.one, args.pods, args.bind_workers, args.varied)))
        return
    if args.count_one is not None:
        count_one(args.count_one, args.pods, args.cycles, args.varied)
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.instructions:
        if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
            parser.error("--instructions needs valgrind and callgrind_control (Debian: apt-get install valgrind)")
        if args.cycles + 100 > args.pods:
            parser.error(f"--instructions: --pods ({args.pods}) must cover --cycles ({args.cycles}) and 100 to warm up")
        _compare_instructions(args, sizes)
        return
    if args.against:
        _compare(args, sizes)
        return
    print(f"minisched scheduler bench: embedded cluster, default plugins, 100% of nodes scored, "
          f"{args.pods} pending pods, {args.bind_workers} bind workers")
    print(f"{'nodes':>6} {'shapes':>7} {'decisions/s':>12} {'bound/s':>8} {'CPU/pod':>8} {'cycle p50':>10} {'cycle p99':>10} "
          f"{'loop-only/s':>12} {'p50':>8} {'p99':>8} {'algo p50':>9} {'algo p99':>9} {'peak RSS':>9}")
    rows = []
    for n in sizes:
        for varied in [shape == "varied" for shape in args.shapes.split(",") if shape]:
            cmd = [sys.executable, __file__, "--one", str(n), "--pods", str(args.pods),
                   "--bind-workers", str(args.bind_workers)] + (["--varied"] if varied else [])
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            rows.append(r)
            _print_row(r)
    _summary([r for r in rows if r["shapes"] == "varied"], "every pod a different shape")
    _summary([r for r in rows if r["shapes"] == "same"], "identical pods")


def _run(tree: str, nodes: int, args: argparse.Namespace, varied: bool) -> dict[str, Any]:

    script = os.path.join(tree, "bench", "scheduler_bench.py")
    env = {**os.environ, "PYTHONPATH": tree}
    cmd = [sys.executable, script, "--one", str(nodes), "--pods", str(args.pods),
           "--bind-workers", str(args.bind_workers)] + (["--varied"] if varied else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    r: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return r


def _compare(args: argparse.Namespace, sizes: list[int]) -> None:

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this": here, "against": os.path.abspath(args.against)}
    keys = ("decisions_per_s", "bound_per_s", "cpu_us_per_pod", "p50_ms", "p99_ms", "solo_per_s")
    print(f"side by side: this={here} against={trees['against']}, {args.pods} pods, {args.rounds} rounds, "
          f"{args.bind_workers} bind workers")
    print(f"{'tree':>8} {'nodes':>6} {'shapes':>7} {'load':>5} {'decisions/s':>12} {'bound/s':>8} {'CPU/pod':>8} "
          f"{'cycle p50':>10} {'cycle p99':>10} {'loop-only/s':>12}")
    for n in sizes:
        for shape in [s for s in args.shapes.split(",") if s]:
            runs: dict[str, list[dict[str, Any]]] = {"this": [], "against": []}
            for i in range(args.rounds):
                for name in (("this", "against") if i % 2 == 0 else ("against", "this")):
                    load = os.getloadavg()[0]
                    r = _run(trees[name], n, args, shape == "varied")
                    runs[name].append(r)
                    print(f"{name:>8} {n:>6} {shape:>7} {load:>5.1f} {r['decisions_per_s']:>12.0f} "
                          f"{r['bound_per_s']:>8.0f} {r['cpu_us_per_pod']:>6.0f}us {r['p50_ms']:>8.3f}ms {r['p99_ms']:>8.3f}ms "
                          f"{r['solo_per_s']:>12.0f}", flush=True)
                    _print_threads(r)
            for name, rs in runs.items():
                med = {k: statistics.median(r[k] for r in rs) for k in keys}
                print(f"{'median':>8} {n:>6} {shape:>7} {name:>5} {med['decisions_per_s']:>12.0f} "
                      f"{med['bound_per_s']:>8.0f} {med['cpu_us_per_pod']:>6.0f}us {med['p50_ms']:>8.3f}ms {med['p99_ms']:>8.3f}ms "
                      f"{med['solo_per_s']:>12.0f}", flush=True)


def _print_row(r: dict[str, Any]) -> None:
    print(f"{r['nodes']:>6} {r['shapes']:>7} {r['decisions_per_s']:>12.0f} {r['bound_per_s']:>8.0f} "
          f"{r['cpu_us_per_pod']:>6.0f}us {r['p50_ms']:>8.3f}ms "
          f"{r['p99_ms']:>8.3f}ms {r['solo_per_s']:>12.0f} {r['solo_p50_ms']:>6.3f}ms {r['solo_p99_ms']:>6.3f}ms "
          f"{r['algo_p50_ms']:>7.3f}ms {r['algo_p99_ms']:>7.3f}ms {r['peak_rss_mb']:>7.0f}MB", flush=True)
    _print_threads(r)
    if "cycle_cpu_p50_ms" in r:
        print(f"       the loop thread's own CPU per cycle: p50 {r['cycle_cpu_p50_ms']:.3f}ms p99 "
              f"{r['cycle_cpu_p99_ms']:.3f}ms (the rest of the cycle's latency is waiting while other threads ran)",
              flush=True)


def _print_threads(r: dict[str, Any]) -> None:
    if r.get("thread_us_per_pod"):  # an older checkout's bench (--against) does not measure it
        print("       CPU per pod by thread: " + ", ".join(f"{k} {v:.0f}us" for k, v in r["thread_us_per_pod"].items()
                                                        if v >= 1), flush=True)


def _summary(rows: list[dict[str, Any]], label: str) -> None:
    print(f"-- {label}:")
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        growth = last["algo_p50_ms"] / first["algo_p50_ms"] if first["algo_p50_ms"] else 0
        print(f"growth: {last['nodes'] / first['nodes']:.0f}x nodes -> {growth:.1f}x algorithm time per pod")
    by_size = {r["nodes"]: r for r in rows}
    if 1000 in by_size:
        r = by_size[1000]
        print(f"target >= {TARGET_PODS_PER_S_AT_1000} decisions/s at 1,000 nodes: got {r['decisions_per_s']:.0f} "
              f"({'met' if r['decisions_per_s'] >= TARGET_PODS_PER_S_AT_1000 else 'NOT met'})")
    if 5000 in by_size:
        r = by_size[5000]
        print(f"target p99 <= {TARGET_P99_MS_AT_5000} ms at 5,000 nodes: got {r['p99_ms']:.2f} ms "
              f"({'met' if r['p99_ms'] <= TARGET_P99_MS_AT_5000 else 'NOT met'}); the loop's own CPU p99 "
              f"{r.get('cycle_cpu_p99_ms', 0):.2f} ms, the loop alone p99 {r['solo_p99_ms']:.2f} ms")


if __name__ == "__main__":
    main()
