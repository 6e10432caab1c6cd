"""The allocators' own books in the memory watch: glibc malloc's mallinfo2 and arena count,
pymalloc's arenas, malloc_trim; read through ctypes, None (never a crash) where they are missing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from minisched.observability import runtime
from minisched.observability.runtime import (
    MemoryWatch,
    malloc_arena_count,
    malloc_info,
    malloc_trim,
    pymalloc_arenas,
)

GLIBC = runtime._LIBC is not None
needs_glibc = pytest.mark.skipif(not GLIBC, reason="glibc 2.33+ only (mallinfo2)")


def _in_a_fresh_interpreter(code: str, env: dict[str, str] | None = None) -> Any:
    # These figures are process-wide: in the suite's process, threads and garbage left by earlier
    # tests free and reuse memory while the test reads them (a full CI run saw that). A fresh
    # interpreter has only the test's own allocations.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=False, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


_MALLINFO = """
import json
from minisched.observability.runtime import malloc_info
before = malloc_info()
chunks = [bytes(1024) for _ in range(20_000)]  # over 512 bytes: malloc, not pymalloc; 20 MiB
big = bytearray(64 * 2**20)  # above glibc's largest mmap threshold (32 MiB): mmapped alone
after = malloc_info()
print(json.dumps({"before_arena": before.arena, "before_in_use": before.uordblks,
                  "in_use": after.uordblks - before.uordblks, "mmapped": after.hblkhd - before.hblkhd,
                  "sums": after.heap_bytes == after.arena + after.hblkhd and after.in_use_bytes >= after.uordblks}))
"""


@needs_glibc
def test_mallinfo2_sees_heap_chunks_and_mmapped_blocks() -> None:
    seen = _in_a_fresh_interpreter(_MALLINFO)
    assert isinstance(seen, dict)
    assert seen["before_arena"] > 0 and seen["before_in_use"] > 0
    assert seen["in_use"] >= 0.9 * 20_000 * 1024
    assert seen["mmapped"] >= 64 * 2**20
    assert seen["sums"]


_PYMALLOC = """
import json, tracemalloc
from minisched.observability.runtime import pymalloc_arenas
before = pymalloc_arenas()
held = [object() for _ in range(400_000)]  # 16-byte blocks: 6.4 MB, at least 6 more 1 MiB arenas
after = pymalloc_arenas()
del held
tracemalloc.start()
traced = pymalloc_arenas()  # tracemalloc's hooks stand in front of pymalloc
tracemalloc.stop()
print(json.dumps([before, after, traced, pymalloc_arenas()]))
"""


def test_pymalloc_arenas_count_small_objects_and_hide_under_tracemalloc() -> None:
    before, after, traced, untraced = _in_a_fresh_interpreter(_PYMALLOC)
    assert before is not None and before > 0
    assert after is not None and after - before >= 5
    assert traced is None
    assert untraced is not None


_ARENAS_WITH_THREADS = """
import json, threading
from minisched.observability.runtime import malloc_arena_count
def work():
    held = [b"x" * 2000 for _ in range(100)]  # malloc in this thread: it takes an arena
started = threading.Barrier(4)
def run():
    started.wait()
    work()
threads = [threading.Thread(target=run) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(malloc_arena_count()))
"""


@needs_glibc
@pytest.mark.parametrize(("arena_max", "expected"), [("1", 1), ("", 2)])
def test_malloc_arena_count_follows_threads_and_malloc_arena_max(arena_max: str, expected: int) -> None:
    """glibc gives each new thread that mallocs an arena of its own, up to 8 per core; with
    MALLOC_ARENA_MAX=1 all of them share the main one (the lever the soak tries)."""
    env = {"MALLOC_ARENA_MAX": arena_max} if arena_max else {}
    import os

    full_env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    count = _in_a_fresh_interpreter(_ARENAS_WITH_THREADS, full_env)
    if arena_max:
        assert count == expected
    else:
        assert count >= expected


def test_without_glibc_every_figure_is_none_and_nothing_breaks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_LIBC", None)
    assert (malloc_info(), malloc_arena_count(), pymalloc_arenas(), malloc_trim()) == (None, None, None, False)
    registry = CollectorRegistry()
    watch = MemoryWatch(registry)
    sample = watch.sample()
    assert (sample.malloc, sample.malloc_arenas, sample.pymalloc_arenas) == (None, None, None)
    text = generate_latest(registry).decode()
    assert "minisched_pymalloc_allocated_blocks" in text
    assert "minisched_glibc_malloc" not in text and "minisched_pymalloc_arenas" not in text
    assert "glibc" not in sample.describe() and "RSS" in sample.describe()


@needs_glibc
def test_the_watch_exports_the_allocators_books_and_describes_them() -> None:
    registry = CollectorRegistry()
    watch = MemoryWatch(registry)
    sample = watch.sample("now")
    assert sample.malloc is not None and sample.malloc_arenas is not None and sample.malloc_arenas >= 1
    assert sample.pymalloc_arenas is not None and sample.pymalloc_arenas >= 1
    text = generate_latest(registry).decode()
    for name in ("minisched_glibc_malloc_arena_bytes", "minisched_glibc_malloc_mmapped_bytes",
                 "minisched_glibc_malloc_in_use_bytes", "minisched_glibc_malloc_free_bytes",
                 "minisched_glibc_malloc_arenas", "minisched_pymalloc_arenas"):
        assert f"\n{name} " in text, name
    assert f"\nminisched_pymalloc_arenas {float(sample.pymalloc_arenas)}" in text
    line = sample.describe()
    assert f"pymalloc arenas {sample.pymalloc_arenas}" in line and "glibc heaps" in line
    assert f"glibc arenas {sample.malloc_arenas}" in line
    untouched = MemoryWatch(allocators=False).sample()
    assert (untouched.malloc, untouched.malloc_arenas, untouched.pymalloc_arenas) == (None, None, None)


@needs_glibc
def test_the_sampler_trims_after_each_sample_when_asked() -> None:
    watch = MemoryWatch().start()
    try:
        watch.start_sampling(0.01, trim=True)
        deadline = time.monotonic() + 30
        while watch.trims < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        watch.stop()
    assert watch.trims >= 2 and len(watch.samples) >= 2
    assert isinstance(malloc_trim(), bool)
    quiet = MemoryWatch().start()
    try:
        quiet.start_sampling(0.01)
        deadline = time.monotonic() + 30
        while len(quiet.samples) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        quiet.stop()
    assert quiet.trims == 0
