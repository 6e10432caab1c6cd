"""The interpreter's own behaviour, measured beside a running scheduler (Part II §1, §2.4–2.5).

Go exports its runtime's health as `go_gc_duration_seconds`, `go_memstats_*` and the
`/sched/latencies:seconds` histogram of runtime/metrics. CPython has no such runtime metrics, so
these recorders take the same measurements from the outside:

- `TickerLateness`: a thread that wakes on absolute deadlines (every `period`) and records how late
  each wake-up was. A pure-Python thread holding the GIL delays it by up to the interpreter's switch
  interval (`sys.getswitchinterval()`, 5 ms by default); a GC pause or a long C call delays it too.
- `GCPauseRecorder`: `gc.callbacks` timing every collection, by generation.
- `MemoryWatch`: RSS, pymalloc's allocated blocks and arenas, glibc malloc's own books
  (`mallinfo2`, its arena count), tracemalloc's traced bytes and top differences against a
  baseline, and the GC pauses, exported as Prometheus metrics on the scheduler's registry
  (prometheus_client's own ProcessCollector supplies `process_resident_memory_bytes`, the name
  Go's client exports too). The allocators' books tell RSS growth apart: objects Python still
  holds (blocks, traced bytes), pymalloc arenas kept for a few live blocks, or glibc memory
  (C extensions, OpenSSL, thread arenas, big buffers) held in use or kept free.

Nothing here assumes the GIL: the recorders use locks where threads share state, so they run
unchanged on a free-threaded build (`sysconfig.get_config_var("Py_GIL_DISABLED") == 1`).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import ctypes.util
import gc
import os
import re
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Histogram, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from minisched.observability.metrics import exponential_buckets

__all__ = [
    "CpuHog",
    "GCPauseRecorder",
    "MallocInfo",
    "MemorySample",
    "MemoryWatch",
    "TickerLateness",
    "TopDifference",
    "allocation_bytes",
    "bare_syscall_seconds",
    "forced_collection",
    "gil_disabled",
    "live_type_counts",
    "malloc_arena_count",
    "malloc_info",
    "malloc_trim",
    "pymalloc_arenas",
    "rss_bytes",
]

FloatArray = npt.NDArray[np.float64]


def gil_disabled() -> bool:
    """True on a free-threaded build (3.13t and later), whose threads run Python in parallel."""
    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


# --------------------------------------------------------------------------------------- lateness


class TickerLateness:
    """A ticker thread on absolute deadlines (start + k·period), recording each wake-up's lateness.

    Like Go's time.Ticker it does not catch up on missed ticks: after a stall longer than a period
    it skips to the next deadline still ahead (the skipped ticks are counted in `missed`). The
    lateness of a wake-up is how long after its deadline the thread ran Python again, which needs
    the GIL on a default build. Use as a context manager around the work to observe.
    """

    def __init__(self, period: float = 0.01, *, histogram: Histogram | None = None) -> None:
        if period <= 0:
            raise ValueError(f"a ticker period must be positive, got {period}")
        self.period = period
        self.histogram = histogram
        self.missed = 0
        self._lateness: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> TickerLateness:
        if self._thread is not None:
            raise RuntimeError("this ticker is already running")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ticker-lateness", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> TickerLateness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        start = time.perf_counter()
        tick = 1
        while not self._stop.is_set():
            deadline = start + tick * self.period
            delay = deadline - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            late = time.perf_counter() - deadline
            with self._lock:
                self._lateness.append(late)
            if self.histogram is not None:
                self.histogram.observe(late)
            # the next deadline still ahead: a stall skips ticks instead of bunching them up
            behind = int(late // self.period)
            self.missed += behind
            tick += 1 + behind

    @property
    def lateness(self) -> FloatArray:
        """Every wake-up's lateness so far, in seconds."""
        with self._lock:
            return np.array(self._lateness, dtype=np.float64)

    def percentiles(self, qs: Iterable[float] = (50, 99, 100)) -> dict[float, float]:
        data = self.lateness
        if data.size == 0:
            raise ValueError("no ticks recorded yet: run the ticker for longer than one period")
        return {q: float(np.percentile(data, q)) for q in qs}


