"""A real Kubernetes control plane on loopback, set up as envtest's (the default) or as kind's.

envtest-style (the default for tests): etcd, kube-apiserver and KWOK, as controller-runtime's envtest
runs them (no kubelet, no controller-manager, the admission plugins that need one turned off), and
kube-scheduler on demand. KWOK plays kubelet for fake nodes: it marks nodes annotated
`kwok.x-k8s.io/node: fake` Ready, keeps their heartbeat, moves pods bound to them to Running, and
finishes their graceful deletion. Nothing watches nodes' health, so a node nobody heartbeats stays
as it was created.

kind-like (`ControlPlaneOptions(kind_like=True)`, `make cluster-local`): what `make cluster-up` gives a
student, from the same binaries. kube-apiserver with its default admission plugins plus kubeadm's
NodeRestriction and Node,RBAC authorization; kube-controller-manager with kubeadm's flags (every
default controller, per-controller service-account credentials, node CIDRs from 10.244.0.0/16), so
new nodes are tainted not-ready until they report Ready, nodes that stop reporting turn unreachable
after 50 s, the garbage collector and namespace controller run, pods get service-account tokens;
kube-scheduler as default-scheduler; kind's four nodes and 15 system pods (kindlike.py). Two KWOK
processes keep nodes alive, because one KWOK selects nodes by an annotation selector AND a label
selector (v0.8.0 has no "or"): one manages nodes annotated `kwok.x-k8s.io/node=fake` that carry no
chapter label (fake nodes, kind's four), the other nodes with the label key `minisched.dev/chapter`
(the workbook's chapter nodes, which carry no annotation). Any other node goes unreachable, as on kind.

    with ControlPlane() as cp:
        cluster = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        ...

Everything listens on 127.0.0.1 at free ports; state lives in a temporary directory removed on
stop. Each component logs to `<log_dir>/<component>.log`; the logs are kept when the block exits
with an exception (or `keep_logs=True`), and `stop()` says where they are.
"""

from __future__ import annotations

import atexit
import functools
import http.client
import json
import os
import shutil
import ssl
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from minisched.controlplane.binaries import Binaries, find_binaries
from minisched.controlplane.certs import CertificateAuthority, KeyPair, service_account_key_pair
from minisched.controlplane.kindlike import KIND_POD_CIDR, KIND_SERVICE_CIDR
from minisched.controlplane.kubeconfig import write_kubeconfig
from minisched.controlplane.kwok import CHAPTER_NODE_LABEL, KWOK_NODE_ANNOTATION
from minisched.controlplane.processes import ManagedProcess, ProcessFailed, free_port

# KWOK hands out pod IPs from POD_CIDR; services get SERVICE_CIDR. Disjoint, so no address means two things.
SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = KIND_POD_CIDR
ADMIN_USER = "admin"
ADMIN_GROUPS = ("system:masters",)


@dataclass
class ControlPlaneOptions:
    """What to start and how. The defaults suit tests; `up` uses them too."""

    start_kwok: bool = True
    # Set up as kind's (see the module docstring): kube-controller-manager, default admission, kind's
    # nodes and system pods. False: envtest's setup, which most tests use.
    kind_like: bool = False
    # How long the kind-like plane may take for its nodes to be Ready and its system pods Running.
    settle_timeout: float = 120.0
    ready_timeout: float = 60.0  # a loaded 2-core machine can take 20-30 s to serve /readyz
    # Extra flags, appended last so they override ours (e.g. {"--max-requests-inflight": "800"}).
    apiserver_flags: dict[str, str] = field(default_factory=dict)
    kwok_flags: dict[str, str] = field(default_factory=dict)  # for every KWOK process
    controller_manager_flags: dict[str, str] = field(default_factory=dict)  # kind-like plane only
    # False sends every list and watch to etcd (--watch-cache=false): slower, but old resourceVersions
    # then expire (410) as soon as etcd is compacted (see ControlPlane.compact_etcd).
    watch_cache: bool = True
    keep_logs: bool = False
    log_dir: Path | None = None  # default: a fresh directory under the system temp dir
    work_dir: Path | None = None


