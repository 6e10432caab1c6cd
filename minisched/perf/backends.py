"""The schedulers a scheduler_perf workload runs against.

- `EmbeddedMinisched`: minisched in this process on a fresh EmbeddedCluster (nodes are created
  Ready; nothing plays kubelet, as in scheduler_perf). CPU and RSS are this whole process's: the
  driver, the cluster and the scheduler share the interpreter.
- `RealScheduler`: minisched or kube-scheduler on a real control plane (etcd + kube-apiserver,
  no KWOK: nodes created Ready as scheduler_perf does). minisched runs as its own process
  (`minisched run --config`) or, for tests, in this process; kube-scheduler always as its own
  process. Both get `perf_scheduler_config`: one profile, the same plugin set with kube's weights,
  percentageOfNodesToScore 100 (or left out: each scheduler's default, the same adaptive rule) and
  client QPS/burst 5000.

`stop_scheduler()` stops the scheduler alone and `start()` runs a fresh one on the same cluster: the
driver's backlog mode creates the measured pods in between. Peak RSS is the highest of every
scheduler process a run started.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from minisched.cluster.base import Cluster
from minisched.controlplane.observe import ProcessUsage, matched_scheduler_config, process_usage
from minisched.perf.measure import CpuSource

SCHEDULER_NAME = "scheduler-perf"


def perf_scheduler_config(scheduler_name: str = SCHEDULER_NAME,
                          percentage_of_nodes_to_score: int | None = 100) -> dict[str, Any]:
    """observe.matched_scheduler_config, plus InterPodAffinity (weight 2, kube's place in the
    default profile) when minisched's registry has it, so both schedulers run the same set.

    percentage_of_nodes_to_score None leaves the field out: each scheduler's default, kube's
    adaptive rule (50% less 1% per 125 nodes, at least 5%, at least 100 nodes), which minisched
    implements the same way (framework.algorithm.num_feasible_nodes_to_find)."""
    from minisched.scheduler.plugins import in_tree_registry

    config = matched_scheduler_config(scheduler_name, percentage_of_nodes_to_score=percentage_of_nodes_to_score or 0)
    if percentage_of_nodes_to_score is None:
        del config["percentageOfNodesToScore"]
    enabled = config["profiles"][0]["plugins"]["multiPoint"]["enabled"]
    if "InterPodAffinity" in in_tree_registry() and not any(p["name"] == "InterPodAffinity" for p in enabled):
        at = next(i for i, p in enumerate(enabled) if p["name"] == "PodTopologySpread") + 1
        enabled.insert(at, {"name": "InterPodAffinity", "weight": 2})
    return config


def has_inter_pod_affinity() -> bool:
    from minisched.scheduler.plugins import in_tree_registry

    return "InterPodAffinity" in in_tree_registry()


class EmbeddedMinisched:
    label = "minisched/embedded"
    create_workers = 1
    usage_note = "whole process (driver + embedded cluster + scheduler)"

    def __init__(self, scheduler_name: str = SCHEDULER_NAME, bind_workers: int = 8,
                 percentage_of_nodes_to_score: int | None = 100) -> None:
        from minisched.cluster.embedded import EmbeddedCluster

        self.scheduler_name = scheduler_name
        self.cluster: Cluster = EmbeddedCluster()
        self._bind_workers = bind_workers
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._scheduler: Any = None

    def start(self) -> None:
        from minisched.scheduler.scheduler import Scheduler

        config = perf_scheduler_config(self.scheduler_name, self.percentage_of_nodes_to_score)
        self._scheduler = Scheduler(self.cluster, config=config, bind_workers=self._bind_workers)
        self._scheduler.start()

    def stop_scheduler(self) -> None:
        if self._scheduler is not None:
            self._scheduler.stop()
            self._scheduler = None

    def stop(self) -> None:
        self.stop_scheduler()
        self.cluster.close()

    def usage(self) -> ProcessUsage | None:
        return process_usage(os.getpid())

    def cpu_sources(self) -> dict[str, CpuSource]:
        return {"scheduler": time.process_time}  # one process: driver, cluster and scheduler


class RealScheduler:
    """`which` is "minisched" or "kube-scheduler". Give a control plane (`cp`, its kubeconfig is
    used to start the scheduler) or, with in_process minisched, just a cluster."""

    create_workers = 16

    def __init__(self, which: str, cluster: Cluster, cp: Any = None, *, in_process: bool = False,
                 scheduler_name: str = SCHEDULER_NAME, bind_workers: int = 64,
                 percentage_of_nodes_to_score: int | None = 100, source_tree: Path | None = None) -> None:
        if which not in ("minisched", "kube-scheduler"):
            raise ValueError(f"unknown scheduler {which!r}: minisched or kube-scheduler")
        if cp is None and not (which == "minisched" and in_process):
            raise ValueError(f"{which} as a process needs the control plane (cp)")
        if source_tree is not None and (which != "minisched" or in_process):
            raise ValueError("source_tree is for minisched as its own process")
        if source_tree is not None and not (source_tree / "minisched" / "cli.py").is_file():
            raise ValueError(f"source_tree {source_tree}: no minisched/cli.py there")
        self.which = which
        self.source_tree = source_tree
        self.cluster = cluster
        self.cp = cp
        self.in_process = in_process
        self.scheduler_name = scheduler_name
        self.bind_workers = bind_workers
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._peak_rss = 0  # of the scheduler processes stopped so far
        self.label = f"{which}/real" + (" (in process)" if in_process else "") + \
            (f" from {source_tree}" if source_tree is not None else "")
        self.usage_note = ("whole process (driver + scheduler)" if in_process
                           else f"the {which} process alone")
        self._pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._scheduler: Any = None

    def start(self) -> None:
        config = perf_scheduler_config(self.scheduler_name, self.percentage_of_nodes_to_score)
        if self.which == "kube-scheduler":
            proc = self.cp.start_scheduler(config, name="kube-scheduler")
            self._pid = proc.pid
            _wait_kube_ready(proc.port)
            return
        if self.in_process:
            from minisched.scheduler.scheduler import Scheduler

            self._scheduler = Scheduler(self.cluster, config=config, bind_workers=self.bind_workers)
            self._scheduler.start()
            self._pid = os.getpid()
            return
        from minisched.controlplane.processes import free_port

        cfg = self.cp.work_dir / "minisched-perf-config.yaml"
        cfg.write_text(yaml.safe_dump(config))
        port = free_port()
        self._log = open(self.cp.log_dir / "minisched.log", "ab")  # noqa: SIM115 - closed in stop()
        cwd, env = minisched_process_tree(self.source_tree)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "minisched.cli", "run", "--kubeconfig", str(Path(self.cp.kubeconfig).resolve()),
             "--config", str(cfg.resolve()), "--bind-workers", str(self.bind_workers), "--metrics-port", str(port)],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        self._pid = self._proc.pid
        _wait_ready(self._proc, port, self.cp.log_dir / "minisched.log")

    def stop_scheduler(self) -> None:
        if self._pid is not None and not self.in_process:
            with contextlib.suppress(OSError):
                self._peak_rss = max(self._peak_rss, process_usage(self._pid).peak_rss_bytes)
        if self._scheduler is not None:
            self._scheduler.stop()
            self._scheduler = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.which == "kube-scheduler" and self.cp is not None and self._pid is not None:
            self.cp.stop_component("kube-scheduler")
        self._pid = None

    def stop(self) -> None:
        self.stop_scheduler()

    def usage(self) -> ProcessUsage | None:
        if self._pid is None:
            return None
        usage = process_usage(self._pid)
        return ProcessUsage(usage.cpu_seconds, max(usage.peak_rss_bytes, self._peak_rss))

    def cpu_sources(self) -> dict[str, CpuSource]:
        def scheduler() -> float | None:
            pid = self._pid
            return process_usage(pid).cpu_seconds if pid is not None else None

        sources: dict[str, CpuSource] = {"scheduler": scheduler}
        if self.in_process:
            return {"scheduler": time.process_time}
        sources["bench"] = time.process_time  # the driver and its watch observer
        for name, proc in (self.cp.processes.items() if self.cp is not None else ()):
            if name in ("kube-apiserver", "etcd"):
                sources[name] = _pid_cpu(proc.pid)
        return sources


def minisched_process_tree(source_tree: Path | None) -> tuple[Path | None, dict[str, str] | None]:
    """The working directory and environment for a `python -m minisched.cli` subprocess that runs
    another checkout's scheduler (before/after figures); (None, None) for this one's. It runs from
    inside that tree too: `python -m` puts the working directory first on sys.path, so PYTHONPATH
    alone would still run this checkout's code."""
    if source_tree is None:
        return None, None
    if not (source_tree / "minisched" / "cli.py").is_file():
        raise ValueError(f"source_tree {source_tree}: no minisched/cli.py there")
    cwd = source_tree.resolve()
    return cwd, {**os.environ, "PYTHONPATH": str(cwd)}


def _pid_cpu(pid: int) -> CpuSource:
    return lambda: process_usage(pid).cpu_seconds


def _wait_kube_ready(port: int, timeout: float = 120.0) -> None:
    """Until kube-scheduler's /readyz answers 200: its informers synced and its event handlers
    (sched-handler-sync) ran, as minisched's /readyz means (start_scheduler waits for /healthz only)."""
    import http.client
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # its self-signed certificate, on loopback
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"kube-scheduler not ready (/readyz) after {timeout:.0f}s")


def _wait_ready(proc: subprocess.Popen[bytes], port: int, log: Any, timeout: float = 120.0) -> None:
    """Until minisched's /readyz answers 200 (its informers have synced)."""
    import http.client

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"minisched exited with {proc.returncode} before it was ready; see {log}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"minisched not ready after {timeout:.0f}s; see {log}")
