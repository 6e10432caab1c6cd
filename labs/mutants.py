"""Mutation testing of the labs' checks: do they catch a solution with one thing gotten wrong?

Each lab's instructor solution is parsed, one small change at a time is made to it (an operator
swapped, a comparison flipped, a constant moved by one, a condition negated, a return value or a
statement dropped, a slice or range bound moved, two arguments swapped...), and the lab's public
and hidden checks run on every such mutant. A mutant is *killed* when a check fails, *timed out*
when the checks did not finish within the limit (a mutant can loop forever: that counts as caught,
since the run stops there), and *survived* when every check passed: either the checks have a hole,
or the change does not alter behaviour (an equivalent mutant, listed in EQUIVALENT with why).

Why not mutmut or cosmic-ray: mutmut 3 mutates whole source trees into a `mutants/` copy and runs
pytest there, with its own trampolines in every function (a check that inspects a submission's
source or module would see them); cosmic-ray needs a session database and a test command per
module. Here a mutant is one .py file that the lab's checks load like a student's submission, so
the checks see exactly what they would grade.

Each mutant runs in a forked child of a process that imported the checks once (fast: no
interpreter start per mutant), killed when it exceeds the time limit.

    python -m labs.mutants [LAB ...] [--max N] [--seed S] [--timeout SECONDS] [--write]

`--write` keeps the table in labs/MUTANTS.md and every mutant's outcome in labs/mutants.json
(the test tests/labs/test_mutants.py re-runs a seeded sample of the killed ones).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import hashlib
import json
import os
import random
import re
import select
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from labs import harness

RESULTS_JSON = harness.LABS_DIR / "mutants.json"
RESULTS_MD = harness.LABS_DIR / "MUTANTS.md"

_SWAP_BINOP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.LShift: ast.RShift,
    ast.RShift: ast.LShift, ast.Pow: ast.Mult,
}
_SWAP_CMP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}

_WAT_SWAP = {"le_s": "lt_s", "lt_s": "le_s", "ge_s": "gt_s", "gt_s": "ge_s", "le_u": "lt_u", "lt_u": "le_u",
             "ge_u": "gt_u", "gt_u": "ge_u", "add": "sub", "sub": "add", "mul": "add", "div_s": "div_u",
             "div_u": "div_s"}
_WAT_TOKEN = re.compile(r"(?P<type>i32|i64)\.(?P<op>" + "|".join(_WAT_SWAP) + r")\b"
                        r"|(?P<ctype>i32|i64)\.const (?P<n>\d+)")


@dataclass(frozen=True)
class Mutant:
    lab: str
    index: int  # the index-th mutation point of the solution, in source order
    line: int
    change: str  # "`a < b` -> `a <= b`"

    @property
    def key(self) -> str:
        return f"{self.lab}#{self.index}"


@dataclass(frozen=True)
class Result:
    mutant: Mutant
    status: str  # "killed", "survived", "timeout", "error" (the mutant did not load: not counted)
    by: str = ""  # the check that failed first
    seconds: float = 0.0


# ---- the mutator ----
def _show(node: ast.AST) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= 70 else text[:67] + "..."


class _Mutator(ast.NodeTransformer):
    """Walks the tree in source order; each possible change is one point. With `target` None it
    only records the points; with `target` k it makes the k-th change and leaves the rest."""

    def __init__(self, tree: ast.AST, target: int | None = None) -> None:
        self.target = target
        self.points: list[tuple[int, str]] = []
        self.families: dict[str, set[str]] = {}  # Name -> the UPPER attributes the file reads from it
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.isupper():
                self.families.setdefault(node.value.id, set()).add(node.attr)

    def _point(self, node: ast.AST, before: ast.AST, after: ast.AST | None) -> bool:
        """Record a point; True when it is the one to apply."""
        shown_after = "(deleted)" if after is None else _show(after)
        self.points.append((getattr(node, "lineno", 0), f"`{_show(before)}` -> `{shown_after}`"))
        return self.target == len(self.points) - 1

    # skip what does not run: docstrings, annotations, TYPE_CHECKING blocks
    def visit_arg(self, node: ast.arg) -> ast.arg:
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.returns = node.returns  # not visited: annotations do not run under `from __future__ import annotations`
        node.args = self.visit(node.args)  # defaults
        node.body = self._body(node.body)
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        node.body = self._body(node.body)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.body = self._body(node.body)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is not None:
            node.value = self.visit(node.value)
        return node

    def visit_If(self, node: ast.If) -> ast.AST:
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return node
        node.test = self.visit(node.test)
        negated = ast.UnaryOp(ast.Not(), node.test)
        if self._point(node, node.test, negated):
            node.test = negated
        node.body = self._body(node.body)
        node.orelse = self._body(node.orelse) if node.orelse else []
        return node

    def visit_While(self, node: ast.While) -> ast.AST:
        node.test = self.visit(node.test)
        negated = ast.UnaryOp(ast.Not(), node.test)
        if self._point(node, node.test, negated):
            node.test = negated
        node.body = self._body(node.body)
        return node

    def visit_Module(self, node: ast.Module) -> ast.AST:
        node.body = self._body(node.body)
        return node

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for i, stmt in enumerate(body):
            if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                    and isinstance(stmt.value.value, str):
                out.append(stmt)  # a docstring
                continue
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                out.append(stmt)
                continue
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                    for t in stmt.targets):
                out.append(stmt)
                continue
            # returns are replaced by `return None` instead (visit_Return)
            deletable = isinstance(stmt, ast.Assign | ast.AugAssign | ast.Raise | ast.Continue | ast.Break) \
                or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call))
            if deletable and self._point(stmt, stmt, None):
                out.append(ast.copy_location(ast.Pass(), stmt))
                continue
            out.append(self.visit(stmt))
        return out or [ast.Pass()]

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        swap = _SWAP_BINOP.get(type(node.op))
        if swap is not None:
            after = ast.BinOp(node.left, swap(), node.right)
            if self._point(node, node, after):
                return ast.copy_location(after, node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        swap = _SWAP_BINOP.get(type(node.op))
        if swap is not None:
            after = ast.AugAssign(node.target, swap(), node.value)
            if self._point(node, node, after):
                return ast.copy_location(after, node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        for k, op in enumerate(node.ops):
            swap = _SWAP_CMP.get(type(op))
            if swap is None:
                continue
            ops = list(node.ops)
            ops[k] = swap()
            after = ast.Compare(node.left, ops, node.comparators)
            if self._point(node, node, after):
                return ast.copy_location(after, node)
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        after = ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)
        if self._point(node, node, after):
            return ast.copy_location(after, node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not | ast.USub | ast.Invert) and self._point(node, node, node.operand):
            return node.operand
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = node.value
        if isinstance(value, bool):
            after = ast.Constant(not value)
            if self._point(node, node, after):
                return ast.copy_location(after, node)
        elif isinstance(value, int | float):
            for new in ([1] if value == 0 else [value + 1, value - 1, 0] if value != 1 else [2, 0]):
                after = ast.Constant(type(value)(new))
                if self._point(node, node, after):
                    return ast.copy_location(after, node)
        elif isinstance(value, str) and "(module" in value:
            return self._wat(node, value)
        elif isinstance(value, str) and value and len(value) < 40:
            after = ast.Constant(value + "X")
            if self._point(node, node, after):
                return ast.copy_location(after, node)
        return node

    def _wat(self, node: ast.Constant, text: str) -> ast.AST:
        """WebAssembly text in a string (lab 13): its instructions and constants are the code."""
        for match in _WAT_TOKEN.finditer(text):
            token = match.group(0)
            if match.group("op"):
                replacements = [f"{match.group('type')}.{_WAT_SWAP[match.group('op')]}"]
            else:
                number = int(match.group("n"))
                replacements = [f"{match.group('ctype')}.const {n}" for n in ([number + 1, 0] if number else [1])]
            for replacement in replacements:
                line = getattr(node, "lineno", 0) + text.count("\n", 0, match.start())
                self.points.append((line, f"`{token}` -> `{replacement}` (WebAssembly)"))
                if self.target == len(self.points) - 1:
                    return ast.copy_location(ast.Constant(text[:match.start()] + replacement + text[match.end():]),
                                             node)
        return node

    def visit_Dict(self, node: ast.Dict) -> ast.AST:
        self.generic_visit(node)
        for k, key in enumerate(node.keys):
            if key is None:
                continue  # a ** entry
            after = ast.Dict(node.keys[:k] + node.keys[k + 1:], node.values[:k] + node.values[k + 1:])
            self.points.append((getattr(key, "lineno", 0), f"entry `{_show(key)}: {_show(node.values[k])}` deleted"))
            if self.target == len(self.points) - 1:
                return ast.copy_location(after, node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        """`State.A` -> `State.B`: another member of the same enum-like family the file names."""
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.attr.isupper() and isinstance(node.ctx, ast.Load):
            family = sorted(self.families.get(node.value.id, set()))
            if len(family) > 1:
                other = family[(family.index(node.attr) + 1) % len(family)]
                after = ast.Attribute(node.value, other, ast.Load())
                if self._point(node, node, after):
                    return ast.copy_location(after, node)
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        self.generic_visit(node)
        if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            after = ast.Return(ast.Constant(None))
            if self._point(node, node, after):
                return ast.copy_location(after, node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.slice, ast.Slice):
            for part in ("lower", "upper"):
                bound = getattr(node.slice, part)
                if bound is None or isinstance(bound, ast.Constant):
                    continue  # constants are moved by visit_Constant already
                moved = copy.copy(node.slice)
                setattr(moved, part, ast.BinOp(bound, ast.Add(), ast.Constant(1)))
                after = ast.Subscript(node.value, moved, node.ctx)
                if self._point(node, node, after):
                    return ast.copy_location(after, node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
            swapped = ast.Call(node.func, [node.args[1], node.args[0], *node.args[2:]], node.keywords)
            if _show(node.args[0]) != _show(node.args[1]) and self._point(node, node, swapped):
                return ast.copy_location(swapped, node)
        if isinstance(node.func, ast.Name) and node.func.id in ("range", "min", "max", "sorted", "reversed",
                                                                "any", "all") and node.args:
            alternative = {"min": "max", "max": "min", "any": "all", "all": "any"}.get(node.func.id)
            if alternative is not None:
                after = ast.Call(ast.Name(alternative, ast.Load()), node.args, node.keywords)
                if self._point(node, node, after):
                    return ast.copy_location(after, node)
            if node.func.id == "range":
                last = node.args[-1] if len(node.args) <= 2 else node.args[1]
                moved = ast.BinOp(last, ast.Sub(), ast.Constant(1))
                args = list(node.args)
                args[args.index(last)] = moved
                after = ast.Call(node.func, args, node.keywords)
                if self._point(node, node, after):
                    return ast.copy_location(after, node)
        return node


def solution_source(lab: str) -> str:
    return (harness.LABS_DIR / lab / "solution.py").read_text()


def mutants(lab: str) -> list[Mutant]:
    tree = ast.parse(solution_source(lab))
    mutator = _Mutator(tree)
    mutator.visit(tree)
    return [Mutant(lab, i, line, change) for i, (line, change) in enumerate(mutator.points)]


def mutant_source(lab: str, index: int) -> str:
    tree = ast.parse(solution_source(lab))
    tree = _Mutator(tree, target=index).visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree))


# ---- running the checks on a mutant ----
def _checks_on(lab: str, path: str) -> str:
    """In the child: the name of the first check that fails on the mutant at `path`, or ""."""
    module = harness.load_lab_module(lab, path)
    for check in harness.lab_checks(lab, hidden=True):
        if not harness.run_check(check, module).passed:
            return check.name
    return ""


def run_mutant(mutant: Mutant, timeout: float, workdir: str) -> Result:
    """The mutant's checks in a forked child, killed after `timeout` seconds."""
    try:
        source = mutant_source(mutant.lab, mutant.index)
        compile(source, "mutant", "exec")
    except (SyntaxError, ValueError):
        return Result(mutant, "error", "the mutant does not compile")
    path = os.path.join(workdir, f"{mutant.lab}_m{mutant.index}.py")
    Path(path).write_text(source)
    read_end, write_end = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: quiet, runs the checks, reports through the pipe
        os.close(read_end)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            answer = "killed:" + by if (by := _checks_on(mutant.lab, path)) else "survived:"
        except BaseException as e:  # the mutant raised while loading
            answer = f"error:{type(e).__name__}"
        os.write(write_end, answer.encode())
        os._exit(0)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], timeout)
    chunks = b""
    if ready:
        while chunk := os.read(read_end, 65536):
            chunks += chunk
    os.close(read_end)
    if not ready or not chunks:
        with contextlib.suppress(ProcessLookupError):  # it may have just finished
            os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    seconds = time.monotonic() - started
    if not ready:
        return Result(mutant, "timeout", f"over {timeout:g} s", seconds)
    status, _, by = chunks.decode().partition(":")
    if status == "error":  # raised on import: the checks would fail it too (the module does not load)
        return Result(mutant, "killed", f"import raised {by}", seconds)
    return Result(mutant, status or "killed", by, seconds)


