"""A scheduler process as kube-scheduler runs one: the scheduler, its metrics and health endpoints,
and, optionally, leader election so that several replicas keep exactly one active.

    app = SchedulerApp(cluster, leader_elect=True, identity="sched-a", metrics_port=10259)
    app.run(stop_event)       # campaigns, schedules while leading, returns when stopped or the lease is lost

With `shards=True` (`minisched run --shards`) there is no leader: every replica schedules the pods
and prefers the nodes the rendezvous ring gives it, renewing a lease of its own, with the capacity
ledger fencing nodes (minisched.sharding, Part II §4.3).

This is the top layer (it imports from all the others); `minisched run` and the capstone chapter
use it. Like kube-scheduler, a leader that loses its lease stops scheduling and `run` returns, so the
process exits and its supervisor restarts it as a candidate: carrying on after a lost lease is how
two leaders would bind the same pod.

Shutdown has one deadline, `shutdown_timeout` (20 s by default, well inside the 30 s Kubernetes
grants after SIGTERM), counted from the stop request and shared by the scheduler's own steps (see
Scheduler.stop) and the wait for the leading thread; the lease release has its own short budget.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minisched.clock import Clock, RealClock
from minisched.cluster.base import Cluster
from minisched.cluster.link import ClusterLink
from minisched.controllers.leaderelection import LeaderElector
from minisched.deadline import Context, background
from minisched.observability.batch_metrics import register_batch_metrics
from minisched.observability.metrics import SchedulerMetrics
from minisched.observability.runtime import MemoryWatch
from minisched.observability.server import HealthServer, leadership_known
from minisched.scheduler.events import _MAX_CORRELATED as MAX_CORRELATED
from minisched.scheduler.events import EventRecorder
from minisched.scheduler.scheduler import DEFAULT_SHUTDOWN_TIMEOUT, Scheduler
from minisched.scheduler.snapshot import NodeTable

if TYPE_CHECKING:
    from minisched.controllers.plugin_config import PluginConfigController
    from minisched.sharding.shard import Shard

SERVICE_CYCLE_LOG = 1_000  # scheduling-cycle latencies a running service keeps in memory
MEMORY_SAMPLE_INTERVAL = 30.0  # seconds between the memory watch's samples in a running service
# The bounded buffers a service keeps, by the name `buffers=` (and MINISCHED_BUFFERS) gives them,
# with their sizes: the event correlator's recent events, the node table's pod-change log, the
# scheduling-cycle latencies, the memory watch's own samples. A soak lowers them to get past their
# filling (a full buffer is flat; a filling one looks like a leak) in a short run.
SERVICE_BUFFERS = {"event-correlator": MAX_CORRELATED, "pod-change-log": NodeTable.pod_log_limit,
                   "cycle-log": SERVICE_CYCLE_LOG, "memory-samples": 10_000}
_BUFFER_MINIMUM = {"pod-change-log": 2}  # it keeps the newest half when full: at least one entry


# The cyclic collector's young-generation threshold in a scheduler's own process (the interpreter's
# is 700; 3.13 raised it to 2,000). The scheduler allocates a few dicts per watch event and frees
# nearly all of them by reference counting (a 5,000-pod drain: ~650 objects found in cycles in 400
# young collections): fewer young collections are fewer passes over what is queued or in flight.
YOUNG_COLLECTION_THRESHOLD = 10_000


def tune_collector_for_scheduling() -> Callable[[], None]:
    """Set the cyclic collector as a process that is a scheduler's own wants it (`minisched run`,
    the in-process benchmark): young collections every YOUNG_COLLECTION_THRESHOLD allocations, and
    the heap built so far (the imports: long lived) frozen out of the collector's passes. Returns
    what gives the process its settings back. A 5,000-pod drain on a real API server spent
    0.25-0.28 CPU-s in the collector before, 0.08-0.09 with this and `freeze_heap`."""
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *thresholds[1:])
    gc.freeze()

    def restore() -> None:
        gc.set_threshold(*thresholds)
        gc.unfreeze()

    return restore


def pin_to_one_cpu(cpu: int | None = None) -> Callable[[], None]:
    """Keep every thread of this process on one CPU: `cpu`, or by default the one the calling
    thread runs on now (where the kernel placed the process when it started). Returns what gives
    each thread back the CPUs it had. A no-op where the platform cannot set affinity (macOS,
    Windows) or the process may use only one CPU already; a ValueError names a CPU this process
    may not run on.

    Why a scheduler's own process wants it (`minisched run`, the in-process benchmark): its threads
    (the loop, binding workers, informers, event writer) take turns on one interpreter lock, so two
    of them never run Python at once, and when they sit on different cores each hand-off wakes a
    thread on the other core, whose caches are cold. On two cores the loop's own CPU per cycle fell
    from ~310-360 us to ~230 on one, and a real API server's drain from ~1.13 to ~0.89 CPU-ms per
    pod (medians; bench/README.md, "one CPU for the interpreter lock's threads" and "`minisched
    run` on one CPU")."""
    if not hasattr(os, "sched_setaffinity"):
        log.info("not pinning to one CPU: this platform cannot set a thread's CPU affinity")
        return lambda: None
    allowed = os.sched_getaffinity(0)
    if cpu is None:
        cpu = _current_cpu()
        if cpu not in allowed:  # unknown, or a CPU taken away meanwhile
            cpu = min(allowed)
    else:
        check_cpu(cpu)
    if len(allowed) == 1:
        return lambda: None
    before: dict[int, set[int]] = {}
    for tid in _thread_ids():
        try:
            before[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {cpu})
        except OSError:  # the thread ended meanwhile
            before.pop(tid, None)

    def restore() -> None:
        for tid in _thread_ids():  # threads started since then get the CPUs the process had
            with contextlib.suppress(OSError):  # ended meanwhile
                os.sched_setaffinity(tid, before.get(tid, allowed))

    return restore


def check_cpu(cpu: int | str) -> int:
    """`cpu` as a CPU number this process may run on; a ValueError says why it is not one."""
    text = str(cpu)
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"{cpu!r} is not a CPU number")
    number = int(text)
    if hasattr(os, "sched_getaffinity") and number not in (allowed := os.sched_getaffinity(0)):
        raise ValueError(f"CPU {number} is not one this process may run on (it may run on "
                         f"{', '.join(str(c) for c in sorted(allowed))})")
    return number


def _current_cpu() -> int | None:
    """The CPU the calling thread last ran on (field 39 of /proc/thread-self/stat), None if unknown."""
    try:
        with open("/proc/thread-self/stat") as f:
            stat = f.read()
        return int(stat.rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def _thread_ids() -> list[int]:
    """Every thread of this process (Linux: /proc/self/task), or just this one if that is not there."""
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return [threading.get_native_id()]


def check_buffers(buffers: Mapping[str, int]) -> dict[str, int]:
    """SERVICE_BUFFERS with `buffers` applied; a ValueError names an unknown buffer or a bad size."""
    sizes = dict(SERVICE_BUFFERS)
    for name, size in buffers.items():
        if name not in SERVICE_BUFFERS:
            raise ValueError(f"unknown buffer {name!r}; known: {', '.join(SERVICE_BUFFERS)}")
        if isinstance(size, bool) or not isinstance(size, int) or size < _BUFFER_MINIMUM.get(name, 1):
            raise ValueError(f"buffer {name} must be an integer of at least {_BUFFER_MINIMUM.get(name, 1)}, "
                             f"got {size!r}")
        sizes[name] = size
    return sizes

log = logging.getLogger(__name__)

DEFAULT_LEASE_NAME = "minisched"
DEFAULT_LEASE_NAMESPACE = "kube-system"


def default_identity() -> str:
    """kube-scheduler's choice: hostname plus a random suffix, so two processes on one host differ."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4()}"


class SchedulerApp:
    def __init__(
        self,
        cluster: Cluster,
        *,
        config: str | Path | Mapping[str, Any] | None = None,
        scheduler_options: Mapping[str, Any] | None = None,
        leader_elect: bool = False,
        identity: str | None = None,
        lease_name: str = DEFAULT_LEASE_NAME,
        lease_namespace: str = DEFAULT_LEASE_NAMESPACE,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        recorder_factory: Callable[[Cluster], EventRecorder] | None = None,
        clock: Clock | None = None,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
        metrics_ssl_context: Any = None,
        metrics_authorizer: Any = None,
        plugin_config: bool = False,
        elector_rng: random.Random | None = None,
        shards: bool = False,
        shard_group: str | None = None,
        shard_lease_duration: float = 15.0,
        capacity_fence: bool = True,
        memory_sample_interval: float | None = MEMORY_SAMPLE_INTERVAL,
        malloc_trim: bool = False,
        buffers: Mapping[str, int] | None = None,
        freeze_heap: bool = False,
    ) -> None:
        """`metrics_ssl_context` and `metrics_authorizer` make the metrics port a secure one, as
        kube-scheduler's (see minisched.observability.auth). `shards`: one replica of a sharded
        scheduler in group `shard_group` (leases and ledgers in `lease_namespace`; default
        minisched.sharding.DEFAULT_GROUP).
        `memory_sample_interval`: seconds between samples of the memory watch (`self.memory`: RSS,
        the allocators' books, GC pauses on /metrics) while `run()` runs; None: sampled only when
        asked (`self.memory.sample()`); `malloc_trim`: glibc's malloc_trim(0) after each sample.
        `buffers`: smaller (or larger) sizes for the bounded buffers named in SERVICE_BUFFERS, e.g.
        {"event-correlator": 64} (a short soak's; the event correlator's with recorder_factory: its own).
        `freeze_heap`: for an app that owns its process (`minisched run`): once the informers' first
        lists are in, `gc.freeze()` takes the heap built so far (the imports, the listed objects: long
        lived, and freed by reference counting if ever) out of the cyclic collector's passes, which
        otherwise walk it again at every full collection (bench/README.md, "the cyclic collector and
        BLAS threads").
        Not for a notebook's or a test's app: the process is not the app's to tune."""
        self.buffers = check_buffers(buffers or {})
        if recorder_factory is not None and "event-correlator" in (buffers or {}):
            raise ValueError("buffers['event-correlator'] and recorder_factory exclude each other: "
                             "give the factory's EventRecorder its max_correlated")
        if memory_sample_interval is not None and memory_sample_interval <= 0:
            raise ValueError(f"memory_sample_interval must be positive (or None), got {memory_sample_interval}")
        if shutdown_timeout < 0:
            raise ValueError(f"shutdown_timeout must not be negative, got {shutdown_timeout}")
        if shards and leader_elect:
            raise ValueError("shards and leader_elect exclude each other: sharded replicas all schedule, "
                             "each its own pods (a leader would leave the others idle)")
        if not capacity_fence and not shards:
            raise ValueError("capacity_fence=False only makes sense for sharded replicas (shards=True)")
        self.cluster = cluster
        self.shutdown_timeout = shutdown_timeout
        self._stop_requested: float | None = None  # time.monotonic() of the stop request
        self.clock: Clock = clock or RealClock()
        self.config = config
        self.scheduler_options = dict(scheduler_options or {})
        self.identity = identity or default_identity()
        self.lease_name = lease_name
        self.metrics = SchedulerMetrics()
        # the interpreter's and the allocators' memory beside the scheduler's metrics (untraced:
        # tracemalloc would double the cost of every allocation; start_tracing() when diagnosing)
        self.memory = MemoryWatch(self.metrics.registry, keep=self.buffers["memory-samples"])
        self.memory_sample_interval = memory_sample_interval
        self.malloc_trim = malloc_trim
        self.freeze_heap = freeze_heap
        self.recorder_factory = recorder_factory
        self.scheduler: Scheduler | None = None
        register_batch_metrics(self.metrics.registry, lambda: self.scheduler.frameworks if self.scheduler else {})
        self.lost_lease = False
        self.plugin_config = plugin_config  # watch SchedulerPluginConfig objects (installing the CRD)
        self.plugin_config_controller: PluginConfigController | None = None
        # (time on self.clock, "started leading" | "stopped leading" | "sees leader X"): the
        # replica's own record of hand-overs, for logs and charts.
        self.leadership: list[tuple[float, str]] = []
        self.shard: Shard | None = None
        if shards:
            # Imported for a sharded replica only, as the plugin-config controller below: with the
            # CRD models they validate with (pydantic), ~0.2 CPU-s of every other start.
            from minisched.observability.shard_metrics import register_shard_metrics
            from minisched.sharding.shard import DEFAULT_GROUP, Shard

            group = DEFAULT_GROUP if shard_group is None else shard_group
            self.shard = Shard(cluster, identity=self.identity, group=group, namespace=lease_namespace,
                               lease_duration=shard_lease_duration, clock=self.clock, capacity_fence=capacity_fence)
            register_shard_metrics(self.metrics.registry, self.shard)
        self.elector: LeaderElector | None = None
        if leader_elect:
            self.metrics.set_leader(lease_name, False)  # a candidate starts as a follower
            self.elector = LeaderElector(
                cluster, name=lease_name, namespace=lease_namespace, identity=self.identity,
                clock=self.clock, lease_duration=lease_duration, renew_deadline=renew_deadline,
                retry_period=retry_period, on_started_leading=self._lead,
                on_stopped_leading=self._stopped_leading, on_new_leader=self._new_leader, rng=elector_rng,
            )
        self.server: HealthServer | None = None
        if metrics_port is not None:
            self.server = HealthServer(self.metrics.registry, host=metrics_host, port=metrics_port,
                                       ssl_context=metrics_ssl_context, authorizer=metrics_authorizer)
            self.server.add_readiness_check("informer-sync", self._informers_synced)
            if self.shard is not None:
                self.server.add_readiness_check("shard-ring", self._in_ring)
            if self.elector is not None:
                self.server.add_readiness_check("leader-election", leadership_known(self.elector))
                # kube-scheduler's /healthz includes the elector's watchdog (client-go's HealthzAdaptor).
                self.server.add_liveness_check("leader-election-health", self.elector.check_health)
        self._ctx: Context | None = None

    # -- health --------------------------------------------------------------------------------------

    def _informers_synced(self) -> str | None:
        if self.scheduler is None:
            # A standby runs no informers; it is ready once it knows who leads (the other check).
            return None if self.elector is not None else "scheduler not started"
        pending = [str(k) for k, i in self.scheduler.factory.informers().items() if not i.has_synced()]
        return f"informers not synced: {', '.join(pending)}" if pending else None

    def _in_ring(self) -> str | None:
        shard = self.shard
        if shard is None or self.identity in shard.ring:
            return None
        return f"{self.identity} is not in shard ring {list(shard.ring.members)} yet (its lease not seen live)"

    # -- running ---------------------------------------------------------------------------------------

    def _new_scheduler(self) -> Scheduler:
        options = dict(self.scheduler_options)
        if self.recorder_factory is not None:
            options["recorder"] = self.recorder_factory(self.cluster)
        elif "recorder" not in options:
            options["recorder"] = EventRecorder(self.cluster, clock=self.clock,
                                                max_correlated=self.buffers["event-correlator"])
        if self.elector is not None:
            options.setdefault("bind_guard", self.elector.holds_lease)
        options.update(config=self.config, clock=self.clock, observer=self.metrics)
        if self.shard is not None:  # the ring as the pod filter, the shard's plugins in every profile
            options = self.shard.scheduler_options(**options)
        sched = Scheduler(self.cluster, **options)
        # A service reports its latencies as histograms on /metrics; the scheduler's own latency log
        # (200,000 entries by default, for notebooks and benches) would only fill: 6 MiB of floats,
        # rising for hours, which a soak cannot tell from a leak. Keep the newest few.
        sched.stats.cycle_seconds = collections.deque(maxlen=self.buffers["cycle-log"])
        sched.cache.table.pod_log_limit = self.buffers["pod-change-log"]
        return sched

    def _note(self, what: str) -> None:
        self.leadership.append((self.clock.now(), what))

    def _new_leader(self, identity: str) -> None:
        self._note(f"sees leader {identity}")

    def _lead(self, ctx: Context) -> None:
        self._note("started leading")
        log.info("%s: started leading lease %s", self.identity, self.lease_name)
        self.metrics.set_leader(self.lease_name, True)
        self._schedule_until(ctx)

    def _stopped_leading(self) -> None:
        self._note("stopped leading")
        self.metrics.set_leader(self.lease_name, False)
        if self._ctx is not None and not self._ctx.done():
            # Lost, not released on shutdown: stop, as kube-scheduler exits on a lost lease.
            self.lost_lease = True
            log.error("%s: lost lease %s; stopping", self.identity, self.lease_name)
            self._ctx.cancel("leader election lost")

    def shutdown_time_left(self) -> float:
        """Seconds left of the shutdown deadline (all of it before a stop was requested)."""
        if self._stop_requested is None:
            return self.shutdown_timeout
        return max(0.0, self.shutdown_timeout - (time.monotonic() - self._stop_requested))

    def _schedule_until(self, ctx: Context) -> None:
        sched = self._new_scheduler()
        self.scheduler = sched
        log.info("minisched scheduling for profiles %s on the %s cluster", list(sched.frameworks), self.cluster.name)
        shard = self.shard
        if shard is not None:
            # our lease and the ring first, so the informers queue only the pods that are ours
            shard.attach(sched)
            shard.tick()
            log.info("%s: shard group %s, ring %s", self.identity, shard.group, list(shard.ring.members))
        # A stop or a lost lease ends the wait for the informers' first lists too (kube-scheduler
        # waits for its caches with ctx.Done()): an API server that cannot list must not hold a
        # process told to stop for the whole sync timeout.
        cancelled = threading.Event()
        ctx.after_done(cancelled.set)
        controller: PluginConfigController | None = None
        try:
            if not sched.start(stop=cancelled):
                return  # stopped before the informers synced: the finally below shuts down
            if self.freeze_heap:
                gc.freeze()
            if shard is not None:
                shard.start()
            if self.plugin_config:
                from minisched.controllers.plugin_config import PluginConfigController, install_crd

                install_crd(self.cluster)
                controller = PluginConfigController(sched, self.cluster, clock=self.clock)
                controller.start()
                self.plugin_config_controller = controller
            ctx.wait()
        finally:
            if controller is not None:
                controller.stop()
            if self._stop_requested is None:  # the lease was lost: the deadline starts now
                self._stop_requested = time.monotonic()
            sched.stop(self.shutdown_time_left())
            if shard is not None:  # after the bindings: leave the ring at once, others take our pods
                shard.stop(min(2.0, self.shutdown_time_left()))

    def run(self, stop: threading.Event) -> None:
        """Serve health and metrics, then schedule (after winning the lease, with leader election)
        until `stop` is set or the lease is lost."""
        self._ctx = background(self.clock, name=self.identity).with_cancel()
        ctx = self._ctx

        def cancel_on_stop() -> None:
            stop.wait()
            if self._stop_requested is None:
                self._stop_requested = time.monotonic()
            ctx.cancel("stopped")

        watcher = threading.Thread(target=cancel_on_stop, name="stop-watcher", daemon=True)
        watcher.start()
        self.memory.start()
        self.memory.sample("start")
        if self.memory_sample_interval is not None:
            self.memory.start_sampling(self.memory_sample_interval, trim=self.malloc_trim)
        if self.server is not None:
            self.server.start()
            log.info("metrics and health on %s", self.server.url)
        try:
            if self.elector is None:
                self._schedule_until(ctx)
            else:
                self.elector.run(ctx)
                # The scheduler runs in the elector's leading thread: let it finish its bindings.
                leading = getattr(self.elector, "leading_thread", None)
                if leading is not None:
                    # Scheduler.stop keeps to the deadline; the margin covers its last log line.
                    leading.join(self.shutdown_time_left() + 1.0)
        finally:
            ctx.cancel("stopped")
            self.memory.stop()
            if self.server is not None:
                self.server.stop()


class Replica:
    """One scheduler process (a `SchedulerApp` with leader election) run in a thread, reaching the
    cluster through its own `ClusterLink` so that it can be partitioned from it.

    Several replicas in one Python process is how chapter 4.4 and the capstone show a hand-over;
    `start()` after the app returned (a lost lease) is the supervisor restarting the process: a new
    `SchedulerApp`, a candidate again. `apps` keeps every incarnation, `timeline()` their
    leadership records together."""

    def __init__(self, cluster: Cluster, identity: str, **app_options: Any) -> None:
        self.identity = identity
        self.link = ClusterLink(cluster)
        self.app_options = {"leader_elect": True, "metrics_port": 0, **app_options}
        self.apps: list[SchedulerApp] = []
        self._started = 0  # how many of `apps` have been run
        self._stop: threading.Event | None = None
        self.thread: threading.Thread | None = None

    @property
    def app(self) -> SchedulerApp:
        if not self.apps:
            raise RuntimeError(f"{self.identity} was never started")
        return self.apps[-1]

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def new_app(self) -> SchedulerApp:
        """The next incarnation, not yet running (so its checks can be read before it starts)."""
        if self.running:
            raise RuntimeError(f"{self.identity} is running; stop it (or let it exit) first")
        app = SchedulerApp(self.link, identity=self.identity, **self.app_options)
        self.apps.append(app)
        return app

    def start(self, timeout: float = 10.0) -> Replica:
        """Run the newest incarnation not yet started (a new one if there is none) and return once
        its health server answers."""
        app = self.apps[-1] if len(self.apps) > self._started else self.new_app()
        self._started = len(self.apps)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=app.run, args=(self._stop,), name=self.identity, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + timeout
        while app.server is not None and not app.server.serving:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"{self.identity}: the health server did not start")
            time.sleep(0.005)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._stop is not None:
            self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout)
        self._stop = None

    def exited(self) -> bool:
        """True once the current incarnation has returned (stopped, or its lease lost)."""
        return self.thread is not None and not self.thread.is_alive()

    def leads(self) -> bool:
        app = self.apps[-1] if self.apps else None
        return bool(self.running and app is not None and app.elector is not None and app.elector.is_leader())

    def timeline(self, origin: float = 0.0) -> list[tuple[float, str]]:
        """Every incarnation's leadership record, times relative to `origin`."""
        return [(at - origin, what) for app in self.apps for at, what in app.leadership]
