"""The informer against every backend: what it shows must be what the server has."""

from __future__ import annotations

import uuid
from typing import Any

from minisched.informer import ListWatch, SharedIndexInformer
from minisched.meta import key_of, resource_version_of
from minisched.objects import make_namespace, make_pod
from minisched.resources import NAMESPACES, PODS
from tests.informer.recorder import Recorder
from tests.workqueue.helpers import eventually


def test_cache_and_handler_follow_the_server(cluster: Any) -> None:
    ns = f"informer-{uuid.uuid4().hex[:6]}"
    cluster.create(NAMESPACES, make_namespace(ns))
    for name in ("a", "b", "c"):
        cluster.create(PODS, make_pod(name, namespace=ns, labels={"app": "web" if name != "c" else "db"}))

    def server() -> dict[str, str]:
        return {key_of(o): resource_version_of(o) for o in cluster.list(PODS, ns, label_selector="app=web")["items"]}

    informer = SharedIndexInformer(ListWatch.for_resource(cluster, PODS, ns, label_selector="app=web"))
    rec = Recorder()
    informer.add_event_handler(rec)
    with informer:
        assert informer.wait_for_sync(30)
        assert sorted(informer.store.list_keys()) == [f"{ns}/a", f"{ns}/b"]
        cluster.create(PODS, make_pod("d", namespace=ns, labels={"app": "web"}))
        cluster.patch(PODS, "a", {"metadata": {"annotations": {"touched": "yes"}}}, ns)
        cluster.delete(PODS, "b", ns)
        cluster.patch(PODS, "c", {"metadata": {"labels": {"app": "web"}}}, ns)  # starts matching
        eventually(lambda: rec.snapshot() == server() and len(server()) == 3, 30, "the informer to catch up")
        assert {key_of(o): resource_version_of(o) for o in informer.store.list()} == server()
        assert rec.violations == []
        assert int(informer.last_sync_resource_version) >= max(int(rv) for rv in server().values())
