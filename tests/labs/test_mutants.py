"""The mutation study's findings hold: a seeded sample of the mutants labs/mutants.json records as
killed, a few per lab, is still killed by that lab's checks (a check weakened since the last
`make lab-mutants` shows up here), and the mutator itself makes what it says it makes."""

from __future__ import annotations

import ast
import json
import os
import random
import subprocess
import sys

import pytest

from labs import harness, mutants

PER_LAB = 3
LABS = [lab for lab in harness.lab_names() if harness.has_module(lab, "solution")]


def _kept() -> dict[str, dict[str, object]]:
    if not mutants.RESULTS_JSON.exists():
        pytest.skip("labs/mutants.json is not in this copy (run make lab-mutants)")
    kept: dict[str, dict[str, object]] = json.loads(mutants.RESULTS_JSON.read_text())
    return kept


def _sample(lab: str) -> list[dict[str, object]]:
    entry = _kept().get(lab)
    if entry is None:
        pytest.skip(f"{lab} is not in labs/mutants.json yet (make lab-mutants)")
    # killed quickly: a check that fails at once (the slow kills wait out a deadline; the full study has them)
    killed = [m for m in entry["mutants"]  # type: ignore[attr-defined]
              if m["status"] == "killed" and float(m.get("seconds", 0)) < 3]
    return random.Random(f"{lab}-25").sample(killed, min(PER_LAB, len(killed)))


@pytest.mark.parametrize("lab", LABS)
def test_a_sample_of_killed_mutants_is_still_killed(lab: str) -> None:
    if not harness.has_module(lab, "hidden_checks"):
        pytest.skip(f"labs/{lab}: the hidden checks are not in this copy")
    if _kept().get(lab, {}).get("solution") != mutants.solution_digest(lab):
        pytest.skip(f"labs/{lab}/solution.py changed since labs/mutants.json was written: run make lab-mutants")
    sample = _sample(lab)
    # a fresh interpreter forks the mutants: this process may hold other tests' threads (and their locks)
    ran = subprocess.run([sys.executable, "-m", "labs.mutants", "--timeout", "60", "--only",
                          *(f"{lab}#{m['index']}" for m in sample)],
                         capture_output=True, text=True, timeout=600, cwd=harness.LABS_DIR.parent,
                         env={**os.environ, "PYTHONPATH": str(harness.LABS_DIR.parent)})
    assert ran.returncode == 0, ran.stderr[-3000:]
    for recorded, now in zip(sample, json.loads(ran.stdout), strict=True):
        assert now["change"] == recorded["change"], (
            f"{lab}: mutant {recorded['index']} was {recorded['change']}, the mutator now makes {now['change']} "
            f"there: run make lab-mutants again")
        assert now["status"] in ("killed", "timeout"), (
            f"{lab} line {now['line']}: {now['change']} passes every check now; it was killed by {recorded['by']!r}")


def test_the_mutator_makes_each_kind_of_change() -> None:
    source = '''
def f(a, b, items):
    if a < b and not items:
        return a + 1
    total = sum(items[1:b])
    for i in range(a):
        total -= i
    return max(total, 0)
'''
    tree = ast.parse(source)
    mutator = mutants._Mutator(tree)
    mutator.visit(tree)
    changes = [change for _, change in mutator.points]
    for expected in ("`a < b` -> `a <= b`", "`a < b and (not items)` -> `a < b or not items`",
                     "`not items` -> `items`", "`a + 1` -> `a - 1`", "`1` -> `2`", "`return a + 1` -> `return None`",
                     "`total = sum(items[1:b])` -> `(deleted)`", "`items[1:b]` -> `items[1:b + 1]`",
                     "`range(a)` -> `range(a - 1)`", "`max(total, 0)` -> `min(total, 0)`",
                     "`max(total, 0)` -> `max(0, total)`", "`total -= i` -> `total += i`"):
        assert expected in changes, f"{expected} not among {changes}"
    for index in range(len(changes)):  # every point makes a module that compiles and differs
        tree = mutants._Mutator(ast.parse(source), target=index).visit(ast.parse(source))
        assert ast.unparse(tree) != ast.unparse(ast.parse(source))
