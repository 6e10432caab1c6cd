"""Property: whatever is written, replaying the watch reproduces the list, with or without selectors."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import ApiError
from minisched.resources import CONFIG_MAPS, NAMESPACES

NAMES = ["a", "b"]  # few keys, so operations often hit the same object
NAMESPACE_NAMES = ["default", "other"]
op = st.tuples(
    st.sampled_from(["create", "update", "relabel", "delete", "finalize", "unfinalize"]),
    st.sampled_from(NAMESPACE_NAMES),
    st.sampled_from(NAMES),
    st.sampled_from(["x", "y"]),
)


def apply(c: EmbeddedCluster, kind: str, ns: str, name: str, label: str) -> None:
    try:
        if kind == "create":
            c.create(CONFIG_MAPS, {"metadata": {"name": name, "labels": {"l": label}}, "data": {"v": "0"}}, ns)
        elif kind == "update":
            obj = c.get(CONFIG_MAPS, name, ns)
            obj["data"] = {"v": str(int(obj["data"]["v"]) + 1)}
            c.update(CONFIG_MAPS, obj)
        elif kind == "relabel":  # flip the label, so the object crosses the selector's edge
            current = c.get(CONFIG_MAPS, name, ns)["metadata"]["labels"]["l"]
            c.patch(CONFIG_MAPS, name, {"metadata": {"labels": {"l": "y" if current == "x" else "x"}}}, ns)
        elif kind == "delete":
            c.delete(CONFIG_MAPS, name, ns)
        elif kind == "finalize":
            c.patch(CONFIG_MAPS, name, {"metadata": {"finalizers": ["hold"]}}, ns)
        else:
            c.patch(CONFIG_MAPS, name, {"metadata": {"finalizers": None}}, ns)
    except ApiError:
        pass  # not found, already exists, finalizer added while deleting...: the server said no


def replay(events: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    state: dict[tuple[str, str], dict[str, Any]] = {}
    for ev in events:
        meta = ev["object"]["metadata"]
        key = (meta["namespace"], meta["name"])
        if ev["type"] == "DELETED":
            state.pop(key, None)
        else:
            state[key] = ev["object"]
    return state


@settings(max_examples=100, deadline=None)
@given(st.lists(op, max_size=40), st.sampled_from(["", "l=x", "l!=x"]), st.sampled_from([None, "default"]))
def test_watch_replay_equals_list(ops: list[tuple[str, str, str, str]], selector: str, namespace: str | None) -> None:
    c = EmbeddedCluster(seed=0)
    c.create(NAMESPACES, {"metadata": {"name": "other"}})
    start = c.list(CONFIG_MAPS)["metadata"]["resourceVersion"]
    w = c.watch(CONFIG_MAPS, namespace, resource_version=start, label_selector=selector, timeout_seconds=0)
    for args in ops:
        apply(c, *args)
    events = list(w)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)
    listed = c.list(CONFIG_MAPS, namespace, label_selector=selector)
    assert replay(events) == {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in listed["items"]}
    from_zero = list(c.watch(CONFIG_MAPS, namespace, resource_version="0", label_selector=selector, timeout_seconds=0))
    assert replay(from_zero) == replay(events)
    c.close()
