"""Online evidence about the installed generation, valid when checked after every item.

Every call to a ratchet produces evidence about the generation installed at the time:

- a **deopt** is a labeled point: the artifact's would-be answer (computed before the guard
  declined) against the reference's answer;
- a **shadow audit** re-asks the reference for a seeded random share of tier-1 answers, an
  unbiased sample of them.

:class:`RiskMonitor` watches the specialist's tier-1 answers through the audits. It is an
e-process for the null hypothesis "the audited disagreement rate p is at most epsilon" (the
certificate's claim): the average over a fixed grid of bets ``lambda_j`` of
``prod_i (1 + lambda_j (x_i - epsilon))``, with ``x_i = 1`` when the audit disagreed. Each product
is a nonnegative supermartingale under the null (``E[1 + lambda (x - epsilon)] = 1 + lambda
(p - epsilon) <= 1`` for ``0 <= lambda <= 1/epsilon``), and so is their average; by Ville's
inequality the probability that it *ever* reaches ``1/alpha`` is at most ``alpha`` under the
null, however often it is checked (testing by betting: Shafer, "Testing by betting", JRSS-A 184,
2021; Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting", JRSS-B
86, 2024). Crossing ``1/alpha`` is an alarm: the ratchet rolls the generation back.

:func:`upper_confidence_bound` is the matching anytime-valid upper confidence bound on p: the
smallest ``q`` whose betting e-process (same grid) has not reached ``1/alpha``.

The level monitored (:func:`monitored_level`) is the one the generation's certificate was tested
at, its manifest's ``risk_level``: ``epsilon`` for a certificate against single witnessed
answers, ``epsilon + rho_low`` for one on the excess over the reference's self-disagreement
(:mod:`auto.guards.noise`). An audit compares a tier-1 answer with one fresh reference call, so
its disagreement includes the reference's noise; testing it against ``epsilon`` alone would
reject a certificate that holds.

:class:`GenerationEvidence` keeps the counts the ratchet reports per generation (deopts, their
would-be agreement, audits, disagreements) and feeds the monitor.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from auto_runtime.guard.entries import GuardEntry, SelectiveRiskEntry, StackEntry

def certified_level(guard: GuardEntry) -> float | None:
    """The ``risk_level`` of the last certified selective-risk component of a typed guard entry
    (a stack's components, or the entry itself), or None (no certified component, or an older
    manifest without the level)."""
    parts = guard.components if isinstance(guard, StackEntry) else (guard,)
    risk = [c for c in parts if isinstance(c, SelectiveRiskEntry) and c.threshold is not None]
    level = risk[-1].risk_level if risk else None
    return None if isinstance(level, bool) or not isinstance(level, (int, float)) else float(level)


def monitored_level(level: float | None, epsilon: float) -> float:
    """The level the online risk monitor tests: the certificate's ``level``
    (:func:`certified_level`) when it is in ``[epsilon, 1)``, else ``epsilon``."""
    return float(level) if level is not None and epsilon <= level < 1.0 else epsilon


BET_FRACTIONS = (0.05, 0.1, 0.2, 0.4, 0.8)
"""Bets as fractions of the largest safe bet ``1/epsilon``; the e-process averages their wealth
(a mixture over a fixed grid needs no tuning and loses at most a factor ``len(grid)`` against the
best bet in hindsight)."""


class RiskMonitor:
    """An anytime-valid test that the audited disagreement rate of tier-1 answers is <= epsilon.

    Args:
        epsilon: the certified rate in (0, 1).
        alpha: the alarm level in (0, 1): P(an alarm ever fires | rate <= epsilon) <= alpha.

    Raises:
        ValueError: a level outside (0, 1).
    """

    def __init__(self, epsilon: float, alpha: float = 0.05) -> None:
        for name, v in (("epsilon", epsilon), ("alpha", alpha)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v < 1.0:
                raise ValueError(f"{name} must be in (0, 1), got {v!r}")
        self.epsilon = float(epsilon)
        self.alpha = float(alpha)
        self._lambdas = [f / self.epsilon for f in BET_FRACTIONS]
        self._log_wealth = [0.0] * len(self._lambdas)
        self.n = 0
        self.disagreements = 0
        self.alarm_at: int | None = None

    def update(self, disagreed: bool) -> bool:
        """Feed one audited tier-1 answer; returns True when this observation raised the alarm
        (the first time the e-process reaches ``1/alpha``)."""
        x = 1.0 if disagreed else 0.0
        self.n += 1
        self.disagreements += int(disagreed)
        for j, lam in enumerate(self._lambdas):
            self._log_wealth[j] += math.log1p(lam * (x - self.epsilon))
        if self.alarm_at is None and self.statistic >= 1.0 / self.alpha:
            self.alarm_at = self.n
            return True
        return False

    @property
    def statistic(self) -> float:
        """The e-process's current value (the mixture's wealth; 1 at the start)."""
        m = max(self._log_wealth)
        return math.exp(m) * sum(math.exp(w - m) for w in self._log_wealth) / len(self._log_wealth)

    @property
    def alarm(self) -> bool:
        """Whether the alarm has fired."""
        return self.alarm_at is not None

    def describe(self) -> dict[str, Any]:
        """JSON-able state: n, disagreements, statistic, alarm position, upper bound."""
        return {"method": "betting e-process (mixture of fixed bets)", "epsilon": self.epsilon, "alpha": self.alpha,
                "n": self.n, "disagreements": self.disagreements, "statistic": round(self.statistic, 6),
                "alarm_at_audit": self.alarm_at,
                "rate_upper_bound": upper_confidence_bound(self.disagreements, self.n, self.alpha)}


def upper_confidence_bound(k: int, n: int, alpha: float = 0.05) -> float | None:
    """Anytime-valid upper confidence bound on a Bernoulli rate from ``k`` ones in ``n`` draws.

    For each ``q`` the null "p >= q" is tested by the betting e-process
    ``mean_j prod_i (1 + lambda_j (q - x_i))`` with ``lambda_j = f_j / (1 - q)`` over the fraction
    grid :data:`BET_FRACTIONS` (nonnegative, a supermartingale under that null); ``q`` is excluded
    once it reaches ``1/alpha``. The e-process depends on the data only through ``k`` and ``n``
    and grows with ``q``, so the bound is the smallest excluded ``q`` on a grid of step 0.001.
    Valid uniformly over time at level ``alpha`` (Waudby-Smith & Ramdas, JRSS-B 86, 2024). None
    when ``n == 0``.
    """
    if n <= 0:
        return None
    target = math.log(1.0 / alpha)
    lo, hi = 1, 1000  # q = i / 1000
    while lo < hi:
        mid = (lo + hi) // 2
        if _log_mixture_upper(k, n, mid / 1000.0) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo / 1000.0


def _log_mixture_upper(k: int, n: int, q: float) -> float:
    if q >= 1.0:
        return math.inf
    logs = [(n - k) * math.log1p(f * q / (1.0 - q)) + k * math.log1p(-f) for f in BET_FRACTIONS]
    m = max(logs)
    return m + math.log(sum(math.exp(x - m) for x in logs) / len(logs))


@dataclass
class GenerationEvidence:
    """What the stream has shown about one installed generation since it was installed.

    Attributes:
        generation: the generation number.
        calls: calls answered while it was installed.
        tier1: of those, answered at tier-1.
        table_hits: tier-1 answers that were table hits (a witnessed input).
        deopts: calls that deopted to the reference (each a labeled point).
        would_be_answered: deopts where the artifact produced an answer (no failure).
        would_be_correct: of those, answers equal to the reference's.
        audits, audit_disagreements: shadow audits of specialist tier-1 answers.
        table_audits, table_audit_disagreements: shadow audits of table hits.
        overlay_audits, overlay_audit_disagreements: shadow audits of the table overlay's answers.
        epsilon: the contract's epsilon (the overlay's monitor tests it).
        risk_level: the level the generation's certificate was tested at (:func:`certified_level`);
            the specialist's monitor tests :func:`monitored_level` of it (None: ``epsilon``).
        monitor: the :class:`RiskMonitor` of the specialist's audited tier-1 answers.
        overlay_monitor: the :class:`RiskMonitor` of the overlay's audited answers (its alarm
            disables the overlay).
    """

    generation: int | None
    epsilon: float
    alpha: float = 0.05
    risk_level: float | None = None
    calls: int = 0
    tier1: int = 0
    table_hits: int = 0
    deopts: int = 0
    would_be_answered: int = 0
    would_be_correct: int = 0
    audits: int = 0
    audit_disagreements: int = 0
    table_audits: int = 0
    table_audit_disagreements: int = 0
    overlay_audits: int = 0
    overlay_audit_disagreements: int = 0
    monitor: RiskMonitor = field(init=False)
    overlay_monitor: RiskMonitor = field(init=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.monitor = RiskMonitor(monitored_level(self.risk_level, self.epsilon), self.alpha)
        self.overlay_monitor = RiskMonitor(self.epsilon, self.alpha)

    def audited_overlay(self, disagreed: bool) -> bool:
        """Record one shadow audit of an overlay answer; returns True when it raised the
        overlay's risk alarm (its disagreement rate with fresh reference answers rejects
        epsilon: the reference no longer answers those inputs the way it was witnessed to)."""
        with self._lock:
            self.overlay_audits += 1
            self.overlay_audit_disagreements += int(disagreed)
            return self.overlay_monitor.update(disagreed)

    def audited(self, disagreed: bool, table_hit: bool) -> bool:
        """Record one shadow audit; returns True when it raised the risk alarm (specialist
        answers only: a table hit repeats a reference answer, so its disagreement is the
        reference's own)."""
        with self._lock:
            if table_hit:
                self.table_audits += 1
                self.table_audit_disagreements += int(disagreed)
                return False
            self.audits += 1
            self.audit_disagreements += int(disagreed)
            return self.monitor.update(disagreed)

    def describe(self) -> dict[str, Any]:
        """JSON-able counts, the would-be agreement of deopts and the monitor's state."""
        with self._lock:
            return {
                "generation": self.generation, "calls": self.calls, "tier1": self.tier1, "table_hits": self.table_hits,
                "deopts": self.deopts, "would_be_answered": self.would_be_answered,
                "would_be_correct": self.would_be_correct,
                "audits": self.audits, "audit_disagreements": self.audit_disagreements,
                "table_audits": self.table_audits, "table_audit_disagreements": self.table_audit_disagreements,
                "overlay_audits": self.overlay_audits,
                "overlay_audit_disagreements": self.overlay_audit_disagreements,
                "monitor": self.monitor.describe(), "overlay_monitor": self.overlay_monitor.describe(),
            }
