"""Part II §4.3 sharded scheduling, first step: membership, ownership and the node-capacity fence.

Several minisched replicas share one cluster's work. Each replica renews its own Lease
(`membership`), pods and nodes are split among the live replicas by rendezvous hashing (`ring`), and
a per-node ledger object updated under a resourceVersion precondition keeps two replicas from
over-committing one node (`fence`). `Shard` (shard.py) ties them into an ordinary Scheduler: the
ring as its pod filter, and two plugins (plugins.py: the node partition at PreFilter, the capacity
fence at Reserve/PreBind/Unreserve); `minisched run --shards` runs a replica.
"""

from minisched.sharding.fence import CapacityLedger, FenceContention, Reservation, ledger_units
from minisched.sharding.membership import Member, Membership, lease_suffix
from minisched.sharding.ring import Ring, hrw_owner, hrw_score
from minisched.sharding.shard import DEFAULT_GROUP, Shard, ShardStats

__all__ = [
    "DEFAULT_GROUP",
    "CapacityLedger",
    "FenceContention",
    "Member",
    "Membership",
    "Reservation",
    "Ring",
    "Shard",
    "ShardStats",
    "hrw_owner",
    "hrw_score",
    "lease_suffix",
    "ledger_units",
]