def sample(all_mutants: Sequence[Mutant], limit: int | None, seed: int) -> list[Mutant]:
    if limit is None or len(all_mutants) <= limit:
        return list(all_mutants)
    return sorted(random.Random(seed).sample(list(all_mutants), limit), key=lambda m: m.index)


def run_lab(lab: str, limit: int | None, seed: int, timeout: float) -> Iterator[Result]:
    for module in ("checks", "hidden_checks"):  # imported once, before forking, shared by every child
        __import__(f"labs.{lab}.{module}")
    with tempfile.TemporaryDirectory(prefix=f"mutants-{lab}-") as workdir:
        for mutant in sample(mutants(lab), limit, seed):
            yield run_mutant(mutant, timeout, workdir)


# ---- equivalent mutants: survivors whose change does not alter what the lab asks for ----
# lab -> {change text (as printed in the table): why it is equivalent}
_WORDING = "the wording around what the message must name (the README asks for the names, which are still there)"
_NON_NEGATIVE = ("every dividend and divisor is non-negative (allocatable <= 0 is handled before): signed and "
                 "unsigned division agree")
_GIVEN = "code the starter gives unchanged (not the student's to write); the checks use the module's own value"
_TYPEVAR = "a TypeVar's name shows only in typing's reprs: nothing the README states reads it"
_UNWORDED = "the message of an error the README asks for without wording it (the error's type is checked)"
_LAB04_DEFAULTS = (_GIVEN + " (the starter's `new` has the same defaults; the README states none and every check "
                   "passes both delays)")
