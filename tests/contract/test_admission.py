"""What kube-apiserver 1.35 refuses or changes on the way in, with its default admission plugins
(LimitRanger, Priority, RuntimeClass, ...) and its validation: the same status code, reason and
message on both backends, and the same stored object when it accepts."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.errors import ApiError
from minisched.objects import make_node, make_pod
from minisched.resources import LIMIT_RANGES, NODES, PODS, RUNTIME_CLASSES

from .conftest import unique

Object = dict[str, Any]
EXAMPLE = "example.com/widget"


def runtime_class(name: str, handler: str = "runc", overhead: dict[str, str] | None = None,
                  scheduling: Object | None = None) -> Object:
    rc: Object = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                  "handler": handler}
    if overhead is not None:
        rc["overhead"] = {"podFixed": overhead}
    if scheduling is not None:
        rc["scheduling"] = scheduling
    return rc


@pytest.fixture
def runtime_classes(cluster: Cluster) -> Iterator[Callable[..., str]]:
    """Create RuntimeClasses (cluster-scoped, so deleted afterwards by hand); returns their name."""
    made: list[str] = []

    def make(**kwargs: Any) -> str:
        name = unique("rc")
        cluster.create(RUNTIME_CLASSES, runtime_class(name, **kwargs))
        made.append(name)
        return name

    yield make
    for name in made:
        cluster.delete(RUNTIME_CLASSES, name)


def pod_with(ns: str, name: str = "x", **spec: Any) -> Object:
    pod = make_pod(name, namespace=ns)
    pod["spec"].update(spec)
    return pod


def container_resources(ns: str, requests: dict | None = None, limits: dict | None = None) -> Object:
    pod = make_pod("x", namespace=ns, cpu=None, memory=None)
    resources = pod["spec"]["containers"][0]["resources"]
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return pod


def refused(call: Callable[[], Any], status: int, reason: str, message: str, fields: list[str] | None = None) -> None:
    with pytest.raises(ApiError) as err:
        call()
    assert (err.value.status, err.value.reason) == (status, reason), err.value.message
    assert err.value.message == message
    if fields is not None:
        assert [c.field for c in err.value.causes if c.field] == fields


# --- RuntimeClass admission -----------------------------------------------------------------


def test_an_overhead_without_a_runtime_class_is_forbidden(cluster: Cluster, ns: str) -> None:
    refused(lambda: cluster.create(PODS, pod_with(ns, overhead={"cpu": "100m"})), 403, "Forbidden",
            'pods "x" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined '
            "Overhead")


def test_an_overhead_with_a_runtime_class_that_defines_none_is_forbidden(
        cluster: Cluster, ns: str, runtime_classes: Callable[..., str]) -> None:
    rc = runtime_classes()
    refused(lambda: cluster.create(PODS, pod_with(ns, runtimeClassName=rc, overhead={"cpu": "100m"})), 403,
            "Forbidden", 'pods "x" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass '
            "defined Overhead")


def test_a_missing_runtime_class_is_forbidden(cluster: Cluster, ns: str) -> None:
    refused(lambda: cluster.create(PODS, pod_with(ns, runtimeClassName="no-such-runtime")), 403, "Forbidden",
            'pods "x" is forbidden: pod rejected: RuntimeClass "no-such-runtime" not found')


def test_admission_errors_name_a_generated_name_as_kube_does(cluster: Cluster, ns: str) -> None:
    # mutating admission runs before the name is generated, so it names the prefix ...
    pod = pod_with(ns, runtimeClassName="no-such-runtime")
    pod["metadata"] = {"generateName": "gen-"}
    refused(lambda: cluster.create(PODS, pod, ns), 403, "Forbidden",
            'pods "gen-" is forbidden: pod rejected: RuntimeClass "no-such-runtime" not found')
    # ... validating admission after it, so it names the generated name
    pod = pod_with(ns, overhead={"cpu": "1"})
    pod["metadata"] = {"generateName": "gen-"}
    with pytest.raises(ApiError) as err:
        cluster.create(PODS, pod, ns)
    assert err.value.status == 403
    assert re.fullmatch(r'pods "gen-[a-z0-9]{5}" is forbidden: pod rejected: Pod Overhead set without '
                        r"corresponding RuntimeClass defined Overhead", err.value.message), err.value.message


def test_the_runtime_class_sets_the_overhead(cluster: Cluster, ns: str, runtime_classes: Callable[..., str]) -> None:
    rc = runtime_classes(overhead={"cpu": "250m", "memory": "64Mi"})
    pod = cluster.create(PODS, pod_with(ns, runtimeClassName=rc))
    assert pod["spec"]["overhead"] == {"cpu": "250m", "memory": "64Mi"}
    same = cluster.create(PODS, pod_with(ns, "same", runtimeClassName=rc, overhead={"cpu": "0.25", "memory": "64Mi"}))
    assert same["spec"]["overhead"] == {"cpu": "250m", "memory": "64Mi"}


def test_an_overhead_other_than_the_runtime_classes_is_forbidden(
        cluster: Cluster, ns: str, runtime_classes: Callable[..., str]) -> None:
    rc = runtime_classes(overhead={"cpu": "250m"})
    refused(lambda: cluster.create(PODS, pod_with(ns, runtimeClassName=rc, overhead={"cpu": "1"})), 403,
            "Forbidden", 'pods "x" is forbidden: pod rejected: Pod\'s Overhead doesn\'t match RuntimeClass\'s defined '
            "Overhead")


def test_the_runtime_class_scheduling_joins_the_pods(
        cluster: Cluster, ns: str, runtime_classes: Callable[..., str]) -> None:
    toleration = {"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}
    rc = runtime_classes(scheduling={"nodeSelector": {"runtime": "gvisor"}, "tolerations": [toleration]})
    pod = cluster.create(PODS, pod_with(ns, runtimeClassName=rc, nodeSelector={"disk": "ssd"}))
    assert pod["spec"]["nodeSelector"] == {"disk": "ssd", "runtime": "gvisor"}
    assert toleration in pod["spec"]["tolerations"]
    refused(lambda: cluster.create(PODS, pod_with(ns, "y", runtimeClassName=rc, nodeSelector={"runtime": "kata"})),
            403, "Forbidden", 'pods "y" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[runtime] = gvisor; '
            "pod.spec.nodeSelector[runtime] = kata")


def test_a_runtime_class_handler_must_be_a_dns_label(cluster: Cluster) -> None:
    name = unique("rc")
    refused(lambda: cluster.create(RUNTIME_CLASSES, runtime_class(name, handler="Bad_Handler")), 422, "Invalid",
            f'RuntimeClass.node.k8s.io "{name}" is invalid: handler: Invalid value: "Bad_Handler": a lowercase RFC '
            "1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an "
            "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')", ["handler"])


def test_validation_comes_before_the_validating_admission_step(cluster: Cluster, ns: str) -> None:
    # the overhead alone is a 403 (validating admission); an invalid field besides makes it a 422
    pod = pod_with(ns, overhead={"cpu": "100m"}, restartPolicy="Sometimes")
    refused(lambda: cluster.create(PODS, pod), 422, "Invalid",
            'Pod "x" is invalid: spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
            '"OnFailure", "Never"')


# --- extended resources, resource names, ports ------------------------------------------------


def test_an_extended_resource_request_needs_a_limit(cluster: Cluster, ns: str) -> None:
    refused(lambda: cluster.create(PODS, container_resources(ns, requests={EXAMPLE: "1"})), 422, "Invalid",
            'Pod "x" is invalid: spec.containers[0].resources.limits: Required value: Limit must be set for non '
            "overcommitable resources", ["spec.containers[0].resources.limits"])


def test_an_extended_resource_request_must_equal_its_limit(cluster: Cluster, ns: str) -> None:
    refused(lambda: cluster.create(PODS, container_resources(ns, {EXAMPLE: "1"}, {EXAMPLE: "2"})), 422, "Invalid",
            f'Pod "x" is invalid: spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
            f"{EXAMPLE} limit of 2", ["spec.containers[0].resources.requests"])


def test_an_extended_resource_is_a_whole_number(cluster: Cluster, ns: str) -> None:
    refused(lambda: cluster.create(PODS, container_resources(ns, limits={EXAMPLE: "500m"})), 422, "Invalid",
            f'Pod "x" is invalid: [spec.containers[0].resources.limits[{EXAMPLE}]: Invalid value: "500m": must be an '
            f"integer, spec.containers[0].resources.requests[{EXAMPLE}]: Invalid value: \"500m\": must be an integer]")


def test_an_extended_resource_limit_alone_sets_the_request(cluster: Cluster, ns: str) -> None:
    pod = cluster.create(PODS, container_resources(ns, limits={EXAMPLE: "2"}))
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {EXAMPLE: "2"}, "limits": {EXAMPLE: "2"}}
    assert cluster.create(PODS, make_pod("made", namespace=ns, extra_requests={EXAMPLE: "1"}))


def test_a_resource_without_a_domain_must_be_standard(cluster: Cluster, ns: str) -> None:
    refused(lambda: cluster.create(PODS, container_resources(ns, requests={"gpu": "1"})), 422, "Invalid",
            'Pod "x" is invalid: [spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard '
            'resource type or fully qualified, spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must '
            "be a standard resource for containers]")


@pytest.mark.parametrize(("port", "field", "message"), [
    ({"containerPort": 80, "hostPort": 70000}, "hostPort",
     "Invalid value: 70000: must be between 1 and 65535, inclusive"),
    ({"containerPort": 80, "hostPort": -1}, "hostPort", "Invalid value: -1: must be between 1 and 65535, inclusive"),
    ({"containerPort": 0}, "containerPort", "Required value"),
    ({"containerPort": 65536}, "containerPort", "Invalid value: 65536: must be between 1 and 65535, inclusive"),
    ({"containerPort": 80, "protocol": "HTTP"}, "protocol",
     'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"'),
])
def test_container_ports(cluster: Cluster, ns: str, port: Object, field: str, message: str) -> None:
    pod = pod_with(ns)
    pod["spec"]["containers"][0]["ports"] = [port]
    refused(lambda: cluster.create(PODS, pod), 422, "Invalid",
            f'Pod "x" is invalid: spec.containers[0].ports[0].{field}: {message}', [f"spec.containers[0].ports[0].{field}"])


def test_a_port_protocol_defaults_to_tcp(cluster: Cluster, ns: str) -> None:
    pod = pod_with(ns)
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 18080}]
    created = cluster.create(PODS, pod)
    assert created["spec"]["containers"][0]["ports"] == [{"containerPort": 8080, "hostPort": 18080, "protocol": "TCP"}]


def test_a_negative_overhead_is_invalid(cluster: Cluster, ns: str) -> None:
    refused(lambda: cluster.create(PODS, pod_with(ns, overhead={"cpu": "-1"})), 422, "Invalid",
            'Pod "x" is invalid: spec.overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0')


def test_a_malformed_overhead_is_a_bad_request(cluster: Cluster, ns: str) -> None:
    with pytest.raises(ApiError) as err:
        cluster.create(PODS, pod_with(ns, overhead={"memory": "12 Gi"}))
    assert err.value.status == 400
    assert err.value.message.startswith('Pod in version "v1" cannot be handled as a Pod: quantities must match')


# --- quantities in canonical form -------------------------------------------------------------


def test_quantities_are_stored_in_canonical_form(cluster: Cluster, ns: str) -> None:
    pod = container_resources(ns, requests={"cpu": "1000m", "memory": "1024Mi", "ephemeral-storage": "0.5Gi"},
                              limits={"cpu": "1.5", "memory": "2048Mi"})
    created = cluster.create(PODS, pod)
    assert created["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "512Mi"},
        "limits": {"cpu": "1500m", "memory": "2Gi"},
    }
    assert cluster.get(PODS, "x", ns)["spec"]["containers"][0]["resources"] == created["spec"]["containers"][0]["resources"]


def test_node_quantities_are_stored_in_canonical_form(cluster: Cluster) -> None:
    name = unique("canon")
    node = make_node(name, cpu="4000m", memory="16384Mi", pods="110")
    node["status"]["capacity"]["example.com/big"] = "2000"
    try:
        created = cluster.create(NODES, node)
        assert created["status"]["capacity"] == {"cpu": "4", "memory": "16Gi", "pods": "110", "example.com/big": "2k"}
    finally:
        cluster.delete(NODES, name)


# --- LimitRanger admission --------------------------------------------------------------------


def limit_range(name: str, *items: Object) -> Object:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name}, "spec": {"limits": list(items)}}


def test_a_limit_range_is_defaulted(cluster: Cluster, ns: str) -> None:
    lr = cluster.create(LIMIT_RANGES, limit_range("lr", {"type": "Container", "max": {"cpu": "2"},
                                                        "min": {"memory": "32Mi"}}), ns)
    (item,) = lr["spec"]["limits"]
    assert item["default"] == {"cpu": "2"}
    assert item["defaultRequest"] == {"cpu": "2", "memory": "32Mi"}


def test_limit_range_defaults_fill_in_container_resources(cluster: Cluster, ns: str) -> None:
    cluster.create(LIMIT_RANGES, limit_range("lr", {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                                                    "defaultRequest": {"cpu": "100m"}}), ns)
    pod = cluster.create(PODS, container_resources(ns, requests={"memory": "64Mi"}))
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu request for container main; cpu, memory limit for container main")


@pytest.mark.parametrize(("item", "requests", "limits", "why"), [
    ({"type": "Container", "max": {"cpu": "1"}}, {"cpu": "500m"}, {"cpu": "2"},
     "maximum cpu usage per Container is 1, but limit is 2"),
    ({"type": "Container", "min": {"memory": "64Mi"}}, {"memory": "32Mi"}, None,
     "minimum memory usage per Container is 64Mi, but request is 32Mi"),
    ({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}, {"cpu": "100m"}, {"cpu": "1"},
     "cpu max limit to request ratio per Container is 2, but provided ratio is 10.000000"),
    ({"type": "Pod", "max": {"memory": "1Gi"}}, {"memory": "512Mi"}, {"memory": "2Gi"},
     "maximum memory usage per Pod is 1Gi, but limit is 2Gi"),
    ({"type": "Pod", "max": {"cpu": "1"}}, {"cpu": "500m"}, None,
     "maximum cpu usage per Pod is 1.  No limit is specified"),
])
def test_a_pod_outside_a_limit_range_is_forbidden(cluster: Cluster, ns: str, item: Object, requests: dict,
                                                  limits: dict | None, why: str) -> None:
    cluster.create(LIMIT_RANGES, limit_range("lr", item), ns)
    refused(lambda: cluster.create(PODS, container_resources(ns, requests, limits)), 403, "Forbidden",
            f'pods "x" is forbidden: {why}')


def test_an_inconsistent_limit_range_is_invalid(cluster: Cluster, ns: str) -> None:
    with pytest.raises(ApiError) as err:
        cluster.create(LIMIT_RANGES, limit_range("lr", {"type": "Container", "min": {"cpu": "2"},
                                                        "max": {"cpu": "1"}}), ns)
    assert (err.value.status, err.value.reason) == (422, "Invalid")
    assert err.value.message.startswith('LimitRange "lr" is invalid: ')
    assert "spec.limits[0].min[cpu]" in [c.field for c in err.value.causes]


# --- node affinity and tolerations -----------------------------------------------------------

TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def required_affinity(*expressions: Object) -> Object:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}}


@pytest.mark.parametrize(("expression", "field", "message"), [
    ({"key": "zone", "operator": "Near", "values": ["a"]}, "operator",
     'Invalid value: "Near": not a valid selector operator'),
    ({"key": "zone", "operator": "In", "values": []}, "values",
     "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
    ({"key": "zone", "operator": "Exists", "values": ["a"]}, "values",
     "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
    ({"key": "zone", "operator": "Gt", "values": ["1", "2"]}, "values",
     "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"),
])
def test_invalid_node_affinity(cluster: Cluster, ns: str, expression: Object, field: str, message: str) -> None:
    path = f"{TERMS}[0].matchExpressions[0].{field}"
    refused(lambda: cluster.create(PODS, pod_with(ns, affinity=required_affinity(expression))), 422, "Invalid",
            f'Pod "x" is invalid: {path}: {message}', [path])


def test_required_node_affinity_needs_a_term(cluster: Cluster, ns: str) -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    refused(lambda: cluster.create(PODS, pod_with(ns, affinity=affinity)), 422, "Invalid",
            f'Pod "x" is invalid: {TERMS}: Required value: must have at least one node selector term', [TERMS])


@pytest.mark.parametrize(("toleration", "field", "message"), [
    ({"operator": "Exists", "key": "k", "value": "v"}, "operator",
     'Invalid value: "v": value must be empty when `operator` is \'Exists\''),
    ({"operator": "Equal", "value": "v"}, "operator",
     'Invalid value: "Equal": operator must be Exists when `key` is empty, which means "match all values and all '
     'keys"'),
    ({"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}, "effect",
     "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set"),
    ({"key": "k", "operator": "Near"}, "operator", 'Unsupported value: "Near": supported values: "Equal", "Exists"'),
])
def test_invalid_tolerations(cluster: Cluster, ns: str, toleration: Object, field: str, message: str) -> None:
    path = f"spec.tolerations[0].{field}"
    refused(lambda: cluster.create(PODS, pod_with(ns, tolerations=[toleration])), 422, "Invalid",
            f'Pod "x" is invalid: {path}: {message}', [path])


@pytest.mark.parametrize(("resources", "message"), [
    ({"limits": {"hugepages-2Mi": "2Mi"}}, "spec.containers[0].resources: Forbidden: HugePages require cpu or memory"),
    ({"limits": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}},
     '[spec.containers[0].resources.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer '
     'multiple of hugepages-2Mi, spec.containers[0].resources.requests[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is '
     "not positive integer multiple of hugepages-2Mi]"),  # the request defaulted from the limit
])
def test_hugepages(cluster: Cluster, ns: str, resources: Object, message: str) -> None:
    pod = pod_with(ns)
    pod["spec"]["containers"][0]["resources"] = resources
    refused(lambda: cluster.create(PODS, pod), 422, "Invalid", f'Pod "x" is invalid: {message}')


@pytest.mark.parametrize(("items", "message"), [
    ([{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}],
     '[spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1, '
     'spec.limits[0].defaultRequest[cpu]: Invalid value: "1": min value 2 is greater than default request value 1, '
     'spec.limits[0].default[cpu]: Invalid value: "2": min value 2 is greater than default value 1]'),
    ([{"type": "Bad", "max": {"cpu": "1"}}],
     'spec.limits[0].type: Invalid value: "Bad": must be a standard limit type or fully qualified'),
    ([{"type": "Pod", "default": {"cpu": "1"}}],
     "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'"),
    ([{"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}}],
     'spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "500m": ratio 500m is less than 1'),
    ([{"type": "Container", "default": {EXAMPLE: "2"}, "defaultRequest": {EXAMPLE: "1"}}],
     f'spec.limits[0].defaultRequest[{EXAMPLE}]: Invalid value: "1": default value 2 must equal to defaultRequest '
     f"value 1 in {EXAMPLE}"),
])
def test_limit_range_validation(cluster: Cluster, ns: str, items: list[Object], message: str) -> None:
    refused(lambda: cluster.create(LIMIT_RANGES, limit_range("lr", *items), ns), 422, "Invalid",
            f'LimitRange "lr" is invalid: {message}')


# --- more of the pod spec: each refusal as the real server words it ---------------------------

LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
               "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
NAME_PART = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def _main(pod: Object) -> Object:
    return pod["spec"]["containers"][0]


SPEC_CASES: list[tuple[str, Callable[[Object], Any], str]] = [
    ("node-selector-value", lambda p: p["spec"].update(nodeSelector={"a": "-bad-"}),
     f'spec.nodeSelector: Invalid value: "-bad-": {LABEL_VALUE}'),
    ("node-selector-key", lambda p: p["spec"].update(nodeSelector={"-a": "b"}),
     f'spec.nodeSelector: Invalid value: "-a": {NAME_PART}'),
    ("pull-policy", lambda p: _main(p).update(imagePullPolicy="Sometimes"),
     'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", '
     '"IfNotPresent", "Never"'),
    ("gate-name", lambda p: p["spec"].update(schedulingGates=[{"name": "Bad Gate"}]),
     f'spec.schedulingGates[0]: Invalid value: "Bad Gate": {NAME_PART}'),
    ("gate-twice", lambda p: p["spec"].update(schedulingGates=[{"name": "a"}, {"name": "a"}]),
     'spec.schedulingGates[1]: Duplicate value: "a"'),
    ("volume-twice", lambda p: p["spec"].update(volumes=[{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]),
     'spec.volumes[1].name: Duplicate value: "v"'),
    ("claim-without-name", lambda p: p["spec"].update(volumes=[{"name": "v", "persistentVolumeClaim": {
        "claimName": ""}}]), "spec.volumes[0].persistentVolumeClaim.claimName: Required value"),
    ("volume-name", lambda p: p["spec"].update(volumes=[{"name": "V_1", "emptyDir": {}}]),
     "spec.volumes[0].name: Invalid value: \"V_1\": a lowercase RFC 1123 label must consist of lower case "
     "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
     "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
    ("pod-level-extended", lambda p: p["spec"].update(resources={"requests": {EXAMPLE: "1"}}),
     f'[spec.resources.requests[{EXAMPLE}]: Unsupported value: "{EXAMPLE}": supported values: "cpu", "hugepages-", '
     '"memory", spec.resources.limits: Required value: Limit must be set for non overcommitable resources]'),
    ("host-network-port", lambda p: (p["spec"].update(hostNetwork=True),
                                     _main(p).update(ports=[{"containerPort": 80, "hostPort": 81}])),
     "spec.containers[0].ports[0].hostPort: Invalid value: 81: must match `containerPort` when `hostNetwork` is true"),
    ("host-port-twice", lambda p: _main(p).update(ports=[{"containerPort": 80, "hostPort": 8080},
                                                         {"containerPort": 81, "hostPort": 8080}]),
     'spec.containers[0].ports[1].hostPort: Duplicate value: "TCP//8080"'),
    ("active-deadline", lambda p: p["spec"].update(activeDeadlineSeconds=0),
     "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"),
    ("dns-policy", lambda p: p["spec"].update(dnsPolicy="Weird"),
     'spec.dnsPolicy: Unsupported value: "Weird": supported values: "ClusterFirstWithHostNet", "ClusterFirst", '
     '"Default", "None"'),
    ("node-name", lambda p: p["spec"].update(nodeName="Bad_Node"),
     "spec.nodeName: Invalid value: \"Bad_Node\": a lowercase RFC 1123 subdomain must consist of lower case "
     "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
     "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
]


@pytest.mark.parametrize(("change", "message"), [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_invalid_pod_spec(cluster: Cluster, ns: str, change: Callable[[Object], Any], message: str) -> None:
    pod = pod_with(ns)
    change(pod)
    refused(lambda: cluster.create(PODS, pod), 422, "Invalid", f'Pod "x" is invalid: {message}')


def test_a_volume_without_a_source_is_an_empty_dir(cluster: Cluster, ns: str) -> None:
    pod = cluster.create(PODS, pod_with(ns, volumes=[{"name": "scratch"}]))
    assert pod["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]


# --- pods/binding in 1.35: PodTopologyLabels and ClearingNominatedNodeNameAfterBinding (beta, on) ----


def labelled_node(cluster: Cluster) -> str:
    name = unique("zoned")
    cluster.create(NODES, make_node(name, labels={"topology.kubernetes.io/zone": "z1",
                                                  "topology.kubernetes.io/region": "r1", "disk": "ssd"}))
    return name


def test_binding_copies_the_nodes_topology_labels_and_clears_the_nomination(cluster: Cluster, ns: str) -> None:
    node = labelled_node(cluster)
    cluster.create(PODS, make_pod("b", namespace=ns, labels={"app": "web", "topology.kubernetes.io/zone": "old"}))
    cluster.patch(PODS, "b", {"status": {"nominatedNodeName": node}}, ns, subresource="status")
    cluster.bind(ns, "b", node)
    pod = cluster.get(PODS, "b", ns)
    assert pod["metadata"]["labels"] == {"app": "web", "topology.kubernetes.io/zone": "z1",
                                         "topology.kubernetes.io/region": "r1"}
    assert "nominatedNodeName" not in pod["status"]


def test_a_pod_created_on_a_node_gets_its_topology_labels(cluster: Cluster, ns: str) -> None:
    node = labelled_node(cluster)
    pod = cluster.create(PODS, make_pod("on", namespace=ns, node_name=node))
    assert pod["metadata"]["labels"] == {"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1"}


def test_a_gated_pod_cannot_be_bound(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("g", namespace=ns, scheduling_gates=["example.com/wait"]))
    refused(lambda: cluster.bind(ns, "g", "node-1"), 409, "Conflict",
            'Operation cannot be fulfilled on pods/binding "g": pod g has non-empty .spec.schedulingGates')
