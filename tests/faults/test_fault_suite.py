"""The control plane failing under `minisched run` (issue 17's fault suite), on the local control plane.

Each scenario runs minisched as users do, as a separate process, and watches the pods with an
independent observer (minisched.controlplane.observe.PodObserver, its own connection straight to
the API server), which fails the test on a pod bound twice, a nodeName that changes, a node whose
bound requests exceed its allocatable, a pod that fits but is never bound, or a traceback in
minisched's log. Recovery times are printed (run with -s to see them); they are never asserted
tighter than the bound each fix promises.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minisched.controlplane.relay import TcpRelay
from minisched.objects import make_pod
from minisched.scheduler.events import events_for
from tests.faults.helpers import (
    MinischedProcess,
    PodCreator,
    a_restart_binds_the_rest,
    bound_after,
    bound_times,
    check_invariants,
    creating,
    election,
    report,
    running,
    scenario,
    sigterm_within,
    wait_all_bound,
)
from tests.faults.test_hostile_specs import (
    _annotations,
    _combine,
    _extended,
    _extreme,
    _preferred_terms,
    _required_terms,
    _tolerations,
    hostile_pod,
)

pytestmark = pytest.mark.realcluster

PODS = 200
RATE = 80.0  # pods created per second: the drain lasts a few seconds, so faults land mid-drain
IDLE = 6.0  # the watch idle deadline of the relayed minisched (45 s by default, against the 60 s)


# One `minisched run` serves every scenario of a class (they must be survived without a restart: a
# crash of the API server or etcd; connections cut or black-holed): surviving one and carrying on with
# the next pods is the behaviour under test, and each process costs seconds of start-up on a loaded
# machine. Each scenario still checks that it is running and that its log has no traceback. Class
# scope: the process is gone before the next scenarios start theirs (two schedulers would compete).

@pytest.fixture(scope="class")
def survivor(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MinischedProcess]:
    """minisched on the API server directly, shared by the crash scenarios."""
    with running(control_plane.kubeconfig, tmp_path_factory.mktemp("survivor") / "m.log") as proc:
        yield proc


@pytest.fixture(scope="class")
def shared_relay(control_plane: Any) -> Iterator[TcpRelay]:
    """A relay to the API server for the connection scenarios (each resets or black-holes what is open)."""
    r = TcpRelay("127.0.0.1", control_plane.apiserver_port).start()
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture(scope="class")
def relayed_survivor(control_plane: Any, shared_relay: TcpRelay,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[MinischedProcess]:
    """minisched through `shared_relay`, shared by the connection scenarios."""
    from minisched.controlplane.kubeconfig import write_kubeconfig

    tmp = tmp_path_factory.mktemp("relayed")
    kubeconfig = write_kubeconfig(tmp / "kubeconfig-relayed", f"https://{shared_relay.address}",
                                  control_plane.ca.cert_pem, control_plane.admin, "admin")
    # After the black hole its event writer may still wait on a dead connection (until the request's
    # read timeout): its shutdown then waits the whole deadline. Shutdown is not under test here (see
    # test_sigterm_with_hung_binds_exits_within_the_deadline); a short deadline ends it sooner.
    with running(kubeconfig, tmp / "m.log", "--watch-idle-timeout", f"{IDLE:g}", "--shutdown-timeout", "3") as proc:
        yield proc


def _alive(proc: MinischedProcess) -> MinischedProcess:
    assert proc.running(), f"the shared minisched exited in an earlier scenario:\n{proc.tail()}"
    return proc


def _survived(proc: MinischedProcess, obs: Any, names: list[str], namespace: str) -> None:
    """The observer's invariants hold, and the shared minisched is still running with a clean log."""
    check_invariants(obs, names, namespace)
    assert proc.running(), proc.tail()
    proc.assert_clean_log()


