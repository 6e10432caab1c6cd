"""Side-by-side runs on a real control plane: one scheduler configuration for kube-scheduler and
minisched alike, one watch that observes every pod's scheduling, and a process's CPU and memory.

- `matched_scheduler_config(name)`: a KubeSchedulerConfiguration whose profile runs exactly
  minisched's default plugin set with kube's default weights (everything else disabled), with
  percentageOfNodesToScore 100 and client rate limits lifted. kube-scheduler takes it as --config,
  minisched as `Scheduler(config=...)` or `minisched run --config`.
- `PodObserver`: one list+watch over pods, kept by a thread. Per pod it records when it was seen
  created and bound (on the observer's clock), every binding (a pending->bound transition), any
  change of nodeName afterwards, nominatedNodeName values, Unschedulable conditions and phases; and
  it checks after every event that no node holds more requested resources than it can allocate.
- `process_usage(pid)`: CPU-seconds and peak RSS of a process from /proc (psutil is not needed).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from minisched.errors import Expired
from minisched.quantity import milli_value, value

Object = dict[str, Any]

# minisched's default plugins (framework/profile.py DEFAULT_MULTI_POINT) with kube's default weights.
MATCHED_PLUGINS: tuple[tuple[str, int], ...] = (
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
)


def matched_scheduler_config(
    scheduler_name: str, *, qps: int = 5000, burst: int = 5000, percentage_of_nodes_to_score: int = 100
) -> dict[str, Any]:
    """A KubeSchedulerConfiguration (v1) both schedulers accept, with one profile `scheduler_name`.

    multiPoint disables "*" and enables exactly MATCHED_PLUGINS, so both run the same plugins even
    where their defaults might differ."""
    if not 0 <= percentage_of_nodes_to_score <= 100:
        raise ValueError(f"percentage_of_nodes_to_score {percentage_of_nodes_to_score} must be 0..100")
    enabled = [{"name": n, "weight": w} if w else {"name": n} for n, w in MATCHED_PLUGINS]
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": percentage_of_nodes_to_score,
        "clientConnection": {"qps": qps, "burst": burst},
        "profiles": [
            {
                "schedulerName": scheduler_name,
                "plugins": {"multiPoint": {"enabled": enabled, "disabled": [{"name": "*"}]}},
            }
        ],
    }


# ---------------------------------------------------------------------------------------- resources


def pod_requests(pod: Object) -> dict[str, int]:
    """cpu (millicores), memory (bytes) and pods (1) a pod asks of its node: the sum of its
    containers, at least the largest init container, plus overhead (kube's resource.PodRequests)."""
    spec = pod.get("spec") or {}
    total: dict[str, int] = {"cpu": 0, "memory": 0}

    def add(into: dict[str, int], requests: Mapping[str, Any]) -> None:
        for name in ("cpu", "memory"):
            if name in requests:
                into[name] += milli_value(requests[name]) if name == "cpu" else value(requests[name])

    for c in spec.get("containers") or []:
        add(total, (c.get("resources") or {}).get("requests") or {})
    for c in spec.get("initContainers") or []:
        init: dict[str, int] = {"cpu": 0, "memory": 0}
        add(init, (c.get("resources") or {}).get("requests") or {})
        for k in total:
            total[k] = max(total[k], init[k])
    add(total, spec.get("overhead") or {})
    total["pods"] = 1
    return total


def node_allocatable(node: Object) -> dict[str, int]:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {
        "cpu": milli_value(alloc.get("cpu", 0)),
        "memory": value(alloc.get("memory", 0)),
        "pods": value(alloc.get("pods", 0)),
    }


# ---------------------------------------------------------------------------------------- the observer


@dataclass
class PodRecord:
    """What the observer saw of one pod (times on the observer's time.monotonic clock)."""

    key: str
    created: float  # when the observer first saw it
    creation_timestamp: str = ""
    node: str | None = None  # the first node it was seen bound to
    bound: float | None = None
    bindings: int = 0  # pending -> bound transitions seen (a second one would be a double binding)
    node_changes: list[str] = field(default_factory=list)  # nodeNames after the first (never expected)
    nominated: set[str] = field(default_factory=set)
    unschedulable: bool = False  # condition PodScheduled=False, reason Unschedulable, ever seen
    unschedulable_message: str = ""
    phase: str = ""
    deleted: bool = False
    terminating: bool = False
    priority: int = 0


@dataclass(frozen=True)
class Overcommit:
    node: str
    resource: str
    requested: int
    allocatable: int
    after: str  # the event that made it so, "<type> <pod key>"


class PodObserver:
    """Watches pods (optionally one namespace) and records their scheduling. Use as a context manager:

        with PodObserver(cluster, namespace="e2e", nodes=cluster.list("nodes")["items"]) as obs:
            ... create pods ...
            obs.wait_for(lambda o: o.bound_count() >= 100, timeout=60)
        assert not obs.overcommits

    `nodes` gives allocatables for the over-commit check (none given: no check). Pods that already
    exist when it starts are recorded from the initial list (their binding counts as one)."""

    def __init__(
        self,
        cluster: Any,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        nodes: Iterable[Object] = (),
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.label_selector = label_selector
        self.allocatable = {n["metadata"]["name"]: node_allocatable(n) for n in nodes}
        self.pods: dict[str, PodRecord] = {}
        self.overcommits: list[Overcommit] = []
        self.watch_restarts = 0
        self.events_seen = 0
        self._usage: dict[str, dict[str, int]] = {}
        self._counted: dict[str, tuple[str, dict[str, int]]] = {}  # pod key -> (node, requests)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._watch: Any = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._synced = threading.Event()

    # --- lifecycle

    def start(self, timeout: float = 30.0) -> PodObserver:
        self._thread = threading.Thread(target=self._run, name="pod-observer", daemon=True)
        self._thread.start()
        if not self._synced.wait(timeout):
            raise TimeoutError(f"pod observer did not finish its first list in {timeout:.0f}s: {self._error}")
        return self

    def stop(self) -> None:
        self._stop.set()
        w = self._watch
        if w is not None:
            w.stop()
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> PodObserver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- queries

    def wait_for(self, predicate: Callable[[PodObserver], bool], timeout: float, what: str = "") -> None:
        """Block until predicate(self) holds (checked after every event), or TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what or predicate}")
                self._cond.wait(min(left, 0.5))

    def record(self, key: str) -> PodRecord | None:
        with self._cond:
            return self.pods.get(key)

    def bound_count(self) -> int:
        with self._cond:  # the watch thread adds records meanwhile
            return sum(1 for r in self.pods.values() if r.bound is not None)

    def bound_times(self) -> list[float]:
        with self._cond:
            return sorted(r.bound for r in self.pods.values() if r.bound is not None)

    # --- the watch loop

    def _run(self) -> None:
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    listed = self.cluster.list(
                        "pods", self.namespace, label_selector=self.label_selector
                    )
                    with self._cond:
                        for pod in listed.get("items") or []:
                            self._apply("ADDED", pod, time.monotonic())
                        self._cond.notify_all()
                    rv = listed["metadata"]["resourceVersion"]
                    self._synced.set()
                self._watch = self.cluster.watch(
                    "pods", self.namespace, resource_version=rv, label_selector=self.label_selector,
                    allow_bookmarks=True, timeout_seconds=300,
                )
                for event in self._watch:
                    obj = event["object"]
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if event["type"] == "BOOKMARK":
                        continue
                    with self._cond:
                        self._apply(event["type"], obj, time.monotonic())
                        self._cond.notify_all()
                if not self._stop.is_set():
                    self.watch_restarts += 1
            except Expired:
                self.watch_restarts += 1
                rv = None  # relist; pods seen again are updated in place, not double counted
            except Exception as err:  # noqa: BLE001 - remembered, retried; a test sees it via error()
                self._error = err
                if self._stop.wait(0.5):
                    return

    @property
    def error(self) -> BaseException | None:
        return self._error

    def _apply(self, kind: str, pod: Object, now: float) -> None:
        self.events_seen += 1
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        rec = self.pods.get(key)
        if rec is None or (rec.deleted and kind == "ADDED"):
            rec = PodRecord(key, created=now, creation_timestamp=str(meta.get("creationTimestamp") or ""))
            self.pods[key] = rec
        rec.priority = int(spec.get("priority") or 0)
        node = spec.get("nodeName") or None
        if node and rec.node is None:
            rec.node, rec.bound, rec.bindings = node, now, rec.bindings + 1
        elif node and node != rec.node and (not rec.node_changes or rec.node_changes[-1] != node):
            rec.node_changes.append(node)
        nominated = status.get("nominatedNodeName")
        if nominated:
            rec.nominated.add(nominated)
        for c in status.get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
                rec.unschedulable = True
                rec.unschedulable_message = str(c.get("message") or "")
        rec.phase = str(status.get("phase") or rec.phase)
        rec.terminating = bool(meta.get("deletionTimestamp"))
        if kind == "DELETED":
            rec.deleted = True
        self._account(key, kind, node, pod)

    def _account(self, key: str, kind: str, node: str | None, pod: Object) -> None:
        """Keep per-node requested totals of live bound pods (terminating ones still count, as they
        do in kube-scheduler's cache) and note any node pushed past its allocatable."""
        phase = (pod.get("status") or {}).get("phase")
        live = kind != "DELETED" and node is not None and phase not in ("Succeeded", "Failed")
        previous = self._counted.pop(key, None)
        if previous is not None:
            usage = self._usage[previous[0]]
            for r, q in previous[1].items():
                usage[r] -= q
        if not live or node is None:
            return
        requests = previous[1] if previous is not None and previous[0] == node else pod_requests(pod)
        self._counted[key] = (node, requests)
        usage = self._usage.setdefault(node, {"cpu": 0, "memory": 0, "pods": 0})
        for r, q in requests.items():
            usage[r] += q
        alloc = self.allocatable.get(node)
        if alloc is None:
            return
        for r, q in usage.items():
            if q > alloc.get(r, 0):
                self.overcommits.append(Overcommit(node, r, q, alloc.get(r, 0), f"{kind} {key}"))


# ---------------------------------------------------------------------------------------- process usage


@dataclass(frozen=True)
class ProcessUsage:
    cpu_seconds: float  # user + system, the process and its reaped children
    peak_rss_bytes: int  # VmHWM


def process_usage(pid: int) -> ProcessUsage:
    """CPU-seconds and peak resident memory of a live process, from /proc/<pid>/stat and status."""
    with open(f"/proc/{pid}/stat") as fh:
        stat = fh.read()
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = os.sysconf("SC_CLK_TCK")
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    peak = 0
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
                break
    return ProcessUsage((utime + stime + cutime + cstime) / ticks, peak)


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU-seconds of a live process's threads by name (/proc/<pid>/task/<tid>/comm), threads of
    one pool summed: a name ending in -<number> ("bind-12") counts as "<name>-*". Threads that
    already exited are in the process's total only.

    Each thread's time on a CPU is read from its schedstat (nanoseconds, exact) where the kernel
    keeps one: a thread's utime + stime in its stat are sampled at clock ticks, and for threads that
    run in bursts of tens of µs (binding workers) they summed to 55-65% of it here, while the
    process's own stat (scaled by the kernel to the exact total) matched the schedstats' sum."""
    ticks = os.sysconf("SC_CLK_TCK")
    by_name: dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return by_name
    for tid in tids:
        task = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{task}/comm") as fh:
                name = fh.read().strip()
            try:
                with open(f"{task}/schedstat") as fh:
                    seconds = int(fh.read().split()[0]) / 1e9
            except FileNotFoundError:  # a kernel without CONFIG_SCHED_INFO
                with open(f"{task}/stat") as fh:
                    stat = fh.read()
                fields = stat[stat.rindex(")") + 2 :].split()
                seconds = (int(fields[11]) + int(fields[12])) / ticks
        except OSError:  # ended meanwhile
            continue
        stem, dash, number = name.rpartition("-")
        if dash and number.isdigit():
            name = f"{stem}-*"
        by_name[name] = by_name.get(name, 0.0) + seconds
    return by_name


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    data = sorted(values)
    idx = min(len(data) - 1, max(0, int(round(q / 100 * (len(data) - 1)))))
    return data[idx]


def per_second(times: list[float], start: float, end: float) -> list[int]:
    """How many of `times` fall in each whole second from `start` to `end` (the last may be partial)."""
    seconds = max(1, int(end - start + 0.999))
    buckets = [0] * seconds
    for t in times:
        i = int(t - start)
        if 0 <= i < seconds:
            buckets[i] += 1
    return buckets


__all__ = [
    "MATCHED_PLUGINS",
    "Overcommit",
    "PodObserver",
    "PodRecord",
    "ProcessUsage",
    "matched_scheduler_config",
    "node_allocatable",
    "per_second",
    "percentile",
    "pod_requests",
    "process_usage",
]
