"""The fault suite's tools: `minisched run` as a separate process, a paced pod creator that rides out
an outage, and the checks the independent observer makes at the end of every scenario."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from minisched.controlplane.observe import PodObserver
from minisched.controlplane.processes import _die_with_parent, free_port
from minisched.errors import AlreadyExists, ApiError
from minisched.objects import make_node, make_pod

REPO = Path(__file__).resolve().parents[2]

# For a metrics port with a self-signed certificate (--secure-serving): probes do not verify it either.
_UNVERIFIED = ssl.create_default_context()
_UNVERIFIED.check_hostname = False
_UNVERIFIED.verify_mode = ssl.CERT_NONE


class MinischedProcess:
    """`python -m minisched.cli -v run --kubeconfig ... <args>`, its output in `log_path`."""

    def __init__(self, kubeconfig: Path, log_path: Path, *args: str) -> None:
        self.log_path = log_path
        self.metrics_port = free_port()
        self.secure = "--secure-serving" in args  # TLS with a self-signed certificate on the metrics port
        self.argv = [sys.executable, "-m", "minisched.cli", "-v", "run", "--kubeconfig", str(kubeconfig),
                     "--metrics-port", str(self.metrics_port), *args]
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in wait()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # Killed with the test process if that dies first (PR_SET_PDEATHSIG), like the control plane.
        self.popen = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO, env=env,
                                      start_new_session=True, preexec_fn=_die_with_parent)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def url(self) -> str:
        """Its metrics port's URL (https with --secure-serving)."""
        return f"{'https' if self.secure else 'http'}://127.0.0.1:{self.metrics_port}"

    def wait_ready(self, timeout: float = 60) -> float:
        """Until /readyz answers 200 (informers synced; with leader election, leadership known)."""
        began = time.monotonic()
        while self.running() and time.monotonic() - began < timeout:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2, context=_UNVERIFIED) as answer:
                    if answer.status == 200:
                        return time.monotonic() - began
            except OSError:
                pass
            time.sleep(0.1)
        exited = not self.running()
        self.kill()
        raise AssertionError(f"minisched {'exited before it was' if exited else 'not'} ready in {timeout:g} s:\n"
                             f"{self.tail()}")

    def running(self) -> bool:
        return self.popen.poll() is None

    def terminate(self, timeout: float) -> float:
        """SIGTERM, and the seconds until it exited; SIGKILL and raise if it takes over `timeout`."""
        began = time.monotonic()
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired as err:
            self.kill()
            raise AssertionError(f"minisched did not exit within {timeout:g} s of SIGTERM:\n{self.tail()}") from err
        finally:
            self._log.close()
        return time.monotonic() - began

    def kill(self) -> None:
        if self.running():
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)
        self._log.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def assert_clean_log(self) -> None:
        text = self.log()
        assert "Traceback" not in text, f"a traceback in minisched's log:\n{self.tail(80)}"


class PodCreator:
    """Creates pods `prefix-0..n-1` at `rate` per second in a thread, retrying through an outage
    (an AlreadyExists after a lost answer counts as created)."""

    def __init__(self, cluster: Any, namespace: str, n: int, *, rate: float = 100.0, prefix: str = "p",
                 cpu: str = "100m") -> None:
        self.cluster, self.namespace, self.n, self.rate, self.prefix, self.cpu = cluster, namespace, n, rate, prefix, cpu
        self.created = 0
        self.errors = 0
        self._thread = threading.Thread(target=self._run, name="pod-creator", daemon=True)

    def start(self) -> PodCreator:
        self._thread.start()
        return self

    def join(self, timeout: float = 120) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the pod creator is still creating after {timeout:g} s"

    def wait_created(self, n: int, timeout: float = 60) -> None:
        """Until `n` pods exist: a fault injected then lands mid-drain, with pods still to come
        (an observer's count of bound pods can lag seconds behind on a loaded machine)."""
        deadline = time.monotonic() + timeout
        while self.created < n:
            assert time.monotonic() < deadline, f"only {self.created} of {n} pods created in {timeout:g} s"
            time.sleep(0.02)

    def names(self) -> list[str]:
        return [f"{self.prefix}-{i}" for i in range(self.n)]

    def _run(self) -> None:
        began = time.monotonic()
        for i in range(self.n):
            pause = began + i / self.rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            pod = make_pod(f"{self.prefix}-{i}", namespace=self.namespace, cpu=self.cpu, memory="64Mi")
            while True:
                try:
                    self.cluster.create("pods", pod)
                    break
                except AlreadyExists:
                    break
                except ApiError:
                    self.errors += 1
                    time.sleep(0.2)
            self.created += 1


def make_nodes(cluster: Any, prefix: str, n: int, *, cpu: str = "16", pods: str = "110") -> list[dict[str, Any]]:
    """Nodes with room for every pod of a scenario (so every pod fits: each must be bound)."""
    return [cluster.create("nodes", make_node(f"{prefix}-{i}", cpu=cpu, memory="64Gi", pods=pods)) for i in range(n)]


