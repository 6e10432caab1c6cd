"""§2.4: producer/consumer throughput of queue.Queue, SimpleQueue, deque and an SPSC ring buffer.

One producer thread, one consumer thread, integers checked in order at the consumer. Median of
REPEATS runs with the slowest and fastest; figures depend on this machine and its load, so compare
ratios within one run, not with other machines.

    .venv/bin/python bench/queues_bench.py [items] [repeats]
"""

from __future__ import annotations

import os
import platform
import sys

from minisched.concurrency.throughput import KINDS, gil_enabled, measure


def main() -> None:
    items = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), GIL enabled: {gil_enabled()}, "
        f"CPUs: {os.cpu_count()}, switch interval {sys.getswitchinterval() * 1e3:.1f} ms"
    )
    print(f"{items:,} items, one producer and one consumer thread, median of {repeats}")
    for capacity in (1024, 64):
        print(
            f"\nbounded capacity {capacity} (queue.Queue maxsize and ring size; SimpleQueue and deque are unbounded)"
        )
        print(f"{'kind':24} {'median items/s':>15} {'slowest':>12} {'fastest':>12}")
        for kind in KINDS:
            m = measure(kind, items, repeats, capacity)
            slow, fast = m.spread
            print(f"{kind:24} {m.median_rate:15,.0f} {slow:12,.0f} {fast:12,.0f}")


if __name__ == "__main__":
    main()
