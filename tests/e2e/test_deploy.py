"""deploy/ on a real API server: the manifests validate (server-side dry run), and the identity the
role is bound to can do what a scheduler does and nothing more."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from minisched.cluster.real import RealCluster
from minisched.controlplane import ControlPlane
from minisched.errors import Forbidden, NotFound
from minisched.objects import make_pod
from tests.e2e.conftest import apply, load_manifests, remove

pytestmark = pytest.mark.realcluster


def test_deploy_manifests_pass_server_side_dry_run(real_cluster: RealCluster) -> None:
    objects = load_manifests("rbac.yaml", "deployment.yaml")
    kinds = [o["kind"] for o in objects]
    # The last binding and role: secure serving's auth-delegator binding and the metrics-reader role.
    assert kinds == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding",
                     "ClusterRole", "Deployment"]
    namespace = objects[0]
    answered = apply(real_cluster, namespace, dry_run=True)
    assert answered["metadata"]["name"] == "minisched-system"
    with pytest.raises(NotFound):  # a dry run persists nothing
        real_cluster.request("GET", "/api/v1/namespaces/minisched-system")
    # Namespaced objects need their namespace to exist even in a dry run; create it for real.
    apply(real_cluster, namespace)
    try:
        for obj in objects[1:]:
            answered = apply(real_cluster, obj, dry_run=True)
            assert answered["kind"] == obj["kind"], answered
            assert answered["metadata"]["name"] == obj["metadata"]["name"]
        deployment = next(o for o in objects if o["kind"] == "Deployment")
        with pytest.raises(NotFound):
            real_cluster.request("GET", "/apis/apps/v1/namespaces/minisched-system/deployments/minisched")
        # The server filled in the Deployment's defaults: it was validated as a whole object.
        answered = apply(real_cluster, deployment, dry_run=True)
        assert answered["spec"]["strategy"]["type"] == "RollingUpdate"
        assert answered["spec"]["template"]["spec"]["serviceAccountName"] == "minisched"
    finally:
        remove(real_cluster, namespace)


def test_a_broken_manifest_fails_the_dry_run(real_cluster: RealCluster) -> None:
    """The dry run is a real check: a Deployment whose selector misses its template is refused."""
    from minisched.errors import Invalid

    deployment = load_manifests("deployment.yaml")[0]
    deployment["metadata"]["namespace"] = "default"
    deployment["spec"]["selector"] = {"matchLabels": {"app": "something-else"}}
    with pytest.raises(Invalid, match="selector"):
        apply(real_cluster, deployment, dry_run=True)


@pytest.fixture
def as_minisched(control_plane: ControlPlane, minisched_rbac: Any) -> Any:
    cluster = RealCluster.from_kubeconfig(path=str(control_plane.write_user_kubeconfig("minisched")))
    yield cluster
    cluster.close()


def test_the_minisched_identity_can_do_a_schedulers_work(
    as_minisched: RealCluster, real_cluster: RealCluster, real_namespace: str
) -> None:
    assert as_minisched.list("nodes")["kind"] == "NodeList"
    assert as_minisched.list("priorityclasses.scheduling.k8s.io")["items"] is not None
    real_cluster.create("nodes", {"metadata": {"name": f"n-{uuid.uuid4().hex[:6]}"}})
    node = real_cluster.list("nodes")["items"][0]["metadata"]["name"]
    real_cluster.create("pods", make_pod("p", namespace=real_namespace))
    as_minisched.bind(real_namespace, "p", node)
    assert real_cluster.get("pods", "p", real_namespace)["spec"]["nodeName"] == node
    as_minisched.create("events", {
        "metadata": {"generateName": "p.", "namespace": real_namespace},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": real_namespace},
        "reason": "Scheduled", "message": "ok", "type": "Normal",
    }, real_namespace)


@pytest.mark.parametrize(
    "action",
    [
        pytest.param(lambda c, ns: c.delete("nodes", "any-node"), id="delete-node"),
        pytest.param(lambda c, ns: c.request("GET", f"/api/v1/namespaces/{ns}/secrets"), id="list-secrets"),
        pytest.param(
            lambda c, ns: c.request("POST", f"/api/v1/namespaces/{ns}/secrets",
                                    body={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
            id="create-secret",
        ),
        pytest.param(lambda c, ns: c.create("pods", make_pod("x", namespace=ns)), id="create-pod"),
        pytest.param(lambda c, ns: c.delete("namespaces", ns), id="delete-namespace"),
        pytest.param(
            lambda c, ns: c.create("nodes", {"metadata": {"name": "rogue"}}), id="create-node"
        ),
        pytest.param(
            lambda c, ns: c.request("PATCH", "/apis/rbac.authorization.k8s.io/v1/clusterroles/minisched",
                                    body={"rules": []}, content_type="application/merge-patch+json"),
            id="widen-own-role",
        ),
    ],
)
def test_actions_outside_the_role_are_forbidden(as_minisched: RealCluster, real_namespace: str, action: Any) -> None:
    with pytest.raises(Forbidden):
        action(as_minisched, real_namespace)
