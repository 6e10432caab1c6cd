"""Validate an object against a CRD's structural OpenAPI v3 schema, as the API server does.

The embedded cluster calls `validate_custom_object` on create and update of a custom resource, so
that it answers 422 Invalid with the same field paths as a real server. Covered keywords: type
(object, array, string, integer, number, boolean), nullable, required, properties,
additionalProperties (schema or bool), items, enum, minimum/maximum (+ exclusiveMinimum/Maximum as
booleans, OpenAPI v3.0 style), multipleOf, pattern, minLength/maxLength, minItems/maxItems,
minProperties/maxProperties, x-kubernetes-int-or-string, x-kubernetes-preserve-unknown-fields,
default (`apply_defaults`), pruning of unknown fields (`prune`) and x-kubernetes-validations rules in
the CEL subset of `minisched.validation.cel`. A rule outside that subset is NOT enforced here: it is
listed in `Result.skipped_rules` and only the real server enforces it.

Messages follow the API server's wording ("Required value", "Invalid value: 11: spec.replicas in
body should be less than or equal to 10"), field paths its "spec.replicas", "spec.items[2].name".
Not covered: format (the server checks only a few formats), allOf/anyOf/oneOf/not, listType/mapType
uniqueness, x-kubernetes-embedded-resource, ratcheting of unchanged invalid values on update.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from minisched.errors import Cause, Invalid
from minisched.validation.cel import CelError, CelUnsupported, compiled

Schema = dict[str, Any]
Object = dict[str, Any]

REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
TYPE_INVALID = "FieldValueTypeInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"

_JSON_TYPE = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


@dataclass
class Result:
    causes: list[Cause] = field(default_factory=list)
    skipped_rules: list[str] = field(default_factory=list)  # CEL outside the subset: server-only

    @property
    def ok(self) -> bool:
        return not self.causes


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _JSON_TYPE.get(type(value), type(value).__name__)


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, and 1 is 1.0."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def integral(value: Any) -> Any:
    """`value` with every integral float (3.0, 1e1) made an int, recursively: the server takes such
    a JSON number for an integer, so "replicas: 3.0" passes `type: integer` (2.5 does not)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral(v) for v in value]
    return value


def _shown(value: Any) -> str:
    """A value as the server prints it in "Invalid value: ...": JSON, objects and arrays by type name."""
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    return json.dumps(value, ensure_ascii=False)  # the server prints non-ASCII text as is


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    """`pattern` compiled to mean what it means to the server's Go RE2: there `$` is the end of the
    text, while Python's `$` also matches before a final newline, so a bare `$` becomes `\\Z`."""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "[":
            in_class = True
        elif ch == "]":
            in_class = False
        out.append("\\Z" if ch == "$" and not in_class else ch)
        i += 1
    return re.compile("".join(out))




def _type_ok(value: Any, schema: Schema) -> bool:
    wanted = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)
    if not wanted:
        return True
    actual = _json_type(value)
    if wanted == "number":
        return actual in ("number", "integer")
    return actual == wanted


# Errors after which the server does not run CEL rules: the object lacks the shape they assume
# (apiextensions-apiserver pkg/registry/customresource/strategy.go, hasBlockingErr).
BLOCKING = frozenset({NOT_SUPPORTED, REQUIRED, TOO_LONG, TOO_MANY, TYPE_INVALID})
RULES_NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; correct the existing errors to "
    "complete validation"
)


def validate(value: Any, schema: Schema, path: str = "", *, old: Any = None, has_old: bool = False) -> Result:
    """Every violation of `schema` by `value`; `path` is the field path of `value` ("spec").

    As on the server, the schema is checked first, and the CEL rules only when no blocking error
    (wrong type, missing, unsupported, too long or too many) was found."""
    result = Result()
    _validate(value, schema, path, result, old, has_old, False)
    if any(c.reason in BLOCKING for c in result.causes):
        if _has_rules(schema):
            result.causes.append(rules_not_checked())
        return result
    _validate(value, schema, path, result, old, has_old, True)
    return result


