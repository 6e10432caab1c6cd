"""The workbook's settings for a class on one cluster, and the reset between chapters.

- `workbook_namespace()`: where the chapters and labs create their objects. One setting,
  `MINISCHED_NAMESPACE` (default "default"), so thirty students on one cluster each work in their
  own namespace; with `MINISCHED_SCHEDULER_NAME` (default "minisched") each runs a scheduler that
  only takes their own pods.
- `reset(cluster)`: back to the chapters' starting state without recreating the cluster. In a
  namespace: every pod (at once, no grace), lease, event and workbook custom object goes. With
  `cluster_wide=True` (an instructor between chapters): the same in every namespace but the
  system ones, plus the nodes the chapters created (those labelled minisched.dev/chapter, and
  nodes without a kubelet or KWOK behind them),
  the workbook's CustomResourceDefinitions, minisched's leader and shard leases, the shards'
  capacity ledgers, and the kind workers put
  back to deploy/kind.yaml's labels and taints, uncordoned.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from minisched.cluster.base import Cluster
from minisched.errors import AlreadyExists, ApiError, NotFound
from minisched.objects import CHAPTER_LABEL
from minisched.resources import CONFIG_MAPS, CRDS, EVENTS, LEASES, NAMESPACES, NODES, PODS, Resource
from minisched.sharding.fence import LEDGER_LABEL

NAMESPACE_ENV = "MINISCHED_NAMESPACE"
SCHEDULER_NAME_ENV = "MINISCHED_SCHEDULER_NAME"
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", "local-path-storage"})
# custom resources the chapters, labs and minisched itself define
WORKBOOK_GROUP_SUFFIXES = ("minisched.dev", "minisched.io", "scheduling.x-k8s.io")
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KIND_CONFIG = Path(__file__).resolve().parent.parent / "deploy" / "kind.yaml"
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

Object = dict[str, Any]


def workbook_namespace(default: str = "default") -> str:
    """MINISCHED_NAMESPACE, or the chapter's own `default`; a name the API server would refuse is
    an error here, naming the setting."""
    name = os.environ.get(NAMESPACE_ENV, "").strip() or default
    if len(name) > 63 or not _DNS1123_LABEL.match(name):
        raise ValueError(f"{NAMESPACE_ENV}={name!r} is not a namespace name: use lower-case letters, digits "
                         "and '-', starting and ending with a letter or digit, at most 63 characters")
    return name


def workbook_scheduler_name() -> str:
    """MINISCHED_SCHEDULER_NAME, or "minisched": the schedulerName of the workbook's pods."""
    return os.environ.get(SCHEDULER_NAME_ENV, "").strip() or "minisched"


def ensure_namespace(cluster: Cluster, name: str | None = None) -> str:
    """Create the workbook namespace if it is missing; returns its name."""
    name = name or workbook_namespace()
    try:
        cluster.get(NAMESPACES, name)
    except NotFound:
        with contextlib.suppress(AlreadyExists):  # created meanwhile by another run: fine
            cluster.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@dataclass
class ResetReport:
    deleted: dict[str, int] = field(default_factory=dict)
    restored_nodes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def count(self, what: str, n: int = 1) -> None:
        self.deleted[what] = self.deleted.get(what, 0) + n

    def __str__(self) -> str:
        parts = [f"{n} {what}" for what, n in sorted(self.deleted.items()) if n]
        text = "deleted " + (", ".join(parts) if parts else "nothing")
        if self.restored_nodes:
            text += f"; restored nodes {', '.join(self.restored_nodes)} to deploy/kind.yaml"
        for problem in self.problems:
            text += f"\n  problem: {problem}"
        return text


def _items(cluster: Cluster, resource: Resource | str, namespace: str | None = None) -> list[Object]:
    return list(cluster.list(resource, namespace).get("items") or [])


