"""Run mypy on a snippet, as `make lint` runs it on minisched: for showing, not claiming, what the
type checker accepts (chapter 2.3 checks a reconciler against the `Reconciler[O, R]` protocol).

mypy is a test dependency (`pip install -e '.[test]'`), imported only when a check runs.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import minisched

# Two reconcilers assigned to Reconciler[MiniReplicaSet, dict]: one takes a string instead of a
# Request and declares the wrong primary kind, the other is the real MiniReplicaSetReconciler.
RECONCILER_CONTRACT_EXAMPLE = '''\
from minisched.controllers import replicaset as mrs
from minisched.controllers.reconciler import Kind, Reconciler, Result, raw_kind
from minisched.resources import PODS

class Wrong:
    @property
    def primary(self) -> Kind[dict]:
        return raw_kind(PODS)
    @property
    def owned(self) -> None:
        return None
    def reconcile(self, request: str) -> Result:
        return Result()

def wrong(r: Wrong) -> Reconciler[mrs.MiniReplicaSet, dict]:
    return r

def right(r: mrs.MiniReplicaSetReconciler) -> Reconciler[mrs.MiniReplicaSet, dict]:
    return r
'''


@dataclass(frozen=True)
class TypeCheck:
    status: int  # mypy's exit status: 0 clean, 1 errors found, 2 mypy itself failed
    messages: list[str]  # "snippet.py:LINE: error|note: ..."

    @property
    def errors(self) -> list[str]:
        return [m for m in self.messages if ": error: " in m]


def check_types(source: str, name: str = "snippet.py") -> TypeCheck:
    """mypy's verdict on `source`, importing minisched from this checkout (silently: only the
    snippet's own lines are reported)."""
    from mypy import api as mypy_api

    root = str(Path(minisched.__file__).resolve().parents[1])
    previous = os.environ.get("MYPYPATH")
    with tempfile.TemporaryDirectory(prefix="minisched-typecheck-") as tmp:
        path = Path(tmp, name)
        path.write_text(source)
        os.environ["MYPYPATH"] = root  # an editable install is not always visible to mypy
        try:
            report, errors, status = mypy_api.run([
                str(path), "--cache-dir", str(Path(tmp, "cache")), "--follow-imports=silent",
                "--no-error-summary", "--no-color-output", "--hide-error-context",
            ])  # fmt: skip
        finally:
            if previous is None:
                os.environ.pop("MYPYPATH", None)
            else:
                os.environ["MYPYPATH"] = previous
    if status == 2:
        raise RuntimeError(f"mypy failed: {errors or report}")
    return TypeCheck(status, [line.replace(str(path), name) for line in report.strip().splitlines() if line])
