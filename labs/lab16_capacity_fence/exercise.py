"""Lab 16 starter: write reserve, release and check_amounts (see README.md).

Given, in ledger.py: `self.read(node)`, `self.entries(ledger)`, `self.key(uid)`,
`self.entry(uid, pod, requests)`, `self.reservations(node)`, `self.used(node)`, `total(...)`, and
the attributes `cluster`, `holder`, `max_attempts`, `conflicts`, `refusals`, `_lock`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labs.lab16_capacity_fence.ledger import LedgerBase, Reservation, total
from minisched.cluster.base import Cluster
from minisched.errors import Conflict  # noqa: F401 (what update raises on a 409)
from minisched.resources import CONFIG_MAPS  # noqa: F401 (self.cluster.update(CONFIG_MAPS, obj))
from minisched.sharding.fence import FenceContention

__all__ = ["FenceContention", "Ledger", "Reservation", "check_amounts", "new", "total"]


class Ledger(LedgerBase):
    """A node-capacity fence with minisched's CapacityLedger's shape: reserve, release, used, conflicts, refusals."""

    # self.cluster.update(CONFIG_MAPS, obj) raises Conflict (a 409) when obj's resourceVersion is not the
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


def new(cluster: Cluster, holder: str = "replica-a", **options: Any) -> Ledger:
    return Ledger(cluster, holder=holder, **options)
