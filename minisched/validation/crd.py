"""Generate a CustomResourceDefinition (apiextensions.k8s.io/v1) from a pydantic model.

pydantic writes JSON Schema (draft 2020-12); the API server wants a *structural* OpenAPI v3.0
schema. The translation: inline every $ref, turn `anyOf: [X, null]` (an Optional field) into X,
`const` into a one-value enum, numeric exclusiveMinimum/Maximum into minimum + boolean flag, and
drop what a structural schema may not carry (title, $defs, additionalProperties: false beside
properties). Anything else that a structural schema cannot express raises `SchemaNotStructural`
rather than producing a CRD the server would refuse.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

Schema = dict[str, Any]

_DROP = frozenset({"title", "$defs", "examples"})
_KEEP = frozenset({
    "type", "description", "properties", "required", "items", "additionalProperties", "enum", "default",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "pattern", "minLength",
    "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "nullable", "format",
    "x-kubernetes-validations", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
})


class SchemaNotStructural(ValueError):
    """The model uses a JSON Schema construct the API server's structural schemas forbid."""


def structural_schema(model: type[BaseModel]) -> Schema:
    """The model's JSON schema (by alias) rewritten as a structural OpenAPI v3.0 schema."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Schema] = raw.get("$defs", {})
    return _convert(raw, defs, model.__name__)


def _resolve(node: Schema, defs: dict[str, Schema], where: str) -> Schema:
    ref = node.get("$ref")
    if ref is None:
        return node
    name = ref.rsplit("/", 1)[-1]
    if name not in defs:
        raise SchemaNotStructural(f"{where}: unresolvable $ref {ref}")
    merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
    return _resolve(merged, defs, where)


def _convert(node: Schema, defs: dict[str, Schema], where: str, depth: int = 0) -> Schema:
    if depth > 32:
        raise SchemaNotStructural(f"{where}: recursive model; CRD schemas cannot recurse")
    node = _resolve(node, defs, where)
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        if len(branches) != 1 or len(branches) == len(node["anyOf"]):
            raise SchemaNotStructural(f"{where}: anyOf other than Optional[X] has no structural form")
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        node = {**_resolve(branches[0], defs, where), **rest}
        if node.get("default", 0) is None:
            del node["default"]  # None means "absent", not a value to default to
    out: Schema = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key == "properties":
            out[key] = {name: _convert(child, defs, f"{where}.{name}", depth + 1) for name, child in value.items()}
        elif key == "items":
            out[key] = _convert(value, defs, f"{where}[]", depth + 1)
        elif key == "additionalProperties":
            if isinstance(value, dict):
                out[key] = _convert(value, defs, f"{where}{{}}", depth + 1)
            elif value is True:
                out["x-kubernetes-preserve-unknown-fields"] = True
            # False: unknown fields are pruned by the server anyway, and the key is not allowed with properties
        elif key in _KEEP:
            out[key] = value
        else:
            raise SchemaNotStructural(f"{where}: JSON Schema keyword {key!r} has no CRD equivalent")
    if "type" not in out and not out.get("x-kubernetes-int-or-string"):
        raise SchemaNotStructural(f"{where}: every node of a structural schema needs a type")
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True  # e.g. dict[str, Any]
    return out


def crd_for(
    spec: type[BaseModel],
    *,
    group: str,
    version: str,
    kind: str,
    plural: str,
    singular: str | None = None,
    short_names: list[str] | None = None,
    scope: str = "Namespaced",
    status: type[BaseModel] | None = None,
    printer_columns: list[dict[str, str]] | None = None,
    description: str = "",
) -> dict[str, Any]:
    """A CustomResourceDefinition serving one version whose spec (and status) schemas come from the
    given models. Apply it with cluster.create(CRDS, crd)."""
    properties: Schema = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": structural_schema(spec),
    }
    root: Schema = {"type": "object", "properties": properties, "required": ["spec"]}
    if description:
        root["description"] = description
    served: dict[str, Any] = {"name": version, "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": root}}
    if status is not None:
        properties["status"] = structural_schema(status)
        served["subresources"] = {"status": {}}
    if printer_columns:
        served["additionalPrinterColumns"] = printer_columns
    names: dict[str, Any] = {"plural": plural, "singular": singular or kind.lower(), "kind": kind,
                             "listKind": f"{kind}List"}
    if short_names:
        names["shortNames"] = list(short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": scope, "names": names, "versions": [served]},
    }
