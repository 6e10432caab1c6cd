"""The CPU `minisched run` spends before it can schedule (a benchmark, not a test).

Starts `python -m minisched.cli run --metrics-port N` and polls its /readyz until it answers 200
(informers synced, leadership known); then reads the process's CPU-seconds (user + system, from
/proc/<pid>/stat) and peak RSS (VmHWM), and stops it. Against the embedded cluster (`--embedded`)
and against a real control plane (etcd + kube-apiserver, no KWOK, no nodes: `--kubeconfig`), which
is started once and shared by every run. Also the import CPU alone: a fresh interpreter's
process_time() around `import minisched.app, minisched.cluster.real`.

Each tree's bytecode is compiled first, as `pip install` does: with PYTHONDONTWRITEBYTECODE set
(as in this project's sessions) and no __pycache__, every start compiles minisched's ~240 modules
from source, which doubled the import CPU measured here (0.9-1.0 CPU-s instead of 0.5-0.6).

    .venv/bin/python bench/startup_bench.py [--runs 5] [--minisched-tree DIR ...] [--no-real]

`--minisched-tree DIR` (repeatable) runs another checkout's minisched right after this one's, in
the same round: before/after figures under the same load. Needs the control-plane binaries for the
real runs (`make controlplane`); without them only the embedded runs are made.
"""

from __future__ import annotations

import argparse
import compileall
import http.client
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
IMPORT_PROBE = ("import time; t = time.process_time(); import minisched.app, minisched.cluster.real; "
                "print(time.process_time() - t)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def _ready(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except OSError:
        return False


def _cpu_and_peak(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    status = Path(f"/proc/{pid}/status").read_text()
    peak = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return cpu, peak / 1024


def run_to_ready(tree: Path, cluster_args: list[str], timeout: float = 120.0) -> dict[str, float]:
    """Start `minisched run` from `tree`, wait for /readyz, return its CPU-s and peak RSS at that moment."""
    port = _free_port()
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "minisched.cli", "run", *cluster_args, "--metrics-port", str(port)],
                            cwd=tree, env=_env(tree), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while not _ready(port):
            if proc.poll() is not None:
                raise RuntimeError(f"minisched run exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
            if time.monotonic() - started > timeout:
                raise RuntimeError("minisched run was not ready in time")
            time.sleep(0.02)
        wall = time.monotonic() - started
        cpu, peak = _cpu_and_peak(proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)
    return {"cpu_s": cpu, "wall_s": wall, "peak_rss_mib": peak}


def import_cpu(tree: Path) -> float:
    out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], cwd=tree, env=_env(tree), check=True,
                         capture_output=True, text=True).stdout
    return float(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="rounds; each round runs every tree once, interleaved")
    parser.add_argument("--minisched-tree", type=Path, action="append", default=[],
                        help="another checkout's minisched, run right after this one's in each round")
    parser.add_argument("--no-real", action="store_true", help="embedded cluster only")
    args = parser.parse_args(argv)
    trees = [HERE, *(t.resolve() for t in args.minisched_tree)]
    for tree in trees:
        if not (tree / "minisched" / "cli.py").is_file():
            parser.error(f"{tree}: no minisched/cli.py there")
    for tree in trees:
        compileall.compile_dir(tree / "minisched", quiet=1)  # writes __pycache__ whatever the environment says
    sys.path.insert(0, str(HERE))
    cp: Any = None
    if not args.no_real:
        from minisched.controlplane import BinariesNotFound, ControlPlane, ControlPlaneOptions, find_binaries

        try:
            find_binaries()
            cp = ControlPlane(ControlPlaneOptions(start_kwok=False, ready_timeout=120))
            cp.start()
        except BinariesNotFound as err:
            print(f"real control plane skipped: {err}")
    backends: dict[str, list[str]] = {"embedded": ["--embedded"]}
    if cp is not None:
        backends["real"] = ["--kubeconfig", str(Path(cp.kubeconfig).resolve())]
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; {args.runs} rounds, trees interleaved", flush=True)
    try:
        for round_ in range(args.runs):
            for backend, cluster_args in [("import", []), *backends.items()]:
                for tree in trees:
                    if backend == "import":
                        r = {"cpu_s": import_cpu(tree)}
                    else:
                        r = run_to_ready(tree, cluster_args)
                    results.setdefault((backend, str(tree)), []).append(r)
                    print(f"round {round_ + 1} {backend:<8} {tree}: "
                          + ", ".join(f"{k} {v:.3f}" for k, v in r.items()), flush=True)
    finally:
        if cp is not None:
            cp.stop()
    print(f"median (min-max) over {args.runs} rounds; load now {os.getloadavg()[0]:.1f}")
    for (backend, tree), rs in results.items():
        parts = []
        for key in rs[0]:
            values = [r[key] for r in rs]
            parts.append(f"{key} {statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})")
        print(f"  {backend:<8} {tree}: " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
