from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.errors import Expired
from minisched.informer import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    ExponentialBackoff,
    FilteringResourceEventHandler,
    ListWatch,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    SharedInformerFactory,
)
from minisched.meta import key_of, resource_version_of
from minisched.objects import make_namespace, make_pod
from minisched.resources import NODES, PODS
from tests.informer.fakes import GatedListWatch
from tests.informer.recorder import Recorder
from tests.workqueue.helpers import eventually, stays


def server_state(cluster: Any, **kw: Any) -> dict[str, str]:
    return {key_of(o): resource_version_of(o) for o in cluster.list(PODS, **kw)["items"]}


def cache_state(informer: SharedIndexInformer) -> dict[str, str]:
    return {key_of(o): resource_version_of(o) for o in informer.store.list()}


def fast_backoff() -> ExponentialBackoff:
    return ExponentialBackoff(initial=0.01, cap=0.05, jitter=0)


@pytest.fixture
def informer(embedded_cluster: Any):
    inf = SharedIndexInformer(ListWatch.for_resource(embedded_cluster, PODS), backoff=fast_backoff())
    yield inf
    if inf._thread is not None:
        inf.stop()


def relabel(cluster: Any, name: str, value: str) -> dict:
    return cluster.patch(PODS, name, {"metadata": {"labels": {"v": value}}}, "default")


def test_initial_list_then_changes_reach_cache_and_handler(embedded_cluster: Any, informer: SharedIndexInformer):
    for name in ("a", "b"):
        embedded_cluster.create(PODS, make_pod(name))
    rec = Recorder()
    informer.add_event_handler(rec)
    informer.start()
    assert informer.wait_for_sync(5)
    assert cache_state(informer) == server_state(embedded_cluster)
    eventually(lambda: len(rec.events) == 2)
    assert sorted(rec.of("add")) == [("add", "default/a", server_state(embedded_cluster)["default/a"], True),
                                     ("add", "default/b", server_state(embedded_cluster)["default/b"], True)]

    embedded_cluster.create(PODS, make_pod("c"))
    old_rv = server_state(embedded_cluster)["default/a"]
    relabel(embedded_cluster, "a", "2")
    embedded_cluster.delete(PODS, "b", "default")
    eventually(lambda: rec.snapshot() == server_state(embedded_cluster), what="the handler to catch up")
    assert cache_state(informer) == server_state(embedded_cluster)
    assert rec.of("add")[-1][1:] == ("default/c", server_state(embedded_cluster)["default/c"], False)
    # (deleting "b" may first mark it with a deletionTimestamp: an update of b, as on a real server)
    assert [e for e in rec.of("update") if e[1] == "default/a"] == [
        ("update", "default/a", old_rv, server_state(embedded_cluster)["default/a"])
    ]
    assert [e[1] for e in rec.of("delete")] == ["default/b"] and rec.of("delete")[0][3] is False
    assert rec.violations == []
    assert informer.last_sync_resource_version == max(
        informer.last_sync_resource_version, *server_state(embedded_cluster).values(), key=int
    )


