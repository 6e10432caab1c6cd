"""What limited a measured rate: the scheduler, the driver that created the pods, or the machine's cores.

- `CpuSampler` samples the CPU-seconds of named processes (the scheduler, kube-apiserver, etcd,
  the bench itself) and of the whole machine (/proc/stat) from a thread of its own, so that the
  CPU spent over any window (the drain, from its first binding to its last) can be read afterwards.
- `kept_pace` says whether a scheduler bound pods as fast as the driver created them: then the
  printed rate is the driver's, a lower bound on the scheduler's.
- `drain_limit` names what bounded a drain: both cores busy, or the scheduler itself.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

CpuSource = Callable[[], float | None]  # CPU-seconds so far, None once the process is gone
MACHINE = "machine"  # the sampler's series for every process on the machine (/proc/stat)
# Above this share of every core busy the cores, not a scheduler, bound the rate.
CORES_BUSY = 0.85


def machine_cpu_seconds() -> float:
    """Busy CPU-seconds of all processes since boot (/proc/stat: all time but idle and iowait)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is already counted in user and nice
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class CpuSampler:
    """Every `interval` seconds, (time.monotonic(), CPU-seconds) of each source and of the machine.

    Use as a context manager around the work; then `cpu_between(name, t0, t1)` interpolates."""

    def __init__(self, sources: Mapping[str, CpuSource], interval: float = 0.25) -> None:
        if MACHINE in sources:
            raise ValueError(f"source name {MACHINE!r} is the sampler's own")
        self.sources: dict[str, CpuSource] = {**sources, MACHINE: machine_cpu_seconds}
        self.interval = interval
        self.series: dict[str, list[tuple[float, float]]] = {name: [] for name in self.sources}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def __enter__(self) -> CpuSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        now = time.monotonic()
        for name, source in self.sources.items():
            try:
                value = source()
            except OSError:  # the process exited between two samples
                value = None
            if value is not None:
                self.series[name].append((now, value))

    def cpu_between(self, name: str, start: float, end: float) -> float | None:
        """CPU-seconds `name` spent from `start` to `end`, linearly interpolated between samples;
        None when the samples do not cover the window."""
        points = self.series.get(name) or []
        if len(points) < 2 or start < points[0][0] or end > points[-1][0] or end < start:
            return None
        return _at(points, end) - _at(points, start)


def _at(points: list[tuple[float, float]], t: float) -> float:
    i = bisect.bisect_left(points, (t, float("-inf")))
    if i < len(points) and points[i][0] == t:
        return points[i][1]
    (t0, v0), (t1, v1) = points[max(0, i - 1)], points[min(i, len(points) - 1)]
    return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def kept_pace(created_end: float, last_bind: float, create_seconds: float) -> bool:
    """Whether the scheduler kept up with the driver: its last binding came within a second (or a
    tenth of the creating time) of the last pod's creation, so pods never queued for long."""
    return last_bind - created_end <= max(1.0, 0.1 * create_seconds)


@dataclass(frozen=True)
class DrainCpu:
    """CPU-seconds over a drain's window, by process; `machine` is every process's together."""

    window_seconds: float
    by_process: Mapping[str, float]
    machine: float
    cores: int

    def cores_used(self, name: str) -> float:
        return self.by_process.get(name, 0.0) / self.window_seconds if self.window_seconds > 0 else 0.0

    @property
    def machine_busy(self) -> float:
        """The share of every core that was busy over the window (0..1)."""
        return self.machine / self.window_seconds / self.cores if self.window_seconds > 0 else 0.0

    @property
    def others(self) -> float:
        """CPU-seconds of processes not sampled by name (other work on a shared machine)."""
        return max(0.0, self.machine - sum(self.by_process.values()))


def drain_limit(cpu: DrainCpu | None, scheduler: str = "scheduler") -> str:
    """What bounded a backlog drain, in a few words: the cores (every one busy: the scheduler,
    the API server and whatever else runs shared them) or the scheduler (cores to spare)."""
    if cpu is None or cpu.window_seconds <= 0:
        return "scheduler (window too short to sample CPU)"
    used = cpu.cores_used(scheduler)
    if cpu.machine_busy >= CORES_BUSY:
        server = (cpu.by_process.get("kube-apiserver", 0.0) + cpu.by_process.get("etcd", 0.0)) / cpu.window_seconds
        return (f"cores: {cpu.machine_busy:.0%} of {cpu.cores} busy (scheduler {used:.2f}, "
                f"API server + etcd {server:.2f}, other processes {cpu.others / cpu.window_seconds:.2f})")
    return f"scheduler: {used:.2f} cores of its own, machine {cpu.machine_busy:.0%} busy"
