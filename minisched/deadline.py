"""Deadlines, cancellation and retries: Go's context.Context, in Python, on a `Clock`.

A `Context` is a handle that says "stop by then" (a deadline) or "stop now" (cancel). Work that may
block (an API call, a backoff sleep, a watch) takes one and gives up when it is done, raising
`ctx.err()`: `Canceled` or `DeadlineExceeded`. As in Go:

- a child (`with_timeout`, `with_deadline`, `with_cancel`) never outlives its parent: its deadline
  is the earlier of its own and its parent's, and cancelling the parent cancels it;
- `done()` / `err()` can be asked from any thread; `cancel()` is idempotent;
- `with ctx.with_timeout(5) as c:` cancels `c` on exit, like `defer cancel()`. Do cancel the
  children you make: a parent keeps a live child until it ends (Go's vet warns of the same leak).

Time comes from a `minisched.clock.Clock`, so on a `VirtualClock` a 10-second deadline passes when
the test advances the clock, not after ten real seconds.

Retries use `tenacity` (a well-kept library: writing backoff loops is not the lesson here), wrapped
in `RetryPolicy`, which adds what tenacity does not know about: the context. It never sleeps past
the deadline (it gives up at once when the next wait would overrun it), a `cancel()` interrupts the
backoff sleep, and each attempt can get its own shorter timeout.

Python cannot interrupt a thread blocked in a socket read the way Go's HTTP client aborts a
request when its context ends. `call()` runs the blocking call on a helper thread and stops waiting
for it: the caller gets `DeadlineExceeded` on time, but the request may still reach the server.
That is the real-world ambiguity of every timed-out write, and `bind_pod()` shows how to live with
it: a retry that meets 409 "already assigned" checks whether the earlier attempt in fact won.
"""

from __future__ import annotations

import queue
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from minisched.clock import Clock, RealClock
from minisched.cluster.base import Cluster, Watch, WatchEvent
from minisched.errors import (
    ApiError,
    Conflict,
    InternalError,
    ServiceUnavailable,
    Timeout,
    TooManyRequests,
)

if TYPE_CHECKING:
    import tenacity

T = TypeVar("T")

__all__ = [
    "Canceled",
    "Context",
    "ContextError",
    "DeadlineExceeded",
    "RetryPolicy",
    "background",
    "bind_pod",
    "call",
    "is_retriable",
    "watch_events",
]


class ContextError(Exception):
    """The context ended: the work it bounded should stop."""


class Canceled(ContextError):
    """Go's context.Canceled: someone called cancel()."""


class DeadlineExceeded(ContextError, TimeoutError):
    """Go's context.DeadlineExceeded: the deadline passed. Also a TimeoutError."""


