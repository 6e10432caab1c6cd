"""ClusterLink (a client-side partition) and Replica (a SchedulerApp in a thread behind its link)."""

from __future__ import annotations

import threading
import time

import pytest

from minisched.app import Replica
from minisched.cluster.embedded import EmbeddedCluster
from minisched.cluster.link import ClusterLink
from minisched.errors import ServiceUnavailable
from minisched.objects import make_node, make_pod
from minisched.resources import LEASES
from tests.app.test_scheduler_app import FAST_LEASE, bound, http_get, wait_until


@pytest.fixture
def cluster():
    c = EmbeddedCluster()
    c.create("nodes", make_node("n1"))
    yield c
    c.close()


def test_a_cut_link_refuses_every_call_and_ends_open_watches(cluster):
    link = ClusterLink(cluster)
    assert link.name == cluster.name
    watch = link.watch("pods", "default", resource_version=cluster.list("pods", "default")["metadata"]["resourceVersion"])
    seen: list[str] = []
    consumer = threading.Thread(target=lambda: seen.extend(e["object"]["metadata"]["name"] for e in watch))
    consumer.start()
    link.create("pods", make_pod("before"))
    wait_until(lambda: seen == ["before"], "the watch to see the first pod")
    link.cut()
    consumer.join(5)
    assert not consumer.is_alive(), "a cut must end the watches open through the link"
    for call in (lambda: link.get("pods", "before", "default"), lambda: link.list("pods"),
                 lambda: link.create("pods", make_pod("during")), lambda: link.bind("default", "before", "n1"),
                 lambda: link.watch("pods")):  # fmt: skip
        with pytest.raises(ServiceUnavailable):
            call()
    assert link.refused == 5
    cluster.create("pods", make_pod("behind-the-cut"))  # the cluster itself is fine
    link.restore()
    assert {p["metadata"]["name"] for p in link.list("pods", "default")["items"]} == {"before", "behind-the-cut"}
    assert seen == ["before"]


def test_drop_watches_ends_streams_without_cutting(cluster):
    link = ClusterLink(cluster)
    watch = link.watch("pods", "default", resource_version="", timeout_seconds=30)
    done = threading.Event()
    threading.Thread(target=lambda: (list(watch), done.set()), daemon=True).start()
    time.sleep(0.05)
    assert link.drop_watches() == 1
    assert done.wait(5)
    assert not link.is_cut and link.get("nodes", "n1")["metadata"]["name"] == "n1"


def test_replicas_hand_over_when_the_leader_is_cut_off_and_a_restart_follows(cluster):
    options = {"lease_namespace": "default", **FAST_LEASE}
    a = Replica(cluster, "sched-a", **options)
    b = Replica(cluster, "sched-b", **options)
    status, body = a.new_app().server.evaluate("readyz", verbose=True)  # type: ignore[union-attr]
    assert status == 500 and "[-]leader-election failed" in body, body
    a.start()
    wait_until(a.leads, "sched-a to lead")
    b.start()
    assert http_get(b.app.server.url + "/readyz")[0] in (200, 500)  # type: ignore[union-attr]
    wait_until(lambda: b.app.elector.leader() == "sched-a", "sched-b to see sched-a lead")  # type: ignore[union-attr]
    assert http_get(b.app.server.url + "/readyz") == (200, "ok")  # type: ignore[union-attr]
    for i in range(5):
        cluster.create("pods", make_pod(f"p{i}"))
    wait_until(lambda: len(bound(cluster)) == 5, "sched-a to bind the first pods")

    a.link.cut()
    wait_until(a.exited, "sched-a to give up the lease and exit")
    assert a.app.lost_lease
    wait_until(b.leads, "sched-b to take over")
    for i in range(5, 10):
        cluster.create("pods", make_pod(f"p{i}"))
    wait_until(lambda: len(bound(cluster)) == 10, "sched-b to bind the rest")
    assert cluster.get(LEASES, "minisched", "default")["spec"]["holderIdentity"] == "sched-b"

    a.link.restore()
    a.start()  # the supervisor restarts the process: a candidate again
    time.sleep(0.5)
    assert len(a.apps) == 2 and not a.leads() and a.app.elector.leader() == "sched-b"  # type: ignore[union-attr]
    stopped = next(t for t, what in a.timeline() if what == "stopped leading")
    started = next(t for t, what in b.timeline() if what == "started leading")
    assert stopped < started, (a.timeline(), b.timeline())
    assert [w for _, w in a.timeline()].count("started leading") == 1
    a.stop()
    b.stop()
    assert not a.running and not b.running
