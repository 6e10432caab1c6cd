"""The real-cluster backend: the `Cluster` interface over a Kubernetes API server.

Connection settings come from the official `kubernetes` client (kubeconfig with context selection,
or the in-cluster service account), so every authentication method it supports works here too:
client certificates, bearer tokens, exec plugins (their token refresh hook runs per request).

Requests, though, go out as raw REST calls with JSON in and out (orjson), never through the
client's generated models:
- model deserialization is slow on large lists and watches, which is exactly minisched's hot path;
- the generated `create_namespaced_binding` can raise while deserializing the response of a bind
  that succeeded (kubernetes-client/python issues 547 and 825);
- raw paths serve custom resources exactly like built-in ones;
- `ApiClient.call_api`'s signature changed with the client's move to a new code generator (37
  here, while the pinned range admits 33-37).
They travel on `minisched.cluster.http11`, a lean HTTP/1.1 keep-alive client over the TLS socket:
urllib3 (the client's own HTTP library, used before) spent about two thirds of a bind's client CPU
in http.client's request building and header parsing (bench/README.md, "Client CPU per call").
Through a forward proxy (`configuration.proxy`) requests still go through urllib3's ProxyManager.

Dead connections are noticed, to client-go's standard (it sends HTTP/2 pings; we speak HTTP/1.1,
so the same bound comes from a deadline): every watch has an idle read deadline
(`watch_idle_timeout`, 45 s) and asks the server to end it sooner than that (timeoutSeconds at most
`watch_max_seconds`, 40 s), so a healthy watch is never silent past the deadline: the server ends
it on time even when nothing happens (its bookmarks are no heartbeat to count on: the watch cache
sends them only once the resource has changed since the watch began). A watch that is silent past
the deadline, whose connection the network black-holed, is closed and logged, and the caller
re-watches from the last resourceVersion it saw. TCP keepalive (15 s idle, 3 probes 5 s apart) and TCP_USER_TIMEOUT also
end connections whose peer vanished, for every request.

Watches stream on a connection of their own, so a long-lived watch never holds one of the pooled
connections that binding workers share, and a finished watch's connection is closed, never reused.

Errors become `minisched.errors` exceptions built from the server's Status body, so code written
against the embedded cluster catches the same types here. Client-side rate limiting does not exist
(the Python client has none either); the API server's priority and fairness is the only limit.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import math
import random
import socket
import ssl
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol
from urllib.parse import SplitResult, quote, urlencode, urlsplit

import orjson
import urllib3

from minisched.cluster import http11
from minisched.cluster.base import Object, PatchType, WatchEvent
from minisched.errors import ApiError, Cause, Expired, InternalError, Invalid, ServiceUnavailable, Timeout
from minisched.ratelimitlog import install as install_rate_limit
from minisched.resources import PODS, Resource, ResourceLike, resolve

log = logging.getLogger(__name__)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
_PATCH_CONTENT_TYPES = {"merge": MERGE_PATCH, "strategic": STRATEGIC_MERGE_PATCH}
# Bind from many threads at once without reconnecting: one pooled connection per concurrent caller.
# Sized by use: `minisched run`'s 64 binding workers, the scheduling loop, the event writer, leader
# election and the informers' lists, with room to spare. Past it extra connections are opened and
# discarded afterwards ("Connection pool is full"), costing a TLS handshake each.
DEFAULT_POOL_SIZE = 96
DEFAULT_REQUEST_TIMEOUT = 30.0
# A watch silent this long is dead (see the module docstring); the server ends watches before it.
DEFAULT_WATCH_IDLE_TIMEOUT = 45.0
DEFAULT_WATCH_MAX_SECONDS = 40.0
WATCH_POOL_SIZE = 256  # watches are closed when they end; this only bounds idle placeholders
# TCP keepalive: probe after 15 s idle, every 5 s, give up after 3 unanswered (~30 s); and drop a
# connection whose sent data stays unacknowledged for 30 s.
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 15, 5, 3
TCP_USER_TIMEOUT_MS = 30_000


# Only connection failures are retried: such a request never reached the server, so even a POST (a
# bind) cannot happen twice. A read failure is not retried: the server may have acted on it.
CONNECT_RETRIES = 3
_CONNECT_RETRIES = urllib3.Retry(total=CONNECT_RETRIES, connect=CONNECT_RETRIES, read=0, redirect=0, status=0)
# The methods urllib3 retries on a read error (none here: read=0): its MaxRetryError made their read
# timeouts ServiceUnavailable, where POST's and PATCH's stayed Timeout. RealCluster keeps that split.
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


class RealCluster:
    """A Kubernetes API server reached over HTTPS. Thread-safe; share one per process."""

    def __init__(
        self,
        configuration: Any,
        *,
        pool_maxsize: int = DEFAULT_POOL_SIZE,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        watch_idle_timeout: float | None = DEFAULT_WATCH_IDLE_TIMEOUT,
        watch_max_seconds: float | None = DEFAULT_WATCH_MAX_SECONDS,
        user_agent: str = "minisched",
    ) -> None:
        """`configuration` is a `kubernetes.client.Configuration` (see from_kubeconfig/in_cluster).

        `watch_idle_timeout`: seconds a watch may stay silent before its connection is taken for
        dead (None: never). `watch_max_seconds`: the longest timeoutSeconds a watch asks for; it
        must leave the server time to end the watch before the idle deadline."""
        if pool_maxsize < 1:
            raise ValueError(f"pool_maxsize must be at least 1, got {pool_maxsize}")
        if watch_idle_timeout is not None:
            if watch_idle_timeout <= 0:
                raise ValueError(f"watch_idle_timeout must be positive or None, got {watch_idle_timeout}")
            if watch_max_seconds is None or watch_max_seconds + 2 > watch_idle_timeout:
                raise ValueError(
                    f"watch_max_seconds ({watch_max_seconds}) must be at least 2 s below watch_idle_timeout "
                    f"({watch_idle_timeout}): a healthy watch that the server ends at timeoutSeconds would "
                    "otherwise be taken for dead"
                )
        if watch_max_seconds is not None and watch_max_seconds < 1:
            raise ValueError(f"watch_max_seconds must be at least 1, got {watch_max_seconds}")
        self._configuration = configuration
        self.server: str = str(configuration.host).rstrip("/")
        self._request_timeout = request_timeout
        self.watch_idle_timeout = watch_idle_timeout
        self.watch_max_seconds = watch_max_seconds
        self.pool_maxsize = pool_maxsize
        self._user_agent = user_agent
        self._base_headers = {"Accept": JSON, "User-Agent": user_agent}
        url = urlsplit(self.server)
        self._path_prefix = url.path.rstrip("/")  # a server behind a path
        # Requests go out on http11's keep-alive connections (bench/README.md, "Client CPU per
        # call"); through a forward proxy they keep urllib3's ProxyManager. Watches get a connection
        # each (from _endpoint, or the proxy's own pool), closed when the watch ends.
        self._endpoint: http11.Endpoint | None = None
        self._pool: http11.ConnectionPool | urllib3.PoolManager
        self._watch_pool: urllib3.PoolManager | None = None
        if getattr(configuration, "proxy", None):
            self._pool = _pool_manager(configuration, pool_maxsize)
            self._watch_pool = _pool_manager(configuration, WATCH_POOL_SIZE)
        else:
            self._endpoint = _endpoint(configuration, url)
            self._pool = http11.ConnectionPool(self._endpoint, pool_maxsize)
        self._fixed_head = f"Host: {self._endpoint.host_header}\r\n" if self._endpoint else ""
        self._fixed_head += f"Accept: {JSON}\r\nUser-Agent: {user_agent}\r\n"
        self._rng = random.Random()
        self.dead_watches = 0  # watches closed by the idle deadline
        self._closed = False
        # During an outage every connection retry is logged; keep one line per 10 s.
        install_rate_limit(logging.getLogger("urllib3.connectionpool"), 10.0, match="Retrying")
        install_rate_limit(log, 10.0, match="Retrying")

    # --------------------------------------------------------------- construction

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None, **options: Any
    ) -> RealCluster:
        """Connect with a kubeconfig (default: $KUBECONFIG or ~/.kube/config) and context
        (default: its current-context), e.g. `RealCluster.from_kubeconfig(context="kind-minisched")`."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
        return cls(configuration, **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> RealCluster:
        """Connect as the service account of the pod we run in."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return cls(configuration, **options)

    @property
    def name(self) -> str:
        return "real"

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.clear()
            if self._watch_pool is not None:
                self._watch_pool.clear()

    def __enter__(self) -> RealCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RealCluster({self.server})"

    # --------------------------------------------------------------- the Cluster verbs

    def get(self, resource: ResourceLike, name: str, namespace: str | None = None) -> Object:
        r = resolve(resource)
        return self.request("GET", _object_path(r, namespace, name))

    def list(
        self,
        resource: ResourceLike,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Object:
        r = resolve(resource)
        query = _query(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            resourceVersion=resource_version,
            limit=limit,
            **{"continue": continue_token},
        )
        result = self.request("GET", r.path(namespace if r.namespaced else None), query=query)
        # The API server leaves apiVersion/kind off list items; the Cluster contract puts them on.
        for item in result.get("items") or []:
            item.setdefault("apiVersion", r.api_version)
            item.setdefault("kind", r.kind)
        return result

    def create(self, resource: ResourceLike, obj: Object, namespace: str | None = None) -> Object:
        path, body = self._create_request(resolve(resource), obj, namespace)
        return self.request("POST", path, body=body)

    @staticmethod
    def _create_request(r: Resource, obj: Object, namespace: str | None) -> tuple[str, Object]:
        ns = namespace or (obj.get("metadata") or {}).get("namespace") or None
        if r.namespaced and not ns:
            ns = "default"  # as kubectl does for an object that names no namespace
        body = dict(obj)
        body.setdefault("apiVersion", r.api_version)
        body.setdefault("kind", r.kind)
        return r.path(ns if r.namespaced else None), body

    def create_many(self, resource: ResourceLike, objs: Sequence[Object]) -> builtins.list[ApiError | None]:
        """Create several objects (each in its own metadata.namespace) with one round trip: the
        POSTs go out back to back on one connection and the answers are read in order (HTTP/1.1
        pipelining; the API server, like every Go server, answers a connection's requests one after
        another). client-go gets the same from HTTP/2 streams; here it saves a send, a receive and a
        GIL hand-off per object. Returns None for each object created (its answer is not parsed) or
        the ApiError it got; after a broken connection the objects left unanswered get
        ServiceUnavailable, as a lone create would (the server may have created some of them). A
        send that fails part way is retried on a fresh connection, as a lone request is: an object
        the server had already created then comes back AlreadyExists."""
        r = resolve(resource)
        if not objs:
            return []
        pool = self._pool
        if self._endpoint is None or not isinstance(pool, http11.ConnectionPool):  # urllib3 cannot pipeline
            return [self._created(r, obj) for obj in objs]
        paths: list[str] = []
        data: list[bytes] = []
        for obj in objs:
            path, body = self._create_request(r, obj, None)
            payload = _dumps(body)
            paths.append(path)
            data += (self._head("POST", path, payload, JSON), payload)
        try:
            conn, answer = self._exchange("POST", paths[0], b"".join(data), self._request_timeout, pool.get)
        except ApiError as err:
            return [err] * len(objs)
        results: list[ApiError | None] = []
        for i, path in enumerate(paths):
            try:
                if i:
                    answer = conn.read_head("POST")
                data_read, reusable = answer.read()
            except http11.HttpFailure as err:
                conn.close()
                failure = self._failure("POST", path, err)
                return results + [failure] * (len(paths) - i)
            results.append(_error_from_response(answer.status, data_read, f"POST {path}") if answer.status >= 300
                           else None)
            if not reusable and i + 1 < len(paths):  # the server closed after this answer: it read none of the rest
                conn.close()
                rest = ServiceUnavailable(f"POST {paths[i + 1]}: the server closed the connection before answering")
                return results + [rest] * (len(paths) - i - 1)
            if not reusable:
                conn.close()
                return results
        pool.put(conn)
        return results

    def _created(self, r: Resource, obj: Object) -> ApiError | None:
        try:
            self.create(r, obj)
        except ApiError as err:
            return err
        return None

    def update(self, resource: ResourceLike, obj: Object, *, subresource: str | None = None) -> Object:
        r = resolve(resource)
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise _invalid("metadata.name", "update needs metadata.name")
        body = dict(obj)
        body.setdefault("apiVersion", r.api_version)
        body.setdefault("kind", r.kind)
        return self.request("PUT", _object_path(r, meta.get("namespace"), name, subresource), body=body)

    def patch(
        self,
        resource: ResourceLike,
        name: str,
        patch: Object,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        patch_type: PatchType = "merge",
    ) -> Object:
        content_type = _PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise ValueError(f"patch_type must be one of {sorted(_PATCH_CONTENT_TYPES)}, not {patch_type!r}")
        r = resolve(resource)
        return self.request(
            "PATCH", _object_path(r, namespace, name, subresource), body=patch, content_type=content_type
        )

    def delete(
        self,
        resource: ResourceLike,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        preconditions: dict[str, str] | None = None,
    ) -> Object:
        r = resolve(resource)
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = dict(preconditions)
        return self.request("DELETE", _object_path(r, namespace, name), body=options)

    def watch(
        self,
        resource: ResourceLike,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = False,
        timeout_seconds: float | None = None,
        send_initial_events: bool | None = None,
        resource_version_match: str | None = None,
    ) -> RealWatch:
        r = resolve(resource)
        query = _query(
            watch="true",
            resourceVersion=resource_version,
            resourceVersionMatch=resource_version_match,
            sendInitialEvents=None if send_initial_events is None else str(send_initial_events).lower(),
            labelSelector=label_selector,
            fieldSelector=field_selector,
            allowWatchBookmarks="true" if allow_bookmarks else None,
            # The server ends the stream after timeoutSeconds; whole seconds only, at least 1.
            timeoutSeconds=self._watch_seconds(timeout_seconds),
        )
        path = r.path(namespace if r.namespaced else None)
        # The idle deadline is a read timeout: it applies to each recv, so it bounds silence,
        # not the length of the watch. Without one (None) a dead connection blocks the reader forever.
        idle = self.watch_idle_timeout
        try:
            stream = self._open_stream(path, query, idle)
        except Expired as err:
            # The contract raises Expired from iteration, however the server said it (HTTP status or
            # an ERROR event), so consumers handle it in one place.
            return RealWatch(None, r, error=err)
        return RealWatch(stream, r, idle_timeout=idle, on_dead=self._count_dead_watch)

    def _watch_seconds(self, requested: float | None) -> int | None:
        """timeoutSeconds for a watch: what the caller asked, capped so the server ends the watch
        before the idle deadline; a capped value is spread over [75%, 100%] of the cap so that many
        watches do not reconnect in step."""
        cap = self.watch_max_seconds
        seconds = requested
        if cap is not None and (seconds is None or seconds > cap):
            seconds = self._rng.uniform(0.75 * cap, cap)
        if seconds is None:
            return None
        return max(1, min(math.ceil(seconds), int(cap) if cap is not None else math.ceil(seconds)))

    def _count_dead_watch(self) -> None:
        self.dead_watches += 1
        # Whatever killed this connection (a NAT or conntrack entry forgotten, a peer gone) has most
        # likely killed the idle pooled ones to the same server too, and the pool cannot tell: a
        # black-holed socket looks alive. client-go's HTTP/2 health check closes the one shared
        # connection, every request on it included; the equivalent here is to drop the idle pool,
        # so the next bind opens a fresh connection instead of waiting out a dead one.
        self._pool.clear()

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None,
             resource_version: str | None = None) -> None:
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid  # the server checks it as a precondition: we bind the pod we decided on
        if resource_version:
            metadata["resourceVersion"] = resource_version  # a precondition too: the pod as we saw it
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        self.request("POST", PODS.path(namespace, name, "binding"), body=binding, parse=False)

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> None:
        eviction: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if grace_period_seconds is not None:
            eviction["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        self.request("POST", PODS.path(namespace, name, "eviction"), body=eviction, parse=False)

    # --------------------------------------------------------------- raw access

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        parse: bool = True,
        timeout: float | None = None,
    ) -> Object:
        """One API call on a raw path ("/apis/rbac.authorization.k8s.io/v1/clusterroles", with a
        query such as {"dryRun": "All"}); the JSON answer, or an ApiError for any non-2xx status."""
        status, data = self._send(method, path, query, body, content_type, read_timeout=timeout)
        if status >= 300:
            raise _error_from_response(status, data, f"{method} {path}")
        if not parse or not data:
            return {}
        try:
            parsed: Object = _loads(data)
        except ValueError as err:
            raise InternalError(f"{method} {path}: response is not JSON: {data[:200]!r}") from err
        return parsed

    def _send(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None,
        body: Any,
        content_type: str,
        *,
        read_timeout: float | None,
    ) -> tuple[int, bytes]:
        """Status and body of one request on a pooled keep-alive connection."""
        if self._closed:
            raise ServiceUnavailable("RealCluster is closed")
        target = path + ("?" + urlencode(query) if query else "")
        payload = None if body is None else _dumps(body)
        timeout = read_timeout if read_timeout is not None else self._request_timeout
        if self._endpoint is None:  # through a forward proxy: urllib3's ProxyManager
            response = self._proxied(method, target, path, payload, content_type, timeout, stream=False)
            try:
                return response.status, response.data
            finally:
                response.release_conn()
        pool = self._pool
        assert isinstance(pool, http11.ConnectionPool)
        conn, lean = self._exchange(method, path, self._request_bytes(method, target, payload, content_type),
                                    timeout, pool.get)
        try:
            data, reusable = lean.read()
        except http11.HttpFailure as err:
            conn.close()
            raise self._failure(method, path, err) from err
        if reusable:
            pool.put(conn)
        else:
            conn.close()
        return lean.status, data

    def _open_stream(self, path: str, query: dict[str, str], idle: float | None) -> _Stream:
        """A watch's response on a connection of its own (never pooled: closed when the watch ends).
        Raises the ApiError of a non-2xx answer."""
        if self._closed:
            raise ServiceUnavailable("RealCluster is closed")
        target = path + "?" + urlencode(query)
        if self._endpoint is None:
            response = self._proxied("GET", target, path, None, JSON, idle, stream=True)
            if response.status >= 300:
                try:
                    data = response.data
                finally:
                    response.release_conn()
                raise _error_from_response(response.status, data, f"GET {path}")
            return _Urllib3Stream(response)
        conn, lean = self._exchange("GET", path, self._request_bytes("GET", target, None, JSON), idle,
                                    self._endpoint.connect)
        if lean.status >= 300:
            try:
                data, _ = lean.read()
            except http11.HttpFailure as err:
                raise self._failure("GET", path, err) from err
            finally:
                conn.close()
            raise _error_from_response(lean.status, data, f"GET {path}")
        return _LeanStream(conn, lean)

    def _exchange(
        self, method: str, path: str, data: bytes, timeout: float | None,
        connection: Callable[[], http11.Connection],
    ) -> tuple[http11.Connection, http11.Response]:
        """Send a request (`data`: its head and body; or several, pipelined) and read the first
        answer's head. A request that cannot have reached the server (no connection, or its bytes
        not all written) is retried on a fresh connection, at most CONNECT_RETRIES times; once it
        was sent, never: the server may have acted on it (a bind)."""
        retries = CONNECT_RETRIES
        while True:
            try:
                conn = connection()
                conn.send(data, timeout)
                break
            except (http11.ConnectFailed, http11.Unsent) as err:
                if retries <= 0:
                    raise ServiceUnavailable(f"{method} {path}: cannot reach {self.server}: {err}") from err
                retries -= 1
                log.log(logging.DEBUG if isinstance(err, http11.Unsent) else logging.WARNING,
                        "Retrying %s %s (%d left) after %s", method, path, retries, err)
        try:
            return conn, conn.read_head(method)
        except http11.HttpFailure as err:
            conn.close()
            raise self._failure(method, path, err) from err

    def _request_bytes(self, method: str, target: str, payload: bytes | None, content_type: str) -> bytes:
        head = self._head(method, target, payload, content_type)
        return head + payload if payload else head

    def _head(self, method: str, target: str, payload: bytes | None, content_type: str) -> bytes:
        if "\r" in target or "\n" in target or " " in target:
            raise ValueError(f"invalid request path {target!r}: no spaces or line breaks")
        parts = [method, " ", self._path_prefix, target, " HTTP/1.1\r\n", self._fixed_head]
        for key, value in _auth_headers(self._configuration).items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"invalid {key} header value: line breaks are not allowed")
            parts += (key, ": ", value, "\r\n")
        if payload is not None:
            parts += ("Content-Type: ", content_type, "\r\nContent-Length: ", str(len(payload)), "\r\n\r\n")
        elif method in ("POST", "PUT", "PATCH"):
            parts.append("Content-Length: 0\r\n\r\n")
        else:
            parts.append("\r\n")
        return "".join(parts).encode()

    def _failure(self, method: str, path: str, err: http11.HttpFailure) -> ApiError:
        """The ApiError for a request that got no complete answer, as urllib3's Retry(read=0) made
        them: a read timeout is a Timeout for POST and PATCH (their bind or write may still land)
        and ServiceUnavailable for the methods urllib3 retries (GET, PUT, DELETE, HEAD, OPTIONS);
        a broken connection or a malformed answer is ServiceUnavailable."""
        if isinstance(err, http11.ReadTimedOut) and method not in _IDEMPOTENT:
            return Timeout(f"{method} {path}: {err}")
        return ServiceUnavailable(f"{method} {path}: cannot reach {self.server}: {err}")

    def _proxied(
        self, method: str, target: str, path: str, payload: bytes | None, content_type: str,
        read_timeout: float | None, *, stream: bool,
    ) -> urllib3.BaseHTTPResponse:
        headers = {**self._base_headers, **_auth_headers(self._configuration)}
        if payload is not None:
            headers["Content-Type"] = content_type
        pool = self._watch_pool if stream else self._pool
        assert isinstance(pool, urllib3.PoolManager)
        try:
            return pool.request(method, self.server + target, body=payload, headers=headers,
                                timeout=urllib3.Timeout(connect=10.0, read=read_timeout),
                                retries=_CONNECT_RETRIES, preload_content=False)
        except urllib3.exceptions.TimeoutError as err:
            raise Timeout(f"{method} {path}: {err}") from err
        except urllib3.exceptions.HTTPError as err:
            raise ServiceUnavailable(f"{method} {path}: cannot reach {self.server}: {err}") from err


class _Stream(Protocol):
    """A watch's open response: its body in pieces as they arrive, its socket (to stop a blocked
    reader from another thread) and close."""

    def chunks(self) -> Iterator[bytes]: ...

    def socket(self) -> socket.socket | None: ...

    def close(self) -> None: ...


class _LeanStream:
    def __init__(self, conn: http11.Connection, response: http11.Response) -> None:
        self._conn = conn
        self._response = response

    def chunks(self) -> Iterator[bytes]:
        return self._response.chunks()

    def socket(self) -> socket.socket | None:
        return self._conn.sock

    def close(self) -> None:
        self._conn.close()


class _Urllib3Stream:
    """Through a forward proxy, the watch is urllib3's response."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def chunks(self) -> Iterator[bytes]:
        response = self._response
        if response.chunked or not hasattr(response, "read1"):
            yield from response.stream(65536, decode_content=True)
        else:  # unchunked: read1 returns what has arrived instead of waiting for 64 KiB
            while chunk := response.read1(65536):
                yield chunk

    def socket(self) -> socket.socket | None:
        return _socket_of(self._response)

    def close(self) -> None:
        # Never hand a half-read watch connection back for reuse: close it first, then release the
        # pool slot (urllib3 reconnects a closed connection on its next use).
        with contextlib.suppress(Exception):
            conn = getattr(self._response, "connection", None) or getattr(self._response, "_connection", None)
            if conn is not None:
                conn.close()
        with contextlib.suppress(Exception):
            self._response.release_conn()
        with contextlib.suppress(Exception):
            self._response.close()


