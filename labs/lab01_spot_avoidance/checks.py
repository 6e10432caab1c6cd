"""Lab 1 checks: run against the student's exercise (default) or the solution.

    python -m labs.lab01_spot_avoidance.checks [exercise|solution]
"""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import in_tree_registry
from minisched.scheduler.snapshot import NodeTable

SPOT = {"node.kubernetes.io/lifecycle": "spot"}
SPOT_OK = {"minisched.dev/spot-ok": "true"}


@dataclass
class Report:
    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        lines = [f"{len(self.passed)}/{len(self.passed) + len(self.failed)} checks pass"]
        lines += [f"  PASS {name}" for name in self.passed]
        lines += [f"  FAIL {name}: {why}" for name, why in self.failed]
        return "\n".join(lines)


def _pod(name: str, spot_ok: bool = False) -> PodInfo:
    return PodInfo.from_pod(make_pod(name, annotations=SPOT_OK if spot_ok else None))


def _random_nodes(rng: random.Random, n: int) -> list[dict]:
    nodes = []
    for i in range(n):
        labels = dict(SPOT) if rng.random() < 0.4 else {}
        if rng.random() < 0.2:
            labels["node.kubernetes.io/lifecycle"] = "on-demand"
        nodes.append(make_node(f"n{i}", labels=labels))
    return nodes


def check_pure_rule(module: ModuleType) -> None:
    spot, regular = make_node("spot", labels=SPOT), make_node("regular")
    assert module.node_score(_pod("p"), spot) == 0, "a spot node should score 0"
    assert module.node_score(_pod("p"), regular) == 100, "a regular node should score 100"
    assert module.node_score(_pod("p", spot_ok=True), spot) == 100, "a spot-ok pod should not mind spot"


def check_vectorised_matches_pure(module: ModuleType) -> None:
    rng = random.Random(7)
    plugin = module.new(None, None)
    for trial in range(30):
        nodes = _random_nodes(rng, rng.randint(1, 40))
        table = NodeTable()
        for node in nodes:
            table.add_node(node)
        rows = np.arange(len(nodes), dtype=np.intp)
        if trial % 3 == 0:
            rows = rows[::2]
        pod = _pod(f"p{trial}", spot_ok=trial % 4 == 0)
        got = list(plugin.score(CycleState(), pod, table, rows))
        want = [module.node_score(pod, nodes[r]) for r in rows]
        assert got == want, f"trial {trial}: vectorised {got} != pure {want}"


def check_scheduler_avoids_spot(module: ModuleType) -> None:
    from minisched.scheduler.scheduler import Scheduler

    cluster = EmbeddedCluster()
    for i in range(3):
        cluster.create("nodes", make_node(f"spot-{i}", labels=SPOT))
    cluster.create("nodes", make_node("regular-0", cpu="2"))
    # The default plugins plus the student's, with weight 10, as a KubeSchedulerConfiguration says it.
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{
            "schedulerName": "minisched",
            "plugins": {"score": {"enabled": [{"name": module.NAME, "weight": 10}]}},
        }],
    }
    registry = in_tree_registry().merged({module.NAME: module.new})
    sched = Scheduler(cluster, config=config, registry=registry, seed=0)
    sched.start(loop=False)
    try:
        for i in range(4):  # 4 x 500m fill the regular node's 2 CPUs exactly
            cluster.create("pods", make_pod(f"web-{i}", cpu="500m"))
        cluster.create("pods", make_pod("batch", cpu="500m", annotations=SPOT_OK))
        for _ in range(5):
            sched.schedule_one(timeout=5)
        sched.wait_for_bindings(timeout=10)
        placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in cluster.list("pods", "default")["items"]}
    finally:
        sched.stop()
        cluster.close()
    web = {name: node for name, node in placed.items() if name.startswith("web")}
    assert all(node == "regular-0" for node in web.values()), f"web pods should avoid spot: {web}"
    assert placed["batch"] is not None, "the spot-ok pod should still be placed"


CHECKS: list[tuple[str, Callable[[ModuleType], None]]] = [
    ("the pure rule", check_pure_rule),
    ("vectorised score equals the pure rule", check_vectorised_matches_pure),
    ("a scheduler with the plugin avoids spot nodes", check_scheduler_avoids_spot),
]


def run_checks(module: ModuleType | str = "exercise") -> Report:
    if isinstance(module, str):
        module = importlib.import_module(f"labs.lab01_spot_avoidance.{module}")
    report = Report()
    for name, check in CHECKS:
        try:
            check(module)
        except AssertionError as e:
            report.failed.append((name, str(e)))
        else:
            report.passed.append(name)
    return report


if __name__ == "__main__":
    result = run_checks(sys.argv[1] if len(sys.argv) > 1 else "exercise")
    print(result)
    sys.exit(0 if result.ok else 1)
