"""§2.5: drift verdicts by (version, hash, timestamp) and healing with bounded retries."""

from __future__ import annotations

import time
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster import Cluster
from minisched.cluster.embedded import EmbeddedCluster
from minisched.controllers.controller import Controller
from minisched.controllers.drift import (
    DriftHealer,
    DriftKind,
    Observation,
    RetryPolicy,
    content_hash,
    detect_drift,
)
from minisched.errors import Conflict
from minisched.informer import SharedInformerFactory
from minisched.resources import CONFIG_MAPS

Object = dict[str, Any]


def config(data: dict[str, str], name: str = "app", labels: dict[str, str] | None = None) -> Object:
    meta: Object = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def test_hash_ignores_key_order_and_unmanaged_fields() -> None:
    a = config({"x": "1", "y": "2"}, labels={"team": "a"})
    b = config({"y": "2", "x": "1"}, labels={"team": "b"})
    assert content_hash(a, ["data"]) == content_hash(b, ["data"])
    assert content_hash(a, ["data", "metadata.labels"]) != content_hash(b, ["data", "metadata.labels"])


def test_verdict_order() -> None:
    desired = config({"x": "1"})
    live = dict(config({"x": "1"}), metadata={"name": "app", "namespace": "default", "resourceVersion": "7"})
    drifted = dict(live, data={"x": "2"})

    def verdict(obj: Object | None, known: str | None = "7", observed_at: float = 100.0) -> DriftKind:
        obs = Observation(obj, observed_at)
        return detect_drift(
            "default/app", desired, obs, fields=["data"], known_version=known, now=100.0, max_age=30
        ).kind

    assert verdict(live) is DriftKind.IN_SYNC
    assert verdict(live, known="6") is DriftKind.VERSION_CHANGED  # someone wrote, content is ours
    assert verdict(drifted) is DriftKind.CONTENT_DRIFT
    assert verdict(drifted, known="6") is DriftKind.CONTENT_DRIFT  # content beats version
    assert verdict(None) is DriftKind.MISSING
    assert verdict(drifted, observed_at=60.0) is DriftKind.STALE_OBSERVATION  # too old to judge


@pytest.fixture
def setup(embedded_cluster: Cluster) -> tuple[Cluster, DriftHealer, VirtualClock]:
    clock = VirtualClock()
    embedded_cluster.create(CONFIG_MAPS, config({"mode": "safe"}))
    healer = DriftHealer(embedded_cluster, CONFIG_MAPS, [config({"mode": "safe"})], fields=["data"], clock=clock,
                         sleep=clock.advance)  # fmt: skip
    return embedded_cluster, healer, clock


def test_heals_content_drift_and_keeps_unmanaged_fields(
    setup: tuple[Cluster, DriftHealer, VirtualClock],
) -> None:
    cluster, healer, _ = setup
    assert healer.heal("default/app").action == "none"
    cluster.patch(CONFIG_MAPS, "app", {"data": {"mode": "unsafe", "extra": "1"}, "metadata": {"labels": {"t": "x"}}},
                  "default")  # fmt: skip
    result = healer.heal("default/app")
    assert (result.detected, result.action, result.attempts, result.ok) == (
        DriftKind.CONTENT_DRIFT,
        "re-applied",
        1,
        True,
    )
    live = cluster.get(CONFIG_MAPS, "app", "default")
    assert live["data"] == {"mode": "safe"} and live["metadata"]["labels"] == {"t": "x"}
    assert healer.heal("default/app").action == "none"
    cluster.patch(CONFIG_MAPS, "app", {"metadata": {"labels": {"t": "y"}}}, "default")  # not ours
    assert healer.heal("default/app").action == "recorded"


def test_recreates_a_deleted_object(setup: tuple[Cluster, DriftHealer, VirtualClock]) -> None:
    cluster, healer, _ = setup
    cluster.delete(CONFIG_MAPS, "app", "default")
    result = healer.heal("default/app")
    assert (result.detected, result.action) == (DriftKind.MISSING, "recreated")
    assert cluster.get(CONFIG_MAPS, "app", "default")["data"] == {"mode": "safe"}


