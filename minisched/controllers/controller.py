"""A controller: informers feed keys into a rate-limited work queue; workers run a reconciler.

    primary informer ──(any add/update/delete: its key)──┐
    owned informer ──(its controller ownerReference's key)┴─> RateLimitingQueue ─> reconcile(Request)

One key is never reconciled by two workers at once (the queue's processing set), and a key added
again while it is being reconciled is processed once more afterwards. After `reconcile`:
 - an exception → requeue with the rate limiter's back-off (client-go's default controller limiter:
   per-key exponential 5 ms·2^n up to 1000 s, with an overall 10 qps / burst 100 bucket);
 - Result(requeue_after=s) → forget the failures, add the key again in s seconds (on the clock);
 - Result(requeue=True) → rate-limited requeue; Result() → forget.
Workers are threads (`start`), or the caller drives them one item at a time (`process_next`), which
is what notebooks do on the virtual clock for output that is the same on every run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic

from minisched.clock import Clock, RealClock
from minisched.controllers.reconciler import O, R, Reconciler, Request, Result
from minisched.informer import (
    DeletedFinalStateUnknown,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    SharedInformerFactory,
    unwrap_tombstone,
)
from minisched.meta import key_of, namespace_of
from minisched.workqueue import RateLimiter, RateLimitingQueue, default_controller_rate_limiter

Object = dict[str, Any]
log = logging.getLogger("minisched.controllers")


@dataclass(frozen=True)
class Outcome:
    """One reconcile call, as recorded in `Controller.history`."""

    request: Request
    result: Result | None
    error: str | None = None


@dataclass
class ControllerStats:
    reconciles: int = 0
    errors: int = 0
    requeues: int = 0  # rate-limited requeues (errors and Result(requeue=True))
    requeues_after: int = 0
    by_key: Counter[str] = field(default_factory=Counter)


def owner_request(obj: Object, owner_kind: str, owner_api_version: str) -> Request | None:
    """The Request of the controller owner of `obj` if it is of the given kind, else None."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("kind") == owner_kind
            and ref.get("apiVersion") == owner_api_version
        ):
            return Request(namespace_of(obj), ref["name"])
    return None


