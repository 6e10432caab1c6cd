"""One preemption victim's API calls on a real API server: GET + JSON merge patch + DELETE (minisched
before this change) against a strategic merge patch from the cached copy + DELETE (kube-scheduler's
PreemptPod, and minisched now), client CPU and API-server CPU per victim (a benchmark, not a test).

On a fresh local control plane (etcd + kube-apiserver, no KWOK): `--victims` pods bound to a node
name that no kubelet serves (so a DELETE leaves them terminating, as in scheduler_perf), each with
two conditions; then the victims are marked and deleted from one thread, in batches of `--batch`,
the two forms alternating batch by batch so that both see the same machine. The marking calls are
DefaultPreemption's own (`Executor.mark_disruption_target`) for the new form, and the code it replaced for
the old one.

    .venv/bin/python bench/preemption_calls_bench.py [--victims 600] [--batch 50]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _old_mark(cluster: Any, victim: Any, scheduler_name: str) -> None:
    """minisched before: read the victim, send back the whole conditions list (JSON merge patch)."""
    from minisched.clock import rfc3339
    from minisched.resources import PODS

    current = cluster.get(PODS, victim.name, victim.namespace)
    conditions = [c for c in (current.get("status") or {}).get("conditions") or []
                  if c.get("type") != "DisruptionTarget"]
    conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                       "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
                       "lastTransitionTime": rfc3339(time.time())})
    cluster.patch(PODS, victim.name, {"status": {"conditions": conditions}}, victim.namespace, subresource="status")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--victims", type=int, default=600)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args(argv)
    if args.victims < 2 * args.batch or args.batch < 1:
        parser.error("--victims must hold at least two --batch")

    from minisched.controlplane import BinariesNotFound, find_binaries

    try:
        find_binaries()
    except BinariesNotFound as missing:
        print(f"skipped: {missing}")
        return 0
    from minisched.cluster.real import RealCluster
    from minisched.controlplane import ControlPlane, ControlPlaneOptions
    from minisched.controlplane.observe import process_usage
    from minisched.objects import make_namespace, make_pod
    from minisched.resources import PODS
    from minisched.scheduler.plugins.default_preemption import DefaultPreemption
    from minisched.scheduler.pod_info import PodInfo

    with ControlPlane(ControlPlaneOptions(start_kwok=False, ready_timeout=120)) as cp:
        cluster = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        apiserver = cp.processes["kube-apiserver"].pid
        try:
            cluster.create("namespaces", make_namespace("victims"))
            pods = []
            for i in range(args.victims):
                cluster.create(PODS, make_pod(f"v{i}", namespace="victims", node_name="far-away"))
                pods.append(cluster.patch(PODS, f"v{i}", {"status": {"conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]}},
                    "victims", subresource="status"))
            plugin = DefaultPreemption({"schedulerName": "minisched"}, handle=None)
            totals = {"old": [0.0, 0.0, 0.0, 0], "new": [0.0, 0.0, 0.0, 0]}  # client CPU, server CPU, wall, n
            for start in range(0, args.victims, args.batch):
                form = "old" if (start // args.batch) % 2 == 0 else "new"
                batch = [PodInfo.from_pod(p) for p in pods[start:start + args.batch]]
                cpu0, server0, wall0 = time.process_time(), process_usage(apiserver).cpu_seconds, time.perf_counter()
                for victim in batch:
                    if form == "old":
                        _old_mark(cluster, victim, "minisched")
                    else:
                        plugin.executor.mark_disruption_target(cluster, victim)
                    cluster.delete(PODS, victim.name, victim.namespace)
                t = totals[form]
                t[0] += time.process_time() - cpu0
                t[1] += process_usage(apiserver).cpu_seconds - server0
                t[2] += time.perf_counter() - wall0
                t[3] += len(batch)
            with open("/proc/loadavg") as fh:
                load = fh.read().split()[0]
            print(f"{args.victims} victims in batches of {args.batch}, forms alternating; load {load} at the end")
            for form, label in (("old", "GET + merge patch + DELETE"), ("new", "strategic patch + DELETE")):
                cpu, server, wall, n = totals[form]
                print(f"  {label:<28} client CPU {cpu / n * 1e3:6.2f} ms  kube-apiserver CPU {server / n * 1e3:6.2f} ms"
                      f"  wall {wall / n * 1e3:6.2f} ms  per victim ({n} victims)")
        finally:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
