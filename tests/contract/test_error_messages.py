"""The wording of errors, as kube-apiserver 1.35 words them (checked against it), so that what a
notebook prints on the embedded cluster is what it would print on a real one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.errors import ApiError
from minisched.objects import make_pod
from minisched.resources import CONFIG_MAPS, NAMESPACES, NODES, PODS

from .conftest import unique

Call = Callable[[Cluster, str], Any]

DNS_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _pod(spec: dict) -> Call:
    return lambda c, ns: c.create(PODS, {"metadata": {"name": "x"}, "spec": spec}, ns)


CASES: list[tuple[str, Call, int, str, list[str]]] = [
    ("no-name", lambda c, ns: c.create(CONFIG_MAPS, {"metadata": {}}, ns), 422,
     'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required', ["metadata.name"]),
    ("bad-name", lambda c, ns: c.create(CONFIG_MAPS, {"metadata": {"name": "Bad_Name"}}, ns), 422,
     f'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {DNS_SUBDOMAIN}', ["metadata.name"]),
    ("namespace-with-dots", lambda c, ns: c.create(NAMESPACES, {"metadata": {"name": "a.b"}}), 422,
     'Namespace "a.b" is invalid: metadata.name: Invalid value: "a.b": must not contain dots', ["metadata.name"]),
    ("no-containers", _pod({"containers": []}), 422,
     'Pod "x" is invalid: spec.containers: Required value', ["spec.containers"]),
    ("no-image", _pod({"containers": [{"name": "c"}]}), 422,
     'Pod "x" is invalid: spec.containers[0].image: Required value', ["spec.containers[0].image"]),
    ("duplicate-container", _pod({"containers": [{"name": "c", "image": "i"}, {"name": "c", "image": "i"}]}), 422,
     'Pod "x" is invalid: spec.containers[1].name: Duplicate value: "c"', ["spec.containers[1].name"]),
    ("restart-policy", _pod({"restartPolicy": "Sometimes", "containers": [{"name": "c", "image": "i"}]}), 422,
     'Pod "x" is invalid: spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
     '"OnFailure", "Never"', ["spec.restartPolicy"]),
    ("negative-quantity", lambda c, ns: c.create(PODS, make_pod("x", namespace=ns, cpu="-1")), 422,
     'Pod "x" is invalid: spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than '
     "or equal to 0", ["spec.containers[0].resources.requests[cpu]"]),
    ("requests-over-limits", lambda c, ns: c.create(PODS, make_pod("x", namespace=ns, cpu="2", limits={"cpu": "1"})),
     422, 'Pod "x" is invalid: spec.containers[0].resources.requests: Invalid value: "2": must be less than or '
     "equal to cpu limit of 1", ["spec.containers[0].resources.requests"]),
    ("pod-level-requests-below-containers", lambda c, ns: c.create(PODS, {**make_pod("x", namespace=ns, cpu="300m"),
                                                                          "spec": {**make_pod("x", cpu="300m")["spec"],
                                                                                   "resources": {"requests": {"cpu": "200m"}}}}),
     422, 'Pod "x" is invalid: spec.resources.requests[cpu]: Invalid value: "200m": must be greater than or equal '
     "to aggregate container requests of 300m", ["spec.resources.requests[cpu]"]),
    ("match-label-keys-without-selector", _pod({"containers": [{"name": "c", "image": "i"}],
                                                "topologySpreadConstraints": [{
                                                    "maxSkew": 1, "topologyKey": "zone",
                                                    "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": ["app"]}]}),
     422, 'Pod "x" is invalid: spec.topologySpreadConstraints[0].matchLabelKeys: Forbidden: must not be specified '
     "when labelSelector is not set", ["spec.topologySpreadConstraints[0].matchLabelKeys"]),
    ("malformed-quantity", lambda c, ns: c.create(PODS, make_pod("x", namespace=ns, cpu="abc")), 400,
     'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular expression '
     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'", []),
    ("bad-label-key", lambda c, ns: c.create(CONFIG_MAPS, {"metadata": {"name": "x", "labels": {"-a": "b"}}}, ns),
     422, 'ConfigMap "x" is invalid: metadata.labels: Invalid value: "-a": name part must consist of alphanumeric '
     "characters", ["metadata.labels"]),
    ("bad-label-value", lambda c, ns: c.create(CONFIG_MAPS, {"metadata": {"name": "x", "labels": {"a": "-b"}}}, ns),
     422, 'ConfigMap "x" is invalid: metadata.labels: Invalid value: "-b": a valid label must be an empty string',
     ["metadata.labels"]),
    ("bad-taint-effect", lambda c, ns: c.create(NODES, {"metadata": {"name": unique("bt")}, "spec": {
        "taints": [{"key": "k", "effect": "Bad"}]}}), 422,
     "is invalid: metadata.taints[0].effect: Unsupported value: \"Bad\": supported values: \"NoSchedule\", "
     '"PreferNoSchedule", "NoExecute"', ["metadata.taints[0].effect"]),
    ("namespace-mismatch", lambda c, ns: c.create(CONFIG_MAPS, {"metadata": {"name": "x", "namespace": "default"}}, ns),
     400, "the namespace of the provided object does not match the namespace sent on the request", []),
    ("field-selector-without-operator", lambda c, ns: c.list(PODS, ns, field_selector="spec.nodeName"), 400,
     "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'", []),
    ("resource-version-too-large", lambda c, ns: c.list(PODS, ns, resource_version="999999999"), 504,
     "Timeout: Too large resource version: 999999999, current: ", []),
    ("resource-version-not-a-number", lambda c, ns: c.list(PODS, ns, resource_version="abc"), 400,
     'invalid resource version: resourceVersion: Invalid value: "abc"', []),
    ("continue-token-garbage", lambda c, ns: c.list(PODS, ns, limit=1, continue_token="xyz"), 400,
     "invalid continue token: continue key is not valid: ", []),
]


@pytest.mark.parametrize(("case", "call", "status", "message", "fields"), CASES, ids=[c[0] for c in CASES])
def test_error_messages(cluster: Cluster, ns: str, case: str, call: Call, status: int, message: str,
                        fields: list[str]) -> None:
    with pytest.raises(ApiError) as err:
        call(cluster, ns)
    assert err.value.status == status
    if message.startswith("is invalid"):
        assert message in err.value.message
    else:
        assert err.value.message.startswith(message), err.value.message
    assert [c.field for c in err.value.causes if c.field] == fields
