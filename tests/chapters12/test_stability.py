"""§2.1: the derivation, the region, the numeric cross-check and the book's table."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from minisched.analysis import stability as s


def test_derived_polynomial_is_not_the_books() -> None:
    derived = s.derive_characteristic_polynomial()
    assert sp.expand(derived - (s.z**2 - (1 - s.alpha + s.beta) * s.z + s.beta)) == 0
    assert sp.expand(derived - s.BOOK_POLYNOMIAL) != 0


def test_prove_region_passes() -> None:
    s.prove_region()


def test_region_is_the_jury_inequalities() -> None:
    region = s.stability_region()
    for a, b, expected in [(0.6, 0.3, True), (2.59, 0.3, True), (2.61, 0.3, False), (0.0, 0.3, False),
                           (1.0, 0.99, True), (1.0, 1.0, False), (0.09, -0.95, True), (0.11, -0.95, False)]:  # fmt: skip
        assert bool(region.subs({s.alpha: a, s.beta: b})) is expected, (a, b)
        assert s.predicted_stable(a, b) is expected


def test_jury_conditions_reject_non_quadratics() -> None:
    with pytest.raises(ValueError, match="degree 3"):
        s.jury_conditions(s.z**3 + s.alpha)


def test_grid_agrees_with_numpy_roots() -> None:
    check = s.grid_check(np.linspace(-1, 5, 61), np.linspace(-1.5, 1.5, 31))
    assert check.disagreements == []
    assert check.agree == check.points > 1500


@given(st.floats(-1, 5), st.floats(-1.5, 1.5))
def test_random_gains_agree_with_roots(a: float, b: float) -> None:
    rho = s.spectral_radius(a, b)
    if abs(rho - 1) > 1e-6:
        assert s.predicted_stable(a, b) == (rho < 1)


def test_simulation_matches_the_prediction() -> None:
    stable = s.simulate(0.6, 0.3, steps=60)
    assert abs(stable[-1] - 1.0) < 1e-6
    unstable = s.simulate(2.8, 0.3, steps=60)
    assert abs(unstable[-1] - 1.0) > 10
    # With real poles the error decays like ρ^k (complex poles add a rotation, see the notebook).
    a, b = 0.5, 0.05
    err = np.abs(1.0 - s.simulate(a, b, steps=60))
    rho = s.spectral_radius(a, b)
    measured = (err[30] / err[10]) ** (1 / 20)
    assert measured == pytest.approx(rho, rel=0.05)


def test_book_table_discrepancies_are_reported() -> None:
    rows = {row.alpha: row for row in s.check_book_table()}
    assert rows[0.5].derived_moduli == (0.548, 0.548)
    assert rows[1.8].derived_converges is True and rows[1.8].book_converges is False
    assert len(rows[1.8].discrepancies) == 3
    assert any("own polynomial" in d for d in rows[0.5].discrepancies)


def test_steady_state_is_the_reference() -> None:
    assert s.steady_state() == s.r
