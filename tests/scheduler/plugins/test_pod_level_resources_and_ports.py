"""Pod-level resources (spec.resources) in NodeResourcesFit and the score plugins, and host ports
from containers and sidecars only, with cases from kube's fit_test.go (TestEnoughRequests),
framework/types_test.go (calculateResource) and nodeports' GetHostPorts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, PodInfo
from minisched.scheduler.plugins import node_ports, node_resources_balanced_allocation, node_resources_fit
from tests.scheduler.plugins.randomcluster import table_of

Object = dict[str, Any]


def pod(name: str = "p", containers: list[tuple[str | None, str | None]] = (("1m", "1"),),  # type: ignore[assignment]
        pod_level: Object | None = None, init: list[tuple[str | None, str | None, bool]] = (),  # type: ignore[assignment]
        overhead: Object | None = None) -> Object:
    """containers: (cpu, memory) requests each; init: (cpu, memory, sidecar)."""
    def container(i: int, cpu: str | None, mem: str | None, prefix: str = "c") -> Object:
        req = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}
        return {"name": f"{prefix}{i}", "image": "pause", "resources": {"requests": req} if req else {}}

    p = make_pod(name, cpu=None, memory=None)
    p["spec"]["containers"] = [container(i, c, m) for i, (c, m) in enumerate(containers)]
    if init:
        p["spec"]["initContainers"] = [
            {**container(i, c, m, "i"), **({"restartPolicy": "Always"} if sidecar else {})}
            for i, (c, m, sidecar) in enumerate(init)
        ]
    if pod_level is not None:
        p["spec"]["resources"] = pod_level
    if overhead is not None:
        p["spec"]["overhead"] = overhead
    return p


def used(cpu: str, mem: str) -> Object:
    return pod("used", [(cpu, mem)])


# kube's TestEnoughRequests node: 10m cpu, 20 bytes memory, 32 pods
NODE = make_node("n", cpu="10m", memory="20", pods="32")


@pytest.mark.parametrize(
    ("name", "new", "placed", "expected"),
    [
        ("both pod-level and container-level resources fit",
         pod(pod_level={"requests": {"cpu": "1m", "memory": "2"}}), used("5m", "5"), ()),
        ("pod-level cpu resource not fit",
         pod(pod_level={"requests": {"cpu": "7m", "memory": "2"}}), used("5m", "5"), ("Insufficient cpu",)),
        ("pod-level memory resource not fit",
         pod(pod_level={"requests": {"cpu": "3m", "memory": "2"}}), used("5m", "19"), ("Insufficient memory",)),
        ("one pod-level cpu resource fits and all init and non-init containers resources fit",
         pod(pod_level={"requests": {"cpu": "3m", "memory": "2"}}, init=[("1m", "1", False)]), used("5m", "19"),
         ("Insufficient memory",)),
        # pod-level requests replace the containers' sum: 3 containers of 4m would not fit, 5m at pod level does
        ("pod-level request below the containers' sum wins",
         pod(containers=[("4m", "1")] * 3, pod_level={"requests": {"cpu": "5m"}}), used("5m", "5"), ()),
        # only the resources set at pod level are replaced: memory still sums the containers (3 x 7 = 21 > 20)
        ("memory still from the containers when only cpu is set at pod level",
         pod(containers=[("1m", "7")] * 3, pod_level={"requests": {"cpu": "5m"}}), used("0", "0"),
         ("Insufficient memory",)),
        # the API server defaults a missing pod-level request to the containers' (when they set
        # one), else to the pod-level limit (defaultPodRequests)
        ("pod-level limit stands for a missing request",
         pod(containers=[(None, "1")], pod_level={"limits": {"cpu": "8m"}}), used("5m", "5"), ("Insufficient cpu",)),
        ("the containers' request, not the pod-level limit, when they set one",
         pod(containers=[("1m", "1")], pod_level={"limits": {"cpu": "8m"}}), used("5m", "5"), ()),
        ("overhead is added on top of pod-level requests",
         pod(pod_level={"requests": {"cpu": "4m"}}, overhead={"cpu": "2m"}), used("5m", "5"), ("Insufficient cpu",)),
    ],
)
def test_fit_uses_pod_level_requests(name: str, new: Object, placed: Object, expected: tuple[str, ...]) -> None:
    plugin = node_resources_fit.new(None, None)
    table = table_of([NODE], {"n": [placed]})
    assert plugin.filter(CycleState(), PodInfo.from_pod(new), table).reasons_at(0) == expected, name
    # the pure rule agrees
    assert tuple(node_resources_fit.insufficient_resources(PodInfo.from_pod(new), NODE, [PodInfo.from_pod(placed)])) == expected, name


@pytest.mark.parametrize(
    ("name", "new", "cpu", "memory", "nonzero_cpu", "nonzero_memory"),
    [
        # kube's TestCalculateResource cases with pod-level resources
        ("pod-level requests override the containers'", pod(containers=[("8", "80Mi")],
         pod_level={"requests": {"cpu": "10", "memory": "100Mi"}}), 10000, 100 * 2**20, 10000, 100 * 2**20),
        ("pod-level cpu, container memory", pod(containers=[(None, "50Mi")], pod_level={"requests": {"cpu": "5"}}),
         5000, 50 * 2**20, 5000, 50 * 2**20),
        ("pod-level memory, container cpu", pod(containers=[("1", None)], pod_level={"requests": {"memory": "100Mi"}}),
         1000, 100 * 2**20, 1000, 100 * 2**20),
        # nothing anywhere for memory: the scoring default stands in (once per container)
        ("pod-level cpu only, no memory anywhere", pod(containers=[(None, None), (None, None)],
         pod_level={"requests": {"cpu": "2"}}), 2000, None, 2000, 2 * DEFAULT_MEMORY_REQUEST),
        ("no pod-level resources: per-container defaults", pod(containers=[(None, "1Mi")]),
         None, 2**20, DEFAULT_MILLI_CPU_REQUEST, 2**20),
        ("restartable init, init and regular with pod-level resources", pod(
            containers=[("100", None)], init=[("10", None, True), ("200", None, False)],
            pod_level={"requests": {"cpu": "1000"}}), 1000000, None, 1000000, DEFAULT_MEMORY_REQUEST * 2),
    ],
)
def test_requests_and_nonzero_requests(name: str, new: Object, cpu: int | None, memory: int | None,
                                       nonzero_cpu: int, nonzero_memory: int) -> None:
    info = PodInfo.from_pod(new)
    assert info.requests.get("cpu") == cpu, name
    assert info.requests.get("memory") == memory, name
    assert (info.nonzero_cpu, info.nonzero_memory) == (nonzero_cpu, nonzero_memory), name


def test_only_cpu_memory_and_hugepages_are_pod_level_resources() -> None:
    p = pod(containers=[("1", "1Gi")], pod_level={"requests": {"cpu": "2", "hugepages-2Mi": "4Mi",
                                                               "ephemeral-storage": "1Gi"}})
    info = PodInfo.from_pod(p)
    assert info.requests["cpu"] == 2000 and info.requests["hugepages-2Mi"] == 4 * 2**20
    assert "ephemeral-storage" not in info.requests  # not a pod-level resource: ignored, as kube does
    assert info.requests["memory"] == 2**30


def test_scores_use_pod_level_requests() -> None:
    """LeastAllocated and BalancedAllocation see the pod-level 3 cpu, not the containers' 1."""
    nodes = [make_node("a", cpu="4", memory="4Gi"), make_node("b", cpu="4", memory="4Gi")]
    table = table_of(nodes, {"b": [used("2", "1Gi")]})
    rows = np.arange(2, dtype=np.intp)
    with_pod_level = PodInfo.from_pod(pod(containers=[("1", "1Gi")], pod_level={"requests": {"cpu": "3"}}))
    plain = PodInfo.from_pod(pod(containers=[("1", "1Gi")]))
    fit = node_resources_fit.new(None, None)
    least = fit.score(CycleState(), with_pod_level, table, rows).tolist()
    assert least != fit.score(CycleState(), plain, table, rows).tolist()
    # node a: cpu (4-3)/4 -> 25, memory (4-1)/4 -> 75: (25 + 75) / 2 = 50
    assert least[0] == 50
    balanced = node_resources_balanced_allocation.new(None, None)
    assert balanced.score(CycleState(), with_pod_level, table, rows).tolist() != \
        balanced.score(CycleState(), plain, table, rows).tolist()