class Context:
    """A deadline and a cancel switch, shared by a tree of work. Build one with `background()`."""

    def __init__(
        self,
        clock: Clock,
        *,
        parent: Context | None = None,
        deadline: float | None = None,
        name: str = "",
    ) -> None:
        self.clock = clock
        self.name = name
        self._parent = parent
        if parent is not None and parent._deadline is not None:
            deadline = parent._deadline if deadline is None else min(deadline, parent._deadline)
        self._deadline: float | None = deadline  # on clock.monotonic()
        self._cond = threading.Condition(threading.RLock())
        self._err: ContextError | None = None
        self._children: list[Context] = []
        self._callbacks: list[Callable[[], None]] = []
        if parent is not None:
            parent._adopt(self)

    # -- building children -------------------------------------------------------------------------

    def with_cancel(self, name: str = "") -> Context:
        return Context(self.clock, parent=self, name=name)

    def with_timeout(self, seconds: float, name: str = "") -> Context:
        if seconds < 0:
            raise ValueError(f"a timeout cannot be negative: {seconds}")
        return Context(self.clock, parent=self, deadline=self.clock.monotonic() + seconds, name=name)

    def with_deadline(self, when: float, name: str = "") -> Context:
        """A child that ends at `when`, a time on `clock.monotonic()`."""
        return Context(self.clock, parent=self, deadline=when, name=name)

    # -- asking ------------------------------------------------------------------------------------

    @property
    def deadline(self) -> float | None:
        """When this context's deadline passes (clock.monotonic()), or None."""
        return self._deadline

    def remaining(self) -> float | None:
        """Seconds left before the deadline (never negative), or None without a deadline."""
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - self.clock.monotonic())

    def err(self) -> ContextError | None:
        """None while the context is live; then the reason it ended (always the same object)."""
        with self._cond:
            if self._err is not None:
                return self._err
        if self._deadline is not None and self.clock.monotonic() >= self._deadline:
            self._finish(DeadlineExceeded(f"context deadline exceeded{self._label()}"))
        with self._cond:
            return self._err

    def done(self) -> bool:
        return self.err() is not None

    def check(self) -> None:
        """Raise `err()` if the context has ended; a cheap guard between steps of work."""
        err = self.err()
        if err is not None:
            raise err

    # -- ending ------------------------------------------------------------------------------------

    def cancel(self, reason: str = "") -> None:
        """End this context and every child. Later calls change nothing."""
        self._finish(Canceled(f"context canceled{self._label()}" + (f": {reason}" if reason else "")))

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel("scope exited")

    # -- waiting -----------------------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the context ends (True) or `timeout` seconds pass on the clock (False)."""
        until = None if timeout is None else self.clock.monotonic() + timeout
        while True:
            # err() runs outside the lock: ending the context runs after_done callbacks, which
            # must not run while this thread holds the context's lock.
            if self.err() is not None:
                return True
            with self._cond:
                if self._err is not None:
                    return True
                now = self.clock.monotonic()
                if until is not None and now >= until:
                    return False
                if self._deadline is not None and now >= self._deadline:
                    continue  # just passed: let err() above end the context
                limits = [t - now for t in (until, self._deadline) if t is not None]
                self.clock.wait(self._cond, min(limits) if limits else None)

    def sleep(self, seconds: float) -> None:
        """Sleep on the clock, or raise `err()` as soon as the context ends."""
        if self.wait(max(seconds, 0.0)):
            self.check()

    def after_done(self, fn: Callable[[], None]) -> None:
        """Call `fn` once when the context ends (Go's context.AfterFunc). Runs at once if it has.

        With a deadline, a daemon thread waits for it on the clock; cancellation runs `fn` in the
        thread that called cancel()."""
        with self._cond:
            registered = self._err is None
            if registered:
                self._callbacks.append(fn)
            start_timer = registered and self._deadline is not None and len(self._callbacks) == 1
        if not registered:
            fn()
        elif start_timer:
            threading.Thread(target=self.wait, name=f"ctx-deadline{self._label()}", daemon=True).start()

    # -- internals ---------------------------------------------------------------------------------

    def _adopt(self, child: Context) -> None:
        with self._cond:
            err = self._err
            if err is None:
                self._children.append(child)
        if err is not None:
            child._finish(err)

    def _finish(self, err: ContextError) -> None:
        with self._cond:
            if self._err is not None:
                return
            self._err = err
            children, self._children = self._children, []
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        if self._parent is not None:
            self._parent._forget(self)
        for child in children:
            child._finish(err)
        for fn in callbacks:
            fn()

    def _forget(self, child: Context) -> None:
        with self._cond:
            if child in self._children:
                self._children.remove(child)

    def _label(self) -> str:
        return f" ({self.name})" if self.name else ""

    def __repr__(self) -> str:
        state = type(self._err).__name__ if self._err else "live"
        left = self.remaining()
        return f"Context({self.name or 'anonymous'}, {state}, remaining={left if left is None else round(left, 3)})"


def background(clock: Clock | None = None, name: str = "background") -> Context:
    """A root context: never ends unless cancelled. Go's context.Background()."""
    return Context(clock or RealClock(), name=name)


# -- one blocking call under a context ---------------------------------------------------------------


