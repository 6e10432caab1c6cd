"""kube's scheduler_perf workloads (read from the Go module cache) as correctness runs: the smallest
integration-test workload of each test case issue 10 lists, on the embedded cluster and on the real
control plane; every pod the workload waits for must be scheduled, no node over-committed, no pod
bound twice. Throughput is measured in bench/scheduler_perf_bench.py, never here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minisched.perf import (
    ISSUE_WORKLOADS,
    TestCase,
    WorkloadFilesNotFound,
    load_test_cases,
    scheduler_perf_root,
)
from minisched.perf.backends import (
    EmbeddedMinisched,
    RealScheduler,
    has_inter_pod_affinity,
    perf_scheduler_config,
)
from minisched.perf.driver import parse_duration, replay_throughput, run_workload, unsupported_parts
from minisched.perf.workloads import WorkloadError, load_template
from tests.plugins.controlplane import skip_unless_ci

WAIT_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def cases() -> dict[str, TestCase]:
    try:
        return load_test_cases()
    except WorkloadFilesNotFound as err:
        skip_unless_ci(str(err))


def _check(result: Any) -> None:
    assert result.ok, f"{result.workload} on {result.backend}: {result.problems()}"
    assert result.pods_created > 0 and result.nodes_created > 0
    assert result.throughput, "the measured createPods op recorded nothing"
    assert result.throughput[-1].pods > 0
    t = result.throughput[-1]
    # creation -> binding, per pod, as the observer's watch saw both: within the op's time
    assert t.latency_p50 is not None and t.latency_p99 is not None
    assert 0 <= t.latency_p50 <= t.latency_p99 <= t.seconds


@pytest.mark.parametrize("name", ISSUE_WORKLOADS)
def test_smallest_workload_on_embedded_cluster(
    request: pytest.FixtureRequest, cases: dict[str, TestCase], name: str
) -> None:
    workload = cases[name].smallest("integration-test")
    assert not unsupported_parts(workload), "every op of the issue's workloads is supported"
    _check(run_workload(workload, EmbeddedMinisched(), wait_timeout=WAIT_TIMEOUT))


@pytest.mark.realcluster
@pytest.mark.parametrize("name", ISSUE_WORKLOADS)
def test_smallest_workload_on_real_control_plane(
    request: pytest.FixtureRequest, cases: dict[str, TestCase], name: str, real_cluster: Any
) -> None:
    workload = cases[name].smallest("integration-test")
    _check(run_workload(workload, RealScheduler("minisched", real_cluster, in_process=True),
                        wait_timeout=WAIT_TIMEOUT))


# ---------------------------------------------------------------------------------------- the parts


def test_params_are_substituted_and_counts_filled(cases: dict[str, TestCase]) -> None:
    w = cases["SchedulingBasic"].workload("500Nodes")
    assert [op.get("count") for op in w.ops] == [500, 500, 1000]
    assert "countParam" not in w.ops[0]
    assert w.ops[2]["collectMetrics"] is True
    assert cases["SchedulingBasic"].smallest().name == "5Nodes"
    assert cases["SchedulingBasic"].workload("5000Nodes_10000Pods").threshold == 270


def test_missing_module_cache_names_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(WorkloadFilesNotFound, match="make controlplane"):
        scheduler_perf_root(module_cache=tmp_path)


def test_unsupported_ops_and_options_are_listed(cases: dict[str, TestCase]) -> None:
    tc = cases["SchedulingBasic"]
    raw = TestCase(tc.name, tc.config_file,
                   (*tc.template, {"opcode": "updateAny", "templatePath": "x"},
                    {"opcode": "createPods", "count": 1, "steadyState": True}),
                   tc.workloads, tc.default_pod_template)
    found = {u.what for u in unsupported_parts(raw.workload("5Nodes"))}
    assert found == {"updateAny", "createPods.steadyState"}


def test_throughput_replays_kubes_sampling() -> None:
    # first tick (1.0) only starts the clock at 2 pods; 3 more by 2.0; none by 3.0; 3 more by 4.0
    binds = [0.2, 0.5, 1.2, 1.5, 1.9, 3.5, 3.6, 3.7]
    assert replay_throughput(binds, 0.0) == [3.0, 1.5, 1.5]
    assert replay_throughput([0.1, 0.2], 0.0) == []  # all within the first (skipped) sample
    assert replay_throughput([], 0.0) == []


def test_creation_to_binding_latencies_are_nearest_rank_percentiles() -> None:
    from minisched.perf.driver import Throughput

    t = Throughput([], pods=200, seconds=3.0)
    t.set_latencies([i / 100 for i in range(200, 0, -1)])  # 0.01 .. 2.00 s, in any order
    assert t.latency_p50 == 1.0 and t.latency_p99 == 1.98
    empty = Throughput([], pods=0, seconds=0.0)
    empty.set_latencies([])
    assert empty.latency_p50 is None and empty.latency_p99 is None


def test_index_placeholders_and_bad_templates(tmp_path: Path) -> None:
    good = tmp_path / "node.yaml"
    good.write_text("kind: Node\nmetadata:\n  name: node-{{.Index}}-of-{{ .Count }}\n")
    assert load_template(good, 3, 10)["metadata"]["name"] == "node-3-of-10"
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Node\nmetadata:\n  name: '{{if .Index}}x{{end}}'\n")
    with pytest.raises(WorkloadError, match="bad.yaml"):
        load_template(bad)


def test_go_durations() -> None:
    assert parse_duration("1m30s") == 90
    assert parse_duration("500ms") == 0.5
    with pytest.raises(ValueError, match="Go duration"):
        parse_duration("5 seconds")


def test_both_schedulers_get_one_config() -> None:
    cfg = perf_scheduler_config("x")
    names = [p["name"] for p in cfg["profiles"][0]["plugins"]["multiPoint"]["enabled"]]
    assert ("InterPodAffinity" in names) == has_inter_pod_affinity()
    assert cfg["clientConnection"]["qps"] >= 5000 and cfg["percentageOfNodesToScore"] == 100


def test_create_any_sleep_barrier_and_delete_on_embedded_cluster(tmp_path: Path) -> None:
    from minisched.resources import CONFIG_MAPS, PODS, PRIORITY_CLASSES

    (tmp_path / "case").mkdir()
    (tmp_path / "pc.yaml").write_text("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
                                      "metadata:\n  name: pc-{{.Index}}\nvalue: 5\n")
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: cm-\n")
    (tmp_path / "widget.yaml").write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n")
    (tmp_path / "node.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata:\n  generateName: n-\n"
                                        "status:\n  capacity: {cpu: '4', memory: 8Gi, pods: '10'}\n")
    (tmp_path / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: p-\nspec:\n"
                                       "  containers: [{name: c, image: i}]\n")
    ops = (
        {"opcode": "createAny", "templatePath": "../pc.yaml", "countParam": "$n"},
        {"opcode": "createAny", "templatePath": "../cm.yaml", "namespace": "extra"},
        {"opcode": "createAny", "templatePath": "../widget.yaml"},
        {"opcode": "createNodes", "count": 2, "nodeTemplatePath": "../node.yaml",
         "uniqueNodeLabelStrategy": {"labelKey": "example.com/unique"}},
        {"opcode": "createPods", "count": 3, "podTemplatePath": "../pod.yaml", "namespace": "w",
         "skipWaitToCompletion": True},
        {"opcode": "sleep", "duration": "10ms"},
        {"opcode": "barrier"},
        {"opcode": "createPods", "count": 2, "podTemplatePath": "../pod.yaml", "collectMetrics": True},
        {"opcode": "deletePods", "namespace": "w"},
    )
    tc = TestCase("Custom", tmp_path / "case" / "performance-config.yaml", ops,
                  ({"name": "small", "params": {"n": 2}},), None)
    backend = EmbeddedMinisched()
    cluster = backend.cluster
    seen: dict[str, Any] = {}
    original_stop = backend.stop

    def stop() -> None:  # look at the cluster before the backend closes it
        seen["pcs"] = [p["metadata"]["name"] for p in cluster.list(PRIORITY_CLASSES)["items"]]
        seen["cms"] = len(cluster.list(CONFIG_MAPS, "extra")["items"])
        seen["w"] = len(cluster.list(PODS, "w")["items"])
        seen["nodes"] = [n["metadata"]["labels"]["example.com/unique"] for n in cluster.list("nodes")["items"]]
        original_stop()

    backend.stop = stop  # type: ignore[method-assign]
    result = run_workload(tc.workload("small"), backend, wait_timeout=WAIT_TIMEOUT)
    assert result.ok, result.problems()
    assert {"pc-0", "pc-1"} <= set(seen["pcs"]) and seen["cms"] == 1 and seen["w"] == 0
    assert sorted(seen["nodes"]) == ["unique-0", "unique-1"]
    assert [u.what for u in result.unsupported] == ["createAny Widget"]
    assert result.throughput[0].pods == 2


def test_a_taken_generated_name_is_the_servers_to_retry_not_the_drivers(tmp_path: Path) -> None:
    """kube-apiserver generates a new name when a generateName'd one is taken (RetryGenerateName),
    and so does the embedded cluster (tests/contract): the driver sends each create once."""
    from minisched.errors import AlreadyExists
    from minisched.perf.driver import Executor
    from minisched.resources import CONFIG_MAPS

    tc = TestCase("Custom", tmp_path / "performance-config.yaml", ({"opcode": "barrier"},),
                  ({"name": "w", "params": {}},), None)
    backend = EmbeddedMinisched()
    cluster = backend.cluster
    try:
        ex = Executor(tc.workload("w"), backend)
        ex.ensure_namespace("ns")
        first = ex.create_object(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"generateName": "cm-"}}, "ns")
        generate = cluster.name_generator  # type: ignore[attr-defined]
        calls: list[str] = []

        def colliding(base: str) -> str:
            calls.append(base)
            return first if len(calls) <= 3 else generate(base)

        cluster.name_generator = colliding  # type: ignore[attr-defined]
        name = ex.create_object(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                              "metadata": {"generateName": "cm-"}}, "ns")
        assert name.startswith("cm-") and name != first and len(calls) == 4  # retried by the server
        sent: list[str] = []
        real_create = cluster.create

        def refusing(resource: Any, obj: Any, namespace: str | None = None) -> Any:
            sent.append(obj["metadata"].get("generateName") or obj["metadata"].get("name"))
            raise AlreadyExists("taken")

        cluster.create = refusing  # type: ignore[method-assign]
        with pytest.raises(AlreadyExists):
            ex.create_object(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"generateName": "cm-"}}, "ns")
        assert sent == ["cm-"]  # once: the server's answer after its own retries is final
        cluster.create = real_create  # type: ignore[method-assign]
    finally:
        backend.stop()


def test_params_can_be_overridden_and_the_name_says_so(tmp_path: Path) -> None:
    ops = ({"opcode": "createNodes", "countParam": "$initNodes"},
           {"opcode": "createPods", "countParam": "$measurePods", "collectMetrics": True})
    tc = TestCase("PreemptionBasic", tmp_path / "performance-config.yaml", ops,
                  ({"name": "1000Nodes", "threshold": 5, "params": {"initNodes": 1000, "measurePods": 1000}},), None)
    w = tc.workload("1000Nodes", {"initNodes": 500})
    assert [op["count"] for op in w.ops] == [500, 1000]
    assert w.name == "1000Nodes[initNodes=500]" and w.threshold is None
    assert tc.workload("1000Nodes").ops[0]["count"] == 1000
    with pytest.raises(WorkloadError, match="no params \\['nodes'\\]"):
        tc.workload("1000Nodes", {"nodes": 5})


def test_pods_created_from_many_threads_never_outrun_their_priority_class(tmp_path: Path) -> None:
    """The driver maps spec.priority to a PriorityClass it creates on first use. With 16 creator
    threads (the real backends'), the other threads used the class's name before it existed and the
    API server refused the pod (403 "no PriorityClass with name scheduler-perf-priority-10 was
    found", PreemptionBasic at 500 nodes). Here creating the class is slowed to make that certain."""
    import time as _time

    from minisched.perf.driver import Executor
    from minisched.resources import PODS, PRIORITY_CLASSES, resolve

    (tmp_path / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: p-\nspec:\n"
                                       "  priority: 10\n  containers: [{name: c, image: i}]\n")
    tc = TestCase("Custom", tmp_path / "case" / "performance-config.yaml", ({"opcode": "barrier"},),
                  ({"name": "w", "params": {}},), None)
    backend = EmbeddedMinisched()
    backend.create_workers = 16
    real_create = backend.cluster.create

    def create(resource: Any, obj: Any, namespace: str | None = None) -> Any:
        if resolve(resource) == PRIORITY_CLASSES:
            _time.sleep(0.3)
        return real_create(resource, obj, namespace)

    try:
        ex = Executor(tc.workload("w"), backend)
        ex.ensure_namespace("ns")
        backend.cluster.create = create  # type: ignore[method-assign]
        names = ex._create_many(PODS, tmp_path / "pod.yaml", 32, "ns")
        assert len(set(names)) == 32
        pods = backend.cluster.list(PODS, "ns")["items"]
        assert {p["spec"]["priorityClassName"] for p in pods} == {"scheduler-perf-priority-10"}
        assert {p["spec"]["priority"] for p in pods} == {10}
    finally:
        backend.stop()
