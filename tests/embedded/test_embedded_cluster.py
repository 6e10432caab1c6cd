"""Embedded-only behaviour: the virtual clock, history window, bookmarks, fault hooks, the kubelet
helper, computed PDB status, thread safety. (Behaviour shared with a real server is in tests/contract.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster import Cluster, connect
from minisched.cluster.embedded import EmbeddedCluster, Kubelet
from minisched.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Expired,
    Forbidden,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
)
from minisched.objects import make_node, make_pod, make_priority_class
from minisched.resources import (
    CONFIG_MAPS,
    CRDS,
    NAMESPACES,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    PRIORITY_CLASSES,
    Resource,
)


@pytest.fixture
def vc() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def cl(vc: VirtualClock) -> Iterator[EmbeddedCluster]:
    cluster = EmbeddedCluster(clock=vc, history_window=5, bookmark_period=10, seed=1)
    yield cluster
    cluster.close()


ANY_SCHEMA = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}


def cm(name: str, ns: str = "default") -> dict:
    return {"metadata": {"name": name, "namespace": ns}, "data": {}}


def drain(w: Any, limit: int = 100) -> list[dict]:
    out = []
    for ev in w:
        out.append(ev)
        if len(out) >= limit:
            break
    return out


def test_it_is_a_cluster_and_the_default_backend() -> None:
    c = connect("embedded")
    try:
        assert isinstance(c, Cluster) and c.name == "embedded"
    finally:
        c.close()


def test_initial_namespaces_and_priority_classes(cl: EmbeddedCluster) -> None:
    names = [n["metadata"]["name"] for n in cl.list(NAMESPACES)["items"]]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    ns = cl.get(NAMESPACES, "default")
    assert ns["status"]["phase"] == "Active" and ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "default"}
    assert cl.get(PRIORITY_CLASSES, "system-node-critical")["value"] == 2000001000


def test_timestamps_come_from_the_virtual_clock(cl: EmbeddedCluster, vc: VirtualClock) -> None:
    assert cl.create(CONFIG_MAPS, cm("a"))["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    vc.advance(90)
    assert cl.create(CONFIG_MAPS, cm("b"))["metadata"]["creationTimestamp"] == "2026-01-01T00:01:30Z"
    cl.create(PODS, make_pod("p"))
    cl.bind("default", "p", "n")
    deleted = cl.delete(PODS, "p", "default")
    assert deleted["metadata"]["deletionTimestamp"] == "2026-01-01T00:02:00Z"  # now + 30 s grace


def test_seeded_clusters_are_repeatable() -> None:
    def run() -> list[str]:
        c = EmbeddedCluster(clock=VirtualClock(), seed=7)
        obj = cm("")
        del obj["metadata"]["name"]
        obj["metadata"]["generateName"] = "x-"
        made = c.create(CONFIG_MAPS, obj)
        return [made["metadata"]["name"], made["metadata"]["uid"]]

    assert run() == run()


def test_history_window_expires_old_versions(cl: EmbeddedCluster) -> None:
    start = cl.list(CONFIG_MAPS)["metadata"]["resourceVersion"]
    for i in range(6):
        cl.create(CONFIG_MAPS, cm(f"c{i}"))
    w = cl.watch(CONFIG_MAPS, resource_version=start)
    with pytest.raises(Expired) as err:
        next(iter(w))
    assert "too old resource version" in err.value.message
    assert cl.open_watch_count() == 0
    recent = cl.list(CONFIG_MAPS)["items"][-2]["metadata"]["resourceVersion"]
    w = cl.watch(CONFIG_MAPS, resource_version=recent, timeout_seconds=0)
    assert [e["object"]["metadata"]["name"] for e in drain(w)] == ["c5"]


def test_history_is_per_resource(cl: EmbeddedCluster) -> None:
    start = cl.list(PODS)["metadata"]["resourceVersion"]
    for i in range(10):
        cl.create(CONFIG_MAPS, cm(f"c{i}"))
    cl.create(PODS, make_pod("p"))
    w = cl.watch(PODS, resource_version=start, timeout_seconds=0)
    assert [e["type"] for e in drain(w)] == ["ADDED"]


def test_watch_from_before_the_server_started_is_expired(cl: EmbeddedCluster) -> None:
    with pytest.raises(Expired):
        next(iter(cl.watch(CONFIG_MAPS, resource_version="1")))


def test_watch_from_the_future_is_a_timeout(cl: EmbeddedCluster) -> None:
    with pytest.raises(Exception) as err:
        next(iter(cl.watch(CONFIG_MAPS, resource_version="999999")))
    assert getattr(err.value, "status", None) == 504


def test_bad_resource_version_is_a_bad_request(cl: EmbeddedCluster) -> None:
    with pytest.raises(BadRequest):
        cl.watch(CONFIG_MAPS, resource_version="abc")


def test_force_expiry(cl: EmbeddedCluster) -> None:
    rv = cl.create(CONFIG_MAPS, cm("a"))["metadata"]["resourceVersion"]
    cl.create(CONFIG_MAPS, cm("b"))
    cl.faults.force_expiry()
    with pytest.raises(Expired):
        next(iter(cl.watch(CONFIG_MAPS, resource_version=rv)))
    with pytest.raises(Expired):  # resources never written before are compacted too
        next(iter(cl.watch(POD_DISRUPTION_BUDGETS, resource_version=rv)))
    now = cl.list(CONFIG_MAPS)["metadata"]["resourceVersion"]
    w = cl.watch(CONFIG_MAPS, resource_version=now)
    cl.create(CONFIG_MAPS, cm("c"))
    assert next(iter(w))["object"]["metadata"]["name"] == "c"
    w.stop()


def test_bookmarks_on_the_virtual_clock(cl: EmbeddedCluster, vc: VirtualClock) -> None:
    rv = cl.list(CONFIG_MAPS)["metadata"]["resourceVersion"]
    w = cl.watch(CONFIG_MAPS, resource_version=rv, allow_bookmarks=True, timeout_seconds=25)
    got: list[dict] = []
    reader = threading.Thread(target=lambda: got.extend(w), daemon=True)
    reader.start()
    cl.create(CONFIG_MAPS, cm("a"))
    time.sleep(0.1)
    vc.advance(11)  # a bookmark period passes
    time.sleep(0.2)
    latest = cl.create(CONFIG_MAPS, cm("b"))["metadata"]["resourceVersion"]
    time.sleep(0.1)
    vc.advance(15)  # past the timeout: one more bookmark, then the stream ends
    reader.join(5)
    assert not reader.is_alive()
    types = [e["type"] for e in got]
    assert types == ["ADDED", "BOOKMARK", "ADDED", "BOOKMARK"], types
    assert got[1]["object"] == {"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"resourceVersion": got[0]["object"]["metadata"]["resourceVersion"]}}
    assert got[3]["object"]["metadata"]["resourceVersion"] == latest


def test_no_bookmarks_unless_asked(cl: EmbeddedCluster, vc: VirtualClock) -> None:
    w = cl.watch(CONFIG_MAPS, resource_version=cl.list(CONFIG_MAPS)["metadata"]["resourceVersion"],
                 timeout_seconds=25)
    got: list[dict] = []
    reader = threading.Thread(target=lambda: got.extend(w), daemon=True)
    reader.start()
    vc.advance(30)
    reader.join(5)
    assert got == [] and not reader.is_alive()


def test_fail_next(cl: EmbeddedCluster) -> None:
    cl.faults.fail_next(2)
    for _ in range(2):
        with pytest.raises(ServiceUnavailable):
            cl.get(NAMESPACES, "default")
    assert cl.get(NAMESPACES, "default")
    cl.faults.fail_next(1, Conflict("injected"), verbs={"bind"})
    cl.create(PODS, make_pod("p"))  # not a bind: unaffected
    with pytest.raises(Conflict, match="injected"):
        cl.bind("default", "p", "n")
    cl.bind("default", "p", "n")
    assert cl.faults.injected == 3 and cl.faults.pending() == 0


def test_drop_watches_ends_streams_and_they_can_resume(cl: EmbeddedCluster) -> None:
    rv = cl.list(CONFIG_MAPS)["metadata"]["resourceVersion"]
    w = cl.watch(CONFIG_MAPS, resource_version=rv)
    cl.create(CONFIG_MAPS, cm("a"))
    first = next(iter(w))
    ended = threading.Event()
    threading.Thread(target=lambda: (list(w), ended.set()), daemon=True).start()
    time.sleep(0.05)
    assert cl.faults.drop_watches() == 1
    assert ended.wait(5)
    assert cl.open_watch_count() == 0
    cl.create(CONFIG_MAPS, cm("b"))
    resumed = cl.watch(CONFIG_MAPS, resource_version=first["object"]["metadata"]["resourceVersion"],
                       timeout_seconds=0)
    assert [e["object"]["metadata"]["name"] for e in drain(resumed)] == ["b"]


def test_slow_watchers_do_not_block_writers(cl: EmbeddedCluster) -> None:
    w = cl.watch(CONFIG_MAPS, resource_version=cl.list(CONFIG_MAPS)["metadata"]["resourceVersion"])
    for i in range(300):  # nobody reads w meanwhile
        cl.create(CONFIG_MAPS, cm(f"c{i}"))
    names = [next(iter(w))["object"]["metadata"]["name"] for _ in range(300)]
    assert names == [f"c{i}" for i in range(300)]
    w.stop()


def test_global_default_priority_class(cl: EmbeddedCluster) -> None:
    cl.create(PRIORITY_CLASSES, make_priority_class("normal", 100, global_default=True))
    pod = cl.create(PODS, make_pod("p"))
    assert pod["spec"]["priority"] == 100 and pod["spec"]["priorityClassName"] == "normal"
    with pytest.raises(Forbidden, match="already marked as default"):
        cl.create(PRIORITY_CLASSES, make_priority_class("other", 5, global_default=True))


def test_computed_disruption_budget(cl: EmbeddedCluster) -> None:
    for name in ("a", "b", "c"):
        cl.create(PODS, make_pod(name, labels={"app": "web"}))
        cl.bind("default", name, "n")
    Kubelet(cl).sync()  # Running and Ready
    cl.create(POD_DISRUPTION_BUDGETS, {"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}})
    cl.evict("default", "a")  # 3 healthy, 2 desired: allowed
    with pytest.raises(TooManyRequests) as err:
        cl.evict("default", "b")  # a is terminating, so only 2 healthy
    assert "needs 2 healthy pods and has 2 currently" in err.value.causes[0].message


def test_computed_budget_with_percentages(cl: EmbeddedCluster) -> None:
    for name in ("a", "b"):
        cl.create(PODS, make_pod(name, labels={"app": "db"}))
        cl.bind("default", name, "n")
    Kubelet(cl).sync()
    cl.create(POD_DISRUPTION_BUDGETS, {"metadata": {"name": "db"}, "spec": {
        "selector": {"matchLabels": {"app": "db"}}, "minAvailable": "100%"}})
    with pytest.raises(TooManyRequests):
        cl.evict("default", "a")


def test_kubelet_starts_bound_pods_and_finishes_deletions(cl: EmbeddedCluster) -> None:
    cl.create(NODES, make_node("n1"))
    cl.create(PODS, make_pod("p"))
    cl.create(PODS, make_pod("unbound"))
    cl.bind("default", "p", "n1")
    kubelet = Kubelet(cl)
    assert kubelet.sync() == {"started": 1, "deleted": 0}
    pod = cl.get(PODS, "p", "default")
    assert pod["status"]["phase"] == "Running" and pod["status"]["podIP"]
    assert cl.get(PODS, "unbound", "default")["status"]["phase"] == "Pending"
    cl.delete(PODS, "p", "default")
    assert cl.get(PODS, "p", "default")["metadata"]["deletionTimestamp"]
    assert kubelet.sync() == {"started": 0, "deleted": 1}
    with pytest.raises(NotFound):
        cl.get(PODS, "p", "default")


def test_kubelet_finish(cl: EmbeddedCluster) -> None:
    cl.create(PODS, make_pod("job"))
    cl.bind("default", "job", "n1")
    Kubelet(cl).sync()
    assert Kubelet(cl).finish("default", "job")["status"]["phase"] == "Succeeded"
    cl.delete(PODS, "job", "default")  # terminal: deleted at once
    with pytest.raises(NotFound):
        cl.get(PODS, "job", "default")


def test_deleting_a_namespace_deletes_its_contents(cl: EmbeddedCluster) -> None:
    cl.create(NAMESPACES, {"metadata": {"name": "team"}})
    cl.create(CONFIG_MAPS, cm("a", "team"))
    cl.create(PODS, make_pod("p", namespace="team"))
    w = cl.watch(PODS, "team", resource_version=cl.list(PODS)["metadata"]["resourceVersion"], timeout_seconds=0)
    cl.delete(NAMESPACES, "team")
    assert cl.count(CONFIG_MAPS, "team") == 0 and cl.count(PODS, "team") == 0
    assert [e["type"] for e in drain(w)] == ["DELETED"]
    with pytest.raises(NotFound):
        cl.create(CONFIG_MAPS, cm("b", "team"))


def test_custom_resources_by_name(cl: EmbeddedCluster) -> None:
    cl.create(CRDS, {"metadata": {"name": "widgets.example.io"}, "spec": {
        "group": "example.io", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": ANY_SCHEMA}]}})
    cl.create("widgets", {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert cl.get("wd", "w")["kind"] == "Widget"
    assert cl.list("widgets.example.io")["kind"] == "WidgetList"
    cl.delete(CRDS, "widgets.example.io")
    with pytest.raises(NotFound, match="doesn't have a resource type"):
        cl.get("widgets", "w")


def test_crd_versions_share_storage(cl: EmbeddedCluster) -> None:
    crd = cl.create(CRDS, {"metadata": {"name": "gizmos.example.io"}, "spec": {
        "group": "example.io", "scope": "Cluster", "names": {"plural": "gizmos", "kind": "Gizmo"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": ANY_SCHEMA},
                     {"name": "v2", "served": True, "storage": False, "schema": ANY_SCHEMA}]}})
    v1, v2 = Resource.from_crd(crd, "v1"), Resource.from_crd(crd, "v2")
    cl.create(v2, {"apiVersion": "example.io/v2", "kind": "Gizmo", "metadata": {"name": "g"}})
    assert cl.get(v1, "g")["apiVersion"] == "example.io/v1"
    assert cl.get(v2, "g")["apiVersion"] == "example.io/v2"


def test_closed_cluster_refuses_requests_and_ends_watches(vc: VirtualClock) -> None:
    c = EmbeddedCluster(clock=vc)
    w = c.watch(CONFIG_MAPS)
    c.close()
    assert list(w) == []
    with pytest.raises(Exception) as err:
        c.get(NAMESPACES, "default")
    assert getattr(err.value, "status", None) == 503


def test_concurrent_writers_get_distinct_increasing_versions() -> None:
    c = EmbeddedCluster()
    w = c.watch(CONFIG_MAPS, resource_version=c.list(CONFIG_MAPS)["metadata"]["resourceVersion"])
    errors: list[BaseException] = []

    def write(prefix: str) -> None:
        try:
            for i in range(200):
                c.create(CONFIG_MAPS, cm(f"{prefix}-{i}"))
                c.patch(CONFIG_MAPS, f"{prefix}-{i}", {"data": {"i": str(i)}}, "default")
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=write, args=(f"t{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    it = iter(w)
    rvs = [int(next(it)["object"]["metadata"]["resourceVersion"]) for _ in range(1600)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 1600
    assert c.count(CONFIG_MAPS) == 800
    c.close()


def test_conflicting_updates_from_threads_exactly_one_wins() -> None:
    c = EmbeddedCluster()
    base = c.create(CONFIG_MAPS, cm("x"))
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def update(n: int) -> None:
        barrier.wait()
        try:
            c.update(CONFIG_MAPS, dict(base, data={"by": str(n)}))
            outcomes.append("ok")
        except Conflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=update, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict"] * 7 + ["ok"]


def test_a_watcher_too_far_behind_is_closed() -> None:
    c = EmbeddedCluster(max_watch_backlog=10)
    c.create(CONFIG_MAPS, cm("before"))
    w = c.watch(CONFIG_MAPS, resource_version="0")  # one replayed ADDED, which does not count
    for i in range(10):
        c.create(CONFIG_MAPS, cm(f"c{i}"))
    assert c.open_watch_count() == 1
    c.create(CONFIG_MAPS, cm("one-too-many"))  # writers never wait: the stream is closed instead
    assert list(w) == [] and w.overflowed
    assert c.open_watch_count() == 0
    c.close()


def test_a_continue_token_older_than_the_history_is_expired(cl: EmbeddedCluster) -> None:
    for i in range(4):
        cl.create(CONFIG_MAPS, cm(f"c{i}"))
    first = cl.list(CONFIG_MAPS, "default", limit=2)
    cl.create(CONFIG_MAPS, cm("later"))
    cl.faults.force_expiry()
    with pytest.raises(Expired, match="continue parameter is too old"):
        cl.list(CONFIG_MAPS, "default", limit=2, continue_token=first["metadata"]["continue"])


def test_a_continue_token_with_nothing_changed_needs_no_history(cl: EmbeddedCluster) -> None:
    for i in range(4):
        cl.create(CONFIG_MAPS, cm(f"c{i}"))
    first = cl.list(CONFIG_MAPS, "default", limit=2)
    cl.faults.force_expiry()  # compacted, but nothing changed since the first page
    rest = cl.list(CONFIG_MAPS, "default", continue_token=first["metadata"]["continue"])
    assert [i["metadata"]["name"] for i in rest["items"]] == ["c2", "c3"]


def test_generated_names_give_up_after_eight_taken_names_as_kube_apiserver_does() -> None:
    # store.go maxNameGenerationCreateAttempts = 8; rest.CheckGeneratedNameError's message. (A real
    # server's generator cannot be made to collide, so this lives here, not in tests/contract.)
    cluster = EmbeddedCluster(seed=3)
    cluster.create(CONFIG_MAPS, {"metadata": {"name": "gen-taken"}})
    calls: list[str] = []

    def always_taken(base: str) -> str:
        calls.append(base)
        return "gen-taken"

    cluster.name_generator = always_taken
    with pytest.raises(AlreadyExists) as err:
        cluster.create(CONFIG_MAPS, {"metadata": {"generateName": "gen-"}})
    assert len(calls) == 8
    assert err.value.status == 409
    assert err.value.message == ('configmaps "gen-taken" already exists, the server was not able to generate a '
                                 "unique name for the object")
    assert err.value.details["retryAfterSeconds"] == 1
    assert cluster.count(CONFIG_MAPS, "default") == 1
    # a name given by the client is tried once: no generator call, kube's plain message
    with pytest.raises(AlreadyExists) as err:
        cluster.create(CONFIG_MAPS, {"metadata": {"name": "gen-taken"}})
    assert len(calls) == 8
    assert err.value.message == 'configmaps "gen-taken" already exists'
    cluster.close()
