"""§4.3 with the real scheduler: every decision lands in the event log, and replay == live == cluster."""

from __future__ import annotations

import io
import json

from minisched.clock import VirtualClock
from minisched.cluster import Cluster
from minisched.objects import make_node, make_pod
from minisched.observability import promql
from minisched.observability.adapters import DecisionLogRecorder
from minisched.observability.eventlog import EventLog, EventTypes, PodPlacements, replay
from minisched.observability.logging import configure
from minisched.observability.metrics import SchedulerMetrics
from minisched.observability.recorder import DecisionRecorder
from minisched.scheduler.scheduler import Scheduler
from tests.chapters45.helpers import drive_until, eventually


def test_replay_of_the_decision_log_reproduces_live_state_and_the_cluster(
    cluster: Cluster, virtual_clock: VirtualClock
) -> None:
    log = EventLog(clock=virtual_clock, id_factory=EventLog.sequential_ids())
    live = PodPlacements()
    log.subscribe(live.apply)
    lines = io.StringIO()
    configure(lines, logger="minisched.decisions", clock=virtual_clock)
    metrics = SchedulerMetrics()
    recorder = DecisionLogRecorder(cluster, DecisionRecorder(log, scheduler="sched-a"),
                                   clock=virtual_clock, asynchronous=False)
    sched = Scheduler(cluster, clock=virtual_clock, observer=metrics, recorder=recorder, seed=0)
    cluster.create("nodes", make_node("n1", cpu="2"))
    for i in range(6):
        cluster.create("pods", make_pod(f"p{i}", cpu="500m"))
    cluster.create("pods", make_pod("big", cpu="3"))  # fits nowhere until n2 arrives
    sched.start()
    try:
        eventually(lambda: len(live.bound()) == 4 and "default/big" in live.pods, what="n1 to fill up")
        cluster.create("nodes", make_node("n2", cpu="4"))
        drive_until(virtual_clock, lambda: len(live.bound()) == 7, limit=400, step=1.0,
                    what="the rest to be scheduled")
        sched.wait_for_bindings(10)
    finally:
        sched.stop()
    on_cluster = {f"default/{p['metadata']['name']}": p["spec"].get("nodeName")
                  for p in cluster.list("pods", "default")["items"]}
    bound_on_cluster = {k: v for k, v in on_cluster.items() if v}
    assert replay(log, PodPlacements()) == live, "replay rebuilds exactly the live read model"
    assert live.bound() == bound_on_cluster, "and the read model agrees with the API server"
    assert sorted(live.pending()) == sorted(k for k, v in on_cluster.items() if not v)
    failed = [e for e in log.read() if e.event_type == EventTypes.ATTEMPT_FAILED]
    assert failed and all("Insufficient cpu" in e.payload["reason"] for e in failed)
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    scheduled_lines = [r for r in records if r["msg"] == "Successfully bound pod to node"]
    assert len(scheduled_lines) == len([e for e in log.read() if e.event_type == EventTypes.SCHEDULED])
    pod_uids = {f"default/{p['metadata']['name']}": p["metadata"]["uid"]
                for p in cluster.list("pods", "default")["items"]}
    assert all(r["correlationId"] == pod_uids[r["pod"]] for r in records), "log lines carry the pod's uid"
    assert all(e.correlation_id == pod_uids[e.aggregate_id] for e in log.read())
    # The metrics saw the same attempts.
    scrape = promql.parse(metrics.exposition(), at=0.0)
    attempts = scrape.select("scheduler_schedule_attempts_total", result="scheduled")
    assert sum(attempts.values()) == len(live.bound())


def test_two_live_schedulers_at_once_never_bind_a_pod_twice(
    cluster: Cluster, virtual_clock: VirtualClock
) -> None:
    """The worst case leader election exists to avoid: two schedulers active together (a deposed
    leader that has not noticed yet). Each pod still ends up bound once: the API server's 409."""
    log = EventLog(clock=virtual_clock)
    for i in range(4):
        cluster.create("nodes", make_node(f"n{i}", cpu="16"))
    schedulers = [
        Scheduler(cluster, clock=virtual_clock, seed=i,
                  recorder=DecisionLogRecorder(cluster, DecisionRecorder(log, scheduler=f"s{i}"),
                                               clock=virtual_clock, asynchronous=False))
        for i in range(2)
    ]
    for s in schedulers:
        s.start()
    try:
        for i in range(60):
            cluster.create("pods", make_pod(f"p{i:02d}", cpu="100m"))
        eventually(lambda: sum(1 for p in cluster.list("pods", "default")["items"]
                               if p["spec"].get("nodeName")) == 60, timeout=30, what="all pods bound")
        for s in schedulers:
            s.wait_for_bindings(10)
    finally:
        for s in schedulers:
            s.stop()
    scheduled = [e for e in log.read() if e.event_type == EventTypes.SCHEDULED]
    by_pod: dict[str, list[str]] = {}
    for e in scheduled:
        by_pod.setdefault(e.aggregate_id, []).append(e.payload["scheduler"])
    assert len(by_pod) == 60 and all(len(v) == 1 for v in by_pod.values()), "one successful bind per pod"
    on_cluster = {f"default/{p['metadata']['name']}": p["spec"]["nodeName"]
                  for p in cluster.list("pods", "default")["items"]}
    assert replay(log, PodPlacements()).bound() == on_cluster
    conflicts = sum(s.stats.bind_conflicts for s in schedulers)
    bound = sum(s.stats.bound for s in schedulers)
    assert bound == 60 and conflicts == sum(s.stats.scheduled for s in schedulers) - 60, (
        "every decision either bound the pod or met a 409")
