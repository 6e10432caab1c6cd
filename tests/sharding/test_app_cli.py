"""`minisched run --shards`: the flags (a contract other tests and the benchmark rely on), the app
with two replicas on one embedded cluster (real clock), and the per-shard metrics."""

from __future__ import annotations

import threading
import urllib.request

import pytest

from minisched.app import SchedulerApp
from minisched.cli import _parser, main
from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.resources import LEASES, NODES, PODS
from tests.scheduler.runtime.helpers import wait_until


def test_the_shard_flags_and_their_defaults() -> None:
    args = _parser().parse_args(["run", "--shards"])
    assert (args.shards, args.shard_group, args.shard_lease_duration, args.no_capacity_fence) == (
        True, "minisched", 15.0, False)
    assert (args.identity, args.lease_namespace) == (None, "kube-system")
    args = _parser().parse_args(["run", "--shards", "--shard-group", "blue", "--shard-lease-duration", "6",
                                 "--identity", "sched-1", "--lease-namespace", "sched", "--no-capacity-fence"])
    assert (args.shard_group, args.shard_lease_duration, args.identity, args.lease_namespace,
            args.no_capacity_fence) == ("blue", 6.0, "sched-1", "sched", True)


@pytest.mark.parametrize(("argv", "message"), [
    (["--shards", "--leader-elect"], "--shards and --leader-elect exclude each other"),
    (["--no-capacity-fence"], "--no-capacity-fence needs --shards"),
    (["--shards", "--shard-group", "Blue_1"], "--shard-group must be a DNS label"),
    (["--shards", "--shard-lease-duration", "2"], "--shard-lease-duration must be at least 3 seconds"),
])
def test_bad_shard_flags_are_named(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--embedded", *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_app_refuses_contradictory_options() -> None:
    cluster = EmbeddedCluster()
    with pytest.raises(ValueError, match="exclude each other"):
        SchedulerApp(cluster, shards=True, leader_elect=True)
    with pytest.raises(ValueError, match="only makes sense for sharded replicas"):
        SchedulerApp(cluster, capacity_fence=False)


def test_two_sharded_apps_share_the_pods_and_leave_the_ring_when_stopped() -> None:
    cluster = EmbeddedCluster()
    for i in range(4):
        cluster.create(NODES, make_node(f"n{i}", cpu="16", memory="64Gi"))
    apps = [SchedulerApp(cluster, shards=True, identity=f"sched-{n}", shard_lease_duration=3, metrics_port=0,
                         shutdown_timeout=5) for n in "ab"]
    stops = [threading.Event() for _ in apps]
    threads = [threading.Thread(target=app.run, args=(stop,), daemon=True) for app, stop in zip(apps, stops, strict=True)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: all(app.shard is not None and len(app.shard.ring) == 2 for app in apps), 30,
                   "both replicas in both rings")
        for i in range(40):
            cluster.create(PODS, make_pod(f"p{i:02d}"))
        wait_until(lambda: sum(1 for p in cluster.list(PODS)["items"] if p["spec"].get("nodeName")) == 40, 60,
                   "40 pods bound")
        bound = [app.scheduler.stats.bound for app in apps if app.scheduler is not None]
        assert sum(bound) == 40 and min(bound) > 0  # both worked
        assert apps[0].server is not None
        text = urllib.request.urlopen(f"{apps[0].server.url}/metrics", timeout=10).read().decode()
        assert 'minisched_shard_members{group="minisched",shard="sched-a"} 2.0' in text
        assert f'minisched_shard_scheduled_total{{group="minisched",shard="sched-a"}} {bound[0]}.0' in text
        assert "minisched_shard_fence_refusals_total" in text and "scheduler_schedule_attempts_total" in text
        assert "minisched_shard_ledgers_deleted_total" in text
        assert urllib.request.urlopen(f"{apps[0].server.url}/readyz", timeout=10).status == 200
    finally:
        for stop in stops:
            stop.set()
        for t in threads:
            t.join(15)
    assert not any(t.is_alive() for t in threads)
    for name in ("minisched-shard-sched-a", "minisched-shard-sched-b"):  # released, not left to expire
        assert cluster.get(LEASES, name, "kube-system")["spec"]["holderIdentity"] == ""


def test_reset_all_removes_the_shard_leases_and_capacity_ledgers() -> None:
    from minisched.resources import CONFIG_MAPS
    from minisched.sharding import CapacityLedger, Membership, ledger_units
    from minisched.workbook import reset

    cluster = EmbeddedCluster()
    Membership(cluster, identity="sched-a").renew()
    ledger = CapacityLedger(cluster, holder="sched-a")
    assert ledger.reserve("n1", "uid-1", {"cpu": 1000}, ledger_units({"cpu": "4"}), pod="default/p")
    cluster.create(CONFIG_MAPS, {"metadata": {"name": "someone-elses", "namespace": "kube-system"}, "data": {}},
                   "kube-system")
    report = reset(cluster, cluster_wide=True)
    assert report.deleted.get("configmaps") == 1
    assert [c["metadata"]["name"] for c in cluster.list(CONFIG_MAPS, "kube-system")["items"]] == ["someone-elses"]
    assert not cluster.list(LEASES, "kube-system")["items"]