class CpuHog:
    """A thread running pure-Python arithmetic until stopped: the neighbour that holds the GIL.

    On a free-threaded build it runs in parallel instead, and a ticker beside it is not delayed.
    """

    def __init__(self, threads: int = 1) -> None:
        if threads < 1:
            raise ValueError(f"a CPU hog needs at least one thread, got {threads}")
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._spin, name=f"cpu-hog-{i}", daemon=True) for i in range(threads)]
        self.iterations = 0

    def _spin(self) -> None:
        count = 0
        while not self._stop.is_set():
            for i in range(10_000):
                count += i & 7
        self.iterations += count  # (a rough total; the number itself is not the point)

    def __enter__(self) -> CpuHog:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


# --------------------------------------------------------------------------------------- GC pauses


@dataclass(frozen=True)
class GCPause:
    generation: int
    seconds: float
    collected: int
    uncollectable: int
    forced: bool = False  # run by `forced_collection` (a harness's gc.collect), not by the interpreter


_forcing = threading.local()


def forced_collection(generation: int = 2) -> int:
    """`gc.collect(generation)`, marked so that every `GCPauseRecorder` files the pause as *forced*.
    A measuring harness (a soak's sample after each round, `live_type_counts`) collects on purpose;
    counting those among the collections the interpreter chose to run would show the harness's
    pauses as the program's."""
    _forcing.active = True
    try:
        return gc.collect(generation)
    finally:
        _forcing.active = False


class GCPauseRecorder:
    """Times every garbage collection through `gc.callbacks` ("start" and "stop" of one collection
    run in the thread that triggered it, with the world stopped on either kind of build).

    The newest `keep` pauses are kept in preallocated numpy arrays (a ring), so a recorder on a
    long-running scheduler allocates nothing per collection and its memory never grows."""

    def __init__(self, histogram: Histogram | None = None, *, keep: int = 10_000) -> None:
        if keep < 1:
            raise ValueError(f"keep at least one pause, got keep={keep}")
        self.histogram = histogram
        self.keep = keep
        self._seconds = np.zeros(keep, np.float64)
        self._generation = np.zeros(keep, np.int8)
        self._collected = np.zeros(keep, np.int64)
        self._uncollectable = np.zeros(keep, np.int64)
        self._forced = np.zeros(keep, np.bool_)
        self._ended = np.zeros(keep, np.float64)  # perf_counter() at the end of each pause
        self._total = 0  # collections recorded since install (or clear)
        self._counts = [0, 0, 0]
        self._lock = threading.Lock()
        self._started: float | None = None
        self._installed = False

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        if self._started is None:  # installed in the middle of a collection
            return
        ended = time.perf_counter()
        seconds = ended - self._started
        self._started = None
        # a collection runs in the thread that triggered it, so a thread-local flag is exact
        forced = bool(getattr(_forcing, "active", False))
        generation = info["generation"]
        with self._lock:
            i = self._total % self.keep
            self._seconds[i] = seconds
            self._generation[i] = generation
            self._collected[i] = info.get("collected", 0)
            self._uncollectable[i] = info.get("uncollectable", 0)
            self._forced[i] = forced
            self._ended[i] = ended
            self._total += 1
            self._counts[generation] += 1
        if self.histogram is not None:
            self.histogram.labels(generation=str(generation)).observe(seconds)

    def install(self) -> GCPauseRecorder:
        if not self._installed:
            gc.callbacks.append(self._callback)
            self._installed = True
        return self

    def uninstall(self) -> None:
        if self._installed:
            gc.callbacks.remove(self._callback)
            self._installed = False

    def __enter__(self) -> GCPauseRecorder:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def _order(self) -> npt.NDArray[np.intp]:
        n = min(self._total, self.keep)
        start = self._total - n
        return (np.arange(start, start + n) % self.keep).astype(np.intp)

    @property
    def pauses(self) -> list[GCPause]:
        """The kept pauses, oldest first."""
        with self._lock:
            order = self._order()
            return [
                GCPause(int(self._generation[i]), float(self._seconds[i]), int(self._collected[i]),
                        int(self._uncollectable[i]), bool(self._forced[i]))
                for i in order
            ]  # fmt: skip

    def clear(self) -> None:
        with self._lock:
            self._total = 0
            self._counts = [0, 0, 0]

    def seconds(self, generation: int | None = None, *, forced: bool | None = None,
                since: float | None = None, until: float | None = None) -> FloatArray:
        """Kept pause lengths in seconds, oldest first, of one generation or of all; `forced=False`
        keeps only the collections the interpreter ran by itself, `forced=True` only those of
        `forced_collection`; `since`/`until` (perf_counter() values) keep the pauses that ended
        in that window."""
        with self._lock:
            order = self._order()
            keep = np.ones(order.size, np.bool_)
            if generation is not None:
                keep &= self._generation[order] == generation
            if forced is not None:
                keep &= self._forced[order] == forced
            if since is not None:
                keep &= self._ended[order] >= since
            if until is not None:
                keep &= self._ended[order] < until
            return self._seconds[order][keep].copy()

    def counts(self) -> dict[int, int]:
        """Collections per generation since install (or clear), including pauses no longer kept."""
        with self._lock:
            return dict(enumerate(self._counts))