class _Helpers:
    """Daemon helper threads for call(), kept for reuse (starting a thread costs ~100 µs).

    Not a ThreadPoolExecutor: its workers are joined at interpreter exit, so one abandoned call
    that never returns would hang the exit. These are daemons, and a busy pool just grows: an
    abandoned call keeps its thread, the next call starts another."""

    def __init__(self, max_idle: int = 16) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._max_idle = max_idle

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._jobs.put(job)
                return
        threading.Thread(target=self._work, args=(job,), name="ctx-call", daemon=True).start()

    def _work(self, job: Callable[[], None]) -> None:
        while True:
            job()
            with self._lock:
                if self._idle >= self._max_idle:
                    return
                self._idle += 1
            job = self._jobs.get()


_HELPERS = _Helpers()


def call(ctx: Context, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn(*args, **kwargs)` but return no later than the context allows.

    Raises `ctx.err()` before starting if the context has already ended. Otherwise the call runs
    on a helper thread; if the context ends first, this raises its error and the call is
    abandoned: its result is dropped, but whatever it sent may still take effect on the server.
    """
    ctx.check()
    box: dict[str, Any] = {}
    finished = threading.Event()

    def run() -> None:
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc
        finally:
            finished.set()
            with ctx._cond:  # wake ctx.wait() in the caller
                ctx._cond.notify_all()

    _HELPERS.submit(run)
    while not finished.is_set() and ctx.err() is None:
        with ctx._cond:  # the helper thread notifies this condition when it finishes
            if finished.is_set() or ctx._err is not None:
                break
            left = ctx.remaining()
            if left is not None and left <= 0:
                continue  # the deadline just passed: err() above ends the context
            ctx.clock.wait(ctx._cond, left)
    if not finished.is_set():
        ctx.check()
    if "error" in box:
        raise box["error"]
    return box["result"]


# -- retries -------------------------------------------------------------------------------------------


def is_retriable(err: BaseException) -> bool:
    """Errors worth trying again unchanged: overload, server trouble, timeouts, dropped connections.

    A 409 Conflict is not: the caller must re-read the object first (see RetryPolicy.on_conflict).
    """
    if isinstance(err, TooManyRequests | ServiceUnavailable | InternalError | Timeout):
        return True
    if isinstance(err, ApiError):
        return err.status >= 500
    return isinstance(err, DeadlineExceeded | ConnectionError)


@dataclass(frozen=True)
class RetryAttempt:
    """What `on_retry` hears before each backoff sleep."""

    attempt: int  # the attempt that just failed, from 1
    error: BaseException
    delay: float  # the sleep before the next attempt


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, bounded by a Context.

    The wait before attempt n+1 is min(cap, initial * factor**(n-1)), then stretched by up to
    `jitter` of itself at random (client-go's wait.Backoff does the same), so that clients that
    failed together do not retry together.
    """

    initial: float = 0.2
    factor: float = 2.0
    cap: float = 5.0
    jitter: float = 0.1
    max_attempts: int | None = 5
    attempt_timeout: float | None = None  # each attempt gets a child context with this timeout
    retry_on: Callable[[BaseException], bool] = is_retriable
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)
    on_retry: Callable[[RetryAttempt], None] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.initial < 0 or self.cap < 0 or self.jitter < 0:
            raise ValueError(f"RetryPolicy: initial, cap and jitter must be >= 0, got {self}")
        if self.factor < 1:
            raise ValueError(f"RetryPolicy: factor must be >= 1 (a shrinking backoff), got {self.factor}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"RetryPolicy: max_attempts must be >= 1 or None, got {self.max_attempts}")

    @classmethod
    def on_conflict(cls, **overrides: Any) -> RetryPolicy:
        """client-go's retry.DefaultRetry (5 steps, 10 ms, factor 1, jitter 0.1) for 409s:
        use it with a function that re-reads the object on every attempt."""
        settings: dict[str, Any] = dict(
            initial=0.01, factor=1.0, cap=0.01, jitter=0.1, max_attempts=5, retry_on=lambda e: isinstance(e, Conflict)
        )
        settings.update(overrides)
        return cls(**settings)

    def delay(self, attempt: int) -> float:
        """The backoff after failed attempt number `attempt` (from 1), jitter included."""
        base = min(self.cap, self.initial * self.factor ** (attempt - 1))
        return base * (1 + self.jitter * self.rng.random()) if self.jitter else base

    def run(self, ctx: Context, fn: Callable[[Context], T]) -> T:
        """Call `fn(attempt_ctx)` until it returns, a non-retriable error is raised, the attempts
        run out (the last error is raised), or the context ends (its error is raised, chained to
        the last failure). Never sleeps past the context's deadline."""
        # Imported here, not with the module: tenacity imports tornado (and asyncio) whenever tornado
        # is installed, and the scheduler process imports this module but never retries through it.
        import tenacity

        ended: dict[str, ContextError] = {}

        def attempt() -> T:
            ctx.check()
            if self.attempt_timeout is None:
                return fn(ctx)
            with ctx.with_timeout(self.attempt_timeout, name="attempt") as actx:
                return fn(actx)

        def should_retry(err: BaseException) -> bool:
            return ctx.err() is None and self.retry_on(err)

        def stop(state: tenacity.RetryCallState) -> bool:
            err = ctx.err()
            if err is not None:
                ended["err"] = err
                return True
            left = ctx.remaining()
            if left is not None and state.upcoming_sleep >= left:
                ended["err"] = DeadlineExceeded(
                    f"gave up after attempt {state.attempt_number}: the next backoff "
                    f"({state.upcoming_sleep:.3f} s) would pass the deadline ({left:.3f} s left)"
                )
                return True
            return self.max_attempts is not None and state.attempt_number >= self.max_attempts

        def give_up(state: tenacity.RetryCallState) -> T:
            assert state.outcome is not None
            last = state.outcome.exception()
            if "err" in ended:
                raise ended["err"] from last
            return state.outcome.result()  # re-raises the last error

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if self.on_retry is not None and state.outcome is not None:
                error = state.outcome.exception()
                assert error is not None
                self.on_retry(RetryAttempt(state.attempt_number, error, state.upcoming_sleep))

        retrying = tenacity.Retrying(
            sleep=ctx.sleep,
            stop=stop,
            wait=lambda state: self.delay(state.attempt_number),
            retry=tenacity.retry_if_exception(should_retry),
            before_sleep=before_sleep,
            retry_error_callback=give_up,
        )
        return retrying(attempt)


# -- applied: binding and watching ----------------------------------------------------------------------


def bind_pod(
    ctx: Context,
    cluster: Cluster,
    namespace: str,
    name: str,
    node_name: str,
    *,
    uid: str | None = None,
    policy: RetryPolicy | None = None,
) -> None:
    """POST pods/binding with retries, each attempt bounded by the context.

    A bind whose answer was lost (timeout, dropped connection) may have succeeded. Its retry then
    gets 409 Conflict; if the pod is bound to `node_name`, the earlier attempt won, so this is
    success. A 409 for another node is a real conflict and is raised.
    """
    policy = policy or RetryPolicy(attempt_timeout=5.0)
    attempts = {"n": 0}

    def attempt(actx: Context) -> None:
        attempts["n"] += 1
        try:
            call(actx, cluster.bind, namespace, name, node_name, uid=uid)
        except Conflict:
            if attempts["n"] == 1:
                raise
            pod = call(actx, cluster.get, "pods", name, namespace)
            if (pod.get("spec") or {}).get("nodeName") != node_name:
                raise

    policy.run(ctx, attempt)


def watch_events(ctx: Context, watch: Watch) -> Iterator[WatchEvent]:
    """Iterate a `Watch` until the context ends, then stop it and raise the context's error.

    The watch is stopped from the context's deadline timer (or the cancelling thread), which ends
    its iteration; a watch that ends on its own (server timeout) just ends the loop.
    """
    ctx.check()
    ctx.after_done(watch.stop)
    for event in watch:
        if ctx.done():
            break
        yield event
    ctx.check()
