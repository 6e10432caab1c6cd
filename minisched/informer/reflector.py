"""The reflector: keeps a store in step with the server by listing, then watching (client-go Reflector).

One cycle (`list_and_watch`):
1. LIST, and hand the whole result to the store as a replace. The first list asks for
   resourceVersion "0" (any version the server has cached: cheap). After a watch's 410 it asks for
   the last version seen, as client-go does: a list "at least as fresh as" that version is still
   served from the watch cache; only if that list is refused with 410 too does it ask for "" (the
   latest, read from storage with a quorum read).
2. WATCH from the list's resourceVersion, feeding each ADDED/MODIFIED/DELETED to the store and
   remembering the newest resourceVersion seen (BOOKMARK events move it too, without an object
   change), so the next watch resumes exactly where this one ended.
3. When a watch ends normally (its random 5-10 minute timeout, spreading reconnects out), watch
   again from the last version. When the server answers 410 Gone because that version is no
   longer kept, or anything else fails, the cycle ends.

With `watch_list` (client-go's WatchListClient, on by default in client-go 1.35), step 1 is a
watch instead: `sendInitialEvents=true` streams the state as ADDED events, one object at a time,
and a BOOKMARK annotated `k8s.io/initial-events-end` says it is complete and at which version; the
reflector hands the state to the store as a replace and goes on watching on the same stream (step
2). One object decoded at a time, each transformed as it arrives, is what saves memory: a list is
one response, held whole and decoded whole before anything is dropped from it. A server that
refuses the watch-list (422 without the WatchList gate, on by default since kube 1.34), or a stream
that fails before its bookmark (or with any other error), falls back to the list for that cycle,
as client-go does.

`run()` repeats cycles until stopped, waiting an exponential backoff with jitter between them. A
watch that closes within a second without delivering anything counts as a failure, so a server
that keeps hanging up is not hammered.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from minisched.clock import Clock, RealClock
from minisched.cluster.base import Watch, WatchEvent
from minisched.errors import ApiError, Expired, TooManyRequests
from minisched.informer.backoff import ExponentialBackoff
from minisched.informer.keys import DeletedFinalStateUnknown, meta_namespace_key
from minisched.informer.listwatch import ListWatch
from minisched.meta import resource_version_of

Object = dict[str, Any]
log = logging.getLogger("minisched.informer")

DEFAULT_WATCH_TIMEOUT = (300.0, 600.0)  # seconds, a random value in this range per watch
SHORT_WATCH = 1.0  # a watch that ends sooner than this with no events is an error
INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # the annotation on a watch-list's last bookmark


class ReflectorStore(Protocol):
    """Where a reflector writes: a DeltaFIFO (in an informer) or a plain Store."""

    def add(self, obj: Object) -> None: ...

    def update(self, obj: Object) -> None: ...

    def delete(self, obj: Object | DeletedFinalStateUnknown) -> None: ...

    def replace(self, objs: list[Object], resource_version: str) -> None: ...

    def resync(self) -> None: ...


class ShortWatchError(Exception):
    """The watch closed within SHORT_WATCH seconds without a single event."""


@dataclass
class ReflectorStats:
    """Counts for tests, benchmarks and the informer chapter."""

    lists: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    expired: int = 0  # 410s, from a watch or a list
    errors: int = 0  # cycles that ended with an error
    resyncs: int = 0
    watch_lists: int = 0  # initial states streamed by a watch-list (each ends with its bookmark)
    watch_list_fallbacks: int = 0  # watch-lists refused or failed before their bookmark: listed instead


class Reflector:
    def __init__(
        self,
        list_watch: ListWatch,
        store: ReflectorStore,
        *,
        name: str | None = None,
        clock: Clock | None = None,
        resync_period: float = 0.0,
        should_resync: Callable[[], bool] | None = None,
        watch_timeout: tuple[float, float] = DEFAULT_WATCH_TIMEOUT,
        backoff: ExponentialBackoff | None = None,
        page_size: int | None = None,
        rng: random.Random | None = None,
        watch_list: bool = False,
    ) -> None:
        low, high = watch_timeout
        if not 0 < low <= high:
            raise ValueError(f"watch_timeout must be (min, max) seconds with 0 < min <= max, got {watch_timeout}")
        if resync_period < 0:
            raise ValueError(f"resync_period must not be negative, got {resync_period}")
        if page_size is not None and page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        self.list_watch = list_watch
        self.store = store
        self.name = name or list_watch.describe()
        self._clock: Clock = clock or RealClock()
        self._resync_period = resync_period
        self._should_resync = should_resync
        self._watch_timeout = watch_timeout
        self._rng = rng or random.Random()
        self.backoff = backoff or ExponentialBackoff(clock=self._clock, rng=self._rng)
        self._page_size = page_size
        self.watch_list = watch_list
        self._cond = threading.Condition()  # wakes backoff and resync waits on stop
        self._lock = threading.Lock()
        self._last_sync_rv = ""
        self._rv_unavailable = False  # after a 410: relist with "" rather than a cached version
        self._current_watch: Watch | None = None
        self.stats = ReflectorStats()
        self.last_error: BaseException | None = None

    @property
    def last_sync_resource_version(self) -> str:
        """The newest resourceVersion the store has seen (from the list, events or bookmarks)."""
        with self._lock:
            return self._last_sync_rv

    # -- running ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """List and watch until `stop` is set, backing off between cycles. Blocks."""
        threading.Thread(target=self._stop_on, args=(stop,), name=f"reflector-stop {self.name}", daemon=True).start()
        if self._resync_period > 0:
            threading.Thread(
                target=self._resync_loop, args=(stop,), name=f"reflector-resync {self.name}", daemon=True
            ).start()
        while not stop.is_set():
            try:
                self.list_and_watch(stop)
            except Exception as err:  # any failure means: back off, then relist
                self.stats.errors += 1
                self.last_error = err
                log.warning("%s: list and watch failed: %s", self.name, err)
            if stop.is_set():
                break
            self._sleep(self.backoff.next_delay(), stop)

    def list_and_watch(self, stop: threading.Event) -> None:
        """One cycle: list (or stream the state with a watch-list), then watch until the watch
        fails or `stop` is set."""
        streaming: tuple[Watch, Iterator[WatchEvent]] | None = None
        if self.watch_list:
            try:
                streaming = self._watch_list(stop)
            except Exception as err:  # noqa: BLE001 - any error, as client-go: progress beats a deadlock
                self.stats.watch_list_fallbacks += 1
                log.info("%s: watch-list failed (%s); listing instead", self.name, err)
            if stop.is_set():
                return
        if streaming is None:
            self._list()
        self._watch_until_error(stop, streaming)

    # -- listing ------------------------------------------------------------------------------

    def _relist_resource_version(self) -> str:
        with self._lock:
            if self._rv_unavailable:
                return ""  # the version we had is gone: read the latest from storage
            return self._last_sync_rv or "0"  # "0": whatever the server has cached is fine

    def _list(self) -> None:
        rv = self._relist_resource_version()
        try:
            items, list_rv = self._list_at(rv)
        except Expired:
            if rv == "":
                raise
            self.stats.expired += 1
            with self._lock:
                self._rv_unavailable = True  # a failure below relists at "" too, not at rv again
            items, list_rv = self._list_at("")
        self.stats.lists += 1
        self.store.replace(items, list_rv)
        with self._lock:
            self._rv_unavailable = False
            self._last_sync_rv = list_rv

    def _list_at(self, rv: str) -> tuple[list[Object], str]:
        if self._page_size is None or rv == "0":  # RV "0" is served whole from the server's cache
            result = self.list_watch.list(resource_version=rv)
            return list(result.get("items") or []), resource_version_of(result)
        items: list[Object] = []
        token: str | None = None
        list_rv = ""
        while True:
            page = self.list_watch.list(
                resource_version=rv if token is None else None, limit=self._page_size, continue_token=token
            )
            items.extend(page.get("items") or [])
            list_rv = list_rv or resource_version_of(page)
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                return items, list_rv

    def _watch_list(self, stop: threading.Event) -> tuple[Watch, Iterator[WatchEvent]] | None:
        """Stream the state; hand it to the store at the initial-events-end bookmark and return
        the watch, still open, with its iterator (a new one would lose what this one buffered)
        to go on with. None if stopped meanwhile."""
        with self._lock:  # "": the latest state (a consistent read); after a 410, no older than what we had
            rv = "" if self._rv_unavailable else self._last_sync_rv
        watch = self.list_watch.watch_list(resource_version=rv, timeout_seconds=self._rng.uniform(*self._watch_timeout))
        with self._cond:
            self._current_watch = watch
        if stop.is_set():  # stop came before the watch was published: nothing stops it but us
            self._drop(watch)
            return None
        transform = getattr(self.store, "transformer", None)
        state: dict[str, Object] = {}
        events = iter(watch)
        try:
            for event in events:
                if stop.is_set():
                    break
                kind, obj = event["type"], event["object"]
                if kind == "BOOKMARK":
                    if ((obj.get("metadata") or {}).get("annotations") or {}).get(INITIAL_EVENTS_END) != "true":
                        continue
                    list_rv = resource_version_of(obj)
                    self.store.replace(list(state.values()), list_rv)
                    self.stats.watch_lists += 1
                    with self._lock:
                        self._rv_unavailable = False
                        self._last_sync_rv = list_rv
                    return watch, events
                if kind in ("ADDED", "MODIFIED"):
                    state[meta_namespace_key(obj)] = transform(obj) if transform is not None else obj
                elif kind == "DELETED":
                    state.pop(meta_namespace_key(obj), None)
                else:
                    raise ApiError(f"{self.name}: unexpected watch event type {kind!r}")
        except BaseException as err:
            self._drop(watch)
            if isinstance(err, Expired):
                with self._lock:
                    self._rv_unavailable = True  # the list it falls back to asks for "" then
            raise
        self._drop(watch)
        if stop.is_set():
            return None
        raise ApiError(f"{self.name}: the watch-list ended before its {INITIAL_EVENTS_END} bookmark")

    def _drop(self, watch: Watch) -> None:
        watch.stop()
        with self._cond:
            if self._current_watch is watch:
                self._current_watch = None

    # -- watching -----------------------------------------------------------------------------

    def _watch_until_error(
        self, stop: threading.Event, streaming: tuple[Watch, Iterator[WatchEvent]] | None = None
    ) -> None:
        """Watch from the last version seen; `streaming` is a watch-list's stream to go on with first."""
        while not stop.is_set():
            if streaming is not None:
                (watch, events), streaming = streaming, None
                self.stats.watches += 1
            else:
                timeout = self._rng.uniform(*self._watch_timeout)
                try:
                    watch = self.list_watch.watch(
                        resource_version=self.last_sync_resource_version, timeout_seconds=timeout
                    )
                except Expired:
                    self._mark_expired()
                    return
                except TooManyRequests:
                    self._sleep(self.backoff.next_delay(), stop)
                    continue
                self.stats.watches += 1
                events = iter(watch)
            with self._cond:
                self._current_watch = watch
            if stop.is_set():  # stop came between the check above and publishing the watch
                watch.stop()
                return
            started, received = self._clock.monotonic(), 0
            try:
                for event in events:
                    if stop.is_set():
                        return
                    self._handle(event)
                    received += 1
            except Expired:
                self._mark_expired()
                return
            except TooManyRequests:
                self._sleep(self.backoff.next_delay(), stop)
                continue
            finally:
                watch.stop()
                with self._cond:
                    self._current_watch = None
            if stop.is_set():
                return
            if received == 0 and self._clock.monotonic() - started < SHORT_WATCH:
                raise ShortWatchError(
                    f"{self.name}: the watch closed within {SHORT_WATCH:g} s without any event"
                )
            # Ended normally (its timeout): watch again from where it stopped.

    def _handle(self, event: WatchEvent) -> None:
        kind, obj = event["type"], event["object"]
        if kind == "ADDED":
            self.store.add(obj)
        elif kind == "MODIFIED":
            self.store.update(obj)
        elif kind == "DELETED":
            self.store.delete(obj)
        elif kind == "BOOKMARK":
            self.stats.bookmarks += 1
        else:
            raise ApiError(f"{self.name}: unexpected watch event type {kind!r}")
        self.stats.events += 1
        rv = resource_version_of(obj)
        if rv:
            with self._lock:
                self._last_sync_rv = rv

    def _mark_expired(self) -> None:
        """A watch's 410. The relist still asks for the last version seen (client-go does not set
        isLastSyncResourceVersionUnavailable here): a list at least that fresh is valid; if the
        server refuses it too, _list falls back to ""."""
        self.stats.expired += 1
        log.info("%s: watch from resourceVersion %s expired (410); relisting from it",
                 self.name, self.last_sync_resource_version)

    # -- waiting ------------------------------------------------------------------------------

    def _sleep(self, seconds: float, stop: threading.Event) -> None:
        with self._cond:
            deadline = self._clock.monotonic() + seconds
            while not stop.is_set():
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    return
                self._clock.wait(self._cond, remaining)

    def _stop_on(self, stop: threading.Event) -> None:
        stop.wait()
        with self._cond:
            watch = self._current_watch
            self._cond.notify_all()
        if watch is not None:
            watch.stop()

    def _resync_loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._sleep(self._resync_period, stop)
            if stop.is_set():
                return
            if self._should_resync is None or self._should_resync():
                self.stats.resyncs += 1
                self.store.resync()
