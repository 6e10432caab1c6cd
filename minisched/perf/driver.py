"""Runs one scheduler_perf workload against a cluster and a scheduler, and measures it as
scheduler_perf does.

The ops are kube's (test/integration/scheduler_perf/scheduler_perf.go): createNodes, createNamespaces,
createPods, createAny, barrier, sleep, churn, deletePods. What this driver cannot run (an opcode or
an option) is listed in `WorkloadResult.unsupported` with the reason, and the op (or the option) is
left out; nothing is skipped silently. featureGates are reported and ignored: minisched has no
feature gates, and kube-scheduler here runs with its release defaults.

Adaptations, each because our API servers keep admission that kube's harness switches off:
- kube's harness disables the Priority admission plugin and its templates set `spec.priority`
  directly; both our backends keep Priority admission (which refuses that), so a pod asking for
  priority N gets `priorityClassName: scheduler-perf-priority-N`, a PriorityClass of value N the
  driver creates: the same priority, reached the admitted way.
- every pod gets `spec.schedulerName` of the scheduler under test.
- a node template without `status.allocatable` gets its capacity there, as the API server's
  defaulting does on create (the embedded cluster does not default it).

Two modes for the measured createPods op (`collectMetrics`):
- "backlog": the scheduler is stopped (`Backend.stop_scheduler`), every measured pod created, and a
  fresh scheduler started; the rate runs from its readiness (informers synced) to its last
  binding, so it is the
  scheduler's, never the driver's creation rate. CPU is sampled by process (and the whole machine)
  over that window, and `Throughput.limit` says whether every core was busy or the scheduler had
  cores to spare (measure.drain_limit).
- "arrival" (kube's own way): pods are created while the scheduler runs; when it kept pace with the
  driver (`Throughput.kept_pace`), the rate is the driver's and `limit` says so.

Measured as scheduler_perf's throughputCollector: from the start of a createPods op with
collectMetrics, 1-second ticks count the op's pods seen bound; the first tick with any bound pod
only starts the clock, a tick that saw no new pod is merged into the next, and each sample is
(new pods) / (time since the last sample). Average, p50 and p99 are over those samples, with
kube's nearest-rank percentiles. Here the ticks are replayed afterwards over the observer's bind
times, so sampling never competes with the scheduler for the interpreter.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from minisched.cluster.base import Cluster
from minisched.controlplane.observe import PodObserver, ProcessUsage, node_allocatable
from minisched.errors import AlreadyExists, ApiError, Forbidden, NotFound
from minisched.perf.checks import placement_violations
from minisched.perf.measure import CpuSampler, CpuSource, DrainCpu, drain_limit, kept_pace
from minisched.perf.workloads import Workload, is_indexed, load_template
from minisched.resources import NAMESPACES, NODES, PODS, PRIORITY_CLASSES, Resource, resolve

Object = dict[str, Any]
PRIORITY_CLASS_PREFIX = "scheduler-perf-priority-"
DEFAULT_NODE_TEMPLATE = "../templates/node-default.yaml"
DEFAULT_POD_TEMPLATE = "../templates/pod-default.yaml"
MODES = ("backlog", "arrival")  # how a measured createPods op is timed: see Throughput.mode
PRIORITY_CLASS_WAIT = 10.0  # seconds a pod may be refused for a PriorityClass the driver just made

# opcode -> the options this driver runs; any other option of a known opcode is listed unsupported.
SUPPORTED_OPTIONS: dict[str, frozenset[str]] = {
    "createNodes": frozenset({"count", "nodeTemplatePath", "uniqueNodeLabelStrategy", "labelNodePrepareStrategy"}),
    "createNamespaces": frozenset({"prefix", "count", "namespaceTemplatePath"}),
    "createPods": frozenset({"count", "podTemplatePath", "namespace", "collectMetrics", "skipWaitToCompletion"}),
    "createAny": frozenset({"templatePath", "namespace", "count"}),
    "barrier": frozenset({"namespaces"}),
    "sleep": frozenset({"duration"}),
    "churn": frozenset({"mode", "number", "templatePaths", "intervalMilliseconds", "namespace"}),
    "deletePods": frozenset({"namespace", "labelSelector", "deletePodsPerSecond", "skipWaitToCompletion"}),
}
# Why an opcode or option is not run (the rest: "not implemented by this driver yet").
UNSUPPORTED_REASONS: dict[str, str] = {
    "nodeAllocatableStrategy": "needs CSINode objects with per-driver allocatable counts; not implemented",
    "steadyState": "steady-state pod creation (keep N pods, replace deleted ones) is not implemented",
    "duration": "only with steadyState, which is not implemented",
    "persistentVolumeTemplatePath": "per-pod PV/PVC creation is not implemented",
    "persistentVolumeClaimTemplatePath": "per-pod PV/PVC creation is not implemented",
    "createResourceClaims": "DRA: minisched's DynamicResources refuses pods with claims",
    "createResourceDriver": "DRA: minisched's DynamicResources refuses pods with claims",
    "allocResourceClaims": "DRA: minisched's DynamicResources refuses pods with claims",
    "createPodSets": "not implemented by this driver yet (createPods in count namespaces namespacePrefix-<i>)",
    "updateAny": "not implemented by this driver yet",
    "startCollectingMetrics": "not implemented by this driver yet (createPods collectMetrics is)",
    "stopCollectingMetrics": "not implemented by this driver yet (createPods collectMetrics is)",
}


@dataclass(frozen=True)
class Unsupported:
    op_index: int
    opcode: str
    what: str  # the opcode itself, or "opcode.option"
    reason: str

    def __str__(self) -> str:
        return f"op {self.op_index} {self.what}: {self.reason}"


def unsupported_parts(workload: Workload) -> list[Unsupported]:
    """Every op or option of `workload` this driver leaves out, with why."""
    found = []
    for i, op in enumerate(workload.ops):
        opcode = str(op["opcode"])
        if opcode not in SUPPORTED_OPTIONS:
            reason = UNSUPPORTED_REASONS.get(opcode, "not implemented by this driver yet")
            found.append(Unsupported(i, opcode, opcode, reason))
            continue
        for option in sorted(set(op) - SUPPORTED_OPTIONS[opcode] - {"opcode"}):
            if option == "durationParam":
                option = "duration"
            if opcode == "sleep" and option == "duration":
                continue
            reason = UNSUPPORTED_REASONS.get(option, "option not implemented by this driver yet")
            found.append(Unsupported(i, opcode, f"{opcode}.{option}", reason))
    return found


# ---------------------------------------------------------------------------------------- backends


class Backend(Protocol):
    """A scheduler under test and the cluster it schedules on."""

    label: str
    scheduler_name: str
    cluster: Cluster
    create_workers: int  # threads creating objects (1 in process: the GIL makes more pointless)
    usage_note: str  # what `usage()` measures

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def stop_scheduler(self) -> None:
        """Stop the scheduler and leave the cluster up: `start()` runs a fresh one (backlog mode)."""
        ...

    def usage(self) -> ProcessUsage | None: ...

    def cpu_sources(self) -> dict[str, CpuSource]:
        """CPU-seconds readers of the processes to account a drain to: "scheduler" and any of the
        control plane's ("kube-apiserver", "etcd")."""
        ...