class TestOneSchedulerThroughCrashes:
    """The API server, then etcd, SIGKILLed mid-drain under one minisched, which rides out both; then
    hostile pod specs sent to the same process."""

    def test_apiserver_sigkill_and_restart_mid_drain(self, real_cluster: Any, control_plane: Any,
                                                     survivor: MinischedProcess) -> None:
        proc = _alive(survivor)
        with scenario(real_cluster, "crash") as (ns, obs):
            creator = creating(real_cluster, ns, PODS, rate=RATE)
            killed = time.monotonic()
            created_before = creator.created
            down = control_plane.restart_component("kube-apiserver", kill=True)
            creator.join()
            wait_all_bound(obs, ns, creator.names(), 90)
            # Pods created after the crash can only be bound by the restarted server: the first of
            # them bound says when binding resumed (the server answers before /readyz says so).
            later = bound_times(obs, ns, creator.names()[created_before + 1:])
            report("kube-apiserver SIGKILL: killed, restarted and /readyz passing after", down)
            assert later, "no pod was created after the crash: the fault did not land mid-drain"
            report("binding resumed after the API server went down", later[0] - killed)
            _survived(proc, obs, creator.names(), ns)

    def test_etcd_sigkill_and_restart_mid_drain(self, real_cluster: Any, control_plane: Any,
                                                survivor: MinischedProcess) -> None:
        """etcd SIGKILLed mid-drain and restarted 2 s later (same data): the API server stays up but
        cannot answer meanwhile; minisched rides it out and binds every pod once, none twice."""
        proc = _alive(survivor)
        with scenario(real_cluster, "etcdkill") as (ns, obs):
            creator = creating(real_cluster, ns, PODS, rate=RATE)
            killed = time.monotonic()
            created_before = creator.created
            down = control_plane.restart_component("etcd", kill=True, down_for=2.0)
            creator.join()
            wait_all_bound(obs, ns, creator.names(), 90)
            later = bound_times(obs, ns, creator.names()[created_before + 1:])
            report("etcd SIGKILL: down and healthy again after", down)
            if later:
                report("binding resumed after etcd went down", later[0] - killed)
            _survived(proc, obs, creator.names(), ns)

    def test_hostile_specs_get_a_reason_and_good_pods_keep_binding(self, real_cluster: Any,
                                                                   survivor: MinischedProcess) -> None:
        """Hostile but valid pods the real API server accepts (the embedded cluster's property-based
        test, test_hostile_specs.py, generates many more): each unschedulable one gets a FailedScheduling
        event naming its problem, the others are bound, good pods sent among them are bound, and the
        loop logs no traceback."""
        proc = _alive(survivor)
        hostiles = {
            "tolerations": _tolerations(3000),
            "annotations": _annotations(240, 4),  # 240 KiB of the API's 256 KiB
            "cpu": _extreme("cpu", "9999999"),
            "memory": _extreme("memory", "7Ei"),
            "extended": _extended("gizmo", 10**12),
            "required": _required_terms(300),
            "preferred": _preferred_terms(300),
            "everything": _combine([_tolerations(1000), _extended("widget", 3), _required_terms(100)]),
        }
        with scenario(real_cluster, "hostile") as (ns, obs):
            created = {}
            good = []
            for i, (name, hostile) in enumerate(hostiles.items()):
                created[name] = real_cluster.create("pods", hostile_pod(f"hostile-{name}", hostile, ns))
                good.append(real_cluster.create("pods", make_pod(f"good-{i}", namespace=ns, cpu="10m", memory="16Mi")))
            fits = [f"hostile-{n}" for n, h in hostiles.items() if not h.blockers]
            wait_all_bound(obs, ns, [g["metadata"]["name"] for g in good] + fits, 60)
            for name, hostile in hostiles.items():
                if not hostile.blockers:
                    continue
                pod = created[name]
                deadline = time.monotonic() + 30
                while not (events := events_for(real_cluster, pod, "FailedScheduling")):
                    assert time.monotonic() < deadline, f"no FailedScheduling event for hostile-{name}"
                    time.sleep(0.2)
                message = events[-1]["message"]
                assert any(b in message for b in hostile.blockers), (name, message, hostile.blockers)
                assert (r := obs.record(f"{ns}/hostile-{name}")) is None or r.node is None, name
            print(f"\n[fault suite] hostile specs: {len(fits)} bound, {len(hostiles) - len(fits)} refused "
                  "with a reason, good pods bound")
            _survived(proc, obs, [g["metadata"]["name"] for g in good] + fits, ns)