_LAB05_INIT = ("new() always passes agingSeconds to the constructor (60 when args has none, which "
               "check_default_exactly_60 checks): the constructor's own default, given by the starter, is never "
               "used; the README states the default of args")
_LAB08_LENGTH = ("a normalize that returns the wrong number of scores still raises ValueError: the other guard "
                 "(the explicit length check, or zip(strict=True)) catches it; the README words no such error")
EQUIVALENT: dict[str, dict[str, str]] = {  # lab -> {"line N: change" (as the table prints it): why}
    "lab03_policy_function": {
        "line 20: `' is not a number'` -> `' is not a numberX'`": _WORDING + " (the checks find 'minimum' in it)",
        "line 24: `'must not be empty'` -> `'must not be emptyX'`": _WORDING + " (the checks find 'key' in it)",
    },
    "lab04_jitter_backoff": {
        "line 14: `'base_delay must not be negative, got '` -> `'base_delay must not be negative, got X'`": _WORDING,
        "line 16: `'max_delay must not be negative, got '` -> `'max_delay must not be negative, got X'`": _WORDING,
        "line 29: `min(self.max_delay, grown)` -> `min(grown, self.max_delay)`":
            "min of two numbers is symmetric: they differ only for a NaN delay, which the README does not cover",
        **{f"line 41: `{old}` -> `{new}`": _LAB04_DEFAULTS
           for old, new in (("0.005", "1.005"), ("0.005", "-0.995"), ("0.005", "0.0"),
                            ("1000.0", "1001.0"), ("1000.0", "999.0"), ("1000.0", "0.0"))},
    },
    "lab05_aging_queue_sort": {
        **{f"line 16: `60.0` -> `{new}`": _LAB05_INIT for new in ("61.0", "59.0", "0.0")},
        "line 18: `'agingSeconds must be positive, got '` -> `'agingSeconds must be positive, got X'`": _WORDING,
    },
    "lab06_latency_histogram": {
        "line 52: `'a quantile q must be in (0, 1], got '` -> `'a quantile q must be in (0, 1], got X'`": _UNWORDED,
    },
    "lab07_latest_queue": {
        "line 10: `'T'` -> `'TX'`": _TYPEVAR,
        "line 42: `remaining <= 0` -> `remaining < 0`":
            "differs only when the remainder is exactly 0.0: the mutant then calls wait(0), which returns at once, "
            "and the next pass finds the time up (or an item offered in that instant, which it may take)",
    },
    "lab08_plugin_set": {
        "line 11: `'T'` -> `'TX'`": _TYPEVAR,
        "line 59: `'a plugin set needs at least one scorer'` -> `'a plugin set needs at least one scorerX'`": _UNWORDED,
        "line 72: `raise ValueError(f'plugin {s.name}: normalize returned {len(raw)} s...` -> `(deleted)`":
            _LAB08_LENGTH,
        "line 73: `True` -> `False`": _LAB08_LENGTH,
        **{f"line 72: `{text!r}` -> `{text + 'X'!r}`": "the wording of a ValueError the README does not ask for"
           for text in ("plugin ", ": normalize returned ", " scores for ")},
    },
    "lab09_leak_finder": {
        "line 29: `'warmup must not be negative, got '` -> `'warmup must not be negative, got X'`": _WORDING,
    },
    "lab11_namespace_selector": {
        "line 46: `return ''` -> `return None`": "the caller tests `not text`: None and '' both restrict nothing",
        "line 62: `column is None or wanted is None` -> `column is None and wanted is None`":
            "label_value_id is None whenever label_column is; for an unknown value of a known label, "
            "`column == None` is False on every row, so every node fails either way",
    },
    "lab12_crd_label_preference": {
        "line 22: `'labelpreferences'` -> `'labelpreferencesX'`": _GIVEN,
        "line 26: `'The node label whose value is scored.'` -> `'The node label whose value is scored.X'`":
            "a description in the generated schema: documentation, not behaviour",
        "line 69: `np.minimum(total, MAX_NODE_SCORE)` -> `np.minimum(MAX_NODE_SCORE, total)`": "np.minimum is symmetric",
    },
    "lab13_wasm_scorer": {
        "line 8: `i32.const 1024` -> `i32.const 1025` (WebAssembly)":
            "the host writes and reads at input_offset(), whatever it is; WebAssembly allows unaligned i64 access",
        "line 8: `i32.const 1024` -> `i32.const 0` (WebAssembly)":
            "the host writes and reads at input_offset(), whatever it is",
        "line 19: `i64.div_s` -> `i64.div_u` (WebAssembly)": _NON_NEGATIVE,
        "line 32: `i64.div_s` -> `i64.div_u` (WebAssembly)": _NON_NEGATIVE,
        "line 30: `i32.ge_u` -> `i32.gt_u` (WebAssembly)":
            "not observable through the calling convention: one pass more, for row n, writes a value past the n "
            "scores the host reads, and the fuel per node is unchanged (a host that checked the memory after the "
            "scores would see it)",
    },
    "lab14_plugin_spans": {
        "line 19: `Factory = Callable[[Any, Any], Any]` -> `(deleted)`":
            "used only in annotations, which `from __future__ import annotations` never evaluates",
        "line 49: `': '` -> `': X'`": "the status description's wording: the README asks for status ERROR",
        "line 78: `1` -> `2`": "the longest-so-far starts below any duration (a span lasts 0 ns or more): -1 or -2 alike",
        "line 78: `took > longest.get(str(plugin), (-1, ''))[0]` -> `took >= longest.get(str(plugin), (-1, ''))[0]`":
            "which pod of two equally long spans is the worst: the README does not say",
        "line 81: `raise ValueError('no plugin spans among these spans')` -> `(deleted)`":
            "max() of no plugins raises ValueError itself; the README names no message",
        "line 81: `'no plugin spans among these spans'` -> `'no plugin spans among these spansX'`":
            "the message of a ValueError the README does not word",
    },
    "lab16_capacity_fence": {
        **{f"line {line}: `{text!r}` -> `{text + 'X'!r}`": _WORDING
           for line, texts in ((39, ("reserving ", " on node ", ": lost the write race ", " times")),
                               (50, ("releasing ", " on node ", ": lost the write race ", " times")))
           for text in texts},
        "line 59: `return False` -> `return None`": "_write's answer is only tested for truth, and None is false",
        "line 71: `'replica-a'` -> `'replica-aX'`": _GIVEN + " (the checks always name the holder)",
    },
}


