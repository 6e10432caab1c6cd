"""EmbeddedCluster: an in-process API server with kube-apiserver's semantics for what minisched uses.

One lock guards all state, so every request is atomic and changes are committed (and watched) in
one total order, with one resourceVersion counter, as etcd gives a real server. The contract suite
(tests/contract) runs the same tests here and on kube-apiserver 1.35; where they could not agree,
the embedded cluster does the simpler thing, on purpose:

- Deleting a namespace deletes its contents and the namespace at once (a real server marks it
  Terminating and waits for kube-controller-manager's namespace controller).
- Later pages of a paginated list are rebuilt from the watch history (the real server reads an etcd
  snapshot), so a continue token older than that history answers 410, as after etcd compaction.
- Custom resources are checked against their CRD's schema by minisched.validation.openapi, which
  covers the common OpenAPI keywords and a subset of CEL (rules outside it are not enforced).
- A PodDisruptionBudget whose status no controller has written (observedGeneration behind) is
  evaluated with the disruption controller's arithmetic; a real bare apiserver answers 429 then.
- A watch's final BOOKMARK comes at its timeout (a real server sends it about 2 s earlier), and
  timeout_seconds=0 ends a watch once its backlog is delivered (a real server reads 0 as "default").
- Watch history is a count of changes per resource (`history_window`), not etcd's compaction.

Admission follows kube-apiserver's default plugins for what minisched creates, in its order
(mutating: LimitRanger, Priority, DefaultTolerationSeconds, DefaultStorageClass,
StorageObjectInUseProtection, RuntimeClass, PodTopologyLabels; then validation; then validating:
LimitRanger, RuntimeClass), and stores quantities in canonical form. Not modelled: ResourceQuota (no quota
objects are served), PodSecurity (the default "privileged" level admits everything anyway),
LimitRange items of type PersistentVolumeClaim, and the many pod fields minisched never sets (their
validation is not ported).
"""

from __future__ import annotations

import base64
import binascii
import json
import marshal
import random
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from minisched.clock import Clock, RealClock, rfc3339
from minisched.cluster.base import PATCH_TYPES, Object, PatchType, Watch
from minisched.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Cause,
    Expired,
    NotFound,
    Timeout,
    UnsupportedMediaType,
)
from minisched.resources import (
    CRDS,
    EVENTS_V1,
    LIMIT_RANGES,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    PRIORITY_CLASSES,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    RUNTIME_CLASSES,
    SERVICES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
    Resource,
    ResourceLike,
    resolve,
)
from minisched.selectors import (
    check_field_selector,
    object_fields,
    parse_field_selector,
    parse_label_selector,
)

from . import admission, limitranger, pods, quantities, validation
from .crds import CrdRegistry
from .events import core_to_events_v1, events_v1_to_core
from .faults import Faults
from .jsonvalues import check_merge_patch, clone, merge_patch
from .kinds import BUILTIN_KINDS, Kind, custom_kind, storage_key
from .statuses import (
    already_exists,
    conflict,
    forbidden,
    forbidden_field,
    generate_name_conflict,
    invalid,
    invalid_value,
    namespace_not_found,
    not_found,
    not_supported,
    stale,
)
from .store import ObjectStore, Versioner
from .strategic import schema_for, strategic_merge_patch
from .watchhub import INITIAL_EVENTS_END, Change, EmbeddedWatch, WatchHub

_Entries = list[tuple[tuple[str, str], Object]]  # (namespace, name), object; in key order
_Objects = list[Object]  # (the class's own `list` method shadows the builtin in annotations)

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
# k8s.io/apiserver registry/generic/registry/store.go: with RetryGenerateName (GA and locked on since
# 1.32) a create whose generated name is taken is tried again with a new name, 8 times in all.
GENERATE_NAME_ATTEMPTS = 8
MAX_GENERATED_NAME_PREFIX = 63 - 5  # storage/names: the prefix is cut so that the name stays <= 63
# What kube-apiserver 1.35 names in its 415 for a strategic merge patch of a custom resource.
_CUSTOM_RESOURCE_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
                                "application/apply-patch+yaml")