# ---------------------------------------------------------------------------------------- results


@dataclass
class Throughput:
    samples: list[float]
    pods: int
    seconds: float  # op start to the last bind of its pods
    create_seconds: float = 0.0  # how long creating the op's pods took (the driver's own client)
    # each pod's time from its creation to its binding, both as the observer's watch saw them: the
    # scheduler's own latency, whatever rate the driver creates pods at (p50, p99, seconds)
    latency_p50: float | None = None
    latency_p99: float | None = None
    # "backlog": every measured pod created before the scheduler started, rate from its first
    # binding to its last (the scheduler's); "arrival": created while it runs (kube's way)
    mode: str = "arrival"
    kept_pace: bool | None = None  # arrival: the scheduler bound as fast as the driver created
    start_to_ready: float | None = None  # backlog: scheduler start to ready (/readyz: informers synced)
    start_to_first_bind: float | None = None  # backlog: scheduler start to its first binding
    cpu: DrainCpu | None = None  # backlog: CPU over the drain, by process
    limit: str = ""  # what bounded the rate, in a few words

    @property
    def scheduler_limited(self) -> bool:
        """Whether the printed rate is the scheduler's (not the driver's creation rate)."""
        return self.mode == "backlog" or self.kept_pace is False

    @property
    def average(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None

    def percentile(self, q: int) -> float | None:
        if not self.samples:
            return None
        return _nearest_rank(sorted(self.samples), q)

    def set_latencies(self, seconds: Iterable[float]) -> None:
        data = sorted(seconds)
        if data:
            self.latency_p50, self.latency_p99 = _nearest_rank(data, 50), _nearest_rank(data, 99)

    @property
    def overall(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else 0.0


@dataclass
class WorkloadResult:
    workload: str
    backend: str
    threshold: float | None
    feature_gates: dict[str, bool]
    unsupported: list[Unsupported] = field(default_factory=list)
    adaptations: list[str] = field(default_factory=list)
    throughput: list[Throughput] = field(default_factory=list)  # one per collectMetrics op
    unscheduled: list[str] = field(default_factory=list)  # pods waited for and never bound
    overcommits: list[str] = field(default_factory=list)
    double_bindings: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)  # hard constraints broken (checks.py)
    pods_created: int = 0
    nodes_created: int = 0
    cpu_seconds_per_1000_pods: float | None = None
    peak_rss_bytes: int | None = None
    usage_note: str = ""
    wall_seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return (self.error is None and not self.unscheduled and not self.overcommits
                and not self.double_bindings and not self.violations)

    def problems(self) -> str:
        parts = []
        if self.error:
            parts.append(f"error: {self.error}")
        if self.unscheduled:
            parts.append(f"{len(self.unscheduled)} pods never scheduled, e.g. {self.unscheduled[:5]}")
        if self.overcommits:
            parts.append(f"over-commits: {self.overcommits[:5]}")
        if self.double_bindings:
            parts.append(f"pods bound twice or moved: {self.double_bindings[:5]}")
        if self.violations:
            parts.append(f"{len(self.violations)} placements break hard constraints, e.g. {self.violations[:3]}")
        return "; ".join(parts) or "ok"


def _nearest_rank(data: list[float], q: int) -> float:
    """kube's percentile of sorted `data`: the value at rank ceil(n * q / 100)."""
    return data[max(0, math.ceil(len(data) * q / 100) - 1)]


def replay_throughput(bind_times: Iterable[float], start: float, interval: float = 1.0) -> list[float]:
    """scheduler_perf's throughputCollector samples, replayed from bind times (same clock as start)."""
    times = sorted(bind_times)
    if not times:
        return []
    samples: list[float] = []
    ticks = max(1, math.ceil((times[-1] - start) / interval))
    i = 0
    started = False
    last_count = 0
    last_time = start
    skipped = 0
    for k in range(1, ticks + 1):
        now = start + k * interval
        while i < len(times) and times[i] <= now:
            i += 1
        if i == 0:
            continue
        if not started:  # the first sample is skipped: it straddles the creation of the pods
            started, last_count, last_time = True, i, now
            continue
        new = i - last_count
        if new == 0:
            skipped += 1
            continue
        rate = new / (now - last_time)
        samples.extend([rate] * (skipped + 1))
        last_count, last_time, skipped = i, now, 0
    return samples


# ---------------------------------------------------------------------------------------- the executor


class WorkloadTimeout(Exception):
    pass


class _Churn:
    """The churn op: every interval, create (mode create) or delete-and-recreate (mode recreate)
    one object per template, until the workload ends (kube's runChurnOp)."""

    def __init__(self, executor: Executor, op_index: int, op: Object) -> None:
        self.ex = executor
        self.mode = op.get("mode")
        if self.mode not in ("create", "recreate"):
            raise ValueError(f"op {op_index} churn: mode {self.mode!r} is neither create nor recreate")
        self.number = int(op.get("number") or 0)
        if self.mode == "recreate" and self.number < 1:
            raise ValueError(f"op {op_index} churn: recreate needs number >= 1")
        self.interval = (op.get("intervalMilliseconds") or 500) / 1000
        self.namespace = op.get("namespace") or f"namespace-{op_index}"
        self.templates = [executor.workload.template_path(p) for p in op.get("templatePaths") or []]
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, name=f"churn-{op_index}", daemon=True)

    def start(self) -> None:
        self.ex.ensure_namespace(self.namespace)
        self.thread.start()

    def _one(self, path: Path, name: str) -> str:
        obj = load_template(path)
        resource = resolve(str(obj["kind"]).lower())
        ns = self.namespace if resource.namespaced else None
        try:
            if name:
                self.ex.cluster.delete(resource, name, ns)
                return ""
            return self.ex.create_object(resource, obj, ns)
        except ApiError as err:
            self.errors.append(f"{resource.plural}: {err}")
            return ""

    def _run(self) -> None:
        slots: list[list[str]] = [[""] * max(1, self.number) for _ in self.templates]
        count = 0
        while not self.stop.wait(self.interval):
            if self.mode == "create" and self.number and count >= self.number:
                return
            for t, path in enumerate(self.templates):
                if self.mode == "create":
                    self._one(path, "")
                else:
                    slot = count % self.number
                    slots[t][slot] = self._one(path, slots[t][slot])
            count += 1


