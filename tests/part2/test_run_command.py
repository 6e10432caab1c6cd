"""`minisched run` with the Part II options, as a process against the real control plane: spans of
its attempts reach an OTLP/HTTP receiver on loopback, and a SchedulerPluginConfig is applied."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from minisched.controllers.plugin_config import SCHEDULER_PLUGIN_CONFIGS, make_plugin_config
from minisched.objects import make_node, make_pod
from minisched.observability.otlp_receiver import OtlpReceiver
from minisched.observability.tracing import ATTEMPT_SPAN
from minisched.resources import NODES, PODS
from tests.scheduler.runtime.helpers import wait_until


@pytest.mark.realcluster
def test_run_exports_spans_and_follows_plugin_configs(real_cluster: Any, control_plane: Any, tmp_path: Any) -> None:
    real_cluster.create(NODES, make_node("run-n1", cpu="8"))
    real_cluster.create(NODES, make_node("run-n2", cpu="2"))  # two feasible nodes: the scores run
    with OtlpReceiver() as receiver:
        proc = subprocess.Popen(
            [sys.executable, "-m", "minisched.cli", "-v", "run", "--kubeconfig", str(control_plane.kubeconfig),
             "--plugin-config", "--otlp-endpoint", receiver.endpoint, "--trace-sample-ratio", "1",
             "--trace-profiles", str(tmp_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: _served(real_cluster), timeout=60, what="the CRD installed by minisched run")
            real_cluster.create(SCHEDULER_PLUGIN_CONFIGS, make_plugin_config("minisched", [
                {"name": "ImageLocality", "enabled": False}]))
            wait_until(lambda: _applied(real_cluster), timeout=60, what="the config applied")
            real_cluster.create(PODS, make_pod("run-traced"))
            wait_until(lambda: real_cluster.get(PODS, "run-traced", "default")["spec"].get("nodeName"), timeout=60,
                       what="run-traced bound")
            proc.send_signal(signal.SIGTERM)  # shutting down flushes the batched spans
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
        assert receiver.wait_for(lambda spans: any(s.name == ATTEMPT_SPAN for s in spans), timeout=10)
        root = next(s for s in receiver.spans if s.name == ATTEMPT_SPAN)
        assert root.attributes["minisched.pod"] == "default/run-traced"
        assert root.attributes["minisched.node"] == "run-n1"
        scores = root.attributes["minisched.score.plugins"]
        assert "NodeResourcesFit" in scores and "ImageLocality" not in scores
        assert root.attributes["minisched.profile.id"] == root.span_id
        assert (tmp_path / f"{root.span_id}.prof").exists()  # the cycle's profile, under its span id


def _served(cluster: Any) -> bool:
    try:
        cluster.list(SCHEDULER_PLUGIN_CONFIGS)
        return True
    except Exception:
        time.sleep(0.1)
        return False


def _applied(cluster: Any) -> bool:
    status = cluster.get(SCHEDULER_PLUGIN_CONFIGS, "minisched").get("status") or {}
    return any(c.get("status") == "True" for c in status.get("conditions") or [])
