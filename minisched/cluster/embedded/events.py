"""Events are stored once and served as core/v1 Event and events.k8s.io/v1 Event.

The real server keeps one storage for both and converts field names between them
(pkg/apis/events/v1/conversion.go); so does the embedded cluster: an event written through one API
is read, listed and watched through the other.
"""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]

# core/v1 field -> events.k8s.io/v1 field
_RENAMES = {
    "involvedObject": "regarding",
    "message": "note",
    "reportingComponent": "reportingController",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
}
_BACK = {v: k for k, v in _RENAMES.items()}


def core_to_events_v1(event: Object) -> Object:
    """A stored (core/v1) event as events.k8s.io/v1. Shallow: shares nested values with `event`."""
    out = {_RENAMES.get(k, k): v for k, v in event.items()}
    out["apiVersion"] = "events.k8s.io/v1"
    out["kind"] = "Event"
    return out


def events_v1_to_core(event: Object) -> Object:
    out = {_BACK.get(k, k): v for k, v in event.items()}
    out["apiVersion"] = "v1"
    out["kind"] = "Event"
    return out