class RealWatch:
    """A watch stream read line by line from the chunked HTTP response (one JSON event per line)."""

    def __init__(
        self,
        stream: _Stream | None,
        resource: Resource,
        error: ApiError | None = None,
        *,
        idle_timeout: float | None = None,
        on_dead: Any = None,
    ) -> None:
        self._stream = stream
        self._resource = resource
        self._error = error
        self._idle_timeout = idle_timeout
        self._on_dead = on_dead
        self._stopped = threading.Event()
        self._done = False
        self.dead = False  # ended by the idle deadline: the connection was taken for dead
        self._events: Iterator[WatchEvent] | None = None

    def __iter__(self) -> Iterator[WatchEvent]:
        """One stream, one iterator: a second `for` goes on where the first stopped, as the embedded
        watch does. (An iterator each would cut lines from the socket with a buffer of its own, and
        the lines one had read ahead would be lost to the other.)"""
        if self._events is None:
            self._events = self._read_events()
        return self._events

    def _read_events(self) -> Iterator[WatchEvent]:
        if self._error is not None:
            error, self._error = self._error, None
            self._done = True
            raise error
        if self._done:
            return
        buffer = b""
        stopped = self._stopped
        try:
            for chunk in self._chunks():
                # The API server flushes one event per chunk, each ending in a newline; a proxy may
                # split or join them, so lines are cut from whatever arrived.
                if buffer:
                    chunk = buffer + chunk
                lines = chunk.split(b"\n")
                buffer = lines.pop()
                for line in lines:
                    if line.strip():
                        event = self._event(line)
                        if event is not None:
                            yield event
                    if stopped.is_set():
                        return
            if buffer.strip() and not stopped.is_set():
                event = self._event(buffer)
                if event is not None:
                    yield event
        finally:
            self._finish()

    def _chunks(self) -> Iterator[bytes]:
        if self._stream is None:
            return
        try:
            yield from self._stream.chunks()
        except (http11.ReadTimedOut, urllib3.exceptions.ReadTimeoutError, TimeoutError):
            if not self._stopped.is_set():
                self.dead = True
                if self._on_dead is not None:
                    self._on_dead()
                log.warning(
                    "watch %s: nothing received for %g s, not even a bookmark; the connection is taken "
                    "for dead, closed, and the watch restarted from the last resourceVersion seen",
                    self._resource.group_resource, self._idle_timeout,
                )
            return
        except (http11.HttpFailure, urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError, zlib.error):
            # The stream broke (server restart, network, or stop() from another thread). The
            # contract: iteration just ends and the caller re-watches from the last version it saw.
            return

    def _event(self, line: bytes) -> WatchEvent | None:
        try:
            raw = _loads(line)
        except ValueError as err:
            raise InternalError(
                f"watch {self._resource.group_resource}: bad event line {line[:200]!r}"
            ) from err
        if not isinstance(raw, dict):
            raise InternalError(f"watch {self._resource.group_resource}: bad event line {line[:200]!r}")
        kind = raw.get("type")
        obj = raw.get("object")
        if obj is None:
            obj = raw["object"] = {}
        if kind == "ERROR":
            # A Status object; 410 Gone with reason Expired when our resourceVersion is too old.
            raise ApiError.from_status(obj)
        if kind not in _EVENT_TYPES:
            raise InternalError(f"watch {self._resource.group_resource}: unknown event type {kind!r}")
        if "apiVersion" not in obj:
            obj["apiVersion"] = self._resource.api_version
        if "kind" not in obj:
            obj["kind"] = self._resource.kind
        if len(raw) != 2:  # the event itself is handed on: only type and object, as the contract says
            raw = {"type": kind, "object": obj}
        return raw  # type: ignore[return-value]

    def stop(self) -> None:
        """End the stream from any thread; a blocked iteration returns promptly."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self._stream is None:
            return
        sock = self._stream.socket()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a reader blocked in recv()
        else:
            with contextlib.suppress(Exception):
                self._stream.close()

    def _finish(self) -> None:
        if self._done or self._stream is None:
            self._done = True
            return
        self._done = True
        with contextlib.suppress(Exception):
            self._stream.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._finish()


# --------------------------------------------------------------------------- helpers


def _object_path(r: Resource, namespace: str | None, name: str, subresource: str | None = None) -> str:
    if not name:
        raise _invalid("metadata.name", "name is required")
    ns = namespace if r.namespaced else None
    if r.namespaced and not ns:
        raise _invalid("metadata.namespace", f"{r.group_resource} are namespaced: a namespace is required")
    return r.path(quote(ns, safe="") if ns else None, quote(name, safe=""), subresource)


def _invalid(field: str, message: str) -> ApiError:
    return Invalid(message, causes=[Cause(field=field, message=message, reason="FieldValueRequired")])


def _query(**params: Any) -> dict[str, str]:
    return {k: str(v) for k, v in params.items() if v is not None and v != ""}


def _dumps(body: Any) -> bytes:
    try:
        return orjson.dumps(body)
    except TypeError:  # what orjson refuses and json takes (int keys, ints past 64 bits): json's answer
        return json.dumps(body, separators=(",", ":")).encode()


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except ValueError:  # NaN and friends, which json takes; a ValueError still if json refuses it too
        return json.loads(data)


def _error_from_response(status: int, data: bytes, what: str) -> ApiError:
    try:
        body = _loads(data) if data else {}
    except ValueError:
        body = {}
    if isinstance(body, dict) and body.get("kind") == "Status":
        return ApiError.from_status(body, http_status=status)
    text = data.decode(errors="replace").strip()[:500] if data else ""
    return ApiError.from_status(
        {"code": status, "message": f"{what}: {text or 'HTTP ' + str(status)}"}, status
    )


def _auth_headers(configuration: Any) -> dict[str, str]:
    """Header credentials (bearer token), refreshed by the client's hook when they expire."""
    headers: dict[str, str] = {}
    for setting in (configuration.auth_settings() or {}).values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[setting["key"]] = setting["value"]
    return headers