MI = 2**20


@pytest.mark.parametrize(
    ("name", "new", "incoming", "on_node"),
    [
        # kube 1.35.4 computes a pod's non-zero cpu/memory twice. As the incoming pod,
        # noderesources/resource_allocation.go calculatePodResourceRequest passes
        # NonMissingContainerRequests {cpu: 100m, memory: 200Mi} to resourcehelper.PodRequests,
        # whose AggregateContainerRequests gives *each container* missing a request the default
        # (applyNonMissing), and then PodRequests replaces the sum by the pod-level request of each
        # resource the pod level sets, then adds overhead. On its node, framework/types.go
        # CalculateResource asks getNonMissingContainerRequests first: with pod-level requests the
        # default is passed only for a resource absent from PodRequests (containers, pod level and
        # overhead alike).
        # c0 {memory 1Gi}, c1 {}; pod level {cpu 2}. Incoming: c0 -> cpu 100m + mem 1Gi, c1 ->
        # cpu 100m + mem 200Mi; cpu replaced by 2 -> (2000, 1Gi + 200Mi). On the node: memory is
        # in PodRequests, so no default -> (2000, 1Gi).
        ("pod-level cpu; one container sets memory, one nothing",
         pod(containers=[(None, "1Gi"), (None, None)], pod_level={"requests": {"cpu": "2"}}),
         (2000, 1024 * MI + 200 * MI), (2000, 1024 * MI)),
        # c0 {cpu 500m}, c1 {}; pod level {memory 1Gi}. Incoming: cpu 500 + 100 -> 600, memory
        # replaced -> 1Gi. On the node: cpu present -> 500.
        ("pod-level memory; one container sets cpu, one nothing",
         pod(containers=[("500m", None), (None, None)], pod_level={"requests": {"memory": "1Gi"}}),
         (600, 1024 * MI), (500, 1024 * MI)),
        # c0 {}; pod level {cpu 1}; overhead {memory 100Mi}. Incoming: memory 200Mi default + 100Mi
        # overhead -> 300Mi. On the node: PodRequests has memory (the overhead) -> 100Mi.
        ("pod-level cpu; memory only in the overhead",
         pod(containers=[(None, None)], pod_level={"requests": {"cpu": "1"}}, overhead={"memory": "100Mi"}),
         (1000, 300 * MI), (1000, 100 * MI)),
        # both at pod level: both replaced, no default anywhere
        ("pod-level cpu and memory", pod(containers=[(None, None)] * 2,
         pod_level={"requests": {"cpu": "1", "memory": "1Gi"}}), (1000, 1024 * MI), (1000, 1024 * MI)),
        # no pod-level resources: the same per-container defaults both ways (1000 + 100, 2 x 200Mi)
        ("no pod-level resources", pod(containers=[("1", None), (None, None)]),
         (1100, 400 * MI), (1100, 400 * MI)),
        # pod-level limits only: the API server's defaultPodRequests (pkg/apis/core/v1/defaults.go)
        # sets the pod-level memory request to the containers' aggregate (64Mi: they set one) and
        # cpu to the limit (2); memory is then replaced at pod level, so no default for c1.
        ("pod-level limits: requests defaulted from the containers, then the limits",
         pod(containers=[(None, "64Mi"), (None, None)], pod_level={"limits": {"cpu": "2"}}),
         (2000, 64 * MI), (2000, 64 * MI)),
    ],
)
def test_incoming_pod_nonzero_requests_as_kube(name: str, new: Object, incoming: tuple[int, int],
                                               on_node: tuple[int, int]) -> None:
    info = PodInfo.from_pod(new)
    assert (info.incoming_nonzero_cpu, info.incoming_nonzero_memory) == incoming, name
    assert (info.nonzero_cpu, info.nonzero_memory) == on_node, name
    scored = node_resources_fit.pod_score_requests(info, node_resources_fit.DEFAULT_RESOURCES, use_requested=False)
    assert tuple(scored) == incoming, name


