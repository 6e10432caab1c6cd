"""minisched's layers, read from the code: the import contract, the import graph, and a check.

The contract lives in `.importlinter` at the repository root (import-linter's format) and
`lint-imports` enforces it in `make lint`. This module reads the same file and builds the same
graph (grimp, the library under import-linter), so the picture a notebook draws is computed
from the code, not drawn by hand; `check_copy` runs the linter on a copy of the package with one
import planted, to show what a broken contract looks like.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "minisched"
CONFIG_NAME = ".importlinter"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # import-linter colours its report


def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def contract_layers(config: Path | None = None) -> list[list[str]]:
    """The layers contract, top layer first; each layer is its sibling modules."""
    parser = configparser.ConfigParser()
    path = config or repo_root() / CONFIG_NAME
    if not parser.read(path):
        raise FileNotFoundError(f"no import contract at {path}")
    for section in parser.sections():
        if parser.get(section, "type", fallback="") == "layers":
            lines = [ln.strip() for ln in parser.get(section, "layers").splitlines()]
            return [[m.strip() for m in ln.replace(":", "|").split("|")] for ln in lines
                    if ln and not ln.startswith("#")]
    raise ValueError(f"{path} has no layers contract")


def ignored_imports(config: Path | None = None) -> dict[str, list[str]]:
    """contract name -> the imports it lets through by name (`ignore_imports`), as written."""
    parser = configparser.ConfigParser()
    path = config or repo_root() / CONFIG_NAME
    if not parser.read(path):
        raise FileNotFoundError(f"no import contract at {path}")
    out: dict[str, list[str]] = {}
    for section in parser.sections():
        if section.startswith("importlinter:contract:"):
            lines = [ln.strip() for ln in parser.get(section, "ignore_imports", fallback="").splitlines()]
            out[parser.get(section, "name", fallback=section)] = [ln for ln in lines if ln and not ln.startswith("#")]
    return out


def package_imports(package: str = PACKAGE, depth: int = 2) -> dict[tuple[str, str], int]:
    """(importer, imported) -> number of module-level imports between the packages `depth` dots
    deep (minisched.cluster, minisched.scheduler, ...), function-level imports included."""
    import grimp

    graph = grimp.build_graph(package, include_external_packages=False)
    counts: dict[tuple[str, str], int] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = _prefix(module, depth), _prefix(imported, depth)
            if a != b:
                counts[a, b] = counts.get((a, b), 0) + 1
    return counts


def _prefix(module: str, depth: int) -> str:
    return ".".join(module.split(".")[:depth])


def layer_of(layers: Sequence[Sequence[str]]) -> dict[str, int]:
    """module -> layer number, 0 at the bottom."""
    top = len(layers) - 1
    return {m: top - i for i, layer in enumerate(layers) for m in layer}


def upward_imports(layers: Sequence[Sequence[str]], edges: Mapping[tuple[str, str], int]) -> list[tuple[str, str]]:
    """Direct imports that point from a lower layer to a higher one (or between siblings)."""
    where = layer_of(layers)
    return sorted((a, b) for a, b in edges if a in where and b in where and where[a] <= where[b])


@dataclass(frozen=True)
class LintResult:
    ok: bool
    output: str  # lint-imports' report, box art removed


def lint(root: Path | None = None) -> LintResult:
    """Run `lint-imports` on the package under `root` (default: this repository)."""
    root = root or repo_root()
    exe = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(root)}  # the copy's package shadows the installed one
    proc = subprocess.run([str(exe), "--no-cache", "--no-logo", str(root / CONFIG_NAME)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    text = _ANSI.sub("", proc.stdout + proc.stderr)
    start = text.find("Contracts")
    return LintResult(proc.returncode == 0, text[start - 10:].strip() if start >= 10 else text)


def check_copy(workdir: Path, plant: Mapping[str, str], root: Path | None = None) -> LintResult:
    """Copy the package and its contract to `workdir`, append each planted line to its module
    (path relative to the package, e.g. {"cluster/base.py": "import minisched.observability"}),
    and lint the copy."""
    root = root or repo_root()
    target = workdir / PACKAGE
    shutil.copytree(root / PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(root / CONFIG_NAME, workdir / CONFIG_NAME)
    for relative, line in plant.items():
        path = target / relative
        if not path.is_file():
            raise FileNotFoundError(f"no module {relative} in {target}")
        path.write_text(path.read_text() + f"\n{line}  # planted\n")
    return lint(workdir)


def broken_contracts(result: LintResult) -> dict[str, str]:
    """Each broken contract's report from `lint-imports`' "Broken contracts" section, by contract
    name; line numbers ("(l.155)") are dropped, since they depend on the file's length."""
    marker = "Broken contracts"
    if marker not in result.output:
        return {}
    section = result.output.split(marker, 1)[1].strip("-\n ")
    # each contract: its name, a line of dashes as long as the name, then its report
    parts = re.split(r"\n*^(.+)\n-+$\n", "\n" + section, flags=re.MULTILINE)
    reports: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        reports[name.strip()] = re.sub(r" \(l\.\d+\)", "", body).strip()
    return reports
