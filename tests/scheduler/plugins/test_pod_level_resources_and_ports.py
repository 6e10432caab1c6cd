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
