"""Chapter rules read from a notebook file alone (no execution: all notebooks in seconds).

Each rule returns a list of problems, each naming the cell and what is wrong; `RULES` maps the
rule's name to its function, and `check_rules` runs them (tests/notebooks/test_chapter_rules.py
runs every rule over every chapter and lab, with the notebooks still to fix listed there).

- `prose`: every measured figure in markdown is shown by an output, set by code, or tagged
  `*(quoted: SOURCE)*` (see `minisched.notebooks.prose`).
- `hygiene`: stored outputs hold no absolute path of the machine that ran them (/work/...,
  /home/..., /root/..., /Users/..., the repository's own path, the interpreter's install path),
  no kernel temporary names (/tmp/ipykernel_*, <ipython-input-...>), no progress bar short
  of its total ("0/5" beside finished results: `normalize` stores a finished bar finished), and
  no stray repr: a cell's last expression echoed as bare text (`99` from `gc.collect()`, `True`,
  `ShutdownReport(...)`, a widget's `VBox(...)` with no static form) instead of printed on purpose.
- `banner`: a chapter whose code creates, taints or cordons nodes (nodes are cluster-wide) has
  `SHARED_CLUSTER_BANNER` in its first markdown cell: the README's promise to a class sharing one
  cluster.
- `namespace`: a chapter takes its namespace from `workbook_namespace()`: no namespace string
  literal in code (`namespace="x"`, `NS = "x"`, `"namespace": "x"`), and a chapter that connects
  to a cluster and creates namespaced objects calls `workbook_namespace()`.
- `cell-length`: a code cell has at most `MAX_CODE_LINES` lines (the harness's and the lesson
  marker's lines not counted) unless it is the lesson's own code and says so on its first line
  (after `# NBVAL_CHECK_OUTPUT` if any): `LESSON_CODE_MARKER`, followed by why.

`banner` and `namespace` apply to chapters (a lab's data may name a namespace: lab11 is about
namespace selectors); the others to chapters and labs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import nbformat

from minisched.notebooks.prose import check_prose
from minisched.notebooks.prose import output_texts as prose_output_texts

REPOSITORY = Path(__file__).resolve().parents[2]
MAX_CODE_LINES = 25
LESSON_CODE_MARKER = "# the lesson's code:"
HARNESS_MARKERS = (
    "# NBVAL_CHECK_OUTPUT",
    "# NBVAL_SKIP",
    "# NBVAL_IGNORE_OUTPUT",
    "# NBVAL_RAISES_EXCEPTION",
)
SHARED_CLUSTER_BANNER = (
    "> **On a cluster shared by a class:** this chapter creates, taints or deletes *nodes*, which are "
    "cluster-wide. Run it on a cluster of your own (kind, or `make cluster-local`); `MINISCHED_NAMESPACE` "
    "keeps your pods apart, not your nodes."
)

# --- outputs -----------------------------------------------------------------------------------


def output_texts(cell: nbformat.NotebookNode) -> list[str]:
    """Every text a reader of the file sees in `cell`'s outputs, HTML as stored, tracebacks included."""
    return prose_output_texts(cell, strip_html=False, with_errors=True)


_MACHINE_PATH = re.compile(
    r"(?<![\w.~/])(?:/work|/home|/root|/Users|/private|/mnt|/srv)/[^\s'\"):,]+"
    r"|(?<![\w.~/])/(?:usr|opt)/(?:local/)?lib/python\d[^\s'\"):,]*"
    r"|(?<![\w.~/])/opt/[^\s'\"):,]*site-packages[^\s'\"):,]*"
)
_KERNEL_TEMP = re.compile(r"/tmp/ipykernel_\d+[^\s'\"):,]*|<ipython-input-[\d-]+[^>]*>")
# tqdm's text: "desc:  40%|████      | 2/5 [00:01<00:01, 2.0it/s]" (the widget's text/plain too)
_PROGRESS_BAR = re.compile(
    r"(?P<pct>\d{1,3})%\|[^|\n]*\|\s*(?P<n>\d+(?:\.\d+)?)(?P<nk>[kM]?)/(?P<total>\d+(?:\.\d+)?)(?P<tk>[kM]?)"
)
_SCALE = {"": 1.0, "k": 1e3, "M": 1e6}
# an echoed value: a literal, or an object's repr "Name(...)" (dataclasses, widgets)
_STRAY_REPR = re.compile(r"(?:True|False|None|-?\d[\d_.e+-]*|[A-Z]\w*\(.*(?:\)|…))", re.DOTALL)


