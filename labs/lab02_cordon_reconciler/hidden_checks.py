"""Lab 2 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

from typing import Any

from labs.harness import Check
from labs.lab02_cordon_reconciler.checks import cluster_with, node, state
from minisched.controllers.controller import Controller
from minisched.controllers.reconciler import Request
from minisched.informer.factory import SharedInformerFactory


def check_only_true(module: Any) -> None:
    with cluster_with(node("n1", drain="false"), node("n2", drain="yes")) as cluster:
        r = module.new(cluster)
        for name in ("n1", "n2"):
            r.reconcile(Request("", name))
            assert state(cluster, name) == (False, None), f"{name}: only drain: \"true\" asks for a drain"


def check_through_a_controller(module: Any) -> None:
    nodes = [node(f"n{i}", drain="true" if i % 3 == 0 else None) for i in range(20)]
    with cluster_with(*nodes) as cluster:
        factory = SharedInformerFactory(cluster)
        controller = Controller("cordon", module.new(cluster), factory)
        controller.start()
        try:
            def converged() -> bool:
                return all(state(cluster, f"n{i}")[0] == (i % 3 == 0) for i in range(20))

            controller.settle(timeout=10, until=converged)
            assert converged(), "through a Controller, every n{0,3,6,...} should end cordoned and no other"
            for i in range(0, 20, 3):  # the operator changes their mind
                cluster.patch("nodes", f"n{i}", {"metadata": {"annotations": {"minisched.dev/drain": None}}})
            controller.settle(timeout=10, until=lambda: not any(state(cluster, f"n{i}")[0] for i in range(20)))
            left = [f"n{i}" for i in range(20) if state(cluster, f"n{i}")[0]]
            assert not left, f"after the drain annotations were removed, still cordoned: {left}"
        finally:
            controller.stop()
            factory.shutdown()


def check_leaves_admin_cordon_alone(module: Any) -> None:
    """An administrator cordoned a node by hand; later someone asks for a drain there too, then takes
    the request back. The node was never the reconciler's: it must stay cordoned and unmarked."""
    with cluster_with(node("by-hand", unschedulable=True), node("ours")) as cluster:
        r = module.new(cluster)
        for name in ("by-hand", "ours"):
            cluster.patch("nodes", name, {"metadata": {"annotations": {"minisched.dev/drain": "true"}}})
            r.reconcile(Request("", name))
        assert state(cluster, "by-hand") == (True, None), (
            "a node an administrator cordoned by hand, then asked to drain: expected it left alone (cordoned, "
            f"no cordoned-by marker: the reconciler did not cordon it), got {state(cluster, 'by-hand')}")
        assert state(cluster, "ours") == (True, "cordon-reconciler"), "a schedulable node asked to drain is yours"
        for name in ("by-hand", "ours"):
            cluster.patch("nodes", name, {"metadata": {"annotations": {"minisched.dev/drain": None}}})
            r.reconcile(Request("", name))
        assert state(cluster, "by-hand") == (True, None), (
            "the drain request on the administrator's node was taken back: the administrator's cordon must stay, "
            f"got {state(cluster, 'by-hand')}")
        assert state(cluster, "ours") == (False, None), "the node you cordoned is uncordoned when the request goes"


CHECKS = [
    Check("only drain: \"true\" asks for a drain", check_only_true, "compare the annotation's value with \"true\"."),
    Check("converges through a Controller and its informer", check_through_a_controller,
          "reconcile must read the node afresh each time: the controller may merge or repeat requests."),
    Check("a node an administrator cordoned stays theirs", check_leaves_admin_cordon_alone,
          "mark a node as yours only when *you* make it unschedulable: a node already unschedulable when the drain "
          "is asked was cordoned by someone else, so do not add your marker (or you will uncordon it later)."),
]
