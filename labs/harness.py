"""Checks that teach: what every lab's checks run on.

A lab lists its checks (`Check`: a name, a function that raises AssertionError with what it
expected and what came back, a hint, points). `run_checks` runs every one of them, whatever an
earlier one did, and turns anything the student's code raises into a failed check that names the
line of the student's file and gives the hint, instead of a traceback that ends the run.

Where a lab's code comes from: `load_lab_module(lab, "exercise")` (the student's starter, edited),
`"solution"` (the instructor's, absent from student copies) or a path to a .py file (a submission,
as the grader sees it). Hidden checks live in the lab's `hidden_checks.py`, which student copies
leave out; `lab_checks(lab, hidden=True)` adds them when present.

What checks share: `running_scheduler` (an embedded cluster and a started Scheduler with the
student's plugins, closed whatever happens), `placements`, `wait_until` (deadline-based polling,
generous for loaded machines), `in_threads` (the student's code on several threads at once,
its exceptions raised in the checking thread), `Rendezvous` (two threads made to meet inside the
student's read-modify-write, so a missing lock loses an update every run, not once in a while)
and `call_within` (a call the README says never blocks, failed in seconds when it does).

Time limits. Every check runs on a worker thread of its own with a deadline (`Check.timeout`,
`DEFAULT_TIMEOUT` when None); a check still running at its deadline is abandoned and reported as a
failure that names it, the limit and the student's line it was stuck on, and the run goes on with
the next check. Why a daemon thread and not a subprocess: checks hand the student's *module
object* to the check (the mistake catalogue builds modules in memory, which cannot be sent to
another process), a subprocess per check would re-import numpy and minisched each time (about a
second, times some 80 checks), and grade_check runs inside a notebook's kernel. The price: Python
cannot kill a thread, so an abandoned check is asked to stop instead (CheckAbandoned raised in it
at its next bytecode: a loop in Python code ends there; a thread blocked in a C call ends when the
call returns, and costs no CPU meanwhile); it holds no shared state, because each check builds its own embedded cluster and
scheduler (no cluster is shared between checks), and the switch interval a concurrency check may
have lowered is put back when the check is abandoned.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import linecache
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minisched.clock import Clock
    from minisched.cluster.embedded import EmbeddedCluster
    from minisched.scheduler.scheduler import Scheduler

LABS_DIR = Path(__file__).resolve().parent


DEFAULT_TIMEOUT = 60.0  # seconds: generous for a check that starts a scheduler on a loaded machine


def default_timeout() -> float:
    """DEFAULT_TIMEOUT, or MINISCHED_CHECK_TIMEOUT (seconds) when set: a grader with a large class
    may want hung submissions to give up sooner."""
    text = os.environ.get("MINISCHED_CHECK_TIMEOUT")
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"MINISCHED_CHECK_TIMEOUT must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise ValueError(f"MINISCHED_CHECK_TIMEOUT must be positive, got {text!r}")
    return value


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[ModuleType], None]
    hint: str
    points: int = 1
    timeout: float | None = None  # seconds before the check counts as hung; None: default_timeout()

    @property
    def limit(self) -> float:
        return default_timeout() if self.timeout is None else self.timeout


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


def _outcome_of(check: Check, module: ModuleType) -> Outcome:
    """Run one check here, in this thread, and turn what happened into an Outcome."""
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


def _stuck_at(thread: threading.Thread, student_file: str | None) -> str:
    """Where a hung check's thread is now, as 'exercise.py line N: source' (the student's last frame)."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None or student_file is None:
        return ""
    found = ""
    for f, lineno in reversed(list(traceback.walk_stack(frame))):  # outermost first, so the last match is deepest
        if Path(f.f_code.co_filename).resolve() == Path(student_file).resolve():
            found = f"{Path(f.f_code.co_filename).name} line {lineno}: {linecache.getline(f.f_code.co_filename, lineno).strip()}"
    return found


