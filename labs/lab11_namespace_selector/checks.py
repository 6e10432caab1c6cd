"""Lab 11 checks (public).

    python -m labs.lab11_namespace_selector.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from labs.harness import Check, main, schedule_pods
from minisched.architecture import contract_layers
from minisched.cluster.base import Cluster
from minisched.errors import NotFound
from minisched.objects import make_node, make_pod
from minisched.resources import NAMESPACES
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

LAB = "lab11_namespace_selector"
ANNOTATION = "scheduler.alpha.kubernetes.io/node-selector"
NODES = {"prod-web": {"env": "prod", "tier": "web"}, "prod-db": {"env": "prod", "tier": "db"},
         "dev-web": {"env": "dev", "tier": "web"}, "bare": {}}


@dataclass
class FakeHandle:
    cluster: Any


def namespace(name: str, selector: str | None = None) -> dict[str, Any]:
    annotations = {} if selector is None else {ANNOTATION: selector}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "annotations": annotations}}


def nodes() -> NodeTable:
    table = NodeTable()
    for name, labels in NODES.items():
        table.add_node(make_node(name, labels=labels))
    return table.snapshot()


def autospec_cluster(answer: dict[str, Any] | Exception) -> Any:
    fake = mock.create_autospec(Cluster, instance=True)
    if isinstance(answer, Exception):
        fake.get.side_effect = answer
    else:
        fake.get.return_value = answer
    return fake


def verdict(module: Any, answer: dict[str, Any] | Exception, ns: str = "team-a") -> tuple[dict[str, bool], Any]:
    fake = autospec_cluster(answer)
    plugin = module.new(None, FakeHandle(fake))
    table = nodes()
    result = plugin.filter(CycleState(), PodInfo.from_pod(make_pod("p", namespace=ns)), table)
    return {name: bool(result.passed[i]) for i, name in enumerate(table.names)}, result


def passing(got: dict[str, bool]) -> list[str]:
    return sorted(n for n, ok in got.items() if ok)


def imports_above_scheduler(module: Any) -> list[str]:
    """minisched packages the module imports that sit above the scheduler layer."""
    layers = contract_layers()
    rank = {pkg: len(layers) - i for i, layer in enumerate(layers) for pkg in layer}
    limit = rank["minisched.scheduler"]
    tree = ast.parse(Path(module.__file__).read_text())
    names = [a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names]
    names += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
    above = []
    for name in names:
        package = ".".join(name.split(".")[:2])
        if rank.get(package, 0) > limit:
            above.append(name)
    return sorted(set(above))


def check_asks_the_handle(module: Any) -> None:
    fake = autospec_cluster(namespace("team-a", "env=prod"))
    plugin = module.new(None, FakeHandle(fake))
    pod = PodInfo.from_pod(make_pod("p", namespace="team-a"))
    plugin.filter(CycleState(), pod, nodes())
    calls = fake.mock_calls
    gets = [c for c in fake.get.call_args_list]
    assert len(gets) == 1 and len(calls) == 1, (
        f"one filter call should ask the cluster one thing, get(NAMESPACES, 'team-a'); it made {calls}")
    args = gets[0].args
    resource = args[0] if args else gets[0].kwargs.get("resource")
    name = args[1] if len(args) > 1 else gets[0].kwargs.get("name")
    assert getattr(resource, "plural", resource) == "namespaces" and name == "team-a", (
        f"expected get(NAMESPACES, 'team-a'), got {gets[0]}")
    above = imports_above_scheduler(module)
    assert not above, (f"{Path(module.__file__).name} imports {above}: a plugin sits in the scheduler layer and "
                       "may not import the layers above it")


def check_selects(module: Any) -> None:
    got, result = verdict(module, namespace("team-a", "env=prod"))
    assert passing(got) == ["prod-db", "prod-web"], f"selector env=prod: expected prod-db, prod-web to pass, got {got}"
    row = list(got).index("dev-web")
    assert result.reasons_at(row) == ("node(s) didn't match the node selector of namespace team-a",), (
        f"dev-web's reason: got {result.reasons_at(row)}")
    assert result.code_at(row) == Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (
        f"preemption cannot change labels: expected UNSCHEDULABLE_AND_UNRESOLVABLE, got {result.code_at(row).name}")
    got, _ = verdict(module, namespace("team-a", " env=prod , tier=web "))
    assert passing(got) == ["prod-web"], f"selector ' env=prod , tier=web ': every pair must match; got {got}"
    for answer, what in ((namespace("team-a"), "a namespace without the annotation"),
                         (namespace("team-a", ""), "an empty selector"),
                         (NotFound('namespaces "team-a" not found'), "a namespace that does not exist (NotFound)")):
        got, _ = verdict(module, answer)
        assert all(got.values()), f"{what} restricts nothing: expected every node to pass, got {got}"


def config() -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "minisched",
                          "plugins": {"filter": {"enabled": [{"name": "NamespaceNodeSelector"}]}}}]}


def check_in_a_scheduler(module: Any) -> None:
    from minisched.scheduler.plugins import in_tree_registry

    module.new(None, FakeHandle(autospec_cluster(namespace("x"))))  # not written yet: fail here first
    registry = in_tree_registry().merged({module.NAME: module.new})
    nodes = [make_node(name, cpu="8", labels=labels) for name, labels in NODES.items()]
    pods = [make_pod(f"{team[-1]}-{i}", namespace=team, cpu="1") for i in range(3) for team in ("team-a", "team-b")]
    setup = [namespace("team-a", "env=prod,tier=web"), namespace("team-b")]
    placed = schedule_pods(nodes, pods, config=config(), registry=registry, objects=[(NAMESPACES, o) for o in setup])
    team_a = {k: v for k, v in placed.items() if k.startswith("team-a/")}
    assert set(team_a.values()) == {"prod-web"}, f"team-a's selector allows only prod-web; team-a's pods: {team_a}"
    team_b = {k: v for k, v in placed.items() if k.startswith("team-b/")}
    assert all(team_b.values()), f"team-b has no selector: every pod should be placed, got {team_b}"


CHECKS = [
    Check("asks the handle's cluster for the pod's namespace, once", check_asks_the_handle,
          "new() keeps handle.cluster; filter() calls self.cluster.get(NAMESPACES, pod.namespace); import nothing "
          "from above the scheduler layer.", points=2),
    Check("a node must carry every label of the selector", check_selects,
          "AND over the pairs: passed &= nodes.label_column(key) == nodes.label_value_id(key, value); catch NotFound."),
    Check("a scheduler with the plugin keeps team-a on its nodes", check_in_a_scheduler,
          "the framework calls new(args, handle) with the scheduler's handle."),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
