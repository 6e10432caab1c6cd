"""Secure serving as kube-scheduler does it: TLS, and /metrics only for callers the API server vouches for.

kube-scheduler's secure port (k8s.io/apiserver's delegating authenticator and authorizer) asks the
API server about every caller:
1. authentication: the bearer token goes to a TokenReview (authentication.k8s.io/v1); the answer
   is the caller's user name, uid and groups, or "not authenticated";
2. authorization: a SubjectAccessReview (authorization.k8s.io/v1) asks whether that user may `get`
   the non-resource path (/metrics); RBAC answers, e.g. through a ClusterRole with
   `nonResourceURLs: ["/metrics"]`.
Answers are cached for 10 s each (kube's defaults), so a scrape every few seconds costs no API call
most of the time. /healthz, /livez and /readyz stay open (kube's --authorization-always-allow-paths),
because the kubelet probes them without credentials.

`DelegatedAuth(cluster)` is that, as a callable for HealthServer: `auth(path, headers)` returns None
to serve the request or (status, message): 401 without a valid token, 403 when RBAC says no, 500
when the API server cannot be asked (never "allowed because we could not check").
`self_signed_context()` makes a TLS server context from given files, or from a fresh self-signed
certificate (what kube-scheduler does without --tls-cert-file: it writes one to --cert-dir).
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from minisched.errors import ApiError

log = logging.getLogger(__name__)

__all__ = ["ALWAYS_ALLOWED_PATHS", "DelegatedAuth", "self_signed_context"]

ALWAYS_ALLOWED_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class DelegatedAuth:
    def __init__(
        self,
        cluster: Any,
        *,
        cache_ttl: float = 10.0,
        always_allow: frozenset[str] = ALWAYS_ALLOWED_PATHS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.cache_ttl = cache_ttl
        self.always_allow = always_allow
        self._clock = clock
        self._lock = threading.Lock()
        self._users: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._decisions: dict[tuple[str, str, str], tuple[float, bool]] = {}
        self.reviews = 0  # TokenReviews + SubjectAccessReviews sent, for tests

    def __call__(self, path: str, headers: Mapping[str, str]) -> tuple[int, str] | None:
        if path in self.always_allow or any(path.startswith(p + "/") for p in self.always_allow):
            return None
        auth = headers.get("Authorization") or headers.get("authorization") or ""
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return 401, "Unauthorized: a bearer token is required for " + path
        try:
            user = self._authenticate(token.strip())
            if user is None:
                return 401, "Unauthorized: the token was not accepted by the API server"
            if not self._authorize(user, path, "get"):
                name = user.get("username", "")
                return 403, f'Forbidden: user "{name}" cannot get path "{path}"'
        except ApiError as err:
            log.warning("delegated authentication/authorization failed: %s", err)
            return 500, f"Internal error: cannot check the caller with the API server: {err}"
        return None

    def _authenticate(self, token: str) -> dict[str, Any] | None:
        now = self._clock()
        with self._lock:
            hit = self._users.get(token)
            if hit is not None and hit[0] > now:
                return hit[1]
        review = self.cluster.request("POST", TOKEN_REVIEWS, body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        self.reviews += 1
        status = review.get("status") or {}
        user = dict(status.get("user") or {}) if status.get("authenticated") else None
        with self._lock:
            self._users[token] = (now + self.cache_ttl, user)
            if len(self._users) > 1000:  # a bound: stale entries of many callers go first
                for key in [k for k, (exp, _) in self._users.items() if exp <= now]:
                    del self._users[key]
        return user

    def _authorize(self, user: dict[str, Any], path: str, verb: str) -> bool:
        key = (str(user.get("username", "")), path, verb)
        now = self._clock()
        with self._lock:
            hit = self._decisions.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        spec: dict[str, Any] = {
            "user": user.get("username", ""),
            "groups": list(user.get("groups") or []),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        review = self.cluster.request("POST", SUBJECT_ACCESS_REVIEWS, body={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        self.reviews += 1
        allowed = bool((review.get("status") or {}).get("allowed"))
        with self._lock:
            self._decisions[key] = (now + self.cache_ttl, allowed)
        return allowed


def self_signed_context(
    cert_file: str | None = None, key_file: str | None = None, *, cert_dir: str | None = None,
    hosts: tuple[str, ...] = (),
) -> ssl.SSLContext:
    """A TLS server context from `cert_file`/`key_file`, or from a new self-signed certificate for
    localhost, 127.0.0.1, this host's name and `hosts`, written to `cert_dir` (a temporary
    directory by default)."""
    if bool(cert_file) != bool(key_file):
        raise ValueError("give both a certificate and its key, or neither (for a self-signed one)")
    if not cert_file:
        cert_file, key_file = _write_self_signed(Path(cert_dir or tempfile.mkdtemp(prefix="minisched-certs-")),
                                                 ("localhost", socket.gethostname(), *hosts))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def _write_self_signed(directory: Path, names: tuple[str, ...]) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{names[0]}@{int(time.time())}")])
    dns = [x509.DNSName(n) for n in dict.fromkeys(names) if n]
    ips = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1"))]
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([*dns, *ips]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "minisched.crt", directory / "minisched.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)
