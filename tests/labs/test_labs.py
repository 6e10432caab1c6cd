"""Every lab's checks must pass on the instructor's solution, fail on the untouched starter (every
check: the starter has none of the logic), and catch plausible mistakes. A check that cannot fail
would tell students they are done when they are not. In a student copy (no solution.py, no
hidden_checks.py) the solution-dependent tests skip with that reason instead of failing to collect."""

from __future__ import annotations

import types

import pytest

from labs import harness

try:  # the mistake catalogue is instructors' material: student copies leave it out
    from tests.labs.mistakes import MISTAKES
except ModuleNotFoundError:
    MISTAKES = {}

LABS = harness.lab_names()


def _solution(lab: str) -> types.ModuleType:
    if not (harness.has_module(lab, "solution") and harness.has_module(lab, "hidden_checks")):
        pytest.skip(f"labs/{lab}: the instructor's solution and hidden checks are not in this copy")
    return harness.load_lab_module(lab, "solution")


def test_every_lab_has_mistakes_listed() -> None:
    assert LABS, "no labs found"
    if not MISTAKES:
        pytest.skip("tests/labs/mistakes.py is not in this copy (instructors only)")
    assert sorted(MISTAKES) == LABS
    assert all(len(m) >= 2 for m in MISTAKES.values())


@pytest.mark.parametrize("lab", LABS)
def test_solution_passes_every_check(lab: str) -> None:
    solution = _solution(lab)
    report = harness.run_checks(harness.lab_checks(lab, hidden=True), solution)
    assert report.ok, str(report)


@pytest.mark.parametrize("lab", LABS)
def test_starter_fails_every_check(lab: str) -> None:
    report = harness.run_checks(harness.lab_checks(lab, hidden=harness.has_module(lab, "hidden_checks")),
                                harness.load_lab_module(lab, "exercise"))
    assert not report.passed, f"the untouched starter passes {report.passed}"
    for outcome in report.outcomes:  # each failure is a message, never a traceback
        assert outcome.message and "Traceback" not in outcome.message


@pytest.mark.parametrize(("lab", "mistake"), [(lab, m) for lab, ms in MISTAKES.items() for m in ms],
                         ids=lambda v: getattr(v, "__name__", v))
def test_checks_catch_a_plausible_mistake(lab: str, mistake: harness.Check) -> None:
    broken = mistake(_solution(lab))  # type: ignore[operator]
    report = harness.run_checks(harness.lab_checks(lab, hidden=True), broken)
    assert not report.ok, f"{mistake.__name__} passes every check of {lab}"  # type: ignore[attr-defined]


def test_an_exception_in_student_code_is_a_failed_check_with_its_line(tmp_path) -> None:
    submission = tmp_path / "exercise.py"
    source = harness.LABS_DIR.joinpath("lab01_spot_avoidance", "exercise.py").read_text()
    source = source.replace('    raise NotImplementedError("node_score")  # your code here',
                            '    return pod.labels["missing"]  # a typo')
    submission.write_text(source)
    report = harness.run_checks(harness.lab_checks("lab01_spot_avoidance"),
                                harness.load_lab_module("lab01_spot_avoidance", str(submission)))
    outcome = report.outcomes[0]
    assert not outcome.passed and outcome.message.startswith("your code raised")
    assert outcome.where.startswith("exercise.py line ") and 'pod.labels["missing"]' in outcome.where
    assert len(report.outcomes) == 3  # the later checks still ran
    assert "hint:" in str(report)


def test_grade_check_raises_with_the_teaching_message(tmp_path, monkeypatch) -> None:
    (tmp_path / "exercise.py").write_text(harness.LABS_DIR.joinpath("lab04_jitter_backoff", "exercise.py").read_text())
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="not written yet"):
        harness.grade_check("lab04_jitter_backoff", "failures counted per item; forget starts over")
