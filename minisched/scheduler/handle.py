"""The Handle the scheduler gives its plugins (kube's framework.Handle, as
framework/runtime/framework.go implements it); the pods it holds at Permit are in
framework/waiting_pods_map.py (kube's framework/runtime/waiting_pods_map.go).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from minisched.clock import Clock
from minisched.cluster.base import Cluster
from minisched.errors import ApiError, NotFound
from minisched.informer import SharedInformerFactory
from minisched.meta import key_of
from minisched.resources import POD_DISRUPTION_BUDGETS, PODS
from minisched.scheduler.cache import SchedulerCache
from minisched.scheduler.events import EventRecorder
from minisched.scheduler.framework.interface import Handle, Nominator, PodActivator, WaitingPod
from minisched.scheduler.framework.listers import (
    InformerStorage,
    Namespaces,
    StaticStorage,
    StorageLister,
    WorkloadLister,
    namespaces_from,
    workloads_from,
)
from minisched.scheduler.framework.runtime import Framework, FrameworkRunner, Nominations
from minisched.scheduler.framework.waiting_pods_map import WaitingPodsMap
from minisched.scheduler.snapshot import NodeTable

Object = dict[str, Any]


class _HandleWiring:
    """What the Scheduler wires into its handles after building them (the queue, the informers it
    starts): one object shared by every profile's copy of the handle."""

    __slots__ = ("storage", "pod_store", "pdb_informer", "namespace_lister", "nominator", "activator")

    def __init__(self) -> None:
        # made when a volume plugin first asks, as it is built: its informers start with the others
        self.storage: StorageLister | None = None
        self.pod_store: Any = None  # the pod informer's store, once started
        self.pdb_informer: Any = None  # set by Scheduler.start when a plugin reads PDBs
        self.namespace_lister: Namespaces | None = None  # the namespace informer's, once started
        # the queue, once built (after the plugins, as kube's SetPodNominator); until then an empty
        # one, since nothing is nominated before there is a queue
        self.nominator: Nominator = Nominations()
        self.activator: PodActivator | None = None  # the queue too


