"""§3.1: the CEL subset, the OpenAPI keywords the embedded validator covers, and CRD generation."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from minisched.validation.cel import CelError, CelUnsupported, compile_rule
from minisched.validation.crd import SchemaNotStructural, crd_for, structural_schema
from minisched.validation.model import ResourceModel, cel_rules, parse_object
from minisched.validation.openapi import apply_defaults, prune, validate


@pytest.mark.parametrize(
    ("rule", "value", "expected"),
    [
        ("self.a + 1 == 3", {"a": 2}, True),
        ("self.a * 2 > self.b || self.b == 0", {"a": 1, "b": 3}, False),
        ("-7 / 2 == -3 && -7 % 2 == -1", {}, True),  # CEL truncates toward zero, like Go
        ("size(self.name) <= 5 && self.name.startsWith('ab')", {"name": "abc"}, True),
        ("self.name.matches('^[a-z]+$') && self.name.contains('b')", {"name": "abc"}, True),
        ("'x' in self.tags && !('y' in self.tags)", {"tags": ["x"]}, True),
        ("has(self.b) ? true : false", None, None),  # unsupported, see below
        ("self.items[1] == 'b' && self.m['k'] == 1", {"items": ["a", "b"], "m": {"k": 1}}, True),
        ("isQuantity(self.q) && quantity(self.q).isGreaterThan(quantity('1Gi'))", {"q": "2Gi"}, True),
        ("!has(self.x) || self.x > 0", {}, True),
        ("self.missing > 0 || true", {}, True),  # an error on one side of || is absorbed by true
        ("1 == 1.0", {}, True),
        ("true == 1", {}, False),
    ],
)
def test_cel_subset(rule: str, value: Any, expected: bool | None) -> None:
    if expected is None:
        with pytest.raises(CelUnsupported):
            compile_rule(rule)
        return
    assert compile_rule(rule).evaluate(value) is expected


@pytest.mark.parametrize("rule", ["self.all(x, x > 0)", "self.x.exists(y, y)", "{'a': 1} == self",
                                  "timestamp(self.t) > 0", "request.user == 'x'"])
def test_cel_outside_the_subset_is_refused_when_compiled(rule: str) -> None:
    with pytest.raises(CelUnsupported):
        compile_rule(rule)


@pytest.mark.parametrize(("rule", "value", "message"), [
    ("self.missing == 1", {}, "no such key: missing"),
    ("self.a / 0 == 1", {"a": 1}, "division by zero"),
    ("self.a + 'x' == 1", {"a": 1}, "no such overload"),
    ("quantity('abc').isLessThan(quantity('1'))", {}, "quantities must match the regular expression"),
    ("quantity('+-1').isLessThan(quantity('1'))", {}, "unable to parse quantity's suffix"),
])
def test_cel_runtime_errors(rule: str, value: Any, message: str) -> None:
    with pytest.raises(CelError, match=message):
        compile_rule(rule).evaluate(value)


def test_cel_transition_rules_only_run_on_update() -> None:
    schema = {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]}
    assert validate("a", schema, "spec.x").ok
    assert validate("a", schema, "spec.x", old="a", has_old=True).ok
    causes = validate("b", schema, "spec.x", old="a", has_old=True).causes
    assert [(c.field, c.message) for c in causes] == [("spec.x", "Invalid value: immutable")]


def test_unsupported_rules_are_listed_not_enforced() -> None:
    schema = {"type": "array", "items": {"type": "integer"},
              "x-kubernetes-validations": [{"rule": "self.all(x, x > 0)"}]}
    result = validate([-1], schema, "spec.xs")
    assert result.ok and result.skipped_rules == ["spec.xs: self.all(x, x > 0)"]


def _fields(schema: dict[str, Any], value: Any) -> list[tuple[str, str]]:
    return [(c.field, c.reason) for c in validate(value, schema, "spec").causes]


def test_openapi_keywords() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1, "multipleOf": 0.25},
            "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "minLength": 2}},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3},
                       "maxProperties": 1},
            "port": {"x-kubernetes-int-or-string": True},
            "opt": {"type": "string", "nullable": True},
        },
    }
    assert _fields(schema, {"n": 0.5, "tags": ["ab"], "labels": {"a": "b"}, "port": "http", "opt": None}) == []
    assert _fields(schema, {"n": 0}) == [("spec.n", "FieldValueInvalid")]
    assert _fields(schema, {"n": 0.3}) == [("spec.n", "FieldValueInvalid")]
    assert _fields(schema, {"tags": []}) == [("spec.tags", "FieldValueInvalid")]
    assert _fields(schema, {"tags": ["ab", "cd", "ef"]}) == [("spec.tags", "FieldValueTooMany")]
    assert _fields(schema, {"tags": ["a"]}) == [("spec.tags[0]", "FieldValueInvalid")]
    assert _fields(schema, {"labels": {"a": "long"}}) == [("spec.labels[a]", "FieldValueTooLong")]
    assert _fields(schema, {"labels": {"a": "1", "b": "2"}}) == [("spec.labels", "FieldValueTooMany")]
    assert _fields(schema, {"port": 1.5}) == [("spec.port", "FieldValueTypeInvalid")]
    assert _fields(schema, {"n": "1"}) == [("spec.n", "FieldValueTypeInvalid")]


def test_defaults_and_pruning() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "integer", "default": 1},
        "inner": {"type": "object", "properties": {"b": {"type": "string", "default": "x"}}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    }}
    assert apply_defaults({"inner": {}}, schema) == {"a": 1, "inner": {"b": "x"}}
    pruned, dropped = prune({"a": None, "z": 1, "inner": {"q": 2}, "free": {"k": {"v": 1}}}, schema)
    assert pruned == {"inner": {}, "free": {"k": {"v": 1}}}
    assert dropped == ["z", "inner.q"]


class _Leaf(ResourceModel):
    model_config = cel_rules({"rule": "self.low <= self.high", "message": "low must not exceed high"})
    low: int = Field(ge=0)
    high: int


class _Spec(ResourceModel):
    leaves: list[_Leaf] = Field(default_factory=list, max_length=3)
    exact: float = Field(0, gt=0, lt=10)
    labels: dict[str, str] | None = None


def test_structural_schema_from_a_model() -> None:
    schema = structural_schema(_Spec)
    leaf = schema["properties"]["leaves"]["items"]
    assert leaf["x-kubernetes-validations"] == [{"rule": "self.low <= self.high", "message": "low must not exceed high"}]
    assert leaf["required"] == ["low", "high"] and "title" not in leaf
    assert schema["properties"]["exact"] == {"default": 0, "exclusiveMaximum": True, "exclusiveMinimum": True,
                                             "maximum": 10, "minimum": 0, "type": "number"}
    assert schema["properties"]["labels"] == {"additionalProperties": {"type": "string"}, "type": "object"}
    crd = crd_for(_Spec, group="example.dev", version="v1", kind="Thing", plural="things")
    assert crd["metadata"]["name"] == "things.example.dev"


def test_client_side_rule_failures_name_the_path() -> None:
    with pytest.raises(Exception) as info:
        parse_object(_Spec, {"leaves": [{"low": 0, "high": 1}, {"low": 5, "high": 1}]})
    assert [(c.field, c.message) for c in info.value.causes] == [("leaves[1]", "low must not exceed high")]


class _Union(ResourceModel):
    value: int | str


def test_non_structural_models_are_refused() -> None:
    with pytest.raises(SchemaNotStructural, match="anyOf"):
        structural_schema(_Union)


def test_rules_outside_the_subset_are_server_only_and_malformed_ones_fail_early() -> None:
    class _Listed(ResourceModel):
        model_config = cel_rules({"rule": "self.xs.all(x, x > 0)", "message": "positive"})
        xs: list[int]

    assert parse_object(_Listed, {"xs": [-1]})  # not checked client-side
    assert structural_schema(_Listed)["x-kubernetes-validations"][0]["rule"] == "self.xs.all(x, x > 0)"
    with pytest.raises(CelError):
        cel_rules({"rule": "self.a ==", "message": "broken"})
