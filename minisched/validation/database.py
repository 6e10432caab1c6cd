"""The book's §3.1 resource, `Database`, as a typed model and the CRD generated from it.

The book (Go, go-playground/validator tags):

    type DatabaseSpec struct {
        Replicas *int32 `json:"replicas,omitempty" validate:"min=1,max=10"`
        Version  string `json:"version" validate:"semver,required"`
        Storage  ResourceRequirements `json:"storage"`
    }

Here: replicas optional, 1..10, defaulting to 1; version required, a semantic version; storage
required, with a size and an optional maxSize that must not be smaller than size (a cross-field
rule, so CEL). One deviation, on purpose: the book says `semver` accepts "v1.22.0", but
go-playground's semver regex (like semver.org's) has no leading "v", so the book's own example
fails the book's own tag. minisched follows semver.org: "1.22.0" is valid, "v1.22.0" is not.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from minisched.errors import Cause
from minisched.resources import Resource
from minisched.validation.crd import crd_for
from minisched.validation.model import ResourceModel, cel_rules, validate_object

GROUP = "db.minisched.dev"
VERSION = "v1alpha1"
KIND = "Database"
PLURAL = "databases"

# semver.org's regular expression with \d spelled [0-9] (see minisched.validation.model).
_NUM = "(0|[1-9][0-9]*)"
_PRE = "(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
SEMVER_PATTERN = (
    f"^{_NUM}\\.{_NUM}\\.{_NUM}(-{_PRE}(\\.{_PRE})*)?(\\+[0-9a-zA-Z-]+(\\.[0-9a-zA-Z-]+)*)?$"
)
# The pattern the API server itself publishes for resource.Quantity.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


class DatabaseStorage(ResourceModel):
    model_config = cel_rules({
        "rule": "!has(self.maxSize) || quantity(self.maxSize).compareTo(quantity(self.size)) >= 0",
        "message": "maxSize must be at least size",
        "fieldPath": ".maxSize",
    })

    size: str = Field(pattern=QUANTITY_PATTERN, description="Requested volume size, e.g. 10Gi.")
    max_size: str | None = Field(None, pattern=QUANTITY_PATTERN, description="Largest size to grow to.")
    storage_class_name: str | None = Field(None, min_length=1, max_length=253)


class DatabaseSpec(ResourceModel):
    replicas: int = Field(1, ge=1, le=10, description="Number of instances (the book: min=1, max=10).")
    version: str = Field(pattern=SEMVER_PATTERN, max_length=64, description="Semantic version, e.g. 16.2.0.")
    engine: Literal["postgres", "mysql"] = Field("postgres", description="Database engine.")
    storage: DatabaseStorage


class Database(ResourceModel):
    """A whole Database object. apiVersion, kind and metadata are checked by the server's generic
    machinery, not by the CRD schema; here they are only typed."""

    api_version: Literal["db.minisched.dev/v1alpha1"]
    kind: Literal["Database"]
    metadata: dict[str, Any]
    spec: DatabaseSpec


def validate_database(obj: dict[str, Any]) -> list[Cause]:
    """Client-side verdict on a Database object: [] when valid, else one Cause per bad field."""
    return validate_object(Database, obj)


DATABASE_CRD: dict[str, Any] = crd_for(
    DatabaseSpec,
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural=PLURAL,
    short_names=["db"],
    printer_columns=[
        {"name": "Version", "type": "string", "jsonPath": ".spec.version"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
    ],
    description="The book's §3.1 Database: generated from minisched.validation.database.DatabaseSpec.",
)
DATABASES = Resource.from_crd(DATABASE_CRD)


def make_database(
    name: str, *, version: str = "16.2.0", replicas: int | None = None, size: str = "10Gi",
    namespace: str = "default", **spec: Any,
) -> dict[str, Any]:
    """A Database object (no client-side validation: use validate_database to check it)."""
    body: dict[str, Any] = {"version": version, "storage": {"size": size}, **spec}
    if replicas is not None:
        body["replicas"] = replicas
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": name, "namespace": namespace}, "spec": body}
