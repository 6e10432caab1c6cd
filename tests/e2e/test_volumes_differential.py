"""The volume plugins against kube-scheduler's, on one fresh control plane.

kube-scheduler and minisched run side by side with the same (matched) plugin set under two
scheduler names. For each scenario the same pod is created once for each, with its own copy of the
claims and volumes, so the two never share state; then the verdicts are compared: which nodes were
possible (the chosen node's zone, or kube's exact FailedScheduling text when the pod stays pending).

A WaitForFirstConsumer claim is compared where neither side can bind it (no volume, no provisioner):
binding one needs kube-controller-manager's PV controller, which this plane does not run;
tests/realcluster/test_kind_like_plane.py binds one end to end on the kind-like plane, and
tests/scheduler/test_volume_binding.py covers the rest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from minisched.cluster.real import RealCluster
from minisched.controlplane import ControlPlane, ControlPlaneOptions, fake_node, node_is_ready, wait_for
from minisched.controlplane.observe import PodObserver, matched_scheduler_config
from minisched.objects import make_claim, make_csi_node, make_pod, make_storage_class, make_volume
from minisched.resources import CSI_NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, PODS, STORAGE_CLASSES
from minisched.scheduler.scheduler import Scheduler
from tests.plugins.controlplane import require_binaries

pytestmark = [pytest.mark.realcluster, pytest.mark.slow]

NS = "vols"
ZONE = "topology.kubernetes.io/zone"
SIDES = {"kube": "kube-side", "mini": "mini-side"}
DRIVER = "ebs.csi.aws.com"
SETTLE = 2.5  # seconds
Object = dict[str, Any]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RealCluster]:
    # envtest-style, as test_differential.py: the volume test on kind's plane is in test_kind_like_plane.py
    with ControlPlane(ControlPlaneOptions(), require_binaries()) as cp:
        c = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
        c.create("namespaces", {"metadata": {"name": NS}})
        for zone in "abc":
            for i in range(2):
                c.create("nodes", fake_node(f"{zone}-{i}", labels={ZONE: zone}))
        wait_for(lambda: sum(node_is_ready(n) for n in c.list("nodes")["items"]) == 6, 120, "nodes Ready")
        c.create(CSI_NODES, make_csi_node("c-0", {DRIVER: 0}))
        cp.start_scheduler(matched_scheduler_config(SIDES["kube"]), name="kube-scheduler")
        sched = Scheduler(c, config=matched_scheduler_config(SIDES["mini"]))
        sched.start()
        try:
            yield c
        finally:
            sched.stop()
            c.close()


Setup = Callable[[RealCluster, str], Object]  # (cluster, side) -> make_pod arguments for the pod


def bound_to(pv: Callable[[str], Object], access_modes: tuple[str, ...] = ("ReadWriteOnce",)) -> Setup:
    def setup(c: RealCluster, side: str) -> Object:
        volume = pv(f"pv-{side}")
        c.create(PERSISTENT_VOLUMES, volume)
        c.create(PERSISTENT_VOLUME_CLAIMS, make_claim(f"claim-{side}", namespace=NS, volume_name=f"pv-{side}",
                                                      access_modes=access_modes))
        return {"claims": [f"claim-{side}"]}
    return setup


def claims(*names: str) -> Setup:
    return lambda c, side: {"claims": [f"{n}-{side}" for n in names]}


def made_claim(prefix: str, **kwargs: Any) -> Setup:
    def setup(c: RealCluster, side: str) -> Object:
        c.create(PERSISTENT_VOLUME_CLAIMS, make_claim(f"{prefix}-{side}", namespace=NS, **kwargs))
        return {"claims": [f"{prefix}-{side}"]}
    return setup


def delayed_claim_with_nothing_to_bind(c: RealCluster, side: str) -> Object:
    """A WaitForFirstConsumer claim of a class nothing provisions, and no volume of that class."""
    c.create(STORAGE_CLASSES, make_storage_class(f"local-{side}", provisioner="kubernetes.io/no-provisioner",
                                                 binding_mode="WaitForFirstConsumer"))
    return made_claim("delayed", storage_class=f"local-{side}")(c, side)


def disk_in_use_on_a0(c: RealCluster, side: str) -> Object:
    """A pod already on a-0 holds GCE PD disk-<side>; the new pod wants the same disk and only a-0."""
    disk = [{"name": "d", "gcePersistentDisk": {"pdName": f"disk-{side}"}}]
    c.create(PODS, make_pod(f"holder-{side}", namespace=NS, node_name="a-0", volumes=disk))
    return {"volumes": disk, "node_selector": {"kubernetes.io/hostname": "a-0"}}


def read_write_once_pod_in_use(c: RealCluster, side: str) -> Object:
    """A pod already on a-1 uses a ReadWriteOncePod claim; the new pod wants the same claim."""
    setup = bound_to(lambda n: make_volume(n, access_modes=("ReadWriteOncePod",)), ("ReadWriteOncePod",))(c, side)
    c.create(PODS, make_pod(f"holder-{side}", namespace=NS, node_name="a-1", claims=setup["claims"]))
    return setup


def zone_affinity(zone: str) -> list[Object]:
    return [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]


SCENARIOS: dict[str, tuple[Setup, str | None]] = {
    # name: (setup, the zone the pod must land in; None: it must stay pending)
    "pv-node-affinity": (bound_to(lambda n: make_volume(n, node_affinity=zone_affinity("b"))), "b"),
    "pv-zone-label": (bound_to(lambda n: make_volume(n, labels={ZONE: "c"})), "c"),
    "pv-affinity-nowhere": (bound_to(lambda n: make_volume(n, node_affinity=zone_affinity("z"))), None),
    "missing-claim": (claims("nothing"), None),
    "unbound-immediate": (made_claim("unbound", storage_class=""), None),
    "missing-pv": (made_claim("orphan", volume_name="gone"), None),
    "wait-for-first-consumer-nothing-to-bind": (delayed_claim_with_nothing_to_bind, None),
    "inline-disk-in-use": (disk_in_use_on_a0, None),
    "read-write-once-pod-in-use": (read_write_once_pod_in_use, None),
    "csi-limit-zero-on-the-only-node": (bound_to(lambda n: make_volume(
        n, csi_driver=DRIVER, node_affinity=[{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["c-0"]}]}])), None),
}


def decide(c: RealCluster, obs: PodObserver, pod: Object) -> tuple[str | None, str]:
    key = f"{NS}/{pod['metadata']['name']}"
    c.create(PODS, pod)
    obs.wait_for(lambda o: (r := o.pods.get(key)) is not None and (r.node is not None or r.unschedulable), 60,
                 f"a decision on {key}")
    rec = obs.pods[key]
    if rec.node is None:
        # A scheduler may have tried the pod before its informers saw the claims made just before;
        # their arrival moves the pod and the retry (after a 1 s backoff) says what stays true.
        time.sleep(SETTLE)
        rec = obs.pods[key]
    return rec.node, rec.unschedulable_message


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_minisched_agrees_with_kube_scheduler_on_volumes(cluster: RealCluster, scenario: str) -> None:
    setup, zone = SCENARIOS[scenario]
    outcomes: dict[str, tuple[str | None, str]] = {}
    with PodObserver(cluster, namespace=NS, nodes=cluster.list("nodes")["items"]) as obs:
        pods = {side: make_pod(f"{scenario}-{side}", namespace=NS, scheduler_name=scheduler_name,
                               **setup(cluster, f"{scenario}-{side}"))
                for side, scheduler_name in SIDES.items()}
        time.sleep(SETTLE / 2)  # let both schedulers' informers see the storage objects first
        for side, pod in pods.items():
            outcomes[side] = decide(cluster, obs, pod)
    print(f"\n{scenario}: {json.dumps(outcomes)}")
    kube, mini = outcomes["kube"], outcomes["mini"]
    if zone is None:
        assert kube[0] is None and mini[0] is None, outcomes
        # the same FailedScheduling text, but for the pod's scheduler-specific claim names
        assert kube[1].replace("-kube", "") == mini[1].replace("-mini", ""), outcomes
    else:
        assert kube[0] is not None and kube[0].startswith(f"{zone}-"), outcomes
        assert mini[0] is not None and mini[0].startswith(f"{zone}-"), outcomes
