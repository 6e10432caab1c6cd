"""kube's scheduler_perf workloads, run against minisched and kube-scheduler.

- `workloads`: finds and parses test/integration/scheduler_perf/*/performance-config.yaml and its
  templates in the Go module cache (never copied into this repository).
- `driver`: runs one workload's ops on a cluster while a scheduler runs, measures it as
  scheduler_perf does, and lists whatever it could not run.
- `backends`: minisched on the embedded cluster; minisched and kube-scheduler on a real control plane.

bench/scheduler_perf_bench.py prints the table; tests/perf runs the smallest sizes for correctness.
"""

from minisched.perf.workloads import (
    TestCase,
    Workload,
    WorkloadError,
    WorkloadFilesNotFound,
    load_test_cases,
    scheduler_perf_root,
)

# The workloads issue 10 runs, in the order it lists them.
ISSUE_WORKLOADS: tuple[str, ...] = (
    "SchedulingBasic",
    "SchedulingPodAntiAffinity",
    "SchedulingPodAffinity",
    "SchedulingPreferredPodAffinity",
    "SchedulingPreferredPodAntiAffinity",
    "SchedulingNodeAffinity",
    "TopologySpreading",
    "PreferredTopologySpreading",
    "PreemptionBasic",
    "Unschedulable",
    "SchedulingWithMixedChurn",
)
# Plugins a test case needs that minisched may not have yet (issue 10: InterPodAffinity lands in parallel).
NEEDS_INTER_POD_AFFINITY: frozenset[str] = frozenset({
    "SchedulingPodAntiAffinity",
    "SchedulingPodAffinity",
    "SchedulingPreferredPodAffinity",
    "SchedulingPreferredPodAntiAffinity",
})

__all__ = [
    "ISSUE_WORKLOADS",
    "NEEDS_INTER_POD_AFFINITY",
    "TestCase",
    "Workload",
    "WorkloadError",
    "WorkloadFilesNotFound",
    "load_test_cases",
    "scheduler_perf_root",
]