# --------------------------------------------------------------------------------------- memory


def rss_bytes() -> int:
    """The process's resident set size now (Linux: /proc/self/statm). Elsewhere, the peak RSS
    from getrusage, which never goes down: say so when you print it."""
    try:
        with open("/proc/self/statm", "rb") as f:
            resident_pages = int(f.read().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)  # macOS: bytes, Linux: KiB


def allocation_bytes(build: Callable[[], Any]) -> int:
    """Bytes that tracemalloc sees allocated by `build()` and still held by what it returns.

    tracemalloc counts the sizes asked of the allocator (not pymalloc's pool overhead), and numpy
    reports its data buffers to it, so for a fixed build these numbers are the same on every run of
    the same interpreter and library versions."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        # the measurement's own few bytes (the ints it reads, the call), measured the same way
        return _held_by(build) - _held_by(_nothing)
    finally:
        if not was_tracing:
            tracemalloc.stop()


def _nothing() -> None:
    return None


def _held_by(build: Callable[[], Any]) -> int:
    forced_collection()
    before = tracemalloc.get_traced_memory()[0]
    held = build()
    after = tracemalloc.get_traced_memory()[0]
    del held
    return after - before


def live_type_counts(module_prefix: str = "minisched") -> collections.Counter[str]:
    """Live instances per class, for classes defined in modules under `module_prefix`, after a
    full collection. Cheap enough between soak rounds (no tracemalloc needed), and a class whose
    count grows with the pods processed is a leak with a name."""
    forced_collection()
    counts: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        cls = type(obj)
        module = cls.__dict__.get("__module__")  # (a metaclass's instances answer a descriptor)
        if isinstance(module, str) and module.startswith(module_prefix):
            counts[f"{cls.__module__}.{cls.__qualname__}"] += 1
    return counts


# ------------------------------------------------------------------------------ allocators' books


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


@dataclass(frozen=True)
class MallocInfo:
    """glibc malloc's totals over all its arenas (`mallinfo2()`, glibc 2.33+), in bytes.

    `arena`: got from the system for the arenas' heaps (brk and the thread arenas' mmapped heaps);
    `hblkhd`: large blocks mmapped one by one (freed to the system when freed); `uordblks`: in use
    in the heaps; `fordblks`: free in the heaps (kept for reuse: fragments, and tops not trimmed).
    pymalloc's arenas are mmapped by pymalloc itself and are not in these figures."""

    arena: int
    hblkhd: int
    uordblks: int
    fordblks: int

    @property
    def heap_bytes(self) -> int:
        """Everything glibc holds from the system: heaps plus mmapped blocks."""
        return self.arena + self.hblkhd

    @property
    def in_use_bytes(self) -> int:
        return self.uordblks + self.hblkhd


