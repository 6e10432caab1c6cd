"""End-to-end tests on the real control plane: deploy/ manifests, minisched as its own RBAC identity,
and minisched side by side with kube-scheduler. Fixtures come from tests/plugins/controlplane.py."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from minisched.errors import AlreadyExists, NotFound
from minisched.resources import Resource

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

# The kinds deploy/ uses, by (apiVersion, kind).
_KINDS: dict[tuple[str, str], Resource] = {
    ("v1", "Namespace"): Resource("", "v1", "namespaces", "Namespace", False),
    ("v1", "ServiceAccount"): Resource("", "v1", "serviceaccounts", "ServiceAccount", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): Resource(
        "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False
    ),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): Resource(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
    ),
    ("apps/v1", "Deployment"): Resource("apps", "v1", "deployments", "Deployment", True),
}


def load_manifests(*names: str) -> list[dict[str, Any]]:
    """The objects in deploy/<name> files, in file order."""
    docs: list[dict[str, Any]] = []
    for name in names:
        docs += [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]
    return docs


def resource_of(obj: dict[str, Any]) -> Resource:
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key not in _KINDS:
        raise ValueError(f"deploy/ manifest of unexpected kind {key}; add it to tests/e2e/conftest.py _KINDS")
    return _KINDS[key]


def object_path(obj: dict[str, Any], *, with_name: bool) -> str:
    r = resource_of(obj)
    meta = obj["metadata"]
    return r.path(meta.get("namespace"), meta["name"] if with_name else None)


def apply(cluster: Any, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    """Create the object (server-side dry run if asked); if it exists, replace it (as kubectl apply
    would end up). Returns what the server answered."""
    query = {"dryRun": "All"} if dry_run else None
    try:
        return dict(cluster.request("POST", object_path(obj, with_name=False), body=obj, query=query))
    except AlreadyExists:
        current = cluster.request("GET", object_path(obj, with_name=True))
        body = dict(obj, metadata={**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]})
        return dict(cluster.request("PUT", object_path(obj, with_name=True), body=body, query=query))


def remove(cluster: Any, obj: dict[str, Any]) -> None:
    with contextlib.suppress(NotFound):
        cluster.request("DELETE", object_path(obj, with_name=True))
    if obj["kind"] == "Namespace":  # no namespace controller runs here to finish it
        name = obj["metadata"]["name"]
        with contextlib.suppress(NotFound):
            cluster.request(
                "PUT",
                f"/api/v1/namespaces/{name}/finalize",
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                      "spec": {"finalizers": []}},
            )


@pytest.fixture
def minisched_rbac(real_cluster: Any) -> Iterator[list[dict[str, Any]]]:
    """deploy/rbac.yaml applied by admin for the test, removed after it (the shared cleanup does not
    know about RBAC objects)."""
    objects = load_manifests("rbac.yaml")
    for obj in objects:
        apply(real_cluster, obj)
    yield objects
    for obj in reversed(objects):
        remove(real_cluster, obj)