def rules_not_checked() -> Cause:
    """The cause the server adds when a blocking error kept it from running the CEL rules
    (field.Invalid(nil, nil, ...): hence the field "<nil>" and the value null)."""
    return Cause("<nil>", f"Invalid value: null: {RULES_NOT_CHECKED}", INVALID)


def _has_rules(schema: Any) -> bool:
    if isinstance(schema, dict):
        return bool(schema.get("x-kubernetes-validations")) or any(_has_rules(v) for v in schema.values())
    return False


def _validate(value: Any, schema: Schema, path: str, result: Result, old: Any, has_old: bool, rules: bool) -> None:
    """One walk: the schema's own keywords when `rules` is False, only the CEL rules when True."""
    add = (lambda cause: None) if rules else result.causes.append
    where = path or "<root>"
    if value is None:
        if not schema.get("nullable") and "type" in schema:
            add(Cause(path, f"Invalid value: \"null\": {where} in body must be of type {schema['type']}: \"null\"",
                      TYPE_INVALID))
        return
    type_ok = _type_ok(value, schema)
    if not type_ok:
        wanted = "integer or string" if schema.get("x-kubernetes-int-or-string") else schema["type"]
        add(Cause(path, f"Invalid value: \"{_json_type(value)}\": {where} in body must be of type {wanted}: "
                        f"\"{_json_type(value)}\"", TYPE_INVALID))
    if "enum" in schema and not any(_json_equal(value, v) for v in schema["enum"]):
        supported = ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
        add(Cause(path, f"Unsupported value: {_shown(value)}: supported values: {supported}", NOT_SUPPORTED))
    if not type_ok:
        return  # the other keywords apply to values of the right type only
    if isinstance(value, int | float) and not isinstance(value, bool) and not rules:
        _numeric(value, schema, path, where, result)
    if isinstance(value, str) and not rules:
        _string(value, schema, path, where, result)
    if isinstance(value, list):
        _array(value, schema, path, where, result, old, has_old, rules)
    if isinstance(value, dict):
        _object(value, schema, path, where, result, old, has_old, rules)
    if rules:
        _rules(value, schema, path, result, old, has_old)


def _numeric(value: float, schema: Schema, path: str, where: str, result: Result) -> None:
    add = result.causes.append
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") is True and value == low):
            relation = "greater than" if schema.get("exclusiveMinimum") is True else "greater than or equal to"
            add(Cause(path, f"Invalid value: {_shown(value)}: {where} in body should be {relation} {low}", INVALID))
    if "maximum" in schema:
        high = schema["maximum"]
        if value > high or (schema.get("exclusiveMaximum") is True and value == high):
            relation = "less than" if schema.get("exclusiveMaximum") is True else "less than or equal to"
            add(Cause(path, f"Invalid value: {_shown(value)}: {where} in body should be {relation} {high}", INVALID))
    step = schema.get("multipleOf")
    if step and (value / step) != int(value / step):
        add(Cause(path, f"Invalid value: {_shown(value)}: {where} in body should be a multiple of {step}", INVALID))


def _string(value: str, schema: Schema, path: str, where: str, result: Result) -> None:
    add = result.causes.append
    length = len(value)  # the server counts characters (runes) for minLength/maxLength
    if "maxLength" in schema and length > schema["maxLength"]:
        add(Cause(path, f"Too long: may not be more than {schema['maxLength']} bytes", TOO_LONG))
    if "minLength" in schema and length < schema["minLength"]:
        add(Cause(path, f"Invalid value: {_shown(value)}: {where} in body should be at least "
                        f"{schema['minLength']} chars long", INVALID))
    if "pattern" in schema and not _regex(schema["pattern"]).search(value):
        add(Cause(path, f"Invalid value: {_shown(value)}: {where} in body should match '{schema['pattern']}'",
                  INVALID))


