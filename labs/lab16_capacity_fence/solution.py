"""Lab 16, the instructor's solution."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from minisched.cluster.base import Cluster, Object
from minisched.errors import AlreadyExists, Conflict, NotFound
from minisched.resources import CONFIG_MAPS
from minisched.sharding.fence import FenceContention

__all__ = ["FenceContention", "Ledger", "Reservation", "new"]

_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]")  # what a ConfigMap data key may not contain


@dataclass(frozen=True)
class Reservation:
    uid: str
    pod: str
    holder: str
    requests: dict[str, int]


class Ledger:
    """Per-node reservations in ConfigMaps `<namespace>/<prefix><node>`, one entry per (pod, holder)."""

    def __init__(self, cluster: Cluster, *, holder: str = "minisched", namespace: str = "kube-system",
                 prefix: str = "lab16-capacity-", max_attempts: int = 100) -> None:
        if not holder:
            raise ValueError("a ledger needs a holder (the replica's identity)")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self.cluster, self.holder = cluster, holder
        self.namespace, self.prefix, self.max_attempts = namespace, prefix, max_attempts
        self._lock = threading.Lock()
        self.conflicts = 0  # 409s answered by a re-read
        self.refusals = 0  # reservations refused for lack of room

    # -- given: reading the ledger -------------------------------------------------------------------

    def key(self, uid: str) -> str:
        """This holder's entry key for pod `uid`."""
        if not uid or not isinstance(uid, str) or _KEY_CHARS.search(uid):
            raise ValueError(f"a reservation is keyed by a pod's UID (metadata.uid), got {uid!r}")
        return f"{uid}.{_KEY_CHARS.sub('-', self.holder)}"

    def read(self, node: str, *, create: bool = True) -> Object | None:
        """The node's ledger as the server has it now (resourceVersion included). When there is
        none yet: an empty one is created and returned (`create=False`: None)."""
        if not node:
            raise ValueError("a capacity ledger needs a node name")
        name = f"{self.prefix}{node}"
        while True:
            try:
                return self.cluster.get(CONFIG_MAPS, name, self.namespace)
            except NotFound:
                if not create:
                    return None
            empty: Object = {"apiVersion": "v1", "kind": "ConfigMap", "data": {},
                             "metadata": {"name": name, "namespace": self.namespace}}
            try:
                return self.cluster.create(CONFIG_MAPS, empty, self.namespace)
            except AlreadyExists:
                continue  # another replica created it first: read theirs

    @staticmethod
    def entries(ledger: Object) -> dict[str, Reservation]:
        """entry key -> reservation, parsed from a ledger object."""
        found: dict[str, Reservation] = {}
        for key, text in (ledger.get("data") or {}).items():
            raw = json.loads(text)
            found[key] = Reservation(raw["uid"], raw["pod"], raw["holder"],
                                     {str(r): int(v) for r, v in raw["requests"].items()})
        return found

    def entry(self, uid: str, pod: str, requests: Mapping[str, int]) -> str:
        """The text stored under `key(uid)` for this holder's reservation."""
        return json.dumps({"uid": uid, "pod": pod, "holder": self.holder,
                           "requests": dict(sorted(requests.items()))}, separators=(",", ":"))

    def reservations(self, node: str) -> dict[str, Reservation]:
        ledger = self.read(node, create=False)
        return {} if ledger is None else self.entries(ledger)

    def used(self, node: str) -> dict[str, int]:
        return total(r.requests for r in self.reservations(node).values())

    # -- yours: writing it under the precondition ----------------------------------------------------

    def reserve(self, node: str, uid: str, requests: Mapping[str, int], allocatable: Mapping[str, int],
                *, pod: str = "") -> bool:
        key = self.key(uid)
        check_amounts(requests, "requests")
        check_amounts(allocatable, "allocatable")
        for _ in range(self.max_attempts):
            ledger = self.read(node)
            assert ledger is not None
            entries = self.entries(ledger)
            if key in entries:
                return True  # already ours: reserving twice is not counting twice
            used = total(r.requests for r in entries.values())
            if any(amount and used.get(r, 0) + amount > allocatable.get(r, 0) for r, amount in requests.items()):
                with self._lock:
                    self.refusals += 1
                return False
            data = {**(ledger.get("data") or {}), key: self.entry(uid, pod, requests)}
            if self._write(ledger, data):
                return True
        raise FenceContention(f"reserving {pod or uid} on node {node}: lost the write race {self.max_attempts} times")

    def release(self, node: str, uid: str) -> bool:
        key = self.key(uid)
        for _ in range(self.max_attempts):
            ledger = self.read(node, create=False)
            if ledger is None or key not in (ledger.get("data") or {}):
                return False
            data = {k: v for k, v in ledger["data"].items() if k != key}
            if self._write(ledger, data):
                return True
        raise FenceContention(f"releasing {uid} on node {node}: lost the write race {self.max_attempts} times")

    def _write(self, ledger: Object, data: dict[str, str]) -> bool:
        """Write `data` back under the resourceVersion `ledger` was read at; False on a 409."""
        try:
            self.cluster.update(CONFIG_MAPS, {**ledger, "data": data})
        except Conflict:
            with self._lock:
                self.conflicts += 1
            return False
        return True


def check_amounts(amounts: Mapping[str, Any], what: str) -> None:
    for resource, amount in amounts.items():
        if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
            hint = " (convert quantities such as '500m' or '1Gi' with ledger_units)" if isinstance(amount, str) else ""
            raise ValueError(f"{what}[{resource!r}] must be a non-negative integer in ledger units, "
                             f"got {amount!r}{hint}")


def total(requests: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for one in requests:
        for resource, amount in one.items():
            out[resource] = out.get(resource, 0) + amount
    return out


def new(cluster: Cluster, holder: str = "replica-a", **options: Any) -> Ledger:
    return Ledger(cluster, holder=holder, **options)
