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
    assert sort.less(old, fresh) and not sort.less(fresh, old), (
        "priority 100 queued at t=0 against priority 101 queued at t=20 with agingSeconds 10: the old pod is "
        f"ahead by 1 point and should go first; less(old, fresh)={sort.less(old, fresh)}, "
        f"less(fresh, old)={sort.less(fresh, old)}")
    near = Queued("near", 101, 5.0)  # 101 + (now-5)/10 = 100.5 + now/10: ahead of old
    assert sort.less(near, old), "priority 101 queued at t=5 is still ahead of priority 100 queued at t=0"


def check_order(module: Any) -> None:
    sort = module.new({"agingSeconds": 10}, None)
    a, b = Queued("a", 5, 10.0), Queued("b", 6, 20.0)  # equal effective priority: a queued first
    assert sort.less(a, b) and not sort.less(b, a), "equal effective priority: the pod queued earlier goes first"
    assert not sort.less(a, a), "less(a, a) must be false (a strict order), got true"
    default = module.new(None, None)
    x, y = Queued("x", 0, 0.0), Queued("y", 1, 59.0)  # default 60 s: x = 0 + now/60, y = 1 + (now-59)/60
    assert default.less(y, x), "with the default agingSeconds of 60, priority 1 at t=59 is still ahead of 0 at t=0"


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
          "compare priority - timestamp / agingSeconds: now cancels out.", points=2),
    Check("a strict order with the earlier pod first on ties", check_order,
          "less(a, b) is a strict 'goes before': false for equal pods; read args.get('agingSeconds', 60)."),
    Check("a scheduler with AgingSort serves the old pod first", check_scheduler,
          "the queue calls your less() to order its heap.", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