class SchedulerHandle(FrameworkRunner):
    """What plugins get (kube's framework.Handle, all of interface.Handle): the cluster, the
    latest snapshot, the event recorder, the clock, the queue's nominator and activator, the pods
    waiting at Permit, the informers' listers, and (through FrameworkRunner) the Filter and
    PreFilter-extension runs of its own profile, for preemption's what-ifs.

    The Scheduler builds one and each Framework takes its copy (`for_framework`); the copies share
    the waiting pods and what the Scheduler wires in later (the queue, the informers' stores)."""

    def __init__(self, cluster: Cluster, recorder: EventRecorder, clock: Clock, cache: SchedulerCache,
                 informer_factory: SharedInformerFactory | None = None) -> None:
        self.cluster = cluster
        self.event_recorder = recorder
        self.clock = clock
        self._cache = cache
        # the Scheduler's (kube's SharedInformerFactory, never nil); a handle built without one (a
        # test) reads its listers through the cluster, and gives a plugin that asks for the
        # factory a real one that nothing starts, whose informers stay empty
        self._factory = informer_factory if informer_factory is not None else SharedInformerFactory(cluster)
        self._informers_run = informer_factory is not None
        self.framework: Framework | None = None  # set in each framework's copy
        self.waiting = WaitingPodsMap()  # the scheduler's pods held at Permit, by UID
        self.stopping = threading.Event()  # the Scheduler's own stop (shared by every copy)
        self._wiring = _HandleWiring()

    def for_framework(self, framework: Any) -> SchedulerHandle:
        bound = copy.copy(self)
        bound.framework = framework
        return bound

    # --- wired in by the Scheduler (shared by every copy) ---------------------------------------------

    @property
    def informer_factory(self) -> SharedInformerFactory:
        return self._factory

    @property
    def storage(self) -> StorageLister:
        if self._wiring.storage is None:
            self._wiring.storage = InformerStorage(self._factory) if self._informers_run else StaticStorage()
        return self._wiring.storage

    @property
    def pod_store(self) -> Any:
        return self._wiring.pod_store

    @pod_store.setter
    def pod_store(self, store: Any) -> None:
        self._wiring.pod_store = store

    @property
    def pdb_informer(self) -> Any:
        return self._wiring.pdb_informer

    @pdb_informer.setter
    def pdb_informer(self, informer: Any) -> None:
        self._wiring.pdb_informer = informer

    @property
    def namespace_lister(self) -> Namespaces:
        lister = self._wiring.namespace_lister
        return lister if lister is not None else namespaces_from(self.cluster)  # before start: the API

    @namespace_lister.setter
    def namespace_lister(self, lister: Namespaces) -> None:
        self._wiring.namespace_lister = lister

    @property
    def workloads(self) -> WorkloadLister:
        return workloads_from(self._factory if self._informers_run else None, self.cluster)

    @property
    def nominator(self) -> Nominator:
        return self._wiring.nominator

    @nominator.setter
    def nominator(self, nominator: Nominator) -> None:
        self._wiring.nominator = nominator

    @property
    def activator(self) -> PodActivator | None:
        return self._wiring.activator

    @activator.setter
    def activator(self, activator: PodActivator | None) -> None:
        self._wiring.activator = activator

    def activate(self, pod: Object) -> None:
        """kube's Handle.Activate: the pod goes to activeQ now if it is parked or backing off."""
        activator = self._wiring.activator
        if activator is not None:
            activator.activate(key_of(pod))

    # --- pods waiting at Permit ------------------------------------------------------------------

    def iterate_over_waiting_pods(self, callback: Callable[[WaitingPod], None]) -> None:
        self.waiting.iterate(callback)

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting.get(uid)

    def reject_waiting_pod(self, uid: str) -> bool:
        waiting = self.waiting.get(uid)
        if waiting is None:
            return False
        waiting.reject("", "removed")  # kube's words and no plugin: the caller is not one
        return True

    # --- listers ---------------------------------------------------------------------------------

    def pod_disruption_budgets(self) -> list[Object]:
        """The PodDisruptionBudgets in the informer's cache (kube's pdbLister.List). Without an
        informer (a scheduler driven by hand), one LIST; either way an error is raised, never []."""
        from minisched.scheduler.plugins.default_preemption import PdbsUnavailable

        informer = self.pdb_informer
        if informer is None:
            if self.cluster is None:
                return []  # no API at all (the algorithm driven by hand on a table)
            try:
                return list(self.cluster.list(POD_DISRUPTION_BUDGETS).get("items") or [])
            except ApiError as err:
                raise PdbsUnavailable(f"cannot list PodDisruptionBudgets: {err}") from err
        if not informer.has_synced():
            raise PdbsUnavailable("the PodDisruptionBudget informer has not synced yet")
        return list(informer.store.list())

    def pod_object(self, namespace: str, name: str) -> Object | None:
        """A pod as the informer's store has it (kube's podLister.Get); without an informer, a GET.
        None when it is gone."""
        store = self.pod_store
        if store is not None:
            return store.get_by_key(f"{namespace}/{name}")
        try:
            return self.cluster.get(PODS, name, namespace)
        except NotFound:
            return None

    def snapshot(self) -> NodeTable:
        """The cache's latest (a scheduling cycle's own table is its CycleState's `snapshot`)."""
        return self._cache.snapshot()

    def bound_node(self, key: str) -> str | None:
        """The node a pod ("namespace/name") is bound to, as the informer reports it; None while it
        is pending or only assumed (its binding may still fail)."""
        if self._cache.is_assumed(key):
            return None
        return self._cache.pod_node(key)


_HANDLE_CONTRACT: type[Handle] = SchedulerHandle  # mypy checks it against the Protocol (Go's var _ Handle)
