"""Checks that teach: what every lab's checks run on.

A lab lists its checks (`Check`: a name, a function that raises AssertionError with what it
expected and what came back, a hint, points). `run_checks` runs every one of them, whatever an
earlier one did, and turns anything the student's code raises into a failed check that names the
line of the student's file and gives the hint, instead of a traceback that ends the run.

Where a lab's code comes from: `load_lab_module(lab, "exercise")` (the student's starter, edited),
`"solution"` (the instructor's, absent from student copies) or a path to a .py file (a submission,
as the grader sees it). Hidden checks live in the lab's `hidden_checks.py`, which student copies
leave out; `lab_checks(lab, hidden=True)` adds them when present.
"""

from __future__ import annotations

import importlib
import importlib.util
import linecache
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

LABS_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[ModuleType], None]
    hint: str
    points: int = 1


@dataclass(frozen=True)
class Outcome:
    check: Check
    passed: bool
    message: str = ""  # what was expected and what came back, or what the code raised
    where: str = ""  # "exercise.py line 21: return 100" when the student's code raised

    def __str__(self) -> str:
        if self.passed:
            return f"  PASS {self.check.name}"
        lines = [f"  FAIL {self.check.name}: {self.message}"]
        if self.where:
            lines.append(f"       at {self.where}")
        lines.append(f"       hint: {self.check.hint}")
        return "\n".join(lines)


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.passed for o in self.outcomes)

    @property
    def passed(self) -> list[str]:
        return [o.check.name for o in self.outcomes if o.passed]

    @property
    def failed(self) -> list[tuple[str, str]]:
        return [(o.check.name, o.message) for o in self.outcomes if not o.passed]

    @property
    def score(self) -> tuple[int, int]:
        return (sum(o.check.points for o in self.outcomes if o.passed), sum(o.check.points for o in self.outcomes))

    def __str__(self) -> str:
        head = f"{len(self.passed)}/{len(self.outcomes)} checks pass"
        return "\n".join([head, *(str(o) for o in self.outcomes)])


def _student_frame(tb: TracebackType | None, student_file: str | None) -> str:
    """The last line of the student's file in a traceback, as 'exercise.py line N: source'."""
    if student_file is None:
        return ""
    found = ""
    for frame, lineno in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if Path(filename).resolve() == Path(student_file).resolve():
            source = linecache.getline(filename, lineno).strip()
            found = f"{Path(filename).name} line {lineno}: {source}"
    return found


def run_check(check: Check, module: ModuleType) -> Outcome:
    student_file = getattr(module, "__file__", None)
    try:
        check.run(module)
    except AssertionError as e:
        where = _student_frame(e.__traceback__, student_file)
        return Outcome(check, False, str(e) or "a check failed without saying why", where)
    except NotImplementedError as e:
        where = _student_frame(e.__traceback__, student_file)
        return Outcome(check, False, f"not written yet (NotImplementedError{': ' + str(e) if str(e) else ''})", where)
    except Exception as e:  # the student's code raised: report it as a failed check, never crash the run
        where = _student_frame(e.__traceback__, student_file)
        if not where:  # raised outside the student's file: say so rather than blame their code
            return Outcome(check, False, f"the check stopped with {type(e).__name__}: {e}")
        return Outcome(check, False, f"your code raised {type(e).__name__}: {e}", where)
    return Outcome(check, True)


def run_checks(checks: Sequence[Check], module: ModuleType) -> Report:
    return Report([run_check(c, module) for c in checks])


# ---- where a lab's code and checks come from ----
def lab_names() -> list[str]:
    return sorted(p.name for p in LABS_DIR.iterdir() if p.is_dir() and (p / "checks.py").exists())


def has_module(lab: str, name: str) -> bool:
    return (LABS_DIR / lab / f"{name}.py").exists()


def load_lab_module(lab: str, which: str | ModuleType = "exercise") -> ModuleType:
    """`which`: "exercise", "solution", a module, or the path of a .py file (a submission)."""
    if isinstance(which, ModuleType):
        return which
    if which.endswith(".py"):
        path = Path(which).resolve()
        if not path.exists():
            raise FileNotFoundError(f"no file {path}: hand in your exercise.py beside the notebook")
        name = f"_submission_{lab}_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(f"labs.{lab}.{which}")


def lab_checks(lab: str, hidden: bool = False) -> list[Check]:
    checks: list[Check] = list(importlib.import_module(f"labs.{lab}.checks").CHECKS)
    if hidden:
        if not has_module(lab, "hidden_checks"):
            raise FileNotFoundError(f"labs/{lab}/hidden_checks.py is not in this copy (instructors only)")
        checks += importlib.import_module(f"labs.{lab}.hidden_checks").CHECKS
    return checks


def find_check(lab: str, name: str, hidden: bool = False) -> Check:
    for check in lab_checks(lab, hidden):
        if check.name == name:
            return check
    raise KeyError(f"lab {lab} has no check named {name!r}")


def grade_check(lab: str, name: str, hidden: bool = False, submission: str = "exercise.py") -> None:
    """One autograded cell: run one check on the submitted file; raise (score 0) with the teaching
    message when it fails, print PASS when it passes."""
    outcome = run_check(find_check(lab, name, hidden), load_lab_module(lab, submission))
    print(outcome)
    if not outcome.passed:
        raise AssertionError(str(outcome))


def main(lab: str, argv: Sequence[str]) -> int:
    """`python -m labs.<lab>.checks [exercise|solution|path.py] [--hidden]`"""
    args = [a for a in argv if a != "--hidden"]
    which = args[0] if args else "exercise"
    report = run_checks(lab_checks(lab, hidden="--hidden" in argv), load_lab_module(lab, which))
    print(report)
    return 0 if report.ok else 1


def schedule_pods(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]], *, config: dict[str, Any],
                  registry: Any = None, objects: Sequence[tuple[Any, dict[str, Any]]] = (), seed: int = 0,
                  timeout: float = 20.0) -> dict[str, str | None]:
    """What a lab's plugin does inside a real scheduler: an embedded cluster with `objects`
    ((resource, object) pairs, created first: namespaces, custom resources...) and `nodes`, a
    Scheduler with `config` and `registry` (its loop off), the `pods` created and queued, one
    scheduling cycle per pod, the bindings awaited. Returns {namespace/name: the pod's node or None}.
    Waits are deadline-based, never sleeps of a fixed length, so a busy machine only makes it slower."""
    import time

    from minisched.cluster.embedded import EmbeddedCluster
    from minisched.scheduler.scheduler import Scheduler

    cluster = EmbeddedCluster()
    try:
        for resource, obj in objects:
            cluster.create(resource, obj)
        for node in nodes:
            cluster.create("nodes", node)
        sched = Scheduler(cluster, config=config, registry=registry, seed=seed)
        sched.start(loop=False)
        try:
            for pod in pods:
                cluster.create("pods", pod)
            deadline = time.monotonic() + timeout
            while sum(sched.pending_pods().values()) < len(pods):
                if time.monotonic() > deadline:
                    raise AssertionError(f"the scheduler queued {sum(sched.pending_pods().values())} of "
                                         f"{len(pods)} pods within {timeout:g} s")
                time.sleep(0.01)
            for _ in pods:
                sched.schedule_one(timeout=5)
            sched.wait_for_bindings(timeout=timeout)
        finally:
            sched.stop()
        namespaces = sorted({p["metadata"].get("namespace") or "default" for p in pods})
        return {f"{ns}/{p['metadata']['name']}": p["spec"].get("nodeName")
                for ns in namespaces for p in cluster.list("pods", ns)["items"]}
    finally:
        cluster.close()
