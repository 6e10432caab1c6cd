"""The bind-fence run (Part II §4.3's 409) where nodes start tainted not-ready, as on kind: kind's
TaintNodesByCondition admission taints a new node until the node lifecycle controller sees its first
heartbeat (a node re-created under a remembered name the same). On the kind-like plane the run timed
out in about half the runs: the pod the tainted n1 rejected sat in backoff on the VirtualClock, and
the holder never reached its bind (without SchedulerPopFromBackoffQ: with it, on by default, the pod
is popped from backoffQ once the taint goes). The embedded cluster here taints every new node and lifts the
taint a moment later, as kind does."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import NotFound
from minisched.exhibits.sharding_sim import paused_before_bind_run
from minisched.objects import CHAPTER_LABEL
from minisched.resources import NODES
from minisched.scheduler.framework.features import DEFAULTS, POP_FROM_BACKOFF_Q
from minisched.workbook import join_node_when_ready

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
CHAPTER = "t-shard-kind"
TAINTED_FOR = 2.0  # kind lifts it after the first heartbeat; the run creates its pod well before


@pytest.fixture
def kind_like() -> Iterator[EmbeddedCluster]:
    """An embedded cluster whose new nodes carry the not-ready taint for their first TAINTED_FOR seconds."""
    cluster = EmbeddedCluster()
    create = cluster.create

    def lift(name: str) -> None:
        with contextlib.suppress(NotFound):  # deleted by the run's clean-up meanwhile
            cluster.patch(NODES, name, {"spec": {"taints": None}})

    def tainting_create(resource: Any, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        if resource is NODES:
            obj = {**obj, "spec": {**(obj.get("spec") or {}), "taints": [NOT_READY]}}
            threading.Timer(TAINTED_FOR, lift, [obj["metadata"]["name"]]).start()
        return create(resource, obj, namespace)

    cluster.create = tainting_create  # type: ignore[method-assign]
    yield cluster
    cluster.close()


def test_created_plainly_the_tainted_node_stalls_the_run_without_popping_from_backoff(
        kind_like: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DEFAULTS, POP_FROM_BACKOFF_Q, False)
    with pytest.raises(TimeoutError, match="paused at its bind"):
        paused_before_bind_run(kind_like, VirtualClock(), group="plain", node_labels={CHAPTER_LABEL: CHAPTER},
                               timeout=5)


def test_created_plainly_the_tainted_node_delays_the_run_only_until_the_taint_goes(
        kind_like: EmbeddedCluster) -> None:
    """With SchedulerPopFromBackoffQ (kube's default since 1.33) the taint's removal moves the
    rejected pod to backoffQ and, activeQ being empty, it is popped at once: no virtual time needed."""
    run = paused_before_bind_run(kind_like, VirtualClock(), group="plain", node_labels={CHAPTER_LABEL: CHAPTER},
                                 timeout=30)
    assert "Precondition failed" in run.holder_answer
    assert run.p_binds == 1 and run.overcommitted == {}


def test_joined_when_ready_the_late_binding_gets_its_409(kind_like: EmbeddedCluster) -> None:
    run = paused_before_bind_run(kind_like, VirtualClock(), group="joined", node_labels={CHAPTER_LABEL: CHAPTER},
                                 add_node=lambda node: join_node_when_ready(kind_like, node, CHAPTER), timeout=30)
    assert "Precondition failed" in run.holder_answer
    assert run.p_binds == 1 and run.p_node == "joined-n2" and run.overcommitted == {}
