"""deploy/deployment.yaml's minisched replicas, run as processes on the local control plane.

KWOK runs no containers, so a Deployment applied to the local control plane would never start a
scheduler. `Replicas` does what the kubelet would: it reads the Deployment's container args and
replica count from the manifest and starts that many `python -m minisched.cli <args>` processes,
each with a POD_NAME of its own (what the Deployment's downward API gives) and the env entries the
manifest gives a literal value (e.g. MALLOC_ARENA_MAX), changing only what the pod's environment
decides:

- `--in-cluster` becomes `--kubeconfig <file>`: the file carries a token of the minisched
  ServiceAccount from deploy/rbac.yaml (a TokenRequest, as the kubelet mounts one), so every replica
  acts with exactly the Deployment's RBAC; `--secure-serving`, which --in-cluster implies, is kept;
- `--metrics-port` and `--metrics-bind-address`: a free loopback port each (the pods would each have
  their own IP);
- `overrides`, by flag, for what a test must shorten (e.g. {"--shard-lease-duration": "5"}).

Metrics are read as Prometheus would: over HTTPS with the token of a ServiceAccount bound to
deploy/'s minisched-metrics-reader ClusterRole (`Replicas.metrics`).
"""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from minisched.controlplane.processes import ManagedProcess, free_port
from minisched.errors import AlreadyExists, NotFound

Object = dict[str, Any]

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
NAMESPACE = "minisched-system"
SERVICE_ACCOUNT = "minisched"
METRICS_READER = "minisched-metrics-reader"
SCRAPER = "minisched-metrics-scraper"

__all__ = ["DeploymentSpec", "Replica", "Replicas", "deployment_spec", "local_args", "parse_metrics"]


@dataclass(frozen=True)
class DeploymentSpec:
    """What deploy/deployment.yaml asks of each minisched pod."""

    replicas: int
    args: tuple[str, ...]
    env: tuple[str, ...]  # variable names the container gets (values come from the pod or the manifest)
    values: tuple[tuple[str, str], ...] = ()  # of which those with a literal `value:` in the manifest


def deployment_spec(path: Path = DEPLOY / "deployment.yaml", container: str = "minisched") -> DeploymentSpec:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    deployments = [d for d in docs if d.get("kind") == "Deployment"]
    if len(deployments) != 1:
        raise ValueError(f"{path}: expected one Deployment, found {len(deployments)}")
    spec = deployments[0].get("spec") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    found = [c for c in containers if c.get("name") == container]
    if not found:
        raise ValueError(f"{path}: the Deployment has no container named {container!r}")
    c = found[0]
    args = c.get("args")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError(f"{path}: container {container!r} args must be a list of strings, got {args!r}")
    env = c.get("env") or []
    return DeploymentSpec(int(spec.get("replicas", 1)), tuple(args), tuple(e["name"] for e in env),
                          tuple((e["name"], str(e["value"])) for e in env if "value" in e))


def _split(args: Sequence[str]) -> list[tuple[str, str | None, bool]]:
    """[(flag or positional, value, joined with '=')]: '--a=1' and '--a 1' both give ('--a', '1')."""
    out: list[tuple[str, str | None, bool]] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") and "=" in a:
            flag, value = a.split("=", 1)
            out.append((flag, value, True))
        elif a.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.append((a, args[i + 1], False))
            i += 1
        else:
            out.append((a, None, False))
        i += 1
    return out


def local_args(
    args: Sequence[str], *, kubeconfig: Path, metrics_port: int, overrides: Mapping[str, str | None] | None = None,
    drop: Collection[str] = (),
) -> list[str]:
    """The Deployment's args for a process on this machine (see the module docstring).

    `overrides` maps a flag to its value (None: a flag without value; set or replaced); flags in
    `drop` are left out with their values (for a comparison run, e.g. without --shards)."""
    overrides = dict(overrides or {})
    for flag in overrides:
        if not flag.startswith("--"):
            raise ValueError(f"override {flag!r} is not a --flag")
    parts = _split(args)
    flags = [p[0] for p in parts]
    if "run" not in flags:
        raise ValueError(f"the Deployment's args {list(args)} do not run the scheduler (no 'run')")
    in_cluster = "--in-cluster" in flags
    if in_cluster and "--secure-serving" not in flags:
        overrides.setdefault("--secure-serving", None)  # what --in-cluster implies
    overrides["--metrics-port"] = str(metrics_port)
    overrides["--metrics-bind-address"] = "127.0.0.1"
    out: list[str] = []
    for flag, value, joined in parts:
        if flag in drop:
            continue
        if flag == "--in-cluster":
            out += ["--kubeconfig", str(kubeconfig)]
            continue
        if flag in overrides:
            value = overrides.pop(flag)
            joined = joined and value is not None
        if value is None:
            out.append(flag)
        else:
            out += [f"{flag}={value}"] if joined else [flag, value]
    if not in_cluster:
        raise ValueError(f"the Deployment's args {list(args)} do not say --in-cluster; cannot point them here")
    for flag, value in overrides.items():
        out += [flag] if value is None else [flag, value]
    return out


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {'name{labels}': value} (comments dropped; labels kept as written)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if "}" in line:
            cut = line.rindex("}") + 1
            name, rest = line[:cut], line[cut:].split()
        else:
            name, *rest = line.split()
        with contextlib.suppress(ValueError, IndexError):
            out[name] = float(rest[0])  # a timestamp may follow the value
    return out


