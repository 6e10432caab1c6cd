"""§4.1: contexts, deadlines, cancellation and retries."""

from __future__ import annotations

import random
import threading

import pytest

from minisched.clock import RealClock, VirtualClock
from minisched.deadline import (
    Canceled,
    Context,
    DeadlineExceeded,
    RetryAttempt,
    RetryPolicy,
    background,
    call,
    watch_events,
)
from minisched.errors import Conflict, NotFound, ServiceUnavailable
from tests.chapters45.helpers import eventually, run_in_thread, wait_for_sleepers


def test_child_inherits_the_earlier_deadline_and_parent_cancel(virtual_clock: VirtualClock) -> None:
    root = background(virtual_clock)
    parent = root.with_timeout(5)
    child = parent.with_timeout(60)
    assert child.deadline == parent.deadline == virtual_clock.monotonic() + 5
    sibling = parent.with_cancel()
    sibling.cancel("only me")
    assert isinstance(sibling.err(), Canceled) and "only me" in str(sibling.err())
    assert parent.err() is None, "cancelling a child must not end its parent"
    virtual_clock.advance(5)
    assert isinstance(child.err(), DeadlineExceeded)
    assert child.err() is child.err(), "err() keeps returning the same error"
    assert isinstance(parent.err(), DeadlineExceeded) and root.err() is None


def test_cancel_reaches_grandchildren_and_after_done(virtual_clock: VirtualClock) -> None:
    root = background(virtual_clock)
    grandchild = root.with_cancel().with_cancel()
    fired: list[str] = []
    grandchild.after_done(lambda: fired.append("stopped"))
    root.cancel("shutdown")
    assert isinstance(grandchild.err(), Canceled) and fired == ["stopped"]
    late = root.with_timeout(10)  # a child of an ended context is born ended
    assert late.done()
    late.after_done(lambda: fired.append("late"))
    assert fired == ["stopped", "late"]


def test_wait_wakes_when_the_virtual_deadline_passes(virtual_clock: VirtualClock) -> None:
    ctx = background(virtual_clock).with_timeout(10)
    thread, box = run_in_thread(lambda: ctx.wait())
    wait_for_sleepers(virtual_clock)
    virtual_clock.advance(9.9)
    assert "result" not in box
    virtual_clock.advance(0.1)
    thread.join(2)
    assert box.get("result") is True and isinstance(ctx.err(), DeadlineExceeded)


def test_with_block_cancels_on_exit() -> None:
    with background(RealClock()).with_cancel() as ctx:
        assert not ctx.done()
    assert isinstance(ctx.err(), Canceled)


def test_negative_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        background().with_timeout(-1)


def flaky(failures: int, error: Exception) -> tuple[list[Context], object]:
    seen: list[Context] = []

    def fn(ctx: Context) -> str:
        seen.append(ctx)
        if len(seen) <= failures:
            raise error
        return "ok"

    return seen, fn


def test_retry_succeeds_after_transient_errors_with_growing_jittered_waits() -> None:
    heard: list[RetryAttempt] = []
    policy = RetryPolicy(initial=0.001, factor=2, cap=0.003, jitter=0.5, max_attempts=5,
                         rng=random.Random(7), on_retry=heard.append)
    seen, fn = flaky(3, ServiceUnavailable("etcd is slow"))
    assert policy.run(background(), fn) == "ok"  # type: ignore[arg-type]
    assert len(seen) == 4 and [a.attempt for a in heard] == [1, 2, 3]
    bases = [0.001, 0.002, 0.003]  # the third is capped
    for attempt, base in zip(heard, bases, strict=True):
        assert base <= attempt.delay <= base * 1.5
        assert isinstance(attempt.error, ServiceUnavailable)


def test_retry_raises_the_last_error_when_attempts_run_out() -> None:
    seen, fn = flaky(10, ServiceUnavailable("down"))
    with pytest.raises(ServiceUnavailable):
        RetryPolicy(initial=0.0, max_attempts=3).run(background(), fn)  # type: ignore[arg-type]
    assert len(seen) == 3


