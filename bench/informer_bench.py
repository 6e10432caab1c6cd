"""Informer figures: initial sync of many pods, and watch-event throughput through the pipeline
reflector -> DeltaFIFO -> store -> handler. Prints figures; not a test.

    .venv/bin/python bench/informer_bench.py                       # embedded cluster
    .venv/bin/python bench/informer_bench.py --backend local       # the local real control plane
    .venv/bin/python bench/informer_bench.py --backend context:kind-minisched --pods 2000

--backend takes a MINISCHED_BACKEND setting (default: that variable, else "embedded"). On a real
cluster the pods live in a fresh namespace that is deleted at the end; use a cluster you can spare.

What is measured (median of --repeats runs, with min and max; the machine is shared, so compare
figures within one run):
- list: one LIST of all the pods (the server's share of an initial sync);
- initial sync: a new informer from start() until its handler has had on_add for every pod;
- watch replay: U updates are made first, then a watch from before them is read, bare (just
  iterating the stream) and through a whole informer, so the pipeline runs flat out and its cost
  is seen apart from the writer's (a real server may answer 410 if its watch cache is smaller);
- live: an informer is synced, --writers threads patch pods as fast as the server allows, and
  the handler's delivery rate and lag behind the writers are reported.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from minisched.cluster import Cluster, backend_setting, connect
from minisched.errors import AlreadyExists, Expired
from minisched.informer import ExponentialBackoff, ListWatch, SharedIndexInformer
from minisched.objects import make_namespace, make_pod
from minisched.resources import NAMESPACES, PODS

Object = dict[str, Any]


class Counter:
    """A handler that counts notifications and notes when the first and the n-th update came."""

    def __init__(self, updates_wanted: int = 0) -> None:
        self.adds = 0
        self.updates = 0
        self.deletes = 0
        self.updates_wanted = updates_wanted
        self.first_update: float | None = None
        self.last_update: float | None = None
        self.done = threading.Event()

    def on_add(self, obj: Object, is_in_initial_list: bool) -> None:
        self.adds += 1

    def on_update(self, old: Object, new: Object) -> None:
        now = time.perf_counter()
        if self.first_update is None:
            self.first_update = now
        self.updates += 1
        if self.updates == self.updates_wanted:
            self.last_update = now
            self.done.set()

    def on_delete(self, obj: Any) -> None:
        self.deletes += 1


class SnapshotListWatch(ListWatch):
    """Answers the first LIST with a list taken earlier, so the watch starts from that older
    version and replays every change made since, as fast as the informer can take them."""

    def __init__(self, base: ListWatch, snapshot: Object) -> None:
        super().__init__(base.cluster, base.resource, base.namespace, base.label_selector, base.field_selector)
        object.__setattr__(self, "_snapshot", snapshot)

    def list(self, **kw: Any) -> Object:
        snapshot = getattr(self, "_snapshot", None)
        if snapshot is not None:
            object.__setattr__(self, "_snapshot", None)
            return snapshot
        return super().list(**kw)


def show(label: str, samples: list[float], count: int) -> None:
    """One line: the median time, its spread, and the rate it means."""
    median = statistics.median(samples)
    print(
        f"  {label:<44}median {median:8.3f} s (min {min(samples):.3f}, max {max(samples):.3f})"
        f"  {count / median:>10,.0f} /s"
    )


def create_pods(cluster: Cluster, namespace: str, count: int, prefix: str) -> float:
    start = time.perf_counter()
    for i in range(count):
        with contextlib.suppress(AlreadyExists):  # a rerun against the same namespace
            cluster.create(PODS, make_pod(f"{prefix}-{i:05d}", namespace=namespace))
    return time.perf_counter() - start


def patch_round_robin(
    cluster: Cluster, namespace: str, names: list[str], count: int, tag: str, writers: int = 1
) -> float:
    """`count` patches spread over `names`, by `writers` threads each owning a slice of the names."""

    def write(share: list[str], n: int) -> None:
        for i in range(n):
            cluster.patch(PODS, share[i % len(share)], {"metadata": {"labels": {"bench": f"{tag}-{i}"}}}, namespace)

    writers = max(1, min(writers, len(names)))
    shares = [names[w::writers] for w in range(writers)]
    counts = [count // writers + (1 if w < count % writers else 0) for w in range(writers)]
    threads = [threading.Thread(target=write, args=(shares[w], counts[w])) for w in range(writers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def new_informer(lw: ListWatch) -> SharedIndexInformer:
    # A generous watch timeout: nothing in a run should end the watch on its own.
    return SharedIndexInformer(lw, watch_timeout=(600.0, 900.0), backoff=ExponentialBackoff(initial=0.1, cap=1.0))


def measure_initial_sync(cluster: Cluster, namespace: str, pods: int, repeats: int) -> None:
    lw = ListWatch.for_resource(cluster, PODS, namespace)
    lists, syncs = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        got = len(lw.list(resource_version="0")["items"])
        lists.append(time.perf_counter() - start)
        assert got == pods, f"expected {pods} pods, the list has {got}"
    for _ in range(repeats):
        informer = new_informer(lw)
        counter = Counter()
        registration = informer.add_event_handler(counter)
        start = time.perf_counter()
        informer.start()
        while not registration.has_synced():
            time.sleep(0.001)
        syncs.append(time.perf_counter() - start)
        informer.stop()
        assert counter.adds == pods, f"handler saw {counter.adds} adds, expected {pods}"
    show(f"LIST of {pods:,} pods", lists, pods)
    show("initial sync, start() to last on_add", syncs, pods)


def measure_replay(cluster: Cluster, namespace: str, names: list[str], updates: int, repeats: int) -> None:
    lw = ListWatch.for_resource(cluster, PODS, namespace)
    bare, piped = [], []
    for r in range(repeats):
        snapshot = lw.list(resource_version="")
        rv = snapshot["metadata"]["resourceVersion"]
        patch_round_robin(cluster, namespace, names, updates, f"replay{r}")
        # Bare: just read the stream.
        watch = lw.watch(resource_version=rv, timeout_seconds=600)
        start = time.perf_counter()
        for seen, _ in enumerate(watch, 1):
            if seen == updates:
                break
        bare.append(time.perf_counter() - start)
        watch.stop()
        # Through a whole informer.
        informer = new_informer(SnapshotListWatch(lw, snapshot))
        counter = Counter(updates)
        informer.add_event_handler(counter)
        informer.start()
        if not counter.done.wait(300):
            raise RuntimeError(f"the informer delivered only {counter.updates} of {updates} updates")
        assert counter.first_update is not None and counter.last_update is not None
        piped.append(counter.last_update - counter.first_update)
        informer.stop()
    show(f"watch stream alone, {updates:,} events", bare, updates)
    show("reflector->DeltaFIFO->store->handler", piped, updates)


def measure_live(
    cluster: Cluster, namespace: str, names: list[str], updates: int, repeats: int, writers: int
) -> None:
    lw = ListWatch.for_resource(cluster, PODS, namespace)
    informer = new_informer(lw)
    counter = Counter()
    informer.add_event_handler(counter)
    informer.start()
    if not informer.wait_for_sync(120):
        raise RuntimeError("the informer did not sync")
    writes: list[float] = []
    deliveries: list[float] = []
    lags: list[float] = []
    try:
        for r in range(repeats):
            counter.updates, counter.first_update, counter.last_update = 0, None, None
            counter.updates_wanted = updates
            counter.done.clear()
            start = time.perf_counter()
            written = patch_round_robin(cluster, namespace, names, updates, f"live{r}", writers)
            if not counter.done.wait(300):
                raise RuntimeError(f"the informer delivered only {counter.updates} of {updates} updates")
            assert counter.last_update is not None
            writes.append(written)
            deliveries.append(counter.last_update - start)
            lags.append(counter.last_update - (start + written))
    finally:
        informer.stop()
    show(f"{writers} writer thread(s), {updates:,} patches", writes, updates)
    show("first write to last on_update", deliveries, updates)
    # Negative when the last event reached the handler before the writer had read its response.
    print(f"  {'handler lag behind the last write':<44}median {statistics.median(lags) * 1e3:8.1f} ms")


def timed(label: str, fn: Callable[[], float], count: int) -> None:
    took = fn()
    print(f"  {label:<44}       {took:8.3f} s  {count / took:>37,.0f} /s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default=backend_setting(), help="a MINISCHED_BACKEND setting")
    parser.add_argument("--pods", type=int, default=10_000, help="pods for the initial sync (default 10,000)")
    parser.add_argument("--steady-pods", type=int, default=1_000, help="pods updated in the throughput runs")
    parser.add_argument("--updates", type=int, default=20_000, help="updates per throughput run")
    parser.add_argument("--writers", type=int, default=1, help="writer threads in the live run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for name in ("pods", "steady_pods", "updates", "repeats", "writers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")

    options: dict[str, Any] = {}
    if args.backend.partition(":")[0] == "embedded":
        options["history_window"] = args.updates + 100  # the replay needs every update kept
    cluster = connect(args.backend, **options)
    embedded = cluster.name == "embedded"
    suffix = uuid.uuid4().hex[:6]
    sync_ns, steady_ns = f"bench-sync-{suffix}", f"bench-steady-{suffix}"
    print(
        f"backend {args.backend} ({cluster.name}); Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs (shared); median of {args.repeats}"
    )
    try:
        for ns in (sync_ns, steady_ns):
            cluster.create(NAMESPACES, make_namespace(ns))
        print("\nsetup")
        timed(f"create {args.pods:,} pods", lambda: create_pods(cluster, sync_ns, args.pods, "p"), args.pods)
        timed(
            f"create {args.steady_pods:,} pods",
            lambda: create_pods(cluster, steady_ns, args.steady_pods, "s"),
            args.steady_pods,
        )
        names = [f"s-{i:05d}" for i in range(args.steady_pods)]

        print(f"\ninitial sync ({args.pods:,} pods)")
        measure_initial_sync(cluster, sync_ns, args.pods, args.repeats)

        print(f"\nwatch-event throughput ({args.updates:,} updates over {args.steady_pods:,} pods)")
        try:
            measure_replay(cluster, steady_ns, names, args.updates, args.repeats)
        except Expired as err:  # a real server's watch cache need not keep that many events
            print(f"  (replay impossible here: the server no longer has those versions: {err})")
        measure_live(cluster, steady_ns, names, args.updates, args.repeats, args.writers)
    finally:
        if not embedded:
            for ns in (sync_ns, steady_ns):
                try:
                    cluster.delete(NAMESPACES, ns)
                except Exception as err:  # report, but do not hide the figures
                    print(f"warning: could not delete namespace {ns}: {err}", file=sys.stderr)
        cluster.close()


if __name__ == "__main__":
    main()