def _load_libc() -> ctypes.CDLL | None:
    """glibc, with the functions this module calls typed; None elsewhere (musl, macOS, Windows),
    or on a glibc older than 2.33 (no mallinfo2)."""
    if sys.platform != "linux":
        return None
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not all(hasattr(libc, f) for f in ("mallinfo2", "malloc_trim", "malloc_info", "open_memstream", "fclose")):
        return None
    libc.mallinfo2.restype = _MallInfo2
    libc.mallinfo2.argtypes = []
    libc.malloc_trim.restype = ctypes.c_int
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_info.restype = ctypes.c_int
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.open_memstream.restype = ctypes.c_void_p
    libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
    libc.fclose.restype = ctypes.c_int
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.free.restype = None
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


_LIBC = _load_libc()


def _memstream_text(write: Callable[[int], object]) -> str | None:
    """Call `write(FILE*)` on an in-memory stream (glibc's open_memstream) and return what it
    wrote: for the C functions that only print their report to a FILE. None without glibc."""
    libc = _LIBC
    if libc is None:
        return None
    buf, size = ctypes.c_void_p(), ctypes.c_size_t()
    stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not stream:
        return None
    try:
        write(stream)
    finally:
        libc.fclose(stream)  # flushes, and sets buf and size
    try:
        return ctypes.string_at(buf.value, size.value).decode(errors="replace") if buf.value else ""
    finally:
        libc.free(buf)


def malloc_info() -> MallocInfo | None:
    """glibc's `mallinfo2()` now; None where the C library is not glibc 2.33+."""
    if _LIBC is None:
        return None
    m = _LIBC.mallinfo2()
    return MallocInfo(int(m.arena), int(m.hblkhd), int(m.uordblks), int(m.fordblks))


def malloc_arena_count() -> int | None:
    """How many arenas glibc malloc has made (the main one plus one per thread that found the
    others locked, up to 8 per core by default, or MALLOC_ARENA_MAX): each keeps its own free
    memory. From `malloc_info()`'s report (one <heap> per arena); None without glibc."""
    text = _memstream_text(lambda stream: _LIBC.malloc_info(0, stream))  # type: ignore[union-attr]
    return None if text is None else text.count("<heap nr=")


def malloc_trim() -> bool:
    """glibc's `malloc_trim(0)`: give the free pages of every arena back to the system. True if
    any memory was released; False without glibc."""
    return bool(_LIBC is not None and _LIBC.malloc_trim(0))


_ARENAS = re.compile(r"^# arenas allocated current\s*=\s*([\d,]+)", re.M)


def pymalloc_arenas() -> int | None:
    """Arenas pymalloc holds now (256 KiB each up to CPython 3.9, 1 MiB since): the number
    `sys._debugmallocstats()` prints, read without touching the process's stderr (its C function
    `_PyObject_DebugMallocStats` writes to an in-memory FILE; it runs holding the GIL).

    None when pymalloc is not the allocator (tracemalloc's hooks, PYTHONMALLOC=malloc, a
    debug or free-threaded build's other allocator), on an interpreter without that function,
    or without glibc."""
    stats = getattr(ctypes.pythonapi, "_PyObject_DebugMallocStats", None)
    if stats is None or _LIBC is None:
        return None
    stats.restype = ctypes.c_int
    stats.argtypes = [ctypes.c_void_p]
    text = _memstream_text(stats)
    m = _ARENAS.search(text or "")
    return int(m.group(1).replace(",", "")) if m else None