def test_relist_after_410_reports_what_was_missed_with_tombstones(embedded_cluster: Any) -> None:
    clock = VirtualClock()  # the informer's backoff waits until the test moves this clock
    for name in ("gone", "changed", "same"):
        embedded_cluster.create(PODS, make_pod(name))
    informer = SharedIndexInformer(
        ListWatch.for_resource(embedded_cluster, PODS), clock=clock,
        backoff=ExponentialBackoff(jitter=0, clock=clock),
    )
    rec = Recorder()
    informer.add_event_handler(rec)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        embedded_cluster.create(PODS, make_pod("seen-live"))  # so the watch has delivered something
        eventually(lambda: "default/seen-live" in rec.snapshot())
        last_known_gone = rec.snapshot()["default/gone"]

        embedded_cluster.faults.fail_next(1, Expired("too old resource version"), verbs={"watch"})
        embedded_cluster.faults.drop_watches()
        reflector = informer.reflector
        assert reflector is not None
        eventually(lambda: reflector.stats.expired == 1 and clock.has_waiters(), what="410 and backoff")
        # While the informer is cut off: a deletion, an update and a creation it will not see live.
        embedded_cluster.delete(PODS, "gone", "default")
        relabel(embedded_cluster, "changed", "2")
        embedded_cluster.create(PODS, make_pod("new"))
        clock.advance(1.0)
        eventually(lambda: rec.snapshot() == server_state(embedded_cluster), what="the relist")
        assert cache_state(informer) == server_state(embedded_cluster)
        assert ("delete", "default/gone", last_known_gone, True) in rec.events  # a tombstone
        updates = {e[1]: (e[2], e[3]) for e in rec.of("update")}
        assert updates["default/changed"][0] != updates["default/changed"][1]
        # Unchanged objects come back from the relist as updates with old and new at the same
        # version (as in client-go when no resync is configured): a handler can tell by comparing.
        assert updates["default/same"][0] == updates["default/same"][1]
        assert rec.of("add")[-1][1] == "default/new"
        assert reflector.stats.lists == 2
        assert rec.violations == []
    finally:
        informer.stop()


def test_a_rewatch_from_a_compacted_version_gets_410_and_relists(embedded_cluster: Any) -> None:
    # The server's own 410: the history is compacted while the informer is between two watches.
    for name in ("gone", "kept"):
        embedded_cluster.create(PODS, make_pod(name))
    lw = GatedListWatch(ListWatch.for_resource(embedded_cluster, PODS))
    informer = SharedIndexInformer(lw, backoff=fast_backoff())
    rec = Recorder()
    informer.add_event_handler(rec)
    with informer:
        assert informer.wait_for_sync(5)
        embedded_cluster.create(PODS, make_pod("seen-live"))  # the first watch delivers something,
        eventually(lambda: "default/seen-live" in rec.snapshot())
        embedded_cluster.faults.drop_watches()  # then ends: the next watch waits at the gate
        assert lw.held.wait(5)  # type: ignore[attr-defined]
        last_known = rec.snapshot()["default/gone"]
        embedded_cluster.delete(PODS, "gone", "default")
        relabel(embedded_cluster, "kept", "2")
        embedded_cluster.faults.force_expiry()
        lw.gate.set()  # type: ignore[attr-defined]
        eventually(lambda: rec.snapshot() == server_state(embedded_cluster), what="the relist")
        reflector = informer.reflector
        assert reflector is not None and reflector.stats.expired == 1 and reflector.stats.lists == 2
        assert ("delete", "default/gone", last_known, True) in rec.events
        assert rec.violations == []


def test_a_handler_added_later_gets_the_cache_first(embedded_cluster: Any, informer: SharedIndexInformer) -> None:
    embedded_cluster.create(PODS, make_pod("a"))
    informer.start()
    assert informer.wait_for_sync(5)
    rec = Recorder()
    registration = informer.add_event_handler(rec)
    eventually(registration.has_synced, what="the late handler's replay")
    assert [e[:2] + e[3:] for e in rec.events] == [("add", "default/a", True)]
    embedded_cluster.create(PODS, make_pod("b"))
    eventually(lambda: "default/b" in rec.snapshot())
    assert rec.events[-1][3] is False


def test_removed_handlers_hear_nothing_more(embedded_cluster: Any, informer: SharedIndexInformer) -> None:
    rec, other = Recorder(), Recorder()
    registration = informer.add_event_handler(rec)
    informer.add_event_handler(other)
    informer.start()
    assert informer.wait_for_sync(5)
    informer.remove_event_handler(registration)
    embedded_cluster.create(PODS, make_pod("a"))
    eventually(lambda: "default/a" in other.snapshot())
    assert rec.events == []
    with pytest.raises(ValueError, match="not registered"):
        informer.remove_event_handler(registration)


