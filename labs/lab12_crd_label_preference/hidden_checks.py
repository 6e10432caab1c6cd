"""Lab 12 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

from typing import Any

from labs.harness import Check
from labs.lab12_crd_label_preference.checks import (
    cluster_with_crd,
    live_scores,
    nodes,
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


def check_replace(module: Any) -> None:
    plugin = module.new(None, None)
    plugin.set_preferences([preference("disk", "disktype", {"ssd": 70})])
    plugin.set_preferences([preference("zone", "zone", {"b": 30})])
    got = scores(plugin, nodes())
    want = {"ssd-a": 0, "hdd-a": 0, "ssd-b": 30, "plain": 0, "nvme-b": 30}
    assert got == want, f"set_preferences replaces the old ones: expected {want}, got {got}"
    plugin.set_preferences([])
    assert set(scores(plugin, nodes()).values()) == {0}, "no preferences: every node scores 0"


CHECKS = [
    Check("a deleted LabelPreference stops counting", check_delete,
          "refresh on delete too: the store no longer holds it."),
    Check("label length: 63 accepted, 64 refused; weight 0 and 100 accepted", check_long_label,
          "max_length=63; ge=0, le=100."),
    Check("set_preferences replaces, never adds", check_replace, "build a new list and assign it."),
]