def _delete(cluster: Cluster, report: ResetReport, what: str, resource: Resource | str, obj: Object,
            **options: Any) -> None:
    meta = obj["metadata"]
    try:
        cluster.delete(resource, meta["name"], meta.get("namespace"), **options)
    except NotFound:
        return  # gone meanwhile
    except ApiError as err:
        report.problems.append(f"could not delete {what} {meta.get('namespace', '')}/{meta['name']}: {err}")
        return
    report.count(what)


def workbook_crds(cluster: Cluster) -> list[Object]:
    return [crd for crd in _items(cluster, CRDS)
            if str(crd["spec"].get("group", "")).endswith(WORKBOOK_GROUP_SUFFIXES)]


def _crd_resource(crd: Object) -> Resource:
    spec = crd["spec"]
    version = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), spec["versions"][0]["name"])
    return Resource(spec["group"], version, spec["names"]["plural"], spec["names"]["kind"],
                    spec.get("scope") == "Namespaced")


def workbook_made(node: Object) -> bool:
    """A node the chapters created: it carries the chapter label (KWOK may keep it alive, so it may
    report a kubelet version), or no kubelet reports on it and KWOK does not keep it."""
    if CHAPTER_LABEL in (node["metadata"].get("labels") or {}):
        return True
    info = (node.get("status") or {}).get("nodeInfo") or {}
    annotations = node["metadata"].get("annotations") or {}
    return not info.get("kubeletVersion") and KWOK_NODE_ANNOTATION not in annotations


def kind_baseline(path: Path = KIND_CONFIG) -> dict[str, Object]:
    """{node name: {"labels": ..., "taints": [...]}} for the workers deploy/kind.yaml declares, named
    as kind names them (<cluster>-worker, <cluster>-worker2, ...)."""
    config = yaml.safe_load(path.read_text())
    cluster_name = config.get("name", "kind")
    workers = [n for n in config.get("nodes") or [] if n.get("role") == "worker"]
    baseline: dict[str, Object] = {}
    for i, worker in enumerate(workers):
        taints: list[Object] = []
        for patch in worker.get("kubeadmConfigPatches") or []:
            registration = (yaml.safe_load(patch) or {}).get("nodeRegistration") or {}
            taints += registration.get("taints") or []
        name = f"{cluster_name}-worker{'' if i == 0 else i + 1}"
        baseline[name] = {"labels": dict(worker.get("labels") or {}), "taints": taints}
    return baseline


def _restore_node(cluster: Cluster, report: ResetReport, node: Object, want: Object) -> None:
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    patch: Object = {}
    missing = {k: v for k, v in want["labels"].items() if labels.get(k) != v}
    if missing:
        patch.setdefault("metadata", {})["labels"] = missing
    if node.get("spec", {}).get("unschedulable"):
        patch.setdefault("spec", {})["unschedulable"] = None
    if ((node.get("spec") or {}).get("taints") or []) != want["taints"]:
        patch.setdefault("spec", {})["taints"] = want["taints"] or None
    if patch:
        cluster.patch(NODES, name, patch)
        report.restored_nodes.append(name)


