from __future__ import annotations

import random
import threading
import time

import pytest

from minisched.clock import VirtualClock
from minisched.errors import Expired, ServiceUnavailable
from minisched.informer import ExponentialBackoff, Reflector, Store
from tests.informer.fakes import ListAnswer, ScriptedCluster, Stream, bookmark, event, list_watch, pod
from tests.workqueue.helpers import eventually


def fast_backoff() -> ExponentialBackoff:
    return ExponentialBackoff(initial=0.001, cap=0.002, jitter=0)


def run_until(reflector: Reflector, cluster: ScriptedCluster, done=None, timeout: float = 3.0) -> None:
    """Run the reflector until the script runs out (or `done()`), then stop it."""
    stop = threading.Event()
    t = threading.Thread(target=reflector.run, args=(stop,))
    t.start()
    try:
        eventually(done or cluster.exhausted.is_set, timeout, "the script to play out")
    finally:
        stop.set()
        t.join(3)
    assert not t.is_alive(), "the reflector must stop promptly when asked"


def names(store: Store) -> dict[str, str]:
    return {k: o["metadata"]["resourceVersion"] for k, o in sorted((k, store.get_by_key(k)) for k in store.list_keys())}


def test_lists_from_cache_then_watches_from_the_lists_version() -> None:
    cluster = ScriptedCluster(
        [ListAnswer([pod("a", 5), pod("b", 6)], "10")],
        [Stream([event("ADDED", pod("c", 11)), event("MODIFIED", pod("a", 12)), event("DELETED", pod("b", 13)),
                 bookmark(20)], hold=True)],
    )
    store = Store()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff())
    run_until(reflector, cluster, lambda: reflector.last_sync_resource_version == "20")
    assert cluster.list_calls[0]["resource_version"] == "0"
    assert cluster.watch_calls[0]["resource_version"] == "10"
    assert cluster.watch_calls[0]["allow_bookmarks"] is True
    assert names(store) == {"default/a": "12", "default/c": "11"}
    assert reflector.stats.bookmarks == 1 and reflector.stats.lists == 1


def test_selectors_and_namespace_are_pushed_down_to_list_and_watch() -> None:
    cluster = ScriptedCluster([ListAnswer([], "1")], [])
    lw = list_watch(cluster, namespace="team-a", label_selector="app=web", field_selector="spec.nodeName=")
    run_until(Reflector(lw, Store(), backoff=fast_backoff()), cluster)
    for call in (cluster.list_calls[0], cluster.watch_calls[0]):
        assert call["namespace"] == "team-a"
        assert call["label_selector"] == "app=web"
        assert call["field_selector"] == "spec.nodeName="


def test_a_watch_that_ends_normally_is_resumed_from_the_last_version_without_relisting() -> None:
    cluster = ScriptedCluster(
        [ListAnswer([], "10")],
        [Stream([event("ADDED", pod("a", 11))]), Stream([bookmark(15)]), Stream([event("ADDED", pod("b", 16))])],
    )
    store = Store()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff())
    run_until(reflector, cluster)
    assert [c["resource_version"] for c in cluster.watch_calls[:4]] == ["10", "11", "15", "16"]
    assert reflector.stats.lists == 1
    assert names(store) == {"default/a": "11", "default/b": "16"}


def test_410_on_the_watch_relists_from_the_last_version_and_replaces_the_store() -> None:
    """As client-go: a watch's 410 does not make the last version unusable for a list, which is
    served at least that fresh from the watch cache instead of a quorum read from etcd."""
    cluster = ScriptedCluster(
        [ListAnswer([pod("a", 5), pod("b", 6)], "10"), ListAnswer([pod("a", 30)], "40")],
        [Stream([event("ADDED", pod("c", 11)), Expired("too old resource version: 11 (25)")]), Stream(hold=True)],
    )
    store = Store()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff())
    run_until(reflector, cluster, lambda: len(cluster.watch_calls) == 2)
    assert [c["resource_version"] for c in cluster.list_calls] == ["0", "11"]
    assert cluster.watch_calls[1]["resource_version"] == "40"
    assert names(store) == {"default/a": "30"}
    assert reflector.stats.expired == 1


def test_410_on_the_watch_and_on_the_list_from_the_last_version_relists_from_scratch() -> None:
    cluster = ScriptedCluster(
        [ListAnswer([pod("a", 5)], "10"), Expired("too old resource version: 11 (25)"), ListAnswer([pod("a", 30)], "40")],
        [Stream([event("ADDED", pod("c", 11)), Expired("too old resource version: 11 (25)")]), Stream(hold=True)],
    )
    store = Store()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff())
    run_until(reflector, cluster, lambda: len(cluster.watch_calls) == 2)
    assert [c["resource_version"] for c in cluster.list_calls] == ["0", "11", ""]
    assert names(store) == {"default/a": "30"}
    assert reflector.stats.expired == 2


