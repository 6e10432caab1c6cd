"""`minisched run` imports only what it runs with: its start-up CPU is part of the CPU per pod
(issue 27: ~0.5 CPU-s of imports were ~100 µs per pod of a 5,000-pod drain). Each check runs in a
fresh interpreter, since this one has imported everything the other tests use.

Left out on purpose, and imported only where used: tenacity (which imports tornado, and asyncio,
whenever tornado is installed, as it is for Jupyter) for RetryPolicy.run, which the scheduler
process never calls; numpy.ma, which np.unique imports on its first call; opentelemetry, when no
OTLP endpoint is set. The `kubernetes` client stays a lazy import of RealCluster.from_kubeconfig
and in_cluster: parsing a kubeconfig needs it, the embedded cluster does not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from minisched.app import YOUNG_COLLECTION_THRESHOLD

NOT_AT_START = ("tenacity", "tornado", "asyncio", "numpy.ma", "opentelemetry", "kubernetes")

# Runs `minisched run --embedded` in the main thread (it installs signal handlers); once /readyz
# answers 200 it records sys.modules, the collector's settings and the threads, then schedules pods
# on that cluster (a cycle, a binding, the events: what runs after start), records sys.modules again
# and stops the run with SIGTERM; when main() has returned, the collector's settings once more.
RUN_UNTIL_READY = """
import gc, http.client, json, os, signal, socket, sys, threading, time
from minisched import cli
from minisched.objects import make_node, make_pod

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
clusters = []
connect = cli._connect
cli._connect = lambda args: clusters.append(connect(args)) or clusters[0]

def ready() -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except OSError:
        return False

def wait(predicate) -> bool:
    deadline = time.monotonic() + 60
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()

result = {}

def watch() -> None:
    result.update({"ready": wait(ready), "at_ready": sorted(sys.modules)})
    result["threshold_at_ready"] = gc.get_threshold()[0]
    result["frozen_at_ready"] = gc.get_freeze_count()
    # threads the interpreter did not start (OpenBLAS's are started by the numpy import)
    result["foreign_threads"] = len(os.listdir("/proc/self/task")) - threading.active_count()
    result["thread_cpus_at_ready"] = sorted({tuple(sorted(os.sched_getaffinity(int(tid))))
                                             for tid in os.listdir("/proc/self/task")})
    cluster = clusters[0]
    for i in range(3):
        cluster.create("nodes", make_node(f"n{i}"))
    for i in range(30):
        cluster.create("pods", make_pod(f"p{i}", labels={"app": "web"}))
    result["bound"] = wait(lambda: all(p["spec"].get("nodeName") for p in cluster.list("pods")["items"]))
    result["after_scheduling"] = sorted(sys.modules)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=watch, daemon=True).start()
def settings() -> dict:
    return {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count(), "cpus": sorted(os.sched_getaffinity(0))}

result["before_run"] = settings()
result["code"] = cli.main(["run", "--embedded", "--metrics-port", str(port)])
result["after_run"] = settings()
with open(sys.argv[1], "w") as f:
    json.dump(result, f)
"""

# The pod index compacts (and renumbers its vocabularies) after COMPACT_MIN free slots: churn
# past that, with labels, namespaces and affinity terms, as a long run does.
COMPACT_POD_INDEX = """
import json, sys
from minisched.objects import make_node, make_pod
from minisched.scheduler import pod_index
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

table = NodeTable()
table.add_node(make_node("n0"))
affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"job": "j"}}, "topologyKey": "kubernetes.io/hostname"}]}}
for i in range(2 * pod_index.COMPACT_MIN + 10):
    pod = PodInfo.from_pod(make_pod(f"p{i}", namespace=f"ns-{i % 3}", labels={"job": f"j{i % 7}", "uid": str(i)},
                                    affinity=affinity))
    table.add_pod("n0", pod)
    if i >= 4:
        table.remove_pod("n0", f"ns-{(i - 4) % 3}/p{i - 4}")
