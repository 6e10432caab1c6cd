"""Lab 12 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

from typing import Any

from labs.harness import Check
from labs.lab12_crd_label_preference.checks import (
    cluster_with_crd,
    live_scores,
    nodes,
    place,
    preference,
    running,
    scores,
    wait_until,
)
from minisched.errors import ApiError
from minisched.objects import make_node


def check_delete(module: Any) -> None:
    with cluster_with_crd(module) as cluster:
        for name, disk in (("fast", "ssd"), ("slow", "hdd")):
            cluster.create("nodes", make_node(name, labels={"disktype": disk}))
        cluster.create(module.LABEL_PREFERENCES, preference("disks", "disktype", {"ssd": 100}))
        cluster.create(module.LABEL_PREFERENCES, preference("more", "disktype", {"hdd": 40}))
        with running(module, cluster) as sched:
            wait_until(lambda: len(sched.cache.node_names()) == 2, "the scheduler never saw the two nodes")
            wait_until(lambda: live_scores(cluster, sched) == {"fast": 100, "slow": 40},
                       f"two preferences at start: expected fast 100, slow 40, got {live_scores(cluster, sched)}")
            cluster.delete(module.LABEL_PREFERENCES, "disks")
            try:
                wait_until(lambda: live_scores(cluster, sched) == {"fast": 0, "slow": 40}, "", timeout=6)
            except AssertionError:
                raise AssertionError("after deleting the {ssd: 100} preference, the plugin still scores "
                                     f"{live_scores(cluster, sched)}; expected fast 0, slow 40") from None


def check_long_label(module: Any) -> None:
    with cluster_with_crd(module) as cluster:
        try:
            cluster.create(module.LABEL_PREFERENCES, preference("long", "x" * 64, {"a": 1}))
        except ApiError as err:
            assert err.status == 422 and "spec.label" in [c.field for c in err.causes], f"got {err}"
        else:
            raise AssertionError("a 64-character label was accepted; at most 63")
        cluster.create(module.LABEL_PREFERENCES, preference("edge", "x" * 63, {"a": 0, "b": 100}))
        cluster.create(module.LABEL_PREFERENCES, preference("short", "x", {"a": 1}))  # one character is enough


def check_replace(module: Any) -> None:
    plugin = module.new(None, None)
    plugin.set_preferences([preference("disk", "disktype", {"ssd": 70})])
    plugin.set_preferences([preference("zone", "zone", {"b": 30})])
    got = scores(plugin, nodes())
    want = {"ssd-a": 0, "hdd-a": 0, "ssd-b": 30, "plain": 0, "nvme-b": 30}
    assert got == want, f"set_preferences replaces the old ones: expected {want}, got {got}"
    plugin.set_preferences([])
    assert set(scores(plugin, nodes()).values()) == {0}, "no preferences: every node scores 0"
    plugin.set_preferences([preference("gpu", "gpu-model", {"a100": 90}), preference("zone", "zone", {"b": 30})])
    got = scores(plugin, nodes())
    assert got == want, (f"a preference for a label no node has (gpu-model) adds nothing, and the other still "
                         f"counts: expected {want}, got {got}")


class CountsReads:
    """The cluster's list and get, counted per resource while `counting` is on (the plugin and the
    informer reach the cluster through these instance attributes)."""

    def __init__(self, cluster: Any, resource: Any) -> None:
        self.cluster, self.plural, self.calls, self.counting = cluster, _plural(resource), [], False
        self._list, self._get = cluster.list, cluster.get
        cluster.list, cluster.get = self.list, self.get

    def list(self, resource: Any, *args: Any, **kwargs: Any) -> Any:
        if self.counting and _plural(resource) == self.plural:
            self.calls.append("list")
        return self._list(resource, *args, **kwargs)

    def get(self, resource: Any, *args: Any, **kwargs: Any) -> Any:
        if self.counting and _plural(resource) == self.plural:
            self.calls.append("get")
        return self._get(resource, *args, **kwargs)


def _plural(resource: Any) -> str:
    return str(getattr(resource, "plural", resource))


def check_reads_the_informer(module: Any) -> None:
    with cluster_with_crd(module) as cluster:
        for name, disk in (("fast", "ssd"), ("slow", "hdd")):
            cluster.create("nodes", make_node(name, cpu="8", labels={"disktype": disk}))
        cluster.create(module.LABEL_PREFERENCES, preference("disks", "disktype", {"ssd": 100, "hdd": 10}))
        reads = CountsReads(cluster, module.LABEL_PREFERENCES)
        with running(module, cluster) as sched:
            wait_until(lambda: len(sched.cache.node_names()) == 2, "the scheduler never saw the two nodes")
            wait_until(lambda: live_scores(cluster, sched) == {"fast": 100, "slow": 10},
                       f"one preference at start: expected fast 100, slow 10, got {live_scores(cluster, sched)}")
            reads.counting = True
            placed = [place(cluster, sched, f"p{i}") for i in range(6)]
            reads.counting = False
        assert placed == ["fast"] * 6, f"six pods, ssd preferred: expected all on fast, got {placed}"
        assert not reads.calls, (
            f"six scheduling cycles asked the API server for LabelPreferences {len(reads.calls)} times "
            f"({', '.join(sorted(set(reads.calls)))}): a Score plugin reads what its informer keeps, and an API "
            f"call per cycle is what the informer is there to save")


CHECKS = [
    Check("a deleted LabelPreference stops counting", check_delete,
          "refresh on delete too: the store no longer holds it."),
    Check("label length: 1 and 63 accepted, 64 refused; weight 0 and 100 accepted", check_long_label,
          "max_length=63; ge=0, le=100."),
    Check("scheduling cycles read the informer, never the API", check_reads_the_informer,
          "score() must not call the cluster: keep the preferences the informer's handler set (follow), and read "
          "only self.preferences in score()."),
    Check("set_preferences replaces, never adds; a label no node has adds nothing", check_replace,
          "build a new list and assign it; in score(), skip a preference whose label has no column "
          "(nodes.label_column(label) is None)."),
]
