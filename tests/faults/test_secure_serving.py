"""Secure serving as kube-scheduler does it (issue 17): TLS, /metrics only for callers the API server
authenticates (TokenReview) and RBAC allows (SubjectAccessReview); /healthz and /readyz open."""

from __future__ import annotations

import contextlib
import json
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from minisched.errors import NotFound, ServiceUnavailable
from minisched.observability.auth import DelegatedAuth, self_signed_context
from minisched.observability.metrics import SchedulerMetrics
from minisched.observability.server import HealthServer
from tests.e2e.conftest import DEPLOY
from tests.faults.helpers import running


class FakeReviewer:
    """Answers TokenReviews and SubjectAccessReviews from two tables, counting the requests."""

    def __init__(self, tokens: dict[str, dict[str, Any]], allowed: set[str], down: bool = False) -> None:
        self.tokens, self.allowed, self.down = tokens, allowed, down
        self.calls: list[str] = []

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        self.calls.append(body["kind"])
        if self.down:
            raise ServiceUnavailable("the API server is down")
        if body["kind"] == "TokenReview":
            user = self.tokens.get(body["spec"]["token"])
            return {"status": {"authenticated": user is not None, "user": user or {}}}
        spec = body["spec"]
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": spec["user"] in self.allowed}}


def test_delegated_auth_decides_like_kube_schedulers_secure_port() -> None:
    reviewer = FakeReviewer({"good": {"username": "prom", "groups": ["g"]}, "other": {"username": "eve"}}, {"prom"})
    auth = DelegatedAuth(reviewer)
    assert auth("/healthz", {}) is None and auth("/readyz", {}) is None and auth("/livez/ping", {}) is None
    assert reviewer.calls == []  # probes never reach the API server
    assert auth("/metrics", {})[0] == 401  # type: ignore[index]
    assert auth("/metrics", {"Authorization": "Bearer nope"})[0] == 401  # type: ignore[index]
    assert auth("/metrics", {"Authorization": "Bearer other"})[0] == 403  # type: ignore[index]
    assert auth("/metrics", {"Authorization": "Bearer good"}) is None
    before = len(reviewer.calls)
    assert auth("/metrics", {"authorization": "bearer good"}) is None
    assert len(reviewer.calls) == before  # cached for 10 s: a scrape costs no API call
    down = DelegatedAuth(FakeReviewer({}, set(), down=True))
    refused = down("/metrics", {"Authorization": "Bearer good"})
    assert refused is not None and refused[0] == 500  # never "allowed because we could not ask"


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_tls_server_keeps_probes_open_and_metrics_closed() -> None:
    reviewer = FakeReviewer({"good": {"username": "prom"}}, {"prom"})
    server = HealthServer(SchedulerMetrics().registry, ssl_context=self_signed_context(),
                          authorizer=DelegatedAuth(reviewer))
    with server:
        assert server.url.startswith("https://")
        assert _get(server.url + "/healthz") == (200, "ok")
        assert _get(server.url + "/readyz")[0] == 200
        assert _get(server.url + "/metrics")[0] == 401
        status, body = _get(server.url + "/metrics", "good")
        assert status == 200 and "scheduler_pending_pods" in body


@contextlib.contextmanager
def metrics_tokens(real_cluster: Any, ns: str) -> Iterator[dict[str, str]]:
    """Service account tokens in `ns`: "scraper", bound to a copy of deploy/'s minisched-metrics-reader
    ClusterRole, and "stranger", bound to nothing; the role and its binding deleted afterwards."""
    reader = next(d for d in yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text())
                  if d and d["metadata"]["name"] == "minisched-metrics-reader")
    role_name = f"metrics-reader-{uuid.uuid4().hex[:6]}"
    binding_name = f"{role_name}-scraper"
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    real_cluster.request("POST", f"{rbac}/clusterroles", body={**reader, "metadata": {"name": role_name}})
    try:
        tokens = {}
        for sa in ("scraper", "stranger"):
            real_cluster.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                                 body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})
            answer = real_cluster.request(
                "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"expirationSeconds": 600}})
            tokens[sa] = answer["status"]["token"]
        real_cluster.request("POST", f"{rbac}/clusterrolebindings", body={
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": binding_name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": ns}]})
        yield tokens
    finally:
        for path in (f"{rbac}/clusterrolebindings/{binding_name}", f"{rbac}/clusterroles/{role_name}"):
            with contextlib.suppress(NotFound):
                real_cluster.request("DELETE", path)


def _metrics_served_as_kube_scheduler_does(url: str, ns: str, tokens: dict[str, str]) -> None:
    """Probes open; /metrics refused to anonymous, to a bad token and to a token without the role;
    served to the scraper's."""
    assert url.startswith("https://")
    assert _get(url + "/healthz") == (200, "ok")
    assert _get(url + "/readyz")[0] == 200
    assert _get(url + "/metrics")[0] == 401
    assert _get(url + "/metrics", "not-a-token")[0] == 401
    status, body = _get(url + "/metrics", tokens["stranger"])
    assert status == 403 and f"system:serviceaccount:{ns}:stranger" in body, body
    status, body = _get(url + "/metrics", tokens["scraper"])
    assert status == 200 and "scheduler_pending_pods" in body, json.dumps(body)[:300]


@pytest.mark.realcluster
def test_metrics_need_a_token_bound_to_the_metrics_reader_role(real_cluster: Any, real_namespace: str) -> None:
    """On the real API server: anonymous refused, a token without the role refused, a service
    account token bound to deploy/'s minisched-metrics-reader ClusterRole served."""
    with metrics_tokens(real_cluster, real_namespace) as tokens:
        server = HealthServer(SchedulerMetrics().registry, ssl_context=self_signed_context(),
                              authorizer=DelegatedAuth(real_cluster))
        with server:
            _metrics_served_as_kube_scheduler_does(server.url, real_namespace, tokens)


@pytest.mark.realcluster
def test_minisched_run_with_secure_serving(real_cluster: Any, real_namespace: str, control_plane: Any,
                                           tmp_path: Path) -> None:
    """`minisched run --secure-serving` as a process on the real control plane: its metrics port
    speaks TLS (self-signed), /healthz and /readyz answer anyone, /metrics only the scraper's token
    (its TokenReview and SubjectAccessReview made by the process, with its own credentials)."""
    with metrics_tokens(real_cluster, real_namespace) as tokens, \
            running(control_plane.kubeconfig, tmp_path / "m.log", "--secure-serving") as proc:
        _metrics_served_as_kube_scheduler_does(proc.url, real_namespace, tokens)
        assert proc.running(), proc.tail()