@dataclass(frozen=True)
class MemorySample:
    label: str
    rss_bytes: int
    allocated_blocks: int  # sys.getallocatedblocks(): pymalloc blocks in use, cheap and exact
    traced_bytes: int  # 0 when tracemalloc is off
    gc_objects: int  # objects the collector tracks, frozen ones (gc.freeze) included
    # the allocators' books (None where unknown: not glibc, pymalloc not in use, or not asked)
    malloc: MallocInfo | None = None
    malloc_arenas: int | None = None
    pymalloc_arenas: int | None = None

    def describe(self) -> str:
        """One line for a log: every figure of this sample, in MiB where it is bytes."""
        mib = 2**20
        parts = [f"RSS {self.rss_bytes / mib:.1f} MiB", f"pymalloc blocks {self.allocated_blocks:,}"]
        if self.pymalloc_arenas is not None:
            parts.append(f"pymalloc arenas {self.pymalloc_arenas}")
        if self.malloc is not None:
            m = self.malloc
            parts.append(f"glibc heaps {m.arena / mib:.1f} MiB (in use {m.uordblks / mib:.1f}, free "
                         f"{m.fordblks / mib:.1f}) + mmapped {m.hblkhd / mib:.1f} MiB")
        if self.malloc_arenas is not None:
            parts.append(f"glibc arenas {self.malloc_arenas}")
        parts.append(f"traced {self.traced_bytes / mib:.1f} MiB")
        parts.append(f"gc objects {self.gc_objects:,}")
        return ", ".join(parts)


@dataclass(frozen=True)
class TopDifference:
    location: str  # "path/to/file.py:123"
    size_diff: int
    count_diff: int

    @property
    def in_minisched(self) -> bool:
        return f"{os.sep}minisched{os.sep}" in self.location