index = table.indexed_pods()
assert index.slots <= 8, index.slots  # it compacted
json.dump({"modules": sorted(sys.modules), "uids": sorted(index.labels_known()["uid"])}, open(sys.argv[1], "w"))
"""


# What `minisched run --kubeconfig` sets up before it connects: the client from a kubeconfig (the
# server is not asked) and the app. Sharding and the plugin-config controller, and with them the
# CRD models (pydantic classes built at import), are for `--shards` and `--plugin-config` only; the
# kubernetes client imports pydantic itself.
REAL_CLUSTER_SETUP = """
import json, pathlib, sys
from minisched import cli
from minisched.app import SchedulerApp
from minisched.cluster.real import RealCluster

kubeconfig = pathlib.Path(sys.argv[1]).with_name("kubeconfig")
kubeconfig.write_text(json.dumps({
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True}}],
    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "t"}}]}))
cluster = RealCluster.from_kubeconfig(path=str(kubeconfig))
app = SchedulerApp(cluster, metrics_port=0)
json.dump({"server": cluster.server, "modules": sorted(sys.modules)}, open(sys.argv[1], "w"))
"""
ONLY_FOR_SHARDS_OR_PLUGIN_CONFIG = ("minisched.sharding", "minisched.controllers.plugin_config", "minisched.validation")


def run_fresh(code: str, tmp_path: Path) -> dict[str, object]:
    out = tmp_path / "out.json"
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, timeout=120,
                   cwd=Path(__file__).resolve().parents[2])
    result: dict[str, object] = json.loads(out.read_text())
    return result


def loaded(modules: object, *names: str) -> list[str]:
    assert isinstance(modules, list)
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def test_minisched_run_starts_and_schedules_on_the_embedded_cluster_without_what_it_does_not_use(
        tmp_path: Path) -> None:
    result = run_fresh(RUN_UNTIL_READY, tmp_path)
    assert result["ready"] is True and result["bound"] is True
    assert loaded(result["at_ready"], "minisched.scheduler.scheduler", "numpy")  # the probe saw a started scheduler
    assert loaded(result["at_ready"], *NOT_AT_START) == []
    assert loaded(result["after_scheduling"], *NOT_AT_START) == []
    assert result["code"] == 0


def test_minisched_run_tunes_its_process_and_gives_it_back_when_main_returns(tmp_path: Path) -> None:
    """No BLAS threads (numpy's OpenBLAS starts one per core at import and spins it there), young
    collections every 10,000 allocations, the start-up heap frozen and every thread on one CPU; all
    undone when main() returns into a process that goes on."""
    result = run_fresh(RUN_UNTIL_READY, tmp_path)
    assert result["ready"] is True
    assert result["foreign_threads"] == 0
    allowed = result["before_run"]["cpus"]
    [cpus] = result["thread_cpus_at_ready"]  # every thread alike: the loop, binding workers, informers...
    assert len(cpus) == 1 and cpus[0] in allowed
    assert result["threshold_at_ready"] == YOUNG_COLLECTION_THRESHOLD
    assert result["frozen_at_ready"] > 10_000  # the imports' functions, classes, dicts...
    assert result["after_run"] == result["before_run"]
    assert result["before_run"]["frozen"] == 0


def test_the_pod_index_compacts_without_importing_numpy_ma(tmp_path: Path) -> None:
    # np.unique imports numpy.ma on its first call: a step of RSS long after start (found by the
    # real-control-plane soak), which app.py used to pay for at every start instead
    result = run_fresh(COMPACT_POD_INDEX, tmp_path)
    uids = result["uids"]
    assert isinstance(uids, list)
    live = {str(i) for i in range(2 * 1024 + 10 - 4, 2 * 1024 + 10)}
    assert live <= set(uids) and len(uids) < 1024  # renumbered: not one value per pod ever seen
    assert loaded(result["modules"], "numpy.ma") == []


def test_the_app_set_up_on_a_real_cluster_leaves_out_sharding_and_plugin_config(tmp_path: Path) -> None:
    result = run_fresh(REAL_CLUSTER_SETUP, tmp_path)
    assert result["server"] == "https://127.0.0.1:6443"
    assert loaded(result["modules"], "kubernetes")  # parsing the kubeconfig needs the client
    assert loaded(result["modules"], *ONLY_FOR_SHARDS_OR_PLUGIN_CONFIG, *NOT_AT_START[:-1]) == []
