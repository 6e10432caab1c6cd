"""Connection pools sized by use (issue 17): 64 binding workers shared a 64-connection pool with the
watches and the event writer, and urllib3 logged "Connection pool is full, discarding connection"
dozens of times per run (each a wasted TLS handshake). RealCluster's own pool (cluster.http11) counts
and logs a discard the same way. And retry warnings are rate-limited."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

import pytest

from minisched.cluster.real import RealCluster
from minisched.objects import make_node, make_pod
from minisched.ratelimitlog import RateLimitFilter, install


def test_rate_limit_filter_lets_one_line_per_interval_through_and_counts_the_rest() -> None:
    now = [0.0]
    limiter = RateLimitFilter(10.0, match="Retrying", clock=lambda: now[0])

    def record(msg: str, *args: Any) -> logging.LogRecord:
        return logging.LogRecord("urllib3.connectionpool", logging.WARNING, __file__, 1, msg, args, None)

    template = "Retrying (%r) after connection broken by '%r': %s"
    assert limiter.filter(record(template, 1, 2, "/a"))
    assert not any(limiter.filter(record(template, i, i, f"/b{i}")) for i in range(1000))
    assert limiter.filter(record("Connection pool is full, discarding connection: %s", "h"))  # not matched
    now[0] = 10.5
    passed = record(template, 3, 4, "/c")
    assert limiter.filter(passed)
    assert "(1000 similar messages suppressed in the last 10 s)" in passed.getMessage()
    assert limiter.suppressed_total == 1000
    logger = logging.getLogger("test.ratelimit")
    assert install(logger, match="x") is install(logger, match="x")


@pytest.mark.realcluster
def test_binding_workers_events_and_watches_at_once_discard_no_connection(
    real_cluster: Any, control_plane: Any, real_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """minisched run's load shape, all at once: 64 binding workers, the event writer, the scheduling
    loop and a lease renewal making requests while the informers' watches stream. Before, the
    watches held connections of the same 64-connection pool and this discarded some every run."""
    cluster = RealCluster.from_kubeconfig(path=str(control_plane.kubeconfig))
    watches = [cluster.watch(r, None, resource_version="0", timeout_seconds=60)
               for r in ("pods", "nodes", "poddisruptionbudgets.policy")]
    callers = 64 + 3
    start = threading.Barrier(callers)
    errors: list[BaseException] = []

    def caller() -> None:
        try:
            start.wait(30)
            for _ in range(15):
                cluster.get("namespaces", real_namespace)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    try:
        with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
            threads = [threading.Thread(target=caller) for _ in range(callers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
    finally:
        for w in watches:
            w.stop()
        cluster.close()
    assert not errors, errors[:3]
    assert cluster._pool.discarded == 0  # type: ignore[union-attr]
    discarded = [r.getMessage() for r in caplog.records if "Connection pool is full" in r.getMessage()]
    assert not discarded, f"{len(discarded)} connections discarded, e.g. {discarded[0]}"


@pytest.mark.realcluster
def test_a_burst_of_binds_discards_no_connection(
    real_cluster: Any, control_plane: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from minisched.scheduler.scheduler import Scheduler

    ns = f"burst-{uuid.uuid4().hex[:6]}"
    real_cluster.create("namespaces", {"metadata": {"name": ns}})
    for i in range(4):
        real_cluster.create("nodes", make_node(f"burst-{ns}-{i}", cpu="64", memory="256Gi", pods="500"))
    cluster = RealCluster.from_kubeconfig(path=str(control_plane.kubeconfig))
    sched = Scheduler(cluster, bind_workers=64)  # minisched run's default
    pods = 400
    try:
        with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
            sched.start()
            for i in range(pods):
                real_cluster.create("pods", make_pod(f"p{i}", namespace=ns, cpu="10m", memory="16Mi"))
            deadline = time.monotonic() + 90
            while sched.stats.bound < pods and time.monotonic() < deadline:
                time.sleep(0.1)
            assert sched.stats.bound == pods
            assert sched.recorder.flush(30)
    finally:
        sched.stop()
        cluster.close()
    assert cluster._pool.discarded == 0  # type: ignore[union-attr]
    discarded = [r.getMessage() for r in caplog.records if "Connection pool is full" in r.getMessage()]
    assert not discarded, f"{len(discarded)} connections discarded, e.g. {discarded[0]}"
