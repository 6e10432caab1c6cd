"""Lab 16, the instructor's solution."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labs.lab16_capacity_fence.ledger import LedgerBase, Reservation, total
from minisched.cluster.base import Cluster, Object
from minisched.errors import Conflict
from minisched.resources import CONFIG_MAPS
from minisched.sharding.fence import FenceContention

__all__ = ["FenceContention", "Ledger", "Reservation", "check_amounts", "new", "total"]


class Ledger(LedgerBase):
    """A node-capacity fence with minisched's CapacityLedger's shape: reserve, release, used, conflicts, refusals."""

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


def new(cluster: Cluster, holder: str = "replica-a", **options: Any) -> Ledger:
    return Ledger(cluster, holder=holder, **options)
