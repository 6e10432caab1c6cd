"""Part II §4.3 on the real control plane: deploy/deployment.yaml's replicas, as separate processes,
sharing one cluster's pods (issue 14's end-to-end proof).

The replicas run exactly the Deployment's container args (minisched.controlplane.replicas.Replicas:
--in-cluster becomes a kubeconfig holding the Deployment's own ServiceAccount token, each replica gets
its own POD_NAME and metrics port) with one change, a short --shard-lease-duration, so that a dead
replica's shard moves within seconds. An independent observer (ClusterObserver: its own connection,
its own watches of pods, nodes and Scheduled events) judges every run: no pod bound twice, no node's
bound requests over its allocatable at any moment, no pod left pending that fits, every pod bound.

Figures (drain and takeover times) are printed (-s shows them); the only time asserted is the one
the design promises, a dead replica's shard finished within its lease plus a generous margin.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from minisched.controlplane.invariants import ClusterObserver
from minisched.controlplane.replicas import Replica, Replicas, deployment_spec
from minisched.sharding.ring import hrw_owner
from tests.faults.helpers import PodCreator, make_nodes

pytestmark = pytest.mark.realcluster

LEASE = 5  # seconds: --shard-lease-duration for these tests (the Deployment's default is longer)
# How long past the lease a dead replica's pods may take to be bound by the others: the survivors
# notice within a renew period, then bind what is left of its shard on a loaded 2-core machine.
TAKEOVER_MARGIN = 60.0
DRAIN_TIMEOUT = 150.0


def _report(what: str, value: float, unit: str = "s") -> None:
    print(f"\n[sharding] {what}: {value:.1f} {unit}".rstrip())


def _shards_args() -> None:
    args = deployment_spec().args
    assert "--shards" in args, f"deploy/deployment.yaml does not run sharded replicas (args {list(args)})"


@pytest.fixture
def start_replicas(control_plane: Any, real_cluster: Any, tmp_path: Path) -> Iterator[Callable[..., Replicas]]:
    """start_replicas(n) -> Replicas, ready; stopped (SIGTERM) after the test (their logs stay in
    tmp_path; failing assertions quote their tails)."""
    started: list[Replicas] = []

    def start(n: int, **overrides: str | None) -> Replicas:
        _shards_args()
        rs = Replicas(control_plane, real_cluster, n=n, log_dir=tmp_path / f"replicas-{len(started)}", verbose=1,
                      overrides={"--shard-lease-duration": str(LEASE), **overrides})
        started.append(rs)
        rs.start()
        rs.wait_ready()
        return rs

    yield start
    for rs in started:
        rs.stop()


def _namespace(real_cluster: Any, prefix: str) -> str:
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    real_cluster.create("namespaces", {"metadata": {"name": ns}})
    return ns


def _observer(control_plane: Any, ns: str) -> ClusterObserver:
    return ClusterObserver.from_kubeconfig(control_plane.kubeconfig, namespace=ns, scheduler_name="minisched")


def _wait_bound(obs: ClusterObserver, keys: list[str], timeout: float, rs: Replicas) -> float:
    began = time.monotonic()
    try:
        obs.wait_for(lambda o: all((r := o.pods.get(k)) is not None and r.node is not None for k in keys),
                     timeout, f"all {len(keys)} pods bound")
    except TimeoutError as err:
        raise AssertionError(f"{err}; observer: {obs.check(keys)}\n{_diagnose(obs, keys, rs)}") from err
    return time.monotonic() - began


def _diagnose(obs: ClusterObserver, keys: list[str], rs: Replicas) -> str:
    """What the server holds about the pods still unbound, and what each replica's shard counts."""
    lines = []
    for key in [k for k in keys if (r := obs.pods.get(k)) is None or r.node is None][:5]:
        pod = obs.pod_objects.get(key) or {}
        conditions = [(c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                      for c in (pod.get("status") or {}).get("conditions") or []]
        namespace, name = key.split("/")
        events = [(e.get("reason"), e.get("reportingInstance"), e.get("count"), e.get("message"))
                  for e in obs.cluster.list("events", namespace, field_selector=f"involvedObject.name={name}")["items"]]
        lines.append(f"{key}: conditions {conditions}; events {events}")
    for r in rs.live():
        try:
            shard = {k: v for k, v in rs.metrics(r).items() if k.startswith("minisched_shard_")}
        except (OSError, RuntimeError) as err:
            shard = {"unreadable": str(err)}  # type: ignore[dict-item]
        lines.append(f"{r.name}: {shard}")
    return "\n".join(lines) + "\n" + rs.tails()


def _identities(real_cluster: Any, rs: Replicas) -> dict[str, str]:
    """replica name -> its ring identity (POD_NAME_uuid), from the shard leases the replicas hold
    (named <group>-shard-<identity as a name>, group minisched by default)."""
    holders = [str((lease.get("spec") or {}).get("holderIdentity") or "")
               for lease in real_cluster.list("leases.coordination.k8s.io")["items"]
               if lease["metadata"]["name"].startswith("minisched-shard-")]
    out = {}
    for r in rs.replicas:
        mine = [h for h in holders if h.startswith(f"{r.name}_")]
        assert len(mine) == 1, f"{r.name}: expected one shard lease held by it, found holders {holders}"
        out[r.name] = mine[0]
    return out


def _scheduled(rs: Replicas, replica: Replica) -> float:
    return sum(v for k, v in rs.metrics(replica).items()
               if k.startswith("scheduler_schedule_attempts_total{") and 'result="scheduled"' in k)


class Creators:
    """`n` pods made by `parts` PodCreators in parallel (one creator's sequential POSTs manage ~15
    pods/s on a loaded machine): names <prefix><part>-<i>."""

    def __init__(self, cluster: Any, ns: str, n: int, *, cpu: str, prefix: str = "p", parts: int = 4) -> None:
        self.ns = ns
        self.parts = [PodCreator(cluster, ns, n // parts + (1 if i < n % parts else 0), rate=1000.0,
                                 prefix=f"{prefix}{i}", cpu=cpu).start() for i in range(parts)]

    @property
    def created(self) -> int:
        return sum(c.created for c in self.parts)

    def wait_created(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.created < n:
            assert time.monotonic() < deadline, f"only {self.created} of {n} pods created in {timeout:g} s"
            time.sleep(0.02)

    def join(self) -> None:
        for c in self.parts:
            c.join()

    def keys(self) -> list[str]:
        return [f"{self.ns}/{name}" for c in self.parts for name in c.names()]


def test_three_replicas_fill_the_cluster_binding_each_pod_once(
    start_replicas: Callable[..., Replicas], real_cluster: Any, control_plane: Any
) -> None:
    """300 pods of 80m onto 12 nodes of 2 CPU: exactly full, so the last pods need the last free
    slots wherever they are (a replica's own partition fills up first: the fallback and the capacity
    fence both at work), and any over-commit would leave a pod unplaceable."""
    ns = _namespace(real_cluster, "shards")
    rs = start_replicas(3)
    make_nodes(real_cluster, ns, 12, cpu="2")
    with _observer(control_plane, ns) as obs:
        began = time.monotonic()
        pods = Creators(real_cluster, ns, 300, cpu="80m")
        pods.join()
        _report("3 replicas: 300 pods created in", time.monotonic() - began)
        drain = _wait_bound(obs, pods.keys(), DRAIN_TIMEOUT, rs)
        _report("   all bound", drain, "s after the last was created")
        report = obs.check(expect_bound=pods.keys())
        assert report.ok, f"{report}\n{rs.tails()}"
        per_replica = {r.name: _scheduled(rs, r) for r in rs.replicas}
    print(f"\n[sharding] pods bound per replica: {per_replica}")
    assert sum(per_replica.values()) == 300, f"each binding reported once by one replica: {per_replica}"
    assert all(per_replica.values()), f"a replica bound nothing: the work was not shared {per_replica}"
    for r in rs.replicas:
        assert r.running(), f"{r.name} exited:\n{rs.tails()}"
        assert "Traceback" not in r.log(), f"a traceback in {r.name}'s log:\n{r.process.log_tail(80)}"


def test_a_replica_killed_mid_drain_has_its_shard_finished_by_the_others(
    start_replicas: Callable[..., Replicas], real_cluster: Any, control_plane: Any
) -> None:
    """SIGKILL one of three replicas while pods are still arriving: no lease release, no goodbye.
    Its pods wait until its lease expires; then the two others own them and bind them."""
    ns = _namespace(real_cluster, "shardkill")
    rs = start_replicas(3)
    identities = _identities(real_cluster, rs)
    victim = rs[1]
    make_nodes(real_cluster, ns, 9, cpu="8")
    with _observer(control_plane, ns) as obs:
        pods = Creators(real_cluster, ns, 240, cpu="100m")
        pods.wait_created(60)
        killed = rs.kill(victim)
        bound_at_kill = {k for k, r in list(obs.pods.items()) if r.node is not None}
        pods.join()
        keys = pods.keys()
        owned = [k for k in keys if hrw_owner(k, identities.values()) == identities[victim.name]]
        orphans = [k for k in owned if k not in bound_at_kill]
        assert orphans, "no pod of the victim's shard was unbound when it died: the kill did not land mid-drain"
        _wait_bound(obs, keys, LEASE + TAKEOVER_MARGIN + 30, rs)
        after = sorted(r.bound - killed for k in orphans if (r := obs.record(k)) is not None and r.bound is not None)
        last = after[-1]
        within = sum(1 for t in after if t < LEASE)
        _report(f"victim's shard: {len(orphans)} of its {len(owned)} pods unbound at SIGKILL, the last bound "
                "by the others after", last)
        # Bindings the victim had in flight may still land just after the kill; the rest wait out its lease.
        print(f"[sharding]    {within} of them bound within the lease ({LEASE} s), median {after[len(after) // 2]:.1f} s")
        report = obs.check(expect_bound=keys)
        assert report.ok, f"{report}\n{rs.tails()}"
        assert last <= LEASE + TAKEOVER_MARGIN, (
            f"the victim's shard took {last:.1f}s to finish, over the lease ({LEASE}s) + {TAKEOVER_MARGIN:g}s"
        )
    for r in rs.live():
        assert "Traceback" not in r.log(), f"a traceback in {r.name}'s log:\n{r.process.log_tail(80)}"


def test_a_replica_joining_mid_drain_takes_a_share(
    start_replicas: Callable[..., Replicas], real_cluster: Any, control_plane: Any
) -> None:
    """Scale 2 -> 3 while a backlog drains: the ring changes under the two running replicas (for a
    moment they and the newcomer may disagree on owners: the 409 on binding fences that), and the
    pods created once it is ready are shared with it."""
    ns = _namespace(real_cluster, "shardjoin")
    rs = start_replicas(2)
    make_nodes(real_cluster, ns, 9, cpu="8")
    with _observer(control_plane, ns) as obs:
        first = Creators(real_cluster, ns, 100, cpu="100m", prefix="a")
        first.wait_created(20)
        joined_at = time.monotonic()
        newcomer = rs.add()
        first.join()
        rs.wait_ready()
        second = Creators(real_cluster, ns, 100, cpu="100m", prefix="b")
        second.join()
        keys = first.keys() + second.keys()
        _wait_bound(obs, keys, DRAIN_TIMEOUT, rs)
        report = obs.check(expect_bound=keys)
        assert report.ok, f"{report}\n{rs.tails()}"
        times = [t for t in obs.bound_times() if t >= joined_at]
        gap = max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)
        _report("longest pause between bindings from the join to the end", gap)
        per_replica = {r.name: _scheduled(rs, r) for r in rs.replicas}
    print(f"\n[sharding] pods bound per replica: {per_replica}")
    assert per_replica[newcomer.name] > 0, f"the newcomer bound nothing: {per_replica}\n{rs.tails()}"
    assert sum(per_replica.values()) == len(keys), f"each binding reported once by one replica: {per_replica}"