def test_a_failing_handler_does_not_stop_the_others(embedded_cluster: Any, informer: SharedIndexInformer) -> None:
    def explode(obj: dict, initial: bool) -> None:
        raise RuntimeError("handler bug")

    bad = informer.add_event_handler(ResourceEventHandlerFuncs(add=explode))
    rec = Recorder()
    informer.add_event_handler(rec)
    informer.start()
    assert informer.wait_for_sync(5)
    embedded_cluster.create(PODS, make_pod("a"))
    embedded_cluster.create(PODS, make_pod("b"))
    eventually(lambda: len(rec.snapshot()) == 2)
    eventually(lambda: bad.listener.errors == 2)


def test_resync_replays_cached_objects_as_updates_with_the_same_version(embedded_cluster: Any) -> None:
    clock = VirtualClock()
    embedded_cluster.create(PODS, make_pod("a"))
    informer = SharedIndexInformer(ListWatch.for_resource(embedded_cluster, PODS), clock=clock, resync_period=30)
    syncing, quiet = Recorder(), Recorder()
    informer.add_event_handler(syncing)
    informer.add_event_handler(quiet, resync_period=0)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        eventually(lambda: len(syncing.events) == 1 and len(quiet.events) == 1)
        eventually(clock.has_waiters)
        clock.advance(30)
        eventually(lambda: len(syncing.of("update")) == 1, what="a resync update")
        (_, key, old_rv, new_rv) = syncing.of("update")[0]
        assert key == "default/a" and old_rv == new_rv
        assert stays(lambda: quiet.of("update") == [], 0.1), "a handler without resync gets no Sync updates"
    finally:
        informer.stop()


@pytest.mark.parametrize(("requested", "effective"), [(0.2, 1.0), (0, 0.0), (5, 5.0)])
def test_resync_periods_are_at_least_one_second(embedded_cluster: Any, requested: float, effective: float):
    informer = SharedIndexInformer(ListWatch.for_resource(embedded_cluster, PODS), resync_period=requested)
    assert informer.resync_check_period == effective
    with pytest.raises(ValueError, match="must not be negative"):
        SharedIndexInformer(ListWatch.for_resource(embedded_cluster, PODS), resync_period=-1)


def test_selectors_are_pushed_down(embedded_cluster: Any) -> None:
    embedded_cluster.create(PODS, make_pod("web", labels={"app": "web"}))
    embedded_cluster.create(PODS, make_pod("db", labels={"app": "db"}))
    informer = SharedIndexInformer(ListWatch.for_resource(embedded_cluster, PODS, label_selector="app=web"))
    with informer:
        assert informer.wait_for_sync(5)
        embedded_cluster.create(PODS, make_pod("web2", labels={"app": "web"}))
        embedded_cluster.create(PODS, make_pod("db2", labels={"app": "db"}))
        eventually(lambda: sorted(informer.store.list_keys()) == ["default/web", "default/web2"])
        assert stays(lambda: "default/db2" not in informer.store)


def test_namespaced_informer_and_namespace_index(embedded_cluster: Any) -> None:
    embedded_cluster.create("namespaces", make_namespace("team-a"))
    embedded_cluster.create(PODS, make_pod("a", namespace="team-a"))
    embedded_cluster.create(PODS, make_pod("b"))
    everywhere = SharedIndexInformer(ListWatch.for_resource(embedded_cluster, PODS))
    team = SharedIndexInformer(ListWatch.for_resource(embedded_cluster, PODS, "team-a"))
    with everywhere, team:
        assert everywhere.wait_for_sync(5) and team.wait_for_sync(5)
        assert team.store.list_keys() == ["team-a/a"]
        assert [key_of(o) for o in everywhere.store.by_index(NAMESPACE_INDEX, "team-a")] == ["team-a/a"]
    with pytest.raises(ValueError, match="cluster-scoped"):
        ListWatch.for_resource(embedded_cluster, NODES, "team-a")


