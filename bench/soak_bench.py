"""A soak of `minisched run` on a real control plane (a benchmark, not a test).

For `--minutes`, pods are created and deleted continuously (`--rate` per second each way, keeping
about `--live` pods at once) while minisched runs as its own process. Every `--every` seconds the
bench samples the scheduler process from /proc and its /metrics:
- RSS (VmRSS), threads, open sockets (file descriptors that are sockets);
- the scheduling queue lengths (scheduler_pending_pods: active, backoff, unschedulable, gated);
- pods bound so far (its own watch observer).

It prints one row per sample, then the slopes after the warm-up, least squares against time and
against pods churned. The warm-up rule: the fit starts at the later of the run's middle and the
first sample where each scheduler has bound 4,096 pods (WARM_PODS: the event recorder's
correlator, the largest bounded buffer a service keeps, holds 4,096 events, one per pod bound,
and grows by ~400 bytes per pod until full; with k variants side by side each binds 1/k of the
pods, so its correlator fills k times later). If fewer than a third of the samples are left after
it, the verdict is FAIL with "run longer".

Flat, the criterion (the same as bench/soak_memory_bench.py's, per pod churned), printed PASS/FAIL:
- RSS grows by less than 64 KiB per 1,000 pods created and deleted (150 KiB per minute at 40/s);
- threads and sockets grow by less than one per minute.

Every sample also reads minisched's memory watch from its /metrics (the allocators' books:
glibc malloc's heaps, in use and free, from mallinfo2; its arena count; pymalloc's arenas and
blocks in use), so RSS growth can be told apart: Python objects still held (blocks), pymalloc
arenas kept for a few live blocks, or glibc memory (OpenSSL, C extensions, the threads' malloc
arenas) in use or kept free.

`--variants` runs several `minisched run` processes side by side against one control plane, each
with its own schedulerName (profile soak-<variant>); the churn gives them pods in turn, so each
binds a share while its informers see every pod. Known variants: default; arena2
(MALLOC_ARENA_MAX=2 in its environment); workers16 (--bind-workers 16); trim (--malloc-trim, with
--memory-sample-interval 10); traced (under tracemalloc, as --trace). One row per sample and
variant; the slopes per variant at the end.

With `--trace`, minisched runs under tracemalloc (about 2x slower) and dumps a snapshot on SIGUSR2
at the middle and at the end; the bench prints the lines that grew most in between, and the
minisched classes whose live instances grew. A diagnostic: taking the snapshots moves the RSS, so
with --trace the RSS verdict is not given.

    .venv/bin/python bench/soak_bench.py [--minutes 10] [--rate 40] [--live 400] [--nodes 50] [--every 5]
        [--trace | --variants default,arena2,workers16,trim]

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
    # of which anonymous (heaps, arenas, stacks) and file-backed (pages of the interpreter, its
    # libraries and extension modules, touched as code paths run for the first time)
    anon = int(re.search(r"RssAnon:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
    file = int(re.search(r"RssFile:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    sockets = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            sockets += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return {"rss_mib": rss, "anon_mib": anon, "file_mib": file, "threads": threads, "sockets": sockets}


_GAUGES = {  # minisched's memory watch on /metrics: the column it gets here, and its unit
    "minisched_glibc_malloc_arena_bytes": "heap",
    "minisched_glibc_malloc_mmapped_bytes": "mmap",
    "minisched_glibc_malloc_in_use_bytes": "used",
    "minisched_glibc_malloc_free_bytes": "free",
    "minisched_glibc_malloc_arenas": "arenas",
    "minisched_pymalloc_arenas": "pyarenas",
    "minisched_pymalloc_allocated_blocks": "blocks",
}


def _scrape(port: int) -> tuple[dict[str, float], dict[str, float]]:
    """The scheduling queue lengths and the memory watch's gauges from minisched's /metrics."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}, {}
    queues = {m.group(1): float(m.group(2))
              for m in re.finditer(r'^scheduler_pending_pods\{queue="(\w+)"\} (\S+)$', text, re.M)}
    gauges = {_GAUGES[m.group(1)]: float(m.group(2))
              for m in re.finditer(r"^(minisched_\w+) (\S+)$", text, re.M) if m.group(1) in _GAUGES}
    return queues, gauges