def stray_repr(output: nbformat.NotebookNode) -> str | None:
    """The text of an execute_result that only echoes a value, or None."""
    if output.get("output_type") != "execute_result" or set(output.get("data", {})) != {"text/plain"}:
        return None
    text = str(output["data"]["text/plain"]).strip()
    return text if _STRAY_REPR.fullmatch(text) else None


def _last_frames(text: str) -> str:
    """A terminal's view of `text`: on each line, only what follows its last carriage return."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def hygiene_problems(nb: nbformat.NotebookNode, repository: Path = REPOSITORY) -> list[str]:
    problems: list[str] = []
    own_paths = [
        re.compile(re.escape(p) + r"(?![\w.-])") for p in {str(repository), str(Path.home())} - {"/", ""}
    ]
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            echoed = stray_repr(output)
            if echoed is not None:
                problems.append(
                    f"cell {index}: stray repr {echoed[:60]!r}: end the line with ';' or assign it, "
                    "or print what it means (a widget needs a static rendering)"
                )
        for text in output_texts(cell):
            found = {m.group(0) for m in _MACHINE_PATH.finditer(text)}
            found |= {m.group(0) for pattern in own_paths for m in pattern.finditer(text)}
            for path in sorted(found):
                problems.append(f"cell {index}: output holds the machine's path {path!r}")
            for name in sorted({m.group(0) for m in _KERNEL_TEMP.finditer(text)}):
                problems.append(f"cell {index}: output holds the kernel's temporary name {name!r}")
            for m in _PROGRESS_BAR.finditer(_last_frames(text)):
                done = float(m.group("n")) * _SCALE[m.group("nk")]
                total = float(m.group("total")) * _SCALE[m.group("tk")]
                if done < total:
                    problems.append(
                        f"cell {index}: progress bar stored short of its total ({m.group(0)!r}): re-run "
                        "`python -m minisched.notebooks fix --execute` (a finished bar is stored finished), "
                        "or make the loop finish what it counts"
                    )
    return problems


# --- code --------------------------------------------------------------------------------------


def _code_without_comments(source: str) -> str:
    return "\n".join(re.sub(r"(?<![\"'])#.*$", "", line) for line in source.splitlines())


_NODE_WRITE = re.compile(
    r"\.\s*(?:create|ensure|apply|update|patch|replace|update_status|patch_status|delete)\s*\(\s*(?:NODES\b|[\"']nodes[\"'])"
    r"|\bkubectl\s+(?:taint|cordon|uncordon|drain|label\s+nodes?|delete\s+nodes?)\b"
    r"|\breset\s*\([^)]*cluster_wide\s*=\s*True"
    r"|\bensure\s*\(\s*NODES\b"
    r"|\b(?:cordon|uncordon|drain|taint_node|add_taint|create_fake_nodes|build_cluster|paused_replica_run"
    r"|paused_before_bind_run|paused_replica_live)\s*\("
    r"|[\"']unschedulable[\"']\s*:\s*True|\bunschedulable\s*=\s*True"
)


def node_writing_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indexes of the code cells that create, taint, cordon or delete nodes on the cluster (through
    the Cluster API, kubectl, `reset(cluster_wide=True)` or a minisched helper that creates nodes),
    as opposed to building node objects for an in-memory table (`NodeTable.add_node`)."""
    return [
        index
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and _NODE_WRITE.search(_code_without_comments(cell.source))
    ]


