"""Shadow audit: the measured silent-wrong rate of tier-1 answers in deployment.

The runtime (``auto_runtime.TieredTask(audit_rate=...)``) re-asks a seeded random fraction of
tier-1 answers at tier 0 in the background. Because the audited answers are a uniform random
sample of tier-1 answers, the share that disagree with the reference estimates the silent-wrong
rate of tier-1 answers without bias; the interval is the exact binomial (Clopper–Pearson, 1934)
95% interval (:func:`auto.gate.clopper_pearson`).
"""

from __future__ import annotations

from typing import Any

from auto.errors import ArgumentError
from auto.gate import clopper_pearson


def _get(audit: Any, name: str) -> Any:
    return audit.get(name) if isinstance(audit, dict) else getattr(audit, name, None)


def audit_summary(audit: Any) -> dict[str, Any]:
    """Summarize a shadow audit (an ``auto_runtime`` ``ShadowAudit`` or a dict with the same fields).

    Args:
        audit: has ``n`` (tier-1 answers audited and compared), ``disagreements`` (of those, how
            many differ from the reference answer) and optionally ``errors`` (audits whose
            reference call failed; not counted in ``n``).

    Returns:
        ``{"n", "disagreements", "errors", "silent_wrong", "silent_wrong_rate",
        "silent_wrong_ci95_low", "silent_wrong_ci95_high", "statement"}``; rate and bounds are
        None when nothing was audited.

    Raises:
        ArgumentError: ``n`` or ``disagreements`` is missing, negative, not an integer, or
            ``disagreements > n``.
    """

    n, k = _get(audit, "n"), _get(audit, "disagreements")
    errors = _get(audit, "errors") or 0
    for name, v in (("n", n), ("disagreements", k), ("errors", errors)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ArgumentError(f"audit {name} must be a non-negative integer, got {v!r}")
    if k > n:
        raise ArgumentError(f"audit has {k} disagreements but only {n} audited answers")
    low, high = clopper_pearson(k, n)
    rate = k / n if n else None
    statement = (f"{k} of {n} audited tier-1 answers differed from the reference (silent-wrong rate "
                 f"{rate:.3g}, 95% CP interval [{low:.3g}, {high:.3g}]); {errors} audits failed and are not counted"
                 if n else f"no tier-1 answer audited yet ({errors} audits failed)")
    return {"n": n, "disagreements": k, "errors": errors, "silent_wrong": k, "silent_wrong_rate": rate,
            "silent_wrong_ci95_low": low, "silent_wrong_ci95_high": high, "statement": statement}
