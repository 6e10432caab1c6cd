"""Lab 12 checks (public).

    python -m labs.lab12_crd_label_preference.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from labs.harness import Check, main
from minisched.errors import ApiError
from minisched.objects import make_node, make_pod
from minisched.resources import CRDS
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

LAB = "lab12_crd_label_preference"
POD = PodInfo.from_pod(make_pod("p"))


def preference(name: str, label: str, weights: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "labs.minisched.dev/v1alpha1", "kind": "LabelPreference", "metadata": {"name": name},
            "spec": {"label": label, "weights": weights}}


@contextmanager
def cluster_with_crd(module: Any) -> Iterator[Any]:
    from minisched.cluster.embedded import EmbeddedCluster

    cluster = EmbeddedCluster()
    try:
        cluster.create(CRDS, module.CRD)
        wait_until(lambda: _served(cluster, module), "the LabelPreference CRD is never served")
        yield cluster
    finally:
        cluster.close()


def _served(cluster: Any, module: Any) -> bool:
    try:
        cluster.list(module.LABEL_PREFERENCES)
    except ApiError:
        return False
    return True


def wait_until(cond: Callable[[], Any], why: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := cond()):
        if time.monotonic() > deadline:
            raise AssertionError(why)
        time.sleep(0.01)
    return value


def check_schema(module: Any) -> None:
    bad = [("", {"ssd": 100}, "spec.label", "an empty label"),
           ("disktype", {"ssd": 500}, "spec.weights[ssd]", "a weight of 500"),
           ("disktype", {"ssd": -1}, "spec.weights[ssd]", "a weight of -1"),
           ("disktype", {}, "spec.weights", "no weights at all")]
    with cluster_with_crd(module) as cluster:
        for label, weights, field, what in bad:
            try:
                cluster.create(module.LABEL_PREFERENCES, preference("bad", label, weights))
            except ApiError as err:
                fields = [c.field for c in err.causes]
                assert err.status == 422 and field in fields, (
                    f"{what}: expected a 422 naming {field}, got {err.status} naming {fields}")
            else:
                cluster.delete(module.LABEL_PREFERENCES, "bad")
                raise AssertionError(f"{what}: the API server accepted it; the schema should refuse it (422 at {field})")
        cluster.create(module.LABEL_PREFERENCES, preference("good", "disktype", {"ssd": 100, "hdd": 0}))


def nodes() -> NodeTable:
    table = NodeTable()
    for name, labels in (("ssd-a", {"disktype": "ssd", "zone": "a"}), ("hdd-a", {"disktype": "hdd", "zone": "a"}),
                         ("ssd-b", {"disktype": "ssd", "zone": "b"}), ("plain", {}), ("nvme-b", {"disktype": "nvme", "zone": "b"})):
        table.add_node(make_node(name, labels=labels))
    return table.snapshot()


def scores(plugin: Any, table: NodeTable, rows: list[int] | None = None) -> dict[str, int]:
    picked = np.arange(len(table), dtype=np.intp) if rows is None else np.asarray(rows, np.intp)
    out = plugin.score(CycleState(), POD, table, picked)
    assert len(out) == len(picked), f"score must return one value per row of rows ({len(picked)}), got {len(out)}"
    return {table.names[r]: int(s) for r, s in zip(picked, out, strict=True)}


def check_scores(module: Any) -> None:
    plugin = module.new(None, None)
    plugin.set_preferences([preference("disk", "disktype", {"ssd": 70, "hdd": 20}),
                            preference("zone", "zone", {"a": 50})])
    table = nodes()
    want = {"ssd-a": 100, "hdd-a": 70, "ssd-b": 70, "plain": 0, "nvme-b": 0}
    got = scores(plugin, table)
    assert got == want, f"disktype {{ssd: 70, hdd: 20}} plus zone {{a: 50}}, capped at 100: expected {want}, got {got}"
    got = scores(plugin, table, [4, 1])
    assert got == {"nvme-b": 0, "hdd-a": 70}, f"only rows [4, 1] (nvme-b, hdd-a): expected nvme-b 0, hdd-a 70, got {got}"


def config() -> dict[str, Any]:
    """Only LabelPreference scores, so each placement shows its preferences alone."""
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "minisched",
                          "plugins": {"score": {"enabled": [{"name": "LabelPreference"}], "disabled": [{"name": "*"}]}}}]}


@contextmanager
def running(module: Any, cluster: Any) -> Iterator[Any]:
    from minisched.scheduler.plugins import in_tree_registry
    from minisched.scheduler.scheduler import Scheduler

    sched = Scheduler(cluster, config=config(), registry=in_tree_registry().merged({module.NAME: module.new}), seed=0)
    sched.start(loop=False)
    try:
        yield sched
    finally:
        sched.stop()


def place(cluster: Any, sched: Any, name: str) -> str | None:
    cluster.create("pods", make_pod(name, cpu="100m"))
    wait_until(lambda: sum(sched.pending_pods().values()) >= 1, f"the scheduler never queued pod {name}")
    sched.schedule_one(timeout=5)
    sched.wait_for_bindings(timeout=10)
    node: str | None = cluster.get("pods", name, "default")["spec"].get("nodeName")
    return node


def live_scores(cluster: Any, sched: Any) -> dict[str, int]:
    plugin = sched.frameworks["minisched"].plugins["LabelPreference"]
    return scores(plugin, sched.cache.snapshot())


def check_follows(module: Any) -> None:
    module.new(None, None).score(CycleState(), POD, nodes(), np.arange(1, dtype=np.intp))  # fails here first
    with cluster_with_crd(module) as cluster:
        for name, disk in (("fast", "ssd"), ("slow", "hdd")):
            cluster.create("nodes", make_node(name, cpu="8", labels={"disktype": disk}))
        cluster.create(module.LABEL_PREFERENCES, preference("disks", "disktype", {"ssd": 100, "hdd": 10}))
        with running(module, cluster) as sched:
            wait_until(lambda: len(sched.cache.node_names()) == 2, "the scheduler never saw the two nodes")
            first = place(cluster, sched, "first")
            assert first == "fast", f"a LabelPreference {{ssd: 100, hdd: 10}} existed at start: expected fast, got {first}"
            cluster.patch(module.LABEL_PREFERENCES, "disks", {"spec": {"weights": {"ssd": 0, "hdd": 90}}})
            try:
                wait_until(lambda: live_scores(cluster, sched) == {"fast": 0, "slow": 90}, "", timeout=6)
            except AssertionError:
                raise AssertionError("the LabelPreference was changed to {ssd: 0, hdd: 90}; 6 s later the running "
                                     f"plugin still scores {live_scores(cluster, sched)}") from None
            second = place(cluster, sched, "second")
            assert second == "slow", f"after the change to {{ssd: 0, hdd: 90}}: expected slow, got {second}"


CHECKS = [
    Check("the API server refuses a bad LabelPreference", check_schema,
          "Field(min_length=1, max_length=63) for label; dict[str, Annotated[int, Field(ge=0, le=100)]] with "
          "Field(min_length=1) for weights.", points=2),
    Check("scores every preference, summed and capped", check_scores,
          "for each (label, weights): total[nodes.label_column(label)[rows] == nodes.label_value_id(label, v)] += w."),
    Check("a running scheduler follows the objects' changes", check_follows,
          "informer = factory.informer_for(LABEL_PREFERENCES); informer.add_event_handler("
          "ResourceEventHandlerFuncs(refresh, refresh, refresh)).", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
