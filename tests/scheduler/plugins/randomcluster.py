"""Random clusters and pods for checking each plugin's vectorised method against its pure rule."""

from __future__ import annotations

import random
from typing import Any

from minisched.objects import make_node, make_pod, taint, toleration
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

Object = dict[str, Any]

KEYS = ["zone", "disk", "gen", "team"]
VALUES = ["a", "b", "c", "1", "5", "10", "x1"]
EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
IMAGES = ["nginx:1", "redis", "app:2", "big:1"]
GPU = "example.com/gpu"
# an image has one size wherever it is (kube's cache keeps one size per image name)
IMAGE_SIZES = {"nginx:1": 10 * 2**20, "redis": 200 * 2**20, "app:2": 900 * 2**20, "big:1": 3000 * 2**20}


def random_node(rng: random.Random, name: str) -> Object:
    labels = {k: rng.choice(VALUES) for k in KEYS if rng.random() < 0.6}
    taints = [taint(rng.choice(KEYS), rng.choice(VALUES[:3]), rng.choice(EFFECTS)) for _ in range(rng.randint(0, 2))]
    images = [(img, IMAGE_SIZES[img]) for img in IMAGES if rng.random() < 0.4]
    extra = {GPU: str(rng.randint(0, 4))} if rng.random() < 0.5 else None
    return make_node(
        name,
        cpu=rng.choice(["1", "2", "4", "3500m"]),
        memory=rng.choice(["1Gi", "4Gi", "8Gi"]),
        pods=str(rng.randint(1, 6)),
        ephemeral_storage=rng.choice([None, "10Gi"]),
        extra_resources=extra,
        labels=labels,
        taints=taints,
        unschedulable=rng.random() < 0.1,
        images=images,
    )


def random_requirement(rng: random.Random) -> Object:
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    r: Object = {"key": rng.choice(KEYS), "operator": op}
    if op in ("In", "NotIn"):
        r["values"] = rng.sample(VALUES, rng.randint(1, 3))
    elif op in ("Gt", "Lt"):
        r["values"] = [str(rng.randint(0, 8))]
    return r


def random_term(rng: random.Random) -> Object:
    term: Object = {"matchExpressions": [random_requirement(rng) for _ in range(rng.randint(0, 2))]}
    if rng.random() < 0.2:
        term["matchFields"] = [{"key": "metadata.name", "operator": rng.choice(["In", "NotIn"]),
                                "values": [f"n{rng.randint(0, 9)}"]}]
    return term


def random_pod(rng: random.Random, name: str) -> Object:
    affinity: Object = {}
    if rng.random() < 0.5:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [random_term(rng) for _ in range(rng.randint(0, 2))]
        }
    if rng.random() < 0.6:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.randint(1, 100), "preference": random_term(rng)} for _ in range(rng.randint(1, 3))
        ]
    tolerations = []
    for _ in range(rng.randint(0, 2)):
        if rng.random() < 0.2:
            tolerations.append(toleration(operator="Exists", effect=rng.choice(["", *EFFECTS])))
        elif rng.random() < 0.5:
            tolerations.append(toleration(rng.choice(KEYS), operator="Exists", effect=rng.choice(["", *EFFECTS])))
        else:
            tolerations.append(toleration(rng.choice(KEYS), rng.choice(VALUES[:3]), rng.choice(["", *EFFECTS])))
    pod = make_pod(
        name,
        cpu=rng.choice([None, "100m", "500m", "1", "2"]),
        memory=rng.choice([None, "128Mi", "1Gi", "3Gi"]),
        extra_requests={GPU: str(rng.randint(1, 2))} if rng.random() < 0.2 else None,
        image=rng.choice(IMAGES),
        node_selector={rng.choice(KEYS): rng.choice(VALUES)} if rng.random() < 0.2 else None,
        affinity={"nodeAffinity": affinity} if affinity else None,
        tolerations=tolerations,
        host_ports=[rng.choice([80, 443])] if rng.random() < 0.3 else None,
    )
    if rng.random() < 0.3:
        pod["spec"]["initContainers"] = [{"name": "init", "image": rng.choice(IMAGES),
                                         "resources": {"requests": {"cpu": rng.choice(["1", "3"])}}}]
    return pod


def random_cluster(rng: random.Random, num_nodes: int = 10, num_pods: int = 12) -> tuple[NodeTable, list[Object], dict[str, list[PodInfo]]]:
    """A NodeTable, the node objects, and the pods placed on each node (with no regard to fit)."""
    table = NodeTable()
    nodes = [random_node(rng, f"n{i}") for i in range(num_nodes)]
    for n in nodes:
        table.add_node(n)
    placed: dict[str, list[PodInfo]] = {n["metadata"]["name"]: [] for n in nodes}
    for i in range(num_pods):
        target = rng.choice(nodes)["metadata"]["name"]
        info = PodInfo.from_pod(random_pod(rng, f"placed-{i}"))
        table.add_pod(target, info)
        placed[target].append(info)
    if rng.random() < 0.5:  # exercise row removal and the copy-on-write snapshot too
        gone = rng.choice(nodes)["metadata"]["name"]
        snap = table.snapshot()
        table.remove_node(gone)
        assert gone in snap.names
        nodes = [n for n in nodes if n["metadata"]["name"] != gone]
        del placed[gone]
    return table.snapshot(), nodes, placed


def table_of(nodes: list[Object], placed: dict[str, list[Object]] | None = None) -> NodeTable:
    """A snapshot of `nodes` with the given pod objects placed on them."""
    table = NodeTable()
    for n in nodes:
        table.add_node(n)
    for node_name, pods in (placed or {}).items():
        for p in pods:
            table.add_pod(node_name, PodInfo.from_pod(p))
    return table.snapshot()
