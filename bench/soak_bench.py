"""A soak of `minisched run` on a real control plane (a benchmark, not a test).

For `--minutes`, pods are created and deleted continuously (`--rate` per second each way, keeping
about `--live` pods at once) while minisched runs as its own process. Every `--every` seconds the
bench samples the scheduler process from /proc and its /metrics:
- RSS (VmRSS), threads, open sockets (file descriptors that are sockets);
- the scheduling queue lengths (scheduler_pending_pods: active, backoff, unschedulable, gated);
- pods bound so far (its own watch observer).

It prints one row per sample, then the "flatness" after warm-up (the first third dropped): the
least-squares slope of RSS (MiB per minute), sockets and threads over the rest. A leak shows as a
steady positive slope; noise as slopes near zero with no sign.

    .venv/bin/python bench/soak_bench.py [--minutes 3] [--rate 40] [--live 400] [--nodes 50] [--every 5]

Needs the control-plane binaries (`make controlplane`); without them it says so and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _proc(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    sockets = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            sockets += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return {"rss_mib": rss, "threads": threads, "sockets": sockets}


def _queues(port: int) -> dict[str, float]:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r'^scheduler_pending_pods\{queue="(\w+)"\} (\S+)$', text, re.M)}


def _slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--rate", type=float, default=40.0, help="pods created (and deleted) per second")
    ap.add_argument("--live", type=int, default=400, help="pods kept at once before deleting the oldest")
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    ap.add_argument("--bind-workers", type=int, default=64)
    args = ap.parse_args()

    from minisched.cluster.real import RealCluster
    from minisched.controlplane import BinariesNotFound, ControlPlane, ControlPlaneOptions, find_binaries
    from minisched.controlplane.observe import PodObserver
    from minisched.controlplane.processes import free_port
    from minisched.errors import ApiError, NotFound
    from minisched.objects import make_node, make_pod

    try:
        find_binaries()
    except BinariesNotFound as err:
        print(f"skipped: {err}")
        return 0
    with ControlPlane(ControlPlaneOptions(start_kwok=False)) as cp:
        cluster = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        ns = "soak"
        cluster.create("namespaces", {"metadata": {"name": ns}})
        nodes = [cluster.create("nodes", make_node(f"soak-{i}", cpu="64", memory="256Gi", pods="500"))
                 for i in range(args.nodes)]
        port = free_port()
        log = open(Path(tempfile.gettempdir()) / "minisched-soak.log", "wb")  # noqa: SIM115
        import subprocess

        proc = subprocess.Popen(
            [sys.executable, "-m", "minisched.cli", "run", "--kubeconfig", str(cp.kubeconfig),
             "--bind-workers", str(args.bind_workers), "--metrics-port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        stop = threading.Event()
        churned = {"created": 0, "deleted": 0, "errors": 0}

        def churn() -> None:
            began, i, live = time.monotonic(), 0, []
            while not stop.is_set():
                pause = began + i / args.rate - time.monotonic()
                if pause > 0:
                    stop.wait(pause)
                name = f"p{i}"
                try:
                    cluster.create("pods", make_pod(name, namespace=ns, cpu="10m", memory="16Mi"))
                    churned["created"] += 1
                    live.append(name)
                except ApiError:
                    churned["errors"] += 1
                while len(live) > args.live:
                    try:
                        cluster.delete("pods", live.pop(0), ns, grace_period_seconds=0)
                        churned["deleted"] += 1
                    except NotFound:
                        pass
                    except ApiError:
                        churned["errors"] += 1
                i += 1

        samples: list[dict[str, Any]] = []
        with PodObserver(cluster, namespace=ns, nodes=nodes) as obs:
            threading.Thread(target=churn, daemon=True).start()
            began = time.monotonic()
            print(f"{'t(s)':>6} {'RSS MiB':>8} {'threads':>7} {'sockets':>7} {'bound':>7} {'created':>7} "
                  f"{'deleted':>7}  queues")
            try:
                while time.monotonic() - began < args.minutes * 60:
                    time.sleep(args.every)
                    if proc.poll() is not None:
                        print(f"minisched exited with {proc.returncode}; see {log.name}")
                        return 1
                    s = {"t": time.monotonic() - began, **_proc(proc.pid), "bound": obs.bound_count(),
                         **churned, "queues": _queues(port)}
                    samples.append(s)
                    q = " ".join(f"{k}={int(v)}" for k, v in sorted(s["queues"].items()))
                    print(f"{s['t']:6.0f} {s['rss_mib']:8.1f} {s['threads']:7d} {s['sockets']:7d} {s['bound']:7d} "
                          f"{s['created']:7d} {s['deleted']:7d}  {q}", flush=True)
            finally:
                stop.set()
                proc.terminate()
                proc.wait(60)
                log.close()
        rest = samples[len(samples) // 3:]
        ts = [s["t"] / 60 for s in rest]
        print(f"\nafter warm-up ({len(rest)} samples from t={rest[0]['t']:.0f} s):" if rest else "no samples")
        if rest:
            for key, unit in (("rss_mib", "MiB/min"), ("threads", "/min"), ("sockets", "/min")):
                values = [float(s[key]) for s in rest]
                print(f"  {key:8} {min(values):8.1f} .. {max(values):8.1f}   slope {_slope(ts, values):+.2f} {unit}")
            print(f"  pods churned: {churned['created']} created, {churned['deleted']} deleted, "
                  f"{churned['errors']} API errors; overcommits {len(obs.overcommits)}; "
                  f"double bindings {sum(1 for r in obs.pods.values() if r.bindings > 1)}")
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