class MemoryWatch(Collector):
    """RSS, allocated blocks, traced bytes, tracemalloc's top differences and GC pauses; a
    Prometheus collector on the registry it is given (the scheduler's, so /metrics shows both).

    `sample()` takes a measurement (call it between rounds of work, or let `start_sampling` call
    it on a thread); a scrape reports the latest sample, so scraping stays cheap. The newest
    `keep` samples are kept (a watch on a scheduler that runs for weeks must not grow itself).
    `allocators=True` adds the allocators' books to each sample (glibc's mallinfo2 and arena
    count, pymalloc's arenas: under a millisecond for a scheduler's heap).
    tracemalloc slows allocation by roughly 2x: `trace=True` turns it on from `start()`, else top
    differences are unavailable and traced bytes read 0.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        trace: bool = False,
        frames: int = 1,
        top: int = 10,
        keep: int = 10_000,
        allocators: bool = True,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep at least one sample, got keep={keep}")
        self.trace = trace
        self.allocators = allocators
        self.frames = frames
        self.top = top
        self.samples: collections.deque[MemorySample] = collections.deque(maxlen=keep)
        self.gc_pause_histogram: Histogram | None = None
        self.trims = 0  # malloc_trim calls made by the sampler (start_sampling(trim=True))
        self.trimmed = 0  # of which released memory
        self._started_tracing = False
        self._baseline: tracemalloc.Snapshot | None = None
        self._last_top: list[TopDifference] = []
        self._sampler: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        if registry is not None:
            self.gc_pause_histogram = Histogram(
                "minisched_gc_pause_seconds",
                "Time the interpreter spent in one garbage collection, by generation "
                "(the analogue of Go's go_gc_duration_seconds).",
                ["generation"],
                buckets=exponential_buckets(1e-5, 2, 16),  # 10 µs .. 0.33 s
                registry=registry,
            )
            with contextlib.suppress(ValueError):  # the registry already has process_* metrics
                ProcessCollector(registry=registry)
            registry.register(self)
        self.gc = GCPauseRecorder(self.gc_pause_histogram)

    # -- life cycle
    def start(self) -> MemoryWatch:
        self.gc.install()
        if self.trace and not tracemalloc.is_tracing():
            tracemalloc.start(self.frames)
            self._started_tracing = True
        self.rebaseline()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()
            self._sampler = None
        self.gc.uninstall()
        if self._started_tracing:
            tracemalloc.stop()
            self._started_tracing = False

    def __enter__(self) -> MemoryWatch:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start_tracing(self) -> None:
        """Turn tracemalloc on now (if it is off) and take the baseline: for a watch that ran
        untraced through a warm-up, at full speed."""
        if not tracemalloc.is_tracing():
            tracemalloc.start(self.frames)
            self._started_tracing = True
        self.rebaseline()

    def stop_tracing(self) -> None:
        """Turn tracemalloc off again if this watch turned it on (top differences end here)."""
        if self._started_tracing:
            tracemalloc.stop()
            self._started_tracing = False
        self._baseline = None

    @property
    def tracing(self) -> bool:
        """True when top differences can be asked for (tracemalloc on, a baseline taken)."""
        return self._baseline is not None and tracemalloc.is_tracing()

    def start_sampling(self, interval: float, *, trim: bool = False) -> None:
        """Sample every `interval` seconds on a daemon thread until stop(). With `trim`, glibc's
        `malloc_trim(0)` runs after each sample (on this thread; ctypes lets go of the GIL for
        it): the free pages every malloc arena keeps go back to the system."""
        if interval <= 0:
            raise ValueError(f"a sampling interval must be positive, got {interval}")
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval):
                self.sample("periodic")
                if trim:
                    self.trims += 1
                    self.trimmed += malloc_trim()

        self._sampler = threading.Thread(target=loop, name="memory-watch", daemon=True)
        self._sampler.start()

    # -- measuring
    def rebaseline(self) -> None:
        """Top differences are measured from here on (call after warm-up)."""
        self._baseline = self._snapshot() if tracemalloc.is_tracing() else None

    def sample(self, label: str = "", *, collect: bool = False) -> MemorySample:
        """One measurement. `collect=True` runs a full collection first, so what remains is held,
        not garbage waiting for the collector (a leak survives a collection)."""
        if collect:
            forced_collection()
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
        tracked = len(gc.get_objects()) + gc.get_freeze_count()
        s = MemorySample(label, rss_bytes(), sys.getallocatedblocks(), traced, tracked,
                         *((malloc_info(), malloc_arena_count(), pymalloc_arenas()) if self.allocators else ()))
        with self._lock:
            self.samples.append(s)
        return s

    def top_differences(self, limit: int | None = None) -> list[TopDifference]:
        """The lines whose held memory changed most since the baseline, largest growth first."""
        if self._baseline is None:
            raise RuntimeError("no tracemalloc baseline: construct with trace=True and call start()")
        now = self._snapshot()
        stats = now.compare_to(self._baseline, "lineno")
        out = []
        for st in stats[: limit or self.top]:
            frame = st.traceback[0]
            out.append(TopDifference(f"{frame.filename}:{frame.lineno}", st.size_diff, st.count_diff))
        with self._lock:
            self._last_top = out
        return out

    @staticmethod
    def _snapshot() -> tracemalloc.Snapshot:
        return tracemalloc.take_snapshot().filter_traces(
            (
                tracemalloc.Filter(False, tracemalloc.__file__),
                tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
                tracemalloc.Filter(False, "<unknown>"),
            )
        )

    def curve(self, field_name: str = "rss_bytes") -> npt.NDArray[np.int64]:
        with self._lock:
            return np.array([getattr(s, field_name) for s in self.samples], dtype=np.int64)

    # -- Prometheus
    def collect(self) -> Iterator[Metric]:
        with self._lock:
            last = self.samples[-1] if self.samples else None
            top = list(self._last_top)
        if last is not None:
            yield GaugeMetricFamily(
                "minisched_pymalloc_allocated_blocks", "Memory blocks pymalloc holds (sys.getallocatedblocks()).",
                value=last.allocated_blocks,
            )
            yield GaugeMetricFamily(
                "minisched_tracemalloc_traced_bytes", "Bytes tracemalloc traces as held (0 when it is off).",
                value=last.traced_bytes,
            )
            yield GaugeMetricFamily(
                "minisched_gc_tracked_objects", "Objects the garbage collector tracks.", value=last.gc_objects
            )
            if last.pymalloc_arenas is not None:
                yield GaugeMetricFamily(
                    "minisched_pymalloc_arenas", "Arenas pymalloc holds (1 MiB each on CPython 3.10+).",
                    value=last.pymalloc_arenas,
                )
            if last.malloc is not None:
                m = last.malloc
                for name, value, what in (
                    ("arena", m.arena, "got from the system for its arenas' heaps (mallinfo2 arena)"),
                    ("mmapped", m.hblkhd, "in large blocks mmapped one by one (mallinfo2 hblkhd)"),
                    ("in_use", m.uordblks, "in use in its heaps (mallinfo2 uordblks)"),
                    ("free", m.fordblks, "free in its heaps, kept for reuse (mallinfo2 fordblks)"),
                ):
                    yield GaugeMetricFamily(f"minisched_glibc_malloc_{name}_bytes", f"Bytes glibc malloc holds {what}.",
                                            value=value)
            if last.malloc_arenas is not None:
                yield GaugeMetricFamily(
                    "minisched_glibc_malloc_arenas", "Arenas glibc malloc has made (at most MALLOC_ARENA_MAX).",
                    value=last.malloc_arenas,
                )
        diff = GaugeMetricFamily(
            "minisched_tracemalloc_top_difference_bytes",
            "Growth of held memory since the baseline, for the source lines that grew most.",
            labels=["location"],
        )
        for t in top:
            diff.add_metric([t.location], t.size_diff)
        yield diff


# ------------------------------------------------------------------------------------ system calls

_SYSCALL_LOOP_C = r"""
#include <time.h>
#include <unistd.h>

