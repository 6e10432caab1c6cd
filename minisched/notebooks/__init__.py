"""The notebook harness: every chapter and lab notebook is checked the same way.

- `check DIR...`: each notebook must be normalized (see `normalize`) and, executed afresh on the
  embedded cluster with nbval in lax mode, must reproduce the stored output of every cell marked
  `# NBVAL_CHECK_OUTPUT` (after the volatile text in `sanitize` is masked), in under 60 s.
- `fix PATH...`: normalize in place; with `--execute`, run first and store the fresh outputs.
- `run --backend SETTING DIR...`: execute against another backend (MINISCHED_BACKEND=SETTING),
  reporting failures and run times without comparing outputs.

`python -m minisched.notebooks --help` lists the options.
"""

from __future__ import annotations

from minisched.notebooks.check import NotebookResult, check_notebook, find_notebooks
from minisched.notebooks.execute import execute_notebook
from minisched.notebooks.normalize import is_normalized, normalize, normalize_file, normalized_text
from minisched.notebooks.sanitize import SANITIZERS, sanitize, sanitize_config

__all__ = [
    "NotebookResult",
    "SANITIZERS",
    "check_notebook",
    "execute_notebook",
    "find_notebooks",
    "is_normalized",
    "normalize",
    "normalize_file",
    "normalized_text",
    "sanitize",
    "sanitize_config",
]
