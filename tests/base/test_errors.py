from __future__ import annotations

import pytest

from minisched import errors


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        ({"reason": "NotFound", "message": 'pods "x" not found', "code": 404}, None, errors.NotFound),
        ({"reason": "AlreadyExists", "code": 409}, None, errors.AlreadyExists),
        ({"reason": "Conflict", "code": 409}, None, errors.Conflict),
        ({"reason": "Expired", "code": 410}, None, errors.Expired),
        ({"reason": "Gone", "code": 410}, None, errors.Expired),
        ({"code": 410}, None, errors.Expired),
        ({"reason": "Invalid", "code": 422}, None, errors.Invalid),
        ({"reason": "Forbidden", "code": 403}, None, errors.Forbidden),
        ({}, 503, errors.ServiceUnavailable),
        ({"reason": "SomethingNew", "code": 418}, None, errors.ApiError),
    ],
)
def test_from_status_picks_the_matching_subclass(status, code, expected):
    err = errors.ApiError.from_status(status, code)
    assert type(err) is expected
    assert err.status == (status.get("code") or code)


def test_invalid_round_trips_its_field_causes():
    err = errors.Invalid(
        'Pod "x" is invalid', causes=[errors.Cause("spec.containers", "Required value", "FieldValueRequired")]
    )
    status = err.to_status()
    assert status["code"] == 422 and status["reason"] == "Invalid"
    back = errors.ApiError.from_status(status)
    assert isinstance(back, errors.Invalid)
    assert back.causes == err.causes
    assert "spec.containers: Required value" in str(back)


def test_predicates():
    assert errors.is_not_found(errors.NotFound("x"))
    assert errors.is_conflict(errors.AlreadyExists("x")) and errors.is_conflict(errors.Conflict("x"))
    assert not errors.is_conflict(errors.NotFound("x"))
    assert errors.is_expired(errors.Expired("x"))