def run_check(check: Check, module: ModuleType) -> Outcome:
    """Run one check on a daemon worker thread with its time limit; a check still running then is
    abandoned (threads cannot be killed: see the module's docstring) and reported as hung."""
    result: list[Outcome] = []
    interval = sys.getswitchinterval()
    def work() -> None:
        with contextlib.suppress(CheckAbandoned):  # stopped past its limit: its outcome is already told
            result.append(_outcome_of(check, module))

    worker = threading.Thread(target=work, name=f"check: {check.name}", daemon=True)
    worker.start()
    worker.join(check.limit)
    if result:
        return result[0]
    sys.setswitchinterval(interval)  # in case the abandoned check had lowered it (in_threads)
    where = _stuck_at(worker, getattr(module, "__file__", None))
    _stop_abandoned(worker)
    return Outcome(check, False, f"timed out: the check {check.name!r} was still running after its limit of "
                                 f"{check.limit:g} s (your code may loop for ever or wait on something that never "
                                 "comes); the remaining checks go on", where)


class CheckAbandoned(BaseException):
    """Raised inside a check's thread once its time limit has passed. A BaseException, so that a
    student's `except Exception` in a retry loop does not swallow it."""


def _stop_abandoned(worker: threading.Thread) -> None:
    """Ask an abandoned check's thread to stop: CheckAbandoned is raised in it at its next Python
    bytecode (CPython's PyThreadState_SetAsyncExc). A thread cannot be killed, but a loop in the
    student's Python code runs bytecode, so this ends it; one blocked inside a C call (a lock or an
    event wait without a timeout) stops when the call returns, and costs no CPU meanwhile. Without
    this, a busy loop kept a core and the interpreter's lock for the rest of the process (the next
    checks, a grading kernel's other labs, the rest of a test session)."""
    if worker.ident is not None and worker.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(CheckAbandoned))


def run_checks(checks: Sequence[Check], module: ModuleType,
               on_outcome: Callable[[Outcome], None] | None = None) -> Report:
    """Run every check in order; `on_outcome` sees each result as soon as its check finishes."""
    report = Report()
    for check in checks:
        outcome = run_check(check, module)
        report.outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
    return report


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
    report = run_checks(lab_checks(lab, hidden="--hidden" in argv), load_lab_module(lab, which),
                        on_outcome=lambda outcome: print(outcome, flush=True))  # as each check finishes
    print(f"{len(report.passed)}/{len(report.outcomes)} checks pass", flush=True)
    return 0 if report.ok else 1


# ---- threads and a scheduler for a check to run the student's code in ----
def in_threads(work: Callable[[int], None], threads: int, *, switch_interval: float | None = None) -> None:
    """Run `work(k)` for k in range(threads), each on its own thread, started together, and wait
    for all. The first exception one of them raised is raised here, in the checking thread, so the
    check reports the student's line. With `switch_interval` the interpreter switches threads that
    often meanwhile, so that an unguarded read-modify-write loses updates where a check can see."""
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        barrier.wait()
        try:
            work(k)
        except BaseException as e:
            errors.append(e)

    interval = sys.getswitchinterval()
    if switch_interval is not None:
        sys.setswitchinterval(switch_interval)
    try:
        running = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
        for t in running:
            t.start()
        for t in running:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    if errors:
        raise errors[0]


