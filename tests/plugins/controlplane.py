"""Fixtures for the real control plane: etcd + kube-apiserver + KWOK built by `make controlplane`.

- `control_plane` (session): one ControlPlane for the whole run; its logs are kept (and their
  directory printed) when any test failed, or with MINISCHED_KEEP_LOGS=1. `control_plane_fixtures`
  makes the same fixtures for another scope (a folder that needs a control plane of its own), or
  for the kind-like plane (`kind_like=True`: kube-controller-manager, default admission, kind's
  nodes and system pods; tests/realcluster/test_kind_like_plane.py).
- `real_cluster`: a RealCluster on it. After each test, whatever the test created (namespaces,
  pods, nodes, priority classes, ...) is deleted again, so every test starts from the same state,
  as it does on a fresh embedded cluster.
- `real_namespace`: a fresh namespace for one test.

Why most tests keep the envtest-style plane (no kube-controller-manager, ServiceAccount and
TaintNodesByCondition admission off, no nodes or pods but the test's own): they compare the API
server's own behaviour with the embedded cluster's (the contract suite) or one scheduler's decisions
with another's, and a controller acting meanwhile (a new node tainted not-ready until the node
lifecycle controller lifts it, the garbage collector deleting what a test left for the next step,
kind's system pods in every count) would change what they measure, not what they test. What a
student's kind cluster does is tested on the kind-like plane: the chapters and labs
(test_notebooks_on_real_server.py), the plane itself, pace, re-runs and reset.

Without the binaries these fixtures skip, saying how to build them; with CI=true they fail instead,
because in CI a missing control plane means the build is broken, not that the tests do not apply.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any, Literal, NoReturn

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


def control_plane_fixtures(
    scope: Literal["session", "package", "module"], *, kind_like: bool = False
) -> tuple[Any, Any, Any, Any]:
    """The fixtures `control_plane`, `_real_cluster_shared`, `_baseline` and `real_cluster` for one
    control plane of `scope`. This plugin makes the session's; a folder whose tests kill, restart
    or compact their control plane gets one of its own by assigning these in its conftest.py
    (tests/faults), which overrides the session's for that folder only:

        control_plane, _real_cluster_shared, _baseline, real_cluster = control_plane_fixtures("package")

    (Fixtures are found by the names of module attributes; `name=` pins them here as well.)
    With `kind_like=True` the control plane is set up as kind's; kind's own nodes, system pods and
    the objects its controllers made at start are then part of the baseline that cleanup keeps."""

    @pytest.fixture(scope=scope, name="control_plane")
    def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
        """etcd + kube-apiserver + KWOK, started once for the scope; logs kept if a test failed."""
        binaries = require_binaries()
        keep = os.environ.get(KEEP_LOGS_ENV, "") not in ("", "0")
        cp = ControlPlane(ControlPlaneOptions(keep_logs=keep, kind_like=kind_like), binaries)
        try:
            cp.start()
        except (ProcessFailed, TimeoutError) as err:
            pytest.fail(f"the real control plane did not start (logs kept in {cp.log_dir}): {err}", pytrace=False)
        yield cp
        failed = request.session.testsfailed > 0
        cp.stop(keep_logs=keep or failed)
        if keep or failed:
            print(f"\ncontrol-plane logs kept in {cp.log_dir}", file=sys.stderr)

    @pytest.fixture(scope=scope, name="_real_cluster_shared")
    def real_cluster_shared(control_plane: ControlPlane) -> Iterator[Any]:
        from minisched.cluster.real import RealCluster

        cluster = RealCluster.from_kubeconfig(path=str(control_plane.kubeconfig))
        try:
            yield cluster
        finally:
            cluster.close()

    @pytest.fixture(scope=scope, name="_baseline")
    def baseline(_real_cluster_shared: Any) -> dict[str, set[tuple[str, str]]]:
        """What exists before any test ran (the API server's own objects), so cleanup leaves it alone."""
        return {r: _keys(_real_cluster_shared, r) for r in _CLEANED}

    @pytest.fixture(name="real_cluster")
    def real_cluster(_real_cluster_shared: Any, _baseline: dict[str, set[tuple[str, str]]]) -> Iterator[Any]:
        """A RealCluster on the control plane; objects the test creates are removed after it."""
        yield _real_cluster_shared
        cleanup(_real_cluster_shared, _baseline)

    return control_plane, real_cluster_shared, baseline, real_cluster


control_plane, _real_cluster_shared, _baseline, real_cluster = control_plane_fixtures("session")


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
    namespace controller, which does not run here; having emptied them, we clear the finalizer.

    In a namespace the test created, everything goes in one DELETE of the collection per kind (a
    fault scenario leaves hundreds of pods and their events: one request each took 7-13 s per test
    on a loaded machine); whatever is left, e.g. in the API server's own namespaces, one by one."""
    from minisched.errors import ApiError, NotFound
    from minisched.resources import resolve

    created = {name for _, name in _keys(cluster, "namespaces") - baseline["namespaces"]} - SYSTEM_NAMESPACES
    for resource in _CLEANED:
        kind = resolve(resource)
        if kind.namespaced:
            for namespace in created:
                with contextlib.suppress(ApiError):  # what is left goes in the loop below
                    cluster.request("DELETE", kind.path(namespace), query={"gracePeriodSeconds": "0"})
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
