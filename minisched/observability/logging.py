"""Structured JSON logs with a correlation id, on the standard library's `logging`.

Every record becomes one JSON object per line: time, level, logger, msg, the correlation id of the
work in progress, and any key/value fields, which is what klog's structured logging
(`klog.InfoS("msg", "pod", klog.KObj(pod), "node", node)`) prints as JSON with `--logging-format=json`.

The correlation id lives in a `contextvars.ContextVar`, so it follows the code that runs on behalf
of one pod (a scheduling attempt, its binding, its retries) without being passed around, and stays
separate between threads and asyncio tasks. Set it with `with correlation("pod-uid"):`.
Threads started inside do not inherit it: hand it over with `contextvars.copy_context().run`.

Usage:

    log = get_logger("minisched.scheduler")
    with correlation():                       # a fresh id, or correlation(pod_uid)
        log.info("Successfully bound pod", extra=fields(pod="default/web-1", node="node-2"))
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import IO, Any

from minisched.clock import Clock

__all__ = [
    "JsonFormatter",
    "configure",
    "correlation",
    "current_correlation_id",
    "fields",
    "get_logger",
]

_CORRELATION: contextvars.ContextVar[str | None] = contextvars.ContextVar("minisched_correlation_id", default=None)
_FIELDS_ATTR = "minisched_fields"


def current_correlation_id() -> str | None:
    return _CORRELATION.get()


@contextmanager
def correlation(correlation_id: str | None = None) -> Iterator[str]:
    """Within the block, log records (and event-log appends) carry this id; a new one if None."""
    cid = correlation_id or uuid.uuid4().hex[:16]
    token = _CORRELATION.set(cid)
    try:
        yield cid
    finally:
        _CORRELATION.reset(token)


def fields(**kv: Any) -> dict[str, Any]:
    """`extra=` for a log call: key/value fields that land in the JSON object as they are."""
    return {_FIELDS_ATTR: kv}


class JsonFormatter(logging.Formatter):
    """One JSON object per record. With a `clock`, times come from it (stable notebook output)."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__()
        self._clock = clock

    def format(self, record: logging.LogRecord) -> str:
        ts = self._clock.now() if self._clock is not None else record.created
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        cid = getattr(record, "correlation_id", None) or _CORRELATION.get()
        if cid:
            entry["correlationId"] = cid
        for key, value in (getattr(record, _FIELDS_ATTR, None) or {}).items():
            if key in entry:
                key = f"field.{key}"  # never let a field overwrite ts/level/msg
            entry[key] = value
        if record.exc_info:
            entry["err"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)


def configure(
    stream: IO[str] | None = None,
    *,
    level: int = logging.INFO,
    logger: str = "minisched",
    clock: Clock | None = None,
) -> logging.Handler:
    """Send `logger` (and its children) as JSON lines to `stream` (stderr by default).

    Replaces a handler installed by an earlier configure() call on the same logger, so running
    a notebook cell twice does not print every line twice. Returns the handler."""
    target = logging.getLogger(logger)
    for old in [h for h in target.handlers if getattr(h, "_minisched_json", False)]:
        target.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(clock))
    handler._minisched_json = True  # type: ignore[attr-defined]
    target.addHandler(handler)
    target.setLevel(level)
    target.propagate = False
    return handler
