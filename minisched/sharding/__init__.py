"""Part II §4.3 sharded scheduling, first step: membership, ownership and the node-capacity fence.

Several minisched replicas share one cluster's work. Each replica renews its own Lease
(`membership`), pods and nodes are split among the live replicas by rendezvous hashing (`ring`), and
a per-node ledger object updated under a resourceVersion precondition keeps two replicas from
over-committing one node (`fence`). Not yet wired into the Scheduler or the CLI.
"""

from minisched.sharding.fence import CapacityLedger, FenceContention, ledger_units
from minisched.sharding.membership import Member, Membership
from minisched.sharding.ring import Ring, hrw_owner, hrw_score

__all__ = [
    "CapacityLedger",
    "FenceContention",
    "Member",
    "Membership",
    "Ring",
    "hrw_owner",
    "hrw_score",
    "ledger_units",
]