class Controller(Generic[O, R]):
    def __init__(
        self,
        name: str,
        reconciler: Reconciler[O, R],
        factory: SharedInformerFactory,
        *,
        clock: Clock | None = None,
        rate_limiter: RateLimiter | None = None,
        workers: int = 1,
        namespace: str | None = None,
        history_limit: int = 1000,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a controller needs at least one worker, got {workers}")
        self.name = name
        self.reconciler = reconciler
        self.factory = factory
        self.clock = clock or RealClock()
        self.queue: RateLimitingQueue[Request] = RateLimitingQueue(
            rate_limiter or default_controller_rate_limiter(self.clock), name, clock=self.clock
        )
        self.workers = workers
        self.stats = ControllerStats()
        self.history: list[Outcome] = []
        self._history_limit = history_limit
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        primary = reconciler.primary
        self.primary_informer: SharedIndexInformer = factory.informer_for(
            primary.resource, namespace=namespace
        )
        self.primary_informer.add_event_handler(
            ResourceEventHandlerFuncs(
                add=lambda obj, _initial: self.enqueue_object(obj),
                update=lambda _old, new: self.enqueue_object(new),
                delete=self.enqueue_object,
            )
        )
        self.owned_informer: SharedIndexInformer | None = None
        owned = reconciler.owned
        if owned is not None:
            self.owned_informer = factory.informer_for(owned.resource, namespace=namespace)
            self.owned_informer.add_event_handler(
                ResourceEventHandlerFuncs(
                    add=lambda obj, _initial: self._enqueue_owner(obj),
                    update=self._enqueue_owners,
                    delete=self._enqueue_owner,
                )
            )

    # -- feeding the queue ----------------------------------------------------------------------

    def enqueue(self, request: Request) -> None:
        self.queue.add(request)

    def enqueue_object(self, obj: Object | DeletedFinalStateUnknown) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self.enqueue(Request.from_key(obj.key))
            return
        self.enqueue(Request.from_key(key_of(obj)))

    def _enqueue_owners(self, old: Object, new: Object) -> None:
        # Both: an object moved from one owner to another must wake both.
        self._enqueue_owner(old)
        self._enqueue_owner(new)

    def _enqueue_owner(self, obj: Object | DeletedFinalStateUnknown) -> None:
        unwrapped = unwrap_tombstone(obj)
        if unwrapped is None:
            return
        primary = self.reconciler.primary.resource
        request = owner_request(unwrapped, primary.kind, primary.api_version)
        if request is not None:
            self.enqueue(request)

    # -- running --------------------------------------------------------------------------------

    def start_informers(self) -> None:
        """Start the factory's informers (those not running yet)."""
        self.factory.start()

    def wait_for_sync(self, timeout: float = 30.0) -> bool:
        informers = [self.primary_informer] + ([self.owned_informer] if self.owned_informer else [])
        return all(informer.wait_for_sync(timeout) for informer in informers)

    def start(self, sync_timeout: float = 30.0) -> None:
        """Start informers, wait for their caches, then run `workers` worker threads."""
        self.start_informers()
        if not self.wait_for_sync(sync_timeout):
            raise TimeoutError(f"controller {self.name}: caches did not sync within {sync_timeout} s")
        for i in range(self.workers):
            thread = threading.Thread(target=self._worker, name=f"{self.name}-worker-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the workers (the informers belong to the factory: stop them there)."""
        self.queue.shut_down()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()

    def _worker(self) -> None:
        while self.process_next():
            pass

    def process_next(self) -> bool:
        """Take one request from the queue (blocking) and reconcile it. False once shut down."""
        request, shutdown = self.queue.get()
        if shutdown or request is None:
            return False
        try:
            self._reconcile(request)
        finally:
            self.queue.done(request)
        return True

    def process_ready(self, limit: int = 10_000) -> int:
        """Reconcile every request that is ready now, without blocking; returns how many ran.
        For single-threaded driving (tests, notebooks) with no worker threads started."""
        count = 0
        while count < limit and len(self.queue) > 0:
            if not self.process_next():
                break
            count += 1
        return count

    def settle(self, timeout: float = 10.0, quiet: float = 0.1, until: Callable[[], bool] | None = None) -> int:
        """Drive the queue single-threaded until `until()` holds (if given) and nothing has arrived
        for `quiet` real seconds (informer events arrive from their own threads). Returns how many
        reconciles ran. Requests waiting on the clock (requeue_after, back-off) are not waited for."""
        deadline = time.monotonic() + timeout
        total = 0
        last_work = time.monotonic()
        while time.monotonic() < deadline:
            ran = self.process_ready()
            total += ran
            now = time.monotonic()
            if ran:
                last_work = now
            elif now - last_work >= quiet and (until is None or until()):
                return total
            time.sleep(0.005)
        raise TimeoutError(f"controller {self.name} still busy after {timeout} s ({total} reconciles)")

    def _reconcile(self, request: Request) -> None:
        outcome: Outcome
        try:
            result = self.reconciler.reconcile(request)
        except Exception as error:  # a reconciler's failure is retried, never fatal to the worker
            log.info("%s: reconcile %s failed: %s", self.name, request, error)
            self.queue.add_rate_limited(request)
            with self._lock:
                self.stats.errors += 1
                self.stats.requeues += 1
            outcome = Outcome(request, None, f"{type(error).__name__}: {error}")
        else:
            if result.requeue_after > 0:
                self.queue.forget(request)
                self.queue.add_after(request, result.requeue_after)
                with self._lock:
                    self.stats.requeues_after += 1
            elif result.requeue:
                self.queue.add_rate_limited(request)
                with self._lock:
                    self.stats.requeues += 1
            else:
                self.queue.forget(request)
            outcome = Outcome(request, result)
        with self._lock:
            self.stats.reconciles += 1
            self.stats.by_key[request.key] += 1
            self.history.append(outcome)
            del self.history[: -self._history_limit]
