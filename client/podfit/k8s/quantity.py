"""Kubernetes resource quantities, parsed exactly as k8s.io/apimachinery's resource.Quantity does.

Values are kept as exact fractions so that sums of quantities (a pod's containers, overheads) are
rounded only once, where Kubernetes rounds: ``MilliValue()`` and ``Value()`` round up.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

_NUMBER = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(.*)$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_EXPONENT = re.compile(r"^[eE]([+-]?\d+)$")


class QuantityError(ValueError):
    """A string that Kubernetes would not accept as a quantity."""


# Far beyond any real quantity (int64 holds 19 digits), and far below Python's 4,300-digit limit on
# integer text, which would otherwise fail as an internal error.
MAX_DIGITS = 1000


def parse_quantity(text: str | int | float) -> Fraction:
    """Returns the exact value of a Kubernetes quantity such as ``"500m"``, ``"1Gi"`` or ``"2e3"``."""
    if type(text) is str:
        return _parse_string(text)
    if isinstance(text, bool):
        raise QuantityError(f"quantities must be strings or numbers, not {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"quantities must be finite, not {text!r}")
        return Fraction(str(text))
    if not isinstance(text, str):
        raise QuantityError(f"quantities must be strings, not {type(text).__name__}")
    return _parse_string(text)


@functools.lru_cache(maxsize=4096)
def _parse_string(text: str) -> Fraction:
    """Cached: clusters repeat a handful of spellings ("100m", "500Mi") across thousands of pods."""
    match = _NUMBER.match(text)
    if not match:
        raise QuantityError(
            f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
        )
    sign, number, suffix = match.groups()
    if len(number) > MAX_DIGITS:
        raise QuantityError(f"quantities may have at most {MAX_DIGITS} digits: {text[:40]!r}... has {len(number)}")
    magnitude = Fraction(number)
    if suffix in _BINARY:
        magnitude *= _BINARY[suffix]
    elif suffix in _DECIMAL:
        magnitude *= _DECIMAL[suffix]
    else:
        exponent = _EXPONENT.match(suffix)
        if not exponent:
            raise QuantityError(f"unable to parse quantity's suffix {suffix!r} in {text!r}")
        power = int(exponent.group(1))
        if abs(power) > 1000:
            raise QuantityError(f"quantity exponent out of range in {text!r}")
        magnitude *= Fraction(10) ** power
    return -magnitude if sign == "-" else magnitude


def milli_value(value: Fraction) -> int:
    """Kubernetes' ``Quantity.MilliValue()``: thousandths, rounded up."""
    return math.ceil(value * 1000)


def whole_value(value: Fraction) -> int:
    """Kubernetes' ``Quantity.Value()``: units, rounded up."""
    return math.ceil(value)