class ControlPlane:
    """Start with `start()` (or `with`), stop with `stop()`. Not thread-safe to start/stop concurrently."""

    def __init__(self, options: ControlPlaneOptions | None = None, binaries: Binaries | None = None) -> None:
        self.options = options or ControlPlaneOptions()
        self.binaries = binaries or find_binaries()
        self._own_work_dir = self.options.work_dir is None
        self.work_dir = self.options.work_dir or Path(tempfile.mkdtemp(prefix="minisched-controlplane-"))
        self.log_dir = self.options.log_dir or Path(tempfile.mkdtemp(prefix="minisched-controlplane-logs-"))
        self.cert_dir = self.work_dir / "certs"
        self.kubeconfig = self.work_dir / "kubeconfig"
        self.ca = CertificateAuthority()
        self.admin = self.ca.issue_client(ADMIN_USER, ADMIN_GROUPS)
        self.etcd_port = 0
        self.apiserver_port = 0
        self.kind_node_names: list[str] = []  # kind's nodes, on the kind-like plane
        self._processes: dict[str, ManagedProcess] = {}
        self._lock = threading.Lock()
        self._started = False
        self._failed = False

    # ------------------------------------------------------------------ public API

    @property
    def server(self) -> str:
        """The API server URL (https://127.0.0.1:PORT)."""
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def service_cidr(self) -> str:
        return KIND_SERVICE_CIDR if self.options.kind_like else SERVICE_CIDR

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def processes(self) -> dict[str, ManagedProcess]:
        return dict(self._processes)

    def start(self) -> ControlPlane:
        if self._started:
            return self
        self._started = True
        _running.add(self)
        try:
            self._write_certs()
            self._start_etcd()
            self._start_apiserver()
            write_kubeconfig(self.kubeconfig, self.server, self.ca.cert_pem, self.admin, ADMIN_USER)
            if self.options.kind_like:
                self._start_controller_manager()
                # kubeadm's scheduler: the default profile, under its own identity.
                self.start_scheduler(kubeconfig=self._component_kubeconfig("system:kube-scheduler"))
            if self.options.start_kwok:
                self._start_kwok_processes()
            if self.options.kind_like:
                self._add_kind_objects()
        except BaseException:
            self._failed = True
            self.stop()
            raise
        return self

    def stop(self, keep_logs: bool | None = None) -> None:
        """Stop everything (scheduler, KWOK, apiserver, etcd: clients first), then clean up.

        Logs are kept if `keep_logs`, or options.keep_logs, or something failed; otherwise removed."""
        _running.discard(self)
        with self._lock:
            for name in reversed(list(self._processes)):
                self._processes.pop(name).stop()
        keep = (self.options.keep_logs or self._failed) if keep_logs is None else keep_logs
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        if not keep and self.options.log_dir is None:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def mark_failed(self) -> None:
        """Keep the logs when this control plane stops (a test using it failed)."""
        self._failed = True

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self._failed = True
        self.stop()

    def write_user_kubeconfig(
        self, user: str, groups: tuple[str, ...] | list[str] = (), path: Path | None = None
    ) -> Path:
        """A kubeconfig authenticating as `user` in `groups` (a fresh client certificate from our CA).

        Such a user can do only what RBAC grants it, which is how the least-privilege role is tested."""
        client = self.ca.issue_client(user, tuple(groups))
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        return write_kubeconfig(
            path or self.work_dir / f"kubeconfig-{safe}", self.server, self.ca.cert_pem, client, user
        )

    def issue_client_certificate(self, user: str, groups: tuple[str, ...] | list[str] = ()) -> KeyPair:
        return self.ca.issue_client(user, tuple(groups))

    def start_scheduler(
        self,
        config: dict[str, Any] | str | None = None,
        name: str = "kube-scheduler",
        timeout: float = 60.0,
        kubeconfig: Path | None = None,
    ) -> ManagedProcess:
        """Run kube-scheduler with a KubeSchedulerConfiguration (dict or YAML; None: the defaults).

        Its client connection is pointed at `kubeconfig` (default: this control plane's admin), and
        leader election is off (one scheduler per name). Returns when /healthz answers; the process's
        `port` then serves /metrics over HTTPS (self-signed) without authentication. The kind-like
        plane already runs one named kube-scheduler (default-scheduler): give another a new name."""
        with self._lock:
            if name in self._processes and self._processes[name].running():
                raise ValueError(f"a component named {name!r} is already running; start the scheduler under another name")
        parsed: dict[str, Any] = yaml.safe_load(config) if isinstance(config, str) else dict(config or {})
        cfg: dict[str, Any] = dict(parsed or {})
        cfg.setdefault("apiVersion", "kubescheduler.config.k8s.io/v1")
        cfg.setdefault("kind", "KubeSchedulerConfiguration")
        cfg["clientConnection"] = {
            **(cfg.get("clientConnection") or {}),
            "kubeconfig": str(kubeconfig or self.kubeconfig),
        }
        cfg["leaderElection"] = {**(cfg.get("leaderElection") or {}), "leaderElect": False}
        config_path = self.work_dir / f"{name}-config.yaml"
        config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        port = free_port()
        proc = self._spawn(
            name,
            [
                str(self.binaries.kube_scheduler),
                f"--config={config_path}",
                f"--secure-port={port}",
                "--bind-address=127.0.0.1",
                f"--cert-dir={self.work_dir / (name + '-certs')}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                "--authentication-skip-lookup=true",
                "-v=2",
            ],
        )
        insecure = _insecure_ssl_context()
        proc.wait_until(
            lambda: _https_get("127.0.0.1", port, "/healthz", insecure)[0] == 200, timeout, "healthy"
        )
        proc.port = port  # https://127.0.0.1:{port}/metrics, readable without credentials
        return proc

    def scheduler_metrics(self, name: str = "kube-scheduler") -> str:
        """The Prometheus text of a scheduler started with start_scheduler(name=...)."""
        proc = self._processes.get(name)
        if proc is None or proc.port is None:
            raise KeyError(f"no scheduler named {name!r} is running")
        status, body = _https_get("127.0.0.1", proc.port, "/metrics", _insecure_ssl_context())
        if status != 200:
            raise RuntimeError(f"{name} /metrics answered {status}")
        return body.decode()

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision; returns that revision.

        Watches from an older resourceVersion then get 410 Gone, but only where they reach etcd:
        with the watch cache on (the default) the API server serves old versions from its cache's event
        window (back to its last list from etcd until it drops its first event). Start with
        ControlPlaneOptions(watch_cache=False) to see the 410 a real cluster gives a long-gone client."""
        status, body = self._etcd_post("/v3/kv/range", {"key": "AA==", "limit": 1, "keys_only": True})
        if status != 200:
            raise RuntimeError(f"etcd range failed: {status} {body[:200]!r}")
        revision = int(json.loads(body)["header"]["revision"])
        status, body = self._etcd_post("/v3/kv/compaction", {"revision": revision, "physical": True})
        if status != 200:
            raise RuntimeError(f"etcd compaction failed: {status} {body[:200]!r}")
        return revision

    def _etcd_post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        # etcd's gRPC gateway: JSON over HTTP on the client port, byte strings base64-encoded.
        conn = http.client.HTTPConnection("127.0.0.1", self.etcd_port, timeout=10)
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def stop_component(self, name: str) -> None:
        with self._lock:
            proc = self._processes.pop(name, None)
        if proc is not None:
            proc.stop()

    def restart_component(self, name: str, *, kill: bool = True, down_for: float = 0.0,
                          timeout: float | None = None) -> float:
        """Stop a component (SIGKILL with `kill`, else SIGTERM), wait `down_for` seconds, and start it
        again with the same command line: same port, certificates and data, as a supervisor would.
        Returns when it is ready again (the API server serving /readyz, etcd healthy) and how many
        seconds it was down. For fault tests: clients see it crash and come back."""
        with self._lock:
            proc = self._processes.get(name)
        if proc is None:
            raise KeyError(f"no component named {name!r} is running")
        began = time.monotonic()
        if kill:
            proc.kill()
        else:
            proc.stop()
        if down_for > 0:
            time.sleep(down_for)
        new = self._spawn(name, proc.argv)
        new.port = proc.port
        ready = {"kube-apiserver": self._apiserver_ready, "etcd": self._etcd_healthy}.get(name)
        if ready is not None:
            new.wait_until(ready, timeout or self.options.ready_timeout, "ready after a restart")
        return time.monotonic() - began

    def api_get(self, path: str) -> tuple[int, Any]:
        """GET `path` on the API server as admin; (status, parsed JSON or text)."""
        status, body = _https_get("127.0.0.1", self.apiserver_port, path, self._client_ssl_context())
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body.decode(errors="replace")

    # ------------------------------------------------------------------ components

    def _spawn(self, name: str, argv: list[str]) -> ManagedProcess:
        proc = ManagedProcess(name, argv, self.log_dir / f"{name}.log")
        with self._lock:
            self._processes[name] = proc
        return proc

    def _write_certs(self) -> None:
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        serving = self.ca.issue_serving(dns_names=("localhost",), ip_addresses=("127.0.0.1",))
        service_accounts = service_account_key_pair()
        files = {
            "ca.crt": self.ca.cert_pem,
            "ca.key": self.ca.key_pem,  # kube-controller-manager's certificate signer (kind-like plane)
            "apiserver.crt": serving.cert_pem,
            "apiserver.key": serving.key_pem,
            "sa.pub": service_accounts.cert_pem,
            "sa.key": service_accounts.key_pem,
            "admin.crt": self.admin.cert_pem,
            "admin.key": self.admin.key_pem,
        }
        if self.options.kind_like:
            # kubeadm's front-proxy CA: the API server's aggregation layer authenticates to extension
            # servers with its client certificate, and controller-manager and scheduler read the CA from
            # kube-system/extension-apiserver-authentication (they log errors every start without it).
            front_proxy_ca = CertificateAuthority("front-proxy-ca")
            front_proxy_client = front_proxy_ca.issue_client("front-proxy-client")
            files["front-proxy-ca.crt"] = front_proxy_ca.cert_pem
            files["front-proxy-client.crt"] = front_proxy_client.cert_pem
            files["front-proxy-client.key"] = front_proxy_client.key_pem
        for filename, data in files.items():
            path = self.cert_dir / filename
            path.write_bytes(data)
            path.chmod(0o600)

    def _start_etcd(self) -> None:
        # A port can be taken between free_port() and etcd's bind; retry with fresh ports then.
        for attempt in range(3):
            self.etcd_port, peer_port = free_port(), free_port()
            data_dir = self.work_dir / f"etcd-data-{attempt}"
            proc = self._spawn(
                "etcd",
                [
                    str(self.binaries.etcd),
                    "--name=minisched",
                    f"--data-dir={data_dir}",
                    f"--listen-client-urls={self.etcd_url}",
                    f"--advertise-client-urls={self.etcd_url}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-cluster=minisched=http://127.0.0.1:{peer_port}",
                    "--listen-metrics-urls=",
                    "--log-level=warn",
                    "--unsafe-no-fsync",  # test data: durability buys nothing, fsync costs a lot on shared disks
                    "--quota-backend-bytes=8589934592",
                ],
            )
            try:
                proc.wait_until(self._etcd_healthy, self.options.ready_timeout, "healthy")
                return
            except ProcessFailed:
                if proc.running() or attempt == 2:
                    raise
                self.stop_component("etcd")

    def _etcd_healthy(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.etcd_port, timeout=2)
        try:
            conn.request("GET", "/health")
            resp = conn.getresponse()
            return resp.status == 200 and json.loads(resp.read()).get("health") == "true"
        finally:
            conn.close()

    def _start_apiserver(self) -> None:
        for attempt in range(3):
            self.apiserver_port = free_port()
            flags: dict[str, str] = {
                "--etcd-servers": self.etcd_url,
                "--cert-dir": str(self.cert_dir),
                "--tls-cert-file": str(self.cert_dir / "apiserver.crt"),
                "--tls-private-key-file": str(self.cert_dir / "apiserver.key"),
                "--client-ca-file": str(self.cert_dir / "ca.crt"),
                "--secure-port": str(self.apiserver_port),
                "--bind-address": "127.0.0.1",
                # Without this the apiserver derives its advertise address from the default route and
                # refuses to start on a machine without one; loopback is right for a local control plane.
                "--advertise-address": "127.0.0.1",
                "--service-cluster-ip-range": self.service_cidr,
                "--allow-privileged": "true",
                "--service-account-issuer": f"https://127.0.0.1:{self.apiserver_port}/",
                "--service-account-key-file": str(self.cert_dir / "sa.pub"),
                "--service-account-signing-key-file": str(self.cert_dir / "sa.key"),
                # The `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints validation
                # refuses (loopback); nothing here routes to it anyway.
                "--endpoint-reconciler-type": "none",
                "--watch-cache": "true" if self.options.watch_cache else "false",
                "--v": "1",
            }
            if self.options.kind_like:
                # kubeadm's: the default admission plugins (ServiceAccount, TaintNodesByCondition,
                # DefaultStorageClass, ...) plus NodeRestriction; Node and RBAC authorization.
                flags["--enable-admission-plugins"] = "NodeRestriction"
                flags["--authorization-mode"] = "Node,RBAC"
                flags["--enable-bootstrap-token-auth"] = "true"
                flags["--requestheader-client-ca-file"] = str(self.cert_dir / "front-proxy-ca.crt")
                flags["--requestheader-allowed-names"] = "front-proxy-client"
                flags["--requestheader-username-headers"] = "X-Remote-User"
                flags["--requestheader-group-headers"] = "X-Remote-Group"
                flags["--requestheader-extra-headers-prefix"] = "X-Remote-Extra-"
                flags["--proxy-client-cert-file"] = str(self.cert_dir / "front-proxy-client.crt")
                flags["--proxy-client-key-file"] = str(self.cert_dir / "front-proxy-client.key")
            else:
                # No controller-manager runs: nothing would create default ServiceAccounts (so the
                # ServiceAccount admission plugin would reject every pod) or lift the not-ready taint.
                flags["--disable-admission-plugins"] = "ServiceAccount,TaintNodesByCondition"
                flags["--authorization-mode"] = "RBAC"
            flags.update(self.options.apiserver_flags)
            argv = [str(self.binaries.kube_apiserver)] + [f"{k}={v}" for k, v in flags.items()]
            proc = self._spawn("kube-apiserver", argv)
            try:
                proc.wait_until(self._apiserver_ready, self.options.ready_timeout, "ready")
                return
            except ProcessFailed:
                bind_failed = "address already in use" in proc.log_tail(50)
                if proc.running() or not bind_failed or attempt == 2:
                    raise
                self.stop_component("kube-apiserver")

    def _client_ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))
        ctx.load_cert_chain(str(self.cert_dir / "admin.crt"), str(self.cert_dir / "admin.key"))
        return ctx

    def _apiserver_ready(self) -> bool:
        ctx = self._client_ssl_context()
        status, _ = _https_get("127.0.0.1", self.apiserver_port, "/readyz", ctx)
        if status != 200:
            return False
        # /readyz can pass a moment before the bootstrap controller has created `default`.
        status, _ = _https_get("127.0.0.1", self.apiserver_port, "/api/v1/namespaces/default", ctx)
        return status == 200

    def _component_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig for a control-plane component's own identity (RBAC's bootstrap policy grants
        system:kube-controller-manager and system:kube-scheduler what kubeadm's components get)."""
        return self.write_user_kubeconfig(user, groups, self.work_dir / f"{user.split(':')[-1]}.kubeconfig")

    def _start_controller_manager(self) -> None:
        """kube-controller-manager with kubeadm's flags, as kind runs it (leader election off: one instance)."""
        kubeconfig = self._component_kubeconfig("system:kube-controller-manager")
        port = free_port()
        flags: dict[str, str] = {
            "--kubeconfig": str(kubeconfig),
            "--authentication-kubeconfig": str(kubeconfig),
            "--authorization-kubeconfig": str(kubeconfig),
            "--bind-address": "127.0.0.1",
            "--secure-port": str(port),
            "--cert-dir": str(self.work_dir / "kube-controller-manager-certs"),
            "--client-ca-file": str(self.cert_dir / "ca.crt"),
            "--requestheader-client-ca-file": str(self.cert_dir / "front-proxy-ca.crt"),
            "--root-ca-file": str(self.cert_dir / "ca.crt"),
            "--cluster-signing-cert-file": str(self.cert_dir / "ca.crt"),
            "--cluster-signing-key-file": str(self.cert_dir / "ca.key"),
            "--service-account-private-key-file": str(self.cert_dir / "sa.key"),
            "--use-service-account-credentials": "true",
            "--controllers": "*,bootstrapsigner,tokencleaner",
            "--allocate-node-cidrs": "true",
            "--cluster-cidr": KIND_POD_CIDR,
            "--service-cluster-ip-range": KIND_SERVICE_CIDR,
            "--cluster-name": "minisched",
            "--enable-hostpath-provisioner": "true",  # kind's addition to kubeadm's flags
            # Its default is /usr/libexec/kubernetes/...: kube-controller-manager would create that on the host.
            "--flex-volume-plugin-dir": str(self.work_dir / "flexvolume"),
            "--leader-elect": "false",
            "--v": "1",
        }
        flags.update(self.options.controller_manager_flags)
        argv = [str(self.binaries.kube_controller_manager)] + [f"{k}={v}" for k, v in flags.items()]
        proc = self._spawn("kube-controller-manager", argv)
        insecure = _insecure_ssl_context()
        proc.wait_until(
            lambda: _https_get("127.0.0.1", port, "/healthz", insecure)[0] == 200,
            self.options.ready_timeout,
            "healthy",
        )
        proc.port = port

    def _start_kwok_processes(self) -> None:
        if not self.options.kind_like:
            self._start_kwok("kwok", {"--manage-nodes-with-annotation-selector": f"{KWOK_NODE_ANNOTATION}=fake"})
            return
        # KWOK ANDs its label and annotation selectors, so two processes with disjoint selections cover
        # "annotated fake, or a chapter node". Each renews its nodes' Leases as a kubelet does (KWOK's
        # release config sets 40 s, as on kind; the binary's own default, 0, renews none): the node
        # lifecycle controller counts a renewal as a heartbeat, which a node whose status KWOK's stages
        # never touch (Ready=True from creation, as minisched.objects.make_node makes it) needs, or it
        # flaps to Unknown and back every 50 s.
        lease = {"--node-lease-duration-seconds": "40"}
        self._start_kwok(
            "kwok",
            {
                "--manage-nodes-with-annotation-selector": f"{KWOK_NODE_ANNOTATION}=fake",
                "--manage-nodes-with-label-selector": f"!{CHAPTER_NODE_LABEL}",
                **lease,
            },
        )
        self._start_kwok(
            "kwok-chapter-nodes", {"--manage-nodes-with-label-selector": CHAPTER_NODE_LABEL, **lease}
        )

    def _add_kind_objects(self) -> None:
        from minisched.cluster.real import RealCluster
        from minisched.controlplane import kindlike

        cluster = RealCluster.from_kubeconfig(path=str(self.kubeconfig))
        try:
            self.kind_node_names = kindlike.populate(cluster)
            deadline = time.monotonic() + self.options.settle_timeout
            while (missing := kindlike.settled(cluster, self.kind_node_names)) is not None:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"kind's nodes and system pods did not settle within {self.options.settle_timeout:.0f}s: "
                        f"{missing}; logs in {self.log_dir}"
                    )
                for name, proc in self.processes.items():
                    if not proc.running():
                        raise proc.fail(f"exited while kind's objects were settling ({name})")
                time.sleep(0.25)
        finally:
            cluster.close()

    def _start_kwok(self, name: str, selection: dict[str, str]) -> None:
        for attempt in range(3):
            port = free_port()
            flags: dict[str, str] = {
                "--kubeconfig": str(self.kubeconfig),
                "--manage-all-nodes": "false",
                **selection,
                "--config": str(self.binaries.kwok_stages),
                "--cidr": POD_CIDR,
                "--node-ip": "127.0.0.1",
                "--server-address": f"127.0.0.1:{port}",
            }
            flags.update(self.options.kwok_flags)
            proc = self._spawn(name, [str(self.binaries.kwok)] + [f"{k}={v}" for k, v in flags.items()])
            # KWOK starts its server only after its controllers are running, so /healthz means ready.
            try:
                proc.wait_until(functools.partial(_kwok_healthy, port), self.options.ready_timeout, "healthy")
                return
            except ProcessFailed:
                if proc.running() or "address already in use" not in proc.log_tail(50) or attempt == 2:
                    raise
                self.stop_component(name)


