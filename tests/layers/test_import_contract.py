"""The import contract (.importlinter) holds today, and breaks, naming the chain, when an import
points the wrong way."""

from __future__ import annotations

from pathlib import Path

import pytest

from minisched.architecture import (
    broken_contracts,
    check_copy,
    contract_layers,
    ignored_imports,
    lint,
    package_imports,
    upward_imports,
)


def test_the_repository_keeps_its_contracts() -> None:
    result = lint()
    assert result.ok, result.output
    assert "2 kept, 0 broken" in result.output


def test_an_upward_import_breaks_the_layers_with_its_chain(tmp_path: Path) -> None:
    # the cluster layer reaching up to observability, through a module that looks harmless
    result = check_copy(tmp_path, {"cluster/base.py": "import minisched.observability.metrics"})
    assert not result.ok
    assert "minisched.cluster is not allowed to import minisched.observability" in result.output
    assert "minisched.cluster.base -> minisched.observability.metrics" in result.output
    # the report, per contract, that the chapter prints: the rule and the chain, without line numbers
    reports = broken_contracts(result)
    assert list(reports) == ["minisched's seven layers point one way",
                             "no import cycles between sibling modules anywhere in minisched"]
    assert reports["minisched's seven layers point one way"] == (
        "minisched.cluster is not allowed to import minisched.observability:\n\n"
        "- minisched.cluster.base -> minisched.observability.metrics")
    assert ".cluster -> .observability" in reports["no import cycles between sibling modules anywhere in minisched"]


def test_siblings_of_one_layer_must_not_import_each_other(tmp_path: Path) -> None:
    result = check_copy(tmp_path, {"objects.py": "import minisched.policy"})
    assert not result.ok
    assert "minisched.objects is not allowed to import minisched.policy" in result.output


def test_the_linter_passes_an_unchanged_copy(tmp_path: Path) -> None:
    # so the failures above come from the planted line, not from the copy
    kept = check_copy(tmp_path, {})
    assert kept.ok
    assert broken_contracts(kept) == {}


def test_a_cycle_inside_a_package_breaks_the_acyclic_contract(tmp_path: Path) -> None:
    # the cycle fixed in this change: crd no longer imports model
    result = check_copy(tmp_path, {"validation/crd.py": "from minisched.validation import model"})
    assert not result.ok
    assert "No cycles are allowed in minisched.validation" in result.output


def test_the_layer_picture_comes_from_the_code() -> None:
    layers = contract_layers()
    assert layers[0] == ["minisched.cli"] and "minisched.errors" in layers[-1]
    edges = package_imports()
    assert ("minisched.scheduler", "minisched.cluster") in edges
    assert upward_imports(layers, edges) == []
    listed = {m for layer in layers for m in layer}
    modules = {a for a, _ in edges} | {b for _, b in edges}
    assert modules <= listed, f"modules missing from the layers contract: {sorted(modules - listed)}"


def test_the_contracts_exceptions_are_read_by_name(tmp_path: Path) -> None:
    assert ignored_imports() == {
        "minisched's seven layers point one way": [],
        "no import cycles between sibling modules anywhere in minisched":
            ["minisched.scheduler.framework.runtime -> minisched.scheduler.plugins"],
    }
    config = tmp_path / ".importlinter"
    config.write_text("[importlinter:contract:x]\nname = x\ntype = layers\nignore_imports =\n    # why\n    a -> b\n")
    assert ignored_imports(config) == {"x": ["a -> b"]}
    with pytest.raises(FileNotFoundError, match="no import contract"):
        ignored_imports(tmp_path / "missing")