def test_410_when_starting_the_watch_also_relists() -> None:
    cluster = ScriptedCluster(
        [ListAnswer([], "10"), ListAnswer([], "50")],
        [Stream(hold=True)],
    )
    real_watch = cluster.watch
    calls = {"n": 0}

    def watch(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 1:
            raise Expired("too old resource version")
        return real_watch(*a, **kw)

    cluster.watch = watch  # type: ignore[method-assign]
    reflector = Reflector(list_watch(cluster), Store(), backoff=fast_backoff())
    run_until(reflector, cluster, lambda: len(cluster.watch_calls) == 1)
    assert [c["resource_version"] for c in cluster.list_calls] == ["0", "10"]
    assert cluster.watch_calls[0]["resource_version"] == "50"


def test_410_on_a_list_at_a_cached_version_retries_at_the_latest() -> None:
    cluster = ScriptedCluster([Expired("too old"), ListAnswer([pod("a", 3)], "7")], [Stream(hold=True)])
    store = Store()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff())
    run_until(reflector, cluster, lambda: len(cluster.watch_calls) == 1)
    assert [c["resource_version"] for c in cluster.list_calls] == ["0", ""]
    assert names(store) == {"default/a": "3"}


def test_failed_lists_back_off_and_retry_from_the_last_synced_version() -> None:
    cluster = ScriptedCluster(
        [ListAnswer([], "10"), ServiceUnavailable("down"), ServiceUnavailable("down"), ListAnswer([], "20")],
        [Stream([ServiceUnavailable("connection reset")]), Stream(hold=True)],
    )
    reflector = Reflector(list_watch(cluster), Store(), backoff=fast_backoff())
    run_until(reflector, cluster, lambda: len(cluster.watch_calls) == 2)
    # After a non-410 failure the version is still good: relist from it (served from the cache).
    assert [c["resource_version"] for c in cluster.list_calls] == ["0", "10", "10", "10"]
    assert reflector.stats.errors == 3  # the broken watch and the two failed lists
    assert isinstance(reflector.last_error, ServiceUnavailable)


def test_a_watch_that_closes_at_once_without_events_is_an_error() -> None:
    cluster = ScriptedCluster([ListAnswer([], "10"), ListAnswer([], "10")], [Stream(), Stream(hold=True)])
    reflector = Reflector(list_watch(cluster), Store(), backoff=fast_backoff())
    run_until(reflector, cluster, lambda: len(cluster.watch_calls) == 2)
    assert reflector.stats.errors == 1
    assert "without any event" in str(reflector.last_error)
    assert reflector.stats.lists == 2  # the error ends the cycle: relist


@pytest.mark.parametrize("bounds", [(300.0, 600.0), (1.0, 2.0)])
def test_each_watch_asks_for_a_random_timeout_within_bounds(bounds: tuple[float, float]) -> None:
    cluster = ScriptedCluster([ListAnswer([], "1")], [Stream([bookmark(i)]) for i in range(2, 40)])
    reflector = Reflector(list_watch(cluster), Store(), watch_timeout=bounds, backoff=fast_backoff())
    run_until(reflector, cluster)
    timeouts = [c["timeout_seconds"] for c in cluster.watch_calls]
    assert all(bounds[0] <= t <= bounds[1] for t in timeouts)
    assert len(set(timeouts)) > 1, "timeouts are spread, so clients do not reconnect together"


def test_stop_ends_a_watch_that_is_waiting_for_events() -> None:
    cluster = ScriptedCluster([ListAnswer([], "1")], [Stream(hold=True)])
    reflector = Reflector(list_watch(cluster), Store())
    stop = threading.Event()
    t = threading.Thread(target=reflector.run, args=(stop,))
    t.start()
    eventually(lambda: reflector.stats.watches == 1)
    started = time.monotonic()
    stop.set()
    t.join(3)
    assert not t.is_alive() and time.monotonic() - started < 1.0


