"""The notebook harness: every chapter and lab notebook is checked the same way.

- `check DIR...`: each notebook must be normalized (see `normalize`) and, executed afresh on the
  embedded cluster with nbval in lax mode, must reproduce the stored output of every cell marked
  `# NBVAL_CHECK_OUTPUT` (after the volatile text in `sanitize` is masked), in under 60 s.
- `fix PATH...`: normalize in place; with `--execute`, run first and store the fresh outputs.
- `run --backend SETTING DIR...`: execute against another backend (MINISCHED_BACKEND=SETTING),
  reporting failures and run times without comparing outputs.
- `prose PATH...` (`--explain`): every measured figure in markdown is in the outputs, set by code,
  or tagged `*(quoted: SOURCE)*` (`prose`).
- `rules PATH...`: the chapter rules read from the files, prose included (`rules`); the tests in
  tests/notebooks/test_chapter_rules.py hold every chapter and lab to them.

`python -m minisched.notebooks --help` lists the options.
"""

from __future__ import annotations

from minisched.notebooks.check import NotebookResult, check_notebook, find_notebooks
from minisched.notebooks.execute import execute_notebook
from minisched.notebooks.normalize import is_normalized, normalize, normalize_file, normalized_text
from minisched.notebooks.prose import check_prose, judge_prose
from minisched.notebooks.rules import RULES, check_rules
from minisched.notebooks.sanitize import SANITIZERS, sanitize, sanitize_config

__all__ = [
    "NotebookResult",
    "RULES",
    "SANITIZERS",
    "check_notebook",
    "check_prose",
    "check_rules",
    "execute_notebook",
    "find_notebooks",
    "is_normalized",
    "judge_prose",
    "normalize",
    "normalize_file",
    "normalized_text",
    "sanitize",
    "sanitize_config",
]
