"""Lab 1 checks (public): run against your exercise (default), the solution, or a file.

    python -m labs.lab01_spot_avoidance.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import random
import sys
from typing import Any

import numpy as np

from labs.harness import Check, main, placements, running_scheduler
from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

LAB = "lab01_spot_avoidance"
SPOT_LABEL = "node.kubernetes.io/lifecycle"
SPOT = {SPOT_LABEL: "spot"}
SPOT_OK = {"minisched.dev/spot-ok": "true"}


def pod(name: str, annotations: dict[str, str] | None = None) -> PodInfo:
    return PodInfo.from_pod(make_pod(name, annotations=annotations))


def expected_score(p: PodInfo, node: dict[str, Any]) -> int:
    """The rule the README states, for comparing against."""
    spot_ok = ((p.pod["metadata"].get("annotations") or {}).get("minisched.dev/spot-ok")) == "true"
    is_spot = (node["metadata"].get("labels") or {}).get(SPOT_LABEL) == "spot"
    return 0 if is_spot and not spot_ok else 100


def random_nodes(rng: random.Random, n: int) -> list[dict[str, Any]]:
    nodes = []
    for i in range(n):
        labels = dict(SPOT) if rng.random() < 0.4 else {}
        if rng.random() < 0.2:
            labels[SPOT_LABEL] = "on-demand"
        nodes.append(make_node(f"n{i}", labels=labels))
    return nodes


def table_of(nodes: list[dict[str, Any]]) -> NodeTable:
    table = NodeTable()
    for node in nodes:
        table.add_node(node)
    return table


def check_pure_rule(module: Any) -> None:
    spot, regular = make_node("spot", labels=SPOT), make_node("regular")
    cases = [(pod("web"), spot, 0), (pod("web"), regular, 100), (pod("batch", SPOT_OK), spot, 100)]
    for p, node, want in cases:
        got = module.node_score(p, node)
        who = "a spot-ok pod" if p.pod["metadata"].get("annotations") else "an ordinary pod"
        assert got == want, f"node_score({who}, node {node['metadata']['name']!r}) should be {want}, got {got}"


def check_vectorised(module: Any) -> None:
    rng = random.Random(7)
    plugin = module.new(None, None)
    for trial in range(30):
        nodes = random_nodes(rng, rng.randint(1, 40))
        rows = np.arange(len(nodes), dtype=np.intp)
        if trial % 3 == 0:
            rows = rows[::2]  # the scheduler scores only the rows that passed Filter
        p = pod(f"p{trial}", SPOT_OK if trial % 4 == 0 else None)
        got = [int(s) for s in plugin.score(CycleState(), p, table_of(nodes), rows)]
        want = [expected_score(p, nodes[r]) for r in rows]
        assert got == want, (
            f"trial {trial} ({len(nodes)} nodes, scoring rows {[int(r) for r in rows[:6]]}...): "
            f"expected {want[:8]}..., your score() returned {got[:8]}...: {vectorised_diagnosis(p, nodes, rows, got)}")


def vectorised_diagnosis(p: PodInfo, nodes: list[dict[str, Any]], rows: Any, got: list[int]) -> str:
    """The mistake a wrong score() most likely made, for the message."""
    if len(got) != len(rows):
        return (f"it returned {len(got)} scores for {len(rows)} rows: score only the rows in `rows`, in their order "
                f"(column[rows]), not every node of the table")
    if (p.pod["metadata"].get("annotations") or {}).get("minisched.dev/spot-ok") == "true":
        return "this pod is annotated minisched.dev/spot-ok: \"true\": every node scores 100 for it"
    return "a node scores 0 exactly when its lifecycle label is \"spot\" (column[rows] == the id of \"spot\")"


def scheduler_config(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "minisched",
                      "plugins": {"score": {"enabled": [{"name": name, "weight": 10}]}}}],
    }


def place(module: Any, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> dict[str, str | None]:
    """Schedule `pods` on `nodes` with the default plugins plus the student's at weight 10."""
    with running_scheduler(nodes=nodes, config=scheduler_config(module.NAME), plugins={module.NAME: module.new}) \
            as (cluster, sched):
        for p in pods:
            cluster.create("pods", p)
        for _ in pods:
            sched.schedule_one(timeout=5)
        sched.wait_for_bindings(timeout=10)
        return placements(cluster)


def check_scheduler_avoids_spot(module: Any) -> None:
    nodes = [make_node(f"spot-{i}", labels=SPOT) for i in range(3)] + [make_node("regular-0", cpu="2")]
    pods = [make_pod(f"web-{i}", cpu="500m") for i in range(4)]  # 4 x 500m fill regular-0's 2 CPUs
    pods.append(make_pod("batch", cpu="500m", annotations=SPOT_OK))
    placed = place(module, pods, nodes)
    web = {name: node for name, node in placed.items() if name.startswith("web")}
    assert all(node == "regular-0" for node in web.values()), f"expected every web pod on regular-0, got {web}"
    assert placed["batch"] is not None, (
        "expected the spot-ok pod to be placed too, it stayed pending: the scheduler leaves a pod pending when a "
        "Score plugin raises or returns a score array whose length is not len(rows)")


CHECKS = [
    Check("the pure rule", check_pure_rule, "node_score reads the node's labels and the pod's annotations: "
          "node['metadata'].get('labels') and pod.pod['metadata'].get('annotations') (either may be missing)."),
    Check("vectorised score follows the rule on random clusters", check_vectorised,
          "score() must agree with node_score on every row in `rows` (and only those): compare "
          "nodes.label_column(SPOT_LABEL)[rows] with nodes.label_value_id(SPOT_LABEL, 'spot') (None when no node "
          "has that value), and score 100 everywhere for a spot-ok pod.", points=2),
    Check("a scheduler with the plugin avoids spot nodes", check_scheduler_avoids_spot,
          "the scheduler calls score(state, pod, nodes, rows) with weight 10 beside the default plugins: one int "
          "per row in `rows`, 0 for a spot node unless the pod is spot-ok.", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
