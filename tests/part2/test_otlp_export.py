"""§4.4 from `minisched run`'s side: OTLP/HTTP export to a receiver on loopback, on both backends,
and the command's options and standard OTEL_* variables."""

from __future__ import annotations

import threading

import pytest

from minisched.app import SchedulerApp
from minisched.cli import _otlp_endpoint_set, main
from minisched.cluster import Cluster
from minisched.objects import make_node, make_pod
from minisched.observability.otlp_receiver import OtlpReceiver
from minisched.observability.tracing import ATTEMPT_SPAN, SchedulingTracer, otlp_provider
from minisched.resources import NODES, PODS
from tests.scheduler.runtime.helpers import node_of, wait_until


def test_the_app_exports_each_attempt_over_otlp_http(cluster: Cluster) -> None:
    cluster.create(NODES, make_node("trace-n1", cpu="2"))
    with OtlpReceiver() as receiver:
        provider = otlp_provider(receiver.endpoint, ratio=1.0)
        assert provider is not None
        app = SchedulerApp(cluster, scheduler_options={"tracer": SchedulingTracer(provider)})
        stop = threading.Event()
        thread = threading.Thread(target=app.run, args=(stop,), daemon=True)
        thread.start()
        try:
            cluster.create(PODS, make_pod("traced-1"))
            cluster.create(PODS, make_pod("traced-2"))
            wait_until(lambda: node_of(cluster, "traced-1") and node_of(cluster, "traced-2"), timeout=30,
                       what="both pods bound")
        finally:
            stop.set()
            thread.join(30)
            provider.shutdown()  # flush the batch
        assert receiver.wait_for(lambda spans: sum(s.name == ATTEMPT_SPAN for s in spans) >= 2)
        roots = {s.attributes["minisched.pod"]: s for s in receiver.spans if s.name == ATTEMPT_SPAN}
        assert roots["default/traced-1"].attributes["minisched.node"] == "trace-n1"
        assert roots["default/traced-1"].service == "minisched"
        bind = [s for s in receiver.spans if s.name == "Bind" and s.trace_id == roots["default/traced-2"].trace_id]
        assert len(bind) == 1 and bind[0].attributes["minisched.status"] == "Success"


def test_standard_variables_choose_endpoint_and_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
                "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"):
        monkeypatch.delenv(var, raising=False)
    assert otlp_provider() is None  # nothing asked for: no tracing
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    provider = otlp_provider()
    assert provider is not None and "0.1" in provider.sampler.get_description()
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
    provider = otlp_provider()
    assert provider is not None and "0.25" in provider.sampler.get_description()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert otlp_provider("http://127.0.0.1:1") is None


def test_run_refuses_bad_tracing_options(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert main(["run", "--embedded", "--otlp-endpoint", "http://127.0.0.1:1", "--trace-sample-ratio", "2"]) == 2
    assert "--trace-sample-ratio must be in [0, 1]" in capsys.readouterr().err
    assert main(["run", "--embedded", "--trace-profiles", "/tmp/never-written"]) == 2
    assert "need --otlp-endpoint" in capsys.readouterr().err


def test_run_looks_for_tracing_where_otlp_provider_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # `minisched run` imports tracing (opentelemetry) only when this says an endpoint is set: the
    # flag or either standard variable must each turn it on, or tracing would silently stay off
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    assert not _otlp_endpoint_set(None)
    assert _otlp_endpoint_set("http://127.0.0.1:1")
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.setenv(var, "http://127.0.0.1:1")
        assert _otlp_endpoint_set(None) and otlp_provider() is not None, var
        monkeypatch.delenv(var)
