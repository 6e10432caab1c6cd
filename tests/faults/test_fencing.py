"""A paused leader that resumes after losing its lease must not bind (issue 17): the API server fences
a second binding of one pod with 409, and the scheduler checks, right before each bind, that its
last lease renewal is recent enough that no one else can have taken over."""

from __future__ import annotations

from typing import Any

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.events import events_for
from minisched.scheduler.scheduler import Scheduler
from tests.chapters45.helpers import drive, eventually
from tests.chapters45.test_leaderelection import Candidate, Partition
from tests.scheduler.runtime.helpers import wait_for_nodes, wait_until


def test_a_leader_whose_renewals_stop_stops_holding_the_lease_before_anyone_can_take_over(
    embedded_cluster: Any, virtual_clock: VirtualClock
) -> None:
    link = Partition(embedded_cluster)
    a = Candidate(link, "sched-a", virtual_clock).start()
    eventually(lambda: bool(a.started), what="sched-a to lead")
    assert a.elector.holds_lease()
    link.cut = True  # as if paused: no renewal gets through any more
    drive(virtual_clock, a.elector.renew_deadline + 0.5)
    assert not a.elector.holds_lease()
    # A candidate may take over only lease_duration after the last renewal it saw, later still.
    assert a.elector.renew_deadline < a.elector.lease_duration
    a.ctx.cancel()
    a.thread.join(5)  # type: ignore[union-attr]


def test_a_fenced_scheduler_sends_no_bind_and_writes_nothing() -> None:
    cluster = EmbeddedCluster()
    cluster.create(NODES, make_node("n1"))
    sched = Scheduler(cluster, bind_guard=lambda: False)
    try:
        sched.start()
        wait_for_nodes(sched, 1)
        pod = cluster.create(PODS, make_pod("p", cpu="10m", memory=None))
        wait_until(lambda: sched.fenced_binds == 1, what="the fenced bind")
        assert sched.recorder.flush(5)
        assert not cluster.get(PODS, "p", "default")["spec"].get("nodeName")
        assert not sched.cache.is_assumed("default/p")
        assert events_for(cluster, pod) == []
    finally:
        sched.stop()
        cluster.close()
