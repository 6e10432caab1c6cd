"""§4.2 metrics names and labels; §4.4 /healthz and /readyz over HTTP."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from minisched.observability.metrics import SchedulerMetrics, WorkqueueMetrics, exponential_buckets
from minisched.observability.server import HealthServer, informers_synced, leadership_known
from minisched.workqueue.metrics import MetricsProvider


def families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_scheduler_metrics_use_kube_scheduler_names_labels_and_buckets() -> None:
    m = SchedulerMetrics(profile="default-scheduler")
    m.observe_attempt("scheduled", 0.004)
    m.observe_attempt("unschedulable", 0.002)
    m.observe_algorithm(0.001)
    m.observe_scheduled(attempts=2, seconds_since_first_enqueue=1.5)
    m.observe_extension_point("Filter", "Success", 0.0003)
    m.set_pending("backoff", 3)
    m.observe_preemption(victims=2)
    text = m.exposition()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("scheduler_schedule_attempts_total",
                    (("profile", "default-scheduler"), ("result", "scheduled")))] == 1
    assert samples[("scheduler_pending_pods", (("queue", "backoff"),))] == 3
    assert samples[("scheduler_pending_pods", (("queue", "gated"),))] == 0
    assert samples[("scheduler_pod_scheduling_sli_duration_seconds_count", (("attempts", "2"),))] == 1
    assert samples[("scheduler_preemption_attempts_total", ())] == 1
    assert ("scheduler_framework_extension_point_duration_seconds_count",
            (("extension_point", "Filter"), ("profile", "default-scheduler"), ("status", "Success"))) in samples
    # Buckets: exponential 0.001 x2, 15 for attempts; 0.01 x2, 20 for the SLI (+Inf added by Prometheus).
    attempt_les = [float(s.labels["le"]) for f in text_string_to_metric_families(text)
                   if f.name == "scheduler_scheduling_attempt_duration_seconds"
                   for s in f.samples if s.name.endswith("_bucket") and s.labels["result"] == "scheduled"]
    assert attempt_les[:-1] == pytest.approx(list(exponential_buckets(0.001, 2, 15)))
    assert attempt_les[-1] == float("inf") and attempt_les[-2] == pytest.approx(16.384)
    sli_les = [float(s.labels["le"]) for f in text_string_to_metric_families(text)
               if f.name == "scheduler_pod_scheduling_sli_duration_seconds" for s in f.samples
               if s.name.endswith("_bucket")]
    assert len(sli_les) == 21 and sli_les[0] == pytest.approx(0.01)


def test_bad_label_values_are_refused_with_the_allowed_ones() -> None:
    m = SchedulerMetrics()
    with pytest.raises(ValueError, match="scheduled"):
        m.observe_attempt("succeeded", 0.1)
    with pytest.raises(ValueError, match="active"):
        m.set_pending("waiting", 1)
    with pytest.raises(ValueError, match="at least one attempt"):
        m.observe_scheduled(0, 1.0)


def test_per_pod_metrics_look_their_labelled_children_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """prometheus_client's labels() validates and joins the label values on every call (~2 µs): the
    binding cycle observes an attempt and the SLI for every pod, so each child is looked up once,
    and counts the same (and a bad value is still refused, the first time it comes)."""
    m = SchedulerMetrics()
    looked_up: list[str] = []
    for metric in (m.schedule_attempts, m.scheduling_attempt_duration, m.pod_scheduling_sli_duration):
        labels = metric.labels

        def counted(*args: str, _labels=labels, _name=metric._name, **kwargs: str):  # type: ignore[no-untyped-def]
            looked_up.append(_name)
            return _labels(*args, **kwargs)

        monkeypatch.setattr(metric, "labels", counted)
    for _ in range(3):
        m.observe_attempt("scheduled", 0.004)
        m.observe_scheduled(attempts=1, seconds_since_first_enqueue=0.5)
    assert sorted(looked_up) == sorted([m.schedule_attempts._name, m.scheduling_attempt_duration._name,
                                        m.pod_scheduling_sli_duration._name])
    text = m.exposition()
    assert 'scheduler_schedule_attempts_total{profile="minisched",result="scheduled"} 3.0' in text
    assert 'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 3.0' in text
    with pytest.raises(ValueError, match="scheduled"):
        m.observe_attempt("succeeded", 0.1)


def test_two_schedulers_in_one_process_do_not_share_metrics() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.observe_attempt("scheduled", 0.01)
    assert "scheduler_schedule_attempts_total{" in a.exposition()
    assert 'result="scheduled"' not in b.exposition()


def test_workqueue_metrics_follow_client_go_and_fit_the_queue_protocol() -> None:
    provider = WorkqueueMetrics()
    assert isinstance(provider, MetricsProvider)
    provider.depth("pods").inc()
    provider.adds("pods").inc()
    provider.latency("pods").observe(0.002)
    provider.work_duration("pods").observe(0.01)
    provider.retries("pods").inc()
    provider.unfinished_work_seconds("pods").set(0.5)
    provider.longest_running_processor_seconds("pods").set(0.5)
    names = {s.name for f in text_string_to_metric_families(
        __import__("prometheus_client").generate_latest(provider.registry).decode()) for s in f.samples}
    for expected in ("workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds_bucket",
                     "workqueue_work_duration_seconds_count", "workqueue_retries_total",
                     "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"):
        assert expected in names
    with pytest.raises(ValueError, match="name"):
        provider.depth("")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


class FakeElector:
    def __init__(self) -> None:
        self.holder: str | None = None

    def leader(self) -> str | None:
        return self.holder


def test_healthz_and_readyz_over_http() -> None:
    metrics = SchedulerMetrics()
    metrics.observe_attempt("scheduled", 0.02)
    synced = {"pods": False}
    elector = FakeElector()
    server = HealthServer(metrics.registry, port=0)
    server.add_readiness_check("informer-sync", informers_synced(lambda: synced["pods"]))
    server.add_readiness_check("leader-election", leadership_known(elector))
    with server:
        assert get(server.url + "/healthz") == (200, "ok")
        assert get(server.url + "/livez") == (200, "ok")
        status, body = get(server.url + "/readyz?verbose")
        assert status == 500
        assert "[-]informer-sync failed: informers not synced yet" in body
        assert "[-]leader-election failed: leadership state not known yet" in body
        synced["pods"] = True
        elector.holder = "scheduler-b"  # a follower that knows its leader is ready
        assert get(server.url + "/readyz") == (200, "ok")
        assert get(server.url + "/readyz/informer-sync") == (200, "ok")
        assert get(server.url + "/readyz/nope")[0] == 404
        status, text = get(server.url + "/metrics")
        assert status == 200 and "scheduler_schedule_attempts_total" in text
        assert get(server.url + "/nothing")[0] == 404


def test_a_crashing_check_fails_with_its_message_and_names_are_checked() -> None:
    server = HealthServer()
    server.add_liveness_check("etcd", lambda: 1 / 0)
    status, body = server.evaluate("healthz", verbose=True)
    assert status == 500 and "[-]etcd failed: ZeroDivisionError" in body and "[+]ping ok" in body
    assert server.evaluate("readyz")[0] == 500, "a dead process is not ready either"
    with pytest.raises(ValueError, match="already has"):
        server.add_liveness_check("etcd", lambda: None)
    with pytest.raises(ValueError, match="loopback"):
        HealthServer(host="10.1.2.3")  # a single non-loopback interface


def test_recording_metrics_keep_exactly_what_the_histogram_counted() -> None:
    from minisched.observability.metrics import RecordingSchedulerMetrics
    from minisched.observability.promql import parse

    m = RecordingSchedulerMetrics()
    for seconds in (0.0005, 0.003, 0.003, 0.2):
        m.observe_attempt("scheduled", seconds)
    m.observe_attempt("unschedulable", 0.01)
    with pytest.raises(ValueError):
        m.observe_attempt("lost", 0.1)
    assert m.attempt_seconds["scheduled"] == [0.0005, 0.003, 0.003, 0.2]
    assert sorted(m.all_attempt_seconds()) == [0.0005, 0.003, 0.003, 0.01, 0.2]
    counted = parse(m.exposition(), at=0.0).select("scheduler_scheduling_attempt_duration_seconds_count")
    assert sum(counted.values()) == len(m.all_attempt_seconds())