class EmbeddedCluster:
    """An in-process Kubernetes API (implements minisched.cluster.base.Cluster).

    clock: timestamps and watch timeouts/bookmarks run on it (a VirtualClock makes runs repeatable).
    history_window: how many changes per resource a watch can replay; older versions answer 410.
    bookmark_period: seconds between BOOKMARK events on watches that allow them (real server: ~60).
    max_watch_backlog: close a watch whose consumer falls this many events behind (None: never), as
        the real server closes unresponsive watchers; writers never wait for readers either way.
    seed: makes generated names and uids repeatable.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        history_window: int = 10_000,
        bookmark_period: float = 60.0,
        max_watch_backlog: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.clock: Clock = clock or RealClock()
        self.bookmark_period = bookmark_period
        self.max_watch_backlog = max_watch_backlog
        self._lock = threading.RLock()
        self._rv = Versioner()
        self._stores: dict[str, ObjectStore] = {}
        self._blobs: dict[int, bytes] = {}  # id(stored object) -> marshal.dumps(object), see _commit
        self._hub = WatchHub(history_window)
        self._crds = CrdRegistry()
        self._random = random.Random(seed)
        # base -> name, as kube's names.SimpleNameGenerator (replaceable: a test can make it collide)
        self.name_generator: Callable[[str], str] = self._generate_name
        self._closed = False
        self.faults = Faults(drop=self._drop_watches, compact=self._compact)
        for ns in INITIAL_NAMESPACES:
            self._create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, None)
        for name, value in admission.SYSTEM_PRIORITY_CLASSES.items():
            self._create(PRIORITY_CLASSES, {
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "description": "Used for system critical pods that must not be moved from their "
                "current node.",
            }, None)
        # Like a real server's watch cache, history starts when the server came up: watching from a
        # version older than the bootstrap objects answers 410.
        self._hub.compact(self._rv.current)

    # ------------------------------------------------------------------ the Cluster protocol

    @property
    def name(self) -> str:
        return "embedded"

    def get(self, resource: ResourceLike, name: str, namespace: str | None = None) -> Object:
        r, _ = self._served(resource)
        with self._lock:
            self._request("get")
            obj = self._store(r).get(self._ns(r, namespace), name)
        if obj is None:
            raise not_found(r, name)
        return self._out(r, obj)

    def list(
        self,
        resource: ResourceLike,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Object:
        r, _ = self._served(resource)
        labels = parse_label_selector(label_selector)
        fields = check_field_selector(parse_field_selector(field_selector), r.group, r.kind)
        if limit is not None and limit < 0:
            raise BadRequest(f"limit must be a non-negative integer, not {limit}")
        with self._lock:
            self._request("list")
            self._check_version(resource_version)
            list_rv = self._rv.current
            after = None
            if continue_token:
                list_rv, after = _decode_continue(continue_token)
            ns = namespace if r.namespaced and namespace else None
            items: list[Object] = []
            more = False
            last: tuple[str, str] | None = None
            source: Iterable[tuple[tuple[str, str], Object]]
            if after is not None and list_rv < self._rv.current:
                source = self._snapshot(r, ns, after, list_rv)
            else:
                source = self._store(r).items(ns, after)
            for key, obj in source:
                if not labels.empty() and not labels.matches((obj.get("metadata") or {}).get("labels")):
                    continue
                if not fields.empty() and not fields.matches(object_fields(obj, r.group, r.kind)):
                    continue
                if limit and len(items) >= limit:
                    more = True
                    break
                items.append(obj)
                last = key
            metadata: Object = {"resourceVersion": str(list_rv)}
            if more and last is not None:
                metadata["continue"] = _encode_continue(list_rv, last)
        # Stored objects never change, so copying them out needs no lock (writers are not held up).
        out_items = [self._out(r, obj) for obj in items]
        return {"apiVersion": r.api_version, "kind": f"{r.kind}List", "metadata": metadata, "items": out_items}

    def _snapshot(self, r: Resource, ns: str | None, after: tuple[str, str], rv: int) -> _Entries:
        """The objects after key `after` as they were at version `rv` (later pages of a paginated list
        show the first page's snapshot, as etcd serves them), rebuilt by undoing the changes since."""
        try:
            changes = self._hub.history(storage_key(r)).since(rv)
        except Expired:
            raise Expired(
                "The provided continue parameter is too old to display a consistent list result. You can "
                "start a new list without the continue parameter."
            ) from None
        before: dict[tuple[str, str], Object | None] = {}
        for change in changes:  # the first change after rv tells what the object was at rv
            key = (change.namespace, change.obj["metadata"]["name"])
            if (ns is None or change.namespace == ns) and key > after and key not in before:
                before[key] = None if change.type == "ADDED" else change.old
        current = dict(self._store(r).items(ns, after))
        keys = sorted(set(current) | set(before))
        out: _Entries = []
        for key in keys:
            obj = before[key] if key in before else current[key]
            if obj is not None:
                out.append((key, obj))
        return out

    def create(self, resource: ResourceLike, obj: Object, namespace: str | None = None) -> Object:
        r, _ = self._served(resource)
        _check_object(obj)
        meta = obj.get("metadata") or {}
        # kube's createWithGenerateNameRetry: each try starts again from the request's object
        attempts = GENERATE_NAME_ATTEMPTS if meta.get("generateName") and not meta.get("name") else 1
        with self._lock:
            self._request("create")
            for attempt in range(1, attempts + 1):
                try:
                    return self._out(r, self._create(r, obj, namespace))
                except AlreadyExists:
                    if attempt == attempts:
                        raise
        raise AssertionError("unreachable")  # the loop returns or raises

    def update(self, resource: ResourceLike, obj: Object, *, subresource: str | None = None) -> Object:
        r, kind = self._served(resource)
        _check_object(obj)
        self._check_subresource(r, kind, subresource)
        meta = obj.get("metadata") or {}
        with self._lock:
            self._request("update")
            ns = self._ns(r, meta.get("namespace"))
            name = meta.get("name") or ""
            if not name:
                raise invalid(r.kind, "", [validation.required("metadata.name", "name or generateName is required")],
                              r.group)
            existing = self._store(r).get(ns, name)
            if existing is None:
                if kind.create_on_update and subresource is None:
                    return self._out(r, self._create(r, obj, ns))
                raise not_found(r, name)
            return self._out(r, self._update(r, kind, existing, self._in(r, obj), subresource))

    def patch(
        self,
        resource: ResourceLike,
        name: str,
        patch: Object,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        patch_type: PatchType = "merge",
    ) -> Object:
        if patch_type not in PATCH_TYPES:
            raise ValueError(f"patch_type must be one of {sorted(PATCH_TYPES)}, not {patch_type!r}")
        r, kind = self._served(resource)
        if patch_type == "strategic" and (r.group, r.version, r.plural) not in BUILTIN_KINDS:
            # kube-apiserver's custom resource handler does not list the type (no Go struct to
            # read patch strategies from) and refuses it before anything else.
            raise UnsupportedMediaType(
                "the body of the request was in an unknown format - accepted media types include: "
                + ", ".join(_CUSTOM_RESOURCE_PATCH_TYPES))
        check_merge_patch(patch)
        self._check_subresource(r, kind, subresource)
        with self._lock:
            self._request("patch")
            ns = self._ns(r, namespace)
            existing = self._store(r).get(ns, name)
            if existing is None:
                raise not_found(r, name)
            # Merge into the object as the client sees it (its API version), then store that.
            if patch_type == "strategic":
                patched = strategic_merge_patch(self._out(r, existing), patch, schema_for(r.group, r.kind))
            else:
                patched = merge_patch(self._out(r, existing), patch)
            if not isinstance(patched.get("metadata"), dict):
                raise BadRequest("metadata: the patched object must keep a metadata object")
            patched_name = patched["metadata"].get("name")
            if patched_name != name:
                raise BadRequest(f"the name of the object ({patched_name}) does not match the name on the URL ({name})")
            if r.namespaced and patched["metadata"].get("namespace") != ns:
                raise BadRequest("the namespace of the provided object does not match the namespace sent on the request")
            return self._out(r, self._update(r, kind, existing, self._in(r, patched), subresource, patching=True))

    def delete(
        self,
        resource: ResourceLike,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        preconditions: dict[str, str] | None = None,
    ) -> Object:
        r, _ = self._served(resource)
        with self._lock:
            self._request("delete")
            return self._out(r, self._delete(r, self._ns(r, namespace), name, grace_period_seconds, preconditions))

    def watch(
        self,
        resource: ResourceLike,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = False,
        timeout_seconds: float | None = None,
        send_initial_events: bool | None = None,
        resource_version_match: str | None = None,
    ) -> Watch:
        """Watch from `resource_version`. As on the real server, "" / None and "0" both start with
        synthetic ADDED events for every object that exists now, then stream changes; a specific
        version streams the changes after it (410 Expired, raised from iteration, when the history
        no longer reaches back that far).

        `send_initial_events` (a watch-list, kube 1.34's default-on WatchList; it needs
        resource_version_match="NotOlderThan"): True starts with the current state at any version,
        then, with bookmarks allowed, a BOOKMARK annotated k8s.io/initial-events-end marks its
        end; False starts at `resource_version` (or now) without the state."""
        r, _ = self._served(resource)
        labels = parse_label_selector(label_selector)
        fields = check_field_selector(parse_field_selector(field_selector), r.group, r.kind)
        if timeout_seconds is not None and timeout_seconds < 0:
            raise BadRequest(f"timeoutSeconds must not be negative, not {timeout_seconds}")
        _check_watch_list_options(send_initial_events, resource_version_match)
        with self._lock:
            self._request("watch")
            ns = namespace if r.namespaced and namespace else None
            storage = storage_key(r)
            w = EmbeddedWatch(
                lock=self._lock, clock=self.clock, group=r.group, kind=r.kind, namespace=ns,
                label_selector=labels, field_selector=fields, allow_bookmarks=allow_bookmarks,
                timeout_seconds=timeout_seconds, bookmark_period=self.bookmark_period,
                output=lambda o: self._out(r, o),
                bookmark_object=lambda rv: {"apiVersion": r.api_version, "kind": r.kind,
                                            "metadata": {"resourceVersion": str(rv)}},
                current_rv=lambda: self._rv.current,
                on_close=self._forget_watch,
            )
            rv = 0 if resource_version in (None, "", "0") else _parse_rv(resource_version)
            if rv > self._rv.current:
                w.fail(_too_large(rv, self._rv.current))
                return w
            if send_initial_events or (send_initial_events is None and rv == 0):
                for (obj_ns, _), obj in self._store(r).items(ns):
                    w.push(Change(int(obj["metadata"]["resourceVersion"]), "ADDED", obj, None, obj_ns))
                if send_initial_events and allow_bookmarks:
                    w.push(Change(self._rv.current, INITIAL_EVENTS_END, {}, None, ""))
            elif rv:
                try:
                    for change in self._hub.history(storage).since(rv):
                        if ns is None or change.namespace == ns:
                            w.push(change)
                except ApiError as err:
                    w.fail(err)
                    return w
            w.limit_backlog(self.max_watch_backlog)
            if self._closed:
                w.drop()
            else:
                self._hub.add(storage, w)
            return w

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None,
             resource_version: str | None = None) -> None:
        with self._lock:
            self._request("bind")
            existing = self._store(PODS).get(namespace, name)
            if existing is None:
                raise not_found(PODS, name)
            error = pods.binding_precondition_error(existing, uid, resource_version)
            if error is not None:
                raise error
            error = pods.binding_error(existing)
            if error is not None:
                raise error
            pod = pods.copy_for_bind(existing)  # not a deep copy: bind writes only a few fields
            pods.bind(pod, node_name, self._now(), self._store(NODES).get("", node_name))
            self._commit(PODS, "MODIFIED", pod, existing)

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> None:
        with self._lock:
            self._request("evict")
            pod = self._store(PODS).get(namespace, name)
            if pod is None:
                raise not_found(PODS, name)
            if not pods.can_ignore_pdb(pod):
                self._check_disruption_budget(namespace, pod)
            if not pod["metadata"].get("deletionTimestamp"):
                marked = self._copy(pod)
                pods.set_condition(marked, {
                    "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                }, self._now())
                self._commit(PODS, "MODIFIED", marked, pod)
            self._delete(PODS, namespace, name, grace_period_seconds, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._drop_watches()

    # ------------------------------------------------------------------ helpers for notebooks/tests

    @property
    def resource_version(self) -> int:
        """The current (latest committed) resourceVersion."""
        with self._lock:
            return self._rv.current

    def count(self, resource: ResourceLike, namespace: str | None = None) -> int:
        """How many objects of a resource exist (cheap: no copies)."""
        r, _ = self._served(resource)
        with self._lock:
            store = self._store(r)
            return store.count if namespace is None else len(store.namespace_objects(namespace))

    def __repr__(self) -> str:
        with self._lock:
            counts = ", ".join(f"{key.rsplit('/', 1)[-1]}={store.count}" for key, store in sorted(self._stores.items())
                               if store.count)
            return f"EmbeddedCluster(resourceVersion={self._rv.current}, {counts}, watches={len(self._hub.open_watches())})"

    def open_watch_count(self) -> int:
        with self._lock:
            return len(self._hub.open_watches())

    # ------------------------------------------------------------------ resources and conversion

    def _served(self, resource: ResourceLike) -> tuple[Resource, Kind]:
        if isinstance(resource, str):
            try:
                r = resolve(resource)
            except NotFound:
                with self._lock:
                    found = self._crds.find(resource)
                if found is None:
                    raise NotFound(f'the server doesn\'t have a resource type "{resource}"') from None
                r = found
        else:
            r = resource
        builtin = BUILTIN_KINDS.get((r.group, r.version, r.plural))
        if builtin is not None:
            return builtin
        with self._lock:
            served = self._crds.served(r)
        if served is None:
            raise NotFound("the server could not find the requested resource",
                           details={"group": r.group, "kind": r.plural})
        return served, custom_kind(served)

    def _store(self, r: Resource) -> ObjectStore:
        key = storage_key(r)
        store = self._stores.get(key)
        if store is None:
            store = self._stores[key] = ObjectStore()
        return store

    def _out(self, r: Resource, stored: Object) -> Object:
        """What a client receives: a copy, in the API version it asked for."""
        blob = self._blobs.get(id(stored))
        obj: Object = marshal.loads(blob) if blob is not None else clone(stored)
        if r is EVENTS_V1:
            return core_to_events_v1(obj)
        obj["apiVersion"], obj["kind"] = r.api_version, r.kind
        return obj

    def _copy(self, stored: Object) -> Object:
        """A private, mutable copy of a stored object (to build its next version from)."""
        blob = self._blobs.get(id(stored))
        return marshal.loads(blob) if blob is not None else clone(stored)

    def _in(self, r: Resource, obj: Object) -> Object:
        """What is stored: a copy, in the storage version."""
        given_version, given_kind = obj.get("apiVersion"), obj.get("kind")
        if given_kind and given_kind != r.kind:
            raise BadRequest(f'{given_kind} in version "{given_version or r.version}" cannot be handled as a '
                             f"{r.kind}: the object's kind does not match the resource {r.group_resource}")
        if given_version and given_version != r.api_version:
            given_group = given_version.rpartition("/")[0]
            if given_group != r.group and (r.group, r.version, r.plural) in BUILTIN_KINDS:
                # kube-apiserver's decoder knows no such kind in another group's version
                raise BadRequest(f'{r.kind} in version "{r.version}" cannot be handled as a {r.kind}: no kind '
                                 f'"{r.kind}" is registered for version "{given_version}" in scheme '
                                 f'"pkg/runtime/scheme.go:111"')
            raise BadRequest(f"the API version in the data ({given_version}) does not match the expected API "
                             f"version ({r.api_version})")
        try:
            stored: Object = marshal.loads(marshal.dumps(obj))  # a deep copy, and a check for JSON types
        except ValueError:
            raise BadRequest("the object holds a value that is not JSON (use dicts, lists, strings, numbers, "
                             "booleans and None)") from None
        if r is EVENTS_V1:
            return events_v1_to_core(stored)
        if (r.group, r.version, r.plural) not in BUILTIN_KINDS:
            version = self._crds.storage_version(r)
            stored["apiVersion"] = f"{r.group}/{version}"
        else:
            stored["apiVersion"] = r.api_version
            if r is NODES:
                admission.default_node_status(stored)  # v1 defaulting, at decode
            quantities.canonicalize(r, stored)  # decoded and encoded again, as the real server does
        stored["kind"] = r.kind
        return stored

    def _ns(self, r: Resource, namespace: str | None) -> str:
        if not r.namespaced:
            return ""
        return namespace or "default"

    def _now(self) -> str:
        return rfc3339(self.clock.now())

    def _request(self, verb: str) -> None:
        if self._closed:
            raise ApiError("the embedded cluster is closed", status=503, reason="ServiceUnavailable")
        self.faults.check(verb)

    def _check_subresource(self, r: Resource, kind: Kind, subresource: str | None) -> None:
        if subresource is None:
            return
        if subresource != "status" or not kind.status_subresource:
            raise NotFound(f"the server could not find the requested resource ({r.plural}/{subresource})")

    def _check_version(self, resource_version: str | None) -> None:
        if resource_version in (None, "", "0"):
            return
        rv = _parse_rv(resource_version)
        if rv > self._rv.current:
            raise _too_large(rv, self._rv.current)

    # ------------------------------------------------------------------ writes

    def _commit(self, r: Resource, type_: str, obj: Object, old: Object | None) -> Object:
        """Store `obj` (which the caller gives up) under a new resourceVersion and publish it."""
        rv = self._rv.next()
        meta = obj["metadata"]
        meta["resourceVersion"] = str(rv)
        ns, name = meta.get("namespace", ""), meta["name"]
        store = self._store(r)
        replaced = store.remove(ns, name) if type_ == "DELETED" else store.put(ns, name, obj)
        if replaced is not None:
            self._blobs.pop(id(replaced), None)
        if type_ != "DELETED":
            # Serialized once per write, so every read and watch delivery copies it with C-speed
            # marshal.loads instead of walking the dict in Python. Keyed by id(): an entry lives
            # exactly as long as its object is in the store (so the object, and its id, are alive).
            self._blobs[id(obj)] = marshal.dumps(obj)
        self._hub.publish(storage_key(r), Change(rv, type_, obj, old, ns))
        return obj

    def _create(self, r: Resource, given: Object, namespace: str | None) -> Object:
        obj = self._in(r, given)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if r.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise BadRequest("the namespace of the provided object does not match the namespace sent on the request")
            ns = namespace or body_ns or "default"
            meta["namespace"] = ns
            namespace_obj = self._store(NAMESPACES).get("", ns)
            if namespace_obj is None:
                raise namespace_not_found(ns)
            if namespace_obj["metadata"].get("deletionTimestamp"):
                raise forbidden(r, meta.get("name") or "", (
                    f"unable to create new content in namespace {ns} because it is being terminated"))
        else:
            meta.pop("namespace", None)
            ns = ""
        for system_field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                             "deletionGracePeriodSeconds", "generation", "managedFields", "selfLink"):
            meta.pop(system_field, None)
        builtin = BUILTIN_KINDS.get((r.group, r.version, r.plural))
        kind = builtin[1] if builtin is not None else custom_kind(r)
        self._prepare_for_create(r, kind, obj)
        # As in rest.BeforeCreate: the name is generated after mutating admission (whose errors name
        # the generateName prefix), before validation and validating admission.
        generated = not meta.get("name") and bool(meta.get("generateName"))
        if generated:
            meta["name"] = self.name_generator(str(meta["generateName"]))
        name = meta.get("name") or ""
        if (r.group, r.version, r.plural) not in BUILTIN_KINDS:
            obj = self._admit_custom(r, obj, None)
            meta = obj["metadata"]
        causes = validation.metadata_causes(r, obj) + validation.kind_causes(r, obj)
        if causes:
            raise invalid(r.kind, name, causes, r.group if r.group not in ("", "events.k8s.io") else "")
        if r is PODS:
            self._validate_new_pod(obj)
        if self._store(r).get(ns, name) is not None:
            # rest.CheckGeneratedNameError: a generated name that is taken says so
            raise generate_name_conflict(r, name) if generated else already_exists(r, name)
        meta["uid"] = str(uuid.UUID(int=self._random.getrandbits(128), version=4))
        meta["creationTimestamp"] = self._now()
        if kind.tracks_generation:
            meta["generation"] = 1
        stored = self._commit(r, "ADDED", obj, None)
        if r is CRDS:
            self._crds.register(stored)
        return stored

    def _generate_name(self, base: str) -> str:
        """kube's names.SimpleNameGenerator: the base (cut to 58 characters) and 5 random characters."""
        return base[:MAX_GENERATED_NAME_PREFIX] + "".join(self._random.choice(_GENERATE_ALPHABET) for _ in range(5))

    def _prepare_for_create(self, r: Resource, kind: Kind, obj: Object) -> None:
        """Per-kind defaulting and admission (PrepareForCreate + mutating admission)."""
        if kind.status_subresource and r.plural != "nodes":
            obj.pop("status", None)  # status is written through the status subresource only
        if r is PODS:
            # v1 defaults, then the mutating admission plugins in kube-apiserver's order
            # (LimitRanger, Priority, DefaultTolerationSeconds (in default_pod), RuntimeClass).
            admission.default_pod(obj)
            admission.merge_spread_match_label_keys(obj)
            admission.default_pod_level_requests(obj)
            limitranger.apply_defaults(obj, self._limit_ranges(obj["metadata"]["namespace"]))
            admission.admit_priority(obj, self._priority_class, self._global_default_priority_class)
            admission.admit_runtime_class(obj, self._runtime_class)
            if obj["spec"].get("nodeName"):  # PodTopologyLabels, for a pod created on a node
                pods.copy_labels(obj, pods.topology_labels(self._store(NODES).get("", obj["spec"]["nodeName"])))
            admission.pod_status_on_create(obj)
        elif r is LIMIT_RANGES:
            limitranger.default_limit_range(obj)
        elif r is PERSISTENT_VOLUME_CLAIMS:
            admission.admit_claim(obj, self._default_storage_class)
        elif r is PERSISTENT_VOLUMES:
            admission.admit_volume(obj, self._now())
        elif r is STORAGE_CLASSES:
            admission.default_storage_class(obj)
        elif r is NAMESPACES and obj["metadata"].get("name"):
            admission.default_namespace(obj)
        elif r is PRIORITY_CLASSES:
            admission.default_priority_class(obj)
            if obj.get("globalDefault"):
                existing = self._global_default_priority_class()
                if existing is not None:
                    raise forbidden(r, obj["metadata"].get("name") or "", (
                        f"PriorityClass {existing['metadata']['name']} is already marked as default. "
                        "Only one default can exist"))
        elif r is POD_DISRUPTION_BUDGETS:
            admission.empty_pdb_status(obj)
        elif r in (SERVICES, REPLICATION_CONTROLLERS, REPLICA_SETS, STATEFUL_SETS):
            admission.default_workload(r, obj)
        elif r is CRDS:
            causes = validation.crd_causes(obj)
            if causes:
                raise invalid(r.kind, obj["metadata"].get("name") or "", causes, r.group)
            admission.crd_status(obj, self._now())

    def _admit_custom(self, r: Resource, obj: Object, old: Object | None) -> Object:
        """Prune, default and validate a custom object against the schema of the version the client
        used (422 Invalid, worded as the server words it); the result is stored in the storage version."""
        # Imported here: the validation package pulls in pydantic, which only custom resources need.
        from minisched.validation.openapi import admit_custom_object

        crd = self._crds.crd(r)
        admitted = admit_custom_object({**obj, "apiVersion": r.api_version}, crd,
                                       old=None if old is None else {**old, "apiVersion": r.api_version})
        admitted["apiVersion"] = obj["apiVersion"]
        return admitted

    def _validate_new_pod(self, pod: Object) -> None:
        """The validating admission plugins, after validation (403 Forbidden, worded as kube's)."""
        for lr in self._limit_ranges(pod["metadata"]["namespace"]):
            errors = limitranger.violations(pod, lr)
            if errors:
                raise forbidden(PODS, admission.admission_name(pod),
                                errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
        class_name = pod["spec"].get("runtimeClassName")
        admission.validate_runtime_class(pod, None if class_name is None else self._runtime_class(class_name))

    def _limit_ranges(self, namespace: str) -> _Objects:
        return [lr for _, lr in self._store(LIMIT_RANGES).items(namespace)]

    def _default_storage_class(self) -> Object | None:
        """The default StorageClass (the newest, when several are marked, as DefaultStorageClass picks)."""
        marked = [sc for _, sc in self._store(STORAGE_CLASSES).items() if admission.is_default_class(sc)]
        if not marked:
            return None
        return max(marked, key=lambda sc: (sc["metadata"]["creationTimestamp"], sc["metadata"]["name"]))

    def _runtime_class(self, name: str) -> Object | None:
        return self._store(RUNTIME_CLASSES).get("", name)

    def _priority_class(self, name: str) -> Object | None:
        return self._store(PRIORITY_CLASSES).get("", name)

    def _global_default_priority_class(self) -> Object | None:
        for _, pc in self._store(PRIORITY_CLASSES).items():
            if pc.get("globalDefault"):
                return pc
        return None

    def _update(self, r: Resource, kind: Kind, existing: Object, new: Object, subresource: str | None,
                *, patching: bool = False) -> Object:
        old_meta = existing["metadata"]
        name = old_meta["name"]
        new_meta = new.get("metadata")
        if not isinstance(new_meta, dict):
            new_meta = new["metadata"] = {}
        given_rv = new_meta.get("resourceVersion")
        if given_rv:
            if str(given_rv) != old_meta["resourceVersion"]:
                _parse_rv(str(given_rv))
                raise stale(r, name)
        elif not kind.unconditional_update and not patching:
            raise invalid(r.kind, name, [invalid_value("metadata.resourceVersion", "0x0",
                                                       "must be specified for an update")], r.group)
        if new_meta.get("uid") and new_meta["uid"] != old_meta["uid"]:
            raise _uid_mismatch(r, name, new_meta["uid"], existing)

        if subresource == "status" and (r is CRDS or (r.group, r.version, r.plural) not in BUILTIN_KINDS):
            # Custom resources (and CRDs): a status update changes nothing but status.
            candidate = self._copy(existing)
            if "status" in new:
                candidate["status"] = new["status"]
            else:
                candidate.pop("status", None)
        else:
            candidate = new
            if subresource == "status":
                # Built-in kinds: everything but status comes from the stored object, except the
                # ordinary metadata (labels, annotations, finalizers), which a status write may change.
                for key in set(existing) | set(candidate):
                    if key not in ("metadata", "status", "apiVersion", "kind"):
                        if key in existing:
                            candidate[key] = clone(existing[key])
                        else:
                            candidate.pop(key, None)
            meta = candidate["metadata"]
            for system_field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                                 "generation", "name", "namespace"):
                if system_field in old_meta:
                    meta[system_field] = old_meta[system_field]
                else:
                    meta.pop(system_field, None)
            if kind.status_subresource and subresource is None:
                if "status" in existing:
                    candidate["status"] = clone(existing["status"])
                else:
                    candidate.pop("status", None)
            if old_meta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
                if added:
                    raise invalid(r.kind, name, [forbidden_field(
                        "metadata.finalizers", "no new finalizers can be added if the object is being deleted")],
                        r.group)
        if (r.group, r.version, r.plural) not in BUILTIN_KINDS:
            candidate = self._admit_custom(r, candidate, existing)
        causes = validation.metadata_causes(r, candidate)
        if r is PODS and subresource is None:
            causes += validation.pod_update_causes(existing, candidate)
        elif r is PRIORITY_CLASSES and candidate.get("value") != existing.get("value"):
            causes.append(forbidden_field("value", "may not be changed in an update."))
        elif subresource is None:
            causes += validation.kind_causes(r, candidate)
        if causes:
            raise invalid(r.kind, name, causes, r.group if r.group not in ("", "events.k8s.io") else "")

        candidate["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
        if candidate == existing:
            return existing  # a no-op update writes nothing and keeps the resourceVersion
        if kind.tracks_generation and _spec_changed(existing, candidate, kind):
            candidate["metadata"]["generation"] = int(old_meta.get("generation") or 0) + 1
        stored = self._commit(r, "MODIFIED", candidate, existing)
        meta = stored["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds"):
            # The last finalizer is gone from an object whose deletion was waiting only for it.
            return self._remove(r, stored)
        return stored

    def _delete(self, r: Resource, ns: str, name: str, grace: int | None,
                preconditions: dict[str, str] | None) -> Object:
        existing = self._store(r).get(ns, name)
        if existing is None:
            raise not_found(r, name)
        meta = existing["metadata"]
        # rest.BeforeDelete words these against the Kind ("ConfigMap", "Lease.coordination.k8s.io").
        qualified_kind = f"{r.kind}.{r.group}" if r.group else r.kind
        for key, value in (preconditions or {}).items():
            if key == "uid" and value != meta["uid"]:
                raise conflict(qualified_kind, name, (
                    f"the UID in the precondition ({value}) does not match the UID in record ({meta['uid']}). "
                    "The object might have been deleted and then recreated"))
            if key == "resourceVersion" and value != meta["resourceVersion"]:
                raise conflict(qualified_kind, name, (
                    f"the ResourceVersion in the precondition ({value}) does not match the ResourceVersion in "
                    f"record ({meta['resourceVersion']}). The object might have been modified"))
            if key not in ("uid", "resourceVersion"):
                raise BadRequest(f"unknown delete precondition {key!r} (use uid or resourceVersion)")
        if grace is not None and grace < 0:
            raise invalid(r.kind, name, [invalid_value("gracePeriodSeconds", grace, "must be >= 0")], r.group)
        finalizers = bool(meta.get("finalizers"))
        if meta.get("deletionTimestamp"):
            pending = meta.get("deletionGracePeriodSeconds") or 0
            if pending == 0 and not finalizers:
                return self._remove(r, existing)
            if grace is None or grace >= pending:
                return existing  # graceful deletion already pending
            shorter = self._copy(existing)
            deadline = _parse_time(meta["deletionTimestamp"]) - pending + grace
            shorter["metadata"]["deletionTimestamp"] = rfc3339(deadline)
            shorter["metadata"]["deletionGracePeriodSeconds"] = grace
            stored = self._commit(r, "MODIFIED", shorter, existing)
            return stored if grace > 0 or finalizers else self._remove(r, stored)
        if r is NAMESPACES:
            return self._delete_namespace(existing)
        if r is CRDS:
            self._delete_custom_objects(existing)
        period = pods.grace_period(existing, grace) if r is PODS else 0
        if r is PODS or finalizers:
            # Graceful deletion (pods) and finalizers first mark the object (deletionTimestamp).
            marked = self._copy(existing)
            mmeta = marked["metadata"]
            mmeta["deletionTimestamp"] = rfc3339(self.clock.now() + period)
            mmeta["deletionGracePeriodSeconds"] = period
            if "generation" in mmeta:
                mmeta["generation"] += 1
            stored = self._commit(r, "MODIFIED", marked, existing)
            if period > 0 or finalizers:
                return stored
            return self._remove(r, stored)
        return self._remove(r, existing)

    def _remove(self, r: Resource, existing: Object) -> Object:
        final = dict(existing)
        final["metadata"] = dict(existing["metadata"])
        self._commit(r, "DELETED", final, existing)
        if r is CRDS:
            self._crds.unregister(existing)
        return final

    def _delete_namespace(self, namespace: Object) -> Object:
        """Deleting a namespace deletes everything in it. (A real server marks it Terminating and its
        namespace controller empties it; the embedded cluster does both at once.)"""
        ns = namespace["metadata"]["name"]
        for store_key, store in list(self._stores.items()):
            objects = store.namespace_objects(ns)
            if not objects:
                continue
            r = self._resource_for_storage(store_key)
            for obj in sorted(objects, key=lambda o: o["metadata"]["name"]):
                self._remove(r, obj)
        return self._remove(NAMESPACES, namespace)

    def _delete_custom_objects(self, crd: Object) -> None:
        r = Resource.from_crd(crd)
        store = self._stores.get(storage_key(r))
        if store is None:
            return
        for _, obj in list(store.items()):
            self._remove(r, obj)
        self._stores.pop(storage_key(r), None)

    def _resource_for_storage(self, key: str) -> Resource:
        for r, _ in BUILTIN_KINDS.values():
            if storage_key(r) == key and r is not EVENTS_V1:
                return r
        for crd in self._crds.all():
            r = Resource.from_crd(crd)
            if storage_key(r) == key:
                return r
        raise KeyError(key)

    def _check_disruption_budget(self, namespace: str, pod: Object) -> None:
        budgets = pods.matching_pdbs(pod, self._store(POD_DISRUPTION_BUDGETS).namespace_objects(namespace))
        if not budgets:
            return
        if len(budgets) > 1:
            raise pods.too_many_pdbs()
        pdb = budgets[0]
        status = pdb.get("status") or {}
        stored_status = status.get("observedGeneration", 0) >= pdb["metadata"].get("generation", 1)
        if not stored_status:
            # No disruption controller runs here: compute what it would have written.
            status = pods.computed_pdb_status(pdb, self._store(PODS).namespace_objects(namespace))
        pods.eviction_check(pod, pdb, status)
        if stored_status and pods.is_ready(pod):
            # As the real eviction handler does, spend one allowed disruption in the PDB's status.
            updated = self._copy(pdb)
            updated["status"]["disruptionsAllowed"] = status["disruptionsAllowed"] - 1
            updated["status"].setdefault("disruptedPods", {})[pod["metadata"]["name"]] = self._now()
            self._commit(POD_DISRUPTION_BUDGETS, "MODIFIED", updated, pdb)

    # ------------------------------------------------------------------ faults

    def _drop_watches(self) -> int:
        with self._lock:
            watches = self._hub.open_watches()
        for w in watches:
            w.drop()
        return len(watches)

    def _compact(self) -> int:
        with self._lock:
            self._hub.compact(self._rv.current)
            return self._rv.current

    def _forget_watch(self, w: EmbeddedWatch) -> None:
        with self._lock:
            self._hub.remove(w)


def _check_object(obj: Any) -> None:
    if not isinstance(obj, dict):
        raise BadRequest(f"the object must be a JSON object (dict), not {type(obj).__name__}")
    if "metadata" in obj and not isinstance(obj["metadata"], dict):
        raise BadRequest("metadata must be a JSON object")


def _spec_changed(old: Object, new: Object, kind: Kind) -> bool:
    ignored = {"metadata", "status"} if kind.status_subresource else {"metadata"}
    keys = (set(old) | set(new)) - ignored
    return any(old.get(k) != new.get(k) for k in keys)


def _uid_mismatch(r: Resource, name: str, uid: str, existing: Object) -> ApiError:
    return conflict(r.group_resource, name, (
        f"Precondition failed: UID in precondition: {uid}, UID in object meta: {existing['metadata']['uid']}"))


def _check_watch_list_options(send_initial_events: bool | None, match: str | None) -> None:
    """kube-apiserver's validateWatchOptions, with the WatchList gate on (its default since 1.34)."""
    causes = []
    if send_initial_events is not None and match != "NotOlderThan":
        causes.append(forbidden_field("resourceVersionMatch",
                                      "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
    if match:
        if send_initial_events is None:
            causes.append(forbidden_field("resourceVersionMatch",
                                          "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
        if match != "NotOlderThan":
            causes.append(not_supported("resourceVersionMatch", match, ["NotOlderThan"]))
    if causes:
        raise invalid("ListOptions", "", causes, group="meta.k8s.io")


def _parse_rv(text: str) -> int:
    try:
        rv = int(text)
        if rv < 0:
            raise ValueError
    except (TypeError, ValueError):
        raise BadRequest(f'invalid resource version: resourceVersion: Invalid value: "{text}": must be an unsigned '
                         "integer, as the server issued it") from None
    return rv


def _too_large(rv: int, current: int) -> Timeout:
    return Timeout(f"Timeout: Too large resource version: {rv}, current: {current}",
                   causes=[Cause("", f"Too large resource version: {rv}, current: {current}",
                                 "ResourceVersionTooLarge")],
                   details={"retryAfterSeconds": 1})


def _parse_time(text: str) -> float:
    from minisched.clock import parse_rfc3339

    return parse_rfc3339(text)


def _encode_continue(rv: int, key: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (binascii.Error, ValueError, KeyError, IndexError, TypeError):
        raise BadRequest(f"invalid continue token: continue key is not valid: {token!r:.40} was not issued by "
                         "this server") from None

