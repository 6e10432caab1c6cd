"""§2.1 on a real loop: the book's update law driving a replica count on the cluster.

Each step k the loop observes y[k] (pods that exist), computes e[k] = r − y[k] and

    x[k+1] = x[k] + α·e[k] − β·(e[k] − e[k−1])

and actuates by setting a MiniReplicaSet's spec.replicas to x rounded and clamped to
[0, max_replicas]. The MiniReplicaSet controller (§2.3) then creates or deletes pods, and the next
observation counts them. So the plant is y = clamp(round(x)) with one step of delay built into the
law — the analysis's y = x up to rounding, which `simulate_quantized` models exactly. The measured
error envelope can then be compared with the predicted root magnitude ρ = max |z|.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from minisched.analysis import stability
from minisched.cluster.base import Cluster
from minisched.cluster.crds import install_crd
from minisched.controllers import replicaset as mrs
from minisched.controllers.controller import Controller
from minisched.errors import NotFound
from minisched.informer import SharedInformerFactory
from minisched.resources import PODS


class Plant(Protocol):
    def actuate(self, replicas: int) -> None: ...

    def observe(self) -> int: ...


@dataclass
class LoopRun:
    alpha: float
    beta: float
    reference: int
    max_replicas: int
    commanded: list[float] = field(default_factory=list)  # x[k]
    actuated: list[int] = field(default_factory=list)  # spec.replicas written at step k
    observed: list[int] = field(default_factory=list)  # y[k], pods counted on the cluster

    @property
    def errors(self) -> np.ndarray:
        return self.reference - np.asarray(self.observed, dtype=float)

    @property
    def predicted_radius(self) -> float:
        return stability.spectral_radius(self.alpha, self.beta)

    @property
    def saturated(self) -> bool:
        return any(a in (0, self.max_replicas) and a != self.reference for a in self.actuated[1:])

    def settled_at(self, tolerance: int = 0) -> int | None:
        """The first step from which |e| ≤ tolerance holds to the end (None: never)."""
        err = np.abs(self.errors)
        outside = np.nonzero(err > tolerance)[0]
        if len(outside) == 0:
            return 0
        last = int(outside[-1])
        return None if last == len(err) - 1 else last + 1

    def measured_rate(self) -> float | None:
        """The error's growth (>1) or decay (<1) factor per step, fitted over the steps where it is
        above the rounding floor (|e| ≥ 2) and the actuator is not saturated; None if too few."""
        err = np.abs(self.errors)
        # Envelope: decay is read from the largest error still to come, growth from the largest so far.
        growing = self.predicted_radius >= 1
        envelope = np.maximum.accumulate(err) if growing else np.maximum.accumulate(err[::-1])[::-1]
        usable = [k for k in range(len(err)) if envelope[k] >= 2 and not (growing and self._clamped(k))]
        if len(usable) < 3:
            return None
        slope = np.polyfit(usable, np.log(envelope[usable]), 1)[0]
        return float(math.exp(slope))

    def _clamped(self, k: int) -> bool:
        return k < len(self.actuated) and self.actuated[k] in (0, self.max_replicas)


def clamp_round(x: float, max_replicas: int) -> int:
    return int(min(max(round(x), 0), max_replicas))


class GainLoop:
    """The law as a controller; the plant is anything that can be told a count and counted."""

    def __init__(self, plant: Plant, *, alpha: float, beta: float, reference: int, max_replicas: int) -> None:
        if max_replicas < reference:
            raise ValueError(f"max_replicas ({max_replicas}) must be at least the reference ({reference})")
        self.plant = plant
        self.run = LoopRun(alpha, beta, reference, max_replicas)
        self._x = float(plant.observe())
        self._e_prev: float | None = None

    def step(self) -> None:
        run = self.run
        y = self.plant.observe()
        e = run.reference - y
        e_prev = e if self._e_prev is None else self._e_prev  # start at rest: no derivative kick
        run.commanded.append(self._x)
        run.observed.append(y)
        self._x = self._x + run.alpha * e - run.beta * (e - e_prev)
        self._e_prev = e
        replicas = clamp_round(self._x, run.max_replicas)
        run.actuated.append(replicas)
        self.plant.actuate(replicas)

    def run_steps(self, steps: int) -> LoopRun:
        for _ in range(steps):
            self.step()
        return self.run


def simulate_quantized(alpha: float, beta: float, reference: int, max_replicas: int, steps: int,
                       y0: int = 0) -> list[int]:  # fmt: skip
    """What the loop must observe if the plant is exactly y[k+1] = clamp(round(x[k+1]))."""
    x, y, e_prev, observed = float(y0), y0, None, []
    for _ in range(steps):
        observed.append(y)
        e = reference - y
        x = x + alpha * e - beta * (e - (e if e_prev is None else e_prev))
        e_prev = e
        y = clamp_round(x, max_replicas)
    return observed


class MiniReplicaSetPlant:
    """Actuate spec.replicas of a MiniReplicaSet and count its pods on the API server.

    `actuate` returns once the MiniReplicaSet controller has made the pods match (it drives the
    controller's queue itself), so one loop step sees the result of the previous one."""

    def __init__(self, cluster: Cluster, controller: Controller[mrs.MiniReplicaSet, dict], name: str,
                 namespace: str = "default", timeout: float = 20.0) -> None:  # fmt: skip
        self.cluster, self.controller, self.name, self.namespace = cluster, controller, name, namespace
        self.timeout = timeout

    def observe(self) -> int:
        rs = self.cluster.get(mrs.RESOURCE, self.name, self.namespace)
        selector = ",".join(f"{k}={v}" for k, v in sorted(rs["spec"]["selector"]["matchLabels"].items()))
        pods = self.cluster.list(PODS, self.namespace, label_selector=selector)["items"]
        return sum(1 for p in pods if not p["metadata"].get("deletionTimestamp"))

    def actuate(self, replicas: int) -> None:
        self.cluster.patch(mrs.RESOURCE, self.name, {"spec": {"replicas": replicas}}, self.namespace)
        deadline = time.monotonic() + self.timeout
        # Wait on the controller's cache (cheap), then confirm with the API server (authoritative).
        while not (self._cached() == replicas and self.observe() == replicas):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: pods did not reach {replicas} within {self.timeout} s")
            self.controller.process_ready()
            time.sleep(0.002)  # informer events arrive from their own threads

    def _cached(self) -> int:
        informer = self.controller.owned_informer
        if informer is None:
            return self.observe()
        return sum(
            1
            for pod in informer.store.list()
            if not pod["metadata"].get("deletionTimestamp")
            and pod["metadata"].get("namespace") == self.namespace
            and any(ref.get("name") == self.name and ref.get("controller")
                    for ref in pod["metadata"].get("ownerReferences") or [])
        )  # fmt: skip


class ClusterLoopLab:
    """Chapter 2.1's set-up on a cluster: the MiniReplicaSet CRD installed (and served), one
    MiniReplicaSet controller whose queue the plant drives, and `run()` for one loop per set.

    `close()` stops the informers and deletes the sets it made (their pods were scaled to 0)."""

    def __init__(self, cluster: Cluster, namespace: str = "default", sync_timeout: float = 30.0) -> None:
        self.cluster, self.namespace = cluster, namespace
        install_crd(cluster, mrs.crd())
        self.factory = SharedInformerFactory(cluster, namespace=namespace)
        reconciler = mrs.MiniReplicaSetReconciler(cluster, self.factory, namespace=namespace)
        self.controller = Controller("minireplicaset", reconciler, self.factory, namespace=namespace)
        self.controller.start_informers()
        if not self.controller.wait_for_sync(sync_timeout):
            self.factory.shutdown()
            raise TimeoutError(f"the MiniReplicaSet controller's informers did not sync in {sync_timeout:g} s")
        self.sets: list[str] = []

    def run(self, name: str, *, alpha: float, beta: float, reference: int, max_replicas: int,
            start: int = 0, steps: int = 25) -> LoopRun:  # fmt: skip
        """A fresh MiniReplicaSet `name` at `start` pods, `steps` steps of the law, then scaled to 0."""
        with contextlib.suppress(NotFound):  # a set left by an interrupted run
            self.cluster.delete(mrs.RESOURCE, name, self.namespace)
        self.cluster.create(mrs.RESOURCE, mrs.make_mini_replica_set(name, 0), self.namespace)
        self.sets.append(name)
        plant = MiniReplicaSetPlant(self.cluster, self.controller, name, self.namespace)
        plant.actuate(start)
        loop = GainLoop(plant, alpha=alpha, beta=beta, reference=reference, max_replicas=max_replicas)
        run = loop.run_steps(steps)
        plant.actuate(0)
        return run

    def close(self) -> None:
        self.factory.shutdown()
        for name in self.sets:
            with contextlib.suppress(NotFound):
                self.cluster.delete(mrs.RESOURCE, name, self.namespace)
        self.sets.clear()
