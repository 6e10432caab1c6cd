"""Lab 2 checks (public).

    python -m labs.lab02_cordon_reconciler.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from labs.harness import Check, main
from minisched.cluster.embedded import EmbeddedCluster
from minisched.controllers.reconciler import Request, Result
from minisched.objects import make_node

LAB = "lab02_cordon_reconciler"
DRAIN = "minisched.dev/drain"
CORDONED_BY = "minisched.dev/cordoned-by"


@contextmanager
def cluster_with(*nodes: dict[str, Any]) -> Iterator[EmbeddedCluster]:
    cluster = EmbeddedCluster()
    try:
        for node in nodes:
            cluster.create("nodes", node)
        yield cluster
    finally:
        cluster.close()


def node(name: str, drain: str | None = None, unschedulable: bool = False, marker: bool = False) -> dict[str, Any]:
    obj = make_node(name)
    annotations = obj["metadata"].setdefault("annotations", {})
    if drain is not None:
        annotations[DRAIN] = drain
    if marker:
        annotations[CORDONED_BY] = "cordon-reconciler"
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


def state(cluster: EmbeddedCluster, name: str) -> tuple[bool, str | None]:
    obj = cluster.get("nodes", name)
    return bool(obj["spec"].get("unschedulable")), (obj["metadata"].get("annotations") or {}).get(CORDONED_BY)


def check_cordons(module: Any) -> None:
    with cluster_with(node("n1", drain="true"), node("n2")) as cluster:
        r = module.new(cluster)
        for name in ("n1", "n2"):
            result = r.reconcile(Request("", name))
            assert isinstance(result, Result), f"reconcile must return a Result, got {result!r}"
        assert state(cluster, "n1") == (True, "cordon-reconciler"), (
            f"n1 asks for a drain: expected unschedulable with the cordoned-by marker, got {state(cluster, 'n1')}")
        assert state(cluster, "n2") == (False, None), f"n2 asks for nothing: expected it untouched, got {state(cluster, 'n2')}"


def check_uncordons_only_its_own(module: Any) -> None:
    with cluster_with(node("mine", unschedulable=True, marker=True), node("admins", unschedulable=True),
                      node("kept", drain="true", unschedulable=True, marker=True)) as cluster:
        r = module.new(cluster)
        for name in ("mine", "admins", "kept"):
            r.reconcile(Request("", name))
        assert state(cluster, "mine") == (False, None), (
            f"drain annotation gone from a node you cordoned: expected it uncordoned and unmarked, got {state(cluster, 'mine')}")
        assert state(cluster, "admins") == (True, None), "a node an administrator cordoned (no marker) must stay cordoned"
        assert state(cluster, "kept") == (True, "cordon-reconciler"), "a node still asking for a drain must stay cordoned"


def check_level_based(module: Any) -> None:
    with cluster_with(node("n1", drain="true")) as cluster:
        r = module.new(cluster)
        r.reconcile(Request("", "n1"))
        assert state(cluster, "n1")[0], "the first reconcile should cordon n1"
        before = cluster.get("nodes", "n1")["metadata"]["resourceVersion"]
        r.reconcile(Request("", "n1"))
        after = cluster.get("nodes", "n1")["metadata"]["resourceVersion"]
        assert before == after, f"nothing to change, yet the node was written (resourceVersion {before} -> {after})"
        cluster.delete("nodes", "n1")
        result = r.reconcile(Request("", "n1"))
        assert isinstance(result, Result) and not result.requeue, (
            f"a deleted node is not an error: expected Result(), got {result!r}")


CHECKS = [
    Check("cordons a node that asks for a drain", check_cordons,
          "one merge patch: {'metadata': {'annotations': {CORDONED_BY: ME}}, 'spec': {'unschedulable': True}}.",
          points=2),
    Check("uncordons only the nodes it cordoned", check_uncordons_only_its_own,
          "look for your marker annotation before uncordoning; set keys to None in a merge patch to remove them.",
          points=2),
    Check("level-based: no write when nothing changes, a deleted node is fine", check_level_based,
          "compare what you read with what you want before patching; catch minisched.errors.NotFound."),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
