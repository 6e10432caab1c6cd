"""Opportunistic batching (kube 1.35's OpportunisticBatching) on and off, side by side: CPU per pod of
a scheduling cycle on a one-pod-per-node stream.

1,000 nodes (4 CPU, 16 GiB, a few images), empty; the incoming pods ask for 3 CPU, so each fills a
node, and are all alike (replicas of one Deployment). A cycle is snapshot() + Framework.schedule +
assuming the pod onto the chosen node (what the loop pays per pod, minus the queue and the binding);
its thread CPU time is what is compared. Two profiles:
  batchable  PodTopologySpread with `defaultingType: List` and no default constraints, so pods sign;
  default    kube's default profile, whose System default spreading refuses to sign every pod: batching
             only adds its bookkeeping there (signing, and a no_hint per cycle).
Rounds alternate between on and off on fresh clusters, so both see the same machine load; the
medians over rounds of the mean CPU per pod are printed, with the batching counters of the last
round and a check that every pod landed on its own node.

--loop adds the same stream through the whole Scheduler on the embedded cluster (informers, queue,
binding pool, events; real clock, so kept scores expire after 500 ms as in kube): a backlog drained
with schedule_one(), the process's CPU (every thread) per decision.

    .venv/bin/python bench/batching_bench.py [--nodes 1000] [--pods 900] [--rounds 3] [--loop]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.profile import Profile, load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
IMAGES = [(f"registry.example.com/app-{i}:1", 200_000_000) for i in range(4)]


def profiles() -> dict[str, Profile]:
    spread = {"name": "PodTopologySpread", "args": {"defaultingType": "List"}}
    return {"batchable": load_profiles({**CONFIG, "profiles": [{"pluginConfig": [spread]}]})[0],
            "default": load_profiles(CONFIG)[0]}


def cluster(n: int) -> NodeTable:
    table = NodeTable()
    for i in range(n):
        table.add_node(make_node(f"node-{i:05d}", cpu="4", memory="16Gi", images=[IMAGES[i % len(IMAGES)]]))
    return table


def run(profile: Profile, batching: bool, nodes: int, pods: int) -> tuple[float, float, Framework, int]:
    """(CPU µs per pod, wall µs per pod, the framework, distinct nodes used)."""
    table = cluster(nodes)
    fw = Framework(profile, seed=1, batching=batching)
    incoming = [PodInfo.from_pod(make_pod(f"p{i}", cpu="3", memory="1Gi", image=IMAGES[0][0])) for i in range(pods)]
    used: set[str] = set()
    c0, w0 = time.thread_time(), time.perf_counter()
    for pod in incoming:
        result = fw.schedule(pod, table.snapshot())
        if result.node is not None:
            table.add_pod(result.node, pod)
            used.add(result.node)
    cpu, wall = time.thread_time() - c0, time.perf_counter() - w0
    return cpu / pods * 1e6, wall / pods * 1e6, fw, len(used)


def run_loop(name: str, batching: bool, nodes: int, pods: int) -> tuple[float, float, dict[str, int], int]:
    """(process CPU µs per decision, wall µs per decision, attempts, distinct nodes) for the Scheduler."""
    from minisched.cluster.embedded import EmbeddedCluster
    from minisched.resources import NODES, PODS
    from minisched.scheduler.scheduler import Scheduler

    cluster = EmbeddedCluster(seed=1)
    for i in range(nodes):
        cluster.create(NODES, make_node(f"node-{i:05d}", cpu="4", memory="16Gi", images=[IMAGES[i % len(IMAGES)]]))
    config: dict[str, Any] = dict(CONFIG)
    if name == "batchable":
        config["profiles"] = [{"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}]}]
    sched = Scheduler(cluster, config=config, bind_workers=4, seed=1, keep_decisions=0,
                      feature_gates={"OpportunisticBatching": batching})
    sched.start(loop=False)
    while len(sched.cache.node_names()) < nodes:
        time.sleep(0.01)
    for i in range(pods):
        cluster.create(PODS, make_pod(f"p{i}", cpu="3", memory="1Gi", image=IMAGES[0][0]))
    while sched.pending_pods()["active"] < pods:
        time.sleep(0.01)
    c0, w0 = time.process_time(), time.perf_counter()
    decided = 0
    while sched.schedule_one(timeout=0):
        decided += 1
    sched.wait_for_bindings(120)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    fw = next(iter(sched.frameworks.values()))
    attempts = dict(fw.batch.stats.attempts) if fw.batch is not None else {}
    sched.stop()
    used = {p["spec"].get("nodeName") for p in cluster.list(PODS)["items"]} - {None}
    cluster.close()
    return cpu / max(decided, 1) * 1e6, wall / max(decided, 1) * 1e6, attempts, len(used)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=900)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loop", action="store_true", help="also through the Scheduler on the embedded cluster")
    parser.add_argument("--profiles", default="batchable,default", help="which of batchable, default")
    args = parser.parse_args()
    chosen = {name: p for name, p in profiles().items() if name in args.profiles.split(",")}
    print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"{args.nodes} nodes, {args.pods} pods of 3 CPU on 4-CPU nodes, {args.rounds} alternating rounds")
    cpu: dict[tuple[str, bool], list[float]] = {}
    wall: dict[tuple[str, bool], list[float]] = {}
    last: dict[tuple[str, bool], tuple[Framework, int]] = {}
    for name, profile in chosen.items():
        run(profile, True, 200, 50)  # warm up numpy and the plugins
        for _ in range(args.rounds):
            for batching in (False, True):
                c, w, fw, used = run(profile, batching, args.nodes, args.pods)
                cpu.setdefault((name, batching), []).append(c)
                wall.setdefault((name, batching), []).append(w)
                last[(name, batching)] = (fw, used)
    print(f"\n{'profile':<10} {'batching':<9} {'CPU/pod':>9} {'wall/pod':>9} {'vs off':>7}  "
          f"{'hint_used':>9} {'no_hint':>7} {'not_used':>8}  flushes (last round)")
    for name in chosen:
        off = statistics.median(cpu[(name, False)])
        for batching in (False, True):
            fw, used = last[(name, batching)]
            c, w = statistics.median(cpu[(name, batching)]), statistics.median(wall[(name, batching)])
            assert used == args.pods, f"{used} nodes for {args.pods} pods: a node took two"
            stats: Any = fw.batch.stats if fw.batch is not None else None
            counts = (f"{stats.attempts['hint_used']:>9} {stats.attempts['no_hint']:>7} "
                      f"{stats.attempts['hint_not_used']:>8}  "
                      + ", ".join(f"{k} {v}" for k, v in stats.flushed.items() if v)) if stats else f"{'-':>9} {'-':>7} {'-':>8}"
            print(f"{name:<10} {'on' if batching else 'off':<9} {c:>7.0f}µs {w:>7.0f}µs {c / off:>6.2f}x  {counts}")
    if args.loop:
        print(f"\nthe Scheduler on the embedded cluster (load average {os.getloadavg()[0]:.1f}):")
        print(f"{'profile':<10} {'batching':<9} {'CPU/pod':>9} {'wall/pod':>9} {'vs off':>7}  attempts (last round)")
        for name in chosen:
            loop: dict[bool, list[tuple[float, float, dict[str, int], int]]] = {False: [], True: []}
            for _ in range(args.rounds):
                for batching in (False, True):
                    loop[batching].append(run_loop(name, batching, args.nodes, args.pods))
            off = statistics.median(r[0] for r in loop[False])
            for batching in (False, True):
                c = statistics.median(r[0] for r in loop[batching])
                w = statistics.median(r[1] for r in loop[batching])
                attempts, used = loop[batching][-1][2], loop[batching][-1][3]
                assert used == args.pods, f"{used} nodes for {args.pods} pods: a node took two"
                print(f"{name:<10} {'on' if batching else 'off':<9} {c:>7.0f}µs {w:>7.0f}µs {c / off:>6.2f}x  "
                      + (", ".join(f"{k} {v}" for k, v in attempts.items()) or "-"))
    print(f"\nload average after the run: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
