"""The shared informer: one list-and-watch, one cache, many handlers (client-go SharedIndexInformer).

    reflector --(deltas)--> DeltaFIFO --pop--> handle_deltas --> Store (the cache, indexed)
                                                              \\-> each handler's listener

Controllers read objects from the cache (`informer.store`) instead of the API server, and react
to the handlers' notifications. Sharing one informer per resource among all controllers of a
process (see `SharedInformerFactory`) keeps one watch and one copy of each object.

Run it in a thread with `start()`/`stop()`, or call `run(stop_event)` (blocks). Wait for the first
list to reach the cache with `wait_for_sync()` before trusting the cache to be complete.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from minisched.clock import Clock, RealClock
from minisched.informer.backoff import ExponentialBackoff
from minisched.informer.delta_fifo import Delta, DeltaFIFO, DeltaType, FIFOClosedError, TransformFunc
from minisched.informer.handlers import ResourceEventHandler
from minisched.informer.keys import DeletedFinalStateUnknown
from minisched.informer.listwatch import ListWatch
from minisched.informer.processor import (
    AddNotification,
    DeleteNotification,
    ProcessorListener,
    SharedProcessor,
    UpdateNotification,
    effective_resync_period,
)
from minisched.informer.reflector import DEFAULT_WATCH_TIMEOUT, Reflector
from minisched.informer.store import Indexers, Store
from minisched.meta import resource_version_of

Object = dict[str, Any]
log = logging.getLogger("minisched.informer")


class StopSignal(Protocol):
    """What a wait for sync can be stopped by: a threading.Event, or anything with is_set()
    (client-go's stop channel)."""

    def is_set(self) -> bool: ...


MINIMUM_RESYNC_PERIOD = 1.0  # seconds; shorter requests are raised to this (client-go: 1 s)


@dataclass(frozen=True)
class HandlerRegistration:
    """What add_event_handler returns: pass it to remove_event_handler; has_synced() tells whether
    this handler has been given the whole initial list."""

    informer: SharedIndexInformer
    listener: ProcessorListener

    def has_synced(self) -> bool:
        return self.informer.has_synced() and self.listener.initial_list_delivered()


class SharedIndexInformer:
    def __init__(
        self,
        list_watch: ListWatch,
        *,
        resync_period: float = 0.0,
        indexers: Indexers | None = None,
        clock: Clock | None = None,
        watch_timeout: tuple[float, float] = DEFAULT_WATCH_TIMEOUT,
        backoff: ExponentialBackoff | None = None,
        transform: TransformFunc | None = None,
        page_size: int | None = None,
        name: str | None = None,
        watch_list: bool = False,
    ) -> None:
        """`watch_list`: stream the initial state with a watch (see Reflector) instead of listing it."""
        self.list_watch = list_watch
        self.name = name or list_watch.describe()
        self._clock: Clock = clock or RealClock()
        self._resync_check_period = self._checked_resync(resync_period)
        self._default_resync = self._resync_check_period
        self._watch_timeout = watch_timeout
        self._backoff = backoff
        self._transform = transform
        self._page_size = page_size
        self._watch_list = watch_list
        self.store = Store(indexers)  # the cache ("indexer" in client-go)
        self._processor = SharedProcessor(self._clock)
        self._block_deltas = threading.Lock()  # handle_deltas vs a handler joining mid-stream
        self._start_lock = threading.Lock()
        self._fifo: DeltaFIFO | None = None
        self._reflector: Reflector | None = None
        self._started = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._own_stop: threading.Event | None = None

    # -- handlers -----------------------------------------------------------------------------

    def add_event_handler(
        self, handler: ResourceEventHandler, resync_period: float | None = None
    ) -> HandlerRegistration:
        """Register `handler`. Added to a running informer, it first gets on_add for every object
        already cached (is_in_initial_list=True). resync_period defaults to the informer's."""
        for method in ("on_add", "on_update", "on_delete"):
            if not callable(getattr(handler, method, None)):
                raise TypeError(
                    f"an event handler needs on_add, on_update and on_delete; {handler!r} has no {method} "
                    "(wrap functions in ResourceEventHandlerFuncs)"
                )
        period = self._default_resync if resync_period is None else self._checked_resync(resync_period)
        with self._start_lock:
            if self._stopped:
                raise RuntimeError(f"informer {self.name} has stopped; handlers can no longer be added")
            if period > 0:
                if period < self._resync_check_period:
                    if self._started:
                        log.warning(
                            "%s: resync period %.3gs is shorter than the running informer's %.3gs; using that",
                            self.name, period, self._resync_check_period,
                        )
                        period = self._resync_check_period
                    else:
                        self._resync_check_period = period
                        self._processor.resync_check_period_changed(period)
                elif self._resync_check_period == 0:
                    self._resync_check_period = period
            listener = ProcessorListener(
                handler, effective_resync_period(period, self._resync_check_period), self._clock
            )
            listener.requested_resync_period = period
            with self._block_deltas:
                # No deltas are handled meanwhile, so the replay and the stream join seamlessly.
                if self._started:
                    for obj in self.store.list():
                        listener.add(AddNotification(obj, True))
                self._processor.add_listener(listener)
        return HandlerRegistration(self, listener)

    def remove_event_handler(self, registration: HandlerRegistration) -> None:
        if not self._processor.remove_listener(registration.listener):
            raise ValueError(f"handler {registration.listener.handler!r} is not registered with {self.name}")

    # -- running ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """List, watch and deliver until `stop` is set. Blocks. An informer runs once."""
        with self._start_lock:
            if self._started or self._stopped:
                raise RuntimeError(f"informer {self.name} was already started; an informer runs once")
            fifo = DeltaFIFO(known_objects=self.store, emit_delta_type_replaced=True, transform=self._transform)
            reflector = Reflector(
                self.list_watch,
                fifo,
                name=self.name,
                clock=self._clock,
                resync_period=self._resync_check_period,
                should_resync=self._processor.should_resync,
                watch_timeout=self._watch_timeout,
                backoff=self._backoff,
                page_size=self._page_size,
                watch_list=self._watch_list,
            )
            self._fifo, self._reflector = fifo, reflector
            with self._block_deltas:
                self._started = True
                self._processor.run()
        reflector_thread = threading.Thread(
            target=reflector.run, args=(stop,), name=f"reflector {self.name}", daemon=True
        )
        reflector_thread.start()
        def close_on_stop() -> None:
            stop.wait()
            fifo.close()  # wakes pop() below

        threading.Thread(target=close_on_stop, name=f"informer-stop {self.name}", daemon=True).start()
        try:
            while True:
                try:
                    fifo.pop(self._handle_deltas)
                except FIFOClosedError:
                    return
                except Exception:
                    log.exception("%s: handling deltas failed", self.name)
        finally:
            with self._start_lock:
                self._stopped = True
            reflector_thread.join(5)
            self._processor.stop()

    def start(self) -> None:
        """run() in a background thread; stop() ends it."""
        with self._start_lock:
            if self._thread is not None:
                raise RuntimeError(f"informer {self.name} was already started; an informer runs once")
            self._own_stop = threading.Event()
            self._thread = threading.Thread(
                target=self.run, args=(self._own_stop,), name=f"informer {self.name}", daemon=True
            )
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        if self._own_stop is None or self._thread is None:
            raise RuntimeError(f"informer {self.name} was not started with start()")
        self._own_stop.set()
        self._thread.join(timeout)

    def __enter__(self) -> SharedIndexInformer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state --------------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """True once the first list has been delivered into the cache."""
        fifo = self._fifo
        return fifo is not None and fifo.has_synced()

    def wait_for_sync(self, timeout: float | None = None, stop: StopSignal | None = None) -> bool:
        """Block until has_synced(), `timeout` real seconds pass (the wait is on work done by
        threads, not on the informer's clock) or `stop` is set (client-go's WaitForCacheSync takes
        a stop channel: a process told to stop does not wait out the timeout). Returns has_synced()."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.has_synced():
            if self._stopped or (stop is not None and stop.is_set()) \
                    or (deadline is not None and time.monotonic() >= deadline):
                return self.has_synced()
            time.sleep(0.005)
        return True

    def is_stopped(self) -> bool:
        return self._stopped

    @property
    def last_sync_resource_version(self) -> str:
        return self._reflector.last_sync_resource_version if self._reflector else ""

    @property
    def reflector(self) -> Reflector | None:
        return self._reflector

    @property
    def resync_check_period(self) -> float:
        return self._resync_check_period

    def add_indexers(self, indexers: Indexers) -> None:
        self.store.add_indexers(indexers)

    # -- internals ----------------------------------------------------------------------------

    def _checked_resync(self, period: float) -> float:
        if period < 0:
            raise ValueError(f"resync period must not be negative, got {period}")
        if 0 < period < MINIMUM_RESYNC_PERIOD:
            log.warning("resync period %.3gs is too short; using %gs", period, MINIMUM_RESYNC_PERIOD)
            return MINIMUM_RESYNC_PERIOD
        return period

    def _handle_deltas(self, deltas: list[Delta], is_in_initial_list: bool) -> None:
        with self._block_deltas:
            for delta in deltas:
                obj = delta.object
                if delta.type is DeltaType.DELETED:
                    self.store.delete(obj)
                    self._processor.distribute(DeleteNotification(obj), False)
                    continue
                assert not isinstance(obj, DeletedFinalStateUnknown)
                old = self.store.get(obj)
                if old is not None:
                    self.store.update(obj)
                    is_sync = delta.type is DeltaType.SYNC or (
                        delta.type is DeltaType.REPLACED and resource_version_of(old) == resource_version_of(obj)
                    )
                    self._processor.distribute(UpdateNotification(old, obj), is_sync)
                else:
                    self.store.add(obj)
                    self._processor.distribute(AddNotification(obj, is_in_initial_list), False)


# A SharedInformer is a SharedIndexInformer you do not query by index; minisched has one class.
SharedInformer = SharedIndexInformer
