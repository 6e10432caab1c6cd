"""Typed resource models (pydantic) that validate client-side exactly what the CRD schema enforces.

A model is the single source of truth: `minisched.validation.crd` generates the CustomResourceDefinition's
OpenAPI schema from it, and the same model validates objects before they are sent. Rules that
OpenAPI cannot say (cross-field checks) are declared once, as CEL, with `cel_rules(...)`: they go
into the schema as x-kubernetes-validations for the server, and `ResourceModel` evaluates them
client-side with minisched's CEL subset.

Conventions, so that both layers agree:
- strict types: "3" is not an integer (the server says "must be of type integer");
- camelCase JSON names (`max_size` is "maxSize"), snake_case Python attributes;
- unknown fields are ignored, as the server prunes them;
- regular expressions use only syntax that means the same in Go's RE2 and pydantic's Rust engine:
  [0-9] rather than \\d (which is Unicode-aware in Rust), no look-around, no back-references.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from minisched.errors import Cause, Invalid
from minisched.validation.cel import CelError, CelUnsupported, compile_rule
from minisched.validation.openapi import (
    BLOCKING,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    TYPE_INVALID,
    rules_not_checked,
)

RULES_KEY = "x-kubernetes-validations"


def cel_rules(*rules: dict[str, str], **config: Any) -> ConfigDict:
    """Model config declaring CEL rules on the model's object: {"rule", "message", "fieldPath"?}."""
    for rule in rules:
        compile_rule(rule["rule"])  # fail at import time on a rule outside the subset
    return ConfigDict(json_schema_extra={RULES_KEY: [dict(r) for r in rules]}, **config)  # type: ignore[typeddict-item]


class ResourceModel(BaseModel):
    """Base of every model that becomes part of a CRD schema."""

    model_config = ConfigDict(
        strict=True, alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_nulls(cls, data: Any) -> Any:
        # The server prunes null from non-nullable fields before defaulting: null means "absent".
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @model_validator(mode="after")
    def _check_cel_rules(self) -> ResourceModel:
        extra = self.model_config.get("json_schema_extra")
        rules = extra.get(RULES_KEY, []) if isinstance(extra, dict) else []
        if not rules:
            return self
        value = self.model_dump(by_alias=True, exclude_none=True)
        for rule in rules:  # type: ignore[union-attr]
            assert isinstance(rule, dict)
            try:
                ok = compile_rule(str(rule["rule"])).evaluate(value)
            except CelUnsupported:
                continue
            except CelError as err:
                ok, rule = False, {**rule, "message": str(err)}
            if ok is not True:
                raise PydanticCustomError(
                    "cel_rule",
                    "{message}",
                    {"message": str(rule.get("message") or f"failed rule: {rule['rule']}"),
                     "field_path": str(rule.get("fieldPath", ""))},
                )
        return self


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


def has_rules(model: type[BaseModel]) -> bool:
    """Whether the model (or a model inside it) declares CEL rules."""
    return RULES_KEY in json.dumps(model.model_json_schema())


def causes_of(error: ValidationError, prefix: str = "", *, rules: bool = True) -> list[Cause]:
    """One Cause per pydantic error, with the server's field path and reason.

    As on the server, CEL rule failures are not reported beside a blocking error (wrong type,
    missing, unsupported value, too long, too many): that error and a "rules not checked" cause are."""
    causes: list[Cause] = []
    for e in error.errors():
        loc = tuple(e["loc"])
        path = field_path(loc)
        ctx = e.get("ctx") or {}
        if e["type"] == "cel_rule" and ctx.get("field_path"):
            path += str(ctx["field_path"])
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        kind = str(e["type"])
        reason = _REASONS.get(kind) or (TYPE_INVALID if kind.endswith("_type") else INVALID)
        causes.append(Cause(path, "Required value" if reason == REQUIRED else str(e["msg"]), reason))
    if rules and any(c.reason in BLOCKING for c in causes):
        rule_failures = {id(c) for c, e in zip(causes, error.errors(), strict=True) if e["type"] == "cel_rule"}
        causes = [c for c in causes if id(c) not in rule_failures] + [rules_not_checked()]
    return causes


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