def test_errors_that_need_a_fresh_read_are_not_retried_blindly() -> None:
    seen, fn = flaky(10, NotFound("pods \"p\" not found"))
    with pytest.raises(NotFound):
        RetryPolicy(initial=0.0).run(background(), fn)  # type: ignore[arg-type]
    seen, fn = flaky(2, Conflict("the object has been modified"))
    assert RetryPolicy.on_conflict(initial=0.0, cap=0.0).run(background(), fn) == "ok"  # type: ignore[arg-type]
    assert len(seen) == 3


def test_cancellation_in_the_middle_of_a_retry(virtual_clock: VirtualClock) -> None:
    ctx = background(virtual_clock).with_cancel()
    seen, fn = flaky(100, ServiceUnavailable("apiserver restarting"))
    policy = RetryPolicy(initial=1.0, max_attempts=None, rng=random.Random(1))
    thread, box = run_in_thread(lambda: policy.run(ctx, fn))  # type: ignore[arg-type]
    wait_for_sleepers(virtual_clock)  # the first attempt failed; the policy sleeps its backoff
    virtual_clock.advance(1.2)  # past the first wait: a second attempt, then a second sleep
    eventually(lambda: len(seen) == 2, what="the second attempt")
    ctx.cancel("operator pressed ^C")
    thread.join(2)
    assert not thread.is_alive(), "cancel() must interrupt the backoff sleep at once"
    err = box.get("error")
    assert isinstance(err, Canceled) and "operator pressed ^C" in str(err)
    assert len(seen) == 2, "no attempt after cancel"


def test_retry_gives_up_at_once_when_the_next_wait_would_pass_the_deadline(virtual_clock: VirtualClock) -> None:
    ctx = background(virtual_clock).with_timeout(3)
    seen, fn = flaky(100, ServiceUnavailable("overloaded"))
    policy = RetryPolicy(initial=1.0, factor=2, jitter=0, max_attempts=None)
    thread, box = run_in_thread(lambda: policy.run(ctx, fn))  # type: ignore[arg-type]
    wait_for_sleepers(virtual_clock)
    virtual_clock.advance(1)  # slept 1 s; attempt 2 fails; the next wait (2 s) would reach t=3
    thread.join(2)
    err = box.get("error")
    assert isinstance(err, DeadlineExceeded), err
    assert isinstance(err.__cause__, ServiceUnavailable), "the last failure is kept as the cause"
    assert len(seen) == 2 and virtual_clock.monotonic() - (ctx.deadline or 0) < 0


def test_each_attempt_gets_its_own_timeout(virtual_clock: VirtualClock) -> None:
    ctx = background(virtual_clock)
    release = threading.Event()

    def slow_then_fast(actx: Context) -> str:
        if not release.is_set():
            release.set()
            return call(actx, threading.Event().wait)  # hangs until the attempt times out
        return "second attempt"

    policy = RetryPolicy(initial=0.5, jitter=0, attempt_timeout=2)
    thread, box = run_in_thread(lambda: policy.run(ctx, slow_then_fast))
    wait_for_sleepers(virtual_clock)
    virtual_clock.advance(2)  # attempt 1 hits its 2 s timeout
    wait_for_sleepers(virtual_clock)
    virtual_clock.advance(0.5)  # the backoff
    thread.join(2)
    assert box.get("result") == "second attempt"


def test_call_abandons_a_blocked_call_at_the_deadline(virtual_clock: VirtualClock) -> None:
    ctx = background(virtual_clock).with_timeout(5)
    never = threading.Event()
    thread, box = run_in_thread(lambda: call(ctx, never.wait))
    wait_for_sleepers(virtual_clock)
    virtual_clock.advance(5)
    thread.join(2)
    assert isinstance(box.get("error"), DeadlineExceeded)
    never.set()
    with pytest.raises(Canceled):
        ended = background().with_cancel()
        ended.cancel()
        call(ended, lambda: "never runs")
    assert call(background(), lambda x: x * 2, 21) == 42