def test_stale_observation_is_re_read_before_acting(setup: tuple[Cluster, DriftHealer, VirtualClock]) -> None:
    cluster, healer, clock = setup
    old = healer.observe("default/app")
    cluster.patch(CONFIG_MAPS, "app", {"data": {"mode": "unsafe"}}, "default")
    clock.advance(31)
    result = healer.heal("default/app", old)  # the old observation still says "safe"
    assert result.detected is DriftKind.STALE_OBSERVATION and result.ok
    assert cluster.get(CONFIG_MAPS, "app", "default")["data"] == {"mode": "safe"}  # the re-read saw the drift


class ConflictingUpdates:
    """A cluster whose next `failures` updates fail with 409, as if another writer got in first."""

    def __init__(self, inner: Cluster, failures: int) -> None:
        self.inner, self.failures, self.updates = inner, failures, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def update(self, resource: Any, obj: Object, **kw: Any) -> Object:
        self.updates += 1
        if self.failures > 0:
            self.failures -= 1
            raise Conflict("the object has been modified; please apply your changes to the latest version")
        return self.inner.update(resource, obj, **kw)


@pytest.mark.parametrize(("failures", "ok", "attempts"), [(2, True, 3), (5, False, 3)])
def test_conflicts_are_retried_a_bounded_number_of_times(
    embedded_cluster: Cluster, failures: int, ok: bool, attempts: int
) -> None:
    clock = VirtualClock()
    start = clock.now()
    embedded_cluster.create(CONFIG_MAPS, config({"mode": "unsafe"}))
    flaky = ConflictingUpdates(embedded_cluster, failures)
    healer = DriftHealer(flaky, CONFIG_MAPS, [config({"mode": "safe"})], fields=["data"], clock=clock,  # type: ignore[arg-type]
                         sleep=clock.advance, policy={DriftKind.CONTENT_DRIFT: RetryPolicy(3, 0.5, 10)})  # fmt: skip
    result = healer.heal("default/app")
    assert (result.ok, result.attempts, flaky.updates) == (ok, attempts, attempts)
    assert result.action == ("re-applied" if ok else "gave up")
    assert clock.now() - start == pytest.approx(0.5 + 1.0)  # exponential waits between the 3 tries
    if not ok:
        assert "Conflict" in result.detail


def test_a_fight_with_another_writer_is_reported_not_continued(
    setup: tuple[Cluster, DriftHealer, VirtualClock],
) -> None:
    cluster, healer, _ = setup
    actions = []
    for _ in range(5):
        cluster.patch(CONFIG_MAPS, "app", {"data": {"mode": "theirs"}}, "default")
        actions.append(healer.heal("default/app").action)
    assert actions == ["re-applied"] * 3 + ["contested"] * 2
    assert cluster.get(CONFIG_MAPS, "app", "default")["data"] == {"mode": "theirs"}


def test_unknown_key_and_empty_fields_are_named(setup: tuple[Cluster, DriftHealer, VirtualClock]) -> None:
    cluster, healer, _ = setup
    with pytest.raises(KeyError, match="default/other"):
        healer.check("default/other")
    with pytest.raises(ValueError, match="at least one managed field"):
        DriftHealer(cluster, CONFIG_MAPS, [], fields=[])


def test_runs_as_a_controller_on_watch_events() -> None:
    cluster = EmbeddedCluster()
    cluster.create(CONFIG_MAPS, config({"mode": "safe"}))
    healer = DriftHealer(cluster, CONFIG_MAPS, [config({"mode": "safe"})], fields=["data"])
    factory = SharedInformerFactory(cluster)
    controller = Controller("drift", healer, factory)
    controller.start()
    try:
        cluster.patch(CONFIG_MAPS, "app", {"data": {"mode": "unsafe"}}, "default")
        deadline = time.monotonic() + 5
        while (
            cluster.get(CONFIG_MAPS, "app", "default")["data"] != {"mode": "safe"}
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
        assert cluster.get(CONFIG_MAPS, "app", "default")["data"] == {"mode": "safe"}
        assert any(r.action == "re-applied" for r in healer.history("default/app"))
    finally:
        controller.stop()
        factory.shutdown()
        cluster.close()
