"""check_types: mypy on a snippet, reporting only the snippet's lines."""

from __future__ import annotations

from minisched.analysis.typecheck import RECONCILER_CONTRACT_EXAMPLE, check_types


def test_the_wrong_reconciler_is_rejected_and_the_real_one_accepted() -> None:
    result = check_types(RECONCILER_CONTRACT_EXAMPLE)
    assert result.status == 1
    assert len(result.errors) == 1, result.messages
    wrong_line = RECONCILER_CONTRACT_EXAMPLE.splitlines().index("    return r") + 1
    assert result.errors[0].startswith(f"snippet.py:{wrong_line}: error: Incompatible return value type")
    assert any('expected "Kind[MiniReplicaSet]"' in m for m in result.messages)


def test_a_clean_snippet_passes() -> None:
    clean = RECONCILER_CONTRACT_EXAMPLE.split("def wrong")[0].replace("class Wrong", "class Unused")
    clean += "\ndef right(r: mrs.MiniReplicaSetReconciler) -> Reconciler[mrs.MiniReplicaSet, dict]:\n    return r\n"
    assert check_types(clean).status == 0
