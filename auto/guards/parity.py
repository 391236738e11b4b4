"""Parity that knows the reference's noise: excess silent-wrong.

A stochastic reference disagrees with itself, and no compiled path can agree with a fresh
reference answer more often than the reference agrees with itself. On the *same* tier-1 items,
with a fresh reference answer ``c_i`` (the control) and a second fresh reference answer ``r_i``:

- ``tier1_disagreement`` = share of items whose tier-1 answer differs from ``c_i``;
- ``reference_disagreement`` = share of items whose ``r_i`` differs from ``c_i`` (the
  reference's disagreement with itself on those items);
- ``excess`` = their difference: what the compiled path adds to the reference's own noise
  (negative when the tier-1 answer, e.g. a modal answer, is steadier than one reference call).

The 95% bounds on the excess are simultaneous Clopper–Pearson bounds: the upper bound of the
first share minus the lower bound of the second (each bound holds with probability ≥ 97.5%, so
the difference bound holds with probability ≥ 95% by the union bound; no pairing assumption).
Where an input has ≥ 2 witnesses, disagreement with the reference's modal answer is reported by
the caller beside it.
"""

from __future__ import annotations

from typing import Any, Sequence

from auto.canonical import canonical_json
from auto.gate import clopper_pearson


def _ne(a: Any, b: Any) -> bool:
    try:
        return canonical_json(a) != canonical_json(b)
    except (TypeError, ValueError):
        return a != b


def excess_disagreement(tier1: Sequence[Any], control: Sequence[Any], second: Sequence[Any]) -> dict[str, Any]:
    """Excess silent-wrong of tier-1 answers over the reference's own disagreement.

    Args:
        tier1: the tier-1 answers, one per item.
        control: a fresh reference answer per item (same order).
        second: another fresh reference answer per item (same order).

    Returns:
        ``{"n", "tier1_disagreement", "reference_disagreement", "excess", "excess_ci95_low",
        "excess_ci95_high", "tier1_disagreements", "reference_disagreements"}``; shares in
        [0, 1], the excess in [-1, 1]; rates and bounds are None when ``n == 0``.

    Raises:
        ValueError: the three sequences differ in length.
    """
    if not len(tier1) == len(control) == len(second):
        raise ValueError("tier1, control and second must have the same length")
    n = len(tier1)
    k1 = sum(_ne(a, c) for a, c in zip(tier1, control))
    k2 = sum(_ne(r, c) for r, c in zip(second, control))
    out: dict[str, Any] = {"n": n, "tier1_disagreements": k1, "reference_disagreements": k2,
                           "tier1_disagreement": None, "reference_disagreement": None, "excess": None,
                           "excess_ci95_low": None, "excess_ci95_high": None}
    if n == 0:
        return out
    lo1, hi1 = clopper_pearson(k1, n)
    lo2, hi2 = clopper_pearson(k2, n)
    out.update(tier1_disagreement=k1 / n, reference_disagreement=k2 / n, excess=(k1 - k2) / n,
               excess_ci95_low=lo1 - hi2, excess_ci95_high=hi1 - lo2)
    return out