class Replica:
    """One minisched pod of the Deployment, as a process."""

    def __init__(self, name: str, argv: list[str], log_path: Path, metrics_port: int, secure: bool,
                 env_values: Mapping[str, str] | None = None) -> None:
        self.name, self.metrics_port, self.secure = name, metrics_port, secure
        env = dict(os.environ, **(env_values or {}), PYTHONUNBUFFERED="1", POD_NAME=name)
        self.process = ManagedProcess(name, argv, log_path, env=env)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        return f"{'https' if self.secure else 'http'}://127.0.0.1:{self.metrics_port}"

    def running(self) -> bool:
        return self.process.running()

    def get(self, path: str, token: str | None = None, timeout: float = 5.0) -> tuple[int, str]:
        context = None
        if self.secure:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # the replica's own self-signed certificate
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(request, context=context, timeout=timeout) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode(errors="replace")

    def ready(self) -> bool:
        try:
            return self.get("/readyz", timeout=2)[0] == 200
        except OSError:
            return False

    def log(self) -> str:
        return self.process.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no lease release, no goodbye; the others must wait the lease out."""
        self.process.kill()

    def stop(self, grace: float = 30.0) -> None:
        self.process.stop(grace)


class Replicas:
    """N replicas of deploy/deployment.yaml's minisched on a control plane (see the module docstring).

        with Replicas(control_plane, n=3, overrides={"--shard-lease-duration": "5"}) as rs:
            rs.wait_ready()
            ...
            rs[1].kill()

    `admin` is an admin connection (a RealCluster) used to apply deploy/rbac.yaml, mint the tokens
    and remove what it applied at the end."""

    def __init__(
        self,
        control_plane: Any,
        admin: Any,
        *,
        n: int | None = None,
        overrides: Mapping[str, str | None] | None = None,
        deployment: Path = DEPLOY / "deployment.yaml",
        rbac: Path = DEPLOY / "rbac.yaml",
        log_dir: Path | None = None,
        name_prefix: str = "minisched-",
        verbose: int = 0,
        drop: Collection[str] = (),
    ) -> None:
        self.control_plane, self.admin = control_plane, admin
        self.spec = deployment_spec(deployment)
        unknown = [e for e in self.spec.env if e != "POD_NAME" and e not in dict(self.spec.values)]
        if unknown:
            raise ValueError(f"{deployment}: env {unknown}: only POD_NAME and literal values are known to the "
                             "local harness")
        self.n = self.spec.replicas if n is None else n
        if self.n < 1:
            raise ValueError(f"need at least one replica, got {self.n}")
        self.overrides = dict(overrides or {})
        self.drop = frozenset(drop)
        self.rbac_objects = [d for d in yaml.safe_load_all(rbac.read_text()) if d]
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="minisched-replicas-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.name_prefix = name_prefix
        self.verbose = verbose  # -v flags before `run` (logging only; the Deployment's args are unchanged)
        self.replicas: list[Replica] = []
        self.kubeconfig: Path | None = None
        self.scrape_token: str | None = None
        self._started = 0
        self.killed: list[Replica] = []

    # --- lifecycle

    def start(self) -> Replicas:
        self._apply_rbac()
        self.kubeconfig = self._service_account_kubeconfig()
        self.scrape_token = self._scrape_token()
        for _ in range(self.n):
            self.add()
        return self

    def add(self) -> Replica:
        """One more replica (a scale-up); not waited for."""
        if self.kubeconfig is None:
            raise RuntimeError("Replicas.start() first")
        name = f"{self.name_prefix}{self._started}"
        self._started += 1
        port = free_port()
        args = local_args(self.spec.args, kubeconfig=self.kubeconfig, metrics_port=port, overrides=self.overrides,
                          drop=self.drop)
        argv = [sys.executable, "-m", "minisched.cli", *(["-v"] * self.verbose), *args]
        secure = "--secure-serving" in args
        replica = Replica(name, argv, self.log_dir / f"{name}.log", port, secure, dict(self.spec.values))
        self.replicas.append(replica)
        return replica

    def wait_ready(self, timeout: float = 120.0) -> float:
        """Until every replica not killed on purpose answers 200 on /readyz (ProcessFailed, with its
        log's tail, if one exits first); the seconds it took."""
        began = time.monotonic()
        for r in self.replicas:
            if r not in self.killed:
                r.process.wait_until(r.ready, max(1.0, timeout - (time.monotonic() - began)), "ready (/readyz 200)")
        return time.monotonic() - began

    def kill(self, replica: Replica) -> float:
        """SIGKILL one replica; the time.monotonic() at which it was dead."""
        self.killed.append(replica)
        replica.kill()
        return time.monotonic()

    def stop(self, grace: float = 30.0) -> None:
        for r in self.replicas:
            r.stop(grace)
        self._remove_rbac()

    def __enter__(self) -> Replicas:
        try:
            return self.start()
        except BaseException:
            self.stop(5)
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __getitem__(self, i: int) -> Replica:
        return self.replicas[i]

    def __len__(self) -> int:
        return len(self.replicas)

    def live(self) -> list[Replica]:
        return [r for r in self.replicas if r not in self.killed and r.running()]

    # --- reading them

    def metrics(self, replica: Replica) -> dict[str, float]:
        status, text = replica.get("/metrics", self.scrape_token)
        if status != 200:
            raise RuntimeError(f"{replica.name} /metrics answered {status}: {text[:200]}")
        return parse_metrics(text)

    def tails(self, lines: int = 30) -> str:
        return "\n".join(f"--- {r.name} (pid {r.pid}, {'running' if r.running() else 'exited'})\n"
                         f"{r.process.log_tail(lines)}" for r in self.replicas)

    # --- RBAC and credentials

    def _apply_rbac(self) -> None:
        for obj in self.rbac_objects:
            path = _collection(obj)
            try:
                self.admin.request("POST", path, body=obj)
            except AlreadyExists:
                current = self.admin.request("GET", f"{path}/{obj['metadata']['name']}")
                meta = {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
                self.admin.request("PUT", f"{path}/{obj['metadata']['name']}", body={**obj, "metadata": meta})

    def _remove_rbac(self) -> None:
        extra = [_scraper_binding()]
        for obj in [*extra, *reversed(self.rbac_objects)]:
            with contextlib.suppress(NotFound):
                self.admin.request("DELETE", f"{_collection(obj)}/{obj['metadata']['name']}")
            if obj["kind"] == "Namespace":  # no namespace controller here to finish it
                name = obj["metadata"]["name"]
                with contextlib.suppress(NotFound):
                    self.admin.request("PUT", f"/api/v1/namespaces/{name}/finalize", body={
                        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                        "spec": {"finalizers": []}})

    def _token(self, service_account: str, seconds: int = 3600) -> str:
        answer = self.admin.request(
            "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{service_account}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"expirationSeconds": seconds}})
        return str(answer["status"]["token"])

    def _service_account_kubeconfig(self) -> Path:
        """A kubeconfig for the Deployment's ServiceAccount (what the pod's mounted token gives)."""
        token = self._token(SERVICE_ACCOUNT)
        cp = self.control_plane
        config = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "local", "cluster": {
                "server": cp.server, "certificate-authority-data": base64.b64encode(cp.ca.cert_pem).decode()}}],
            "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": SERVICE_ACCOUNT}}],
            "current-context": "local",
        }
        path = self.log_dir / "kubeconfig-serviceaccount"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(yaml.safe_dump(config, sort_keys=False))
        return path

    def _scrape_token(self) -> str:
        with contextlib.suppress(AlreadyExists):
            self.admin.request("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", body={
                "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SCRAPER}})
        with contextlib.suppress(AlreadyExists):
            self.admin.request("POST", _collection(_scraper_binding()), body=_scraper_binding())
        return self._token(SCRAPER)


def _scraper_binding() -> Object:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": SCRAPER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": METRICS_READER},
        "subjects": [{"kind": "ServiceAccount", "name": SCRAPER, "namespace": NAMESPACE}],
    }


_PATHS = {
    ("v1", "Namespace"): "/api/v1/namespaces",
    ("v1", "ServiceAccount"): "/api/v1/namespaces/{ns}/serviceaccounts",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    ("rbac.authorization.k8s.io/v1", "Role"): "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}


def _collection(obj: Object) -> str:
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key not in _PATHS:
        raise ValueError(f"deploy/rbac.yaml: object of unexpected kind {key}; add its path to replicas._PATHS")
    return _PATHS[key].format(ns=(obj.get("metadata") or {}).get("namespace", ""))
