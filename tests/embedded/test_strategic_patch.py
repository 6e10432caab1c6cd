"""The embedded cluster's strategic merge patch against outputs of k8s.io/apimachinery's
strategicpatch.StrategicMergePatch (v0.35.4, with &v1.Pod{} as the schema), recorded by hand:
the contract suite (tests/contract/test_patch.py) checks the same behaviour on both backends."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.cluster.embedded.strategic import schema_for, strategic_merge_patch
from minisched.errors import BadRequest, InternalError

POD = schema_for("", "Pod")


def _conds(*types: str) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": t, "status": "True"} for t in types]}}


@pytest.mark.parametrize(
    ("original", "patch", "expected"),
    [
        # a new element goes first, the server's own keep their order
        (_conds("A", "B"), {"status": {"conditions": [{"type": "C", "status": "True"}]}},
         _conds("C", "A", "B")),
        # merged field by field into the element with the same key
        (_conds("A", "B"), {"status": {"conditions": [{"type": "A", "status": "False"}]}},
         {"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "True"}]}}),
        # the patch's own order among its elements
        (_conds("A", "B"), {"status": {"conditions": [{"type": "C"}, {"type": "A", "status": "False"}]}},
         {"status": {"conditions": [{"type": "C"}, {"type": "A", "status": "False"}, {"type": "B", "status": "True"}]}}),
        # a list of strings with strategy merge: a union, the patch's values first
        ({"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"finalizers": ["c", "a"]}},
         {"metadata": {"finalizers": ["c", "a", "b"]}}),
        # nested keyed lists: a container's env by name
        ({"spec": {"containers": [{"name": "x", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}},
         {"spec": {"containers": [{"name": "x", "env": [{"name": "B", "value": "3"}]}]}},
         {"spec": {"containers": [{"name": "x", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]}]}}),
        # $retainKeys: the volume's other source goes
        ({"spec": {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "hostPath": {"path": "/x"}}]}},
         {"spec": {"volumes": [{"name": "a", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/y"}}]}},
         {"spec": {"volumes": [{"name": "a", "hostPath": {"path": "/y"}}, {"name": "b", "hostPath": {"path": "/x"}}]}}),
        # $patch: replace on a map
        (_conds("A", "B"), {"status": {"$patch": "replace", "phase": "Failed"}}, {"status": {"phase": "Failed"}}),
        # $patch: delete on a list element, and on a map
        (_conds("A", "B"), {"status": {"conditions": [{"type": "A", "$patch": "delete"}]}}, _conds("B")),
        (_conds("A"), {"status": {"$patch": "delete"}}, {"status": {}}),
        # $setElementOrder
        (_conds("A", "B"), {"status": {"$setElementOrder/conditions": [{"type": "B"}, {"type": "A"}]}}, _conds("B", "A")),
        # a list without a strategy is replaced; null deletes
        ({"spec": {"tolerations": [{"key": "a"}], "nodeName": "n"}}, {"spec": {"tolerations": [{"key": "b"}], "nodeName": None}},
         {"spec": {"tolerations": [{"key": "b"}]}}),
    ],
    ids=["append-first", "merge-same-key", "patch-order", "scalar-union", "nested", "retain-keys", "replace-map",
         "delete-element", "delete-map", "set-element-order", "replace-untagged-list"],
)
def test_matches_kube(original: dict, patch: dict, expected: dict) -> None:
    before, patch_before = repr(original), repr(patch)
    assert strategic_merge_patch(original, patch, POD) == expected
    assert (repr(original), repr(patch)) == (before, patch_before)  # inputs untouched


@pytest.mark.parametrize(
    ("patch", "error", "message"),
    [
        ({"status": {"$patch": "bogus"}}, InternalError, "unknown patch type: bogus in map: map[$patch:bogus]"),
        ({"status": {"$retainKeys": "x"}}, BadRequest, "invalid patch format of retainKeys"),
        ({"status": {"$setElementOrder/conditions": "x"}}, InternalError,
         "expected a []interface {}, but received a string"),
        ({"status": {"conditions": [{"status": "True"}]}}, InternalError, "does not contain declared merge key: type"),
        ({"status": {"conditions": [{"type": "X"}], "$setElementOrder/conditions": [{"type": "Y"}]}}, InternalError,
         "doesn't match $setElementOrder list"),
    ],
)
def test_refusals_as_kube(patch: dict, error: type, message: str) -> None:
    with pytest.raises(error) as raised:
        strategic_merge_patch(_conds("A"), patch, POD)
    assert message in raised.value.message
