"""The pods held at Permit (kube's framework/runtime/waiting_pods_map.go): a map by pod UID, and
for each pod the Permit plugins that asked it to wait, each with its own timeout.

A pod waits until every plugin that returned Wait allows it; one rejection (a plugin's, a
timeout's, the scheduler's) rejects it. The first verdict stands, as kube's one-slot channel
does: a late allow or reject (another gang member's) changes nothing.

kube arms a timer per plugin (time.AfterFunc). Here the binding worker that holds the pod calls
`expire(now)` as it waits, so the timeouts run on the scheduler's clock (a VirtualClock in tests).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from minisched.meta import key_of
from minisched.scheduler.framework.interface import WaitingPod
from minisched.scheduler.framework.status import Status

Object = dict[str, Any]


def uid_of(pod: Object) -> str:
    """The key of a waiting pod: its UID, as kube's map has it (a pod deleted and made again
    under its name is another pod); a pod made by hand without one, by "namespace/name"."""
    return str((pod.get("metadata") or {}).get("uid") or key_of(pod))


def go_duration(seconds: float) -> str:
    """`seconds` as Go prints a time.Duration ("30s", "1m0s", "1.5s", "500ms"), for kube's messages."""
    ns = round(seconds * 1e9)
    sign, ns = ("-" if ns < 0 else ""), abs(ns)
    if ns == 0:
        return "0s"
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{_decimal(ns, 1_000)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{_decimal(ns, 1_000_000)}ms"
    hours, rest = divmod(ns, 3_600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = f"{_decimal(rest, 10**9)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(value: int, unit: int) -> str:
    whole, fraction = divmod(value, unit)
    if not fraction:
        return str(whole)
    digits = str(fraction).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


class PodAtPermit:
    """One pod held at Permit (kube's waitingPod), the framework's WaitingPod."""

    def __init__(self, pod: Object, plugin_timeouts: Mapping[str, float], now: float) -> None:
        self._pod = pod
        # plugin -> (deadline on the clock, its timeout): kube's pendingPlugins and their timers
        self._pending: dict[str, tuple[float, float]] = {
            plugin: (now + timeout, timeout) for plugin, timeout in plugin_timeouts.items()}
        self._timers_stopped = False  # kube's timer.Stop() on Reject: no timeout fires after it
        self._verdict: Status | None = None
        self._lock = threading.Lock()
        self.done = threading.Event()  # set with the verdict

    @property
    def pod(self) -> Object:
        return self._pod

    @property
    def status(self) -> Status:
        """The verdict: success once every waiting plugin allowed, else the rejection naming its
        plugin. Read it once `done` is set."""
        return self._verdict if self._verdict is not None else Status.success()

    def pending_plugins(self) -> list[str]:
        with self._lock:
            return list(self._pending)

    def allow(self, plugin: str) -> None:
        with self._lock:
            self._pending.pop(plugin, None)
            if not self._pending:  # the last plugin that asked for the wait allowed it
                self._decide(Status.success())

    def reject(self, plugin: str, message: str) -> None:
        with self._lock:
            self._timers_stopped = True
            self._decide(Status.unschedulable(message, plugin=plugin))

    def expire(self, now: float) -> None:
        """Reject the pod for the pending plugin whose timeout passed first, in its name."""
        with self._lock:
            if self._timers_stopped or self._verdict is not None:
                return
            expired = [(deadline, plugin, timeout) for plugin, (deadline, timeout) in self._pending.items()
                       if deadline <= now]
            if not expired:
                return
            _, plugin, timeout = min(expired)
            self._timers_stopped = True
            self._decide(Status.unschedulable(
                f"rejected due to timeout after waiting {go_duration(timeout)} at plugin {plugin}", plugin=plugin))

    def _decide(self, status: Status) -> None:
        if self._verdict is None:  # the first verdict stands (kube's non-blocking send on a 1-slot channel)
            self._verdict = status
            self.done.set()


class WaitingPodsMap:
    """The pods held at Permit by UID (kube's waitingPodsMap), shared by a scheduler's profiles."""

    def __init__(self) -> None:
        self._pods: dict[str, PodAtPermit] = {}
        self._lock = threading.Lock()

    def add(self, waiting: PodAtPermit) -> None:
        with self._lock:
            self._pods[uid_of(waiting.pod)] = waiting

    def remove(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def get(self, uid: str) -> PodAtPermit | None:
        with self._lock:
            return self._pods.get(uid)

    def iterate(self, callback: Callable[[WaitingPod], None]) -> None:
        """Call `callback` with each waiting pod; over a copy, so it may allow or reject them."""
        with self._lock:
            pods = list(self._pods.values())
        for waiting in pods:
            callback(waiting)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)


_WAITING_POD_CONTRACT: type[WaitingPod] = PodAtPermit  # mypy checks it against the Protocol

__all__ = ["PodAtPermit", "WaitingPodsMap", "go_duration", "uid_of"]
