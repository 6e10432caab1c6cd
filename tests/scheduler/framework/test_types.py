from __future__ import annotations

import pytest

from minisched.objects import make_pod, toleration
from minisched.scheduler.framework.types import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    HostPort,
    PodInfo,
    PodSpecError,
    is_scalar_resource,
    normalized_image_name,
    resource_amount,
)


def test_requests_nonzero_and_fields() -> None:
    pod = make_pod("p", cpu="250m", memory=None, priority=7, host_ports=[8080], node_selector={"a": "b"},
                   tolerations=[toleration("k", "v")], scheduling_gates=["g"])
    pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    info = PodInfo.from_pod(pod)
    assert info.key == "default/p" and info.priority == 7
    assert dict(info.requests) == {"cpu": 250}
    assert (info.nonzero_cpu, info.nonzero_memory) == (250, DEFAULT_MEMORY_REQUEST)
    assert info.host_ports == (HostPort(8080, "TCP", "0.0.0.0"),)
    assert info.node_selector == (("a", "b"),)
    assert info.scheduling_gates == ("g",)
    assert info.created is not None
    empty = PodInfo.from_pod(make_pod("e", cpu=None, memory=None))
    assert dict(empty.requests) == {} and empty.nonzero_cpu == DEFAULT_MILLI_CPU_REQUEST


def test_nonzero_defaults_apply_per_container() -> None:
    pod = make_pod("p", cpu="1", memory="1Gi")
    pod["spec"]["containers"].append({"name": "bare", "image": "x"})
    info = PodInfo.from_pod(pod)
    assert info.requests["cpu"] == 1000
    assert info.nonzero_cpu == 1000 + DEFAULT_MILLI_CPU_REQUEST
    assert info.nonzero_memory == 1024**3 + DEFAULT_MEMORY_REQUEST


def test_sidecars_run_beside_later_init_containers_and_the_app() -> None:
    pod = make_pod("p", cpu="100m", memory=None)
    pod["spec"]["initContainers"] = [
        {"name": "init1", "resources": {"requests": {"cpu": "2"}}},  # before the sidecar: 2
        {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
        {"name": "init2", "resources": {"requests": {"cpu": "1500m"}}},  # with the sidecar: 2.5
    ]
    assert PodInfo.from_pod(pod).requests["cpu"] == 2500  # max(0.1 + 1, 2, 1 + 1.5)


def test_images_are_normalised_and_include_init_containers() -> None:
    pod = make_pod("p", image="nginx")
    pod["spec"]["initContainers"] = [{"name": "i", "image": "registry:5000/tool"}]
    assert PodInfo.from_pod(pod).images == ("registry:5000/tool:latest", "nginx:latest")
    assert normalized_image_name("a/b:1") == "a/b:1"


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="lots"),
         "spec.containers[0].resources.requests[cpu]: quantity 'lots' is not valid"),
        (lambda p: p["spec"].update(overhead={"memory": "1Q"}), "spec.overhead[memory]"),
        (lambda p: p["spec"].update(tolerations=[{"key": "k", "operator": "Maybe"}]), "operator 'Maybe' is not valid"),
        (lambda p: p["spec"].update(tolerations=[{"operator": "Equal", "value": "v"}]), "empty key needs operator Exists"),
        (lambda p: p["spec"].update(priority="high"), "spec.priority 'high' is not an integer"),
        (lambda p: p["spec"].update(containers="nope"), "spec.containers is not a list"),
    ],
)
def test_unreadable_pods_name_the_problem(mutate, problem: str) -> None:  # type: ignore[no-untyped-def]
    pod = make_pod("bad")
    mutate(pod)
    with pytest.raises(PodSpecError) as err:
        PodInfo.from_pod(pod)
    assert str(err.value).startswith("pod default/bad: ")
    assert problem in str(err.value)
    assert isinstance(err.value, ValueError)


def test_scalar_resource_names() -> None:
    assert is_scalar_resource("example.com/gpu")
    assert is_scalar_resource("hugepages-2Mi")
    assert not is_scalar_resource("kubernetes.io/something")
    assert not is_scalar_resource("requests.example.com/gpu")
    assert not is_scalar_resource("foo")


def test_absurd_quantities_are_capped_not_overflowed() -> None:
    from minisched.objects import make_node
    from minisched.scheduler.framework.types import MAX_AMOUNT
    from minisched.scheduler.snapshot import NodeTable

    t = NodeTable()
    t.add_node(make_node("huge", memory="1e30"))
    assert t.allocatable("memory").tolist() == [MAX_AMOUNT]
    assert PodInfo.from_pod(make_pod("p", memory="9E")).requests["memory"] == MAX_AMOUNT


def test_cached_amounts_match_exact_parsing_and_bad_text_still_fails_each_time() -> None:
    for _ in range(2):  # the second round is served from the text cache
        assert resource_amount("cpu", "100m") == 100 and resource_amount("memory", "100m") == 1
        assert resource_amount("cpu", "0.0001") == 1  # rounded up, as MilliValue()
        assert resource_amount("memory", "1Gi") == 2**30 and resource_amount("cpu", "1Gi") == 2**30 * 1000
        assert resource_amount("cpu", 2) == 2000 and resource_amount("cpu", 0.5) == 500  # not cached: not text
        with pytest.raises(ValueError, match="'12x'"):
            resource_amount("cpu", "12x")
