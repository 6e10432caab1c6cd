"""§2.3 worked example: MiniReplicaSet, a small ReplicaSet-like custom resource, and its reconciler.

    spec:   {replicas: N, selector: {matchLabels: {...}}, template: {metadata: {labels}, spec: <pod spec>}}
    status: {replicas: <pods it owns>, observedGeneration}

The reconciler reads the MiniReplicaSet and its pods from the informers' caches, then creates or
deletes pods until N exist, and writes status. It never asks "what happened?": it counts. So a
burst of events, an event lost while the controller was down, or the same event twice all lead to
the same action.

Pods are named <set>-<index> with the smallest free indexes and deleted from the highest, so the
action computed from a cache that lags behind is the same as the one before it: creating a pod
that exists already is a 409 AlreadyExists (nothing is created twice) and deleting one that is
gone is a 404 (nothing extra is deleted). That makes the reconciler idempotent without
client-go's "expectations" bookkeeping.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from minisched.cluster.base import Cluster
from minisched.controllers.reconciler import Kind, Request, Result, raw_kind
from minisched.errors import AlreadyExists, Conflict, NotFound
from minisched.informer import SharedInformerFactory
from minisched.meta import name_of, namespace_of, uid_of
from minisched.objects import DEFAULT_SCHEDULER_NAME
from minisched.resources import PODS, Resource

Object = dict[str, Any]

GROUP = "workbook.minisched.io"
VERSION = "v1alpha1"
KIND = "MiniReplicaSet"
PLURAL = "minireplicasets"
OWNER_INDEX = "controller-owner-uid"


def crd() -> Object:
    """The CustomResourceDefinition that serves MiniReplicaSets (apiextensions.k8s.io/v1)."""
    labels = {"type": "object", "additionalProperties": {"type": "string"}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "minireplicaset", "kind": KIND, "shortNames": ["mrs"]},
            "versions": [{
                "name": VERSION, "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["replicas", "selector", "template"],
                            "properties": {
                                "replicas": {"type": "integer", "minimum": 0, "maximum": 1000},
                                "selector": {"type": "object", "properties": {"matchLabels": labels}},
                                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        },
                        "status": {"type": "object", "properties": {
                            "replicas": {"type": "integer"}, "observedGeneration": {"type": "integer"},
                        }},
                    },
                }},
            }],
        },
    }  # fmt: skip


RESOURCE: Resource = Resource.from_crd(crd())


@dataclass
class MiniReplicaSet:
    """The typed view of the custom resource (decoded from and encoded to the API's JSON)."""

    name: str
    namespace: str
    replicas: int
    match_labels: dict[str, str]
    template: Object
    uid: str = ""
    generation: int = 0
    status_replicas: int = 0
    observed_generation: int = 0
    raw: Object = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: Object) -> MiniReplicaSet:
        spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
        replicas = spec.get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ValueError(
                f"{KIND} {namespace_of(obj)}/{name_of(obj)}: spec.replicas must be an integer ≥ 0"
            )
        return cls(
            name=name_of(obj), namespace=namespace_of(obj), replicas=replicas,
            match_labels=dict((spec.get("selector") or {}).get("matchLabels") or {}),
            template=copy.deepcopy(spec.get("template") or {}), uid=uid_of(obj),
            generation=int(meta.get("generation") or 0), status_replicas=int(status.get("replicas") or 0),
            observed_generation=int(status.get("observedGeneration") or 0), raw=obj,
        )  # fmt: skip

    def to_json(self) -> Object:
        obj: Object = (
            copy.deepcopy(self.raw) if self.raw else {"apiVersion": RESOURCE.api_version, "kind": KIND}
        )
        obj.setdefault("metadata", {}).update({"name": self.name, "namespace": self.namespace})
        obj["spec"] = {
            "replicas": self.replicas,
            "selector": {"matchLabels": dict(self.match_labels)},
            "template": copy.deepcopy(self.template),
        }
        return obj


MINI_REPLICA_SETS: Kind[MiniReplicaSet] = Kind(RESOURCE, MiniReplicaSet.from_json, MiniReplicaSet.to_json)


def make_mini_replica_set(
    name: str,
    replicas: int,
    *,
    namespace: str = "default",
    app: str | None = None,
    cpu: str = "100m",
    memory: str = "64Mi",
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
) -> Object:
    labels = {"app": app or name}
    return MiniReplicaSet(
        name=name, namespace=namespace, replicas=replicas, match_labels=labels,
        template={
            "metadata": {"labels": labels},
            "spec": {
                "schedulerName": scheduler_name,
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            },
        },
    ).to_json()  # fmt: skip