class Executor:
    """Runs one workload's ops on `backend.cluster` while `backend`'s scheduler runs."""

    def __init__(self, workload: Workload, backend: Backend, *, wait_timeout: float | None = None,
                 log: Callable[[str], None] | None = None, mode: str = "arrival") -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
        self.mode = mode
        self.workload = workload
        self.backend = backend
        self.cluster = backend.cluster
        self.scheduler_name = backend.scheduler_name
        self.wait_timeout = wait_timeout
        self.log = log or (lambda _msg: None)
        self.result = WorkloadResult(workload.full_name, backend.label, workload.threshold,
                                     dict(workload.feature_gates), unsupported_parts(workload))
        self._namespaces: set[str] = set()
        self._priority_classes: set[int] = set()
        self._pending_barrier: dict[str, set[str]] = {}  # namespace -> pods created without waiting
        self._churns: list[_Churn] = []
        self._lock = threading.Lock()
        self._priority_lock = threading.Lock()
        self.observer: PodObserver | None = None

    # --- objects

    def ensure_namespace(self, name: str, template: Object | None = None) -> None:
        if name in self._namespaces:
            return
        obj = dict(template or {"apiVersion": "v1", "kind": "Namespace"})
        obj["metadata"] = {**(obj.get("metadata") or {}), "name": name}
        obj["metadata"].pop("generateName", None)
        with contextlib.suppress(AlreadyExists):
            self.cluster.create(NAMESPACES, obj)
        self._namespaces.add(name)

    def _priority_class(self, value: int) -> str:
        name = f"{PRIORITY_CLASS_PREFIX}{value}"
        # held while creating: a creator thread that finds the value known must find the class made
        # (with 16 creator threads, one pod reached the API server before its class: 403)
        with self._priority_lock:
            if value in self._priority_classes:
                return name
            with contextlib.suppress(AlreadyExists):
                self.cluster.create(PRIORITY_CLASSES, {
                    "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                    "value": value, "description": "scheduler_perf pods that set spec.priority directly"})
            self._priority_classes.add(value)
        self._adapt(f"spec.priority {value} -> priorityClassName {name} (Priority admission stays on)")
        return name

    def _adapt(self, note: str) -> None:
        with self._lock:
            if note not in self.result.adaptations:
                self.result.adaptations.append(note)

    def prepare(self, resource: Resource, obj: Object) -> Object:
        """What a template becomes before it is created (see the module docstring)."""
        if resource == PODS:
            spec = obj.setdefault("spec", {})
            spec["schedulerName"] = self.scheduler_name
            if spec.get("priority") is not None and not spec.get("priorityClassName"):
                spec["priorityClassName"] = self._priority_class(int(spec.pop("priority")))
        elif resource == NODES:
            status = obj.setdefault("status", {})
            if status.get("capacity") and not status.get("allocatable"):
                status["allocatable"] = dict(status["capacity"])
        return obj

    def create_object(self, resource: Resource, obj: Object, namespace: str | None) -> str:
        prepared = self.prepare(resource, obj)
        # A taken generated name is retried by the API server (both backends: RetryGenerateName),
        # so AlreadyExists here is final.
        admitted_by = time.monotonic() + PRIORITY_CLASS_WAIT
        while True:
            try:
                created = self.cluster.create(resource, prepared, namespace)
                break
            except Forbidden as err:
                # kube-apiserver's Priority admission reads PriorityClasses from its informer: a
                # class created a moment ago may not be there yet ("no PriorityClass with name")
                if "PriorityClass" not in str(err) or time.monotonic() > admitted_by:
                    raise
                time.sleep(0.2)
        if resource == NODES:
            with self._lock:
                self.result.nodes_created += 1
            if self.observer is not None:
                self.observer.allocatable[created["metadata"]["name"]] = node_allocatable(created)
        elif resource == PODS:
            with self._lock:
                self.result.pods_created += 1
        return str(created["metadata"]["name"])

    def _create_many(self, resource: Resource, path: Path, count: int, namespace: str | None,
                     mutate: Callable[[int, Object], None] | None = None) -> list[str]:
        indexed = is_indexed(path)
        base = None if indexed else load_template(path)

        def one(i: int) -> str:
            obj = load_template(path, i, count) if base is None else _deep_copy(base)
            if mutate is not None:
                mutate(i, obj)
            return self.create_object(resource, obj, namespace)

        workers = max(1, self.backend.create_workers)
        if workers == 1 or count < 8:
            return [one(i) for i in range(count)]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(one, range(count)))

    # --- waiting

    def _wait_bound(self, keys: set[str], what: str, count_hint: int) -> None:
        assert self.observer is not None
        remaining = set(keys)
        # generous: preemption workloads run at a few pods/s on a loaded 2-core machine
        timeout = self.wait_timeout if self.wait_timeout is not None else 120 + count_hint / 4

        def done(o: PodObserver) -> bool:
            for k in [k for k in remaining if (r := o.pods.get(k)) is not None and r.bound is not None]:
                remaining.discard(k)
            return not remaining

        try:
            # bind times are the observer's own, so checking every 0.2 s makes none of them late
            self.observer.wait_for(_every(0.2, done), timeout, what)
        except TimeoutError as err:
            done(self.observer)
            self.result.unscheduled.extend(sorted(remaining))
            bound = len(keys) - len(remaining)
            pace = (f"; {bound} bound at {bound / timeout:.1f} pods/s, so the rest needed ~"
                    f"{len(remaining) / (bound / timeout) / 60:.0f} min more" if bound else "")
            raise WorkloadTimeout(f"{err}: {len(remaining)} of {len(keys)} pods not scheduled{pace}") from err

    # --- ops

    def run_ops(self) -> None:
        skipped_ops = {u.op_index for u in self.result.unsupported if u.what == u.opcode}
        for i, op in enumerate(self.workload.ops):
            if i in skipped_ops:
                self.log(f"  op {i} {op['opcode']}: not run ({UNSUPPORTED_REASONS.get(op['opcode'], 'unsupported')})")
                continue
            getattr(self, f"_op_{op['opcode']}")(i, op)

    def _op_createNodes(self, i: int, op: Object) -> None:
        count = int(op.get("count") or 0)
        path = self.workload.template_path(op.get("nodeTemplatePath") or DEFAULT_NODE_TEMPLATE)
        label_values = (op.get("labelNodePrepareStrategy") or {}).get("labelValues") or []
        label_key = (op.get("labelNodePrepareStrategy") or {}).get("labelKey")
        unique_key = (op.get("uniqueNodeLabelStrategy") or {}).get("labelKey")
        offset = self.result.nodes_created

        def label(idx: int, node: Object) -> None:
            labels = node.setdefault("metadata", {}).setdefault("labels", {})
            if label_key and label_values:  # kube's LabelNodePrepareStrategy: round robin
                labels[label_key] = str(label_values[idx % len(label_values)])
            if unique_key:
                labels[unique_key] = f"{unique_key.rsplit('/', 1)[-1]}-{offset + idx}"

        self._create_many(NODES, path, count, None, label)
        self.log(f"  op {i} createNodes: {count}")

    def _op_createNamespaces(self, i: int, op: Object) -> None:
        template = None
        if op.get("namespaceTemplatePath"):
            template = load_template(self.workload.template_path(op["namespaceTemplatePath"]))
        for n in range(int(op.get("count") or 0)):
            self.ensure_namespace(f"{op['prefix']}-{n}", template)

    def _op_createPods(self, i: int, op: Object) -> None:
        count = int(op.get("count") or 0)
        namespace = op.get("namespace") or f"namespace-{i}"
        self.ensure_namespace(namespace)
        template = op.get("podTemplatePath") or self.workload.default_pod_template or DEFAULT_POD_TEMPLATE
        path = self.workload.template_path(template)
        measured = bool(op.get("collectMetrics")) and not op.get("skipWaitToCompletion")
        if measured and self.mode == "backlog":
            self._measure_backlog(i, count, namespace, path)
            return
        usage_before = self.backend.usage() if measured else None
        started = time.monotonic()
        names = self._create_many(PODS, path, count, namespace)
        created = time.monotonic()
        keys = {f"{namespace}/{n}" for n in names}
        if op.get("skipWaitToCompletion"):
            self._pending_barrier.setdefault(namespace, set()).update(keys)
            if op.get("collectMetrics"):
                self.result.unsupported.append(Unsupported(
                    i, "createPods", "createPods.collectMetrics+skipWaitToCompletion",
                    "measurement up to a later barrier is not implemented; no throughput for this op"))
            self.log(f"  op {i} createPods: {count} in {namespace} (not waited for)")
            return
        self._wait_bound(keys, f"op {i}: {count} pods in {namespace} scheduled", count)
        if measured:
            binds, latencies = self._binds(keys, lambda r: r.created)
            last = max(binds) if binds else started
            throughput = Throughput(replay_throughput(binds, started), count, last - started, created - started)
            throughput.set_latencies(latencies)
            throughput.kept_pace = kept_pace(created, last, created - started)
            throughput.limit = ("driver: the scheduler kept pace with creation" if throughput.kept_pace
                                else "scheduler: pods queued behind it")
            self.result.throughput.append(throughput)
            after = self.backend.usage()
            if usage_before is not None and after is not None and count:
                self.result.cpu_seconds_per_1000_pods = (after.cpu_seconds - usage_before.cpu_seconds) / count * 1000
        self.log(f"  op {i} createPods: {count} in {namespace} scheduled in {time.monotonic() - started:.1f}s")

    def _binds(self, keys: set[str], since: Callable[[Any], float]) -> tuple[list[float], list[float]]:
        """The observer's bind times of `keys`, and each pod's time from `since(record)` to its binding."""
        assert self.observer is not None
        binds, latencies = [], []
        for k in keys:
            record = self.observer.pods.get(k)
            if record is not None and record.bound is not None:
                binds.append(record.bound)
                latencies.append(record.bound - since(record))
        return binds, latencies

    def _measure_backlog(self, i: int, count: int, namespace: str, path: Path) -> None:
        """The measured op as a backlog drain: the scheduler is stopped, every pod created, then a
        fresh scheduler started; its rate runs from the moment it is ready (informers synced) to
        its last binding, so no creation rate is in it. CPU is accounted over that window
        (start-up and the initial list left out)."""
        self.backend.stop_scheduler()
        started = time.monotonic()
        names = self._create_many(PODS, path, count, namespace)
        create_seconds = time.monotonic() - started
        keys = {f"{namespace}/{n}" for n in names}
        assert self.observer is not None
        self.observer.wait_for(_every(0.2, lambda o: all(k in o.pods for k in keys)), 120,
                               f"op {i}: the observer to see the backlog")
        with CpuSampler(self.backend.cpu_sources()) as sampler:
            scheduler_started = time.monotonic()
            self.backend.start()  # returns once the scheduler is ready: informers synced
            sampler.sample()  # the new process's first sample, at `ready`
            ready = time.monotonic()
            self._wait_bound(keys, f"op {i}: {count} pods in {namespace} scheduled", count)
        binds, latencies = self._binds(keys, lambda _r: ready)
        # from readiness, not from the first binding: a preemption workload's work (the dry runs,
        # the victims' deletion) comes before its first binding
        first, last = min(min(binds), ready), max(binds)
        throughput = Throughput(replay_throughput(binds, first), count, last - first, create_seconds,
                                mode="backlog", start_to_first_bind=min(binds) - scheduler_started,
                                start_to_ready=ready - scheduler_started)
        throughput.set_latencies(max(0.0, x) for x in latencies)
        by_process = {name: cpu for name in sampler.sources
                      if name != "machine" and (cpu := sampler.cpu_between(name, first, last)) is not None}
        machine = sampler.cpu_between("machine", first, last)
        if machine is not None and last > first:
            throughput.cpu = DrainCpu(last - first, by_process, machine, os.cpu_count() or 1)
        throughput.limit = drain_limit(throughput.cpu)
        self.result.throughput.append(throughput)
        if "scheduler" in by_process and count:
            self.result.cpu_seconds_per_1000_pods = by_process["scheduler"] / count * 1000
        self.log(f"  op {i} createPods: {count} in {namespace} created in {create_seconds:.1f}s, then drained "
                 f"in {last - first:.1f}s")

    def _op_createAny(self, i: int, op: Object) -> None:
        path = self.workload.template_path(op["templatePath"])
        kind = str(load_template(path).get("kind", ""))
        try:
            resource = resolve(kind.lower())
        except (NotFound, KeyError, ValueError):
            self.result.unsupported.append(Unsupported(i, "createAny", f"createAny {kind}",
                                                       f"kind {kind} is not served by minisched's clusters"))
            return
        namespace = (op.get("namespace") or f"namespace-{i}") if resource.namespaced else None
        if namespace:
            self.ensure_namespace(namespace)
        count = int(op.get("count") or 1)
        self._create_many(resource, path, count, namespace)
        self.log(f"  op {i} createAny: {count} {resource.plural}")

    def _op_barrier(self, i: int, op: Object) -> None:
        namespaces = op.get("namespaces") or list(self._pending_barrier)
        keys: set[str] = set()
        for ns in namespaces:
            keys |= self._pending_barrier.pop(ns, set())
        if keys:
            self._wait_bound(keys, f"op {i}: barrier on {namespaces}", len(keys))

    def _op_sleep(self, i: int, op: Object) -> None:
        time.sleep(parse_duration(str(op.get("duration") or op.get("durationParam") or "0s")))

    def _op_churn(self, i: int, op: Object) -> None:
        churn = _Churn(self, i, op)
        self._churns.append(churn)
        churn.start()

    def _op_deletePods(self, i: int, op: Object) -> None:
        namespace = op["namespace"]
        rate = float(op.get("deletePodsPerSecond") or 0)
        selector = ",".join(f"{k}={v}" for k, v in (op.get("labelSelector") or {}).items()) or None
        pods = self.cluster.list(PODS, namespace, label_selector=selector).get("items") or []
        for pod in pods:
            # grace 0: no kubelet runs to finish a graceful deletion of a bound pod
            with contextlib.suppress(NotFound):
                self.cluster.delete(PODS, pod["metadata"]["name"], namespace, grace_period_seconds=0)
            if rate > 0:
                time.sleep(1 / rate)
        if pods:
            self._adapt("deletePods deletes with grace period 0 (no kubelet finishes graceful deletions)")
        if pods and not op.get("skipWaitToCompletion") and self.observer is not None:
            keys = {f"{namespace}/{p['metadata']['name']}" for p in pods}
            self.observer.wait_for(lambda o: all((r := o.pods.get(k)) is None or r.deleted for k in keys),
                                   self.wait_timeout or 60, f"op {i}: {len(keys)} pods in {namespace} deleted")

    # --- the whole run

    def run(self) -> WorkloadResult:
        began = time.monotonic()
        try:
            self.backend.start()
            with PodObserver(self.cluster) as obs:
                self.observer = obs
                try:
                    self.run_ops()
                except WorkloadTimeout as err:
                    self.result.error = str(err)
                finally:
                    for churn in self._churns:
                        churn.stop.set()
                    for churn in self._churns:
                        churn.thread.join(10)
                        if churn.errors:
                            self._adapt(f"churn errors: {churn.errors[:3]}")
                self.result.overcommits = [f"{o.node} {o.resource} {o.requested}>{o.allocatable} after {o.after}"
                                           for o in obs.overcommits]
                self.result.double_bindings = [r.key for r in obs.pods.values() if r.bindings > 1 or r.node_changes]
                deleted = any(r.deleted or r.terminating for r in obs.pods.values())
            pods = self.cluster.list(PODS).get("items") or []
            nodes = self.cluster.list(NODES).get("items") or []
            self.result.violations = placement_violations(pods, nodes, check_spread=not deleted)
            usage = self.backend.usage()
            if usage is not None:
                self.result.peak_rss_bytes = usage.peak_rss_bytes
            self.result.usage_note = self.backend.usage_note
        except (ApiError, ValueError, OSError, RuntimeError) as err:
            self.result.error = f"{type(err).__name__}: {err}"
        finally:
            self.backend.stop()
            self.result.wall_seconds = time.monotonic() - began
        return self.result


def run_workload(workload: Workload, backend: Backend, *, wait_timeout: float | None = None,
                 log: Callable[[str], None] | None = None, mode: str = "arrival") -> WorkloadResult:
    return Executor(workload, backend, wait_timeout=wait_timeout, log=log, mode=mode).run()


def _every(seconds: float, predicate: Callable[[PodObserver], bool]) -> Callable[[PodObserver], bool]:
    """`predicate`, asked at most every `seconds` (False in between): the observer asks after every
    event, and a scan of thousands of keys per event would cost the bench a core."""
    next_scan = 0.0

    def throttled(o: PodObserver) -> bool:
        nonlocal next_scan
        if time.monotonic() < next_scan:
            return False
        next_scan = time.monotonic() + seconds
        return predicate(o)

    return throttled


def own_cpu() -> float:
    """This process's CPU-seconds (the driver and its watch observer; for the embedded backend,
    the scheduler and the cluster too)."""
    return time.process_time()


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(text: str) -> float:
    """A Go duration ("500ms", "1m30s") in seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


def _deep_copy(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _deep_copy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_deep_copy(v) for v in obj]
    return obj
