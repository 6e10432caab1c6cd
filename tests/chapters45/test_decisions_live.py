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
    embedded_cluster: Cluster, virtual_clock: VirtualClock
) -> None:
    log = EventLog(clock=virtual_clock, id_factory=EventLog.sequential_ids())
    live = PodPlacements()
    log.subscribe(live.apply)
    lines = io.StringIO()
    configure(lines, logger="minisched.decisions", clock=virtual_clock)
    metrics = SchedulerMetrics()
    recorder = DecisionLogRecorder(embedded_cluster, DecisionRecorder(log, scheduler="sched-a"),
                                   clock=virtual_clock, asynchronous=False)
    sched = Scheduler(embedded_cluster, clock=virtual_clock, observer=metrics, recorder=recorder, seed=0)
    embedded_cluster.create("nodes", make_node("n1", cpu="2"))
    for i in range(6):
        embedded_cluster.create("pods", make_pod(f"p{i}", cpu="500m"))
    embedded_cluster.create("pods", make_pod("big", cpu="3"))  # fits nowhere until n2 arrives
    sched.start()
    try:
        eventually(lambda: len(live.bound()) == 4 and "default/big" in live.pods, what="n1 to fill up")
        embedded_cluster.create("nodes", make_node("n2", cpu="4"))
        drive_until(virtual_clock, lambda: len(live.bound()) == 7, limit=400, step=1.0,
                    what="the rest to be scheduled")
        sched.wait_for_bindings(10)
    finally:
        sched.stop()
    on_cluster = {f"default/{p['metadata']['name']}": p["spec"].get("nodeName")
                  for p in embedded_cluster.list("pods", "default")["items"]}
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
                for p in embedded_cluster.list("pods", "default")["items"]}
    assert all(r["correlationId"] == pod_uids[r["pod"]] for r in records), "log lines carry the pod's uid"
    assert all(e.correlation_id == pod_uids[e.aggregate_id] for e in log.read())
    # The metrics saw the same attempts.
    scrape = promql.parse(metrics.exposition(), at=0.0)
    attempts = scrape.select("scheduler_schedule_attempts_total", result="scheduled")
    assert sum(attempts.values()) == len(live.bound())