def _socket_options() -> list[tuple[int, int, int]]:
    """urllib3's defaults (TCP_NODELAY) plus keepalive and a user timeout, where the OS has them."""
    from urllib3.connection import HTTPConnection

    options = list(HTTPConnection.default_socket_options)
    options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
        ("TCP_USER_TIMEOUT", TCP_USER_TIMEOUT_MS),
    ):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


def _endpoint(configuration: Any, url: SplitResult) -> http11.Endpoint:
    """Where the API server is and how to reach it, with the TLS settings urllib3 took from the same
    configuration: CA file (else the system's), client certificate, verify_ssl, assert_hostname
    (False: no name check; a name: check the certificate against it), tls_server_name (SNI)."""
    scheme = url.scheme or "https"
    if not url.hostname:
        raise ValueError(f"the API server URL {configuration.host!r} names no host")
    context = None
    assert_hostname = getattr(configuration, "assert_hostname", None)
    if scheme == "https":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])
        if configuration.verify_ssl:
            context.check_hostname = assert_hostname is None
            context.verify_mode = ssl.CERT_REQUIRED
            if configuration.ssl_ca_cert:
                context.load_verify_locations(cafile=configuration.ssl_ca_cert)
            else:
                context.load_default_certs()
        else:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if configuration.cert_file:
            context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return http11.Endpoint(
        scheme, url.hostname, url.port or (443 if scheme == "https" else 80), context,
        server_hostname=getattr(configuration, "tls_server_name", None) or None,
        assert_hostname=assert_hostname if (isinstance(assert_hostname, str) and configuration.verify_ssl) else None,
        socket_options=tuple(_socket_options()),
    )


