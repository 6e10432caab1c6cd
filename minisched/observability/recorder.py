"""The scheduler's decisions, written twice: a JSON log line and an event in the event log.

`DecisionRecorder` has one method per decision. Each appends an event for the pod (the aggregate)
to an `EventLog` and logs the same fact as structured JSON, both under the current correlation
id (one per scheduling attempt, set with `logging.correlation`), so a log line can be followed to
the event and back.

The events record facts that already happened (the API server accepted the binding, a filter
rejected every node), so on a `VersionConflict` (another writer appended to the same pod first,
e.g. a second scheduler replica) the recorder re-reads the version and appends again: a fact does
not become false because someone else wrote first. A *command* log would instead re-decide.
"""

from __future__ import annotations

import logging
from typing import Any

from minisched.observability.eventlog import Event, EventLog, EventTypes, VersionConflict
from minisched.observability.logging import fields

__all__ = ["DecisionRecorder"]

_MESSAGES = {
    EventTypes.QUEUED: "Pod queued for scheduling",
    EventTypes.ATTEMPT_FAILED: "Scheduling attempt failed",
    EventTypes.SCHEDULED: "Successfully bound pod to node",
    EventTypes.BINDING_FAILED: "Binding failed",
    EventTypes.PREEMPTED: "Pod preempted",
    EventTypes.DELETED: "Pod deleted",
}


class DecisionRecorder:
    def __init__(self, log: EventLog, *, scheduler: str = "minisched", logger: logging.Logger | None = None,
                 max_conflict_retries: int = 10) -> None:
        self.log = log
        self.scheduler = scheduler
        self.logger = logger or logging.getLogger("minisched.decisions")
        self.max_conflict_retries = max_conflict_retries
        self.conflicts = 0  # how many appends had to be retried after a VersionConflict

    def queued(self, pod: str, **payload: Any) -> Event:
        return self._record(pod, EventTypes.QUEUED, payload)

    def attempt_failed(self, pod: str, reason: str, *, attempt: int | None = None, **payload: Any) -> Event:
        return self._record(pod, EventTypes.ATTEMPT_FAILED, {"reason": reason, "attempt": attempt, **payload})

    def scheduled(self, pod: str, node: str, *, attempt: int | None = None, **payload: Any) -> Event:
        return self._record(pod, EventTypes.SCHEDULED, {"node": node, "attempt": attempt, **payload})

    def binding_failed(self, pod: str, node: str, error: str, **payload: Any) -> Event:
        return self._record(pod, EventTypes.BINDING_FAILED, {"node": node, "error": error, **payload})

    def preempted(self, pod: str, *, by: str, node: str | None = None) -> Event:
        return self._record(pod, EventTypes.PREEMPTED, {"by": by, "node": node})

    def deleted(self, pod: str) -> Event:
        return self._record(pod, EventTypes.DELETED, {})

    def _record(self, pod: str, kind: str, payload: dict[str, Any]) -> Event:
        body = {k: v for k, v in payload.items() if v is not None}
        body["scheduler"] = self.scheduler
        for _ in range(self.max_conflict_retries + 1):
            try:
                event = self.log.append(pod, kind, body, expected_version=self.log.version(pod))
                break
            except VersionConflict:
                self.conflicts += 1
        else:
            raise VersionConflict(pod, self.log.version(pod) - 1, self.log.version(pod))
        level = logging.WARNING if kind in (EventTypes.ATTEMPT_FAILED, EventTypes.BINDING_FAILED) else logging.INFO
        self.logger.log(level, _MESSAGES[kind], extra=fields(
            pod=pod, eventId=event.event_id, version=event.version, **body))
        return event
