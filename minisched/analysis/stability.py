"""§2.1: the book's control law as a discrete-time system, derived, bounded and checked.

The book's update law, with the plant y = x (the loop observes exactly what it set):

    x[k+1] = x[k] + α·e[k] − β·(e[k] − e[k−1]),    e[k] = r − y[k]

Substituting e gives x[k+1] = (1 − α + β)·x[k] − β·x[k−1] + α·r, so the characteristic polynomial is
z² − (1 − α + β)·z + β. The book prints z² − (1 − α)·z + β: it drops the β in the linear term. The
Jury (Schur–Cohn) conditions for a monic quadratic z² + a₁z + a₀ — P(1) > 0, P(−1) > 0, |a₀| < 1 —
give the exact region where both roots lie strictly inside the unit circle:

    α > 0,   −1 < β < 1,   α < 2 + 2β.

Everything here is derived by sympy from the law (not typed in), and `prove_region()` asserts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp

alpha, beta, z, r = sp.symbols("alpha beta z r", real=True)
k = sp.Symbol("k", integer=True)
_x = sp.Function("x")

# What the book prints (Part I §2.1), for comparison only.
BOOK_POLYNOMIAL = z**2 - (1 - alpha) * z + beta
# The book's β = 0.3 table: α → (printed root moduli, printed verdict "converges").
BOOK_TABLE: dict[float, tuple[tuple[float, float], bool]] = {
    0.5: ((0.89, 0.34), True),
    1.8: ((1.12, 0.26), False),
}
BOOK_TABLE_BETA = 0.3


def update_law() -> sp.Eq:
    """The book's law as an equation in the sequence x(k), with e[k] = r − x[k] substituted."""

    def e(n: sp.Expr) -> sp.Expr:
        return r - _x(n)

    return sp.Eq(_x(k + 1), _x(k) + alpha * e(k) - beta * (e(k) - e(k - 1)))


def derive_characteristic_polynomial() -> sp.Expr:
    """From `update_law()`: drop the input (r = 0), try x[n] = zⁿ, divide by z^(k−1)."""
    law = update_law()
    homogeneous = (law.lhs - law.rhs).subs(r, 0)
    trial = homogeneous.replace(_x, lambda n: z**n)
    poly = sp.expand(sp.powsimp(sp.expand(trial * z ** (1 - k)), force=True))
    # Make it monic in z so coefficients compare directly with the book's.
    leading = sp.Poly(poly, z).LC()
    return sp.expand(poly / leading)


def steady_state() -> sp.Expr:
    """The fixed point x* of the law with a constant reference r (x[k+1] = x[k] = x[k−1] = x*)."""
    xs = sp.Symbol("x_star", real=True)
    law = update_law()
    fixed = (law.lhs - law.rhs).subs({_x(k + 1): xs, _x(k): xs, _x(k - 1): xs})
    (solution,) = sp.solve(fixed, xs)
    return sp.simplify(solution)


def jury_conditions(poly: sp.Expr) -> list[sp.Expr]:
    """The Jury (Schur–Cohn) conditions for a real quadratic with positive leading coefficient,
    as expressions that must all be > 0: P(1), P(−1), a₂ − a₀, a₂ + a₀ (the last two are |a₀| < a₂)."""
    p = sp.Poly(poly, z)
    if p.degree() != 2:
        raise ValueError(f"jury_conditions handles quadratics; got degree {p.degree()}: {poly}")
    a2, _a1, a0 = p.all_coeffs()
    return [sp.expand(p.eval(1)), sp.expand(p.eval(-1)), sp.expand(a2 - a0), sp.expand(a2 + a0)]


def stability_region(poly: sp.Expr | None = None) -> sp.Basic:
    """The region (a sympy And of strict inequalities in α, β) where all roots are in |z| < 1."""
    poly = derive_characteristic_polynomial() if poly is None else poly
    return sp.And(*[sp.Gt(c, 0) for c in jury_conditions(poly)])


def prove_region() -> None:
    """Assert the stated region and the derived facts; raise AssertionError on any mismatch."""
    derived = derive_characteristic_polynomial()
    assert sp.expand(derived - (z**2 - (1 - alpha + beta) * z + beta)) == 0, derived
    p1, pm1, upper, lower = jury_conditions(derived)
    assert sp.expand(p1 - alpha) == 0, p1  # P(1) = α        → α > 0
    assert sp.expand(pm1 - (2 - alpha + 2 * beta)) == 0, pm1  # P(−1) = 2 − α + 2β → α < 2 + 2β
    assert sp.expand(upper - (1 - beta)) == 0 and sp.expand(lower - (1 + beta)) == 0  # |β| < 1
    assert sp.simplify(steady_state() - r) == 0  # no steady-state error for α ≠ 0
    # The book's polynomial is the derived one plus β·z: the β in the linear term is missing.
    assert sp.expand(BOOK_POLYNOMIAL - derived) == beta * z


def predicted_stable(a: float, b: float) -> bool:
    """The region's inequalities, evaluated: α > 0, −1 < β < 1, α < 2 + 2β."""
    return a > 0 and -1 < b < 1 and a < 2 + 2 * b


def book_predicted_stable(a: float, b: float) -> bool:
    """Jury applied to the book's printed polynomial: α + β > 0, |β| < 1, α < 2 + β."""
    return a + b > 0 and -1 < b < 1 and a < 2 + b


