"""Lab 1's checks must pass on the instructor's solution and fail on the untouched starter:
a check that cannot fail would tell students they are done when they are not."""

from __future__ import annotations

import pytest

from labs.lab01_spot_avoidance import checks, exercise, solution


def test_solution_passes_every_check():
    report = checks.run_checks(solution)
    assert report.ok, str(report)


def test_starter_fails_the_checks_that_need_the_students_code():
    report = checks.run_checks(exercise)
    failed = {name for name, _ in report.failed}
    assert failed == {"the pure rule", "a scheduler with the plugin avoids spot nodes"}


@pytest.mark.parametrize("broken", ["ignores_annotation", "vectorised_disagrees"])
def test_each_check_catches_a_plausible_mistake(broken, monkeypatch):
    import types

    module = types.ModuleType("broken")
    module.__dict__.update(solution.__dict__)
    if broken == "ignores_annotation":
        monkeypatch.setattr(module, "spot_ok", lambda pod: False, raising=False)
        module.node_score = lambda pod, node: 0 if (node["metadata"].get("labels") or {}).get(
            solution.SPOT_LABEL) == "spot" else 100
        assert not checks.run_checks(module).ok
    else:
        class Wrong(solution.SpotAvoidance):
            def score(self, state, pod, nodes, rows):
                return super().score(state, pod, nodes, rows)[::-1].copy()

        module.new = lambda args, handle: Wrong()
        report = checks.run_checks(module)
        assert "vectorised score equals the pure rule" in {name for name, _ in report.failed}
