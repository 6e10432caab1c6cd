"""Part II §2.4: a long soak of the scheduler on the embedded cluster, held to a stated "flat".

Rounds of pods created, bound and deleted (minisched.observability.soak, 1,000 pods a round, 50
rounds: 50,000 pods by default); after each round a full collection and a sample: RSS, pymalloc
blocks in use, tracemalloc's traced bytes, objects the collector tracks, and the allocators' own
books (minisched.observability.runtime: pymalloc arenas, only while tracemalloc is off: its hooks
hide pymalloc from that report; glibc's heap from `mallinfo2`), so that RSS
growth can be told apart: memory the program still holds (traced bytes, blocks), or memory the
allocators keep from earlier peaks (arenas not fully free, glibc's free chunks).

The embedded server keeps its default watch history (10,000 changes per resource) and the event
recorder its default correlator (4,096 events, client-go's); only the scheduler's latency log is
bounded at 1,000 entries (its default, 200,000, is itself a bounded buffer that a soak shorter
than 200,000 pods would see filling). With --trace, tracemalloc runs from the start (about 2x
slower; started later, the objects it never saw being replaced by traced ones would look like
growth for tens of thousands of pods).

Flat, the criterion (the second half of the rounds, least squares against pods churned):
- pymalloc blocks in use grow by less than 100 per 1,000 pods (exact, in both modes): a leak of
  one small object per pod adds 1,000;
- without --trace: RSS grows by less than 64 KiB per 1,000 pods: allocator steps allowed (one
  1 MiB pymalloc arena per 16,000 pods), a steady retention of whole objects not;
- with --trace: traced bytes grow by less than 16 bytes per pod (16 KiB per 1,000 pods): a leak of
  a single small object per pod (a float in a deque: 32 bytes; a dict entry with its key: 100+)
  fails it; and no minisched source line's traced memory grows by more than that from the middle
  to the end. RSS is shown but not judged under tracing: tracemalloc's tables, and the glibc
  malloc/free it does for every Python allocation, grow RSS by themselves (~100 KiB per 1,000 pods
  here, with traced bytes flat).
The bench prints PASS or FAIL for each and overall; run it both ways for the whole verdict.

    .venv/bin/python bench/soak_memory_bench.py [--rounds 50] [--pods-per-round 1000] [--warmup 10]
        [--trace] [--malloc-trim] [--freeze] [--plot soak.png]

`--malloc-trim` calls glibc's malloc_trim(0) after each sample and prints RSS after it (pages glibc
kept and could return); `--freeze` calls gc.freeze() at the end of the warm-up. Environment
variables that change the allocators (MALLOC_ARENA_MAX, PYTHONMALLOC=malloc) are printed in the
header when set.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import os
import platform
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node
from minisched.observability.runtime import (
    MemorySample,
    MemoryWatch,
    gil_disabled,
    live_type_counts,
    malloc_info,
    malloc_trim,
    pymalloc_arenas,
    rss_bytes,
)
from minisched.observability.soak import print_verdicts, run_soak
from minisched.scheduler.scheduler import Scheduler

TRACED_LIMIT = 16.0  # bytes per pod, second half
RSS_LIMIT = 64.0  # KiB per 1,000 pods, second half
GLIBC = malloc_info() is not None
BLOCKS_LIMIT = 100.0  # pymalloc blocks in use per 1,000 pods, second half


@dataclass(frozen=True)
class Row:
    pods: int
    sample: MemorySample
    arenas: int | None
    glibc_heap: int  # bytes glibc got from the system for its heaps (0 where unknown)
    glibc_used: int  # of which in use
    glibc_free: int  # of which free (fragments, and the top it did not give back)
    rss_trimmed: int | None  # RSS after malloc_trim(0), with --malloc-trim
    seconds: float


def measure(pods: int, sample: MemorySample, started: float, trim: bool) -> Row:
    heap = used = free = 0
    info = sample.malloc or malloc_info()
    if info is not None:
        heap, used, free = info.heap_bytes, info.in_use_bytes, info.fordblks
    trimmed = None
    if trim and info is not None:
        malloc_trim()
        trimmed = rss_bytes()
    arenas = sample.pymalloc_arenas if sample.pymalloc_arenas is not None else pymalloc_arenas()
    return Row(pods, sample, arenas, heap, used, free, trimmed, time.perf_counter() - started)


def slope(rows: list[Row], value: np.ndarray) -> float:
    """Least-squares growth of `value` per pod over `rows`."""
    x = np.array([r.pods for r in rows], np.float64)
    return float(np.polyfit(x, value.astype(np.float64), 1)[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--pods-per-round", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=10, help="rounds of warm-up (printed; --freeze after them)")
    parser.add_argument("--trace", action="store_true", help="tracemalloc from the start (~2x slower; no arena count)")
    parser.add_argument("--malloc-trim", action="store_true", help="glibc malloc_trim(0) after each sample")
    parser.add_argument("--freeze", action="store_true", help="gc.freeze() at the end of the warm-up")
    parser.add_argument("--plot", metavar="PNG", help="write the curves and the second half's fit here")
    args = parser.parse_args()
    middle = args.rounds // 2
    if not 0 < args.warmup < middle - 3:
        parser.error("--warmup must end well before the second half (rounds // 2) starts")
    env = {k: os.environ[k] for k in ("MALLOC_ARENA_MAX", "PYTHONMALLOC", "MALLOC_TRIM_THRESHOLD_") if k in os.environ}
    print(f"Python {platform.python_version()}, free-threaded: {gil_disabled()}, CPUs: {os.cpu_count()}, "
          f"load average: {os.getloadavg()[0]:.1f}, allocator env: {env or 'default'}")
    cluster = EmbeddedCluster(seed=0)
    for i in range(20):
        cluster.create("nodes", make_node(f"node-{i:02d}", cpu="64", memory="256Gi", pods=str(args.pods_per_round)))
    sched = Scheduler(cluster, seed=0)
    sched.stats.cycle_seconds = collections.deque(maxlen=1_000)
    sched.start()
    if args.trace:
        tracemalloc.start(1)
    watch = MemoryWatch().start()
    rows: list[Row] = []
    snapshot_path = os.path.join(tempfile.mkdtemp(prefix="minisched-soak-"), "middle.tracemalloc")
    types: dict[str, collections.Counter[str]] = {}
    print(f"{'round':>5} {'pods':>7} {'RSS MiB':>8} {'trimmed':>8} {'arenas':>6} {'glibc heap':>10} {'used':>6} "
          f"{'free':>6} {'blocks':>8} {'traced MiB':>10} {'gc objects':>10} {'s':>6}")
    started = time.perf_counter()

    def on_round(r: int, s: MemorySample) -> None:
        row = measure((r + 1) * args.pods_per_round, s, started, args.malloc_trim)
        rows.append(row)
        mib = 2**20
        trimmed = f"{row.rss_trimmed / mib:8.1f}" if row.rss_trimmed is not None else f"{'-':>8}"
        print(f"{r:5d} {row.pods:7,} {s.rss_bytes / mib:8.1f} {trimmed} {row.arenas if row.arenas is not None else '-':>6} "
              f"{row.glibc_heap / mib:10.1f} {row.glibc_used / mib:6.1f} {row.glibc_free / mib:6.1f} "
              f"{s.allocated_blocks:8,} {s.traced_bytes / mib:10.2f} {s.gc_objects:10,} {row.seconds:6.0f}", flush=True)
        if r == args.warmup - 1 and args.freeze:
            gc.freeze()
        if r == middle - 3:
            # Two rounds before the second half starts: taking a snapshot allocates tens of MiB for
            # a moment (its copy is kept on disk, not here), which glibc keeps as free chunks unless
            # trimmed; it lands in the warm-up's rows, not in the fitted ones.
            types["middle"] = live_type_counts()
            if args.trace:
                MemoryWatch._snapshot().dump(snapshot_path)
                malloc_trim()

    try:
        result = run_soak(cluster, sched, watch, rounds=args.rounds, pods_per_round=args.pods_per_round,
                          on_round=on_round)
        types["end"] = live_type_counts()
        end_snapshot = MemoryWatch._snapshot() if args.trace else None
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        watch.stop()
        sched.stop()
        cluster.close()
    elapsed = time.perf_counter() - started
    second = rows[middle - 1:]  # the second half: from the end of round middle-1 to the last
    pods_compared = rows[-1].pods - rows[middle - 3].pods  # the snapshots': from the end of round middle-3
    print(f"\n{result.pods:,} pods in {elapsed:.0f} s ({result.pods / elapsed:,.0f} pods/s end to end, "
          f"load average now {os.getloadavg()[0]:.1f})")

    def series(get: object) -> np.ndarray:
        return np.array([get(r) for r in second], np.float64)  # type: ignore[operator]

    rss_slope = slope(second, series(lambda r: r.sample.rss_bytes)) * 1000 / 1024  # KiB per 1,000 pods
    print(f"second half ({second[0].pods:,} -> {second[-1].pods:,} pods), least-squares growth per 1,000 pods:")
    print(f"  RSS          {rss_slope:+8.1f} KiB   (whole run: {rows[0].sample.rss_bytes / 2**20:.1f} -> "
          f"{rows[-1].sample.rss_bytes / 2**20:.1f} MiB; end of warm-up {rows[args.warmup - 1].sample.rss_bytes / 2**20:.1f})")
    if second[0].arenas is not None:
        print(f"  arenas       {slope(second, series(lambda r: r.arenas)) * 1000:+8.2f}       (pymalloc, 1 MiB each: "
              f"{rows[args.warmup - 1].arenas} at the end of warm-up, {second[0].arenas} at the middle, "
              f"{second[-1].arenas} at the end)")
    if GLIBC:
        for name, get in (("glibc used", lambda r: r.glibc_used), ("glibc free", lambda r: r.glibc_free)):
            print(f"  {name:12} {slope(second, series(get)) * 1000 / 1024:+8.1f} KiB")
    print(f"  blocks       {slope(second, series(lambda r: r.sample.allocated_blocks)) * 1000:+8.1f}       "
          f"(pymalloc blocks in use)")
    if args.trace:
        print(f"  traced       {slope(second, series(lambda r: r.sample.traced_bytes)) * 1000 / 1024:+8.1f} KiB   "
              f"(tracemalloc; its own tables count in RSS and glibc used)")
    print(f"  gc objects   {slope(second, series(lambda r: r.sample.gc_objects)) * 1000:+8.1f}")
    if args.malloc_trim:
        print(f"  RSS trimmed  {slope(second, series(lambda r: r.rss_trimmed)) * 1000 / 1024:+8.1f} KiB   "
              f"(after malloc_trim(0); it gave back {np.mean(series(lambda r: r.sample.rss_bytes - r.rss_trimmed)) / 2**20:.1f} MiB on average)")
    grown = {k: v for k, v in (types["end"] - types["middle"]).items()
             if v > 0 and not k.endswith(("runtime.MemorySample", "runtime.MallocInfo"))}  # (this bench's samples)
    print("  minisched classes with more live instances at the end than at the middle:", grown or "none")

    blocks = slope(second, series(lambda r: r.sample.allocated_blocks)) * 1000
    checks: list[tuple[str, bool]] = [
        (f"pymalloc blocks slope {blocks:+.1f} per 1,000 pods < {BLOCKS_LIMIT:g}", blocks < BLOCKS_LIMIT),
    ]
    if not args.trace:
        checks.append((f"RSS slope {rss_slope:+.1f} KiB per 1,000 pods < {RSS_LIMIT:g}", rss_slope < RSS_LIMIT))
    if end_snapshot is not None:
        traced = slope(second, series(lambda r: r.sample.traced_bytes))
        checks.append((f"traced slope {traced:+.2f} bytes per pod < {TRACED_LIMIT:g}", traced < TRACED_LIMIT))
        print(f"\ntracemalloc, middle -> end ({pods_compared:,} pods), the lines that grew most:")
        growing = []
        for st in end_snapshot.compare_to(tracemalloc.Snapshot.load(snapshot_path), "lineno")[:12]:
            frame = st.traceback[0]
            per_pod = st.size_diff / pods_compared
            where = f"{frame.filename}:{frame.lineno}"
            mine = f"{os.sep}minisched{os.sep}" in frame.filename
            if mine and per_pod >= TRACED_LIMIT:
                growing.append(where)
            print(f"  {st.size_diff / 1024:+9.1f} KiB {st.count_diff:+7d} blocks {per_pod:+7.2f} B/pod  {where}")
        checks.append((f"no minisched line growing by {TRACED_LIMIT:g}+ bytes per pod "
                       f"({', '.join(growing) or 'none'})", not growing))
    ok = print_verdicts(checks, f"memory flat after warm-up over {result.pods:,} pods"
                                f"{' (traced run: RSS not judged)' if args.trace else ''}")
    if args.plot:
        plot(rows, middle, rss_slope, args.plot)
    sys.stdout.flush()
    return 0 if ok else 1


def plot(rows: list[Row], middle: int, rss_slope: float, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pods = np.array([r.pods for r in rows]) / 1000
    rss = np.array([r.sample.rss_bytes for r in rows]) / 2**20
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(pods, rss, "o-", ms=3, label="RSS")
    if rows[0].arenas is not None:
        ax.plot(pods, np.array([r.arenas or 0 for r in rows]), "s-", ms=2, label="pymalloc arenas (MiB)")
    if GLIBC:
        ax.plot(pods, np.array([r.glibc_heap for r in rows]) / 2**20, "^-", ms=2, label="glibc heap (MiB)")
    traced = np.array([r.sample.traced_bytes for r in rows]) / 2**20
    if traced.any():
        ax.plot(pods, traced, "-", label="traced by tracemalloc (MiB)")
    x = pods[middle - 1:]
    fit = np.polyfit(x, rss[middle - 1:], 1)
    ax.plot(x, np.polyval(fit, x), "k--", label=f"RSS fit, second half: {rss_slope:+.1f} KiB / 1,000 pods")
    ax.set_xlabel("pods churned (thousands)")
    ax.set_ylabel("MiB")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"plot written to {path}")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
