"""The API server's error messages, shaped exactly as kube-apiserver words them.

(k8s.io/apimachinery/pkg/api/errors: NewNotFound, NewAlreadyExists, NewConflict, NewInvalid.)
Code that prints an error from the embedded cluster prints what it would print against a real one.
"""

from __future__ import annotations

from minisched.errors import AlreadyExists, Cause, Conflict, Forbidden, Invalid, NotFound
from minisched.resources import Resource


def _details(resource: Resource, name: str) -> dict[str, str]:
    return {"name": name, "group": resource.group, "kind": resource.plural}


def not_found(resource: Resource, name: str) -> NotFound:
    return NotFound(f'{resource.group_resource} "{name}" not found', details=_details(resource, name))


def namespace_not_found(namespace: str) -> NotFound:
    return NotFound(f'namespaces "{namespace}" not found', details={"name": namespace, "kind": "namespaces"})


def already_exists(resource: Resource, name: str) -> AlreadyExists:
    return AlreadyExists(f'{resource.group_resource} "{name}" already exists', details=_details(resource, name))


def generate_name_conflict(resource: Resource, name: str) -> AlreadyExists:
    """A generated name that is taken (NewGenerateNameConflict, after RetryGenerateName's last try)."""
    return AlreadyExists(
        f'{resource.group_resource} "{name}" already exists, the server was not able to generate a unique '
        "name for the object",
        details={**_details(resource, name), "retryAfterSeconds": 1},
    )


def conflict(qualified_resource: str, name: str, why: str) -> Conflict:
    return Conflict(
        f'Operation cannot be fulfilled on {qualified_resource} "{name}": {why}',
        details={"name": name, "kind": qualified_resource},
    )


MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def stale(resource: Resource, name: str) -> Conflict:
    return conflict(resource.group_resource, name, MODIFIED)


def forbidden(resource: Resource, name: str, why: str) -> Forbidden:
    return Forbidden(f'{resource.group_resource} "{name}" is forbidden: {why}', details=_details(resource, name))


def required(field: str, detail: str = "") -> Cause:
    return Cause(field, "Required value" + (f": {detail}" if detail else ""), "FieldValueRequired")


def invalid_value(field: str, value: object, detail: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return Cause(field, f"Invalid value: {shown}: {detail}", "FieldValueInvalid")


def forbidden_field(field: str, detail: str) -> Cause:
    return Cause(field, f"Forbidden: {detail}", "FieldValueForbidden")


def not_supported(field: str, value: object, supported: list[str]) -> Cause:
    options = ", ".join(f'"{s}"' for s in supported)
    return Cause(field, f'Unsupported value: "{value}": supported values: {options}', "FieldValueNotSupported")


def invalid(kind: str, name: str, causes: list[Cause], group: str = "") -> Invalid:
    """422, with the aggregate message 'Pod "x" is invalid: [a: ..., b: ...]'."""
    parts = [f"{c.field}: {c.message}" for c in causes]
    text = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qualified_kind = f"{kind}.{group}" if group else kind
    return Invalid(
        f'{qualified_kind} "{name}" is invalid: {text}',
        causes=causes,
        details={"name": name, "group": group, "kind": kind},
    )
