"""Typed resource models (pydantic) that validate client-side exactly what the CRD schema enforces.

A model is the single source of truth: `minisched.validation.crd` generates the CustomResourceDefinition's
OpenAPI schema from it, and the same model validates objects before they are sent. Rules that
OpenAPI cannot say (cross-field checks) are declared once, as CEL, with `cel_rules(...)`: they go
into the schema as x-kubernetes-validations for the server, and `ResourceModel` evaluates them
client-side with minisched's CEL subset.

Conventions, so that both layers agree:
- strict types: "3" is not an integer (the server says "must be of type integer"), but 3.0 is, as
  on the server;
- camelCase JSON names (`max_size` is "maxSize"), snake_case Python attributes;
- unknown fields are ignored, as the server prunes them;
- regular expressions use only syntax that means the same in Go's RE2 and pydantic's Rust engine:
  [0-9] rather than \\d (which is Unicode-aware in Rust), no look-around, no back-references.
"""

from __future__ import annotations

import contextlib
import json
from functools import lru_cache
from typing import Any

import pydantic_core
from pydantic import BaseModel, ConfigDict, ModelWrapValidatorHandler, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from minisched.errors import Cause, Invalid
from minisched.validation.cel import CelError, CelUnsupported, compile_rule, compiled
from minisched.validation.crd import structural_schema
from minisched.validation.openapi import (
    BLOCKING,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    TYPE_INVALID,
    apply_defaults,
    integral,
    rules_not_checked,
)

RULES_KEY = "x-kubernetes-validations"


def cel_rules(*rules: dict[str, str], **config: Any) -> ConfigDict:
    """Model config declaring CEL rules on the model's object: {"rule", "message", "fieldPath"?}.

    A rule minisched's CEL subset can parse is enforced client-side too; one outside the subset
    (a macro such as all(), a ternary) is accepted but enforced by the server only. A rule the
    subset finds malformed fails here, at import time, rather than when the CRD is applied."""
    for rule in rules:
        with contextlib.suppress(CelUnsupported):
            compile_rule(rule["rule"])
    return ConfigDict(json_schema_extra={RULES_KEY: [dict(r) for r in rules]}, **config)  # type: ignore[typeddict-item]


class ResourceModel(BaseModel):
    """Base of every model that becomes part of a CRD schema."""

    model_config = ConfigDict(
        strict=True, alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True,
    )

    @model_validator(mode="wrap")
    @classmethod
    def _as_the_server_validates(cls, data: Any, handler: ModelWrapValidatorHandler[ResourceModel]) -> ResourceModel:
        """Read the input as the server does, validate the fields, then run the CEL rules on the
        object with defaults applied, as the server does: also when a field failed, unless that
        failure is a blocking one (wrong type, missing, ...)."""
        if isinstance(data, dict):
            # Null in a non-nullable field means "absent"; an integral JSON number is an integer.
            data = {k: integral(v) for k, v in data.items() if v is not None}
        rules = _rules_of(cls)
        if not rules:
            return handler(data)
        failure: ValidationError | None = None
        try:
            model = handler(data)
            value: Any = model.model_dump(by_alias=True, exclude_none=True)
        except ValidationError as err:
            if not isinstance(data, dict) or any(_reason_of(e) in BLOCKING for e in err.errors()):
                raise
            failure, value = err, apply_defaults(data, _schema_of(cls))
        broken = _broken_rules(rules, value, data)
        if not broken and failure is None:
            return model
        details = [] if failure is None else [_detail(e) for e in failure.errors()]
        raise ValidationError.from_exception_data(cls.__name__, details + broken)


def _rules_of(model: type[BaseModel]) -> list[dict[str, Any]]:
    extra = model.model_config.get("json_schema_extra")
    rules = extra.get(RULES_KEY, []) if isinstance(extra, dict) else []
    return [dict(r) for r in rules if isinstance(r, dict)]  # type: ignore[union-attr]


@lru_cache(maxsize=64)
def _schema_of(model: type[ResourceModel]) -> dict[str, Any]:
    return structural_schema(model)