class TestOneSchedulerThroughBrokenConnections:
    """Connections cut, then black-holed, under one minisched behind a relay, which carries on."""

    def test_connections_cut_mid_drain(self, real_cluster: Any, shared_relay: TcpRelay,
                                       relayed_survivor: MinischedProcess) -> None:
        proc = _alive(relayed_survivor)
        with scenario(real_cluster, "cut") as (ns, obs):
            creator = creating(real_cluster, ns, PODS, rate=RATE)
            cuts = 0
            for _ in range(4):  # reset every connection four times, 0.5 s apart
                cuts += shared_relay.cut()
                time.sleep(0.5)
            last_cut = time.monotonic()
            creator.join()
            wait_all_bound(obs, ns, creator.names(), 60)
            after = bound_after(obs, last_cut)
            if after:
                report(f"{cuts} connections reset 4 times; binding after the last cut", after[0] - last_cut)
            assert cuts >= 4
            _survived(proc, obs, creator.names(), ns)

    def test_black_holed_connections_mid_drain(self, real_cluster: Any, shared_relay: TcpRelay,
                                               relayed_survivor: MinischedProcess) -> None:
        """Every connection stops carrying bytes with no FIN or RST. The watches hit their idle deadline
        (IDLE here; 45 s by default, against the issue's 60 s target), restart on new connections, and
        the pods created meanwhile are bound."""
        idle = IDLE
        proc = _alive(relayed_survivor)
        dead_before = proc.log().count("taken for dead")
        with scenario(real_cluster, "blackhole") as (ns, obs):
            first = creating(real_cluster, ns, 40, rate=RATE, prefix="before")
            first.join()
            wait_all_bound(obs, ns, first.names(), 60)
            assert shared_relay.black_hole() >= 2
            holed = time.monotonic()
            second = creating(real_cluster, ns, 100, rate=RATE, prefix="after", first=0)
            second.join()
            wait_all_bound(obs, ns, second.names(), idle + 40)
            report(f"black hole (idle deadline {idle:g} s): all 100 new pods bound after", time.monotonic() - holed)
            assert proc.log().count("taken for dead") > dead_before, proc.tail()
            _survived(proc, obs, first.names() + second.names(), ns)


def test_sigterm_mid_drain_exits_in_time_and_a_restart_finishes(
    real_cluster: Any, control_plane: Any, tmp_path: Path
) -> None:
    deadline = 5.0
    with scenario(real_cluster, "sigterm") as (ns, obs):
        with running(control_plane.kubeconfig, tmp_path / "first.log", "--shutdown-timeout", f"{deadline:g}") as proc:
            creator = creating(real_cluster, ns, PODS, rate=RATE)
            sigterm_within(proc, deadline, "mid-drain")
        a_restart_binds_the_rest(control_plane.kubeconfig, tmp_path / "second.log", obs, ns, creator)


def test_sigterm_with_hung_binds_exits_within_the_deadline(
    real_cluster: Any, control_plane: Any, relay: TcpRelay, relayed_kubeconfig: Path, tmp_path: Path
) -> None:
    """Mid-drain every connection is black-holed (binds and event writes hang, unanswered), then
    SIGTERM: minisched exits within its shutdown deadline and says what it abandoned; a restart
    binds the rest, none twice."""
    deadline = 4.0
    with scenario(real_cluster, "hung") as (ns, obs):
        with running(relayed_kubeconfig, tmp_path / "first.log", "--shutdown-timeout", f"{deadline:g}") as proc:
            creator = creating(real_cluster, ns, PODS, rate=RATE)
            relay.black_hole()
            time.sleep(1.0)  # binds and event writes now hang on dead connections
            sigterm_within(proc, deadline, "with hung binds")
        a_restart_binds_the_rest(control_plane.kubeconfig, tmp_path / "second.log", obs, ns, creator)


