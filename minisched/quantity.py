"""Kubernetes resource quantities ("100m", "0.5", "1Gi", "1e3", "2E"), parsed exactly.

A quantity is a number with an optional suffix: a binary SI suffix (Ki, Mi, Gi, Ti, Pi, Ei: powers
of 1024), a decimal SI suffix (n, u, m, "", k, M, G, T, P, E: powers of 1000) or a decimal exponent
("e3", "E-2"). Values are held as exact fractions, so "0.1" + "0.2" is exactly "300m" and nothing is
lost to floating point. The scheduler works in integers as kube-scheduler does: CPU in millicores
(`milli_value`, rounded up), everything else in whole units (`value`, rounded up), like
resource.Quantity's MilliValue() and Value().
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Literal

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX = {power: suffix for suffix, power in _BINARY.items()}

# sign, digits with at most one point, then a suffix; "E" alone is exa, "E"/"e" + integer an exponent.
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)

_NANO = Fraction(1, 10**9)


@dataclass(frozen=True)
class Quantity:
    """An exact quantity and the format its text was written in (which `canonical` keeps)."""

    amount: Fraction
    format: Format = "DecimalSI"

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (CPU in millicores): "100m" -> 100, "1" -> 1000."""
        return math.ceil(self.amount * 1000)

    def value(self) -> int:
        """The value in whole units, rounded up (bytes, pods, devices): "1Ki" -> 1024, "0.5" -> 1."""
        return math.ceil(self.amount)

    def canonical(self) -> str:
        return canonical(self)

    def __str__(self) -> str:
        return canonical(self)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.amount + other.amount, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.amount - other.amount, self.format)

    def __lt__(self, other: Quantity) -> bool:
        return self.amount < other.amount

    def __le__(self, other: Quantity) -> bool:
        return self.amount <= other.amount


def parse_quantity(text: str | int | float | Quantity) -> Quantity:
    """Parse a quantity; raise ValueError naming the text when it is not one.

    Ints are taken as plain numbers (the API server sometimes serves `"pods": 110` unquoted); floats
    through their shortest decimal repr, so 0.1 means exactly one tenth.
    """
    if isinstance(text, Quantity):
        return text
    if isinstance(text, bool):
        raise ValueError(f"quantity {text!r} is a boolean, not a number")
    if isinstance(text, int):
        return Quantity(Fraction(text))
    if isinstance(text, float):
        if not math.isfinite(text):
            raise ValueError(f"quantity {text!r} is not a finite number")
        return Quantity(Fraction(Decimal(repr(text))))
    if not isinstance(text, str):
        raise ValueError(f"quantity {text!r} must be a string such as '100m' or '1Gi', not {type(text).__name__}")
    return _parse_text(text)


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Quantity:
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(
            f"quantity {text!r} is not valid: expected a number with an optional suffix "
            "(Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent such as e3)"
        )
    number = Fraction(Decimal(match["number"]))
    if match["exp"]:
        return Quantity(number * Fraction(10) ** int(match["exp"][1:]), "DecimalExponent")
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return Quantity(number * 1024 ** _BINARY[suffix], "BinarySI")
    return Quantity(number * Fraction(10) ** _DECIMAL[suffix], "DecimalSI")


def milli_value(text: str | int | float | Quantity) -> int:
    """Thousandths, rounded up: the unit kube-scheduler keeps CPU in."""
    return parse_quantity(text).milli_value()


def value(text: str | int | float | Quantity) -> int:
    """Whole units, rounded up: the unit kube-scheduler keeps memory, storage, pods and devices in."""
    return parse_quantity(text).value()


def canonical(q: Quantity | str) -> str:
    """The text the API server would write back for this quantity.

    As resource.Quantity.String(): values finer than a nano-unit are rounded up to one; a binary
    quantity that is a whole multiple of 1024 keeps the largest binary suffix ("1.5Gi" -> "1536Mi"),
    one below 1024 or with a fraction falls back to decimal ("0.5Gi" -> "512Mi", "0.5Ki" -> "512"),
    a whole number of bytes keeps no suffix ("1.953125Ki" -> "2000");
    decimal ones use the largest power-of-1000 suffix that keeps an integer ("0.5" -> "500m",
    "1500" -> "1500", "2000" -> "2k").
    """
    if isinstance(q, str):
        q = parse_quantity(q)
    amount = Fraction(math.ceil(q.amount / _NANO)) * _NANO
    if amount == 0:
        return "0"
    sign = "-" if amount < 0 else ""
    magnitude = abs(amount)
    if q.format == "BinarySI" and magnitude >= 1024 and magnitude.denominator == 1:
        whole = int(magnitude)
        power = 0
        while power < 6 and whole % 1024 == 0:
            whole //= 1024
            power += 1
        # a whole number of bytes stays binary: "1.953125Ki" is "2000", never "2k"
        return f"{sign}{whole}{_BINARY_SUFFIX.get(power, '')}"
    # decimal: the integer mantissa with an exponent that is a multiple of three, as large as it can be
    exponent = -9
    mantissa = int(magnitude / _NANO)
    while exponent < 18 and mantissa % 1000 == 0:
        mantissa //= 1000
        exponent += 3
    if q.format == "DecimalExponent":
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exponent]}"
