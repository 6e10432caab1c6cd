"""Services, ReplicaSets, StatefulSets and ReplicationControllers (what PodTopologySpread's default
selectors are read from): what the API server defaults and what it refuses, on both backends."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.errors import ApiError
from minisched.resources import REPLICA_SETS, REPLICATION_CONTROLLERS, SERVICES, STATEFUL_SETS, Resource

Object = dict[str, Any]
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}


def apps(kind: str, name: str, selector: Any, template: Object | None = None) -> Object:
    spec: Object = {"template": template or TEMPLATE}
    if selector is not None:
        spec["selector"] = selector
    if kind == "StatefulSet":
        spec["serviceName"] = "web"
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def test_defaults_on_create(cluster: Cluster, ns: str) -> None:
    rs = cluster.create(REPLICA_SETS, apps("ReplicaSet", "rs", {"matchLabels": {"app": "web"}}), ns)
    assert rs["spec"]["replicas"] == 1 and rs["metadata"]["generation"] == 1
    sts = cluster.create(STATEFUL_SETS, apps("StatefulSet", "sts", {"matchLabels": {"app": "web"}}), ns)
    assert sts["spec"]["replicas"] == 1 and sts["spec"]["podManagementPolicy"] == "OrderedReady"
    rc = cluster.create(REPLICATION_CONTROLLERS, {"apiVersion": "v1", "kind": "ReplicationController",
                                                  "metadata": {"name": "rc"}, "spec": {"template": TEMPLATE}}, ns)
    assert rc["spec"]["selector"] == {"app": "web"} and rc["metadata"]["labels"] == {"app": "web"}
    svc = cluster.create(SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                                    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}, ns)
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["sessionAffinity"] == "None"
    assert svc["spec"]["ports"][0]["protocol"] == "TCP" and svc["spec"]["ports"][0]["targetPort"] == 80
    headless = cluster.create(SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "h"},
                                         "spec": {"clusterIP": "None", "selector": {"app": "web"}}}, ns)
    assert headless["spec"]["selector"] == {"app": "web"}
    assert {s["metadata"]["name"] for s in cluster.list(SERVICES, ns)["items"]} == {"web", "h"}


CASES: list[tuple[str, Resource, Object, str, list[str]]] = [
    ("rs-without-selector", REPLICA_SETS, apps("ReplicaSet", "x", None), "spec.selector: Required value",
     ["spec.selector"]),
    ("rs-empty-selector", REPLICA_SETS, apps("ReplicaSet", "x", {}), "empty selector is invalid for deployment",
     ["spec.selector"]),
    ("rs-selector-not-matching", REPLICA_SETS, apps("ReplicaSet", "x", {"matchLabels": {"app": "db"}}),
     "`selector` does not match template `labels`", ["spec.template.metadata.labels"]),
    ("sts-selector-not-matching", STATEFUL_SETS, apps("StatefulSet", "x", {"matchLabels": {"app": "db"}}),
     "`selector` does not match template `labels`", ["spec.template.metadata.labels"]),
    ("rc-selector-not-matching", REPLICATION_CONTROLLERS,
     {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "x"},
      "spec": {"selector": {"app": "db"}, "template": TEMPLATE}},
     "`selector` does not match template `labels`", ["spec.template.metadata.labels"]),
    ("service-without-ports", SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
                                         "spec": {"selector": {"app": "web"}}},
     "spec.ports: Required value", ["spec.ports"]),
]


@pytest.mark.parametrize(("case", "resource", "obj", "message", "fields"), CASES, ids=[c[0] for c in CASES])
def test_refused(cluster: Cluster, ns: str, case: str, resource: Resource, obj: Object, message: str,
                 fields: list[str]) -> None:
    with pytest.raises(ApiError) as err:
        cluster.create(resource, obj, ns)
    assert err.value.status == 422
    assert message in err.value.message, err.value.message
    assert [c.field for c in err.value.causes if c.field][: len(fields)] == fields