def _slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


# name: (environment, extra `minisched run` arguments)
VARIANTS: dict[str, tuple[dict[str, str], list[str]]] = {
    "default": ({}, []),
    "arena2": ({"MALLOC_ARENA_MAX": "2"}, []),
    "workers16": ({}, ["--bind-workers", "16"]),
    "trim": ({}, ["--malloc-trim", "--memory-sample-interval", "10"]),
    "traced": ({}, []),  # under tracemalloc (~2x slower), snapshots at the middle and the end
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=40.0, help="pods created (and deleted) per second")
    ap.add_argument("--live", type=int, default=400, help="pods kept at once before deleting the oldest")
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    ap.add_argument("--bind-workers", type=int, default=64)
    ap.add_argument("--variants", default="default",
                    help=f"comma-separated, run side by side: {', '.join(VARIANTS)} (default: default)")
    ap.add_argument("--trace", action="store_true", help="tracemalloc in minisched; top differences, middle to end")
    args = ap.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or len(set(variants)) != len(variants):
        ap.error(f"--variants: unknown or repeated {unknown or variants}; known: {', '.join(VARIANTS)}")
    if args.trace:  # the same as the variant "traced" alone
        variants = ["traced"]
    traced = "traced" in variants

    import subprocess

    import yaml

    from minisched.cluster.real import RealCluster
    from minisched.controlplane import BinariesNotFound, ControlPlane, ControlPlaneOptions, find_binaries
    from minisched.controlplane.observe import PodObserver
    from minisched.controlplane.processes import _die_with_parent, free_port
    from minisched.errors import ApiError, NotFound
    from minisched.objects import DEFAULT_SCHEDULER_NAME, make_node, make_pod

    try:
        find_binaries()
    except BinariesNotFound as err:
        print(f"skipped: {err}")
        return 0
    print(f"load average at the start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs); variants: {', '.join(variants)}")
    with ControlPlane(ControlPlaneOptions(start_kwok=False)) as cp:
        cluster = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        ns = "soak"
        cluster.create("namespaces", {"metadata": {"name": ns}})
        nodes = [cluster.create("nodes", make_node(f"soak-{i}", cpu="64", memory="256Gi", pods="500"))
                 for i in range(args.nodes)]
        dumps = Path(tempfile.mkdtemp(prefix="minisched-soak-"))
        procs: dict[str, Any] = {}
        ports: dict[str, int] = {}
        names: dict[str, str] = {}
        logs = []
        for v in variants:
            env, extra = VARIANTS[v]
            ports[v] = free_port()
            run = ["run", "--kubeconfig", str(cp.kubeconfig), "--bind-workers", str(args.bind_workers),
                   "--metrics-port", str(ports[v]), "--memory-sample-interval", str(min(args.every, 30.0)), *extra]
            names[v] = DEFAULT_SCHEDULER_NAME
            if len(variants) > 1:
                names[v] = f"soak-{v}"
                config = dumps / f"{v}.yaml"
                config.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                                  "kind": "KubeSchedulerConfiguration",
                                                  "profiles": [{"schedulerName": names[v]}]}))
                run += ["--config", str(config)]
            log = open(Path(tempfile.gettempdir()) / f"minisched-soak-{v}.log", "wb")  # noqa: SIM115
            logs.append(log)
            if v == "traced":
                argv = [sys.executable, "-X", "tracemalloc=1", "-c", _TRACED, str(dumps), *run]
            else:
                argv = [sys.executable, "-m", "minisched.cli", *run]
            # killed with the bench if the bench is killed first (as the control plane's processes are)
            procs[v] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                        env={**os.environ, **env}, preexec_fn=_die_with_parent)
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
                    cluster.create("pods", make_pod(name, namespace=ns, cpu="10m", memory="16Mi",
                                                    scheduler_name=names[variants[i % len(variants)]]))
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

        samples: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        with PodObserver(cluster, namespace=ns, nodes=nodes) as obs:
            threading.Thread(target=churn, daemon=True).start()
            began = time.monotonic()
            print(f"{'variant':>9} {'t(s)':>6} {'RSS MiB':>8} {'anon':>6} {'file':>5} {'thr':>4} {'sock':>4} {'bound':>7} {'created':>7} "
                  f"{'heap':>6} {'mmap':>5} {'used':>6} {'free':>5} {'ar':>3} {'pyar':>4} {'blocks':>8}  queues")
            halfway = False
            try:
                while time.monotonic() - began < args.minutes * 60:
                    time.sleep(args.every)
                    if traced and not halfway and time.monotonic() - began >= args.minutes * 30:
                        halfway = True
                        _dump(procs["traced"], dumps, 1)
                    for v in variants:
                        proc = procs[v]
                        if proc.poll() is not None:
                            print(f"minisched ({v}) exited with {proc.returncode}; see {logs[variants.index(v)].name}")
                            return 1
                        queues, gauges = _scrape(ports[v])
                        s: dict[str, Any] = {"t": time.monotonic() - began, **_proc(proc.pid),
                                             "bound": obs.bound_count(), **churned, "queues": queues, **gauges}
                        samples[v].append(s)
                        q = " ".join(f"{k}={int(val)}" for k, val in sorted(queues.items()))
                        mib = 2**20
                        print(f"{v:>9} {s['t']:6.0f} {s['rss_mib']:8.1f} {s['anon_mib']:6.1f} {s['file_mib']:5.1f} "
                              f"{s['threads']:4d} {s['sockets']:4d} "
                              f"{s['bound']:7d} {s['created']:7d} {s.get('heap', 0) / mib:6.1f} "
                              f"{s.get('mmap', 0) / mib:5.1f} {s.get('used', 0) / mib:6.1f} {s.get('free', 0) / mib:5.1f} "
                              f"{s.get('arenas', 0):3.0f} {s.get('pyarenas', 0):4.0f} {s.get('blocks', 0):8.0f}  {q}",
                              flush=True)
                if traced:
                    _dump(procs["traced"], dumps, 2)
            finally:
                stop.set()
                for proc in procs.values():
                    proc.terminate()
                for proc in procs.values():
                    proc.wait(60)
                for log in logs:
                    log.close()
        cluster.close()
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}; pods churned: {churned['created']} created, "
          f"{churned['deleted']} deleted, {churned['errors']} API errors; overcommits {len(obs.overcommits)}; "
          f"double bindings {sum(1 for r in obs.pods.values() if r.bindings > 1)}")
    ok = True
    for v in variants:
        ok &= _verdict(v, samples[v], args)
    if traced:
        _compare_dumps(dumps)
    return 0 if ok else 1