def test_resync_asks_the_store_when_should_resync_agrees() -> None:
    class CountingStore(Store):
        resyncs = 0

        def resync(self) -> None:
            CountingStore.resyncs += 1

    clock = VirtualClock()
    answers = iter([False, True, True])
    cluster = ScriptedCluster([ListAnswer([], "1")], [Stream(hold=True)])
    store = CountingStore()
    reflector = Reflector(list_watch(cluster), store, clock=clock, resync_period=30,
                          should_resync=lambda: next(answers))
    stop = threading.Event()
    t = threading.Thread(target=reflector.run, args=(stop,))
    t.start()
    try:
        eventually(lambda: reflector.stats.watches == 1)
        for _ in range(3):
            eventually(lambda: clock.has_waiters())
            clock.advance(30)
            time.sleep(0.06)
        eventually(lambda: CountingStore.resyncs == 2)
    finally:
        stop.set()
        t.join(3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"watch_timeout": (0, 5)}, "watch_timeout"),
        ({"watch_timeout": (10, 5)}, "watch_timeout"),
        ({"resync_period": -1}, "resync_period"),
        ({"page_size": 0}, "page_size"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Reflector(list_watch(ScriptedCluster([], [])), Store(), **kwargs)


def test_paginated_relist_collects_every_page() -> None:
    cluster = ScriptedCluster([], [Stream(hold=True)])
    pages = [
        {"metadata": {"resourceVersion": "9", "continue": "t1"}, "items": [pod("a", 1)]},
        {"metadata": {"resourceVersion": "9", "continue": ""}, "items": [pod("b", 2)]},
    ]

    def paged_list(resource, namespace=None, **kw):
        cluster.list_calls.append(kw)
        return pages[len(cluster.list_calls) - 1]

    cluster.list = paged_list  # type: ignore[method-assign]
    store = Store()
    reflector = Reflector(list_watch(cluster), store, page_size=1, backoff=fast_backoff())
    reflector._rv_unavailable = True  # as after a 410: a fresh, paginated list at ""
    run_until(reflector, cluster, lambda: len(cluster.watch_calls) == 1)
    assert [(c["limit"], c["continue_token"], c["resource_version"]) for c in cluster.list_calls] == [
        (1, None, ""), (1, "t1", None)
    ]
    assert names(store) == {"default/a": "1", "default/b": "2"}


class TestBackoff:
    def test_doubles_from_800ms_to_a_30s_cap(self, virtual_clock: VirtualClock) -> None:
        b = ExponentialBackoff(jitter=0, clock=virtual_clock)
        delays = []
        for _ in range(8):
            delays.append(b.next_delay())
            virtual_clock.advance(1)
        assert delays == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]

    def test_resets_after_two_healthy_minutes(self, virtual_clock: VirtualClock) -> None:
        b = ExponentialBackoff(jitter=0, clock=virtual_clock)
        assert [b.next_delay() for _ in range(3)] == [0.8, 1.6, 3.2]
        virtual_clock.advance(119)
        assert b.next_delay() == 6.4
        virtual_clock.advance(121)
        assert b.next_delay() == 0.8

    def test_jitter_stretches_each_delay_by_up_to_100_percent(self, virtual_clock: VirtualClock) -> None:
        b = ExponentialBackoff(clock=virtual_clock, rng=random.Random(7))
        delays = [b.next_delay() for _ in range(6)]
        for delay, base in zip(delays, [0.8, 1.6, 3.2, 6.4, 12.8, 25.6], strict=True):
            assert base <= delay <= 2 * base
        assert delays != [0.8, 1.6, 3.2, 6.4, 12.8, 25.6]

    def test_bad_settings_are_refused(self) -> None:
        with pytest.raises(ValueError, match="initial"):
            ExponentialBackoff(initial=0)

    def test_the_reflector_waits_its_backoff_between_failed_cycles(self, virtual_clock: VirtualClock) -> None:
        cluster = ScriptedCluster([ServiceUnavailable("down")] * 3 + [ListAnswer([], "1")], [Stream(hold=True)])
        reflector = Reflector(list_watch(cluster), Store(), clock=virtual_clock,
                              backoff=ExponentialBackoff(jitter=0, clock=virtual_clock))
        stop = threading.Event()
        t = threading.Thread(target=reflector.run, args=(stop,))
        t.start()
        try:
            waits = []
            for expected_lists in (1, 2, 3):
                eventually(lambda n=expected_lists: len(cluster.list_calls) == n and virtual_clock.has_waiters())
                deadline = virtual_clock.next_deadline()
                assert deadline is not None
                waits.append(round(deadline - virtual_clock.now(), 6))
                virtual_clock.advance(deadline - virtual_clock.now())
            eventually(lambda: len(cluster.watch_calls) == 1)
            assert waits == [0.8, 1.6, 3.2]
        finally:
            stop.set()
            t.join(3)
