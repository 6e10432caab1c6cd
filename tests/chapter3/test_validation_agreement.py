"""§3.1: one model, three layers, one verdict.

Each object in CASES is judged by the pydantic model (client side), by minisched's OpenAPI
validator (what the embedded cluster enforces) and, when the local control plane is built, by a
real kube-apiserver serving the CRD generated from the same model. All three must name the same
fields with the same reasons.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from minisched.errors import Invalid
from minisched.resources import CRDS
from minisched.validation.database import DATABASE_CRD, DATABASES, make_database, validate_database
from minisched.validation.openapi import admit_custom_object

REQ, INV, TYPE, NS, LONG = (
    "FieldValueRequired", "FieldValueInvalid", "FieldValueTypeInvalid", "FieldValueNotSupported", "FieldValueTooLong",
)
NIL = ("<nil>", INV)  # "some validation rules were not checked": a blocking error hid the CEL rules


def _without(obj: dict[str, Any], *keys: str) -> dict[str, Any]:
    out = {**obj, "spec": dict(obj["spec"])}
    for key in keys:
        out["spec"].pop(key)
    return out


CASES: list[tuple[str, dict[str, Any], set[tuple[str, str]]]] = [
    ("valid", make_database("ok"), set()),
    ("valid-prerelease", make_database("pre", version="1.0.0-rc.1+build.5", replicas=10), set()),
    ("valid-max-size", make_database("grow", storage={"size": "10Gi", "maxSize": "1Ti"}), set()),
    ("null-replicas-defaults", make_database("nul", replicas=None) | {"spec": {
        "version": "1.0.0", "storage": {"size": "1Gi"}, "replicas": None}}, set()),
    ("unknown-field-pruned", make_database("unk", color="blue"), set()),
    ("book-v-prefix", make_database("vp", version="v1.22.0"), {("spec.version", INV)}),
    ("two-part-version", make_database("two", version="1.22"), {("spec.version", INV)}),
    ("trailing-newline", make_database("nl", version="1.2.3\n"), {("spec.version", INV)}),
    ("replicas-11", make_database("big", replicas=11), {("spec.replicas", INV)}),
    ("replicas-0", make_database("zero", replicas=0), {("spec.replicas", INV)}),
    ("replicas-string", make_database("str", replicas="3"), {("spec.replicas", TYPE), NIL}),
    ("replicas-bool", make_database("bool", replicas=True), {("spec.replicas", TYPE), NIL}),
    ("no-version", _without(make_database("nov"), "version"), {("spec.version", REQ), NIL}),
    ("no-storage", _without(make_database("nos"), "storage"), {("spec.storage", REQ), NIL}),
    ("no-spec", {"apiVersion": "db.minisched.dev/v1alpha1", "kind": "Database", "metadata": {"name": "nospec"}},
     {("spec", REQ), NIL}),
    ("bad-engine", make_database("eng", engine="oracle"), {("spec.engine", NS), NIL}),
    ("bad-size", make_database("sz", size="ten"), {("spec.storage.size", INV)}),
    ("long-class", make_database("lc", storage={"size": "1Gi", "storageClassName": "x" * 254}),
     {("spec.storage.storageClassName", LONG), NIL}),
    ("cel-max-below-size", make_database("cel", storage={"size": "10Gi", "maxSize": "5Gi"}),
     {("spec.storage.maxSize", INV)}),
    ("cel-and-range", make_database("both", replicas=11, storage={"size": "10Gi", "maxSize": "5Gi"}),
     {("spec.replicas", INV), ("spec.storage.maxSize", INV)}),
    ("cel-hidden-by-blocking", _without(make_database("hid", storage={"size": "10Gi", "maxSize": "5Gi"}), "version"),
     {("spec.version", REQ), NIL}),
]
IDS = [c[0] for c in CASES]


def _verdict(causes: Any) -> set[tuple[str, str]]:
    return {(c.field, c.reason) for c in causes}


@pytest.mark.parametrize(("name", "obj", "expected"), CASES, ids=IDS)
def test_client_side_model(name: str, obj: dict[str, Any], expected: set[tuple[str, str]]) -> None:
    assert _verdict(validate_database(obj)) == expected


@pytest.mark.parametrize(("name", "obj", "expected"), CASES, ids=IDS)
def test_embedded_schema_validator(name: str, obj: dict[str, Any], expected: set[tuple[str, str]]) -> None:
    if not expected:
        stored = admit_custom_object(obj, DATABASE_CRD)
        assert stored["spec"]["replicas"] >= 1 and stored["spec"]["engine"] in ("postgres", "mysql")
        assert "color" not in stored["spec"]
        return
    with pytest.raises(Invalid) as info:
        admit_custom_object(obj, DATABASE_CRD)
    assert info.value.status == 422
    assert _verdict(info.value.causes) == expected
    assert info.value.message.startswith(f'Database.db.minisched.dev "{obj["metadata"]["name"]}" is invalid: ')


def _wait_established(cluster: Any, name: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = cluster.get(CRDS, name).get("status") or {}
        if any(c["type"] == "Established" and c["status"] == "True" for c in status.get("conditions") or []):
            return
        time.sleep(0.1)
    raise AssertionError(f"CRD {name} not established in 30 s")


@pytest.mark.realcluster
def test_real_api_server_agrees(real_cluster: Any, real_namespace: str) -> None:
    real_cluster.create(CRDS, DATABASE_CRD)
    _wait_established(real_cluster, DATABASE_CRD["metadata"]["name"])
    disagreements = []
    for name, obj, expected in CASES:
        body = {**obj, "metadata": {**obj["metadata"], "namespace": real_namespace}}
        for attempt in range(50):  # the CRD's handler can lag its Established condition briefly
            try:
                stored = real_cluster.create(DATABASES, body, real_namespace)
                got: set[tuple[str, str]] = set()
                if not expected:
                    assert stored["spec"] == admit_custom_object(obj, DATABASE_CRD)["spec"], name
                break
            except Invalid as err:
                got = _verdict(err.causes)
                embedded = admit_custom_object_error(obj)
                assert err.message == embedded, f"{name}: server and embedded messages differ"
                break
            except Exception:
                if attempt == 49:
                    raise
                time.sleep(0.1)
        if got != expected:
            disagreements.append((name, got, expected))
    assert disagreements == []


def admit_custom_object_error(obj: dict[str, Any]) -> str:
    try:
        admit_custom_object(obj, DATABASE_CRD)
    except Invalid as err:
        return err.message
    return ""
