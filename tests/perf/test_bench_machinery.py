"""The machinery of bench/scheduler_perf_bench.py at tiny sizes (seconds): backlog drains that keep
the driver out of the measured rate, both scoring settings, what-limited-it, and the side-by-side
table. Figures are printed by the bench; nothing here compares a timing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from minisched.perf import TestCase, WorkloadFilesNotFound, load_test_cases
from minisched.perf.backends import EmbeddedMinisched, perf_scheduler_config
from minisched.perf.driver import Executor, run_workload
from minisched.perf.measure import CpuSampler, DrainCpu, drain_limit, kept_pace
from minisched.scheduler.framework.algorithm import num_feasible_nodes_to_find
from minisched.scheduler.framework.profile import profiles_from_config
from tests.plugins.controlplane import skip_unless_ci

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scheduler_perf_bench.py"


@pytest.fixture(scope="module")
def cases() -> dict[str, TestCase]:
    try:
        return load_test_cases()
    except WorkloadFilesNotFound as err:
        skip_unless_ci(str(err))


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scheduler_perf_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("mode", ["backlog", "arrival"])
def test_a_backlog_drain_creates_every_measured_pod_while_no_scheduler_runs(
    cases: dict[str, TestCase], mode: str
) -> None:
    """In backlog mode the driver's creation rate cannot be in the figure: the scheduler is stopped
    while the measured pods are created and a fresh one started after; in arrival mode (kube's
    way) it runs throughout."""
    from minisched.resources import PODS, resolve

    workload = cases["SchedulingBasic"].smallest("integration-test")
    i, measured_op = next((i, op) for i, op in enumerate(workload.ops) if op.get("collectMetrics"))
    measured_namespace = measured_op.get("namespace") or f"namespace-{i}"
    backend = EmbeddedMinisched()
    real_create = backend.cluster.create
    scheduler_running: list[bool] = []

    def create(resource: Any, obj: Any, namespace: str | None = None) -> Any:
        if resolve(resource) == PODS and namespace == measured_namespace:
            scheduler_running.append(backend._scheduler is not None)
        return real_create(resource, obj, namespace)

    backend.cluster.create = create  # type: ignore[method-assign]
    result = run_workload(workload, backend, wait_timeout=30, mode=mode)
    assert result.ok, result.problems()
    t = result.throughput[-1]
    assert len(scheduler_running) == t.pods == measured_op["count"]
    if mode == "arrival":
        assert all(scheduler_running) and t.mode == "arrival" and t.kept_pace is not None
        return
    assert not any(scheduler_running)
    assert t.mode == "backlog" and t.scheduler_limited and t.start_to_first_bind is not None
    assert t.limit.startswith(("scheduler", "cores"))


def test_an_unknown_mode_is_refused_by_name(cases: dict[str, TestCase]) -> None:
    backend = EmbeddedMinisched()
    try:
        with pytest.raises(ValueError, match="'steady'.*backlog, arrival"):
            Executor(cases["SchedulingBasic"].smallest(), backend, mode="steady")
    finally:
        backend.stop()


def test_default_scoring_leaves_the_field_out_and_both_schedulers_use_kubes_adaptive_rule() -> None:
    assert perf_scheduler_config("x")["percentageOfNodesToScore"] == 100
    default = perf_scheduler_config("x", None)
    assert "percentageOfNodesToScore" not in default
    profile = profiles_from_config(default)[0]
    assert profile.percentage_of_nodes_to_score is None  # the framework's default: 0, adaptive
    assert num_feasible_nodes_to_find(0, 5000) == 500  # kube: 50% - 5000/125 = 10%
    assert num_feasible_nodes_to_find(0, 100_000) == 5000  # never under 5%
    assert num_feasible_nodes_to_find(100, 5000) == 5000


def test_kept_pace_means_the_rate_is_the_drivers() -> None:
    # created over 10 s, last bound 0.3 s after the last creation: the scheduler kept pace
    assert kept_pace(created_end=10.0, last_bind=10.3, create_seconds=10.0)
    # 20 s behind: pods queued, the rate is the scheduler's
    assert not kept_pace(created_end=10.0, last_bind=30.0, create_seconds=10.0)
    # a long creation allows a tenth of it
    assert kept_pace(created_end=100.0, last_bind=109.0, create_seconds=100.0)


def test_drain_limit_names_the_cores_or_the_scheduler() -> None:
    busy = DrainCpu(10.0, {"scheduler": 9.5, "kube-apiserver": 6.0, "etcd": 1.0}, machine=19.0, cores=2)
    assert drain_limit(busy).startswith("cores: 95% of 2 busy (scheduler 0.95, API server + etcd 0.70")
    assert busy.others == pytest.approx(2.5)
    spare = DrainCpu(10.0, {"scheduler": 9.8, "kube-apiserver": 2.0}, machine=12.0, cores=2)
    assert drain_limit(spare) == "scheduler: 0.98 cores of its own, machine 60% busy"
    assert drain_limit(None).startswith("scheduler (window too short")


def test_cpu_sampler_interpolates_over_a_window() -> None:
    ticks = iter([0.0, 1.0, 3.0, 3.0])
    sampler = CpuSampler({"scheduler": lambda: next(ticks)}, interval=0.01)
    sampler.series["scheduler"] = [(10.0, 0.0), (11.0, 1.0), (13.0, 3.0)]
    assert sampler.cpu_between("scheduler", 10.5, 12.0) == pytest.approx(1.5)
    assert sampler.cpu_between("scheduler", 9.0, 12.0) is None  # before the first sample
    assert sampler.cpu_between("missing", 10.0, 11.0) is None
    with pytest.raises(ValueError, match="'machine'"):
        CpuSampler({"machine": lambda: 0.0})
    with CpuSampler({"scheduler": lambda: 1.0}, interval=0.01) as live:
        pass
    assert len(live.series["machine"]) >= 2 and live.series["machine"][-1][1] >= live.series["machine"][0][1]


def test_the_bench_runs_both_scorings_and_prints_them_side_by_side(
    bench: ModuleType, cases: dict[str, TestCase], capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["--short", "--backends", "embedded", "--workloads", "SchedulingBasic",
                       "--scoring", "100,default", "--budget-minutes", "1"]) == 0
    out = capsys.readouterr().out
    assert "mode backlog" in out and "measured: backlog drain of" in out
    table = [line for line in out.splitlines() if line.startswith("| SchedulingBasic/5Nodes")]
    assert [line.split(" | ")[1] for line in table] == ["100", "default"]
    assert all("backlog;" in line for line in table)


def test_the_bench_in_arrival_mode_says_what_it_measured(
    bench: ModuleType, cases: dict[str, TestCase], capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["--short", "--backends", "embedded", "--workloads", "SchedulingBasic",
                       "--scoring", "100", "--mode", "arrival"]) == 0
    out = capsys.readouterr().out
    assert "measured: arrival, pods created at" in out
    assert "arrival;" in out.splitlines()[-1]


def test_the_bench_refuses_an_unknown_scoring(bench: ModuleType, cases: dict[str, TestCase]) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--short", "--backends", "embedded", "--scoring", "50"])


def test_a_minisched_tree_must_hold_minisched(bench: ModuleType, cases: dict[str, TestCase], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """--minisched-tree runs another checkout's scheduler beside this one's (before/after figures):
    a directory that is not one is refused by name before any control plane starts."""
    with pytest.raises(SystemExit):
        bench.main(["--short", "--backends", "minisched", "--workloads", "SchedulingBasic",
                    "--minisched-tree", str(tmp_path)])
    assert f"--minisched-tree {tmp_path}: no minisched/cli.py there" in capsys.readouterr().err


def test_only_minisched_as_a_process_runs_from_another_tree(tmp_path: Path) -> None:
    from minisched.perf.backends import RealScheduler

    repo = BENCH.parents[1]
    with pytest.raises(ValueError, match="source_tree is for minisched as its own process"):
        RealScheduler("kube-scheduler", cluster=None, cp=object(), source_tree=repo)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no minisched/cli.py there"):
        RealScheduler("minisched", cluster=None, cp=object(), source_tree=tmp_path)  # type: ignore[arg-type]
    assert RealScheduler("minisched", cluster=None, cp=object(),  # type: ignore[arg-type]
                         source_tree=repo).label == f"minisched/real from {repo}"


def test_performance_sizes_are_kubes_performance_labelled_workloads(
    bench: ModuleType, cases: dict[str, TestCase]
) -> None:
    for name, size in bench.PERFORMANCE_SIZES.items():
        raw = next(w for w in cases[name].workloads if w["name"] == size)
        assert "performance" in raw.get("labels", []), f"{name}/{size}"
    ordered = sorted((cases[n].workload(s) for n, s in bench.PERFORMANCE_SIZES.items()), key=bench.workload_cost)
    assert ordered[0].full_name == "PreemptionBasic/1000Nodes"  # smallest first


def test_a_backlog_rows_rate_counts_the_seconds_before_its_first_binding(bench: ModuleType) -> None:
    """PreemptionBasic: kube-scheduler bound nothing for 100 s (dry runs, evictions), then 1,000
    pods in 5 s; SchedulingThroughput's samples start at the first binding (~200 pods/s), the
    scheduler's rate over its drain is ~10 pods/s."""
    from minisched.perf.driver import Throughput, WorkloadResult

    t = Throughput([200.0, 200.0], pods=1000, seconds=105.0, mode="backlog", limit="cores")
    result = WorkloadResult("PreemptionBasic/1000Nodes", "kube", None, {}, throughput=[t])
    assert bench.row_of(result, "kube", "100")["pods_per_s"] == pytest.approx(1000 / 105)
    t.mode = "arrival"
    assert bench.row_of(result, "kube", "100")["pods_per_s"] == 200.0


def test_side_by_side_puts_each_backends_figures_in_its_own_columns(bench: ModuleType) -> None:
    rows = [
        {"workload": "W", "backend": "minisched", "scoring": "100", "pods_per_s": 250.0,
         "cpu_s_per_1000_pods": 2.5, "peak_rss_mib": 260.0, "limit": "backlog; cores"},
        {"workload": "W", "backend": "kube", "scoring": "100", "pods_per_s": 41.0,
         "cpu_s_per_1000_pods": 30.5, "peak_rss_mib": 330.0, "limit": "stopped: x"},
    ]
    lines = bench.side_by_side(rows, ["minisched", "kube"]).splitlines()
    assert lines[0].startswith("| workload | scoring | minisched pods/s | kube pods/s |")
    assert lines[2] == ("| W | 100 | 250.0 | 41.0 | 2.5 | 30.5 | 260.0 | 330.0 | backlog; cores | stopped: x |")
