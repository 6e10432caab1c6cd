"""The node-capacity fence: a per-node ledger object written only under a resourceVersion precondition.

Two fences are needed when several schedulers share nodes, and the API server gives only one:

- The pod. POST pods/binding answers 409 if the pod already has a nodeName, so two replicas that
  both think they own a pod (the ring changed under them, or one was paused past its lease) bind it
  at most once. And a Binding's metadata.resourceVersion is a precondition on the pod (409 if the
  pod was written since that version): a replica binds with the version it decided on, which its
  ledger entry names, so a peer can make that binding fail by writing to the pod (see `prune`).
- The node. Nothing on the server checks that a node's bound pods fit its allocatable: two
  replicas, each with a cache that does not yet show the other's binding, both place a 2-CPU pod on
  the last 2 free CPUs, and both bindings succeed (only the kubelet rejects the loser later, with
  OutOfcpu). Leader election does not help either: it makes one replica act, and a leader paused past
  its lease acts anyway when it resumes.

So the node needs its own fence. `CapacityLedger` keeps, per node, one ConfigMap listing every
reservation (pod UID and the replica that reserved -> requests). `reserve` reads it, refuses if the sum plus the new requests would
exceed allocatable, and otherwise writes it back *with the resourceVersion it read*. Of two replicas
writing concurrently the server (etcd's compare-and-swap underneath) accepts exactly one; the other
gets 409 Conflict, re-reads (now seeing the first reservation) and decides again. Every reservation
therefore was checked against a ledger containing all reservations committed before it: the sum
never exceeds allocatable. A scheduler reserves before it binds and releases when the bind fails or
the pod goes away.

Requests and allocatable are integers in the ledger's units (`ledger_units`): CPU in millicores,
everything else in base units (bytes, pods, devices).

An entry is keyed by the pod's UID *and* the holder (the replica that wrote it): a pod deleted and
created again under the same name is another pod, and two replicas that both think they own a pod
(a ring change) each hold their own entry, so the one whose bind fails releases only its own. A pod
counts once on a node whichever replicas hold entries for it (the largest of its entries): it can be
bound only once, and counting it twice would hold room no pod uses (on a full cluster, pods that
fit would stay pending for good).
`prune` removes the entries a cleanup loop finds stale (the pod gone, or bound to another node).
Removing the entry of a pod still pending gives its room away while its holder may be paused right
before its bind (after checking its lease); the ledger alone cannot stop that binding, the pod's
fence can: the remover first writes to the pod (Shard._revoke), which bumps its resourceVersion past
the one the entry names and the holder's binding carries. If the write's answer shows the pod bound,
the binding landed first and the entry stays; if not, no binding of that version can land any more
(409), and the entry goes. A holder that decides the pod again reserves for the new version, which
rewrites its entry: a prune that matches entries by (pod, holder, version) leaves the new one.

One holder's own threads (a replica's binding threads, its clean-up) take turns on a node's ledger (a
lock per node): they would otherwise refuse each other's writes, and the precondition is only needed
between replicas.

`fenced=False` drops the precondition (an unconditional update, last write wins). It exists only to
show, in tests and the notebook, the over-commit the precondition prevents.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from minisched.cluster.base import Cluster, Object
from minisched.errors import AlreadyExists, Conflict, NotFound
from minisched.quantity import milli_value, value
from minisched.resources import CONFIG_MAPS

__all__ = ["CapacityLedger", "FenceContention", "Reservation", "held", "ledger_units"]

LEDGER_LABEL = "minisched.io/capacity-ledger"
_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]")  # what a ConfigMap data key may not contain


@dataclass(frozen=True)
class Reservation:
    """One ledger entry: `holder` reserved `requests` on the node for the pod `uid` (`pod` is its
    "namespace/name", for people and for the cleanup's lookup). `resource_version`: the pod's as
    the holder decided on it, which its binding carries as a precondition ("": an unfenced binding)."""

    uid: str
    pod: str
    holder: str
    requests: dict[str, int]
    resource_version: str = ""


class FenceContention(RuntimeError):
    """A reservation lost the write race `max_attempts` times in a row."""


def ledger_units(quantities: Mapping[str, str | int | float]) -> dict[str, int]:
    """{"cpu": "500m", "memory": "1Gi"} -> {"cpu": 500, "memory": 1073741824}."""
    out: dict[str, int] = {}
    for name, quantity in quantities.items():
        out[name] = milli_value(quantity) if name == "cpu" else value(quantity)
    return out


def _check_uid(uid: str) -> str:
    if not uid or not isinstance(uid, str) or _KEY_CHARS.search(uid):
        raise ValueError(f"a reservation is keyed by a pod's UID (metadata.uid), got {uid!r}")
    return uid


class CapacityLedger:
    """Per-node reservations in ConfigMaps `<namespace>/<prefix><node>`."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        holder: str = "minisched",
        namespace: str = "kube-system",
        prefix: str = "minisched-capacity-",
        max_attempts: int = 1000,
        fenced: bool = True,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        if not holder:
            raise ValueError("a capacity ledger needs a holder (the replica's identity)")
        self.cluster = cluster
        self.holder = holder
        self._holder_key = _KEY_CHARS.sub("-", holder)
        self.namespace, self.prefix = namespace, prefix
        self.max_attempts = max_attempts
        self.fenced = fenced
        self._lock = threading.Lock()
        self._node_locks: dict[str, threading.Lock] = {}
        self.conflicts = 0  # 409s answered by a re-read (the fence at work)
        self.refusals = 0  # reservations refused for lack of room
        self.pruned = 0  # stale entries removed by prune

    # -- reading -------------------------------------------------------------------------------------

    def reservations(self, node: str) -> dict[str, Reservation]:
        """entry key -> reservation, as committed on the server."""
        try:
            ledger = self.cluster.get(CONFIG_MAPS, self._name(node), self.namespace)
        except NotFound:
            return {}
        return self._parse(ledger)

    def used(self, node: str) -> dict[str, int]:
        """The room the ledger holds on `node`: each pod counted once (see `held`)."""
        return held(self.reservations(node).values())

    def key(self, uid: str) -> str:
        """This holder's entry key for pod `uid`."""
        return f"{_check_uid(uid)}.{self._holder_key}"

    # -- writing -------------------------------------------------------------------------------------

    def reserve(self, node: str, uid: str, requests: Mapping[str, int], allocatable: Mapping[str, int],
                *, pod: str = "", bound: Iterable[Reservation] = (), node_uid: str = "",
                resource_version: str = "") -> bool:
        """Record the requests of pod `uid` ("namespace/name" `pod`) on `node` if they fit; False if
        they do not. Reserving again what this holder already holds there is a no-op that answers
        True, unless `resource_version` (the pod's, that the binding will carry) differs from the
        entry's: the entry is then rewritten to name it, so that a revocation of the old entry
        (judged on the old version) does not remove the new one.

        `bound`: the pods the caller's informer shows bound to `node` (by kube-scheduler, by a
        replica without the fence, by us before an entry was pruned): each counts as an entry of
        its own unless the ledger has one for its UID, so the fit is judged against what is on the
        node, not only against what was reserved. `node_uid`: the Node's UID, made the ledger's
        owner when this call creates it (the API server's garbage collector then deletes the ledger
        with its node)."""
        key = self.key(uid)
        bound = [b for b in bound if b.uid != uid]
        self._check(requests, "requests")
        self._check(allocatable, "allocatable")
        raw: dict[str, object] = {"pod": pod, "uid": uid, "holder": self.holder,
                                  "requests": dict(sorted(requests.items()))}
        if resource_version:
            raw["resourceVersion"] = resource_version
        value = json.dumps(raw, separators=(",", ":"))
        mine = Reservation(uid, pod, self.holder, dict(requests), resource_version)
        with self._node_lock(node):
            return self._reserve(node, key, value, mine, allocatable, pod or uid, bound, node_uid)

    def _reserve(self, node: str, key: str, value: str, mine: Reservation, allocatable: Mapping[str, int],
                 what: str, bound: list[Reservation], node_uid: str) -> bool:
        for _ in range(self.max_attempts):
            ledger = self._read_or_create(node, node_uid)
            entries = self._parse(ledger)
            old = entries.pop(key, None)
            if old is not None and (old.resource_version == mine.resource_version or not mine.resource_version):
                return True
            # a pod another replica holds here, or that is bound here and held, counts once; our own
            # entry with the same requests is rewritten as it is (its room is held already)
            after = held([*entries.values(), *bound, mine])
            if (old is None or old.requests != mine.requests) and \
                    any(after.get(r, 0) > allocatable.get(r, 0) for r, amount in mine.requests.items() if amount):
                with self._lock:
                    self.refusals += 1
                return False
            data = dict(ledger.get("data") or {})
            data[key] = value
            if self._write(ledger, data):
                return True
        raise FenceContention(f"reserving {what} on node {node}: lost the write race {self.max_attempts} times")

    def release(self, node: str, uid: str) -> bool:
        """Drop this holder's reservation for pod `uid` on `node`; False if there was none."""
        key = self.key(uid)
        with self._node_lock(node):
            return self._release(node, key, uid)

    def _release(self, node: str, key: str, uid: str) -> bool:
        for _ in range(self.max_attempts):
            try:
                ledger = self.cluster.get(CONFIG_MAPS, self._name(node), self.namespace)
            except NotFound:
                return False
            data = dict(ledger.get("data") or {})
            if key not in data:
                return False
            del data[key]
            if self._write(ledger, data):
                return True
        raise FenceContention(f"releasing {uid} on node {node}: lost the write race {self.max_attempts} times")

    def prune(self, node: str, stale: Callable[[Reservation], bool], *, attempts: int | None = None) -> int:
        """Remove every entry on `node` (whoever holds it) for which `stale` answers True, in one
        write under the precondition (a 409: re-read, ask again). Returns how many were removed.
        `attempts` bounds the re-reads (default `max_attempts`): a clean-up can wait for a quieter moment."""
        with self._node_lock(node):
            return self._prune(node, stale, attempts or self.max_attempts)

    def _prune(self, node: str, stale: Callable[[Reservation], bool], attempts: int) -> int:
        for _ in range(attempts):
            try:
                ledger = self.cluster.get(CONFIG_MAPS, self._name(node), self.namespace)
            except NotFound:
                return 0
            entries = self._parse(ledger)
            gone = [key for key, r in entries.items() if stale(r)]
            if not gone:
                return 0
            data = {k: v for k, v in (ledger.get("data") or {}).items() if k not in gone}
            if self._write(ledger, data):
                with self._lock:
                    self.pruned += len(gone)
                return len(gone)
        raise FenceContention(f"pruning node {node}: lost the write race {attempts} times")

    def ledgers(self) -> dict[str, Object]:
        """node name -> its ledger ConfigMap, for every ledger of this prefix in the namespace."""
        items = self.cluster.list(CONFIG_MAPS, self.namespace, label_selector=f"{LEDGER_LABEL}=true")["items"]
        return {str(cm["metadata"]["name"])[len(self.prefix):]: cm for cm in items
                if str(cm["metadata"]["name"]).startswith(self.prefix)}

    def delete_ledger(self, node: str, ledger: Object) -> bool:
        """Delete `node`'s ledger as read (`ledger`): under a resourceVersion precondition, so a
        reservation written since keeps it. True if deleted."""
        meta = ledger["metadata"]
        try:
            self.cluster.delete(CONFIG_MAPS, self._name(node), self.namespace,
                                preconditions={"uid": str(meta.get("uid") or ""),
                                               "resourceVersion": str(meta.get("resourceVersion") or "")})
        except (NotFound, Conflict):
            return False
        return True

    # -- internals -----------------------------------------------------------------------------------

    def _node_lock(self, node: str) -> threading.Lock:
        """One lock per node: this holder's own threads (its bindings, its clean-up) take turns on a
        node's ledger, so a 409 always means another replica wrote."""
        with self._lock:
            lock = self._node_locks.get(node)
            if lock is None:
                lock = self._node_locks[node] = threading.Lock()
            return lock

    def _name(self, node: str) -> str:
        if not node:
            raise ValueError("a capacity ledger needs a node name")
        return f"{self.prefix}{node}"

    def _read_or_create(self, node: str, node_uid: str = "") -> Object:
        name = self._name(node)
        while True:
            try:
                return self.cluster.get(CONFIG_MAPS, name, self.namespace)
            except NotFound:
                pass
            metadata: Object = {"name": name, "namespace": self.namespace,
                                "labels": {LEDGER_LABEL: "true"}}
            if node_uid:
                # Deleted with its node by the API server's garbage collector (a namespaced object may
                # have a cluster-scoped owner). The embedded cluster has no collector: see delete_orphans.
                metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}]
            empty: Object = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {}}
            try:
                return self.cluster.create(CONFIG_MAPS, empty, self.namespace)
            except AlreadyExists:
                continue  # another replica created it first: read theirs

    def _write(self, ledger: Object, data: dict[str, str]) -> bool:
        """True if written; False on a 409 (someone wrote since we read)."""
        updated = dict(ledger)
        metadata = dict(ledger["metadata"])
        if not self.fenced:
            metadata.pop("resourceVersion", None)  # unconditional: last write wins
        updated["metadata"] = metadata
        updated["data"] = data
        try:
            self.cluster.update(CONFIG_MAPS, updated)
        except Conflict:
            with self._lock:
                self.conflicts += 1
            return False
        return True

    @staticmethod
    def _parse(ledger: Object) -> dict[str, Reservation]:
        entries: dict[str, Reservation] = {}
        for key, text in (ledger.get("data") or {}).items():
            try:
                raw = json.loads(text)
                requests = {str(r): int(v) for r, v in raw["requests"].items()}
                entries[key] = Reservation(str(raw["uid"]), str(raw.get("pod") or ""), str(raw["holder"]), requests,
                                           str(raw.get("resourceVersion") or ""))
            except (ValueError, AttributeError, TypeError, KeyError) as err:
                name = ledger.get("metadata", {}).get("name")
                raise ValueError(f"capacity ledger {name}: entry {key!r} is not a reservation "
                                 f"({{uid, pod, holder, requests: {{resource: integer}}, resourceVersion?}}): {err!r}") from err
        return entries

    @staticmethod
    def _check(amounts: Mapping[str, int], what: str) -> None:
        for resource, amount in amounts.items():
            if not isinstance(amount, int) or isinstance(amount, bool) or amount < 0:
                raise ValueError(
                    f"{what}[{resource!r}] must be a non-negative integer in ledger units "
                    f"(see ledger_units), got {amount!r}"
                )

    def __repr__(self) -> str:
        return f"CapacityLedger({self.holder!r}, {self.namespace}/{self.prefix}*, fenced={self.fenced})"


def held(reservations: Iterable[Reservation]) -> dict[str, int]:
    """The room `reservations` hold: each pod (UID) once, at the largest of its entries per
    resource, whichever replicas wrote them. Two replicas' entries for one pod are one pod: only one
    of their bindings can succeed (the pod's own fence)."""
    per_pod: dict[str, dict[str, int]] = {}
    for r in reservations:
        mine = per_pod.setdefault(r.uid, {})
        for resource, amount in r.requests.items():
            mine[resource] = max(mine.get(resource, 0), amount)
    return _sum(per_pod.values())


def _sum(entries: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for requests in entries:
        for resource, amount in requests.items():
            total[resource] = total.get(resource, 0) + amount
    return total