def _broken_rules(rules: list[dict[str, Any]], value: Any, data: Any) -> list[InitErrorDetails]:
    """One error per rule that is false ("cel_rule", at the rule's fieldPath) or that could not
    be evaluated ("cel_error", at the object, worded as the server words it)."""
    out: list[InitErrorDetails] = []
    for rule in rules:
        message = str(rule.get("message") or f"failed rule: {rule['rule']}")
        try:
            ok = compiled(str(rule["rule"])).evaluate(value)
        except CelUnsupported:
            continue  # enforced by the server only
        except CelError as err:
            error = PydanticCustomError("cel_error", "{error} evaluating rule: {message}",
                                        {"error": str(err), "message": message})
            out.append(InitErrorDetails(type=error, loc=(), input=data))
            continue
        if ok is not True:
            error = PydanticCustomError("cel_rule", "{message}",
                                        {"message": message, "field_path": str(rule.get("fieldPath", ""))})
            out.append(InitErrorDetails(type=error, loc=(), input=data))
    return out


def _detail(e: Any) -> InitErrorDetails:
    """A reported error turned back into one that can be raised again (custom types rebuilt)."""
    kind = str(e["type"])
    ctx = dict(e.get("ctx") or {})
    if kind in ("cel_rule", "cel_error", "value_error") or kind not in _BUILTIN_TYPES:
        error = PydanticCustomError(kind, "{message}", {**ctx, "message": str(e["msg"])})
        return InitErrorDetails(type=error, loc=tuple(e["loc"]), input=e.get("input"))
    return InitErrorDetails(type=kind, loc=tuple(e["loc"]), input=e.get("input"), ctx=ctx)


def field_path(loc: tuple[int | str, ...]) -> str:
    """pydantic's error location as the API server's field path: ("spec", "items", 2) -> spec.items[2]."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


_REASONS = {
    "missing": REQUIRED,
    "literal_error": NOT_SUPPORTED,
    "enum": NOT_SUPPORTED,
    "string_too_long": TOO_LONG,
    "too_long": TOO_MANY,
}


CEL_RULE = "minisched:CELRule"
_BUILTIN_TYPES = frozenset(pydantic_core.core_schema.ErrorType.__args__)  # type: ignore[attr-defined]


def _reason_of(e: Any) -> str:
    """The API server's reason for a pydantic error."""
    kind = str(e["type"])
    return _REASONS.get(kind) or (TYPE_INVALID if kind.endswith("_type") else INVALID)


@lru_cache(maxsize=64)
def has_rules(model: type[BaseModel]) -> bool:
    """Whether the model (or a model inside it) declares CEL rules."""
    return RULES_KEY in json.dumps(model.model_json_schema())


def causes_of(error: ValidationError, prefix: str = "", *, rules: bool = True) -> list[Cause]:
    """One Cause per pydantic error, with the server's field path and reason.

    As on the server, CEL rule failures are not reported beside a blocking error (wrong type,
    missing, unsupported value, too long, too many): that error and a "rules not checked" cause are."""
    causes: list[Cause] = []
    for e in error.errors():
        kind = str(e["type"])
        loc = tuple(e["loc"])
        path = field_path(loc)
        ctx = e.get("ctx") or {}
        if kind == "cel_rule" and ctx.get("field_path"):
            path += str(ctx["field_path"])
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        kind = str(e["type"])
        reason = _reason_of(e)
        if kind == "literal_error" and not isinstance(e.get("input"), str):
            # The server reports a wrong type and then the enum (our Literals are strings).
            causes.append(Cause(path, f"must be a string: {e.get('input')!r}", TYPE_INVALID))
        if kind in ("cel_rule", "cel_error"):
            reason = CEL_RULE  # marked until we know whether a blocking error hides the rules
        causes.append(Cause(path, "Required value" if reason == REQUIRED else str(e["msg"]), reason))
    if rules and any(c.reason in BLOCKING for c in causes):
        causes = [c for c in causes if c.reason != CEL_RULE] + [rules_not_checked()]
    return [Cause(c.field, c.message, INVALID) if c.reason == CEL_RULE else c for c in causes]


def validate_object(model: type[ResourceModel], obj: dict[str, Any], *, prefix: str = "") -> list[Cause]:
    """The client-side verdict on `obj`: empty when valid, else one Cause per problem."""
    try:
        model.model_validate(obj)
    except ValidationError as err:
        return causes_of(err, prefix, rules=has_rules(model))
    return []


def parse_object(model: type[ResourceModel], obj: dict[str, Any], *, what: str = "object") -> ResourceModel:
    """`obj` as a model instance; raises minisched.errors.Invalid naming each bad field."""
    try:
        return model.model_validate(obj)
    except ValidationError as err:
        causes = causes_of(err, rules=has_rules(model))
        listed = "; ".join(f"{c.field}: {c.message}" for c in causes)
        raise Invalid(f"{what} is invalid (client-side): {listed}", causes=causes) from None