def owner_uid_index(obj: Object) -> list[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [ref["uid"] for ref in refs if ref.get("controller") and ref.get("uid")]


_INDEX_NAME = re.compile(r"-(\d+)$")


def pod_index(pod: Object, set_name: str) -> int | None:
    name = name_of(pod)
    match = _INDEX_NAME.search(name)
    if not name.startswith(set_name + "-") or match is None:
        return None
    return int(match.group(1))


@dataclass
class ReconcileReport:
    """What the last reconcile of each set did (for notebooks and tests)."""

    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    already_existed: int = 0
    already_gone: int = 0
    invalid: str | None = None  # the spec could not be decoded: nothing done until it changes

    @property
    def acted(self) -> bool:
        return bool(self.created or self.deleted or self.already_existed or self.already_gone or self.invalid)


class MiniReplicaSetReconciler:
    """Reconciler[MiniReplicaSet, Object]: keeps spec.replicas pods of the template in existence."""

    def __init__(
        self, cluster: Cluster, factory: SharedInformerFactory, *, namespace: str | None = None
    ) -> None:
        self.cluster = cluster
        self.sets = factory.informer_for(RESOURCE, namespace=namespace)
        self.pods = factory.informer_for(PODS, namespace=namespace, indexers={OWNER_INDEX: owner_uid_index})
        self.last: dict[str, ReconcileReport] = {}  # the latest reconcile of each key
        self.actions: dict[str, list[ReconcileReport]] = {}  # every reconcile that did something

    def _record(self, key: str, report: ReconcileReport) -> None:
        self.last[key] = report
        if report.acted:
            self.actions.setdefault(key, []).append(report)

    @property
    def primary(self) -> Kind[MiniReplicaSet]:
        return MINI_REPLICA_SETS

    @property
    def owned(self) -> Kind[Object]:
        return raw_kind(PODS)

    def owned_pods(self, rs: MiniReplicaSet) -> list[Object]:
        """Live (not terminating) pods whose controller owner is `rs`, from the cache."""
        pods = self.pods.store.by_index(OWNER_INDEX, rs.uid)
        return [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]

    def reconcile(self, request: Request) -> Result:
        raw = self.sets.store.get_by_key(request.key)
        if raw is None:
            return Result()  # deleted: its pods go with it (garbage collection by ownerReferences)
        report = ReconcileReport()
        try:
            rs = MINI_REPLICA_SETS.decode(raw)
        except ValueError as error:
            # Retrying cannot fix a bad spec; the next edit of the object brings a new request.
            report.invalid = str(error)
            self._record(request.key, report)
            return Result()
        pods = self.owned_pods(rs)
        diff = rs.replicas - len(pods)
        if diff > 0:
            taken = {pod_index(p, rs.name) for p in pods}
            free = (i for i in range(10**6) if i not in taken)
            for _ in range(diff):
                name = f"{rs.name}-{next(free)}"
                try:
                    self.cluster.create(PODS, self._pod(rs, name), rs.namespace)
                    report.created.append(name)
                except AlreadyExists:
                    report.already_existed += 1  # the cache has not seen it yet: not created twice
        elif diff < 0:
            doomed = sorted(pods, key=lambda p: (pod_index(p, rs.name) or -1, name_of(p)), reverse=True)[
                :-diff
            ]
            for pod in doomed:
                try:
                    self.cluster.delete(PODS, name_of(pod), rs.namespace, preconditions={"uid": uid_of(pod)})
                    report.deleted.append(name_of(pod))
                except NotFound:
                    report.already_gone += 1
                except Conflict:
                    report.already_gone += 1  # a different pod of that name now: not ours to delete
        self._record(request.key, report)
        observed = len(pods) + len(report.created) - len(report.deleted)
        if observed != rs.status_replicas or rs.observed_generation != rs.generation:
            status = {"replicas": observed, "observedGeneration": rs.generation}
            self.cluster.patch(RESOURCE, rs.name, {"status": status}, rs.namespace, subresource="status")
        return Result()

    def _pod(self, rs: MiniReplicaSet, name: str) -> Object:
        template = copy.deepcopy(rs.template)
        meta = template.get("metadata") or {}
        labels = {**(meta.get("labels") or {}), **rs.match_labels}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": rs.namespace,
                "labels": labels,
                "ownerReferences": [{
                    "apiVersion": RESOURCE.api_version, "kind": KIND, "name": rs.name, "uid": rs.uid,
                    "controller": True, "blockOwnerDeletion": True,
                }],
            },
            "spec": template.get("spec") or {},
        }  # fmt: skip
