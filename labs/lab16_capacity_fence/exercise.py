"""Lab 16 starter: write reserve, release and check_amounts (see README.md)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from minisched.cluster.base import Cluster, Object
from minisched.errors import AlreadyExists, Conflict, NotFound  # noqa: F401 (Conflict: yours)
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
    # self.cluster.update(CONFIG_MAPS, obj) answers Conflict (a 409) when obj's resourceVersion is not the
    # server's any more. Count each 409 in self.conflicts and each refusal in self.refusals (under self._lock).

    def reserve(self, node: str, uid: str, requests: Mapping[str, int], allocatable: Mapping[str, int],
                *, pod: str = "") -> bool:
        """Record pod `uid`'s requests on `node`'s ledger if they fit (True); False if they do not."""
        raise NotImplementedError("reserve")  # your code here

    def release(self, node: str, uid: str) -> bool:
        """Drop this holder's entry for pod `uid` on `node` (True); False if there was none."""
        raise NotImplementedError("release")  # your code here


def check_amounts(amounts: Mapping[str, Any], what: str) -> None:
    """ValueError unless every amount is a non-negative int (see README.md for the message)."""
    raise NotImplementedError("check_amounts")  # your code here


def total(requests: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for one in requests:
        for resource, amount in one.items():
            out[resource] = out.get(resource, 0) + amount
    return out


def new(cluster: Cluster, holder: str = "replica-a", **options: Any) -> Ledger:
    return Ledger(cluster, holder=holder, **options)
