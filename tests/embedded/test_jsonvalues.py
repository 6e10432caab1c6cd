"""RFC 7386 JSON merge patch (the RFC's own Appendix A examples) and JSON copying."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.cluster.embedded.jsonvalues import check_merge_patch, clone, merge_patch
from minisched.errors import BadRequest

RFC7386_APPENDIX_A: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC7386_APPENDIX_A)
def test_rfc7386_examples(target: Any, patch: Any, result: Any) -> None:
    before = clone(target)
    assert merge_patch(target, patch) == result
    assert target == before  # the target is not modified


def test_patch_values_are_copied() -> None:
    patch = {"a": {"list": [1, 2]}}
    out = merge_patch({}, patch)
    out["a"]["list"].append(3)
    assert patch == {"a": {"list": [1, 2]}}


@pytest.mark.parametrize("bad", [[], "x", 1, None])
def test_an_object_patch_must_be_an_object(bad: Any) -> None:
    with pytest.raises(BadRequest, match="must be a JSON object"):
        check_merge_patch(bad)


def test_clone_is_deep() -> None:
    original = {"a": [{"b": 1}], "c": {"d": [2]}}
    copy = clone(original)
    copy["a"][0]["b"] = 9
    copy["c"]["d"].append(3)
    assert original == {"a": [{"b": 1}], "c": {"d": [2]}}