def test_sigterm_with_etcd_down_exits_within_the_deadline(
    real_cluster: Any, control_plane: Any, tmp_path: Path
) -> None:
    """etcd SIGKILLed mid-drain (the API server up but unable to answer: requests hang until its own
    timeouts), then SIGTERM: minisched exits within its deadline (the operator saw 80 s before the
    fix); etcd restarted, a new minisched binds the rest, none twice."""
    deadline = 5.0
    with scenario(real_cluster, "etcd") as (ns, obs):
        with running(control_plane.kubeconfig, tmp_path / "first.log", "--shutdown-timeout", f"{deadline:g}") as proc:
            creator = creating(real_cluster, ns, PODS, rate=RATE)
            control_plane.processes["etcd"].kill()
            try:
                time.sleep(1.0)  # the scheduler's requests now hang on the API server
                sigterm_within(proc, deadline, "with etcd down")
            finally:
                control_plane.restart_component("etcd", kill=True)
        a_restart_binds_the_rest(control_plane.kubeconfig, tmp_path / "second.log", obs, ns, creator, 90)


def test_sigterm_with_a_large_event_backlog_exits_within_the_deadline(
    real_cluster: Any, control_plane: Any, tmp_path: Path
) -> None:
    """minisched behind a FaultProxy that holds each event write 0.5 s (its one event writer then
    manages two a second while it binds tens a second: a backlog of Scheduled events builds), then
    SIGTERM mid-drain: it exits within its deadline instead of writing the backlog out (the operator
    saw 3.8-22.6 s), logs how many writes it dropped, and a restart binds the rest, none twice."""
    from minisched.controlplane.faultproxy import FaultProxy
    from minisched.controlplane.kubeconfig import write_kubeconfig

    deadline = 4.0
    with FaultProxy(control_plane) as proxy, scenario(real_cluster, "backlog") as (ns, obs):
        proxy.delay(r"/events$", 0.5)
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig-proxy", proxy.url, control_plane.ca.cert_pem,
                                      control_plane.admin, "admin")
        with running(kubeconfig, tmp_path / "first.log", "--shutdown-timeout", f"{deadline:g}") as proc:
            # Created over 7.5 s: pods are still coming when SIGTERM lands, for the restart to bind.
            creator = creating(real_cluster, ns, 300, rate=RATE / 2)
            obs.wait_for(lambda o: o.bound_count() >= 40, 60, "40 pods bound (a backlog of their events)")
            bound_before = obs.bound_count()
            sigterm_within(proc, deadline, f"with {bound_before} pods bound, their events held 0.5 s each")
            unsent = re.findall(r"(\d+) event/status writes unsent", proc.log())
            assert unsent and int(unsent[-1]) > 0, f"no event writes said dropped:\n{proc.tail()}"
            print(f"\n[fault suite] event backlog: {unsent[-1]} writes dropped at the deadline, "
                  f"{proxy.delayed} held by the proxy")
        a_restart_binds_the_rest(control_plane.kubeconfig, tmp_path / "second.log", obs, ns, creator)


def test_leader_sigkill_with_two_replicas(real_cluster: Any, control_plane: Any, tmp_path: Path) -> None:
    with scenario(real_cluster, "leader") as (ns, obs):
        lease = f"minisched-{ns}"
        elect = election(lease, ns, duration=4, renew=3)

        def holder() -> str:
            try:
                got = real_cluster.get("leases.coordination.k8s.io", lease, ns)
            except Exception:  # noqa: BLE001 - not created yet
                return ""
            return str((got.get("spec") or {}).get("holderIdentity") or "")

        kubeconfig = control_plane.kubeconfig
        with running(kubeconfig, tmp_path / "a.log", *elect, "--identity", "a") as a:
            deadline = time.monotonic() + 60
            while holder() != "a":
                assert time.monotonic() < deadline, a.tail()
                time.sleep(0.2)
            with running(kubeconfig, tmp_path / "b.log", *elect, "--identity", "b", ready=False):
                creator = creating(real_cluster, ns, PODS, rate=RATE)
                a.kill()
                killed = time.monotonic()
                creator.join()
                wait_all_bound(obs, ns, creator.names(), 60)
                after = bound_after(obs, killed + 0.2)  # binds already sent by a may land just after the kill
                assert holder() == "b"
                if after:
                    report("leader SIGKILL (lease 4 s): standby's first binding after the kill", after[0] - killed)
                check_invariants(obs, creator.names(), ns)


