"""Fault tests: the real control plane failing under minisched (realcluster), and the same faults
reproduced without it where a fake server is enough. `relay` puts a TcpRelay between a client and
the API server.

These tests kill, restart and compact their control plane, so they get one of their own (made by
tests/plugins/controlplane.py's factory, under the session's fixture names, overriding them for this
folder): the session's is shared by tests that rely on its history, e.g. a freshly started server
still serving resourceVersion 1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minisched.controlplane.kubeconfig import write_kubeconfig
from minisched.controlplane.relay import TcpRelay
from tests.plugins.controlplane import control_plane_fixtures

# This folder's own control plane, with the session's fixture names (overriding them here only).
control_plane, _real_cluster_shared, _baseline, real_cluster = control_plane_fixtures("package")


@pytest.fixture
def relay(control_plane: Any) -> Iterator[TcpRelay]:
    """A TCP relay to this folder's API server; closed (every connection reset) after the test."""
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