class Rendezvous:
    """A point inside the student's code where two threads are made to meet, so that a check forces
    the interleaving a missing lock loses an update to, every run instead of once in a while.

    A check hands the student's code an object (an item to hash, a number to compare or add) whose
    hook calls `meet()`. The hook must run *between* the read and the write of a read-modify-write
    (`at`: which of a thread's calls in a round that is, e.g. 2 for an item's second hash, the one
    `d[item] = n + 1` makes after `n = d.get(item, 0)`): both threads have then read the old value
    and, without a lock, one update is lost every time. With a lock the second thread is blocked
    outside, the first one's wait runs out after `patience` seconds and both go on in turn."""

    def __init__(self, parties: int = 2, *, at: int = 1, patience: float = 0.3) -> None:
        self.parties, self.at, self.patience = parties, at, patience
        self._barrier = threading.Barrier(parties)
        self._calls: dict[int, int] = {}
        self._guard = threading.Lock()
        self.armed = False

    def arm(self) -> None:
        """A new round: every thread's `at`-th call to meet() from now waits for the others."""
        with self._guard:
            self._barrier = threading.Barrier(self.parties)
            self._calls.clear()
            self.armed = True

    def disarm(self) -> None:
        with self._guard:
            self.armed = False

    def meet(self) -> None:
        with self._guard:
            if not self.armed:
                return
            me = threading.get_ident()
            self._calls[me] = self._calls.get(me, 0) + 1
            if self._calls[me] != self.at:
                return
            barrier = self._barrier
        with contextlib.suppress(threading.BrokenBarrierError):  # the other is held outside by a lock: fine
            barrier.wait(self.patience)


def call_within(seconds: float, what: str, call: Callable[[], Any], advice: str = "it blocked") -> Any:
    """`call()` on a daemon thread; AssertionError naming `what` when it has not returned within
    `seconds` (for calls the README says must never block: the check fails at once with a message
    saying so, instead of waiting for the check's own time limit). Exceptions are raised here."""
    result: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(call())
        except CheckAbandoned:
            pass  # stopped past its limit: the failure is already reported
        except BaseException as e:
            errors.append(e)

    worker = threading.Thread(target=run, name=what, daemon=True)
    worker.start()
    worker.join(seconds)
    if errors:
        raise errors[0]
    if worker.is_alive():
        _stop_abandoned(worker)  # a blocking call that spins would keep a core for the rest of the process
        raise AssertionError(f"{what} did not return within {seconds:g} s: {advice}")
    return result[0]


def wait_until(cond: Callable[[], bool], why: str, timeout: float = 10.0) -> None:
    """Poll `cond` until it holds; AssertionError(`why`) after `timeout` real seconds (generous: the
    checks run on loaded machines, and a condition that holds returns at once)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(why)
        time.sleep(0.01)


@contextmanager
def running_scheduler(
    *,
    nodes: Sequence[dict[str, Any]] = (),
    objects: Sequence[tuple[str, dict[str, Any]]] = (),
    config: Mapping[str, Any] | None = None,
    plugins: Mapping[str, Any] | None = None,
    clock: Clock | None = None,
    loop: bool = False,
    **scheduler_args: Any,
) -> Iterator[tuple[EmbeddedCluster, Scheduler]]:
    """An embedded cluster holding `nodes` and `objects` ((resource, object) pairs, created first),
    and a started Scheduler on it with the in-tree plugins plus `plugins` (name -> factory, the
    student's) under `config`. Without `loop` the check drives it with `sched.schedule_one()`.
    Both are stopped and closed when the block ends, whatever the student's code did."""
    from minisched.cluster.embedded import EmbeddedCluster
    from minisched.scheduler.plugins import in_tree_registry
    from minisched.scheduler.scheduler import Scheduler

    cluster = EmbeddedCluster(clock=clock) if clock is not None else EmbeddedCluster()
    sched: Scheduler | None = None
    try:
        for node in nodes:
            cluster.create("nodes", node)
        for resource, obj in objects:
            cluster.create(resource, obj)
        registry = in_tree_registry().merged(dict(plugins or {}))
        sched = Scheduler(cluster, config=config, registry=registry, clock=clock, seed=0, **scheduler_args)
        sched.start(loop=loop)
        yield cluster, sched
    finally:
        if sched is not None:
            sched.stop()
        cluster.close()


def placements(cluster: EmbeddedCluster, namespace: str = "default") -> dict[str, str | None]:
    """Pod name -> the node it is bound to (None while pending)."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in cluster.list("pods", namespace)["items"]}


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
