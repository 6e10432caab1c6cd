"""On a real API server: an informer that comes back after etcd was compacted gets a real 410,
relists, and reports what it missed, deletions as tombstones."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from minisched.controlplane import ControlPlane, ControlPlaneOptions
from minisched.informer import ExponentialBackoff, ListWatch, SharedIndexInformer
from minisched.meta import key_of, resource_version_of
from minisched.objects import make_namespace, make_pod
from minisched.resources import NAMESPACES, PODS
from tests.informer.fakes import GatedListWatch
from tests.informer.recorder import Recorder
from tests.plugins.controlplane import require_binaries
from tests.workqueue.helpers import eventually

pytestmark = pytest.mark.realcluster


@pytest.fixture(scope="module")
def uncached_control_plane() -> Any:
    """An API server without a watch cache, so compacting etcd expires old resourceVersions."""
    with ControlPlane(ControlPlaneOptions(start_kwok=False, watch_cache=False), require_binaries()) as cp:
        yield cp


def test_informer_relists_after_a_real_410(uncached_control_plane: ControlPlane) -> None:
    from minisched.cluster.real import RealCluster

    with RealCluster.from_kubeconfig(path=str(uncached_control_plane.kubeconfig)) as cluster:
        ns = f"expiry-{uuid.uuid4().hex[:6]}"
        cluster.create(NAMESPACES, make_namespace(ns))
        for name in ("gone", "kept"):
            cluster.create(PODS, make_pod(name, namespace=ns))
        lw = GatedListWatch(ListWatch.for_resource(cluster, PODS, ns))
        # Each watch lasts 1-1.5 s, so the first one soon ends and the next is held at the gate.
        informer = SharedIndexInformer(lw, watch_timeout=(1.0, 1.5), backoff=ExponentialBackoff(initial=0.05))
        rec = Recorder()
        informer.add_event_handler(rec)
        with informer:
            assert informer.wait_for_sync(30)
            assert lw.held.wait(10)  # type: ignore[attr-defined]
            last_known = rec.snapshot()[f"{ns}/gone"]
            cluster.delete(PODS, "gone", ns)
            cluster.create(PODS, make_pod("new", namespace=ns))
            for i in range(2):  # etcd keeps the compaction revision: move past it
                cluster.patch(PODS, "kept", {"metadata": {"labels": {"n": str(i)}}}, ns)
            uncached_control_plane.compact_etcd()
            lw.gate.set()  # type: ignore[attr-defined]

            def server() -> dict[str, str]:
                return {key_of(o): resource_version_of(o) for o in cluster.list(PODS, ns)["items"]}

            eventually(lambda: rec.snapshot() == server(), 30, "the informer to relist")
            reflector = informer.reflector
            assert reflector is not None and reflector.stats.expired >= 1 and reflector.stats.lists >= 2
            assert ("delete", f"{ns}/gone", last_known, True) in rec.events
            assert rec.violations == []