def check_invariants(obs: PodObserver, expected: list[str], namespace: str) -> None:
    """No pod bound twice, no nodeName changed, no node over-committed, every pod bound."""
    doubles = [r.key for r in obs.pods.values() if r.bindings > 1]
    moved = [(r.key, r.node, r.node_changes) for r in obs.pods.values() if r.node_changes]
    assert not doubles, f"pods bound twice: {doubles[:10]}"
    assert not moved, f"pods whose nodeName changed: {moved[:10]}"
    assert not obs.overcommits, f"over-committed nodes: {obs.overcommits[:5]}"
    unbound = [n for n in expected if (r := obs.record(f"{namespace}/{n}")) is None or r.node is None]
    assert not unbound, f"{len(unbound)} pods that fit were never bound, e.g. {unbound[:10]}"


def wait_all_bound(obs: PodObserver, namespace: str, names: list[str], timeout: float, what: str = "") -> float:
    """Wait until every pod in `names` is bound; the seconds it took."""
    began = time.monotonic()
    keys = [f"{namespace}/{n}" for n in names]

    def done(o: PodObserver) -> bool:
        return all((r := o.pods.get(k)) is not None and r.node is not None for k in keys)

    obs.wait_for(done, timeout, what or f"all {len(names)} pods bound")
    return time.monotonic() - began


def bound_after(obs: PodObserver, since: float) -> list[float]:
    """Observer times (time.monotonic) of bindings after `since`, sorted."""
    return sorted(r.bound for r in obs.pods.values() if r.bound is not None and r.bound > since)


# ----------------------------------------------------------------------------- scenario building blocks

WORKERS = ("--bind-workers", "16")


@contextlib.contextmanager
def scenario(cluster: Any, prefix: str, nodes: int = 4) -> Iterator[tuple[str, PodObserver]]:
    """A fresh namespace `prefix-<random>`, `nodes` nodes with room for every pod, and the independent
    observer watching them: (namespace, observer)."""
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    cluster.create("namespaces", {"metadata": {"name": ns}})
    made = make_nodes(cluster, ns, nodes)
    with PodObserver(cluster, namespace=ns, nodes=made) as obs:
        yield ns, obs


@contextlib.contextmanager
def running(kubeconfig: Path, log_path: Path, *args: str, ready: bool = True) -> Iterator[MinischedProcess]:
    """`minisched run` with the suite's binding workers, ready (unless `ready=False`); SIGTERMed at the
    end if still running, and its log then checked for tracebacks (when the block succeeded)."""
    proc = MinischedProcess(kubeconfig, log_path, *WORKERS, *args)
    try:
        if ready:
            proc.wait_ready()
        yield proc
    finally:
        if proc.running():
            proc.terminate(30)
    proc.assert_clean_log()


def creating(cluster: Any, namespace: str, n: int, *, rate: float, first: int = 60, prefix: str = "p") -> PodCreator:
    """A PodCreator started, once it has created `first` pods (a fault injected then lands mid-drain)."""
    creator = PodCreator(cluster, namespace, n, rate=rate, prefix=prefix).start()
    creator.wait_created(min(first, n))
    return creator


def bound_times(obs: PodObserver, namespace: str, names: list[str]) -> list[float]:
    """Observer times of the bindings of `names` that were seen bound, sorted."""
    return sorted(r.bound for n in names if (r := obs.record(f"{namespace}/{n}")) is not None and r.bound is not None)


def report(what: str, value: float, unit: str = "s") -> None:
    print(f"\n[fault suite] {what}: {value:.1f} {unit}".rstrip())


def sigterm_within(proc: MinischedProcess, deadline: float, what: str) -> float:
    """SIGTERM `proc` (started with --shutdown-timeout `deadline`): it must exit within the deadline
    (plus 1.5 s for the interpreter's exit), say what it abandoned if anything, and leave no traceback."""
    exit_seconds = proc.terminate(deadline + 20)
    report(f"SIGTERM {what}: exit (deadline {deadline:g} s)", exit_seconds)
    assert exit_seconds < deadline + 1.5, proc.tail()
    log = proc.log()
    assert "shut down cleanly" in log or "shutdown deadline" in log, proc.tail()
    abandoned = re.findall(r"shutdown deadline of .*", log)
    print("\n[fault suite] " + (abandoned[0] if abandoned else "shut down cleanly"))
    proc.assert_clean_log()
    return exit_seconds


def a_restart_binds_the_rest(kubeconfig: Path, log_path: Path, obs: PodObserver, namespace: str,
                             creator: PodCreator, timeout: float = 60) -> None:
    """A new minisched binds every pod `creator` made (once it has made them all), none twice."""
    creator.join()
    restarted = time.monotonic()
    with running(kubeconfig, log_path, ready=False):
        wait_all_bound(obs, namespace, creator.names(), timeout)
        after = bound_after(obs, restarted)
        if after:
            report("restarted minisched: first binding after its start", after[0] - restarted)
        check_invariants(obs, creator.names(), namespace)


def election(lease: str, namespace: str, *, duration: float, renew: float, retry: float = 0.5) -> tuple[str, ...]:
    """`minisched run` options for leader election on lease `namespace/lease`."""
    return ("--leader-elect", "--lease-name", lease, "--lease-namespace", namespace,
            "--leader-elect-lease-duration", f"{duration:g}", "--leader-elect-renew-deadline", f"{renew:g}",
            "--leader-elect-retry-period", f"{retry:g}")
