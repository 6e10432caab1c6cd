"""One error type for both backends, shaped like the API server's Status object.

client-go code branches on `errors.IsNotFound(err)`, `IsConflict`, `IsGone`...; minisched code
branches on the subclasses below, and both backends raise exactly these, so code written against
the embedded cluster behaves the same against a real one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One field-level cause of an Invalid (422) error, as in Status.details.causes."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


class ApiError(Exception):
    """An API call failed. `status` is the HTTP code, `reason` the Status reason."""

    status: int = 500
    reason: str = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str | None = None,
        causes: list[Cause] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if reason is not None:
            self.reason = reason
        self.causes: list[Cause] = list(causes or [])
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        text = f"{self.status} {self.reason}: {self.message}"
        if self.causes:
            text += " (" + "; ".join(f"{c.field}: {c.message}" for c in self.causes) + ")"
        return text

    def to_status(self) -> dict[str, Any]:
        """The metav1.Status JSON the API server would return for this error."""
        details = dict(self.details)
        if self.causes:
            details["causes"] = [
                {"field": c.field, "message": c.message, "reason": c.reason} for c in self.causes
            ]
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.status,
        }
        if details:
            status["details"] = details
        return status

    @classmethod
    def from_status(cls, status: dict[str, Any], http_status: int | None = None) -> ApiError:
        """Build the matching subclass from a metav1.Status body (real backend, watch ERROR events)."""
        code = int(status.get("code") or http_status or 500)
        reason = str(status.get("reason") or "")
        message = str(status.get("message") or reason or f"HTTP {code}")
        details = dict(status.get("details") or {})
        causes = [
            Cause(field=c.get("field", ""), message=c.get("message", ""), reason=c.get("reason", ""))
            for c in details.pop("causes", []) or []
        ]
        klass = _BY_REASON.get(reason) or _BY_STATUS.get(code) or ApiError
        return klass(message, status=code, reason=reason or klass.reason, causes=causes, details=details)


class BadRequest(ApiError):
    status = 400
    reason = "BadRequest"


class Unauthorized(ApiError):
    status = 401
    reason = "Unauthorized"


class Forbidden(ApiError):
    status = 403
    reason = "Forbidden"


class NotFound(ApiError):
    status = 404
    reason = "NotFound"


class MethodNotAllowed(ApiError):
    status = 405
    reason = "MethodNotAllowed"


class AlreadyExists(ApiError):
    status = 409
    reason = "AlreadyExists"


class Conflict(ApiError):
    status = 409
    reason = "Conflict"


class Expired(ApiError):
    """410 Gone: the requested resourceVersion is older than the history the server keeps."""

    status = 410
    reason = "Expired"


class UnsupportedMediaType(ApiError):
    """415: the server does not take this body's format here (a strategic merge patch of a custom
    resource)."""

    status = 415
    reason = "UnsupportedMediaType"


class Invalid(ApiError):
    status = 422
    reason = "Invalid"


class TooManyRequests(ApiError):
    status = 429
    reason = "TooManyRequests"


class InternalError(ApiError):
    status = 500
    reason = "InternalError"


class ServiceUnavailable(ApiError):
    status = 503
    reason = "ServiceUnavailable"


class Timeout(ApiError):
    status = 504
    reason = "Timeout"


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequest,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "NotFound": NotFound,
    "MethodNotAllowed": MethodNotAllowed,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Expired": Expired,
    "Gone": Expired,
    "UnsupportedMediaType": UnsupportedMediaType,
    "Invalid": Invalid,
    "TooManyRequests": TooManyRequests,
    "InternalError": InternalError,
    "ServiceUnavailable": ServiceUnavailable,
    "Timeout": Timeout,
}
_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Expired,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
    500: InternalError,
    503: ServiceUnavailable,
    504: Timeout,
}


def is_not_found(err: BaseException) -> bool:
    return isinstance(err, NotFound)


def is_conflict(err: BaseException) -> bool:
    """True for 409 Conflict and 409 AlreadyExists, like client-go's IsConflict||IsAlreadyExists."""
    return isinstance(err, Conflict | AlreadyExists)


def is_expired(err: BaseException) -> bool:
    return isinstance(err, Expired)