def test_filtering_handler_turns_matching_changes_into_adds_and_deletes(embedded_cluster: Any, informer):
    rec = Recorder()
    informer.add_event_handler(
        FilteringResourceEventHandler(lambda o: (o["metadata"].get("labels") or {}).get("v") == "yes", rec)
    )
    informer.start()
    embedded_cluster.create(PODS, make_pod("a", labels={"v": "no"}))
    relabel(embedded_cluster, "a", "yes")
    eventually(lambda: "default/a" in rec.snapshot())
    relabel(embedded_cluster, "a", "no")
    eventually(lambda: rec.snapshot() == {})
    assert [e[0] for e in rec.events] == ["add", "delete"] and rec.violations == []


def test_an_informer_runs_once_and_checks_its_handlers(embedded_cluster: Any, informer) -> None:
    with pytest.raises(TypeError, match="has no on_add"):
        informer.add_event_handler(object())
    informer.start()
    with pytest.raises(RuntimeError, match="already started"):
        informer.run(threading.Event())
    informer.stop()
    informer._thread = None  # the fixture must not stop it twice
    assert informer.is_stopped()
    with pytest.raises(RuntimeError, match="stopped"):
        informer.add_event_handler(Recorder())


def test_wait_for_sync_gives_up_after_its_timeout(embedded_cluster: Any) -> None:
    embedded_cluster.faults.fail_next(1000, verbs={"list"})
    informer = SharedIndexInformer(ListWatch.for_resource(embedded_cluster, PODS), backoff=fast_backoff())
    with informer:
        started = time.monotonic()
        assert informer.wait_for_sync(0.2) is False
        assert 0.2 <= time.monotonic() - started < 1.0
        embedded_cluster.faults.clear()
        assert informer.wait_for_sync(5)


class TestFactory:
    def test_one_informer_per_resource_namespace_and_selectors(self, embedded_cluster: Any) -> None:
        factory = SharedInformerFactory(embedded_cluster)
        pods = factory.informer_for("pods")
        assert factory.informer_for(PODS) is pods
        assert factory.informer_for("pods", label_selector="app=x") is not pods
        assert factory.informer_for("pods", namespace="kube-system") is not pods
        assert len(factory.informers()) == 3

    def test_start_and_wait_for_cache_sync(self, embedded_cluster: Any) -> None:
        embedded_cluster.create(PODS, make_pod("a"))
        with SharedInformerFactory(embedded_cluster) as factory:
            pods = factory.informer_for("pods")
            nodes = factory.informer_for("nodes")
            factory.start()
            synced = factory.wait_for_cache_sync(5)
            assert list(synced.values()) == [True, True]
            assert pods.store.list_keys() == ["default/a"] and nodes.store.list_keys() == []
            late = factory.informer_for("namespaces")
            factory.start()  # starts only the new one
            assert late.is_stopped() is False
            assert all(factory.wait_for_cache_sync(5).values())
            assert "default" in late.store
        assert pods.is_stopped() and late.is_stopped()

    def test_indexers_asked_for_later_are_added(self, embedded_cluster: Any) -> None:
        factory = SharedInformerFactory(embedded_cluster)
        factory.informer_for("pods")
        informer = factory.informer_for("pods", indexers={"node": lambda o: [o["spec"].get("nodeName", "")]})
        assert "node" in informer.store.get_indexers()

    def test_unknown_resources_are_refused_by_name(self, embedded_cluster: Any) -> None:
        with pytest.raises(Exception, match="doesn't have a resource type 'podz'"):
            SharedInformerFactory(embedded_cluster).informer_for("podz")


def test_handler_funcs_may_leave_methods_out(embedded_cluster: Any, informer) -> None:
    seen: list[str] = []
    informer.add_event_handler(ResourceEventHandlerFuncs(delete=lambda o: seen.append(
        o.key if isinstance(o, DeletedFinalStateUnknown) else key_of(o))))
    informer.start()
    assert informer.wait_for_sync(5)
    embedded_cluster.create(PODS, make_pod("a"))
    relabel(embedded_cluster, "a", "1")
    embedded_cluster.delete(PODS, "a", "default")
    eventually(lambda: seen == ["default/a"])
