"""§3.1: typed resource models validated client-side, and the CRDs generated from them.

- `model`: ResourceModel (pydantic, strict, camelCase), `cel_rules`, `validate_object`, `parse_object`;
- `crd`: `crd_for(model, ...)`, the CustomResourceDefinition whose schema is generated from the model;
- `openapi`: what the API server does with that schema (prune, default, validate -> 422 causes),
  for the embedded cluster: `admit_custom_object(obj, crd, old=None)`;
- `cel`: the small CEL subset the embedded cluster evaluates x-kubernetes-validations with;
- `database`: the book's Database resource; `scheduling_policy`: the SchedulingPolicy resource.
"""

from minisched.validation.crd import SchemaNotStructural, crd_for, structural_schema
from minisched.validation.model import ResourceModel, cel_rules, parse_object, validate_object
from minisched.validation.openapi import (
    admit_custom_object,
    apply_defaults,
    prune,
    validate,
    validate_custom_object,
)

__all__ = [
    "ResourceModel",
    "SchemaNotStructural",
    "admit_custom_object",
    "apply_defaults",
    "cel_rules",
    "crd_for",
    "parse_object",
    "prune",
    "structural_schema",
    "validate",
    "validate_custom_object",
    "validate_object",
]