/* seconds per getppid() over n calls; libc does not cache getppid: one system call each */
double getppid_loop(long n) {
    volatile long sink = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) sink += getppid();
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9) / n;
}
"""


def bare_syscall_seconds(n: int = 200_000, *, compiler: str | None = None, repeat: int = 5) -> float | None:
    """Seconds per `getppid()` system call made from a C loop, with no interpreter in it (the best
    of `repeat` runs of `n`): what `os.getppid()` costs minus this is the Python wrapper's share.
    The loop is compiled as a shared library with `compiler` (default: the first of cc, gcc, clang
    on PATH) and run in this process through ctypes (one call per `n` system calls), so it shares
    the process and CPU state of the Python calls it is compared with. None when there is no
    compiler. Timings: print, never compare."""
    if n < 1 or repeat < 1:
        raise ValueError(f"time at least one system call, once, got n={n}, repeat={repeat}")
    if compiler is not None and shutil.which(compiler) is None:
        raise ValueError(f"no C compiler {compiler!r} on PATH")
    cc = compiler or next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if cc is None:
        return None
    with tempfile.TemporaryDirectory(prefix="minisched-syscall-") as tmp:
        source, library = Path(tmp, "getppid_loop.c"), Path(tmp, "getppid_loop.so")
        source.write_text(_SYSCALL_LOOP_C)
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(library), str(source)], check=True,
                       capture_output=True, timeout=120)  # fmt: skip
        loop = ctypes.CDLL(str(library)).getppid_loop
    loop.restype, loop.argtypes = ctypes.c_double, [ctypes.c_long]
    return min(float(loop(n)) for _ in range(repeat))