class ScriptedWatch:
    """A watch that yields events fed to it and ends when stopped, like a backend's stream."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._events: list[dict[str, object]] = []
        self._stopped = False

    def feed(self, event: dict[str, object]) -> None:
        with self._cond:
            self._events.append(event)
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def __iter__(self):  # type: ignore[no-untyped-def]
        while True:
            with self._cond:
                while not self._events and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                event = self._events.pop(0)
            yield event


def test_a_deadline_that_expires_during_a_watch(virtual_clock: VirtualClock) -> None:
    watch = ScriptedWatch()
    ctx = background(virtual_clock).with_timeout(30)
    got: list[object] = []
    thread, box = run_in_thread(lambda: [got.append(e) for e in watch_events(ctx, watch)])  # type: ignore[arg-type]
    watch.feed({"type": "ADDED", "object": {"metadata": {"name": "a"}}})
    eventually(lambda: len(got) == 1, what="the first event")
    virtual_clock.advance(30)
    thread.join(2)
    assert not thread.is_alive(), "the deadline must stop a watch that has nothing to say"
    assert isinstance(box.get("error"), DeadlineExceeded) and len(got) == 1


# -- applied to a cluster: binding and watching ------------------------------------------------------


def test_a_deadline_that_expires_during_a_cluster_watch(cluster, virtual_clock: VirtualClock) -> None:  # type: ignore[no-untyped-def]
    from minisched.objects import make_pod

    listed = cluster.list("pods", "default")
    watch = cluster.watch("pods", "default", resource_version=listed["metadata"]["resourceVersion"])
    ctx = background(virtual_clock).with_timeout(30)
    got: list[str] = []
    thread, box = run_in_thread(
        lambda: [got.append(e["object"]["metadata"]["name"]) for e in watch_events(ctx, watch)]
    )
    cluster.create("pods", make_pod("deadline-watch"))
    eventually(lambda: got == ["deadline-watch"], what="the ADDED event")
    virtual_clock.advance(30)
    thread.join(5)
    assert not thread.is_alive() and isinstance(box.get("error"), DeadlineExceeded)
    cluster.delete("pods", "deadline-watch", "default", grace_period_seconds=0)


class LostReplies:
    """A cluster whose first `n` binds take effect but whose replies are lost (a timeout)."""

    def __init__(self, cluster, n: int) -> None:  # type: ignore[no-untyped-def]
        self._cluster, self.lost = cluster, n

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._cluster, name)

    def bind(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        self._cluster.bind(*args, **kwargs)
        if self.lost > 0:
            self.lost -= 1
            from minisched.errors import Timeout

            raise Timeout("the reply to POST pods/binding never arrived")


def test_bind_pod_retries_through_server_errors(embedded_cluster, virtual_clock: VirtualClock) -> None:  # type: ignore[no-untyped-def]
    from minisched.deadline import bind_pod
    from minisched.objects import make_pod

    embedded_cluster.create("pods", make_pod("web"))
    embedded_cluster.faults.fail_next(2, verbs={"bind"})
    policy = RetryPolicy(initial=0.0, jitter=0, max_attempts=5)
    bind_pod(background(virtual_clock), embedded_cluster, "default", "web", "n1", policy=policy)
    assert embedded_cluster.get("pods", "web", "default")["spec"]["nodeName"] == "n1"


def test_a_bind_whose_reply_was_lost_counts_as_done(embedded_cluster, virtual_clock: VirtualClock) -> None:  # type: ignore[no-untyped-def]
    from minisched.deadline import bind_pod
    from minisched.objects import make_pod

    embedded_cluster.create("pods", make_pod("web"))
    flaky_link = LostReplies(embedded_cluster, 1)
    policy = RetryPolicy(initial=0.0, jitter=0, max_attempts=3)
    bind_pod(background(virtual_clock), flaky_link, "default", "web", "n1", policy=policy)  # type: ignore[arg-type]
    assert embedded_cluster.get("pods", "web", "default")["spec"]["nodeName"] == "n1"
    # A pod someone else bound elsewhere is a real conflict.
    embedded_cluster.create("pods", make_pod("db"))
    embedded_cluster.bind("default", "db", "n2")
    with pytest.raises(Conflict):
        bind_pod(background(virtual_clock), embedded_cluster, "default", "db", "n1", policy=policy)