def test_a_paused_leader_that_lost_its_lease_binds_nothing(
    real_cluster: Any, control_plane: Any, tmp_path: Path
) -> None:
    """The leader is paused (SIGSTOP) mid-drain with bindings decided, past its lease; the standby
    takes over and binds. Resumed, the old leader must not bind anything: its binding workers check
    the lease before each bind (fencing), and the API server refuses a second binding of a pod (409).
    It then notices the lost lease and exits."""
    with scenario(real_cluster, "paused") as (ns, obs):
        elect = election(f"minisched-{ns}", ns, duration=3, renew=2)
        kubeconfig = control_plane.kubeconfig
        with running(kubeconfig, tmp_path / "a.log", *elect, "--identity", "a") as a, \
                running(kubeconfig, tmp_path / "b.log", *elect, "--identity", "b", ready=False):
            try:
                creator = creating(real_cluster, ns, PODS, rate=RATE, first=40)
                os.kill(a.pid, signal.SIGSTOP)
                paused = time.monotonic()
                creator.join()
                wait_all_bound(obs, ns, creator.names(), 60)
                time.sleep(max(0.0, paused + 6 - time.monotonic()))  # well past a's lease
                os.kill(a.pid, signal.SIGCONT)
                deadline = time.monotonic() + 20
                while a.running() and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert not a.running(), f"the old leader did not exit after losing its lease:\n{a.tail()}"
                check_invariants(obs, creator.names(), ns)
                log = a.log()
                fenced = log.count("no longer holds the leader lease")
                conflicts = re.findall(r"bind conflicts (\d+)", log)
                print(f"\n[fault suite] paused leader resumed: {fenced} binds fenced before sending, "
                      f"bind conflicts {conflicts[-1] if conflicts else '?'}; exit code {a.popen.returncode}")
                # Binds it had decided went out anyway (only the API server's 409 stopped them): not fenced.
                assert not (fenced == 0 and conflicts and int(conflicts[-1]) > 0), a.tail()
            finally:
                a.kill()


def test_api_server_refusing_for_a_while_is_met_with_backoff(
    real_cluster: Any, control_plane: Any, tmp_path: Path
) -> None:
    """Every request answered 429 for 5 s mid-drain, then (once those pods are bound) 503 for 5 s
    mid-drain of a second batch, with one minisched: it backs off (no busy loop: the refusals it
    collects stay in the hundreds, not thousands per second) and binds every pod once the server
    answers again."""
    from minisched.controlplane.faultproxy import FaultProxy
    from minisched.controlplane.kubeconfig import write_kubeconfig

    refusing = 5.0
    with FaultProxy(control_plane) as proxy, scenario(real_cluster, "refuse") as (ns, obs):
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig-proxy", proxy.url, control_plane.ca.cert_pem,
                                      control_plane.admin, "admin")
        # Its events all go through the test's Python proxy, one at a time: at the end a backlog is
        # still unsent (16.9 s of flushing under load); this scenario is not about shutdown.
        with running(kubeconfig, tmp_path / "m.log", "--shutdown-timeout", "3"):
            batches: list[PodCreator] = []
            for status in (429, 503):
                creator = creating(real_cluster, ns, 120, rate=RATE / 2, prefix=f"s{status}")
                batches.append(creator)
                before = proxy.refused
                proxy.fail_with(status, refusing)
                began = time.monotonic()
                time.sleep(refusing)
                refused = proxy.refused - before
                creator.join()
                wait_all_bound(obs, ns, creator.names(), 60)
                after = bound_after(obs, began + refusing)
                rate = refused / refusing
                report(f"{status} for {refusing:g} s: requests refused per second", rate, "")
                if after:
                    report(f"{status}: first binding after the server answered again", after[0] - began - refusing)
                assert rate < 200, f"{refused} requests in {refusing:g} s of {status}s: a busy loop"
            check_invariants(obs, [n for c in batches for n in c.names()], ns)
