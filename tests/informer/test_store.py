from __future__ import annotations

import pytest

from minisched.informer import NAMESPACE_INDEX, DeletedFinalStateUnknown, Store
from tests.informer.fakes import pod


def on_node(node: str, obj: dict) -> dict:
    obj["spec"] = {"nodeName": node}
    return obj


def by_node(obj: dict) -> list[str]:
    node = (obj.get("spec") or {}).get("nodeName")
    return [node] if node else []


def test_add_get_update_delete_by_key() -> None:
    store = Store()
    a = pod("a", 1)
    store.add(a)
    assert store.get_by_key("default/a") is a
    assert store.get(pod("a", 99)) is a
    a2 = pod("a", 2)
    store.update(a2)
    assert store.get_by_key("default/a") is a2
    assert len(store) == 1 and "default/a" in store
    store.delete(a2)
    assert store.get_by_key("default/a") is None
    store.delete(a2)  # deleting what is not there is not an error


def test_cluster_scoped_objects_are_keyed_by_name() -> None:
    store = Store()
    store.add({"kind": "Node", "metadata": {"name": "n1"}})
    assert store.list_keys() == ["n1"]
    assert store.by_index(NAMESPACE_INDEX, "") == [{"kind": "Node", "metadata": {"name": "n1"}}]


def test_an_object_without_a_name_is_refused() -> None:
    with pytest.raises(ValueError, match="no metadata.name"):
        Store().add({"metadata": {"namespace": "x"}})


def test_namespace_index_is_built_in() -> None:
    store = Store()
    for name, ns in [("a", "x"), ("b", "x"), ("c", "y")]:
        store.add(pod(name, 1, namespace=ns))
    assert sorted(o["metadata"]["name"] for o in store.by_index(NAMESPACE_INDEX, "x")) == ["a", "b"]
    assert store.index_keys(NAMESPACE_INDEX, "y") == ["y/c"]
    assert store.list_index_func_values(NAMESPACE_INDEX) == ["x", "y"]


def test_custom_index_follows_updates_and_deletes() -> None:
    store = Store({"node": by_node})
    store.add(on_node("n1", pod("a", 1)))
    store.add(on_node("n1", pod("b", 1)))
    store.add(pod("c", 1))  # unscheduled: no index value
    assert store.index_keys("node", "n1") == ["default/a", "default/b"]
    store.update(on_node("n2", pod("a", 2)))
    assert store.index_keys("node", "n1") == ["default/b"]
    assert store.index_keys("node", "n2") == ["default/a"]
    store.delete(pod("b", 2))
    assert store.list_index_func_values("node") == ["n2"]
    assert [o["metadata"]["name"] for o in store.index("node", on_node("n2", pod("z", 1)))] == ["a"]


def test_indexers_added_later_index_existing_objects() -> None:
    store = Store()
    store.add(on_node("n1", pod("a", 1)))
    store.add_indexers({"node": by_node})
    assert store.index_keys("node", "n1") == ["default/a"]
    with pytest.raises(ValueError, match="index node already exists"):
        store.add_indexers({"node": by_node})
    with pytest.raises(TypeError, match="must be callable"):
        store.add_indexers({"bad": "not a function"})  # type: ignore[dict-item]


def test_unknown_index_names_the_known_ones() -> None:
    store = Store({"node": by_node})
    with pytest.raises(KeyError, match="no index named 'nodes' \\(indexes: namespace, node\\)"):
        store.by_index("nodes", "n1")


def test_replace_swaps_content_and_rebuilds_indexes() -> None:
    store = Store({"node": by_node})
    store.add(on_node("n1", pod("a", 1)))
    store.replace([on_node("n2", pod("b", 5)), pod("c", 5, namespace="z")], "5")
    assert sorted(store.list_keys()) == ["default/b", "z/c"]
    assert store.list_index_func_values("node") == ["n2"]
    assert store.list_index_func_values(NAMESPACE_INDEX) == ["default", "z"]


def test_a_tombstone_deletes_by_its_key() -> None:
    store = Store()
    store.add(pod("a", 1))
    store.delete(DeletedFinalStateUnknown("default/a", None))
    assert len(store) == 0
