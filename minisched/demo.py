"""`minisched demo`: the scheduler at work on the embedded cluster, in well under 30 seconds.

It builds a small cluster (nodes in three zones, SSD and GPU nodes with a taint, one cordoned node),
sends a stream of pods with three priorities (some pinned to SSD nodes, some tolerating the GPU
taint, a few too big for any node, one with a malformed request that the API server refuses, as a
real one would), shows a progress bar while the scheduler works, then prints where the pods went,
which could not be placed and why (the FailedScheduling messages, as kubectl describe shows them),
and a summary: pods per second and the p50/p99 latency of a scheduling cycle.

Late in the stream, high-priority pods arrive on a full cluster, so DefaultPreemption evicts
low-priority pods to make room; a kubelet stand-in finishes their graceful deletion.
"""

from __future__ import annotations

import collections
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from minisched.cluster.embedded import EmbeddedCluster, Kubelet
from minisched.errors import ApiError
from minisched.objects import make_node, make_pod, make_priority_class, taint, toleration
from minisched.quantity import parse_quantity
from minisched.resources import EVENTS, NODES, PODS, PRIORITY_CLASSES
from minisched.scheduler.scheduler import Scheduler

Object = dict[str, Any]


@dataclass
class DemoResult:
    pods: int
    bound: int
    unschedulable: dict[str, list[str]]  # FailedScheduling message -> pod names
    placements: dict[str, list[str]] = field(default_factory=dict)  # node -> pods
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> column -> text
    seconds: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    preempted: int = 0
    bound_first: int = 0  # bound in the first wave
    urgent_seconds: float = 0.0
    refused: dict[str, str] = field(default_factory=dict)  # pod -> the API server's answer


def build_cluster(cluster: EmbeddedCluster, rng: random.Random) -> list[str]:
    for name, value in (("low", 100), ("medium", 1000), ("high", 100_000)):
        cluster.create(PRIORITY_CLASSES, make_priority_class(name, value))
    names = []
    for i in range(12):
        zone = f"zone-{'abc'[i % 3]}"
        labels = {"topology.kubernetes.io/zone": zone, "disktype": "ssd" if i % 4 == 0 else "hdd"}
        taints = [taint("nvidia.com/gpu", "present")] if i >= 10 else None
        node = make_node(f"node-{i:02d}", cpu=rng.choice(["4", "8"]), memory=rng.choice(["8Gi", "16Gi"]),
                         labels=labels, taints=taints, unschedulable=(i == 9),
                         images=[("registry.k8s.io/nginx:1.27", 190_000_000)] if i % 2 else None)
        cluster.create(NODES, node)
        names.append(node["metadata"]["name"])
    return names


def pod_stream(rng: random.Random, count: int) -> list[Object]:
    pods = []
    for i in range(count):
        name = f"app-{i:04d}"
        kind = rng.random()
        priority = rng.choices(["low", "medium", "high"], weights=[6, 3, 1])[0]
        cpu = rng.choice(["25m", "50m", "100m", "150m"])
        memory = rng.choice(["32Mi", "64Mi", "128Mi"])
        if kind < 0.15:
            pod = make_pod(name, cpu=cpu, memory=memory, priority_class_name=priority,
                           node_selector={"disktype": "ssd"}, image="registry.k8s.io/nginx:1.27")
        elif kind < 0.20:
            pod = make_pod(name, cpu=cpu, memory=memory, priority_class_name=priority,
                           tolerations=[toleration("nvidia.com/gpu", operator="Exists")])
        else:
            pod = make_pod(name, cpu=cpu, memory=memory, priority_class_name=priority)
        pods.append(pod)
    for i in range(3):
        pods.append(make_pod(f"huge-{i}", cpu="32", memory="1Gi", priority_class_name="low"))
    broken = make_pod("broken-request", priority_class_name="low")
    broken["spec"]["overhead"] = {"memory": "12 Gi"}  # a space: not a quantity
    pods.append(broken)
    return pods


def run_demo(*, pods: int = 700, seed: int = 7, out: TextIO = sys.stdout, width: int = 40) -> DemoResult:
    rng = random.Random(seed)
    cluster = EmbeddedCluster(seed=seed)
    build_cluster(cluster, rng)
    stream = pod_stream(rng, pods)
    # then, on a full cluster, high-priority CPU-hungry pods: room only by preempting low-priority ones
    urgent = [make_pod(f"urgent-{i}", cpu="1", memory="512Mi", priority_class_name="high") for i in range(4)]
    total = len(stream) + len(urgent)
    kubelet = Kubelet(cluster)
    sched = Scheduler(cluster, seed=seed, percentage_of_nodes_to_score=100)
    sched.start()
    stop = threading.Event()

    def kubelet_loop() -> None:  # finish graceful deletions of preempted pods, start bound pods
        while not stop.wait(0.2):
            kubelet.sync()

    threading.Thread(target=kubelet_loop, name="demo-kubelet", daemon=True).start()
    started = time.perf_counter()
    refused: dict[str, str] = {}
    try:
        for pod in stream:
            try:
                cluster.create(PODS, pod)
            except ApiError as err:  # never stored, so never seen by the scheduler
                refused[pod["metadata"]["name"]] = f"{err.status} {err.reason}: {err.message}"
        total -= len(refused)
        _wait(sched, out, len(stream) - len(refused), total, width, lambda: True, 10)
        elapsed = time.perf_counter() - started
        bound_first = sched.stats.bound
        p50, p99 = sched.stats.percentile(50) * 1e3, sched.stats.percentile(99) * 1e3
        urgent_started = time.perf_counter()
        for pod in urgent:
            cluster.create(PODS, pod)
        _wait(sched, out, total, total, width, lambda: _urgent_done(cluster), 15)
        urgent_seconds = time.perf_counter() - urgent_started
        _progress(out, _decided(sched), total, width, final=True)
        out.write("\n")
        sched.wait_for_bindings()
        sched.recorder.flush()
        result = _collect(cluster, sched, total, elapsed)
        result.bound_first, result.p50_ms, result.p99_ms = bound_first, p50, p99
        result.urgent_seconds = urgent_seconds
        result.refused = refused
    finally:
        stop.set()
        sched.stop()
        cluster.close()
    _report(out, result)
    return result


