"""Lab 16, given: the ledger's reading half, which your `Ledger` in exercise.py builds on (see README.md)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from minisched.cluster.base import Cluster, Object
from minisched.errors import AlreadyExists, NotFound
from minisched.resources import CONFIG_MAPS

__all__ = ["LedgerBase", "Reservation", "total"]

_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]")  # what a ConfigMap data key may not contain


@dataclass(frozen=True)
class Reservation:
    """One ledger entry: `holder` reserved `requests` on the node for pod `uid` ("namespace/name" `pod`)."""

    uid: str
    pod: str
    holder: str
    requests: dict[str, int]


class LedgerBase:
    """Per-node reservations in ConfigMaps `<namespace>/<prefix><node>`, one entry per (pod, holder):
    reading them. Writing them (reserve, release) is yours, in exercise.py's `Ledger`."""

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


def total(requests: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The sum of several requests, per resource."""
    out: dict[str, int] = {}
    for one in requests:
        for resource, amount in one.items():
            out[resource] = out.get(resource, 0) + amount
    return out
