"""The control-plane harness: builds are pinned, the control plane comes up, KWOK plays kubelet,
kube-scheduler runs on demand, and stopping leaves nothing behind."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from minisched.controlplane import (
    ETCD_VERSION,
    KUBERNETES_VERSION,
    KWOK_VERSION,
    POD_CIDR,
    SERVICE_CIDR,
    ControlPlane,
    ControlPlaneOptions,
    create_fake_nodes,
    fake_node,
    node_is_ready,
    wait_for,
)
from minisched.controlplane.binaries import build_script
from minisched.controlplane.processes import port_is_listening
from minisched.errors import NotFound
from tests.plugins.controlplane import require_binaries, skip_unless_ci

pytestmark = pytest.mark.realcluster


def test_build_script_pins_the_versions_the_harness_looks_for() -> None:
    text = build_script().read_text()
    for variable, version in (
        ("ETCD_VERSION", ETCD_VERSION),
        ("KUBERNETES_VERSION", KUBERNETES_VERSION),
        ("KWOK_VERSION", KWOK_VERSION),
    ):
        assert re.search(rf'{variable}="\$\{{{variable}:-{re.escape(version)}\}}"', text), variable


def test_service_and_pod_ranges_do_not_overlap() -> None:
    assert not ipaddress.ip_network(SERVICE_CIDR).overlaps(ipaddress.ip_network(POD_CIDR))


def test_wait_for_with_hold_skips_an_instant_and_returns_a_state_that_lasts() -> None:
    # 1, 0, then 1 for good: without hold the first poll returns; with hold the instant is skipped
    # and the lasting value returned once it has held.
    values = iter([1, 0] + [2] * 1000)
    assert wait_for(lambda: next(values), 5, "a value", interval=0.01) == 1
    values = iter([1, 0] + [2] * 1000)
    polls: list[int] = []
    assert wait_for(lambda: polls.append(1) or next(values), 5, "a value", interval=0.01, hold=0.05) == 2
    assert len(polls) >= 2 + 5  # the instant, the gap, then polls over the whole hold


def test_wait_for_with_hold_times_out_naming_the_hold_when_the_state_keeps_flickering() -> None:
    flicker = iter([1, 0] * 10_000)
    with pytest.raises(TimeoutError, match=r"waiting for a steady value held for 0.2s"):
        wait_for(lambda: next(flicker), 0.3, "a steady value", interval=0.01, hold=0.2)


def test_api_server_is_ready_and_runs_the_pinned_version(control_plane: ControlPlane) -> None:
    status, body = control_plane.api_get("/readyz")
    assert status == 200, body
    status, version = control_plane.api_get("/version")
    assert status == 200
    if not os.environ.get("MINISCHED_CONTROLPLANE_BIN"):  # an override may hold another version
        assert version["gitVersion"] == KUBERNETES_VERSION
    status, ns = control_plane.api_get("/api/v1/namespaces/default")
    assert status == 200 and ns["metadata"]["name"] == "default"
    assert control_plane.kubeconfig.stat().st_mode & 0o077 == 0, "kubeconfig holds a private key"


def _pod(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}], **spec},
    }


def test_kwok_makes_a_fake_node_ready_and_runs_a_bound_pod(real_cluster: Any, real_namespace: str) -> None:
    names = create_fake_nodes(real_cluster, 3, prefix="kwok-harness", wait_ready=30)
    assert names == ["kwok-harness-0", "kwok-harness-1", "kwok-harness-2"]
    node = real_cluster.get("nodes", "kwok-harness-0")
    assert node_is_ready(node) and node["status"]["allocatable"]["cpu"] == "32"

    real_cluster.create("pods", _pod("runner", real_namespace))
    real_cluster.bind(real_namespace, "runner", "kwok-harness-0")
    pod = wait_for(
        lambda: (
            (p := real_cluster.get("pods", "runner", real_namespace))["status"].get("phase") == "Running"
            and p
        ),
        30,
        "KWOK to run the bound pod",
    )
    assert pod["spec"]["nodeName"] == "kwok-harness-0"
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(POD_CIDR)

    # A bound pod's deletion is graceful: it waits for "the kubelet", here KWOK's pod-delete stage.
    deleted = real_cluster.delete("pods", "runner", real_namespace)
    assert deleted["metadata"].get("deletionTimestamp")

    def gone() -> bool:
        try:
            real_cluster.get("pods", "runner", real_namespace)
        except NotFound:
            return True
        return False

    wait_for(gone, 30, "KWOK to finish the graceful deletion")


def test_kube_scheduler_binds_a_pod_to_a_fake_node(
    control_plane: ControlPlane, real_cluster: Any, real_namespace: str
) -> None:
    real_cluster.create("nodes", fake_node("kwok-sched-0"))
    wait_for(lambda: node_is_ready(real_cluster.get("nodes", "kwok-sched-0")), 30, "node Ready")
    config = {
        "profiles": [{"schedulerName": "yardstick-scheduler"}],
        "clientConnection": {"qps": 500, "burst": 1000},
        "percentageOfNodesToScore": 100,
    }
    control_plane.start_scheduler(config, name="yardstick-scheduler")
    try:
        real_cluster.create("pods", _pod("scheduled", real_namespace, schedulerName="yardstick-scheduler"))
        pod = wait_for(
            lambda: (
                (p := real_cluster.get("pods", "scheduled", real_namespace))["spec"].get("nodeName") and p
            ),
            60,
            "kube-scheduler to bind the pod",
        )
        assert pod["spec"]["nodeName"] == "kwok-sched-0"
        metrics = control_plane.scheduler_metrics("yardstick-scheduler")
        assert (
            'scheduler_schedule_attempts_total{profile="yardstick-scheduler",result="scheduled"} 1' in metrics
        )
    finally:
        control_plane.stop_component("yardstick-scheduler")
    assert "yardstick-scheduler" not in control_plane.processes


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); Popen.wait() reaps ours, so this means really alive.
    return True


def test_stopping_leaves_no_process_port_or_state_and_keeps_logs_of_a_failure() -> None:
    binaries = require_binaries()
    cp = ControlPlane(ControlPlaneOptions(), binaries)
    with pytest.raises(RuntimeError, match="test failed inside"), cp:
        pids = {name: proc.pid for name, proc in cp.processes.items()}
        ports = [cp.etcd_port, cp.apiserver_port]
        assert set(pids) == {"etcd", "kube-apiserver", "kwok"}
        assert all(port_is_listening(p) for p in ports)
        raise RuntimeError("test failed inside the control plane's with-block")
    assert not [name for name, pid in pids.items() if _alive(pid)]
    assert not [p for p in ports if port_is_listening(p)]
    assert not cp.work_dir.exists(), "etcd data, certificates and kubeconfig are removed"
    logs = sorted(p.name for p in Path(cp.log_dir).iterdir())
    assert logs == ["etcd.log", "kube-apiserver.log", "kwok.log"], "logs are kept after a failure"
    shutil.rmtree(cp.log_dir)


def test_stopping_one_component_ends_its_process(control_plane: ControlPlane) -> None:
    proc = control_plane.start_scheduler(name="short-lived-scheduler")
    assert proc.log_path.exists()
    control_plane.stop_component("short-lived-scheduler")
    assert not proc.running()
    assert not _alive(proc.pid)


_ORPHAN_SCRIPT = """
import os, sys
from minisched.controlplane import ControlPlane
cp = ControlPlane().start()
print(" ".join(str(p.pid) for p in cp.processes.values()), cp.apiserver_port, cp.etcd_port, flush=True)
print(cp.work_dir, cp.log_dir, flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), 9)
sys.exit(3)  # no stop(): atexit must clean up
"""


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_no_stray_processes_when_the_python_process_ends_without_stopping(how: str) -> None:
    require_binaries()
    done = subprocess.run(
        [sys.executable, "-c", _ORPHAN_SCRIPT, how], capture_output=True, text=True, timeout=120
    )
    assert done.returncode in (3, -9), done.stderr
    numbers, directories = done.stdout.splitlines()[:2]
    for directory in directories.split():  # a killed parent cannot clean up its temp dirs
        shutil.rmtree(directory, ignore_errors=True)
    *pids, apiserver_port, etcd_port = (int(x) for x in numbers.split())
    assert len(pids) == 3
    wait_for(lambda: not any(_alive(p) for p in pids), 15, "the components to die with their parent")
    assert not port_is_listening(apiserver_port) and not port_is_listening(etcd_port)


_NO_ROUTE_SCRIPT = """
from minisched.controlplane import ControlPlane, ControlPlaneOptions
with ControlPlane(ControlPlaneOptions(start_kwok=False)) as cp:
    print(cp.api_get("/readyz")[0])
"""


def test_starts_on_a_machine_without_a_default_route() -> None:
    # kube-apiserver derives its advertise address from the default route and refuses to start
    # without one ("no default routes found"); the harness passes --advertise-address=127.0.0.1.
    require_binaries()
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"]).returncode != 0:
        skip_unless_ci("needs `unshare -n` (root or user namespaces) to get a network without routes")
    script = f"ip link set lo up 2>/dev/null || true; exec {sys.executable} -c '{_NO_ROUTE_SCRIPT}'"
    done = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "200"