def _decided(sched: Scheduler) -> int:
    return sched.stats.bound + sched.pending_pods()["unschedulable"]


def _wait(sched: Scheduler, out: TextIO, target: int, total: int, width: int, also: Any, timeout: float) -> None:
    """Until `target` pods are bound or parked as unschedulable and the queue is idle (and `also`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = sched.pending_pods()
        _progress(out, _decided(sched), total, width)
        if _decided(sched) >= target and not pending["active"] and not pending["backoff"] and also():
            return
        time.sleep(0.05)


def _urgent_done(cluster: EmbeddedCluster) -> bool:
    return all(p["spec"].get("nodeName") for p in cluster.list(PODS)["items"]
               if p["metadata"]["name"].startswith("urgent-"))


def _progress(out: TextIO, done: int, total: int, width: int, *, final: bool = False) -> None:
    if not final and not out.isatty():
        return  # a log file wants one line, not hundreds of carriage returns
    filled = int(width * min(done, total) / max(total, 1))
    out.write(f"\rscheduling [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    out.flush()


def _collect(cluster: EmbeddedCluster, sched: Scheduler, total: int, elapsed: float) -> DemoResult:
    placements: dict[str, list[str]] = collections.defaultdict(list)
    pending: set[str] = set()
    cpu_used: collections.Counter[str] = collections.Counter()
    for p in cluster.list(PODS)["items"]:
        node = p["spec"].get("nodeName")
        if node:
            placements[node].append(p["metadata"]["name"])
            for c in p["spec"]["containers"]:
                cpu_used[node] += _cpu_milli((c.get("resources", {}).get("requests") or {}).get("cpu", "0"))
        elif not p["metadata"].get("deletionTimestamp"):
            pending.add(p["metadata"]["name"])
    nodes: dict[str, dict[str, str]] = {}
    for n in cluster.list(NODES)["items"]:
        name = n["metadata"]["name"]
        labels = n["metadata"].get("labels") or {}
        notes = [labels.get("topology.kubernetes.io/zone", ""), labels.get("disktype", "")]
        notes += [f"taint {t['key']}" for t in n["spec"].get("taints") or []]
        if n["spec"].get("unschedulable"):
            notes.append("cordoned")
        alloc = _cpu_milli(n["status"]["allocatable"]["cpu"])
        nodes[name] = {"cpu": f"{cpu_used[name] / 1000:.2f}/{alloc / 1000:g}", "notes": " ".join(notes)}
    latest: dict[str, tuple[str, str]] = {}
    for e in cluster.list(EVENTS, "default")["items"]:
        name = e["involvedObject"]["name"]
        if e["reason"] == "FailedScheduling" and name in pending:
            stamp = e.get("lastTimestamp") or ""
            if name not in latest or stamp >= latest[name][0]:
                latest[name] = (stamp, e["message"])
    by_message: dict[str, list[str]] = collections.defaultdict(list)
    for name, (_, message) in sorted(latest.items()):
        by_message[message].append(name)
    return DemoResult(
        pods=total, bound=sum(len(v) for v in placements.values()), unschedulable=dict(by_message),
        placements=dict(placements), nodes=nodes, seconds=elapsed, p50_ms=sched.stats.percentile(50) * 1e3,
        p99_ms=sched.stats.percentile(99) * 1e3, preempted=sched.stats.victims,
    )


def _report(out: TextIO, r: DemoResult) -> None:
    out.write("\nPlacement\n")
    out.write(f"  {'node':<9} {'pods':>4} {'cpu used':>10}  {'labels, taints':<28} pods (first few)\n")
    for node in sorted(r.nodes):
        names = sorted(r.placements.get(node, []))
        info = r.nodes[node]
        shown = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
        out.write(f"  {node:<9} {len(names):>4} {info['cpu']:>10}  {info['notes']:<28} {shown}\n")
    if r.unschedulable:
        out.write("\nNot scheduled (FailedScheduling)\n")
        for message, names in sorted(r.unschedulable.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")
            out.write(f"  {len(names):>3} pod(s) [{shown}]\n      {message}\n")
    if r.refused:
        out.write("\nRefused by the API server (never reached the scheduler)\n")
        for name, answer in sorted(r.refused.items()):
            out.write(f"  {name}: {answer}\n")
    out.write("\nSummary\n")
    out.write(f"  pods: {r.pods}, bound: {r.bound}, not scheduled: "
              f"{sum(len(v) for v in r.unschedulable.values())}, preempted: {r.preempted}\n")
    out.write(f"  first wave: {r.bound_first} pods bound in {r.seconds:.2f} s "
              f"({r.bound_first / r.seconds if r.seconds else 0:.0f} pods/s end to end); "
              f"scheduling cycle p50 {r.p50_ms:.2f} ms, p99 {r.p99_ms:.2f} ms\n")
    out.write(f"  then 4 urgent pods on the full cluster: placed in {r.urgent_seconds:.2f} s by preempting "
              f"{r.preempted} low-priority pod(s) (their graceful deletion and the preemptor's backoff "
              "take most of it)\n")


def _cpu_milli(text: str) -> int:
    return parse_quantity(text).milli_value()
