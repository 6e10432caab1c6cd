"""§4.3 structured logs with correlation ids; the append-only event log and its projections."""

from __future__ import annotations

import io
import json
import sqlite3
import threading

import pytest

from minisched.clock import VirtualClock
from minisched.observability.eventlog import (
    EventLog,
    EventTypes,
    PodPlacements,
    VersionConflict,
    replay,
)
from minisched.observability.logging import configure, correlation, fields, get_logger


def test_json_logs_carry_the_correlation_id_and_fields(virtual_clock: VirtualClock) -> None:
    stream = io.StringIO()
    configure(stream, logger="minisched.test", clock=virtual_clock)
    configure(stream, logger="minisched.test", clock=virtual_clock)  # twice: still one handler
    log = get_logger("minisched.test.scheduler")
    with correlation("pod-uid-1") as cid:
        log.info("Successfully bound pod", extra=fields(pod="default/web", node="n1", msg="not me"))
    log.warning("outside")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 2
    assert lines[0] == {"ts": "2026-01-01T00:00:00.000Z", "level": "info", "logger": "minisched.test.scheduler",
                        "msg": "Successfully bound pod", "correlationId": cid, "pod": "default/web",
                        "node": "n1", "field.msg": "not me"}
    assert "correlationId" not in lines[1]


def test_correlation_ids_do_not_leak_between_threads() -> None:
    seen: dict[str, str | None] = {}
    from minisched.observability.logging import current_correlation_id

    def worker(name: str) -> None:
        with correlation(name):
            barrier.wait()
            seen[name] = current_correlation_id()

    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": "a", "b": "b"} and current_correlation_id() is None


def make_log(clock: VirtualClock, path: str = ":memory:") -> EventLog:
    return EventLog(path, clock=clock, id_factory=EventLog.sequential_ids())


def test_events_have_the_books_schema(virtual_clock: VirtualClock) -> None:
    log = make_log(virtual_clock)
    with correlation("c-1"):
        event = log.append("default/web", EventTypes.QUEUED, {"priority": 0}, expected_version=0)
    assert event.to_dict() == {
        "eventId": "evt_000001", "eventType": "PodQueued", "aggregateId": "default/web", "version": 1,
        "timestamp": "2026-01-01T00:00:00.000000Z", "payload": {"priority": 0}, "correlationId": "c-1",
    }


def test_optimistic_version_conflict(virtual_clock: VirtualClock) -> None:
    log = make_log(virtual_clock)
    log.append("default/web", EventTypes.QUEUED, expected_version=0)
    # Two writers both read version 1 and decide; the second to append loses.
    seen_a = seen_b = log.version("default/web")
    log.append("default/web", EventTypes.SCHEDULED, {"node": "n1"}, expected_version=seen_a)
    with pytest.raises(VersionConflict, match="expected version 1, but the log is at version 2") as err:
        log.append("default/web", EventTypes.SCHEDULED, {"node": "n2"}, expected_version=seen_b)
    assert (err.value.expected, err.value.actual) == (1, 2)
    assert [e.version for e in log.read("default/web")] == [1, 2], "the losing append left nothing behind"
    with pytest.raises(ValueError, match="unknown event type"):
        log.append("default/web", "PodTeleported", expected_version=2)


def test_concurrent_appenders_never_share_a_version(virtual_clock: VirtualClock) -> None:
    log = make_log(virtual_clock)
    conflicts = []

    def writer() -> None:
        for _ in range(50):
            while True:
                v = log.version("default/hot")
                try:
                    log.append("default/hot", EventTypes.ATTEMPT_FAILED, {"reason": "x"}, expected_version=v)
                    break
                except VersionConflict:
                    conflicts.append(v)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [e.version for e in log.read("default/hot")] == list(range(1, 201))


def test_the_log_is_append_only_even_through_sql(virtual_clock: VirtualClock, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "decisions.sqlite"
    with make_log(virtual_clock, str(path)) as log:
        log.append("default/web", EventTypes.QUEUED, expected_version=0)
    raw = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("UPDATE events SET payload = '{}'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM events")
    raw.close()
    with EventLog(path, clock=virtual_clock) as reopened:  # persisted: a new process sees it
        assert len(reopened) == 1 and reopened.version("default/web") == 1


def test_replay_rebuilds_the_live_projection(virtual_clock: VirtualClock) -> None:
    log = make_log(virtual_clock)
    live = PodPlacements()
    log.subscribe(live.apply)
    script = [
        ("default/a", EventTypes.QUEUED, {}),
        ("default/b", EventTypes.QUEUED, {}),
        ("default/a", EventTypes.ATTEMPT_FAILED, {"reason": "0/2 nodes are available: 2 Insufficient cpu."}),
        ("default/b", EventTypes.SCHEDULED, {"node": "n1"}),
        ("default/a", EventTypes.SCHEDULED, {"node": "n2"}),
        ("default/b", EventTypes.PREEMPTED, {"by": "default/c"}),
        ("default/c", EventTypes.SCHEDULED, {"node": "n1"}),
    ]
    for pod, kind, payload in script:
        virtual_clock.advance(0.5)
        log.append(pod, kind, payload, expected_version=log.version(pod))
    rebuilt = replay(log, PodPlacements())
    assert rebuilt == live
    assert replay(log, rebuilt) == live, "replaying the same events again changes nothing (idempotent)"
    assert live.bound() == {"default/a": "n2", "default/c": "n1"}
    assert live.pending() == ["default/b"]
    assert live.pods["default/a"].attempts == 2 and "Insufficient cpu" in (live.pods["default/a"].last_failure or "")


def test_a_projection_refuses_a_log_with_gaps_or_double_binds(virtual_clock: VirtualClock) -> None:
    log = make_log(virtual_clock)
    log.append("default/a", EventTypes.SCHEDULED, {"node": "n1"}, expected_version=0)
    log.append("default/a", EventTypes.SCHEDULED, {"node": "n2"}, expected_version=1)
    with pytest.raises(ValueError, match="scheduled twice"):
        replay(log, PodPlacements())
    events = log.read()
    with pytest.raises(ValueError, match="gap"):
        replay([events[1]], PodPlacements())
