"""Lab 1 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from labs.harness import Check
from labs.lab01_spot_avoidance.checks import SPOT, SPOT_LABEL, expected_score, pod, table_of
from minisched.objects import make_node
from minisched.scheduler.framework.cycle_state import CycleState


def check_only_true_means_ok(module: Any) -> None:
    spot = make_node("spot", labels=SPOT)
    for value in ("false", "yes", ""):
        got = module.node_score(pod("p", {"minisched.dev/spot-ok": value}), spot)
        assert got == 0, f"spot-ok: {value!r} is not \"true\": expected 0 on a spot node, got {got}"


def check_other_lifecycles(module: Any) -> None:
    nodes = [make_node("od", labels={SPOT_LABEL: "on-demand"}), make_node("bare"), make_node("s", labels=SPOT)]
    plugin = module.new(None, None)
    got = [int(s) for s in plugin.score(CycleState(), pod("p"), table_of(nodes), np.arange(3, dtype=np.intp))]
    assert got == [100, 100, 0], f"on-demand, unlabelled and spot nodes: expected [100, 100, 0], got {got}"


def check_no_spot_anywhere(module: Any) -> None:
    nodes = [make_node(f"n{i}") for i in range(5)]
    plugin = module.new(None, None)
    got = plugin.score(CycleState(), pod("p"), table_of(nodes), np.array([4, 1], dtype=np.intp))
    assert [int(s) for s in got] == [100, 100], f"no spot node at all: expected [100, 100], got {list(got)}"
    empty = plugin.score(CycleState(), pod("p"), table_of(nodes), np.array([], dtype=np.intp))
    assert len(empty) == 0, f"no rows to score: expected an empty array, got {list(empty)}"


def check_plugin_name(module: Any) -> None:
    """A configuration enables the plugin by the README's name, SpotAvoidance, and that plugin scores."""
    plugin = module.new(None, None)
    assert plugin.name == "SpotAvoidance", (
        f"the plugin is called SpotAvoidance in the README (and in configs), got {plugin.name!r}")
    got = [int(s) for s in plugin.score(CycleState(), pod("p"), table_of([make_node("s", labels=SPOT)]),
                                        np.arange(1, dtype=np.intp))]
    assert got == [0], f"SpotAvoidance on one spot node: expected [0], got {got}"


def check_labels_not_names(module: Any) -> None:
    """Both faces on random clusters whose names say nothing or lie (a spot node called regular-3,
    an on-demand node called spot-7, an ordinary pod called batch): only labels and annotations count."""
    rng = random.Random(25)
    plugin = module.new(None, None)
    lifecycles = [None, "spot", "on-demand", "preemptible", "Spot"]
    for trial in range(20):
        nodes = [make_node(rng.choice(["spot-", "regular-", "n", "batch-"]) + str(i),
                           labels={} if (v := rng.choice(lifecycles)) is None else {SPOT_LABEL: v})
                 for i in range(rng.randint(1, 12))]
        value = rng.choice([None, "true", "false", "True", "yes"])
        p = pod(rng.choice(["batch", "web", "spot-ok", f"p{trial}"]), None if value is None else
                {"minisched.dev/spot-ok": value})
        rows = np.arange(len(nodes), dtype=np.intp)
        vectorised = [int(s) for s in plugin.score(CycleState(), p, table_of(nodes), rows)]
        for node, got_vector in zip(nodes, vectorised, strict=True):
            want, got = expected_score(p, node), module.node_score(p, node)
            lifecycle = (node["metadata"].get("labels") or {}).get(SPOT_LABEL)
            what = (f"pod {p.name!r} (spot-ok: {value!r}) on node {node['metadata']['name']!r} "
                    f"(lifecycle: {lifecycle!r})")
            assert got == want, f"node_score for {what}: expected {want}, got {got}"
            assert got_vector == want, f"score() for {what}: expected {want}, got {got_vector}"


CHECKS = [
    Check("only spot-ok: \"true\" means spot is fine", check_only_true_means_ok,
          "compare the annotation's value with the string \"true\"."),
    Check("other lifecycles are not spot", check_other_lifecycles,
          "only the value \"spot\" makes a spot node."),
    Check("clusters without spot nodes, and empty rows", check_no_spot_anywhere,
          "label_value_id returns None when no node carries the value."),
    Check("the plugin is named SpotAvoidance", check_plugin_name,
          "keep NAME = \"SpotAvoidance\": a scheduler configuration enables the plugin by that name."),
    Check("the rule reads labels and annotations, never names", check_labels_not_names,
          "a node is spot only when its lifecycle label is exactly \"spot\" (not when its name starts with spot, "
          "nor when it merely has the lifecycle label); a pod is spot-ok only by its annotation, whatever its name; "
          "node_score and score() must agree."),
]
