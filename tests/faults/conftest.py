"""Fault tests: the real control plane failing under minisched (realcluster), and the same faults
reproduced without it where a fake server is enough. `relay` puts a TcpRelay between a client and
the API server.

These tests kill, restart and compact their control plane, so they get one of their own (the same
fixture names as tests/plugins/controlplane.py, overridden for this folder): the session's is shared
by tests that rely on its history, e.g. a freshly started server still serving resourceVersion 1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minisched.controlplane.harness import ControlPlane, ControlPlaneOptions
from minisched.controlplane.kubeconfig import write_kubeconfig
from minisched.controlplane.relay import TcpRelay
from tests.plugins.controlplane import _CLEANED, _keys, cleanup, require_binaries


@pytest.fixture(scope="package")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    cp = ControlPlane(ControlPlaneOptions(), require_binaries())
    cp.start()
    yield cp
    cp.stop(keep_logs=request.session.testsfailed > 0)


@pytest.fixture(scope="package")
def _fault_cluster(control_plane: ControlPlane) -> Iterator[Any]:
    from minisched.cluster.real import RealCluster

    cluster = RealCluster.from_kubeconfig(path=str(control_plane.kubeconfig))
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="package")
def _fault_baseline(_fault_cluster: Any) -> dict[str, set[tuple[str, str]]]:
    return {r: _keys(_fault_cluster, r) for r in _CLEANED}


@pytest.fixture
def real_cluster(_fault_cluster: Any, _fault_baseline: dict[str, set[tuple[str, str]]]) -> Iterator[Any]:
    """A RealCluster on this folder's control plane; what a test creates is removed after it."""
    yield _fault_cluster
    cleanup(_fault_cluster, _fault_baseline)


@pytest.fixture
def relay(control_plane: Any) -> Iterator[TcpRelay]:
    """A TCP relay to the session's API server; closed (every connection reset) after the test."""
    r = TcpRelay("127.0.0.1", control_plane.apiserver_port).start()
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture
def relayed_kubeconfig(control_plane: Any, relay: TcpRelay, tmp_path: Path) -> Path:
    """An admin kubeconfig whose server is the relay (TLS passes through it untouched; the serving
    certificate is for 127.0.0.1, which the relay's address is too)."""
    return write_kubeconfig(
        tmp_path / "kubeconfig-relayed", f"https://{relay.address}", control_plane.ca.cert_pem,
        control_plane.admin, "admin",
    )