def _array(value: list[Any], schema: Schema, path: str, where: str, result: Result, old: Any,
           has_old: bool, rules: bool) -> None:
    add = (lambda cause: None) if rules else result.causes.append
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        add(Cause(path, f"Too many: {len(value)}: must have at most {schema['maxItems']} items", TOO_MANY))
    if "minItems" in schema and len(value) < schema["minItems"]:
        add(Cause(path, f"Invalid value: {len(value)}: {where} in body should have at least "
                        f"{schema['minItems']} items", INVALID))
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            # Lists are not correlated by index for transition rules unless they are map-lists: no oldSelf.
            _validate(item, items, f"{path}[{i}]", result, None, False, rules)


def _object(value: Object, schema: Schema, path: str, where: str, result: Result, old: Any, has_old: bool,
            rules: bool) -> None:
    add = (lambda cause: None) if rules else result.causes.append
    properties: dict[str, Schema] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            add(Cause(_join(path, name), "Required value", REQUIRED))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        add(Cause(path, f"Too many: {len(value)}: must have at most {schema['maxProperties']} items", TOO_MANY))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        add(Cause(path, f"Invalid value: {len(value)}: {where} in body should have at least "
                        f"{schema['minProperties']} properties", INVALID))
    extra = schema.get("additionalProperties")
    old_map = old if has_old and isinstance(old, dict) else None
    for name, item in value.items():
        child = properties.get(name)
        if child is None and isinstance(extra, dict):
            child = extra
        if child is None:
            continue  # unknown fields are pruned, not rejected (see prune())
        child_path = f"{path}[{name}]" if name not in properties else _join(path, name)
        in_old = old_map is not None and name in old_map
        _validate(item, child, child_path, result, old_map.get(name) if old_map is not None else None, in_old,
                  rules)


def _rules(value: Any, schema: Schema, path: str, result: Result, old: Any, has_old: bool) -> None:
    for rule in schema.get("x-kubernetes-validations") or []:
        text = rule.get("rule", "")
        try:
            program = compiled(text)
        except CelUnsupported:
            result.skipped_rules.append(f"{path or '<root>'}: {text}")
            continue
        except CelError as err:
            result.causes.append(Cause(path, f"Invalid value: {_shown(value)}: compilation failed: {err}", INVALID))
            continue
        if program.uses_old_self and not has_old:
            continue  # a transition rule: only checked on update, when there is an old value
        rule_path = path + rule.get("fieldPath", "") if rule.get("fieldPath") else path
        message = rule.get("message") or f"failed rule: {text}"
        try:
            ok = program.evaluate(value, old, has_old=has_old)
        except CelError as err:
            # A rule that cannot be evaluated is reported at the object it is declared on.
            result.causes.append(Cause(path, f"Invalid value: {_shown(value)}: {err} evaluating rule: {message}",
                                       INVALID))
            continue
        if ok is not True:
            # The server leaves the value out of a rule's message: "Invalid value: <message>".
            result.causes.append(Cause(rule_path, f"Invalid value: {message}", rule.get("reason") or INVALID))


# --- defaulting and pruning --------------------------------------------------------------------

def apply_defaults(value: Any, schema: Schema) -> Any:
    """A copy of `value` with `default`s filled in where a property is absent, as the server does
    on create and update (and on read from storage)."""
    value = copy.deepcopy(value)
    _default(value, schema)
    return value


def _default(value: Any, schema: Schema) -> None:
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties") or {}
        for name, child in properties.items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
        for name, item in value.items():
            child_schema = properties.get(name)
            if child_schema is None and isinstance(schema.get("additionalProperties"), dict):
                child_schema = schema["additionalProperties"]
            if child_schema is not None:
                _default(item, child_schema)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(item, schema["items"])


