"""Part II §2.4: a long soak of the scheduler on the embedded cluster, printing the memory curve.

Rounds of pods created, bound and deleted (minisched.observability.soak); after each round a full
collection and a sample: pymalloc blocks in use, RSS, objects the collector tracks. The embedded
server keeps its default watch history (10,000 changes per resource) and the event recorder its
default correlator (4,096 events, client-go's), so the warm-up is longer than the notebook's; only
the scheduler's latency log is bounded at 1,000 entries (its default, 200,000, is itself a bounded
buffer that a soak shorter than 200,000 pods would see filling).

At the end: the peaks before and after the warm-up, the least-squares slope after it, and the
minisched classes whose live instances grew. With --trace, tracemalloc runs from the start (about
2x slower) and the top differences between the middle and the end are printed: lines still
growing there are leaks, since every bounded buffer has turned over under tracing by then.

    .venv/bin/python bench/soak_memory_bench.py [--rounds 40] [--pods-per-round 1000] [--trace]
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import sys
import time
import tracemalloc

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node
from minisched.observability.runtime import MemorySample, MemoryWatch, gil_disabled, live_type_counts
from minisched.observability.soak import run_soak
from minisched.scheduler.scheduler import Scheduler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--pods-per-round", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=8, help="rounds before the comparison starts")
    parser.add_argument("--trace", action="store_true", help="tracemalloc from the start; top differences")
    args = parser.parse_args()
    if not 0 < args.warmup < args.rounds - 1:
        parser.error("--warmup must leave at least two rounds to compare")
    print(f"Python {platform.python_version()}, free-threaded: {gil_disabled()}, CPUs: {os.cpu_count()}, "
          f"load average: {os.getloadavg()[0]:.1f}")
    if args.trace:
        tracemalloc.start(1)
    cluster = EmbeddedCluster(seed=0)
    for i in range(20):
        cluster.create("nodes", make_node(f"node-{i:02d}", cpu="64", memory="256Gi", pods=str(args.pods_per_round)))
    sched = Scheduler(cluster, seed=0)
    sched.stats.cycle_seconds = collections.deque(maxlen=1_000)
    sched.start()
    watch = MemoryWatch().start()
    snapshots: dict[str, tracemalloc.Snapshot] = {}
    types: dict[str, collections.Counter[str]] = {}
    middle = args.warmup + (args.rounds - args.warmup) // 2
    print(f"{'round':>5} {'pods':>8} {'blocks':>10} {'RSS MiB':>8} {'gc objects':>10} {'round s':>8}")
    started = time.perf_counter()

    def on_round(r: int, s: MemorySample) -> None:
        pods = (r + 1) * args.pods_per_round
        print(f"{r:5d} {pods:8,} {s.allocated_blocks:10,} {s.rss_bytes / 2**20:8.1f} {s.gc_objects:10,} "
              f"{time.perf_counter() - started:8.1f}", flush=True)
        if r == args.warmup - 1:
            types["warm"] = live_type_counts()
        if args.trace and r == middle:
            snapshots["middle"] = MemoryWatch._snapshot()

    try:
        result = run_soak(cluster, sched, watch, rounds=args.rounds, pods_per_round=args.pods_per_round,
                          on_round=on_round)
        types["end"] = live_type_counts()
        end_snapshot = MemoryWatch._snapshot() if args.trace else None
    finally:
        watch.stop()
        sched.stop()
        cluster.close()
    blocks = result.series("allocated_blocks")
    elapsed = time.perf_counter() - started
    print(f"\n{result.pods:,} pods in {elapsed:.1f} s ({result.pods / elapsed:,.0f} pods/s end to end)")
    print(f"blocks: warm-up peak {blocks[: args.warmup].max():,}, later peak {blocks[args.warmup:].max():,}, "
          f"slope after warm-up {result.slope_after_warmup(args.warmup) / args.pods_per_round:+.4f} per pod")
    grown = {k: v for k, v in (types["end"] - types["warm"]).items() if v > 0}
    print("minisched classes with more live instances at the end than after warm-up:", grown or "none")
    if end_snapshot is not None:
        print("\ntracemalloc, middle -> end, lines that grew most:")
        for st in end_snapshot.compare_to(snapshots["middle"], "lineno")[:10]:
            frame = st.traceback[0]
            print(f"  {st.size_diff / 1024:+9.1f} KiB {st.count_diff:+7d} blocks  {frame.filename}:{frame.lineno}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
