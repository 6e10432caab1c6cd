"""Out-of-tree plugins: an installed package (examples/minisched-plugin-example, which `make venv`
installs) registers a plugin through the `minisched.plugins` entry points, and a profile in the
scheduler's configuration names it, as kube-scheduler's --config names out-of-tree plugins."""

from __future__ import annotations

import tomllib
from collections import Counter
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import yaml

from minisched.cluster import Cluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.framework import registry as registry_module
from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.registry import PluginLoadError, entry_point_registry
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.plugins import default_registry, in_tree_registry
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import bound_pods, wait_for_nodes, wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "minisched-plugin-example"

CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{
        "schedulerName": "minisched",
        "plugins": {"score": {"enabled": [{"name": "NodeLabelScore", "weight": 5}]}},
        "pluginConfig": [{"name": "NodeLabelScore", "args": {"label": "disktype", "value": "ssd"}}],
    }],
}


def test_the_example_package_is_found_through_its_entry_point() -> None:
    declared = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]["entry-points"]["minisched.plugins"]
    found = entry_point_registry()
    assert set(declared) <= set(found), "pip install -e examples/minisched-plugin-example (make venv does)"
    assert set(declared) == {"NodeLabelScore", "MaxPodsPerNode"}
    assert set(default_registry()) == set(in_tree_registry()) | set(declared)


def test_a_profile_in_the_config_file_runs_it(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    fwk = Framework(load_profiles(path)[0])
    assert fwk.plugin_names("score")[-1] == "NodeLabelScore"
    assert fwk.weights["NodeLabelScore"] == 5
    assert type(fwk.plugins["NodeLabelScore"]).__module__ == "minisched_plugin_example.node_label_score"


def _run(cluster: Cluster, config: object) -> Counter[str]:
    for name, labels in (("mini-hdd-1", {}), ("mini-ssd", {"disktype": "ssd"}), ("mini-hdd-2", {})):
        cluster.create(NODES, make_node(name, cpu="8", labels=labels))
    with Scheduler(cluster, config=config) as sched:  # type: ignore[arg-type]
        wait_for_nodes(sched, 3, timeout=30)
        for i in range(4):
            cluster.create(PODS, make_pod(f"web-{i}", cpu="500m"))
        wait_until(lambda: len(bound_pods(cluster)) == 4, timeout=30, what="4 pods bound")
    return Counter(bound_pods(cluster).values())


def test_it_schedules_on_every_backend(cluster: Cluster) -> None:
    assert _run(cluster, CONFIG) == {"mini-ssd": 4}


def test_without_it_the_same_pods_spread(embedded_cluster: Cluster) -> None:
    # the control for the test above: the default scores alone spread the pods over the nodes
    placed = _run(embedded_cluster, {**CONFIG, "profiles": [{"schedulerName": "minisched"}]})
    assert len(placed) == 3


def _fake_entry_points(monkeypatch: pytest.MonkeyPatch, *eps: EntryPoint) -> None:
    monkeypatch.setattr(registry_module, "installed_entry_points", lambda group: eps)


def test_a_broken_plugin_package_is_named_when_a_profile_uses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_entry_points(monkeypatch, EntryPoint("Broken", "no_such_package.plugin:new", "minisched.plugins"))
    assert "Broken" in default_registry()  # listed without importing it: unused, it harms nobody
    (profile,) = load_profiles({**CONFIG, "profiles": [{"schedulerName": "minisched", "plugins": {
        "filter": {"enabled": [{"name": "Broken"}]}}}]})
    with pytest.raises(PluginLoadError, match=r"entry point Broken = 'no_such_package.plugin:new' .*"
                                              r"cannot be loaded: ModuleNotFoundError"):
        Framework(profile)


def test_an_out_of_tree_plugin_cannot_take_a_built_in_name(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_entry_points(monkeypatch, EntryPoint("NodeResourcesFit", "x:new", "minisched.plugins"))
    with pytest.raises(ValueError, match="a plugin named 'NodeResourcesFit' is already registered"):
        default_registry()


def test_bad_args_are_refused_naming_the_plugin() -> None:
    bad = {**CONFIG, "profiles": [{**CONFIG["profiles"][0], "pluginConfig": [  # type: ignore[index]
        {"name": "NodeLabelScore", "args": {"value": "ssd"}}]}]}
    with pytest.raises(ValueError, match=r"NodeLabelScore needs args \{label: <key>, value: <value>\}"):
        Framework(load_profiles(bad)[0])
