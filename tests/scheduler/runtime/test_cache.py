"""SchedulerCache: assume / forget / confirm / expire, pods before nodes, snapshots stay put."""

from __future__ import annotations

import threading

import pytest

from minisched.clock import VirtualClock
from minisched.objects import make_node, make_pod
from minisched.scheduler.cache import CacheError, SchedulerCache


def _bound(pod: dict, node: str) -> dict:
    return {**pod, "spec": {**pod["spec"], "nodeName": node}}


def _cpu(cache: SchedulerCache, node: str) -> int:
    table = cache.snapshot()
    row = table.row(node)
    assert row is not None
    return int(table.requested("cpu")[row])


@pytest.fixture
def cache(virtual_clock: VirtualClock) -> SchedulerCache:
    c = SchedulerCache(clock=virtual_clock, assumed_ttl=30)
    c.add_node(make_node("n1"))
    c.add_node(make_node("n2"))
    return c


def test_assume_counts_at_once_and_forget_gives_the_room_back(cache: SchedulerCache) -> None:
    pod = make_pod("p", cpu="500m")
    cache.assume_pod(pod, "n1")
    assert _cpu(cache, "n1") == 500 and cache.is_assumed(pod)
    cache.forget_pod(pod)
    assert _cpu(cache, "n1") == 0 and not cache.is_assumed(pod)


def test_confirm_keeps_the_pod_counted_once(cache: SchedulerCache) -> None:
    pod = make_pod("p", cpu="500m")
    cache.assume_pod(pod, "n1")
    cache.finish_binding(pod)
    cache.add_pod(_bound(pod, "n1"))
    assert _cpu(cache, "n1") == 500 and not cache.is_assumed(pod)
    cache.forget_pod(pod)  # too late to forget a confirmed pod
    assert _cpu(cache, "n1") == 500


def test_informer_showing_another_node_wins(cache: SchedulerCache) -> None:
    pod = make_pod("p", cpu="500m")
    cache.assume_pod(pod, "n1")
    cache.add_pod(_bound(pod, "n2"))
    assert (_cpu(cache, "n1"), _cpu(cache, "n2")) == (0, 500)


def test_assumed_pod_expires_only_after_binding_finished_and_ttl(
    cache: SchedulerCache, virtual_clock: VirtualClock
) -> None:
    pod = make_pod("p", cpu="500m")
    cache.assume_pod(pod, "n1")
    virtual_clock.advance(100)
    assert cache.cleanup_expired() == 0, "binding still running: never expire"
    cache.finish_binding(pod)
    virtual_clock.advance(29)
    assert cache.cleanup_expired() == 0
    virtual_clock.advance(1)
    assert cache.cleanup_expired() == 1
    assert _cpu(cache, "n1") == 0 and cache.expired_total == 1


def test_assuming_twice_is_refused(cache: SchedulerCache) -> None:
    pod = make_pod("p")
    cache.assume_pod(pod, "n1")
    with pytest.raises(CacheError, match="already in the cache"):
        cache.assume_pod(pod, "n2")


def test_pod_before_its_node_counts_once_the_node_arrives(virtual_clock: VirtualClock) -> None:
    c = SchedulerCache(clock=virtual_clock)
    c.add_pod(_bound(make_pod("p", cpu="250m"), "late"))
    c.add_node(make_node("late"))
    assert _cpu(c, "late") == 250
    c.remove_node("late")
    c.remove_pod(_bound(make_pod("p"), "late"))
    c.add_node(make_node("late"))
    assert _cpu(c, "late") == 0, "a pod deleted while its node was gone must not come back"


def test_update_and_remove(cache: SchedulerCache) -> None:
    pod = _bound(make_pod("p", cpu="250m"), "n1")
    cache.add_pod(pod)
    running = {**pod, "status": {"phase": "Running"}}
    cache.update_pod(pod, running)
    assert _cpu(cache, "n1") == 250
    bigger = _bound(make_pod("p", cpu="1"), "n1")
    cache.update_pod(running, bigger)
    assert _cpu(cache, "n1") == 1000
    cache.remove_pod(bigger)
    assert _cpu(cache, "n1") == 0 and cache.pod_count() == 0


def test_snapshot_does_not_see_later_changes(cache: SchedulerCache) -> None:
    snap = cache.snapshot()
    cache.assume_pod(make_pod("p", cpu="1"), "n1")
    row = snap.row("n1")
    assert row is not None and int(snap.requested("cpu")[row]) == 0
    assert _cpu(cache, "n1") == 1000


def test_malformed_node_is_left_out(cache: SchedulerCache) -> None:
    bad = make_node("bad", cpu="four")
    cache.add_node(bad)
    assert "bad" not in cache.node_names()


def test_concurrent_assume_and_forget_balance(cache: SchedulerCache) -> None:
    pods = [make_pod(f"p{i}", cpu="10m") for i in range(400)]

    def work(chunk: list[dict]) -> None:
        for p in chunk:
            cache.assume_pod(p, "n1")
            cache.forget_pod(p)
            cache.assume_pod(p, "n2")

    threads = [threading.Thread(target=work, args=(pods[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (_cpu(cache, "n1"), _cpu(cache, "n2")) == (0, 4000)


def test_label_and_deletion_updates_reach_the_pod_index(cache: SchedulerCache) -> None:
    """Updates that keep the requests but change labels or start a deletion are re-read: spreading
    counts pods by label and skips terminating ones (kube's countPodsMatchSelector)."""
    import copy

    from minisched.scheduler.framework.types import LabelSelector, Requirement

    web = LabelSelector((Requirement("app", "In", ("web",)),))
    pod = _bound(make_pod("p", labels={"app": "db"}), "n1")
    cache.add_pod(pod)
    assert cache.snapshot().count_matching(web, "default").tolist() == [0, 0]
    relabelled = copy.deepcopy(pod)
    relabelled["metadata"]["labels"] = {"app": "web"}
    cache.update_pod(pod, relabelled)
    assert cache.snapshot().count_matching(web, "default").tolist() == [1, 0]
    deleting = copy.deepcopy(relabelled)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cache.update_pod(relabelled, deleting)
    assert cache.snapshot().count_matching(web, "default").tolist() == [0, 0]