def test_incoming_pod_level_defaults_decide_the_node() -> None:
    """Pod level {cpu 1}; containers {memory 64Mi}, {}, {}: kube scores it as cpu 1000m and memory
    64Mi + 2 x 200Mi = 464Mi (calculatePodResourceRequest), its requests as cpu 1000m, memory 64Mi.
    Node a: 4 cpu, 512Mi; node b: 2 cpu, 4Gi; both empty.
      LeastAllocated a: cpu (4000-1000)*100/4000 = 75, memory (512-464)*100/512 = 9 -> (75+9)/2 = 42
                     b: cpu (2000-1000)*100/2000 = 50, memory (4096-464)*100/4096 = 88 -> 69
      BalancedAllocation (requests, no defaults) a: |1/4 - 64/512|/2 = 0.0625 -> 93
                                                 b: |1/2 - 64/4096|/2 = 0.2421875 -> 75
    a 42 + 93 = 135 < b 69 + 75 = 144: b. Scored with the memory of 64Mi (no defaults beside the
    pod level), a would win: 81 + 93 = 174 > 74 + 75 = 149."""
    nodes = [make_node("a", cpu="4", memory="512Mi"), make_node("b", cpu="2", memory="4Gi")]
    table = table_of(nodes)
    rows = np.arange(2, dtype=np.intp)
    info = PodInfo.from_pod(pod(containers=[(None, "64Mi"), (None, None), (None, None)],
                                pod_level={"requests": {"cpu": "1"}}))
    fit = node_resources_fit.new(None, None)
    balanced = node_resources_balanced_allocation.new(None, None)
    assert fit.score(CycleState(), info, table, rows).tolist() == [42, 69]
    assert balanced.score(CycleState(), info, table, rows).tolist() == [93, 75]
    # the pure one-node rules agree
    assert [node_resources_fit.node_score(info, n, []) for n in nodes] == [42, 69]
    assert [node_resources_balanced_allocation.node_score(info, n, []) for n in nodes] == [93, 75]


