"""The reflector's watch-list (client-go's WatchListClient): the state streamed by a watch, ended by
the k8s.io/initial-events-end bookmark, each object transformed as it arrives; the list when the
server refuses it or the stream fails before its bookmark."""

from __future__ import annotations

from typing import Any

from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import Expired, Invalid
from minisched.informer import Reflector, SharedInformerFactory, Store, strip_managed_fields
from minisched.resources import CONFIG_MAPS
from tests.informer.fakes import ListAnswer, ScriptedCluster, Stream, bookmark, event, list_watch, pod
from tests.informer.test_reflector import fast_backoff, names, run_until
from tests.workqueue.helpers import eventually

Object = dict[str, Any]


def end_of_state(rv: int) -> Any:
    marker = bookmark(rv)
    marker["object"]["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
    return marker


def test_streams_the_state_then_watches_on_from_the_same_stream() -> None:
    cluster = ScriptedCluster([], [Stream([
        event("ADDED", pod("a", 5)), event("ADDED", pod("b", 6)),
        bookmark(8),  # a plain bookmark before the end: not the end
        end_of_state(10),
        event("ADDED", pod("c", 11)), event("MODIFIED", pod("a", 12)),
    ], hold=True)])
    store = Store()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff(), watch_list=True)
    run_until(reflector, cluster, lambda: reflector.last_sync_resource_version == "12")
    assert cluster.list_calls == []
    assert len(cluster.watch_calls) == 1  # one stream: the state, then the changes
    call = cluster.watch_calls[0]
    assert (call["resource_version"], call["send_initial_events"], call["resource_version_match"],
            call["allow_bookmarks"]) == ("", True, "NotOlderThan", True)
    assert names(store) == {"default/a": "12", "default/b": "6", "default/c": "11"}
    assert reflector.stats.watch_lists == 1 and reflector.stats.lists == 0


class RecordingStore(Store):
    """A store with a transform (as a DeltaFIFO has), recording when objects were transformed."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []
        self.replaced: list[Object] = []

    def transformer(self, obj: Object) -> Object:
        self.log.append(f"transform {obj['metadata']['name']}")
        return {**obj, "spec": None}

    def replace(self, objs: Any, resource_version: str = "") -> None:
        self.log.append("replace")
        self.replaced = list(objs)
        super().replace(self.replaced, resource_version)


def test_each_streamed_object_is_transformed_as_it_arrives_not_after_the_whole_state() -> None:
    big = [{**pod(n, i + 1), "spec": {"payload": "x" * 1000}} for i, n in enumerate("abc")]
    cluster = ScriptedCluster([], [Stream([*(event("ADDED", o) for o in big), end_of_state(3)], hold=True)])
    store = RecordingStore()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff(), watch_list=True)
    run_until(reflector, cluster, lambda: reflector.stats.watch_lists == 1)
    assert store.log == ["transform a", "transform b", "transform c", "replace"]
    assert [o["spec"] for o in store.replaced] == [None, None, None]


def test_a_server_that_refuses_the_watch_list_is_listed_instead() -> None:
    refused = Invalid('ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents '
                      "is forbidden for watch unless the WatchList feature gate is enabled")
    cluster = ScriptedCluster([ListAnswer([pod("a", 5)], "10")],
                              [Stream([refused]), Stream([event("ADDED", pod("b", 11))], hold=True)])
    store = Store()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff(), watch_list=True)
    run_until(reflector, cluster, lambda: reflector.last_sync_resource_version == "11")
    assert reflector.stats.watch_list_fallbacks == 1 and reflector.stats.lists == 1
    assert cluster.list_calls[0]["resource_version"] == "0"
    assert "send_initial_events" not in cluster.watch_calls[1] and cluster.watch_calls[1]["resource_version"] == "10"
    assert names(store) == {"default/a": "5", "default/b": "11"}


class ClusterWithoutWatchList(ScriptedCluster):
    """A user's own Cluster written before the watch-list: its watch() takes none of its options."""

    def watch(self, resource: Any, namespace: str | None = None, *, resource_version: str | None = None,
              timeout_seconds: float | None = None, allow_bookmarks: bool = False, **selectors: Any) -> Any:
        if "send_initial_events" in selectors or "resource_version_match" in selectors:
            raise TypeError("watch() got an unexpected keyword argument 'send_initial_events'")
        return super().watch(resource, namespace, resource_version=resource_version,
                             timeout_seconds=timeout_seconds, allow_bookmarks=allow_bookmarks, **selectors)


def test_any_error_of_the_watch_list_falls_back_to_the_list_as_client_go_does() -> None:
    # client-go's reflector lists after any watch-list error ("making progress is better than
    # deadlocking"); catching only API errors left this cluster retrying the watch-list for ever.
    cluster = ClusterWithoutWatchList([ListAnswer([pod("a", 5)], "10")],
                                      [Stream([event("ADDED", pod("b", 11))], hold=True)])
    store = Store()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff(), watch_list=True)
    run_until(reflector, cluster, lambda: reflector.last_sync_resource_version == "11")
    assert reflector.stats.watch_list_fallbacks == 1 and reflector.stats.lists == 1
    assert names(store) == {"default/a": "5", "default/b": "11"}


def test_a_stream_that_ends_before_its_bookmark_is_listed_instead_and_nothing_half_streamed_is_kept() -> None:
    cluster = ScriptedCluster([ListAnswer([pod("b", 7)], "10")],
                              [Stream([event("ADDED", pod("a", 5))]), Stream(hold=True)])
    store = Store()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff(), watch_list=True)
    run_until(reflector, cluster, lambda: len(cluster.watch_calls) == 2)
    assert reflector.stats.watch_list_fallbacks == 1 and reflector.stats.watch_lists == 0
    assert names(store) == {"default/b": "7"}


def test_after_a_watch_410_the_watch_list_asks_for_a_state_no_older_than_the_last_seen() -> None:
    cluster = ScriptedCluster([], [
        Stream([event("ADDED", pod("a", 5)), end_of_state(10), event("ADDED", pod("b", 12)), Expired("too old")]),
        Stream([event("ADDED", pod("b", 12)), end_of_state(20)], hold=True),
    ])
    store = Store()
    reflector = Reflector(list_watch(cluster), store, backoff=fast_backoff(), watch_list=True)
    run_until(reflector, cluster, lambda: reflector.stats.watch_lists == 2)
    assert [c["resource_version"] for c in cluster.watch_calls] == ["", "12"]
    assert names(store) == {"default/b": "12"}  # a went while the watch was down: the replace removed it


def test_an_informer_factory_with_watch_list_syncs_from_the_embedded_server_without_a_list() -> None:
    cluster = EmbeddedCluster()
    cluster.create(CONFIG_MAPS, {"metadata": {"name": "a", "namespace": "default", "managedFields": [{"manager": "m"}]}})
    factory = SharedInformerFactory(cluster, transform=strip_managed_fields, watch_list=True)
    informer = factory.informer_for(CONFIG_MAPS)
    factory.start()
    try:
        assert all(factory.wait_for_cache_sync(10).values())
        assert informer.store.get_by_key("default/a") is not None
        assert "managedFields" not in informer.store.get_by_key("default/a")["metadata"]
        cluster.create(CONFIG_MAPS, {"metadata": {"name": "b", "namespace": "default"}})
        eventually(lambda: informer.store.get_by_key("default/b") is not None, 5, "b in the cache")
        stats = informer._reflector.stats  # type: ignore[union-attr]
        assert (stats.watch_lists, stats.lists, stats.watch_list_fallbacks) == (1, 0, 0)
    finally:
        factory.shutdown()
