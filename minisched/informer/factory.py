"""SharedInformerFactory: one informer per (resource, namespace, selectors), shared by every user.

Controllers ask the factory for the informers they need; two controllers asking for pods get the
same informer, so the process keeps a single watch and a single cache of pods. Then `start()`
runs every informer not yet running and `wait_for_cache_sync()` waits for their first lists.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from minisched.clock import Clock
from minisched.cluster.base import Cluster
from minisched.informer.backoff import ExponentialBackoff
from minisched.informer.delta_fifo import TransformFunc
from minisched.informer.listwatch import ListWatch, describe_scope
from minisched.informer.reflector import DEFAULT_WATCH_TIMEOUT
from minisched.informer.shared_informer import SharedIndexInformer, StopSignal
from minisched.informer.store import Indexers
from minisched.resources import Resource, ResourceLike


@dataclass(frozen=True, repr=False)
class InformerKey:
    resource: Resource
    namespace: str | None
    label_selector: str | None
    field_selector: str | None

    def __str__(self) -> str:
        return describe_scope(self.resource, self.namespace, self.label_selector, self.field_selector)

    def __repr__(self) -> str:  # short, for notebook output such as wait_for_cache_sync()'s dict
        return f"InformerKey({self})"


class _Default:
    """Marks an argument left out (None means "all namespaces"/"no selector")."""


_DEFAULT = _Default()


class SharedInformerFactory:
    def __init__(
        self,
        cluster: Cluster,
        *,
        resync_period: float = 0.0,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        clock: Clock | None = None,
        watch_timeout: tuple[float, float] = DEFAULT_WATCH_TIMEOUT,
        backoff_factory: Callable[[], ExponentialBackoff] | None = None,
        transform: TransformFunc | None = None,
        watch_list: bool = False,
    ) -> None:
        """`watch_list`: every informer streams its initial state with a watch-list (client-go
        1.35's default) instead of listing it; see Reflector."""
        self.cluster = cluster
        self.default_resync = resync_period
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._clock = clock
        self._watch_timeout = watch_timeout
        self._backoff_factory = backoff_factory  # each informer needs its own backoff state
        self._transform = transform
        self._watch_list = watch_list
        self._lock = threading.Lock()
        self._informers: dict[InformerKey, SharedIndexInformer] = {}
        self._started: set[InformerKey] = set()

    def informer_for(
        self,
        resource: ResourceLike,
        *,
        namespace: str | None | _Default = _DEFAULT,
        label_selector: str | None | _Default = _DEFAULT,
        field_selector: str | None | _Default = _DEFAULT,
        resync_period: float | None = None,
        indexers: Indexers | None = None,
    ) -> SharedIndexInformer:
        """The shared informer for `resource` (made on first request). Arguments left out take the
        factory's defaults. Indexers given for an existing informer are added to it."""
        lw = ListWatch.for_resource(
            self.cluster,
            resource,
            self.namespace if isinstance(namespace, _Default) else namespace,
            label_selector=self.label_selector if isinstance(label_selector, _Default) else label_selector,
            field_selector=self.field_selector if isinstance(field_selector, _Default) else field_selector,
        )
        key = InformerKey(lw.resource, lw.namespace, lw.label_selector, lw.field_selector)
        with self._lock:
            informer = self._informers.get(key)
            if informer is None:
                informer = SharedIndexInformer(
                    lw,
                    resync_period=self.default_resync if resync_period is None else resync_period,
                    indexers=indexers,
                    clock=self._clock,
                    watch_timeout=self._watch_timeout,
                    backoff=self._backoff_factory() if self._backoff_factory else None,
                    transform=self._transform,
                    name=str(key),
                    watch_list=self._watch_list,
                )
                self._informers[key] = informer
                return informer
        if indexers:
            new = {name: fn for name, fn in indexers.items() if name not in informer.store.get_indexers()}
            informer.add_indexers(new)
        return informer

    def informers(self) -> dict[InformerKey, SharedIndexInformer]:
        with self._lock:
            return dict(self._informers)

    def start(self) -> None:
        """Start every informer not started yet (call again after asking for more)."""
        with self._lock:
            pending = [(k, i) for k, i in self._informers.items() if k not in self._started]
            self._started.update(k for k, _ in pending)
        for _, informer in pending:
            informer.start()

    def wait_for_cache_sync(self, timeout: float | None = None,
                            stop: StopSignal | None = None) -> dict[InformerKey, bool]:
        """Wait (real seconds, shared by all) for every started informer's first list, giving up
        as soon as `stop` is set (client-go's WaitForCacheSync(stopCh)): the informers not synced
        by then map to False."""
        deadline = None if timeout is None else time.monotonic() + timeout
        result: dict[InformerKey, bool] = {}
        with self._lock:
            started = [(k, self._informers[k]) for k in self._started]
        for key, informer in started:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            result[key] = informer.wait_for_sync(left, stop)
        return result

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every started informer and wait for it."""
        with self._lock:
            started = [self._informers[k] for k in self._started]
        for informer in started:
            if not informer.is_stopped():
                informer.stop(timeout)

    def __enter__(self) -> SharedInformerFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
