"""Defect 1 of issue 17: a silently dead watch must be noticed, restarted and logged.

- On a fake API server that answers a watch and then goes silent without closing (what a black-holed
  connection looks like to the client), the watch ends within the idle deadline, says so, and the
  request pool is dropped. Runs everywhere.
- On the real control plane, through a TCP relay that black-holes every open connection: the
  scheduler's informers restart their watches and the pods created meanwhile are bound.
- A healthy quiet watch is never taken for dead: the server ends it before the deadline.
"""

from __future__ import annotations

import http.server
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minisched.cluster.real import RealCluster
from minisched.controlplane.relay import TcpRelay
from minisched.objects import make_node, make_pod


class _SilentWatchHandler(http.server.BaseHTTPRequestHandler):
    """Answers any GET with one chunked watch event, then holds the connection open in silence."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        event = json.dumps({"type": "ADDED", "object": {"metadata": {"name": "p", "resourceVersion": "7"}}})
        line = (event + "\n").encode()
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        self.wfile.flush()
        self.release.wait(30)  # silent, connection open: no FIN, no RST

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def silent_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SilentWatchHandler)
    server.daemon_threads = True
    _SilentWatchHandler.release.clear()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        _SilentWatchHandler.release.set()
        server.shutdown()
        server.server_close()


def _plain_cluster(host: str, **options: Any) -> RealCluster:
    from kubernetes import client

    return RealCluster(client.Configuration(host=host), **options)


def test_a_silent_watch_ends_at_the_idle_deadline_and_says_so(
    silent_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = _plain_cluster(silent_server, watch_idle_timeout=3.0, watch_max_seconds=1.0)
    cleared: list[int] = []
    real_clear = cluster._pool.clear

    def clear() -> None:
        cleared.append(1)
        real_clear()

    cluster._pool.clear = clear  # type: ignore[method-assign]
    watch = cluster.watch("pods", "default", resource_version="1", allow_bookmarks=True, timeout_seconds=600)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="minisched.cluster.real"):
        events = list(watch)
    elapsed = time.monotonic() - started
    assert [e["type"] for e in events] == ["ADDED"]
    assert 2.9 <= elapsed < 8, f"the silent watch ended after {elapsed:.1f} s, not at its 3 s deadline"
    assert watch.dead and cluster.dead_watches == 1
    assert cleared, "the idle request pool was not dropped after a dead watch"
    assert any("taken for dead" in r.getMessage() for r in caplog.records), caplog.text
    cluster.close()


def test_the_watch_asks_the_server_to_end_before_the_idle_deadline() -> None:
    cluster = _plain_cluster("http://127.0.0.1:1", watch_idle_timeout=45.0, watch_max_seconds=40.0)
    for _ in range(50):
        seconds = cluster._watch_seconds(600)
        assert seconds is not None and 30 <= seconds <= 40
    assert cluster._watch_seconds(None) is not None
    assert cluster._watch_seconds(5) == 5
    with pytest.raises(ValueError, match="at least 2 s below"):
        _plain_cluster("http://127.0.0.1:1", watch_idle_timeout=10.0, watch_max_seconds=9.0)
    unbounded = _plain_cluster("http://127.0.0.1:1", watch_idle_timeout=None, watch_max_seconds=None)
    assert unbounded._watch_seconds(None) is None and unbounded._watch_seconds(600) == 600
    # by default (as `minisched run` builds it) a dead watch is noticed within the 60 s
    default = _plain_cluster("http://127.0.0.1:1")
    assert default.watch_idle_timeout is not None and default.watch_idle_timeout <= 60


# ------------------------------------------------------------------------------- real control plane


@pytest.mark.realcluster
def test_a_quiet_healthy_watch_is_never_taken_for_dead(real_cluster: Any, control_plane: Any) -> None:
    """The server ends a watch at timeoutSeconds (capped below the idle deadline), so a namespace
    where nothing happens never trips the deadline. Bookmarks cannot be the heartbeat: the watch
    cache sends them only after the resource changed (none arrive on a quiet control plane)."""
    ns = f"quiet-{uuid.uuid4().hex[:6]}"
    real_cluster.create("namespaces", {"metadata": {"name": ns}})
    # the shortest bounds the client allows (idle >= max + 2 s): two watches or more in 5 s
    cluster = RealCluster.from_kubeconfig(path=str(control_plane.kubeconfig), watch_idle_timeout=4.0,
                                          watch_max_seconds=2.0)
    rv = real_cluster.list("pods", ns)["metadata"]["resourceVersion"]
    watches = 0
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            began = time.monotonic()
            watch = cluster.watch("pods", ns, resource_version=rv, allow_bookmarks=True, timeout_seconds=600)
            for event in watch:
                rv = event["object"]["metadata"].get("resourceVersion") or rv
            assert not watch.dead
            assert time.monotonic() - began < 3.5, "the server did not end the watch at timeoutSeconds"
            watches += 1
    finally:
        cluster.close()
    assert cluster.dead_watches == 0 and watches >= 2


@pytest.mark.realcluster
def test_black_holed_connections_are_noticed_and_pods_bound_after(
    real_cluster: Any, relay: TcpRelay, relayed_kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every connection the scheduler has is black-holed (no FIN, no RST) while the API server stays
    healthy. Before the fix the watches waited forever and no new pod was bound (the operator saw
    0 of 280 in 150 s); now they are restarted at the idle deadline and the pods bound right after."""
    from minisched.scheduler.scheduler import Scheduler

    idle = 5.0
    ns = f"blackhole-{uuid.uuid4().hex[:6]}"
    real_cluster.create("namespaces", {"metadata": {"name": ns}})
    for i in range(2):
        real_cluster.create("nodes", make_node(f"bh-node-{ns}-{i}", cpu="32", memory="64Gi"))
    cluster = RealCluster.from_kubeconfig(path=str(relayed_kubeconfig), watch_idle_timeout=idle,
                                          watch_max_seconds=3.0)
    sched = Scheduler(cluster, bind_workers=4)

    def bound(names: list[str]) -> int:
        pods = real_cluster.list("pods", ns)["items"]
        return sum(1 for p in pods if p["metadata"]["name"] in names and p["spec"].get("nodeName"))

    def wait_bound(names: list[str], timeout: float) -> float:
        start = time.monotonic()
        while bound(names) < len(names):
            if time.monotonic() - start > timeout:
                raise AssertionError(f"{bound(names)} of {len(names)} pods bound in {timeout:g} s")
            time.sleep(0.1)
        return time.monotonic() - start

    try:
        with caplog.at_level(logging.WARNING, logger="minisched.cluster.real"):
            sched.start()
            before = [f"before-{i}" for i in range(3)]
            for name in before:
                real_cluster.create("pods", make_pod(name, namespace=ns, scheduler_name="minisched"))
            wait_bound(before, 20)
            time.sleep(0.5)  # let the watches settle on their connections
            assert relay.black_hole() >= 2  # the pod and node watches at least
            black_holed_at = time.monotonic()
            after = [f"after-{i}" for i in range(10)]
            for name in after:
                real_cluster.create("pods", make_pod(name, namespace=ns, scheduler_name="minisched"))
            wait_bound(after, idle + 20)
            recovery = time.monotonic() - black_holed_at
        print(f"\nblack-holed watches restarted and 10 pods bound {recovery:.1f} s after the black hole "
              f"(idle deadline {idle:g} s)")
        assert cluster.dead_watches >= 1
        assert any("taken for dead" in r.getMessage() for r in caplog.records)
    finally:
        sched.stop()
        cluster.close()
