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
from hypothesis import given, settings
from hypothesis import strategies as st

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
    ("integral-float-replicas", make_database("flt", replicas=3.0), set()),
    ("exponent-replicas", make_database("exp", replicas=1e1), set()),
    ("fractional-replicas", make_database("frac", replicas=2.5), {("spec.replicas", TYPE), NIL}),
    ("huge-replicas", make_database("huge", replicas=2**40), {("spec.replicas", INV)}),
    ("non-ascii-digit", make_database("uni", version="1.2.\u0663"), {("spec.version", INV)}),
    ("storage-not-object", make_database("arr", storage=[]), {("spec.storage", TYPE), NIL}),
    ("size-not-string", make_database("num", size=10), {("spec.storage.size", TYPE), NIL}),
    ("spec-null", {**make_database("specnull"), "spec": None}, {("spec", REQ), NIL}),
    ("quantity-exponent-and-suffix", make_database("q", storage={"size": "1e3", "maxSize": "1k"}), set()),
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
    ("engine-not-string", make_database("eng5", engine=5), {("spec.engine", TYPE), ("spec.engine", NS), NIL}),
    ("bad-size", make_database("sz", size="ten"), {("spec.storage.size", INV)}),
    ("long-class", make_database("lc", storage={"size": "1Gi", "storageClassName": "x" * 254}),
     {("spec.storage.storageClassName", LONG), NIL}),
    ("cel-max-below-size", make_database("cel", storage={"size": "10Gi", "maxSize": "5Gi"}),
     {("spec.storage.maxSize", INV)}),
    ("cel-error-bad-size", make_database("ce1", storage={"size": "ten", "maxSize": "10Gi"}),
     {("spec.storage.size", INV), ("spec.storage", INV)}),
    ("cel-error-bad-suffix", make_database("ce2", storage={"size": "10Gi", "maxSize": "+-1"}),
     {("spec.storage.maxSize", INV), ("spec.storage", INV)}),
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


# --- property: the client model and the schema validator agree on generated objects -----------


_anything = st.one_of(st.none(), st.booleans(), st.integers(-3, 20), st.floats(-2, 12, allow_nan=False),
                      st.text(max_size=6), st.lists(st.integers(), max_size=2), st.just({}))
_versions = st.one_of(st.sampled_from(["1.2.3", "v1.2.3", "1.2", "0.0.1-alpha.1", "1.2.3+b", "01.2.3", "1.2.3\n"]),
                      _anything)
_sizes = st.one_of(st.sampled_from(["10Gi", "5Gi", "1e3", "1k", "500m", "ten", "", "+1Mi", "1.5Ti"]), _anything)


@st.composite
def _database(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for key, values in (("replicas", _anything), ("version", _versions), ("engine",
                        st.one_of(st.sampled_from(["postgres", "mysql", "oracle"]), _anything))):
        if draw(st.booleans()):
            spec[key] = draw(values)
    if draw(st.integers(0, 9)) > 0:
        storage: Any = {}
        for key in ("size", "maxSize", "storageClassName"):
            if draw(st.booleans()):
                storage[key] = draw(_sizes if key != "storageClassName" else st.text(max_size=3))
        spec["storage"] = storage if draw(st.integers(0, 9)) > 0 else draw(_anything)
    return {"apiVersion": "db.minisched.dev/v1alpha1", "kind": "Database", "metadata": {"name": "gen"}, "spec": spec}


def _schema_verdict(obj: dict[str, Any]) -> set[tuple[str, str]]:
    try:
        admit_custom_object(obj, DATABASE_CRD)
    except Invalid as err:
        return _verdict(err.causes)
    return set()


@settings(max_examples=250, deadline=None)
@given(_database())
def test_client_model_and_schema_validator_agree_on_generated_objects(obj: dict[str, Any]) -> None:
    assert _verdict(validate_database(obj)) == _schema_verdict(obj)