def ports_pod(name: str, *, container: int | None = None, init: int | None = None, sidecar: int | None = None) -> Object:
    p = make_pod(name, host_ports=[container] if container else None)
    inits = []
    if init:
        inits.append({"name": "init", "image": "busybox", "ports": [{"containerPort": init, "hostPort": init}]})
    if sidecar:
        inits.append({"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                      "ports": [{"containerPort": sidecar, "hostPort": sidecar}]})
    if inits:
        p["spec"]["initContainers"] = inits
    return p


def test_host_ports_come_from_containers_and_sidecars_only() -> None:
    assert [hp.port for hp in PodInfo.from_pod(ports_pod("p", container=80, init=81, sidecar=82)).host_ports] == [82, 80]
    assert PodInfo.from_pod(ports_pod("p", init=81)).host_ports == ()


@pytest.mark.parametrize(
    ("name", "new", "existing", "fits"),
    [
        ("sidecar port conflicts with a container port", ports_pod("new", sidecar=8080),
         ports_pod("old", container=8080), False),
        ("container port conflicts with an existing sidecar's", ports_pod("new", container=8080),
         ports_pod("old", sidecar=8080), False),
        ("a regular init container's port of the new pod does not count", ports_pod("new", init=8080),
         ports_pod("old", container=8080), True),
        ("an existing pod's regular init container port does not count", ports_pod("new", container=8080),
         ports_pod("old", init=8080), True),
    ],
)
def test_node_ports_with_init_containers(name: str, new: Object, existing: Object, fits: bool) -> None:
    table = table_of([make_node("n")], {"n": [existing]})
    info = PodInfo.from_pod(new)
    plugin = node_ports.new(None, None)
    assert bool(plugin.filter(CycleState(), info, table).passed[0]) is fits, name
    assert node_ports.fits(info, [PodInfo.from_pod(existing)]) is fits, name