def _pool_manager(configuration: Any, maxsize: int) -> urllib3.PoolManager:
    kwargs: dict[str, Any] = {
        "num_pools": 4,
        "maxsize": maxsize,
        "socket_options": _socket_options(),
        # Past maxsize, extra connections are made and discarded rather than blocking the caller.
        "block": False,
        "cert_reqs": "CERT_REQUIRED" if configuration.verify_ssl else "CERT_NONE",
        "ca_certs": configuration.ssl_ca_cert,
        "cert_file": configuration.cert_file,
        "key_file": configuration.key_file,
    }
    if getattr(configuration, "assert_hostname", None) is not None:
        kwargs["assert_hostname"] = configuration.assert_hostname
    if getattr(configuration, "tls_server_name", None):
        kwargs["server_hostname"] = configuration.tls_server_name
    if getattr(configuration, "proxy", None):
        return urllib3.ProxyManager(
            proxy_url=configuration.proxy,
            proxy_headers=getattr(configuration, "proxy_headers", None),
            **kwargs,
        )
    return urllib3.PoolManager(**kwargs)


def _socket_of(response: urllib3.BaseHTTPResponse) -> socket.socket | None:
    """The socket under a streaming response (urllib3 1.x and 2.x keep it in different places)."""
    for candidate in (
        getattr(getattr(response, "_connection", None), "sock", None),
        getattr(getattr(response, "connection", None), "sock", None),
    ):
        if isinstance(candidate, socket.socket):
            return candidate
    fp = getattr(response, "_fp", None)
    raw = getattr(getattr(fp, "fp", None), "raw", None)
    sock = getattr(raw, "_sock", None)
    return sock if isinstance(sock, socket.socket) else None
