"""Lab 5 checks (public).

    python -m labs.lab05_aging_queue_sort.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from labs.harness import Check, main, placements, running_scheduler, wait_until
from minisched.clock import VirtualClock
from minisched.objects import make_node, make_pod
from minisched.resources import PRIORITY_CLASSES

LAB = "lab05_aging_queue_sort"


@dataclass(frozen=True)
class Queued:
    name: str
    priority: int
    timestamp: float


def check_ages(module: Any) -> None:
    sort = module.new({"agingSeconds": 10}, None)
    old, fresh = Queued("old", 100, 0.0), Queued("fresh", 101, 20.0)
    # effective at any now: old 100 + now/10, fresh 101 + (now-20)/10 = 99 + now/10
    if not (sort.less(old, fresh) and not sort.less(fresh, old)):
        later = Queued("later", 101, 120.0)  # with agingSeconds 60: 101 - 2 = 99, behind old
        if sort.less(old, later) and not sort.less(later, old):
            why = ("your plugin ranks as if agingSeconds were 60 (the default): new(args, handle) must read "
                   "args['agingSeconds']")
        else:
            why = ("waiting earned the old pod nothing: its effective priority is priority - timestamp / "
                   "agingSeconds (it was queued earlier, so its timestamp is smaller and it is ahead)")
        raise AssertionError(
            "priority 100 queued at t=0 against priority 101 queued at t=20 with agingSeconds 10: the old pod is "
            f"ahead by 1 point and should go first; less(old, fresh)={sort.less(old, fresh)}, "
            f"less(fresh, old)={sort.less(fresh, old)}: {why}")
    near = Queued("near", 101, 5.0)  # 101 + (now-5)/10 = 100.5 + now/10: ahead of old
    assert sort.less(near, old), ("priority 101 queued at t=5 is still ahead of priority 100 queued at t=0 "
                                  "(5 s of age is half a point with agingSeconds 10)")


def check_order(module: Any) -> None:
    sort = module.new({"agingSeconds": 10}, None)
    a, b = Queued("a", 5, 10.0), Queued("b", 6, 20.0)  # equal effective priority: a queued first
    assert sort.less(a, b) and not sort.less(b, a), (
        "priority 5 queued at t=10 and priority 6 queued at t=20 (agingSeconds 10) have equal effective priority: "
        f"the one queued earlier goes first; got less(a, b)={sort.less(a, b)}, less(b, a)={sort.less(b, a)}")
    assert not sort.less(a, a), "less(a, a) must be false (a strict order: `>`, not `>=`), got true"
    default = module.new(None, None)
    x, y = Queued("x", 0, 0.0), Queued("y", 1, 59.0)  # default 60 s: x = 0 + now/60, y = 1 + (now-59)/60
    assert default.less(y, x), ("with no args the default agingSeconds is 60, so priority 1 at t=59 is still ahead "
                                "of priority 0 at t=0: read args.get('agingSeconds', 60)")


def config(aging: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{
            "schedulerName": "minisched",
            "plugins": {"queueSort": {"enabled": [{"name": "AgingSort"}], "disabled": [{"name": "PrioritySort"}]}},
            "pluginConfig": [{"name": "AgingSort", "args": {"agingSeconds": aging}}],
        }],
    }


def first_served(module: Any, waited: float) -> dict[str, str | None]:
    """Queue a priority-0 pod, wait `waited` virtual seconds, queue a priority-5 pod, then schedule
    once onto a node that fits one of them."""
    clock = VirtualClock()
    classes = [(PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                   "metadata": {"name": name}, "value": value}) for name, value in (("low", 0), ("high", 5))]
    with running_scheduler(nodes=[make_node("only", cpu="1")], objects=classes, config=config(10),
                           plugins={module.NAME: module.new}, clock=clock) as (cluster, sched):
        cluster.create("pods", make_pod("old", cpu="1", priority_class_name="low"))
        wait_until(lambda: len(sched.queue) == 1, "the scheduler never queued pod old")
        clock.advance(waited)
        cluster.create("pods", make_pod("new", cpu="1", priority_class_name="high"))
        wait_until(lambda: len(sched.queue) == 2, "the scheduler never queued pod new")
        sched.schedule_one(timeout=5)
        sched.wait_for_bindings(timeout=10)
        return placements(cluster)


def check_scheduler(module: Any) -> None:
    module.new({"agingSeconds": 10}, None).less(Queued("a", 0, 0.0), Queued("b", 0, 1.0))  # fails here first
    placed = first_served(module, 100.0)
    assert placed == {"old": "only", "new": None}, (
        "the node fits one pod: after 100 s of waiting (agingSeconds 10) priority 0 has aged to 10 and beats a "
        f"fresh priority 5; expected old on the node, got {placed}")
    placed = first_served(module, 20.0)
    assert placed == {"old": None, "new": "only"}, (
        "after only 20 s (2 points of age) priority 0 is still behind a fresh priority 5; "
        f"expected new on the node, got {placed}")


CHECKS = [
    Check("waiting earns priority", check_ages,
          "effective priority = priority - timestamp / agingSeconds (now cancels out), with agingSeconds read "
          "from args['agingSeconds'] in new().", points=2),
    Check("a strict order with the earlier pod first on ties", check_order,
          "less(a, b) is true only when a goes strictly first: a higher effective priority, or an equal one and an "
          "earlier timestamp; so less(a, a) is false."),
    Check("a scheduler with AgingSort serves the old pod first", check_scheduler,
          "the scheduler's queue orders its heap with your less() on pods stamped by the scheduler's clock, and "
          "builds the plugin with new({'agingSeconds': 10}, handle).", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
