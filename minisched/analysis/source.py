"""Lines of code, counted the way a "N lines" claim should be: no blank lines, no comments, no
docstrings (chapter 1 measures minisched/tiny.py against the book's "under 200 lines")."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def docstring_lines(source: str) -> set[int]:
    """First lines of the module's, classes' and functions' docstrings."""
    starts: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                starts.add(first.value.lineno)
    return starts


def count_code_lines(source: str) -> int:
    """Lines holding at least one token that is neither a comment nor part of a docstring."""
    docstrings = docstring_lines(source)
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in _NOT_CODE or (tok.type == tokenize.STRING and tok.start[0] in docstrings):
            continue
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines)


def code_lines(path: str | Path) -> int:
    return count_code_lines(Path(path).read_text(encoding="utf-8"))
