"""PodAtPermit and WaitingPodsMap against kube's waiting_pods_map.go, without a scheduler."""

from __future__ import annotations

import pytest

from minisched.objects import make_pod
from minisched.scheduler.framework.interface import WaitingPod
from minisched.scheduler.framework.waiting_pods_map import PodAtPermit, WaitingPodsMap, go_duration, uid_of


def held(**timeouts: float) -> PodAtPermit:
    pod = make_pod("p")
    pod["metadata"]["uid"] = "uid-p"
    return PodAtPermit(pod, timeouts, now=100.0)


def test_the_last_pending_plugin_to_allow_releases_the_pod() -> None:
    waiting = held(A=5, B=5)
    waiting.allow("A")
    waiting.allow("Other")  # a plugin that did not ask for the wait changes nothing
    assert not waiting.done.is_set() and waiting.pending_plugins() == ["B"]
    waiting.allow("B")
    assert waiting.done.is_set() and waiting.status.is_success


def test_the_first_verdict_stands() -> None:
    waiting = held(A=5)
    waiting.reject("A", "no")
    waiting.allow("A")
    assert waiting.status.is_rejected and waiting.status.plugin == "A" and waiting.status.message() == "no"
    allowed = held(A=5)
    allowed.allow("A")
    allowed.reject("A", "too late")
    assert allowed.status.is_success


def test_the_earliest_timeout_of_a_pending_plugin_rejects_in_its_name() -> None:
    waiting = held(Short=10, Long=30)
    waiting.expire(109.9)
    assert not waiting.done.is_set()
    waiting.expire(131)  # both passed: the one that passed first names the rejection (its timer fired first)
    assert waiting.status.plugin == "Short"
    assert waiting.status.message() == "rejected due to timeout after waiting 10s at plugin Short"
    allowed_short = held(Short=10, Long=30)
    allowed_short.allow("Short")  # kube stops the plugin's timer when it allows
    allowed_short.expire(120)
    assert not allowed_short.done.is_set()
    allowed_short.expire(130)
    assert allowed_short.status.plugin == "Long"


def test_a_reject_stops_the_timers_and_leaves_the_pending_plugins() -> None:
    waiting = held(A=10)
    waiting.reject("", "removed")
    waiting.expire(200)
    assert waiting.status.plugin == "" and waiting.status.message() == "removed"
    assert waiting.pending_plugins() == ["A"]  # as kube's GetPendingPlugins after Reject


def test_the_map_is_keyed_by_uid_and_iterates_waiting_pods() -> None:
    pods = WaitingPodsMap()
    waiting = held(A=5)
    pods.add(waiting)
    assert pods.get("uid-p") is waiting and pods.get("default/p") is None
    seen: list[WaitingPod] = []
    pods.iterate(seen.append)
    assert seen == [waiting]
    pods.remove("uid-p")
    assert len(pods) == 0 and pods.get("uid-p") is None
    assert uid_of(make_pod("no-uid")) == "default/no-uid"  # a pod made by hand waits under its key


@pytest.mark.parametrize(("seconds", "text"), [(30, "30s"), (60, "1m0s"), (1.5, "1.5s"), (0.5, "500ms"),
                                               (900, "15m0s"), (3600, "1h0m0s"), (0, "0s"), (90.25, "1m30.25s")])
def test_timeouts_are_printed_as_go_prints_a_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
