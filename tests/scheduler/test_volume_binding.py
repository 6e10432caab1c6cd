"""Delayed volume binding (WaitForFirstConsumer), kube's way: the plugin's Filter and its assume
cache (Reserve, Unreserve) on given objects, then the whole path on the embedded cluster with the
PersistentVolumeController stand-in (and its fake provisioner) doing what kube-controller-manager does."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.cluster.embedded.server import EmbeddedCluster
from minisched.cluster.embedded.volumes import FAKE_PROVISIONER, FakeProvisioner, PersistentVolumeController
from minisched.objects import make_claim, make_node, make_pod, make_storage_class, make_volume
from minisched.resources import NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, PODS, STORAGE_CLASSES
from minisched.scheduler.events import events_for
from minisched.scheduler.framework.cluster_event import hint_map
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import in_tree_registry, volume_binding
from minisched.scheduler.plugins.storage import StaticStorage
from minisched.scheduler.queue import ClusterEvent
from minisched.scheduler.scheduler import Scheduler
from minisched.volumes import SELECTED_NODE
from tests.scheduler.plugins.randomcluster import table_of
from tests.scheduler.runtime.helpers import wait_for_nodes, wait_until

Object = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
LOCAL = make_storage_class("local", provisioner="kubernetes.io/no-provisioner", binding_mode="WaitForFirstConsumer")
NODES_AB = [make_node("node-a", labels={HOSTNAME: "node-a", "zone": "z1"}),
            make_node("node-b", labels={HOSTNAME: "node-b", "zone": "z2"})]


def on(node: str) -> list[Object]:
    return [{"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]


def local_volume(name: str, node: str, storage: str = "1Gi", **kwargs: Any) -> Object:
    pv = make_volume(name, storage_class="local", node_affinity=on(node), storage=storage, **kwargs)
    pv["metadata"]["resourceVersion"] = "1"
    pv["status"] = {"phase": "Available"}
    return pv


def claim(name: str, storage: str = "1Gi", **kwargs: Any) -> Object:
    pvc = make_claim(name, storage_class=kwargs.pop("storage_class", "local"), storage=storage, **kwargs)
    pvc["metadata"].update(uid=f"uid-{name}", resourceVersion="1")
    return pvc


def filtered(plugin: Any, pod: Object, nodes: list[Object] = NODES_AB) -> tuple[CycleState, list[tuple[str, ...]]]:
    state, info, table = CycleState(), PodInfo.from_pod(pod), table_of(nodes)
    _, status = plugin.pre_filter(state, info, table)
    assert status.is_success, status
    result = plugin.filter(state, info, table)
    return state, [result.reasons_at(i) for i in range(len(table))]


# --- Filter ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("case", "storage", "claims", "reasons"), [
    ("the volume's node only", [local_volume("pv-b", "node-b")], [claim("c")], [(volume_binding.BIND_CONFLICT,), ()]),
    ("too small a volume does not fit", [local_volume("pv-b", "node-b", "1Gi")], [claim("c", "2Gi")],
     [(volume_binding.BIND_CONFLICT,), (volume_binding.BIND_CONFLICT,)]),
    ("another class's volume does not fit", [{**local_volume("pv-b", "node-b"),
                                              "spec": {**local_volume("pv-b", "node-b")["spec"],
                                                       "storageClassName": "other"}}],
     [claim("c")], [(volume_binding.BIND_CONFLICT,), (volume_binding.BIND_CONFLICT,)]),
    ("access modes the volume lacks", [local_volume("pv-b", "node-b")],
     [claim("c", access_modes=("ReadWriteMany",))], [(volume_binding.BIND_CONFLICT,), (volume_binding.BIND_CONFLICT,)]),
    ("a volume bound to another claim", [{**local_volume("pv-b", "node-b"),
                                          "spec": {**local_volume("pv-b", "node-b")["spec"],
                                                   "claimRef": {"namespace": "default", "name": "x", "uid": "u"}}}],
     [claim("c")], [(volume_binding.BIND_CONFLICT,), (volume_binding.BIND_CONFLICT,)]),
    ("a volume not yet Available", [{**local_volume("pv-b", "node-b"), "status": {"phase": "Pending"}}],
     [claim("c")], [(volume_binding.BIND_CONFLICT,), (volume_binding.BIND_CONFLICT,)]),
    ("two claims cannot share one volume", [local_volume("pv-b", "node-b")], [claim("c"), claim("d")],
     [(volume_binding.BIND_CONFLICT,), (volume_binding.BIND_CONFLICT,)]),
    ("two claims, two volumes on one node", [local_volume("pv-b", "node-b"), local_volume("pv-b2", "node-b")],
     [claim("c"), claim("d")], [(volume_binding.BIND_CONFLICT,), ()]),
    ("a claim whose provisioning started on node-a", [],
     [{**claim("c", storage_class="wait"), "metadata": {**claim("c")["metadata"],
                                                         "annotations": {SELECTED_NODE: "node-a"}}}],
     [(), (volume_binding.BIND_CONFLICT,)]),
    ("a provisioner restricted to zone z2", [], [claim("c", storage_class="zonal")], [(volume_binding.BIND_CONFLICT,), ()]),
])
def test_filter_finds_a_volume_or_a_provisioner_per_node(case: str, storage: list[Object], claims: list[Object],
                                                         reasons: list[tuple[str, ...]]) -> None:
    zonal = make_storage_class("zonal", binding_mode="WaitForFirstConsumer")
    zonal["allowedTopologies"] = [{"matchLabelExpressions": [{"key": "zone", "values": ["z2"]}]}]
    wait = make_storage_class("wait", binding_mode="WaitForFirstConsumer")
    plugin = volume_binding.new(None, None, StaticStorage([LOCAL, zonal, wait, *storage, *claims]))
    pod = make_pod("p", claims=[c["metadata"]["name"] for c in claims])
    assert filtered(plugin, pod)[1] == reasons


def test_filter_picks_the_smallest_volume_that_fits() -> None:
    storage = [local_volume("big", "node-b", "10Gi"), local_volume("small", "node-b", "2Gi"),
               local_volume("tiny", "node-b", "1Gi"), claim("c", "2Gi")]
    plugin = volume_binding.new(None, None, StaticStorage([LOCAL, *storage]))
    state, _ = filtered(plugin, make_pod("p", claims=["c"]))
    found = state.read("PreFilterVolumeBinding").by_node["node-b"]
    assert [pv["metadata"]["name"] for _, pv in found.static_bindings] == ["small"]


# --- Reserve and Unreserve: the assume cache ------------------------------------------------------


def test_reserve_assumes_the_volume_for_the_next_pod_and_unreserve_gives_it_back() -> None:
    plugin = volume_binding.new(None, None, StaticStorage([LOCAL, local_volume("pv-b", "node-b"),
                                                           claim("first"), claim("second")]))
    first, second = make_pod("p1", claims=["first"]), make_pod("p2", claims=["second"])
    state, reasons = filtered(plugin, first)
    assert reasons == [(volume_binding.BIND_CONFLICT,), ()]
    assert plugin.reserve(state, PodInfo.from_pod(first), "node-b").is_success
    # the volume's claimRef is assumed (not written): the second pod finds nothing on node-b now
    assert filtered(plugin, second)[1] == [(volume_binding.BIND_CONFLICT,), (volume_binding.BIND_CONFLICT,)]
    assert plugin.cache.volume("pv-b")["spec"]["claimRef"]["uid"] == "uid-first"
    plugin.unreserve(state, PodInfo.from_pod(first), "node-b")  # a later plugin failed the first pod
    assert filtered(plugin, second)[1] == [(volume_binding.BIND_CONFLICT,), ()]
    assert "claimRef" not in plugin.cache.volume("pv-b")["spec"]


def test_a_newer_object_from_the_informer_replaces_an_assumed_one() -> None:
    storage = StaticStorage([LOCAL, local_volume("pv-b", "node-b"), claim("first")])
    plugin = volume_binding.new(None, None, storage)
    pod = make_pod("p1", claims=["first"])
    state, _ = filtered(plugin, pod)
    plugin.reserve(state, PodInfo.from_pod(pod), "node-b")
    newer = local_volume("pv-b", "node-b")
    newer["metadata"]["resourceVersion"] = "2"
    storage.add(newer)  # someone else's write: it wins over our assumption
    assert "claimRef" not in plugin.cache.volume("pv-b")["spec"]


def test_the_plugin_registers_kubes_storage_events() -> None:
    registrations = volume_binding.new(None, None, StaticStorage()).events_to_register()
    hint_map([("VolumeBinding", registrations)])  # what the framework builds: refuses a bare ClusterEvent
    events = {r.event for r in registrations}
    for kind, action in (("PersistentVolume", "Add"), ("PersistentVolume", "Update"),
                         ("PersistentVolumeClaim", "Add"), ("PersistentVolumeClaim", "Update"),
                         ("StorageClass", "Add"), ("CSINode", "Add"), ("CSINode", "Update"), ("Node", "Add")):
        assert ClusterEvent(kind, action) in events
    assert ClusterEvent("PersistentVolume", "Delete") not in events


@pytest.mark.parametrize(("args", "problem"), [
    ({"bindTimeoutSeconds": -1}, "should not be a negative value"),
    ({"bindTimeoutSeconds": "10"}, "should not be a negative value"),
    ({"bindTimeout": 10}, "unknown field"),
])
def test_bad_args_are_refused_naming_the_problem(args: Object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        volume_binding.new(args, None, StaticStorage())


# --- on the embedded cluster, with the PV controller stand-in -------------------------------------


class Env:
    """Two nodes, the `local` class (static volumes only) and a `fake` class (the fake provisioner),
    a PV controller and a started scheduler whose VolumeBinding waits `timeout` seconds at most."""

    def __init__(self, *, timeout: int = 30, provisioner: bool = True) -> None:
        self.cluster = c = EmbeddedCluster()
        for node in NODES_AB:
            c.create(NODES, node)
        c.create(STORAGE_CLASSES, LOCAL)
        c.create(STORAGE_CLASSES, make_storage_class("fake", provisioner=FAKE_PROVISIONER,
                                                     binding_mode="WaitForFirstConsumer"))
        self.controller = PersistentVolumeController(
            c, provisioners=[FakeProvisioner()] if provisioner else []).start()
        config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                  "profiles": [{"schedulerName": "minisched", "pluginConfig": [
                      {"name": "VolumeBinding", "args": {"bindTimeoutSeconds": timeout}}]}]}
        self.sched = Scheduler(c, config=config, bind_workers=2)
        self.sched.start()
        wait_for_nodes(self.sched, 2)

    def close(self) -> None:
        self.sched.stop()
        self.controller.stop()

    def node_of(self, pod: str) -> str:
        return str(self.cluster.get(PODS, pod, "default")["spec"].get("nodeName") or "")

    def claim(self, name: str) -> Object:
        return self.cluster.get(PERSISTENT_VOLUME_CLAIMS, name, "default")

    def said(self, pod: str, message: str) -> bool:
        self.sched.recorder.flush()
        obj = self.cluster.get(PODS, pod, "default")
        return any(message in e["message"] for e in events_for(self.cluster, obj, "FailedScheduling"))


@pytest.fixture
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    e = Env(**getattr(request, "param", {}))
    yield e
    e.close()


def test_a_pod_goes_where_its_local_volume_is_and_the_claim_binds(env: Env) -> None:
    c = env.cluster
    c.create(PERSISTENT_VOLUMES, make_volume("pv-b", storage_class="local", node_affinity=on("node-b")))
    c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("data", storage_class="local"))
    c.create(PODS, make_pod("db", claims=["data"]))
    wait_until(lambda: env.node_of("db"), what="db bound")
    assert env.node_of("db") == "node-b"
    pvc, pv = env.claim("data"), c.get(PERSISTENT_VOLUMES, "pv-b")
    assert pvc["spec"]["volumeName"] == "pv-b" and pvc["status"]["phase"] == "Bound"
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"] and pv["status"]["phase"] == "Bound"


def test_two_pods_one_volume_one_binds_and_the_other_waits_with_kubes_reason(env: Env) -> None:
    c = env.cluster
    c.create(PERSISTENT_VOLUMES, make_volume("pv-b", storage_class="local", node_affinity=on("node-b")))
    for name in ("first", "second"):
        c.create(PERSISTENT_VOLUME_CLAIMS, make_claim(f"data-{name}", storage_class="local"))
    for name in ("first", "second"):
        c.create(PODS, make_pod(name, claims=[f"data-{name}"]))
    wait_until(lambda: env.node_of("first") or env.node_of("second"), what="one pod bound")
    placed, waiting = ("first", "second") if env.node_of("first") else ("second", "first")
    wait_until(lambda: env.said(waiting, "0/2 nodes are available: 2 node(s) didn't find available persistent "
                                         "volumes to bind."), what="kube's reason")
    assert env.node_of(placed) == "node-b" and not env.node_of(waiting)
    assert env.claim(f"data-{placed}")["status"]["phase"] == "Bound"
    assert env.claim(f"data-{waiting}")["status"]["phase"] == "Pending"
    # a second volume on node-a arrives: the PV's Add event moves the waiting pod, which binds to it
    c.create(PERSISTENT_VOLUMES, make_volume("pv-a", storage_class="local", node_affinity=on("node-a")))
    wait_until(lambda: env.node_of(waiting) == "node-a", what="the waiting pod placed with the new volume")


def test_the_fake_provisioner_makes_a_volume_on_the_chosen_node(env: Env) -> None:
    c = env.cluster
    c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("scratch", storage_class="fake", storage="3Gi"))
    c.create(PODS, make_pod("job", claims=["scratch"], node_selector={"zone": "z1"}))
    wait_until(lambda: env.node_of("job"), what="job bound")
    pvc = env.claim("scratch")
    assert env.node_of("job") == "node-a"
    assert pvc["metadata"]["annotations"][SELECTED_NODE] == "node-a"
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == FAKE_PROVISIONER
    pv = c.get(PERSISTENT_VOLUMES, pvc["spec"]["volumeName"])
    assert pv["metadata"]["name"] == f"pvc-{pvc['metadata']['uid']}" and pv["spec"]["capacity"]["storage"] == "3Gi"
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == on("node-a")
    assert pv["status"]["phase"] == "Bound" and pvc["status"]["phase"] == "Bound"


@pytest.mark.parametrize("env", [{"timeout": 1, "provisioner": False}], indirect=True)
def test_prebind_gives_up_after_bind_timeout_saying_which_claim(env: Env) -> None:
    # the class's provisioner is external and nobody runs it: the claim is handed over, never bound
    c = env.cluster
    c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("orphan", storage_class="fake"))
    c.create(PODS, make_pod("stuck", claims=["orphan"]))
    wait_until(lambda: env.said("stuck", "binding volumes: context deadline exceeded"), timeout=20,
               what="the timeout's FailedScheduling")
    assert env.said("stuck", "still unbound: default/orphan")
    assert not env.node_of("stuck")
    # kube leaves the selected-node annotation it wrote; the pod is tried again later
    assert env.claim("orphan")["metadata"]["annotations"][SELECTED_NODE] in ("node-a", "node-b")


@pytest.mark.parametrize("env", [{"timeout": 600, "provisioner": False}], indirect=True)
def test_stop_ends_a_prebind_wait_at_once_and_leaves_the_pod_pending(env: Env) -> None:
    # kube cancels PreBind's context when the scheduler stops; waiting out bindTimeoutSeconds (600
    # here) would hold shutdown to its deadline and leave the binding "in flight" in its report
    c = env.cluster
    c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("orphan", storage_class="fake"))
    c.create(PODS, make_pod("stuck", claims=["orphan"]))
    wait_until(lambda: SELECTED_NODE in (env.claim("orphan")["metadata"].get("annotations") or {}),
               what="PreBind waiting for the claim it handed over")
    started = time.monotonic()
    report = env.sched.stop(timeout=10)
    assert time.monotonic() - started < 3 and report.clean, report.describe()
    assert not env.node_of("stuck") and env.sched.cache.assumed_count() == 0
    assert env.sched.stats.bound == 0


def test_a_failure_after_reserve_reverts_the_assumed_binding_on_the_embedded_cluster() -> None:
    # a Permit plugin that rejects the first pod: VolumeBinding's Unreserve must give its volume back,
    # or the second pod (the only other one that could use it) would never find it. It rejects the
    # first pod every time: rejected once, the pod is popped from backoff at once (SchedulerPopFromBackoffQ)
    # and could bind the volume before the test deletes it
    rejected: list[str] = []

    class RejectFirst:
        name = "RejectFirst"

        def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
            if pod.name == "first":
                rejected.append(pod.name)
                return Status(Code.UNSCHEDULABLE, ("rejected",), self.name), 0.0
            return Status.success(), 0.0

    c = EmbeddedCluster()
    for node in NODES_AB:
        c.create(NODES, node)
    c.create(STORAGE_CLASSES, LOCAL)
    c.create(PERSISTENT_VOLUMES, make_volume("pv-b", storage_class="local", node_affinity=on("node-b")))
    with PersistentVolumeController(c):
        config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                  "profiles": [{"schedulerName": "minisched", "plugins": {"permit": {"enabled": [
                      {"name": "RejectFirst"}]}}}]}
        registry = in_tree_registry()
        registry.register("RejectFirst", lambda args, handle: RejectFirst())
        sched = Scheduler(c, config=config, bind_workers=2, registry=registry)
        sched.start()
        try:
            wait_for_nodes(sched, 2)
            c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("data-first", storage_class="local"))
            c.create(PODS, make_pod("first", claims=["data-first"]))
            wait_until(lambda: rejected, what="the first pod rejected at Permit")
            c.delete(PODS, "first", "default", grace_period_seconds=0)
            c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("data-second", storage_class="local"))
            c.create(PODS, make_pod("second", claims=["data-second"]))
            wait_until(lambda: c.get(PODS, "second", "default")["spec"].get("nodeName") == "node-b",
                       what="the second pod placed on the volume the first one gave back")
            assert c.get(PERSISTENT_VOLUMES, "pv-b")["spec"]["claimRef"]["name"] == "data-second"
        finally:
            sched.stop()


def test_the_controller_alone_makes_volumes_available_and_binds_a_pre_bound_claim() -> None:
    c = EmbeddedCluster()
    c.create(STORAGE_CLASSES, LOCAL)
    pvc = c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("data", storage_class="local"))
    c.create(PERSISTENT_VOLUMES, make_volume("free", storage_class="local"))
    controller = PersistentVolumeController(c)
    assert controller.sync()["available"] == 1
    assert c.get(PERSISTENT_VOLUMES, "free")["status"]["phase"] == "Available"
    assert controller.sync()["bound"] == 0  # delayed: waits for its first consumer
    c.patch(PERSISTENT_VOLUMES, "free", {"spec": {"claimRef": {
        "namespace": "default", "name": "data", "uid": pvc["metadata"]["uid"]}}})
    assert controller.sync()["bound"] == 1
    assert c.get(PERSISTENT_VOLUME_CLAIMS, "data", "default")["status"]["phase"] == "Bound"
    c.delete(PERSISTENT_VOLUME_CLAIMS, "data", "default")
    c.patch(PERSISTENT_VOLUME_CLAIMS, "data", {"metadata": {"finalizers": None}}, "default")
    assert controller.sync()["released"] == 1
    assert c.get(PERSISTENT_VOLUMES, "free")["status"]["phase"] == "Released"


def test_a_fake_provisioner_cannot_take_an_in_tree_name() -> None:
    with pytest.raises(ValueError, match="outside kubernetes.io/"):
        FakeProvisioner("kubernetes.io/no-provisioner")


def test_the_controller_binds_an_immediate_claim_to_the_smallest_fit_but_not_a_delayed_one() -> None:
    c = EmbeddedCluster()
    c.create(STORAGE_CLASSES, make_storage_class("now", provisioner=FAKE_PROVISIONER, binding_mode="Immediate"))
    c.create(STORAGE_CLASSES, make_storage_class("later", provisioner="example.com/elsewhere",
                                                 binding_mode="WaitForFirstConsumer"))
    for name, size, cls in (("big", "5Gi", "now"), ("small", "2Gi", "now"), ("tiny", "1Gi", "now"),
                            ("free-later", "1Gi", "later")):
        c.create(PERSISTENT_VOLUMES, make_volume(name, storage=size, storage_class=cls))
    c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("now", storage="2Gi", storage_class="now"))
    delayed = make_claim("later", storage_class="later")
    delayed["metadata"]["annotations"] = {SELECTED_NODE: "node-a"}
    c.create(PERSISTENT_VOLUME_CLAIMS, delayed)
    controller = PersistentVolumeController(c)
    controller.sync()  # volumes become Available
    controller.sync()
    assert c.get(PERSISTENT_VOLUME_CLAIMS, "now", "default")["spec"]["volumeName"] == "small"
    later = c.get(PERSISTENT_VOLUME_CLAIMS, "later", "default")
    # a delayed claim gets only a volume pre-bound to it: with a node selected it goes to its provisioner
    assert not later["spec"].get("volumeName")
    assert later["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == "example.com/elsewhere"
