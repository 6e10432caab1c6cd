"""Per-shard Prometheus metrics, beside kube-scheduler's (Part II §4.3).

`ShardCollector(shard)` is registered on the replica's own registry (SchedulerMetrics.registry), so
/metrics of each replica shows its shard's figures next to `scheduler_*`. The values are read from
the Shard at scrape time (`Shard.stats()`), never kept twice. Every series carries the labels
`group` (the ring) and `shard` (this replica's identity), so a Prometheus scraping every replica
can sum over the group or compare replicas:

| metric | what |
|---|---|
| minisched_shard_members | live members of the ring, as this replica sees it |
| minisched_shard_owned_pods | pending pods the ring gives this replica |
| minisched_shard_partition_nodes | nodes in this replica's partition |
| minisched_shard_scheduled_total | pods this replica bound |
| minisched_shard_bind_conflicts_total | 409s on pods/binding (another replica bound the pod first) |
| minisched_shard_fence_conflicts_total | 409s on a ledger write, answered by re-reading it |
| minisched_shard_fence_refusals_total | reservations refused: the node's ledger was full |
| minisched_shard_fallbacks_total | scheduling cycles that left the partition for all nodes |
| minisched_shard_ring_changes_total | changes of the member list seen |
| minisched_shard_pods_taken_over_total | pending pods queued because the ring gave them to us |
| minisched_shard_pods_handed_off_total | queued pods dropped because the ring gave them away |
| minisched_shard_ledger_pruned_total | stale ledger entries the cleanup removed |
| minisched_shard_lease_renew_failures_total | lease renewals that failed |
| minisched_shard_ledgers_deleted_total | capacity ledgers of deleted nodes removed |
| minisched_shard_bind_stale_versions_total | of the bind 409s, those whose resourceVersion precondition failed (pod written since the decision, or its reservation revoked) |
| minisched_shard_revocations_total | pods written to fence off the binding of a reservation about to be removed |
| minisched_shard_revoked_bound_total | of those, pods the answer showed bound: the entry was kept |
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from minisched.sharding.shard import Shard

__all__ = ["ShardCollector", "register_shard_metrics"]

_GAUGES = (
    ("members", "minisched_shard_members", "Live members of the ring, as this replica sees it."),
    ("owned_pods", "minisched_shard_owned_pods", "Pending pods the ring gives this replica."),
    ("partition_nodes", "minisched_shard_partition_nodes", "Nodes in this replica's partition."),
)
_COUNTERS = (
    ("scheduled", "minisched_shard_scheduled", "Pods this replica bound."),
    ("bind_conflicts", "minisched_shard_bind_conflicts", "409 Conflict answers to pods/binding."),
    ("fence_conflicts", "minisched_shard_fence_conflicts", "409 Conflict answers to capacity-ledger writes (re-read and decided again)."),
    ("fence_refusals", "minisched_shard_fence_refusals", "Reservations the capacity ledger refused: the node was full."),
    ("fallbacks", "minisched_shard_fallbacks", "Scheduling cycles that found no node in the partition and tried all nodes."),
    ("ring_changes", "minisched_shard_ring_changes", "Changes of the ring's member list seen by this replica."),
    ("pods_taken_over", "minisched_shard_pods_taken_over", "Pending pods queued because the ring gave them to this replica."),
    ("pods_handed_off", "minisched_shard_pods_handed_off", "Queued pods dropped because the ring gave them to another replica."),
    ("ledger_pruned", "minisched_shard_ledger_pruned", "Stale capacity-ledger entries removed by the cleanup."),
    ("renew_failures", "minisched_shard_lease_renew_failures", "Lease renewals that failed."),
    ("ledgers_deleted", "minisched_shard_ledgers_deleted", "Capacity ledgers of deleted nodes removed."),
    ("bind_stale_versions", "minisched_shard_bind_stale_versions",
     "409s on pods/binding whose resourceVersion precondition failed (the pod was written since the decision)."),
    ("revocations", "minisched_shard_revocations",
     "Pods written to fence off the binding of a capacity reservation about to be removed."),
    ("revoked_bound", "minisched_shard_revoked_bound",
     "Revocations whose answer showed the pod bound already (the reservation was kept)."),
)


class ShardCollector(Collector):
    def __init__(self, shard: Shard) -> None:
        self.shard = shard

    def collect(self) -> Iterator[Metric]:
        stats = self.shard.stats()
        labels = ["group", "shard"]
        values = [stats.group, stats.identity]
        for attr, name, doc in _GAUGES:
            gauge = GaugeMetricFamily(name, doc, labels=labels)
            gauge.add_metric(values, getattr(stats, attr))
            yield gauge
        for attr, name, doc in _COUNTERS:
            counter = CounterMetricFamily(name, doc, labels=labels)
            counter.add_metric(values, getattr(stats, attr))
            yield counter


def register_shard_metrics(registry: CollectorRegistry, shard: Shard) -> ShardCollector:
    collector = ShardCollector(shard)
    registry.register(collector)
    return collector
