"""Property: whatever the server goes through (creates, updates, deletes, dropped watches, forced
410s, failing requests), once it is quiet the informer's cache and the handler's view of it equal
the server's state (key -> resourceVersion), and the handler was never told anything contradictory.
"""

from __future__ import annotations

import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import AlreadyExists, ApiError, Expired, NotFound, ServiceUnavailable
from minisched.informer import ExponentialBackoff, ListWatch, SharedIndexInformer
from minisched.meta import key_of, resource_version_of
from minisched.objects import make_pod
from minisched.resources import PODS
from tests.informer.recorder import Recorder

NAMES = ["p0", "p1", "p2", "p3", "p4"]

# Half the steps change pods, half disturb the informer; the disturbances that end in a 410
# (a natural one after compaction, and an injected one) are listed twice to come up more often.
DISTURBANCES = [
    "drop", "expire", "expire_and_drop", "drop_change_expire", "drop_change_expire", "inject_410", "inject_410",
    "fail_watch", "pause",
]
operations = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["create", "update", "delete"]), st.sampled_from(NAMES)),
        st.tuples(st.sampled_from(DISTURBANCES), st.just("")),
    ),
    min_size=1,
    max_size=30,
)


def bump(cluster: EmbeddedCluster, name: str, counter: list[int]) -> None:
    counter[0] += 1
    cluster.patch(PODS, name, {"metadata": {"labels": {"n": str(counter[0])}}}, "default")


def apply(cluster: EmbeddedCluster, op: str, name: str, counter: list[int]) -> None:
    try:
        if op in ("create", "update", "delete"):
            time.sleep(0.0005)  # give the informer's threads a turn, so changes also arrive live
        if op == "create":
            cluster.create(PODS, make_pod(name))
        elif op == "update":
            bump(cluster, name, counter)
        elif op == "delete":
            cluster.delete(PODS, name, "default")
        elif op == "drop":
            cluster.faults.drop_watches()
        elif op == "expire":
            cluster.faults.force_expiry()
        elif op == "expire_and_drop":
            cluster.faults.force_expiry()
            cluster.faults.drop_watches()
        elif op == "drop_change_expire":
            # The watch delivers a change, then ends; before the informer re-watches, another change
            # happens and the history is compacted past its version: the re-watch answers 410.
            pods = [p["metadata"]["name"] for p in cluster.list(PODS)["items"]]
            if pods:
                bump(cluster, pods[0], counter)
                time.sleep(0.005)
            cluster.faults.drop_watches()
            if pods:
                bump(cluster, pods[0], counter)
            cluster.faults.force_expiry()
        elif op == "inject_410":  # the server answers the next watch with 410 whatever its version
            cluster.faults.fail_next(1, Expired("too old resource version (injected)"), verbs={"watch"})
            cluster.faults.drop_watches()
        elif op == "fail_watch":  # the next re-watch and relist fail (503)
            cluster.faults.fail_next(2, verbs={"watch", "list"})
            cluster.faults.drop_watches()
        elif op == "pause":
            time.sleep(0.01)  # let the informer catch up mid-sequence
    except (AlreadyExists, NotFound):
        pass
    except ServiceUnavailable:
        pass  # our own request used up a failure injected for the informer: skip this step


def server_state(cluster: EmbeddedCluster) -> dict[str, str]:
    return {key_of(o): resource_version_of(o) for o in cluster.list(PODS)["items"]}


def converged(informer: SharedIndexInformer, rec: Recorder, cluster: EmbeddedCluster, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            want = server_state(cluster)
        except ApiError:  # an injected failure not used up by the informer
            time.sleep(0.005)
            continue
        cache = {key_of(o): resource_version_of(o) for o in informer.store.list()}
        if cache == want and rec.snapshot() == want:
            return True
        time.sleep(0.005)
    return False


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, initial=st.sets(st.sampled_from(NAMES)))
def test_informer_converges_to_the_server_state(ops: list[tuple[str, str]], initial: set[str]) -> None:
    cluster = EmbeddedCluster(history_window=8)  # small, so that falling behind also means 410
    counter = [0]
    for name in sorted(initial):
        cluster.create(PODS, make_pod(name))
    informer = SharedIndexInformer(
        ListWatch.for_resource(cluster, PODS), backoff=ExponentialBackoff(initial=0.002, cap=0.01, jitter=0)
    )
    rec = Recorder()
    informer.add_event_handler(rec)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        for op, name in ops:
            apply(cluster, op, name, counter)
        cluster.faults.clear()
        ok = converged(informer, rec, cluster)
        detail: dict[str, Any] = {
            "server": server_state(cluster),
            "cache": {key_of(o): resource_version_of(o) for o in informer.store.list()},
            "handler": rec.snapshot(),
        }
        assert ok, f"the informer did not converge: {detail}"
        assert rec.violations == [], rec.violations
    finally:
        informer.stop()
        cluster.close()