def banner_problems(nb: nbformat.NotebookNode) -> list[str]:
    writers = node_writing_cells(nb)
    if not writers:
        return []
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if first is not None and SHARED_CLUSTER_BANNER in first.source:
        return []
    cells = ("cells " if len(writers) > 1 else "cell ") + ", ".join(map(str, writers))
    return [
        f"{cells} {'create, taint or cordon' if len(writers) > 1 else 'creates, taints or cordons'} nodes, but the first markdown cell lacks the shared-cluster "
        f"banner (minisched.notebooks.rules.SHARED_CLUSTER_BANNER): {SHARED_CLUSTER_BANNER[:60]}..."
    ]


_NAMESPACE_LITERAL = re.compile(
    r"\bnamespace\s*=\s*(?P<a>[\"'][^\"'\n]+[\"'])"
    r"|\b[A-Z_]*(?:NS|NAMESPACE)\s*=\s*(?P<b>[\"'][^\"'\n]+[\"'])"
    r"|[\"']namespace[\"']\s*:\s*(?P<c>[\"'][^\"'\n]+[\"'])"
)
_CREATES_NAMESPACED = re.compile(
    r"\bmake_pod\s*\(|\.\s*create\s*\(\s*(?!NODES\b|NAMESPACES\b|CRDS\b|PRIORITY_CLASSES\b"
    r"|[\"'](?:nodes|namespaces|customresourcedefinitions|priorityclasses)[\"'])"
)


def namespace_problems(nb: nbformat.NotebookNode) -> list[str]:
    problems: list[str] = []
    code = ""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        source = _code_without_comments(cell.source)
        code += source + "\n"
        for m in _NAMESPACE_LITERAL.finditer(source):
            literal = m.group("a") or m.group("b") or m.group("c")
            problems.append(
                f"cell {index}: hard-coded namespace {literal} ({m.group(0).strip()!r}): use "
                "workbook_namespace() (or a variable set from it)"
            )
    if (
        re.search(r"\bconnect\s*\(", code)
        and _CREATES_NAMESPACED.search(code)
        and "workbook_namespace(" not in code
    ):
        problems.append(
            "creates namespaced objects on a cluster but never calls workbook_namespace(): "
            "take the namespace from it (MINISCHED_NAMESPACE)"
        )
    return problems


def code_length(source: str) -> int:
    """Lines of a code cell, not counting the harness's markers or the lesson marker."""
    lines = source.rstrip("\n").splitlines()
    return sum(1 for line in lines if not line.strip().startswith((*HARNESS_MARKERS, LESSON_CODE_MARKER)))


def is_lesson_code(source: str) -> bool:
    """The cell says it is the lesson's code: the marker is its first line, or its second after a
    harness marker (`# NBVAL_CHECK_OUTPUT`)."""
    lines = [line.strip() for line in source.splitlines()]
    while lines and lines[0].startswith(HARNESS_MARKERS):
        lines.pop(0)
    return bool(lines) and lines[0].lower().startswith(LESSON_CODE_MARKER)


def cell_length_problems(nb: nbformat.NotebookNode) -> list[str]:
    return [
        f"cell {index}: {code_length(cell.source)} lines, over {MAX_CODE_LINES}: move the logic into minisched "
        f"(with tests), or if the cell is the lesson's own code start it with {LESSON_CODE_MARKER!r} and why"
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and code_length(cell.source) > MAX_CODE_LINES
        and not is_lesson_code(cell.source)
    ]


def prose_problems(nb: nbformat.NotebookNode) -> list[str]:
    return [str(p) for p in check_prose(nb)]


def is_chapter(path: Path) -> bool:
    return path.parent.name == "chapters"


Rule = Callable[[nbformat.NotebookNode], list[str]]
RULES: dict[str, Rule] = {
    "prose": prose_problems,
    "hygiene": hygiene_problems,
    "banner": banner_problems,
    "namespace": namespace_problems,
    "cell-length": cell_length_problems,
}
CHAPTER_ONLY = frozenset({"banner", "namespace"})


def applies(rule: str, path: Path) -> bool:
    return rule not in CHAPTER_ONLY or is_chapter(path)


def check_rules(path: str | Path, rules: list[str] | None = None) -> dict[str, list[str]]:
    """rule name -> problems of the notebook at `path`, for each rule that applies to it."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    return {name: RULES[name](nb) for name in (rules or list(RULES)) if applies(name, path)}
