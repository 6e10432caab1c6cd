"""A forced 410 under `minisched run` (issue 17's fault suite): the scheduler is paused (SIGSTOP) while
pods are deleted and created and etcd is compacted past everything it saw; resumed, its watches get
410 Gone, its informers relist (from the last resourceVersion first, as client-go's reflector), and
no deleted pod is bound, every new one is, none twice.

This needs an API server without a watch cache (a second control plane for this module): with the
cache on, kube-apiserver serves old versions from memory and never answers 410 here."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from minisched.controlplane import ControlPlane, ControlPlaneOptions
from minisched.controlplane.observe import PodObserver
from minisched.objects import make_pod
from tests.faults.helpers import MinischedProcess, check_invariants, make_nodes, wait_all_bound
from tests.plugins.controlplane import require_binaries

pytestmark = pytest.mark.realcluster


@pytest.fixture(scope="module")
def uncached() -> Iterator[ControlPlane]:
    with ControlPlane(ControlPlaneOptions(start_kwok=False, watch_cache=False), require_binaries()) as cp:
        yield cp


def test_a_paused_scheduler_relists_after_compaction_and_binds_no_deleted_pod(
    uncached: ControlPlane, tmp_path: Path
) -> None:
    from minisched.cluster.real import RealCluster

    cluster = RealCluster.from_kubeconfig(path=str(uncached.kubeconfig))
    ns = f"gone-{uuid.uuid4().hex[:6]}"
    cluster.create("namespaces", {"metadata": {"name": ns}})
    nodes = make_nodes(cluster, ns, 2)
    # Watches end every <= 2 s (idle deadline 3 s), so the paused scheduler's watches are over when
    # it resumes and it must watch again from a compacted resourceVersion.
    proc = MinischedProcess(uncached.kubeconfig, tmp_path / "minisched.log", "--watch-idle-timeout", "3")
    try:
        with PodObserver(cluster, namespace=ns, nodes=nodes) as obs:
            before = [f"before-{i}" for i in range(20)]
            for name in before:
                cluster.create("pods", make_pod(name, namespace=ns, cpu="10m", memory="16Mi"))
            wait_all_bound(obs, ns, before, 60)
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                # Pending pods that it will never see, and pods deleted before it could bind them.
                deleted = [f"deleted-{i}" for i in range(10)]
                for name in deleted:
                    cluster.create("pods", make_pod(name, namespace=ns, cpu="10m", memory="16Mi"))
                for name in deleted:
                    cluster.delete("pods", name, ns, grace_period_seconds=0)
                after = [f"after-{i}" for i in range(20)]
                for name in after:
                    cluster.create("pods", make_pod(name, namespace=ns, cpu="10m", memory="16Mi"))
                for i in range(3):  # move past the revision etcd keeps after compacting
                    cluster.patch("namespaces", ns, {"metadata": {"labels": {"n": str(i)}}})
                uncached.compact_etcd()
                time.sleep(3)  # the server ends the paused scheduler's watches meanwhile
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            resumed = time.monotonic()
            took = wait_all_bound(obs, ns, after, 60)
            print(f"\n[fault suite] forced 410: all 20 new pods bound {took:.1f} s after the resume")
            assert time.monotonic() - resumed < 60
            bound_deleted = [n for n in deleted if (r := obs.record(f"{ns}/{n}")) is not None and r.bindings]
            assert not bound_deleted, f"deleted pods bound: {bound_deleted}"
            check_invariants(obs, before + after, ns)
        # The resumed informers read the events buffered while paused first (the pods bind from
        # those at once), then meet the ended watch and re-watch into the 410: wait for that line.
        waited = time.monotonic() + 30
        while not (expired := [line for line in proc.log().splitlines() if "expired (410)" in line]):
            if time.monotonic() > waited:
                break
            time.sleep(0.1)
        print("\n".join(["[fault suite] minisched after the resume:", *expired]))
        assert expired, f"no informer saw a 410:\n{proc.tail()}"
    finally:
        proc.terminate(30)
        cluster.close()
    proc.assert_clean_log()