def roots(a: float, b: float) -> np.ndarray:
    """The closed-loop poles for gains (α, β): roots of z² − (1 − α + β)z + β."""
    return np.roots([1.0, -(1.0 - a + b), b])


def book_roots(a: float, b: float) -> np.ndarray:
    return np.roots([1.0, -(1.0 - a), b])


def spectral_radius(a: float, b: float) -> float:
    """The largest root modulus: the error shrinks (or grows) by about this factor per step."""
    return float(np.max(np.abs(roots(a, b))))


def simulate(a: float, b: float, *, reference: float = 1.0, steps: int = 40, x0: float = 0.0) -> np.ndarray:
    """Iterate the book's `control_step` with y = x: x[0..steps], starting at rest (e[−1] = e[0])."""
    xs = np.empty(steps + 1)
    xs[0] = x0
    e_prev = reference - x0
    for n in range(steps):
        e = reference - xs[n]
        xs[n + 1] = xs[n] + a * e - b * (e - e_prev)
        e_prev = e
    return xs


@dataclass(frozen=True)
class GridCheck:
    points: int  # grid points compared
    agree: int  # where the inequalities and numpy's roots give the same verdict
    near_boundary: int  # skipped: within `margin` of |z| = 1, where rounding decides
    disagreements: list[tuple[float, float]]


def grid_check(
    alphas: Sequence[float] | np.ndarray, betas: Sequence[float] | np.ndarray, *, margin: float = 1e-9
) -> GridCheck:
    """Compare `predicted_stable` with the numerically computed poles (max |z| < 1) at every (α, β).

    The poles are the eigenvalues of the companion matrix [[1 − α + β, −β], [1, 0]] of the state
    (x[k], x[k−1]) — what np.roots does per polynomial, here batched over the whole grid."""
    a_grid, b_grid = np.meshgrid(np.asarray(alphas, dtype=float), np.asarray(betas, dtype=float), indexing="ij")
    a_flat, b_flat = a_grid.ravel(), b_grid.ravel()
    companion = np.zeros((a_flat.size, 2, 2))
    companion[:, 0, 0] = 1.0 - a_flat + b_flat
    companion[:, 0, 1] = -b_flat
    companion[:, 1, 0] = 1.0
    rho = np.max(np.abs(np.linalg.eigvals(companion)), axis=1)
    points = agree = near = 0
    bad: list[tuple[float, float]] = []
    for a, b, radius in zip(a_flat.tolist(), b_flat.tolist(), rho.tolist(), strict=True):
        if abs(radius - 1.0) <= margin:
            near += 1
            continue
        points += 1
        if predicted_stable(a, b) == (radius < 1.0):
            agree += 1
        else:
            bad.append((a, b))
    return GridCheck(points, agree, near, bad)


@dataclass(frozen=True)
class TableRow:
    alpha: float
    beta: float
    book_moduli: tuple[float, float]
    book_converges: bool
    derived_moduli: tuple[float, float]  # from the law (the derived polynomial)
    derived_converges: bool
    book_poly_moduli: tuple[float, float]  # from the book's own printed polynomial
    book_poly_converges: bool

    @property
    def discrepancies(self) -> list[str]:
        found = []
        if not np.allclose(sorted(self.book_moduli), sorted(self.derived_moduli), atol=0.01):
            found.append(f"moduli {self.book_moduli} printed, {self.derived_moduli} derived from the law")
        if self.book_converges != self.derived_converges:
            found.append(
                f"printed {'converges' if self.book_converges else 'diverges'}, "
                f"the law {'converges' if self.derived_converges else 'diverges'}"
            )
        if not np.allclose(sorted(self.book_moduli), sorted(self.book_poly_moduli), atol=0.01):
            found.append(f"even the book's own polynomial gives {self.book_poly_moduli}")
        return found


def _moduli(rts: np.ndarray) -> tuple[float, float]:
    m = sorted((round(float(abs(x)), 3) for x in rts), reverse=True)
    return (m[0], m[1])


def check_book_table() -> list[TableRow]:
    """Each row of the book's β = 0.3 table against the law and against the book's own polynomial."""
    rows = []
    for a, (moduli, converges) in BOOK_TABLE.items():
        b = BOOK_TABLE_BETA
        derived = _moduli(roots(a, b))
        book_poly = _moduli(book_roots(a, b))
        rows.append(
            TableRow(a, b, moduli, converges, derived, max(derived) < 1, book_poly, max(book_poly) < 1)
        )
    return rows


def gains_for_moduli(moduli: tuple[float, float], b: float) -> dict[str, list[float]]:
    """Which α (if any) would give two real roots with these moduli, at this β, under the law's
    polynomial and under the book's. Product of the roots is β, so both are needed to match."""
    found: dict[str, list[float]] = {"law": [], "book": []}
    for s1 in (1, -1):
        for s2 in (1, -1):
            z1, z2 = s1 * moduli[0], s2 * moduli[1]
            if not np.isclose(z1 * z2, b, atol=0.01):
                continue  # the product of the roots must be β
            total = z1 + z2  # = 1 − α + β (law) or 1 − α (book)
            found["law"].append(round(1 + b - total, 3))
            found["book"].append(round(1 - total, 3))
    return found
