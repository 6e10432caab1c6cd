from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minisched.quantity import canonical, milli_value, parse_quantity, value


@pytest.mark.parametrize(
    ("text", "milli", "units", "canon"),
    [
        ("100m", 100, 1, "100m"),
        ("0.5", 500, 1, "500m"),
        (".5", 500, 1, "500m"),
        ("1", 1000, 1, "1"),
        ("1000m", 1000, 1, "1"),
        ("1500", 1_500_000, 1500, "1500"),
        ("2000", 2_000_000, 2000, "2k"),
        ("1e3", 1_000_000, 1000, "1e3"),
        ("1E3", 1_000_000, 1000, "1e3"),
        ("1.5e-3", 2, 1, "1500e-6"),
        ("1Ki", 1_024_000, 1024, "1Ki"),
        ("1Gi", 1024**3 * 1000, 1024**3, "1Gi"),
        ("1.5Gi", 1536 * 1024**2 * 1000, 1536 * 1024**2, "1536Mi"),
        ("0.5Gi", 512 * 1024**2 * 1000, 512 * 1024**2, "512Mi"),
        ("0.5Ki", 512_000, 512, "512"),  # below 1Ki: written in decimal
        ("1025Ki", 1025 * 1024 * 1000, 1025 * 1024, "1025Ki"),
        ("1.953125Ki", 2_000_000, 2000, "2000"),  # whole bytes, not a multiple of 1Ki: no suffix, not "2k"
        ("2E", 2 * 10**21, 2 * 10**18, "2E"),
        ("1n", 1, 1, "1n"),
        ("0.1n", 1, 1, "1n"),  # finer than nano rounds up
        ("-1.5", -1500, -1, "-1500m"),
        ("0", 0, 0, "0"),
        ("+3k", 3_000_000, 3000, "3k"),
        ("110", 110_000, 110, "110"),
    ],
)
def test_parse(text: str, milli: int, units: int, canon: str) -> None:
    q = parse_quantity(text)
    assert milli_value(text) == milli == q.milli_value()
    assert value(text) == units == q.value()
    assert canonical(text) == canon


def test_exact_arithmetic() -> None:
    assert (parse_quantity("0.1") + parse_quantity("0.2")).amount == Fraction(3, 10)
    assert canonical(parse_quantity("0.1") + parse_quantity("0.2")) == "300m"
    assert value("1.0001") == 2  # Value() rounds up
    assert milli_value("0.0001") == 1


def test_numbers_as_json_numbers() -> None:
    assert value(110) == 110
    assert milli_value(0.1) == 100
    with pytest.raises(ValueError, match="boolean"):
        parse_quantity(True)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "1K", "abc", "1.2.3", "1 Gi", "1Gib", "Mi", "1e", "--1", "1.5ki", " 1"])
def test_bad_quantities_name_the_text(bad: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_quantity(bad)
    assert repr(bad) in str(err.value)


@given(
    st.decimals(min_value=Decimal("-1e12"), max_value=Decimal("1e12"), places=9, allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "m", "k", "M", "Ki", "Mi", "Gi", "e3", "e-3"]),
)
def test_canonical_round_trips(number: Decimal, suffix: str) -> None:
    text = f"{number}{suffix}"
    if "E" in str(number):  # hypothesis may render as 1E+3: not a quantity in that spelling
        return
    q = parse_quantity(text)
    again = parse_quantity(canonical(q))
    # the same amount, up to kube's rounding up to whole nano-units
    assert again.amount >= q.amount
    assert again.amount - q.amount < Fraction(1, 10**9)
    assert canonical(again) == canonical(q)
