"""RealCluster against the real API server: verbs, watch, errors, binding, eviction, RBAC."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.cluster.real import RealCluster
from minisched.controlplane import ControlPlane, ControlPlaneOptions, fake_node, wait_for
from minisched.errors import AlreadyExists, Conflict, Expired, Forbidden, Invalid, NotFound
from minisched.resources import Resource
from tests.plugins.controlplane import require_binaries

pytestmark = pytest.mark.realcluster


def _pod(name: str, namespace: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}], **spec},
    }


def test_real_cluster_implements_the_cluster_protocol(real_cluster: RealCluster) -> None:
    assert isinstance(real_cluster, Cluster)
    assert real_cluster.name == "real"


def test_create_get_list_update_patch_delete(real_cluster: RealCluster, real_namespace: str) -> None:
    created = real_cluster.create(
        "configmaps", {"metadata": {"name": "cm", "namespace": real_namespace}, "data": {"a": "1"}}
    )
    assert created["metadata"]["uid"] and created["kind"] == "ConfigMap"
    assert real_cluster.get("configmaps", "cm", real_namespace)["data"] == {"a": "1"}

    created["data"]["a"] = "2"
    updated = real_cluster.update("configmaps", created)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

    patched = real_cluster.patch("configmaps", "cm", {"data": {"b": "3", "a": None}}, real_namespace)
    assert patched["data"] == {"b": "3"}

    listed = real_cluster.list("configmaps", real_namespace)
    assert listed["kind"] == "ConfigMapList" and listed["metadata"]["resourceVersion"]
    assert [(i["kind"], i["apiVersion"], i["metadata"]["name"]) for i in listed["items"]] == [
        ("ConfigMap", "v1", "cm")
    ]

    real_cluster.delete("configmaps", "cm", real_namespace)
    with pytest.raises(NotFound):
        real_cluster.get("configmaps", "cm", real_namespace)


def test_errors_map_to_the_shared_types(real_cluster: RealCluster, real_namespace: str) -> None:
    with pytest.raises(NotFound) as not_found:
        real_cluster.get("pods", "missing", real_namespace)
    assert not_found.value.status == 404 and "missing" in not_found.value.message

    pod = real_cluster.create("pods", _pod("p", real_namespace))
    with pytest.raises(AlreadyExists) as exists:
        real_cluster.create("pods", _pod("p", real_namespace))
    assert exists.value.status == 409 and exists.value.reason == "AlreadyExists"

    real_cluster.patch("pods", "p", {"metadata": {"labels": {"touched": "yes"}}}, real_namespace)
    with pytest.raises(Conflict) as conflict:
        real_cluster.update("pods", pod)  # pod still carries the old resourceVersion
    assert conflict.value.status == 409 and "modified" in conflict.value.message

    bad = _pod("BAD_NAME", real_namespace)
    with pytest.raises(Invalid) as invalid:
        real_cluster.create("pods", bad)
    assert invalid.value.status == 422
    assert any(c.field == "metadata.name" for c in invalid.value.causes)

    with pytest.raises(NotFound):
        real_cluster.delete("pods", "missing", real_namespace)


def test_label_and_field_selectors_and_paging(real_cluster: RealCluster, real_namespace: str) -> None:
    for i in range(5):
        real_cluster.create("pods", _pod(f"p{i}", real_namespace, labels={"tier": "a" if i < 3 else "b"}))
    names = lambda result: sorted(i["metadata"]["name"] for i in result["items"])  # noqa: E731
    assert names(real_cluster.list("pods", real_namespace, label_selector="tier=a")) == ["p0", "p1", "p2"]
    assert names(real_cluster.list("pods", real_namespace, label_selector="tier notin (a)")) == ["p3", "p4"]
    assert names(real_cluster.list("pods", real_namespace, field_selector="metadata.name=p4")) == ["p4"]
    all_pods = real_cluster.list("pods", None, field_selector=f"metadata.namespace={real_namespace}")
    assert names(all_pods) == ["p0", "p1", "p2", "p3", "p4"]

    first = real_cluster.list("pods", real_namespace, limit=2)
    assert len(first["items"]) == 2 and first["metadata"].get("continue")
    rest = real_cluster.list("pods", real_namespace, limit=10, continue_token=first["metadata"]["continue"])
    assert len(rest["items"]) == 3


def test_status_subresource(real_cluster: RealCluster, real_namespace: str) -> None:
    real_cluster.create("pods", _pod("s", real_namespace))
    patched = real_cluster.patch(
        "pods", "s", {"status": {"phase": "Failed"}}, real_namespace, subresource="status"
    )
    assert patched["status"]["phase"] == "Failed"
    # The main resource ignores status changes.
    pod = real_cluster.get("pods", "s", real_namespace)
    pod["status"]["phase"] = "Succeeded"
    assert real_cluster.update("pods", pod)["status"]["phase"] == "Failed"


def test_watch_sees_changes_in_order_with_bookmarks(real_cluster: RealCluster, real_namespace: str) -> None:
    start = real_cluster.list("pods", real_namespace)["metadata"]["resourceVersion"]
    watch = real_cluster.watch(
        "pods", real_namespace, resource_version=start, allow_bookmarks=True, timeout_seconds=20
    )
    real_cluster.create("pods", _pod("w", real_namespace))
    real_cluster.patch("pods", "w", {"metadata": {"labels": {"x": "1"}}}, real_namespace)
    real_cluster.delete("pods", "w", real_namespace)
    seen: list[tuple[str, str]] = []
    versions: list[int] = []
    for event in watch:
        if event["type"] == "BOOKMARK":
            continue
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        versions.append(int(event["object"]["metadata"]["resourceVersion"]))
        assert event["object"]["kind"] == "Pod"
        if event["type"] == "DELETED":
            watch.stop()
    # Even an unbound pod's deletion is two writes on a real server: deletionTimestamp (grace 0)
    # is set first (a MODIFIED event), then the object is removed.
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
    assert versions == sorted(versions)


def test_watch_stop_from_another_thread_ends_iteration(
    real_cluster: RealCluster, real_namespace: str
) -> None:
    watch = real_cluster.watch("pods", real_namespace)
    threading.Timer(0.5, watch.stop).start()
    started = time.monotonic()
    assert list(watch) == []
    assert time.monotonic() - started < 5
    # The pool stays usable after a stopped watch.
    assert real_cluster.list("pods", real_namespace)["items"] == []


@pytest.fixture(scope="module")
def uncached_control_plane() -> Any:
    """A second control plane whose API server has no watch cache, so etcd compaction expires versions."""
    with ControlPlane(ControlPlaneOptions(start_kwok=False, watch_cache=False), require_binaries()) as cp:
        yield cp


def test_watch_from_a_compacted_resource_version_raises_expired(uncached_control_plane: ControlPlane) -> None:
    with RealCluster.from_kubeconfig(path=str(uncached_control_plane.kubeconfig)) as cluster:
        cluster.create("configmaps", {"metadata": {"name": "before", "namespace": "default"}})
        old = cluster.list("configmaps", "default")["metadata"]["resourceVersion"]
        # etcd keeps the compaction revision itself; two writes put `old`+1 strictly before it.
        cluster.create("configmaps", {"metadata": {"name": "after-1", "namespace": "default"}})
        cluster.create("configmaps", {"metadata": {"name": "after-2", "namespace": "default"}})
        uncached_control_plane.compact_etcd()
        watch = cluster.watch("configmaps", "default", resource_version=old, timeout_seconds=10)
        with pytest.raises(Expired) as expired:
            list(watch)
        assert expired.value.status == 410


def test_the_watch_cache_serves_a_version_etcd_has_compacted_away(
    control_plane: ControlPlane, real_cluster: RealCluster, real_namespace: str
) -> None:
    # What a real API server does with its watch cache on: a watch is served from the cache's own
    # event window, not from etcd, so a version etcd has compacted is still answered with the
    # events after it. (A version older than the window is 410, as without the cache: the test
    # above; how old the window reaches depends on the server's history, so it is not asserted.)
    before = real_cluster.list("configmaps", real_namespace)["metadata"]["resourceVersion"]
    real_cluster.create("configmaps", {"metadata": {"name": "present", "namespace": real_namespace}})
    control_plane.compact_etcd()
    watch = real_cluster.watch("configmaps", real_namespace, resource_version=before, timeout_seconds=2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in watch] == [("ADDED", "present")]


def test_bind_sets_node_and_a_second_bind_conflicts(real_cluster: RealCluster, real_namespace: str) -> None:
    pod = real_cluster.create("pods", _pod("b", real_namespace))
    real_cluster.bind(real_namespace, "b", "node-that-need-not-exist", uid=pod["metadata"]["uid"])
    bound = real_cluster.get("pods", "b", real_namespace)
    assert bound["spec"]["nodeName"] == "node-that-need-not-exist"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in bound["status"]["conditions"])
    with pytest.raises(Conflict) as conflict:
        real_cluster.bind(real_namespace, "b", "another-node")
    assert conflict.value.status == 409
    with pytest.raises(NotFound):
        real_cluster.bind(real_namespace, "missing", "another-node")


def test_bind_with_a_stale_uid_is_refused(real_cluster: RealCluster, real_namespace: str) -> None:
    real_cluster.create("pods", _pod("u", real_namespace))
    with pytest.raises(Conflict):
        real_cluster.bind(real_namespace, "u", "n", uid=str(uuid.uuid4()))


def test_concurrent_binds_share_the_pool(real_cluster: RealCluster, real_namespace: str) -> None:
    for i in range(40):
        real_cluster.create("pods", _pod(f"c{i}", real_namespace))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: real_cluster.bind(real_namespace, f"c{i}", f"node-{i % 4}"), range(40)))
    pods = real_cluster.list("pods", real_namespace)["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(f"node-{i % 4}" for i in range(40))


def test_create_many_pipelines_the_posts_and_answers_each_in_order(
    real_cluster: RealCluster, real_namespace: str
) -> None:
    config_maps = [{"metadata": {"name": f"cm{i}", "namespace": real_namespace}, "data": {"i": str(i)}}
                   for i in range(20)]
    config_maps[7] = {"metadata": {"name": "Not_A_Name", "namespace": real_namespace}}  # refused: 422
    config_maps[12] = {"metadata": {"name": "x", "namespace": "no-such-namespace"}}  # refused: 404
    sent = []
    send = real_cluster._exchange

    def counting(*args: Any) -> Any:
        sent.append(args[0])
        return send(*args)

    real_cluster._exchange = counting  # type: ignore[method-assign]
    results = real_cluster.create_many("configmaps", config_maps)
    assert len(sent) == 1, "one round trip for every object"
    assert isinstance(results[7], Invalid) and isinstance(results[12], NotFound)
    assert [r for i, r in enumerate(results) if i not in (7, 12)] == [None] * 18
    made = real_cluster.list("configmaps", real_namespace)["items"]
    assert sorted(cm["data"]["i"] for cm in made if cm["metadata"]["name"].startswith("cm")) == sorted(
        str(i) for i in range(20) if i not in (7, 12))
    again = real_cluster.create_many("configmaps", config_maps[:2])  # the connection went back to the pool
    assert [type(r) for r in again] == [AlreadyExists, AlreadyExists]
    assert real_cluster.create_many("configmaps", []) == []


def test_evict_deletes_an_unbound_pod(real_cluster: RealCluster, real_namespace: str) -> None:
    real_cluster.create("pods", _pod("e", real_namespace))
    real_cluster.evict(real_namespace, "e", grace_period_seconds=0)
    with pytest.raises(NotFound):
        real_cluster.get("pods", "e", real_namespace)


def test_graceful_delete_of_a_bound_pod_leaves_a_deletion_timestamp(
    real_cluster: RealCluster, real_namespace: str
) -> None:
    # Bound to a node KWOK does not manage, so nothing finishes the deletion.
    real_cluster.create("pods", _pod("g", real_namespace))
    real_cluster.bind(real_namespace, "g", "unmanaged-node")
    last_seen = real_cluster.delete("pods", "g", real_namespace)
    assert last_seen["metadata"]["deletionTimestamp"]
    assert real_cluster.get("pods", "g", real_namespace)["metadata"]["deletionTimestamp"]
    with pytest.raises(Conflict):
        real_cluster.bind(real_namespace, "g", "another")
    real_cluster.delete("pods", "g", real_namespace, grace_period_seconds=0)
    with pytest.raises(NotFound):
        real_cluster.get("pods", "g", real_namespace)


def test_custom_resources_work_like_built_in_ones(real_cluster: RealCluster, real_namespace: str) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.minisched.test"},
        "spec": {
            "group": "minisched.test",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    created = real_cluster.create("customresourcedefinitions.apiextensions.k8s.io", crd)
    widgets = Resource.from_crd(created)
    wait_for(lambda: _crd_established(real_cluster), 30, "the CRD to be established")
    real_cluster.create(
        widgets, {"metadata": {"name": "w1", "namespace": real_namespace}, "spec": {"size": 3}}
    )
    got = real_cluster.get(widgets, "w1", real_namespace)
    assert got["kind"] == "Widget" and got["spec"] == {"size": 3}
    assert [i["kind"] for i in real_cluster.list(widgets, real_namespace)["items"]] == ["Widget"]


def _crd_established(cluster: RealCluster) -> bool:
    crd = cluster.get("customresourcedefinitions.apiextensions.k8s.io", "widgets.minisched.test")
    return any(
        c["type"] == "Established" and c["status"] == "True"
        for c in crd.get("status", {}).get("conditions", [])
    )


def test_a_user_without_rbac_grants_is_forbidden(control_plane: ControlPlane, real_namespace: str) -> None:
    kubeconfig = control_plane.write_user_kubeconfig("nobody", ["minisched:testers"])
    with RealCluster.from_kubeconfig(path=str(kubeconfig)) as cluster:
        with pytest.raises(Forbidden) as forbidden:
            cluster.list("pods", real_namespace)
        assert forbidden.value.status == 403
        assert 'User "nobody"' in forbidden.value.message


def test_nodes_are_cluster_scoped(real_cluster: RealCluster) -> None:
    node = real_cluster.create("nodes", fake_node("scope-check"))
    assert "namespace" not in node["metadata"]
    assert real_cluster.get("nodes", "scope-check")["metadata"]["name"] == "scope-check"


def test_raw_requests_reach_any_api_including_server_side_dry_run(real_cluster: RealCluster) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "minisched-dry-run-check"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }
    path = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    answer = real_cluster.request("POST", path, query={"dryRun": "All"}, body=role)
    assert answer["metadata"]["name"] == "minisched-dry-run-check" and answer["metadata"].get("uid")
    with pytest.raises(NotFound):  # a dry run persists nothing
        real_cluster.request("GET", f"{path}/minisched-dry-run-check")


def test_cleanup_between_tests_removes_what_a_test_created(real_cluster: RealCluster) -> None:
    from tests.plugins.controlplane import _CLEANED, _keys, cleanup

    baseline = {r: _keys(real_cluster, r) for r in _CLEANED}
    real_cluster.create("namespaces", {"metadata": {"name": "cleanup-check"}})
    real_cluster.create("pods", _pod("p", "cleanup-check"))
    real_cluster.bind("cleanup-check", "p", "some-node")  # bound: its deletion would wait for a kubelet
    real_cluster.create("pods", _pod("p", "default"))
    real_cluster.create("nodes", fake_node("cleanup-node"))
    real_cluster.create(
        "priorityclasses.scheduling.k8s.io",
        {"metadata": {"name": "cleanup-high"}, "value": 1000},
    )
    cleanup(real_cluster, baseline)
    assert {r: _keys(real_cluster, r) for r in _CLEANED} == baseline


def test_from_kubeconfig_selects_the_named_context(control_plane: ControlPlane, tmp_path: Any) -> None:
    import yaml

    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    good = config["current-context"]
    # A second context, made current, that points nowhere: selecting `good` by name must win.
    config["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}})
    config["contexts"].append(
        {"name": "nowhere", "context": {"cluster": "nowhere", "user": config["users"][0]["name"]}}
    )
    config["current-context"] = "nowhere"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    with RealCluster.from_kubeconfig(path=str(path), context=good) as cluster:
        assert cluster.server == control_plane.server
        assert cluster.get("namespaces", "default")["metadata"]["name"] == "default"
    with RealCluster.from_kubeconfig(path=str(path)) as unreachable:
        from minisched.errors import ServiceUnavailable

        with pytest.raises(ServiceUnavailable):
            unreachable.get("namespaces", "default")
