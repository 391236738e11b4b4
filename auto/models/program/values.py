"""The numeric domain of the program DSL (:mod:`auto.models.program.ast`), shared by the interpreter, the
type checker and the WebAssembly backend.

- ``int``: a signed 64-bit integer, ``I64_MIN <= v <= I64_MAX``;
- ``float``: a fixed-point number with 4 fractional digits, held as an integer count of
  ten-thousandths (``FLOAT_SCALE``) with ``|v| < 10**14`` (``|units| < FLOAT_LIMIT_UNITS``), so
  parsing, comparison and output are exact. It becomes a binary64 ``float`` (``units / 10000``,
  correctly rounded) only in an answer.
"""

from __future__ import annotations

from decimal import Decimal

I64_MIN = -(2 ** 63)
I64_MAX = 2 ** 63 - 1
FLOAT_SCALE = 10_000
"""A ``float`` value is an integer count of 1/10000 (4 fractional digits)."""
FLOAT_LIMIT_UNITS = 10 ** 14 * FLOAT_SCALE
"""Exclusive bound on ``|units|`` of a float: ``|v| < 10**14``."""


class Fixed(int):
    """A DSL ``float``: an ``int`` subclass holding ten-thousandths (``Fixed(15000)`` is 1.5)."""

    __slots__ = ()

    def to_float(self) -> float:
        """The nearest binary64 to ``self / 10000`` (Python's int division rounds correctly)."""
        return int(self) / FLOAT_SCALE

    def __repr__(self) -> str:
        return f"Fixed({int(self)})"


def float_units(value: float | int) -> int | None:
    """Ten-thousandths of ``value`` when it is exact with at most 4 decimals and |v| < 1e14.

    The decimal is read from ``repr(value)`` (the shortest round-tripping decimal), so ``0.1``
    is 1000 units. Returns None when ``value`` has more than 4 decimals, is not finite, is out
    of range, or is not an ``int`` / ``float`` (a ``bool`` is not a number here).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        d = Decimal(repr(value)) * FLOAT_SCALE
    except ArithmeticError:
        return None
    if not d.is_finite() or d != d.to_integral_value():
        return None
    units = int(d)
    if abs(units) >= FLOAT_LIMIT_UNITS:
        return None
    return units


__all__ = ["FLOAT_LIMIT_UNITS", "FLOAT_SCALE", "I64_MAX", "I64_MIN", "Fixed", "float_units"]
