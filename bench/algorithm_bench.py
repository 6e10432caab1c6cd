"""How long the scheduling algorithm takes for one pod: Filter + Score over 100, 1,000 and 5,000
nodes with all default plugins and 100% of nodes scored (no API server, no queue).

Prints microseconds per pod (median and p99 over many pods) for:
  schedule  Framework.schedule(pod, snapshot) alone (wall clock, and the thread's CPU time, which
            other processes on a busy machine do not inflate as much),
  cycle     snapshot() + schedule + assuming the pod onto the chosen node (what a scheduling loop
            pays per pod, minus the queue and the binding),
with the Framework's reuse of same-shape verdicts on (default) or off (--no-reuse); the incoming
pods are drawn from --shapes templates (default 8, like replicas of 8 Deployments; 0 makes every
pod different: random requests, image, affinity, tolerations),
and the pure-Python per-node reference rules for comparison at 1,000 nodes.

Running and incoming pods belong to 8 ReplicaSets (labels and controller references), so
PodTopologySpread's system default constraints (hostname and zone, in the default profile as in
kube) spread them; --no-spread disables the plugin, for the cost before it joined the defaults.

--affinity-pods N adds N running pods of N/20 services (app=svc-k labels; half of them with
required anti-affinity per host, a quarter preferring a zone with another service), and gives the
incoming pods the same kinds of terms, so InterPodAffinity has work in every cycle.

    .venv/bin/python bench/algorithm_bench.py [--pods 400] [--sizes 100,1000,5000] [--shapes 8] [--no-reuse]
        [--pods-per-node 10] [--no-spread] [--affinity-pods 1000] [--disable InterPodAffinity]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from typing import Any

from minisched.objects import make_node, make_pod, taint, toleration
from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.runtime import Framework, SimpleHandle
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import node_affinity, node_resources_fit, taint_toleration
from minisched.scheduler.plugins.pod_topology_spread import StaticWorkloads
from minisched.scheduler.snapshot import NodeTable

ZONES = ["zone-a", "zone-b", "zone-c"]
TYPES = ["small", "medium", "large", "gpu"]
IMAGES = [f"registry.example.com/app-{i}:1" for i in range(20)]
APPS = 8  # ReplicaSets the pods belong to
REPLICA_SETS = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                 "metadata": {"name": f"app-{k}", "namespace": "default", "uid": f"uid-app-{k}"},
                 "spec": {"selector": {"matchLabels": {"app": f"app-{k}"}}}} for k in range(APPS)]


def owned(pod: dict, k: int) -> dict:
    """`pod` as a replica of ReplicaSet app-k (its label and controller reference)."""
    pod["metadata"].setdefault("labels", {})["app"] = f"app-{k}"
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"app-{k}",
                                           "uid": f"uid-app-{k}", "controller": True}]
    return pod


HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def service_pod(name: str, service: int, services: int, rng: random.Random, incoming: bool = False) -> dict[str, Any]:
    """A replica of service `service`: labelled app=svc-<k>, with pod (anti-)affinity terms."""
    app = f"svc-{service}"
    affinity: dict[str, Any] = {}
    if incoming or rng.random() < 0.5:  # one replica per host
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}]}
    if incoming or rng.random() < 0.25:  # near another service, by zone
        affinity["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": f"svc-{(service + 1) % services}"}},
                                               "topologyKey": ZONE}}]}
    return make_pod(name, cpu="100m", memory="200Mi", labels={"app": app, "tier": rng.choice(["web", "db"])},
                    affinity=affinity or None)


def build_cluster(num_nodes: int, rng: random.Random, pods_per_node: float = 10, affinity_pods: int = 0) -> NodeTable:
    table = NodeTable()
    for i in range(num_nodes):
        kind = rng.choice(TYPES)
        table.add_node(make_node(
            f"node-{i:05}",
            cpu={"small": "4", "medium": "8", "large": "32", "gpu": "16"}[kind],
            memory={"small": "16Gi", "medium": "32Gi", "large": "128Gi", "gpu": "64Gi"}[kind],
            labels={"topology.kubernetes.io/zone": rng.choice(ZONES), "node.kubernetes.io/instance-type": kind,
                    "rack": str(rng.randint(1, 40))},
            taints=[taint("gpu", "true")] if kind == "gpu" else
            ([taint("maintenance", "soon", "PreferNoSchedule")] if rng.random() < 0.05 else None),
            images=[(img, rng.randint(50, 900) * 2**20) for img in rng.sample(IMAGES, 4)],
        ))
    for i in range(int(num_nodes * pods_per_node)):
        node = f"node-{rng.randrange(num_nodes):05}"
        table.add_pod(node, PodInfo.from_pod(owned(make_pod(f"running-{i}", cpu="100m", memory="200Mi"), i % APPS)))
    services = max(1, affinity_pods // 20)
    for i in range(affinity_pods):
        node = f"node-{rng.randrange(num_nodes):05}"
        table.add_pod(node, PodInfo.from_pod(service_pod(f"svc-pod-{i}", i % services, services, rng)))
    return table


def incoming_pod(i: int, rng: random.Random) -> PodInfo:
    affinity = None
    if i % 3 == 0:
        affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [rng.choice(ZONES)]}]}}]}}
    if i % 5 == 0:
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["small"]},
                                  {"key": "rack", "operator": "Gt", "values": ["5"]}]}]}}}
    return PodInfo.from_pod(owned(make_pod(
        f"incoming-{i}", cpu=rng.choice(["100m", "250m", "500m", "1"]), memory=rng.choice(["128Mi", "512Mi", "1Gi"]),
        image=rng.choice(IMAGES), affinity=affinity,
        tolerations=[toleration("gpu", "true")] if i % 7 == 0 else None,
    ), i % APPS))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=400)
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--shapes", type=int, default=8,
                        help="distinct pod shapes the incoming pods are drawn from (0: every pod its own)")
    parser.add_argument("--no-reuse", dest="reuse", action="store_false",
                        help="judge every node afresh each cycle (no reuse of same-shape verdicts)")
    parser.add_argument("--pods-per-node", type=float, default=10,
                        help="running pods per node, placed at random (0.2 at 5,000 nodes: 1,000 pods)")
    parser.add_argument("--no-spread", dest="spread", action="store_false",
                        help="disable PodTopologySpread (the default profile before it joined)")
    parser.add_argument("--affinity-pods", type=int, default=0,
                        help="running pods with pod (anti-)affinity and service labels; incoming pods get terms too")
    parser.add_argument("--disable", default="", help="comma-separated plugins to disable (e.g. InterPodAffinity)")
    args = parser.parse_args()
    print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"reuse of same-shape verdicts: {'on' if args.reuse else 'off'}; "
          f"pod shapes: {args.shapes or 'all different'}; PodTopologySpread: {'on' if args.spread else 'off'}; "
          f"running pods per node: {args.pods_per_node}; running pods with pod affinity: {args.affinity_pods}"
          + (f"; disabled: {args.disable}" if args.disable else ""))
    config: dict[str, Any] = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                              "percentageOfNodesToScore": 100}
    disabled = [n for n in args.disable.split(",") if n] + ([] if args.spread else ["PodTopologySpread"])
    if disabled:
        config["profiles"] = [{"plugins": {"multiPoint": {"disabled": [{"name": n} for n in disabled]}}}]
    profile = load_profiles(config)[0]
    handle = SimpleHandle(workloads=StaticWorkloads(REPLICA_SETS))
    print(f"{'nodes':>6} {'schedule p50':>13} {'p99':>8} {'cpu p50':>8} {'cpu p99':>8} {'cycle p50':>10} {'p99':>8} "
          f"{'pods/s (cycle)':>15}  feasible")
    for size in (int(s) for s in args.sizes.split(",")):
        rng = random.Random(size)
        table = build_cluster(size, rng, args.pods_per_node, affinity_pods=args.affinity_pods)
        fw = Framework(profile, seed=1, reuse=args.reuse, handle=handle)
        services = max(1, args.affinity_pods // 20)
        if args.shapes:  # pods come from a few templates, as replicas of a few Deployments do
            templates = [service_pod("t", i % services, services, rng, incoming=True) if args.affinity_pods
                         else incoming_pod(i, rng).pod for i in range(args.shapes)]
            pods = []
            for i in range(args.pods):
                template = rng.choice(templates)
                pods.append(PodInfo.from_pod({**template, "metadata": {**template["metadata"], "name": f"p{i}",
                                                                       "namespace": "default"}}))
        elif args.affinity_pods:
            pods = [PodInfo.from_pod(service_pod(f"p{i}", rng.randrange(services), services, rng, incoming=True))
                    for i in range(args.pods)]
        else:
            pods = [incoming_pod(i, rng) for i in range(args.pods)]
        for p in pods[:20]:  # warm up caches and numpy
            fw.schedule(p, table.snapshot())
        sched_us: list[float] = []
        cpu_us: list[float] = []
        cycle_us: list[float] = []
        feasible = []
        for p in pods:
            c0 = time.perf_counter()
            snap = table.snapshot()
            s0, t0 = time.perf_counter(), time.thread_time()
            result = fw.schedule(p, snap)
            s1, t1 = time.perf_counter(), time.thread_time()
            cpu_us.append((t1 - t0) * 1e6)
            if result.node is not None:
                table.add_pod(result.node, p)
            c1 = time.perf_counter()
            sched_us.append((s1 - s0) * 1e6)
            cycle_us.append((c1 - c0) * 1e6)
            feasible.append(result.feasible)
        print(f"{size:>6} {statistics.median(sched_us):>11.0f}µs {percentile(sched_us, 0.99):>6.0f}µs "
              f"{statistics.median(cpu_us):>6.0f}µs {percentile(cpu_us, 0.99):>6.0f}µs "
              f"{statistics.median(cycle_us):>8.0f}µs {percentile(cycle_us, 0.99):>6.0f}µs "
              f"{1e6 / statistics.mean(cycle_us):>15.0f}  {statistics.median(feasible):.0f}")

    # the same filter work done one node at a time with the pure reference rules
    rng = random.Random(1000)
    table = build_cluster(1000, rng)
    nodes = [table.node(n) for n in table.names]
    pods_on = {n: table.pods_on(n) for n in table.names}
    p = incoming_pod(5, rng)
    t0 = time.perf_counter()
    for node in nodes:
        name = node["metadata"]["name"]
        taint_toleration.untolerated_taint(p, node)
        node_affinity.fits(p, node)
        node_resources_fit.insufficient_resources(p, node, pods_on[name])
        node_resources_fit.node_score(p, node, pods_on[name])
    per_pod = (time.perf_counter() - t0) * 1e6
    print(f"\npure per-node rules (3 filters + 1 score), 1000 nodes: {per_pod:.0f}µs per pod")


if __name__ == "__main__":
    main()
