"""Fixtures for the real control plane: etcd + kube-apiserver + KWOK built by `make controlplane`.

- `control_plane` (session): one ControlPlane for the whole run; its logs are kept (and their
  directory printed) when any test failed, or with MINISCHED_KEEP_LOGS=1.
- `real_cluster`: a RealCluster on it. After each test, whatever the test created (namespaces,
  pods, nodes, priority classes, ...) is deleted again, so every test starts from the same state,
  as it does on a fresh embedded cluster.
- `real_namespace`: a fresh namespace for one test.

Without the binaries these fixtures skip, saying how to build them; with CI=true they fail instead,
because in CI a missing control plane means the build is broken, not that the tests do not apply.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

from minisched.controlplane import (
    Binaries,
    BinariesNotFound,
    ControlPlane,
    ControlPlaneOptions,
    ProcessFailed,
    find_binaries,
    wait_for,
)

KEEP_LOGS_ENV = "MINISCHED_KEEP_LOGS"
# Namespaces the API server itself populates; tests never own anything in them.
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def skip_unless_ci(reason: str) -> NoReturn:
    """Skip a real-cluster test for `reason` on a developer's machine; in CI (CI=true) fail instead,
    so that a missing prerequisite never turns into a silently green run."""
    if in_ci():
        pytest.fail(f"CI=true, so this is a failure, not a skip: {reason}", pytrace=False)
    pytest.skip(reason)


def require_binaries() -> Binaries:
    """The binaries, or skip (fail under CI=true) with a message saying how to get them."""
    try:
        return find_binaries()
    except BinariesNotFound as err:
        if in_ci():
            pytest.fail(f"CI=true but the real control plane is missing: {err}", pytrace=False)
        pytest.skip(f"real control plane not built ({err}); enable these tests with `make controlplane`")


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    binaries = require_binaries()
    keep = os.environ.get(KEEP_LOGS_ENV, "") not in ("", "0")
    cp = ControlPlane(ControlPlaneOptions(keep_logs=keep), binaries)
    try:
        cp.start()
    except ProcessFailed as err:
        pytest.fail(f"the real control plane did not start (logs kept in {cp.log_dir}): {err}", pytrace=False)
    yield cp
    failed = request.session.testsfailed > 0
    cp.stop(keep_logs=keep or failed)
    if keep or failed:
        print(f"\ncontrol-plane logs kept in {cp.log_dir}", file=sys.stderr)


@pytest.fixture(scope="session")
def _real_cluster_session(control_plane: ControlPlane) -> Iterator[Any]:
    from minisched.cluster.real import RealCluster

    cluster = RealCluster.from_kubeconfig(path=str(control_plane.kubeconfig))
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def _baseline(_real_cluster_session: Any) -> dict[str, set[tuple[str, str]]]:
    """What exists before any test ran (the API server's own objects), so cleanup leaves it alone."""
    return {r: _keys(_real_cluster_session, r) for r in _CLEANED}


@pytest.fixture
def real_cluster(_real_cluster_session: Any, _baseline: dict[str, set[tuple[str, str]]]) -> Iterator[Any]:
    """A RealCluster on the session's control plane; objects the test creates are removed after it."""
    yield _real_cluster_session
    cleanup(_real_cluster_session, _baseline)


@pytest.fixture
def real_namespace(real_cluster: Any) -> str:
    name = f"test-{uuid.uuid4().hex[:8]}"
    real_cluster.create("namespaces", {"metadata": {"name": name}})
    return name


# Namespaced kinds first, then the cluster-scoped ones they may depend on; namespaces last.
_CLEANED = (
    "pods",
    "events",
    "events.events.k8s.io",
    "leases.coordination.k8s.io",
    "configmaps",
    "poddisruptionbudgets.policy",
    "services",
    "replicationcontrollers",
    "replicasets.apps",
    "statefulsets.apps",
    "nodes",
    "priorityclasses.scheduling.k8s.io",
    "customresourcedefinitions.apiextensions.k8s.io",
    "namespaces",
)


_CRDS = "customresourcedefinitions.apiextensions.k8s.io"


def _keys(cluster: Any, resource: str) -> set[tuple[str, str]]:
    items = cluster.list(resource).get("items") or []
    return {((i["metadata"].get("namespace") or ""), i["metadata"]["name"]) for i in items}


def cleanup(cluster: Any, baseline: dict[str, set[tuple[str, str]]]) -> None:
    """Delete everything not in `baseline`, at once (grace 0: no kubelet would finish it for us).

    Namespaces need one more step: their deletion normally waits for kube-controller-manager's
    namespace controller, which does not run here; having emptied them, we clear the finalizer."""
    from minisched.errors import NotFound

    for resource in _CLEANED:
        for namespace, name in _keys(cluster, resource) - baseline[resource]:
            if resource == "namespaces" and name in SYSTEM_NAMESPACES:
                continue
            try:
                cluster.delete(resource, name, namespace or None, grace_period_seconds=0)
                if resource == "namespaces":
                    cluster.request(
                        "PUT",
                        f"/api/v1/namespaces/{name}/finalize",
                        body={
                            "apiVersion": "v1",
                            "kind": "Namespace",
                            "metadata": {"name": name},
                            "spec": {"finalizers": []},
                        },
                    )
            except NotFound:
                pass
        if resource == _CRDS:
            # The API server removes a CRD only after deleting its custom resources; wait, so the next
            # test can create a CRD of the same name.
            known = baseline[resource]
            wait_for(lambda known=known: not (_keys(cluster, _CRDS) - known), 30, "CRDs to be deleted")
