"""Part II §4.3: sharded minisched with 1, 2 and 3 replicas on the local control plane, side by side
(a benchmark, not a test).

Each configuration gets a fresh control plane (etcd + kube-apiserver + KWOK) on loopback:

1. `--nodes` KWOK nodes (4 CPU, 32Gi, 110 pods), waited Ready;
2. a pending backlog that fills the cluster to `--fill` of its CPU (default exactly full: the last
   pods compete for the last free slots, where sharded replicas need the fallback and the capacity
   fence), pods of `--pod-cpu` (default 100m) and 64Mi;
3. N replicas of deploy/deployment.yaml's minisched started at once as processes, with the
   Deployment's own args (minisched.controlplane.replicas.Replicas: its ServiceAccount's token,
   its RBAC, secure serving); `N-nofence` adds --no-capacity-fence; `plain` is one replica with
   the shard flags left out (unsharded minisched: no leases, no ledger), for the cost of sharding;
4. an independent observer (minisched.controlplane.invariants.ClusterObserver) sees every pod bound
   and checks the invariants; a sampler reads the API server's own /metrics about once a second.

Printed per configuration:

- pods/s: bound pods over the makespan (first to last binding the observer saw), the p50 of its
  1-second samples, and start-to-done (replicas started to the last binding: includes start-up, the
  initial list and the ring settling);
- the conflict rate as the cluster fills, by quarter of the pods bound: bindings the API server
  accepted (POST pods/binding 201) and refused with 409 (a replica binding a pod another already
  bound: the pod fence at work), and capacity-ledger writes (PUT configmaps) accepted and refused
  with 409 (the node fence's retries). These come from the API server's apiserver_request_total,
  not from the replicas, so they count the same whatever the replicas export;
- where the time went: CPU-seconds over the drain of kube-apiserver, etcd, KWOK, each replica and
  this process (the observer, the sampler), and their sum as a share of the machine's cores;
- the invariants: pods bound twice, over-committed nodes, pods pending that fit, never bound;
- each replica's shard metrics at the end (every metric whose name has shard, fence or conflict).

    .venv/bin/python bench/sharding_bench.py [--configs plain,1,2,3,3-nofence] [--nodes 40] [--fill 1.0] [--pod-cpu 100m]
        [--lease-duration 15] [--no-kwok] [--deployment FILE] [--keep-logs] [--json out.json]

Needs the control-plane binaries (`make controlplane`) and a deploy/deployment.yaml that runs
--shards; without either it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

NAMESPACE = "shardbench"
NODE_CPU = 4  # cores per node
SAMPLE_PERIOD = 1.0
STALL_SECONDS = 90.0  # no binding for this long: give up on the rest (reported as never bound)

# apiserver_request_total series the sampler keeps: (verb, resource, subresource) -> short name
_SERIES = {("POST", "pods", "binding"): "bind", ("PUT", "configmaps", ""): "ledger"}
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _api_counts(cp: Any) -> dict[str, int]:
    """{"bind 201": n, "bind 409": n, "ledger 200": n, "ledger 409": n, ...} from the API server."""
    status, text = cp.api_get("/metrics")
    if status != 200:
        raise RuntimeError(f"kube-apiserver /metrics answered {status}")
    out: dict[str, int] = {}
    for line in str(text).splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line.rpartition("} ")
        labels = dict(_LABEL.findall(labels_text))
        short = _SERIES.get((labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", "")))
        if short is not None:
            key = f"{short} {labels.get('code', '?')}"
            out[key] = out.get(key, 0) + int(float(value))
    return out


class Sampler:
    """Every SAMPLE_PERIOD: (pods bound as the observer sees them, the API server's counts)."""

    def __init__(self, cp: Any, observer: Any) -> None:
        self.cp, self.observer = cp, observer
        self.samples: list[tuple[int, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def start(self) -> Sampler:
        self.samples.append((0, _api_counts(self.cp)))
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.samples.append((self.observer.bound_count(), _api_counts(self.cp)))

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_PERIOD):
            try:
                self.samples.append((self.observer.bound_count(), _api_counts(self.cp)))
            except (OSError, RuntimeError):
                continue

    def by_quarter(self, pods: int) -> list[dict[str, int]]:
        """The counters' increase while the bound count went through each quarter of the pods."""
        quarters: list[dict[str, int]] = []
        edges = [pods * q // 4 for q in range(5)]
        for q in range(4):
            inside = [s for s in self.samples if edges[q] <= s[0] <= edges[q + 1]]
            start = max((s for s in self.samples if s[0] <= edges[q]), key=lambda s: s[0], default=self.samples[0])
            end = inside[-1] if inside else start
            quarters.append({k: end[1].get(k, 0) - start[1].get(k, 0) for k in set(end[1]) | set(start[1])})
        return quarters


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    from minisched.controlplane.observe import process_usage

    out = {}
    for name, pid in pids.items():
        try:
            out[name] = process_usage(pid).cpu_seconds
        except OSError:
            continue  # gone
    return out


def _self_cpu() -> float:
    t = os.times()
    return t.user + t.system


SHARD_FLAGS = ("--shards", "--shard-group", "--shard-lease-duration", "--no-capacity-fence")


def run_config(label: str, n: int, fence: bool, args: argparse.Namespace, *, sharded: bool = True) -> dict[str, Any]:
    from minisched.cluster.real import RealCluster
    from minisched.controlplane import ControlPlane, ControlPlaneOptions, create_fake_nodes
    from minisched.controlplane.invariants import ClusterObserver
    from minisched.controlplane.observe import per_second, percentile
    from minisched.controlplane.replicas import Replicas
    from minisched.objects import make_pod
    from minisched.quantity import milli_value

    pods = int(args.nodes * NODE_CPU * 1000 * args.fill) // milli_value(args.pod_cpu)
    overrides: dict[str, str | None] = {"--shard-lease-duration": str(args.lease_duration)} if sharded else {}
    if not fence:
        overrides["--no-capacity-fence"] = None
    with ControlPlane(ControlPlaneOptions(start_kwok=not args.no_kwok, ready_timeout=120,
                                          keep_logs=args.keep_logs)) as cp:
        admin = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        admin.create("namespaces", {"metadata": {"name": NAMESPACE}})
        if args.no_kwok:
            from minisched.objects import make_node

            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda i: admin.create("nodes", make_node(f"node-{i:03d}", cpu=str(NODE_CPU),
                                                                        memory="32Gi")), range(args.nodes)))
        else:
            create_fake_nodes(admin, args.nodes, prefix="node", cpu=str(NODE_CPU), memory="32Gi", wait_ready=300)
        t0 = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: admin.create("pods", make_pod(f"pod-{i:05d}", namespace=NAMESPACE,
                                                                  cpu=args.pod_cpu, memory="64Mi")), range(pods)))
        create_rate = pods / (time.monotonic() - t0)
        with ClusterObserver.from_kubeconfig(cp.kubeconfig, namespace=NAMESPACE, scheduler_name="minisched") as obs:
            obs.wait_for(lambda o: len(o.pods) >= pods, 300, "the observer to see every pod")
            sampler = Sampler(cp, obs).start()
            components = {name: p.pid for name, p in cp.processes.items() if name in ("kube-apiserver", "etcd", "kwok")}
            before, self_before = _cpu(components), _self_cpu()
            started = time.monotonic()
            rs = Replicas(cp, admin, n=n, overrides=overrides, deployment=args.deployment,
                          log_dir=cp.log_dir / "replicas", drop=() if sharded else SHARD_FLAGS,
                          verbose=1 if args.keep_logs else 0)
            try:
                rs.start()
                pids = {**components, **{r.name: r.pid for r in rs.replicas}}
                _wait_drained(obs, pods)
                done = time.monotonic()
                after, self_after = _cpu(pids), _self_cpu()
                shard_metrics = {r.name: _shard_metrics(rs, r) for r in rs.live()}
            finally:
                rs.stop()
                sampler.stop()
            report = obs.check([f"{NAMESPACE}/pod-{i:05d}" for i in range(pods)])
            bound = obs.bound_times()
        admin.close()
    first, last = (bound[0], bound[-1]) if bound else (started, started)
    samples = per_second(bound, first, last) if bound else [0]
    full = samples[:-1] if len(samples) > 1 else samples
    cpu = {k: round(after.get(k, 0.0) - before.get(k, 0.0), 1) for k in pids}
    cpu["bench (observer, sampler)"] = round(self_after - self_before, 1)
    wall = done - started
    return {
        "config": label, "replicas": n, "fence": fence, "sharded": sharded, "nodes": args.nodes, "pods": pods, "bound": len(bound),
        "create_pods_per_s": round(create_rate, 1),
        "pods_per_s_avg": round(len(bound) / max(1e-9, last - first), 1),
        "pods_per_s_p50": percentile([float(s) for s in full], 50),
        "start_to_done_s": round(wall, 1), "makespan_s": round(last - first, 1),
        "start_to_first_bind_s": round(first - started, 1),
        "cpu_s": cpu, "cpu_share_of_machine": round(sum(cpu.values()) / (wall * (os.cpu_count() or 1)), 2),
        "quarters": sampler.by_quarter(pods),
        "bound_twice": len(report.bound_twice), "overcommits": len(report.overcommits),
        "pending_that_fit": len(report.pending_that_fit), "never_bound": len(report.unbound),
        "examples": report.problems(3), "shard_metrics": shard_metrics,
        "logs": str(cp.log_dir) if args.keep_logs else None,
    }