def _verdict(variant: str, samples: list[dict[str, Any]], args: argparse.Namespace) -> bool:
    from minisched.observability.soak import print_verdicts

    per_scheduler = len(args.variants.split(",")) if not args.trace else 1
    warm = next((i for i, s in enumerate(samples) if s["created"] / per_scheduler >= WARM_PODS), len(samples))
    start = max(len(samples) // 2, warm)
    rest = samples[start:]
    if len(rest) < max(3, len(samples) // 3):
        print(f"\n{variant}: too few samples after the warm-up ({len(rest)} of {len(samples)}; each scheduler binds "
              f"{WARM_PODS:,} pods first): run for longer")
        return False
    ts = [s["t"] / 60 for s in rest]
    pods = [s["created"] / 1000 for s in rest]
    print(f"\n{variant}: after the warm-up ({len(rest)} samples from t={rest[0]['t']:.0f} s, {rest[0]['created']:,} -> "
          f"{rest[-1]['created']:,} pods created), RSS {samples[0]['rss_mib']:.1f} -> {samples[-1]['rss_mib']:.1f} MiB "
          f"over the whole run:")
    slopes = {}
    for key in ("rss_mib", "anon_mib", "file_mib", "threads", "sockets"):
        values = [float(s[key]) for s in rest]
        slopes[key] = (_slope(ts, values), _slope(pods, values))
        per_pods = f"{slopes[key][1] * 1024:+.2f} KiB" if key.endswith("_mib") else f"{slopes[key][1]:+.2f}"
        print(f"  {key:8} {min(values):8.1f} .. {max(values):8.1f}   slope {slopes[key][0]:+.3f}/min, "
              f"{per_pods} per 1,000 pods")
    for key, what in (("heap", "glibc heaps"), ("mmap", "glibc mmapped"), ("used", "glibc in use"),
                      ("free", "glibc free"), ("pyarenas", "pymalloc arenas (1 MiB)"), ("blocks", "pymalloc blocks")):
        if all(key in s for s in rest):
            values = [float(s[key]) / (1024 if key in ("heap", "mmap", "used", "free") else 1) for s in rest]
            unit = "KiB" if key in ("heap", "mmap", "used", "free") else ""
            print(f"  {what:24} slope {_slope(pods, values):+9.2f} {unit} per 1,000 pods "
                  f"({values[0]:,.0f} -> {values[-1]:,.0f})")
    rss_kib = slopes["rss_mib"][1] * 1024
    checks = [(f"threads slope {slopes['threads'][0]:+.2f}/min < 1", slopes["threads"][0] < 1),
              (f"sockets slope {slopes['sockets'][0]:+.2f}/min < 1", slopes["sockets"][0] < 1)]
    if variant != "traced":
        checks.insert(0, (f"RSS slope {rss_kib:+.1f} KiB per 1,000 pods < {RSS_LIMIT:g}", rss_kib < RSS_LIMIT))
    return print_verdicts(checks, f"minisched ({variant}) flat after warm-up over {args.minutes:g} minutes"
                                  f"{' (RSS not judged under tracemalloc)' if variant == 'traced' else ''}")


RSS_LIMIT = 64.0  # KiB per 1,000 pods churned, after the warm-up
WARM_PODS = 4096  # pods each scheduler binds before the fit may start (its event correlator's size)

# minisched run under tracemalloc, dumping a snapshot and its live minisched class counts on SIGUSR2
_TRACED = """
import json, os, signal, sys, tracemalloc
dumps, n = sys.argv[1], [0]
def dump(signum, frame):
    from minisched.observability.runtime import MemoryWatch, live_type_counts
    n[0] += 1
    MemoryWatch._snapshot().dump(os.path.join(dumps, f"{n[0]}.tracemalloc"))
    with open(os.path.join(dumps, f"{n[0]}.types.json"), "w") as f:
        json.dump(live_type_counts(), f)
    os.rename(os.path.join(dumps, f"{n[0]}.types.json"), os.path.join(dumps, f"{n[0]}.json"))
signal.signal(signal.SIGUSR2, dump)  # (minisched run logs its memory on SIGUSR1)
sys.argv = ["minisched", *sys.argv[2:]]
from minisched.cli import main
sys.exit(main())
"""


def _dump(proc: Any, dumps: Path, n: int, timeout: float = 120) -> None:
    """SIGUSR2 to the traced minisched, and wait for its n-th dump."""
    import signal

    proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + timeout
    while not (dumps / f"{n}.json").exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"minisched wrote no tracemalloc dump {n} within {timeout:g} s")
        time.sleep(0.5)


def _compare_dumps(dumps: Path) -> None:
    import collections
    import json
    import tracemalloc

    first, last = (tracemalloc.Snapshot.load(str(dumps / f"{n}.tracemalloc")) for n in (1, 2))
    print("\ntracemalloc in minisched, middle -> end, the lines that grew most:")
    for st in last.compare_to(first, "lineno")[:12]:
        frame = st.traceback[0]
        print(f"  {st.size_diff / 1024:+9.1f} KiB {st.count_diff:+7d} blocks  {frame.filename}:{frame.lineno}")
    a, b = (collections.Counter(json.loads((dumps / f"{n}.json").read_text())) for n in (1, 2))
    grown = {k: v for k, v in (b - a).items() if v > 0}
    print("minisched classes with more live instances at the end than at the middle:", grown or "none")


if __name__ == "__main__":
    sys.exit(main())