def _load() -> dict[str, dict[str, object]]:
    return json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {}


def equivalent_reason(lab: str, recorded: dict[str, object]) -> str | None:
    return EQUIVALENT.get(lab, {}).get(f"line {recorded['line']}: {recorded['change']}")


def table(kept: dict[str, dict[str, object]]) -> str:
    """The table of every lab in `kept` (labs/mutants.json's shape)."""
    lines = ["| lab | mutants | run | killed | timed out | survived (equivalent) | killed of non-equivalent | seconds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for lab, entry in sorted(kept.items()):
        rows: list[dict[str, str]] = [r for r in entry["mutants"] if r["status"] != "error"]  # type: ignore[attr-defined]
        killed = sum(r["status"] == "killed" for r in rows)
        timeouts = sum(r["status"] == "timeout" for r in rows)
        survived = [r for r in rows if r["status"] == "survived"]
        equivalent = sum(equivalent_reason(lab, r) is not None for r in survived)
        counted = len(rows) - equivalent
        share = f"{(killed + timeouts) / counted:.0%}" if counted else "-"
        run = f"{len(rows)} (sample)" if len(rows) < int(entry["total"]) else str(len(rows))  # type: ignore[call-overload]
        lines.append(f"| {lab} | {entry['total']} | {run} | {killed} | {timeouts} | {len(survived)} ({equivalent}) "
                     f"| {share} | {float(entry['seconds']):.0f} |")  # type: ignore[arg-type]
    return "\n".join(lines)


def survivors(kept: dict[str, dict[str, object]]) -> str:
    rows = []
    for lab, entry in sorted(kept.items()):
        for r in entry["mutants"]:  # type: ignore[attr-defined]
            if r["status"] == "survived":
                reason = equivalent_reason(lab, r)
                verdict = f"equivalent: {reason}" if reason else "**not killed**"
                rows.append(f"- {lab} line {r['line']}: {r['change']}: {verdict}")
    return "\n".join(rows) or "(none)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("labs", nargs="*", help="labs to study (default: every lab)")
    parser.add_argument("--max", type=int, default=None, help="a seeded sample of at most this many mutants per lab")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds a mutant's checks may take")
    parser.add_argument("--write", action="store_true", help="keep the output in labs/MUTANTS.md and mutants.json")
    parser.add_argument("--rewrite", action="store_true",
                        help="only write labs/MUTANTS.md again from labs/mutants.json (after editing EQUIVALENT)")
    parser.add_argument("--only", nargs="+", metavar="LAB#INDEX",
                        help="run just these mutants and print their outcomes as JSON (the sample test's way in: a "
                             "fresh process to fork from, with no other test's threads in it)")
    args = parser.parse_args(argv)
    if args.only:
        outcomes = []
        with tempfile.TemporaryDirectory(prefix="mutants-only-") as workdir:
            for key in args.only:
                lab, _, index = key.partition("#")
                for module in ("checks", "hidden_checks"):
                    __import__(f"labs.{lab}.{module}")
                mutant = mutants(lab)[int(index)]
                result = run_mutant(mutant, args.timeout, workdir)
                outcomes.append({**asdict(mutant), "status": result.status, "by": result.by})
        print(json.dumps(outcomes))
        return 0
    if args.rewrite:
        write(_load())
        print(table(_load()))
        return 0
    labs = args.labs or [lab for lab in harness.lab_names() if harness.has_module(lab, "solution")]
    unknown = sorted(set(labs) - set(harness.lab_names()))
    if unknown:
        parser.error(f"no such lab: {', '.join(unknown)}")
    kept = _load() if args.write else {}
    for entry in kept.values():  # runs recorded before the mutants' own seconds were kept
        entry.setdefault("solution", "")
    for lab in labs:
        lab_started = time.monotonic()
        results = []
        for result in run_lab(lab, args.max, args.seed, args.timeout):
            results.append(result)
            if result.status in ("survived", "timeout"):
                print(f"  {lab} line {result.mutant.line}: {result.mutant.change}: {result.status}", flush=True)
        seconds = time.monotonic() - lab_started
        kept[lab] = {"total": len(mutants(lab)), "seconds": round(seconds, 1), "solution": solution_digest(lab),
                     "mutants": [{**asdict(r.mutant), "status": r.status, "by": r.by, "seconds": round(r.seconds, 2)}
                                 for r in results]}
        print(f"{lab}: {len(results)} mutants in {seconds:.0f} s", flush=True)
    text = table(kept)
    print(text)
    total = sum(float(e["seconds"]) for e in kept.values())  # type: ignore[arg-type]
    print(f"\n{total:.0f} s in all")
    if args.write:
        write(kept)
    return 0


def solution_digest(lab: str) -> str:
    """Which solution the recorded mutants were made from (their indices mean nothing for another)."""
    return hashlib.sha256(solution_source(lab).encode()).hexdigest()[:16]


def write(kept: dict[str, dict[str, object]]) -> None:
    """labs/mutants.json and the table in labs/MUTANTS.md, from `kept` (with EQUIVALENT as it is now)."""
    text = table(kept)
    total = sum(float(e["seconds"]) for e in kept.values())  # type: ignore[arg-type]
    body = (f"# The labs' checks under mutation\n\nWritten by `make lab-mutants` (`python -m labs.mutants "
            f"--write`, labs one at a time); {total:.0f} s of checks in all on the last runs. A mutant "
            f"is the instructor's solution with one small change; the lab's public and hidden checks should "
            f"fail on it. Timed-out mutants count as killed (the run stops there). Equivalent mutants (a change "
            f"that does not alter what the lab asks for) are listed with why in labs/mutants.py "
            f"(EQUIVALENT) and left out of the share.\n\n{text}\n\n## Survivors\n\n{survivors(kept)}\n")
    RESULTS_MD.write_text(body)
    RESULTS_JSON.write_text(_compact_json(kept))


def _compact_json(kept: dict[str, dict[str, object]]) -> str:
    """One line per mutant: a diff after a new run shows which mutants changed status."""
    labs = []
    for lab, entry in sorted(kept.items()):
        head = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in entry.items() if k != "mutants")
        rows = ",\n".join(f"   {json.dumps(m)}" for m in entry["mutants"])  # type: ignore[attr-defined]
        labs.append(f" {json.dumps(lab)}: {{{head}, \"mutants\": [\n{rows}\n ]}}")
    return "{\n" + ",\n".join(labs) + "\n}\n"

if __name__ == "__main__":
    sys.exit(main())