def _wait_drained(obs: Any, pods: int) -> None:
    """Until every pod is bound, or no pod was bound for STALL_SECONDS."""
    last_count, last_change = -1, time.monotonic()
    while True:
        count = obs.bound_count()
        if count >= pods:
            return
        if count != last_count:
            last_count, last_change = count, time.monotonic()
        elif time.monotonic() - last_change > STALL_SECONDS:
            return
        time.sleep(0.2)


def _shard_metrics(rs: Any, replica: Any) -> dict[str, float]:
    try:
        metrics = rs.metrics(replica)
    except (OSError, RuntimeError) as err:
        return {"unreadable": 0.0, str(err)[:80]: 0.0}
    keep = ("shard", "fence", "conflict")
    return {k: v for k, v in metrics.items() if any(w in k.split("{")[0] for w in keep) and not k.endswith("_created")
            and "_bucket" not in k}


def _print(r: dict[str, Any]) -> None:
    print(f"{r['config']:<10} {r['pods_per_s_avg']:>6.1f} pods/s avg  p50 {r['pods_per_s_p50']:>4.0f}  "
          f"makespan {r['makespan_s']:.1f} s  start->done {r['start_to_done_s']:.1f} s  "
          f"start->first bind {r['start_to_first_bind_s']:.1f} s  bound {r['bound']}/{r['pods']}", flush=True)
    cpu = ", ".join(f"{k} {v}" for k, v in r["cpu_s"].items())
    print(f"{'':<10} CPU-s over the drain: {cpu}; {r['cpu_share_of_machine']:.0%} of the machine's cores")
    print(f"{'':<10} as the cluster fills (quarters of the pods bound):")
    for q, counts in enumerate(r["quarters"]):
        ok, refused = counts.get("bind 201", 0), counts.get("bind 409", 0)
        ledger_ok, ledger_refused = counts.get("ledger 200", 0), counts.get("ledger 409", 0)
        print(f"{'':<12} {25 * q:>3}-{25 * (q + 1)}%: bindings {ok} accepted, {refused} refused 409 "
              f"({refused / max(1, ok + refused):.1%}); ledger writes {ledger_ok} accepted, "
              f"{ledger_refused} refused 409 ({ledger_refused / max(1, ledger_ok + ledger_refused):.1%})")
    if r.get("logs"):
        print(f"{'':<10} logs: {r['logs']}")
    print(f"{'':<10} invariants: bound twice {r['bound_twice']}, over-committed {r['overcommits']}, "
          f"pending that fit {r['pending_that_fit']}, never bound {r['never_bound']}"
          + (f" ({r['examples']})" if r["examples"] != "none" else ""))
    for name, metrics in r["shard_metrics"].items():
        if metrics:  # one replica's series: its name says which, the labels need not
            short = {k.split("{")[0].removeprefix("minisched_shard_").removesuffix("_total"): v
                     for k, v in metrics.items()}
            print(f"{'':<10} {name}: " + ", ".join(f"{k} {v:g}" for k, v in sorted(short.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="1,2,3",
                        help="comma-separated: N (replicas), N-nofence (with --no-capacity-fence), plain (one "
                             "replica with the Deployment's args minus the shard flags); default 1,2,3")
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--fill", type=float, default=1.0, help="the backlog's share of the cluster's CPU (0..1]")
    parser.add_argument("--pod-cpu", default="100m")
    parser.add_argument("--lease-duration", type=int, default=15, help="--shard-lease-duration (default 15)")
    parser.add_argument("--no-kwok", action="store_true", help="nodes created Ready, no KWOK updating pods")
    parser.add_argument("--deployment", type=Path, default=None,
                        help="the Deployment manifest whose args the replicas run (default deploy/deployment.yaml)")
    parser.add_argument("--keep-logs", action="store_true",
                        help="keep each control plane's and replica's logs (replicas at -v) and print where")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    configs = []
    for c in (c.strip() for c in args.configs.split(",") if c.strip()):
        if c == "plain":
            configs.append((c, 1, True, False))
            continue
        m = re.fullmatch(r"(\d+)(-nofence)?", c)
        if m is None or int(m.group(1)) < 1:
            parser.error(f"--configs: {c!r} is not N, N-nofence (N >= 1) or plain")
        configs.append((c, int(m.group(1)), m.group(2) is None, True))
    if args.nodes < 1 or not 0 < args.fill <= 1:
        parser.error("--nodes must be >= 1 and --fill in (0, 1]")

    from minisched.controlplane import BinariesNotFound, find_binaries
    from minisched.controlplane.replicas import DEPLOY, deployment_spec

    args.deployment = args.deployment or DEPLOY / "deployment.yaml"
    try:
        find_binaries()
    except BinariesNotFound as err:
        print(f"skipped: {err}")
        return 0
    spec = deployment_spec(args.deployment)
    if "--shards" not in spec.args:
        print(f"skipped: deploy/deployment.yaml does not run --shards (args {list(spec.args)})")
        return 0
    print(f"sharded backlog drain: {args.nodes} nodes of {NODE_CPU} CPU ({'no KWOK' if args.no_kwok else 'KWOK'}), "
          f"pods of {args.pod_cpu} filling {args.fill:.0%}; Deployment args {list(spec.args)}, "
          f"--shard-lease-duration {args.lease_duration}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
          flush=True)
    results = []
    for label, n, fence, sharded in configs:
        result = run_config(label, n, fence, args, sharded=sharded)
        _print(result)
        results.append(result)
    base = next((r for r in results if r["replicas"] == 1 and r["fence"] and r["sharded"]), None)
    if base is not None:
        for r in results:
            if r is not base:
                print(f"{r['config']} / 1 replica pods/s: {r['pods_per_s_avg'] / max(1e-9, base['pods_per_s_avg']):.2f}")
    print(f"load after: {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
