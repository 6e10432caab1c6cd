"""Hostile but valid pod specs against the embedded cluster (property-based, hypothesis).

Pods the API server accepts but that stress the scheduler: thousands of tolerations, annotations
near the 256 KiB limit, quantities far beyond any node, unknown extended resources, hundreds of
node-affinity terms (required ones that match nothing, preferred ones that do not matter).
Invariants, for every generated pod:
- the scheduling loop never crashes (no error logged, no attempt counted as a scheduler error);
- a pod that cannot fit gets a FailedScheduling event naming the problem; one that can is bound;
- a good pod sent right after it is bound: hostile pods never block the queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import Invalid
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.events import events_for
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import wait_for_nodes

AFFINITY_REASON = "didn't match Pod's node affinity/selector"


@dataclass
class Hostile:
    """One pod spec and the phrases a FailedScheduling message may name (none: it must bind)."""

    spec: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)
    blockers: list[str] = field(default_factory=list)


def _tolerations(n: int) -> Hostile:
    tol = [{"key": f"example.com/t{i}", "operator": "Exists", "effect": "NoSchedule"} for i in range(n)]
    return Hostile(spec={"tolerations": tol})


def _annotations(kib: int, keys: int) -> Hostile:
    size = kib * 1024 // keys
    return Hostile(annotations={f"example.com/a{i}": "x" * size for i in range(keys)})


def _extreme(resource: str, amount: str) -> Hostile:
    return Hostile(requests={resource: amount}, blockers=[f"Insufficient {resource}"])


def _extended(name: str, amount: int) -> Hostile:
    resource = f"example.com/{name}"
    return Hostile(requests={resource: str(amount)}, blockers=[f"Insufficient {resource}"])


def _required_terms(n: int) -> Hostile:
    terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [f"nowhere-{i}"]}]}
             for i in range(n)]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    return Hostile(spec={"affinity": affinity}, blockers=[AFFINITY_REASON])


def _preferred_terms(n: int) -> Hostile:
    prefs = [{"weight": 1 + i % 100, "preference": {"matchExpressions": [
        {"key": "zone", "operator": "In", "values": [f"z{i}"]}]}} for i in range(n)]
    return Hostile(spec={"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": prefs}}})


names = st.from_regex(r"[a-z][a-z0-9]{0,12}", fullmatch=True)
hostiles = st.one_of(
    st.integers(100, 3000).map(_tolerations),
    st.tuples(st.integers(1, 240), st.integers(1, 16)).map(lambda t: _annotations(*t)),
    st.tuples(st.just("cpu"), st.sampled_from(["100k", "9999999", "1E", "123456789012"])).map(lambda t: _extreme(*t)),
    st.tuples(st.just("memory"), st.sampled_from(["1Ei", "7Ei", "999Pi", "1e18"])).map(lambda t: _extreme(*t)),
    st.tuples(names, st.integers(1, 10**12)).map(lambda t: _extended(*t)),
    st.integers(1, 400).map(_required_terms),
    st.integers(1, 400).map(_preferred_terms),
)


def hostile_pod(name: str, hostile: Hostile, namespace: str = "default") -> dict[str, Any]:
    """A small pod (10m, 16Mi) made hostile by `hostile`: its spec, annotations and requests."""
    pod = make_pod(name, namespace=namespace, cpu="10m", memory="16Mi", annotations=hostile.annotations or None)
    pod["spec"].update(hostile.spec)
    resources = pod["spec"]["containers"][0]["resources"]
    resources["requests"].update(hostile.requests)
    # kube-apiserver refuses an extended resource requested without an equal limit (422): give it one
    extended = {k: v for k, v in hostile.requests.items() if "/" in k}
    if extended:
        resources.setdefault("limits", {}).update(extended)
    return pod


def _combine(parts: list[Hostile]) -> Hostile:
    out = Hostile()
    for h in parts:
        spec = dict(h.spec)
        if "affinity" in spec and "affinity" in out.spec:  # merge the two node affinities
            merged = dict(out.spec["affinity"]["nodeAffinity"])
            merged.update(spec.pop("affinity")["nodeAffinity"])
            out.spec["affinity"] = {"nodeAffinity": merged}
        out.spec.update(spec)
        out.annotations.update(h.annotations)
        out.requests.update(h.requests)
        out.blockers += h.blockers
    return out


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def scheduled() -> Iterator[tuple[EmbeddedCluster, Scheduler, _Errors]]:
    cluster = EmbeddedCluster()
    for i in range(3):
        cluster.create(NODES, make_node(f"n{i}", cpu="8", memory="32Gi", pods="1000", labels={"zone": f"z{i}"}))
    errors = _Errors()
    logging.getLogger("minisched").addHandler(errors)
    sched = Scheduler(cluster, bind_workers=4)
    sched.start()
    wait_for_nodes(sched, 3)
    try:
        yield cluster, sched, errors
    finally:
        sched.stop()
        logging.getLogger("minisched").removeHandler(errors)
        cluster.close()


_counter = iter(range(10**9))


def _wait(what: str, cond: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(parts=st.lists(hostiles, min_size=1, max_size=3))
def test_hostile_specs_get_a_reason_and_good_pods_keep_binding(
    scheduled: tuple[EmbeddedCluster, Scheduler, _Errors], parts: list[Hostile]
) -> None:
    cluster, sched, errors = scheduled
    hostile = _combine(parts)
    n = next(_counter)
    try:
        created = cluster.create(PODS, hostile_pod(f"hostile-{n}", hostile))
    except Invalid as err:  # the API server refuses it (e.g. annotations over 256 KiB): not our case
        assert "annotations" in str(err) or "Too long" in str(err), err
        return
    good = cluster.create(PODS, make_pod(f"good-{n}", cpu="10m", memory="16Mi"))
    _wait("the good pod to be bound", lambda: cluster.get(PODS, good["metadata"]["name"])["spec"].get("nodeName"))
    if hostile.blockers:
        events = _wait("FailedScheduling", lambda: events_for(cluster, created, "FailedScheduling"))
        message = events[-1]["message"]
        assert any(b in message for b in hostile.blockers), (message, hostile.blockers)
        cluster.delete(PODS, created["metadata"]["name"], grace_period_seconds=0)
    else:
        _wait("the hostile but schedulable pod to be bound",
              lambda: cluster.get(PODS, created["metadata"]["name"])["spec"].get("nodeName"))
    assert not errors.records, [r.getMessage() for r in errors.records]
    assert sched.stats.errors == 0