def _kwok_healthy(port: int) -> bool:
    return _http_get("127.0.0.1", port, "/healthz") == 200


_running: weakref.WeakSet[ControlPlane] = weakref.WeakSet()


@atexit.register
def _stop_running_control_planes() -> None:
    """An interpreter exiting with a control plane still up (stop() never called): stop it, remove its
    state, and keep its logs, since something went wrong. Runs before processes.py's own backstop."""
    for cp in list(_running):
        cp.mark_failed()
        cp.stop()
        print(f"minisched: stopped a control plane left running; logs in {cp.log_dir}", file=sys.stderr)


def _insecure_ssl_context() -> ssl.SSLContext:
    # kube-scheduler serves a self-signed certificate, on loopback only.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _https_get(
    host: str, port: int, path: str, ctx: ssl.SSLContext, timeout: float = 5.0
) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _http_get(host: str, port: int, path: str, timeout: float = 2.0) -> int:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.1, hold: float = 0.0) -> Any:
    """Poll until `predicate()` returns a truthy value (returned), or TimeoutError naming `what`.
    With `hold`, the value must stay truthy at every poll for `hold` seconds: an end state, not an
    instant that a system passes through on its way somewhere else."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    since: float | None = None  # when the predicate last became true
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as err:  # noqa: BLE001 - remembered for the timeout message
            last_error, value = err, None
        if not value:
            since = None
        else:
            now = time.monotonic()
            since = now if since is None else since
            if now - since >= hold:
                return value
        time.sleep(interval)
    held = f" held for {hold:g}s" if hold else ""
    suffix = f" (last error: {last_error})" if last_error else ""
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{held}{suffix}")


def environment_summary() -> str:
    """One line for logs: which binaries, which cache."""
    b = find_binaries()
    return f"control-plane binaries in {b.directory} (stages {b.kwok_stages}); pid {os.getpid()}"