def reset(cluster: Cluster, namespace: str | None = None, *, cluster_wide: bool = False,
          kind_config: Path = KIND_CONFIG) -> ResetReport:
    """Return the cluster to the chapters' starting state (see the module docstring)."""
    report = ResetReport()
    if cluster_wide:
        namespaces = [n["metadata"]["name"] for n in _items(cluster, NAMESPACES)
                      if n["metadata"]["name"] not in SYSTEM_NAMESPACES]
    else:
        namespaces = [namespace or workbook_namespace()]
    crds = workbook_crds(cluster)
    for ns in namespaces:
        for pod in _items(cluster, PODS, ns):
            _delete(cluster, report, "pods", PODS, pod, grace_period_seconds=0)
        for lease in _items(cluster, LEASES, ns):
            _delete(cluster, report, "leases", LEASES, lease)
        for event in _items(cluster, EVENTS, ns):
            _delete(cluster, report, "events", EVENTS, event)
        for crd in crds:
            resource = _crd_resource(crd)
            if resource.namespaced:
                try:
                    objects = _items(cluster, resource, ns)
                except ApiError:  # defined but not served yet
                    continue
                for obj in objects:
                    _delete(cluster, report, resource.plural, resource, obj)
    if not cluster_wide:
        return report
    for lease in _items(cluster, LEASES, "kube-system"):
        if lease["metadata"]["name"].startswith("minisched"):
            _delete(cluster, report, "leases", LEASES, lease)
    for ledger in _items(cluster, CONFIG_MAPS, "kube-system"):  # sharded replicas' capacity ledgers
        if (ledger["metadata"].get("labels") or {}).get(LEDGER_LABEL):
            _delete(cluster, report, "configmaps", CONFIG_MAPS, ledger)
    for crd in crds:
        _delete(cluster, report, "customresourcedefinitions", CRDS, crd)
    baseline = kind_baseline(kind_config) if kind_config.exists() else {}
    for node in _items(cluster, NODES):
        name = node["metadata"]["name"]
        if name in baseline:
            _restore_node(cluster, report, node, baseline[name])
        elif workbook_made(node):
            _delete(cluster, report, "nodes", NODES, node)
    return report


def names(objects: Iterable[Object]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


def nodes_not_ready(cluster: Cluster, names: Iterable[str]) -> dict[str, str]:
    """{node: why it is not ready yet} for those of `names` that are missing, not Ready=True, or
    still carry the not-ready/unreachable taint the node lifecycle controller manages."""
    waiting: dict[str, str] = {}
    for name in names:
        try:
            node = cluster.get(NODES, name)
        except NotFound:
            waiting[name] = "not found"
            continue
        ready: Object = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
        taints = [t["key"] for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") in NOT_READY_TAINTS]
        if ready.get("status") != "True":
            waiting[name] = f"Ready={ready.get('status', 'missing')}"
        elif taints:
            waiting[name] = "tainted " + ", ".join(taints)
    return waiting


def wait_for_nodes_ready(cluster: Cluster, names: Iterable[str], *, timeout: float = 60.0,
                         poll: float = 0.2) -> None:
    """Return once every node in `names` is Ready and free of the not-ready/unreachable taints.

    On kind, TaintNodesByCondition admission taints a new node not-ready until the node lifecycle
    controller sees KWOK's first heartbeat (about a second); scheduling before then would find the
    chapter's nodes tainted. The embedded cluster has no such controller: this returns at once.
    A TimeoutError names each node still waiting and why."""
    wanted = list(names)
    deadline = time.monotonic() + timeout
    while True:
        waiting = nodes_not_ready(cluster, wanted)
        if not waiting:
            return
        if time.monotonic() >= deadline:
            detail = "; ".join(f"{n}: {why}" for n, why in sorted(waiting.items()))
            raise TimeoutError(f"nodes not ready after {timeout:.0f} s ({detail}); on kind, is KWOK running "
                               f"(make cluster-up installs it) and managing nodes labelled {CHAPTER_LABEL}?")
        time.sleep(poll)


def join_node_when_ready(cluster: Cluster, node: Object, chapter: str, *, timeout: float = 60.0) -> Object:
    """Create `node` for chapter `chapter` so that a scheduler scoped to the chapter first sees it
    Ready and untainted: it is created labelled `<chapter>-joining` (KWOK on kind heartbeats it,
    the chapter's scheduler does not see it), waited for, then relabelled into the chapter, which its
    scheduler's node informer sees as the node appearing. On kind a node created straight into
    scope is seen first with the not-ready taint, and pods waiting for it fail once more on it."""
    name = node["metadata"]["name"]
    joining = {**node, "metadata": {**node["metadata"],
                                    "labels": {**(node["metadata"].get("labels") or {}),
                                               CHAPTER_LABEL: f"{chapter}-joining"}}}
    cluster.create(NODES, joining)
    wait_for_nodes_ready(cluster, [name], timeout=timeout)
    return cluster.patch(NODES, name, {"metadata": {"labels": {CHAPTER_LABEL: chapter}}})