def prune(value: Any, schema: Schema) -> tuple[Any, list[str]]:
    """A copy of `value` without the fields `schema` does not declare, and their paths: the server
    drops unknown fields of a structural schema silently (kubectl --validate=strict reports them).
    Nulls in non-nullable fields are dropped too (not listed), so that defaults apply to them."""
    dropped: list[str] = []
    return _prune(copy.deepcopy(value), schema, "", dropped), dropped


def _prune(value: Any, schema: Schema, path: str, dropped: list[str]) -> Any:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for name in list(value):
            child = properties.get(name)
            if child is None and isinstance(extra, dict):
                child = extra
            if child is None and extra is not True:
                dropped.append(_join(path, name))
                del value[name]
            elif child is not None and value[name] is None and not child.get("nullable"):
                del value[name]  # null in a non-nullable field means "absent": pruned, then defaulted
            elif child is not None:
                value[name] = _prune(value[name], child, _join(path, name), dropped)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune(item, schema["items"], f"{path}[{i}]", dropped) for i, item in enumerate(value)]
    return value


# --- custom objects ----------------------------------------------------------------------------

def version_schema(crd: Object, version: str) -> Schema:
    """The openAPIV3Schema of one served version of a CustomResourceDefinition."""
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("name") == version:
            return ((v.get("schema") or {}).get("openAPIV3Schema")) or {}
    raise ValueError(f"CustomResourceDefinition has no version {version!r}")


_META_SCHEMA_KEYS = ("apiVersion", "kind", "metadata")


def validate_custom_object(obj: Object, crd: Object, *, old: Object | None = None) -> Result:
    """Validate a custom object against the schema of its apiVersion's version in `crd`.

    apiVersion, kind and metadata are validated by the server's generic machinery, not the schema,
    so they are left out here. `old` is the stored object on update (for oldSelf rules)."""
    version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    schema = version_schema(crd, version)
    body = {k: v for k, v in obj.items() if k not in _META_SCHEMA_KEYS}
    properties = {k: v for k, v in (schema.get("properties") or {}).items() if k not in _META_SCHEMA_KEYS}
    trimmed = {**schema, "properties": properties,
               "required": [r for r in schema.get("required") or [] if r not in _META_SCHEMA_KEYS]}
    old_body = None if old is None else {k: v for k, v in old.items() if k not in _META_SCHEMA_KEYS}
    return validate(body, trimmed, "", old=old_body, has_old=old is not None)


def admit_custom_object(obj: Object, crd: Object, *, old: Object | None = None) -> Object:
    """What the API server stores for a create (old=None) or an update: integral floats read as
    integers, unknown fields pruned, defaults applied, then validated. Raises minisched.errors.Invalid (422) with one Cause per
    violation, worded as the server words it."""
    version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    schema = version_schema(crd, version)
    meta = {k: obj[k] for k in _META_SCHEMA_KEYS if k in obj}
    pruned, _ = prune(integral({k: v for k, v in obj.items() if k not in _META_SCHEMA_KEYS}), schema)
    stored = {**meta, **apply_defaults(pruned, schema)}
    result = validate_custom_object(stored, crd, old=old)
    if not result.ok:
        raise invalid_error(stored, crd, result.causes)
    return stored


def invalid_error(obj: Object, crd: Object, causes: list[Cause]) -> Invalid:
    """The 422 the server returns: 'Database.db.minisched.dev "x" is invalid: [spec.replicas: ...]'."""
    spec = crd.get("spec") or {}
    kind = (spec.get("names") or {}).get("kind", obj.get("kind", ""))
    group = spec.get("group", "")
    name = (obj.get("metadata") or {}).get("name", "")
    parts = [f"{c.field}: {c.message}" for c in causes]
    listed = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return Invalid(
        f'{kind}.{group} "{name}" is invalid: {listed}',
        causes=list(causes),
        details={"name": name, "group": group, "kind": kind},
    )
