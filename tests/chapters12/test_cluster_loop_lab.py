"""install_crd waits until a CRD's resource is served; ClusterLoopLab runs §2.1's loop on a cluster."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.cluster.crds import install_crd
from minisched.controllers import replicaset as mrs
from minisched.controllers.gain_loop import ClusterLoopLab, simulate_quantized
from minisched.errors import AlreadyExists, ServiceUnavailable
from minisched.resources import CRDS


class SlowToServe:
    """A real API server's order of things: the CRD is stored at once, Established on the third
    read, and its resource answers 503 twice more before it is served."""

    def __init__(self) -> None:
        self.crd_reads = 0
        self.lists = 0
        self.created: list[str] = []

    def create(self, resource: Any, obj: dict, namespace: str | None = None) -> dict:
        if self.created:
            raise AlreadyExists("exists")
        self.created.append(obj["metadata"]["name"])
        return obj

    def get(self, resource: Any, name: str, namespace: str | None = None) -> dict:
        self.crd_reads += 1
        status = "True" if self.crd_reads >= 3 else "False"
        return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Established", "status": status}]}}

    def list(self, resource: Any, namespace: str | None = None, **options: Any) -> dict:
        self.lists += 1
        if self.lists <= 2:
            raise ServiceUnavailable("the server is currently unable to handle the request")
        return {"items": []}


def test_install_crd_waits_for_established_and_served() -> None:
    cluster = SlowToServe()
    resource = install_crd(cluster, mrs.crd(), poll=0.001)  # type: ignore[arg-type]
    assert resource == mrs.RESOURCE
    assert cluster.crd_reads >= 5 and cluster.lists == 3
    install_crd(cluster, mrs.crd(), poll=0.001)  # type: ignore[arg-type]  # already there: kept
    assert cluster.created == [mrs.crd()["metadata"]["name"]]


def test_install_crd_names_what_it_waited_for() -> None:
    cluster = SlowToServe()
    cluster.list = lambda *a, **k: (_ for _ in ()).throw(ServiceUnavailable("no"))  # type: ignore[method-assign]
    with pytest.raises(TimeoutError, match="minireplicasets.workbook.minisched.io to be served"):
        install_crd(cluster, mrs.crd(), timeout=0.05, poll=0.001)  # type: ignore[arg-type]


def test_the_lab_runs_the_loop_on_the_cluster_and_cleans_up(embedded_cluster: Cluster) -> None:
    lab = ClusterLoopLab(embedded_cluster)
    assert embedded_cluster.get(CRDS, mrs.crd()["metadata"]["name"])
    try:
        run = lab.run("lab-a", alpha=0.6, beta=0.3, reference=6, max_replicas=12, steps=8)
        assert run.observed == simulate_quantized(0.6, 0.3, 6, 12, 8)
        again = lab.run("lab-a", alpha=1.0, beta=0.0, reference=4, max_replicas=8, start=2, steps=3)
        assert again.observed == [2, 4, 4]
    finally:
        lab.close()
    assert embedded_cluster.list(mrs.RESOURCE, "default")["items"] == []
    assert embedded_cluster.list("pods", "default")["items"] == []
