"""Shift: an online test of exchangeability over the live stream's conformal p-values.

:class:`ShiftMonitor` multiplies a test martingale, one p-value at a time, and raises an alarm
once it reaches ``1 / alpha``. The p-values are either handed in (:meth:`ShiftMonitor.update`)
or computed online from raw nonconformity scores (:meth:`ShiftMonitor.update_score`).

**Online conformal p-values** (:meth:`ShiftMonitor.update_score`). A score ``s_t`` (larger =
stranger) is ranked against the reference scores given to :meth:`ShiftMonitor.reset` (e.g. the
installed generation's calibration scores) followed by every score fed since::

    p_t = (#{i : s_i > s_t} + U (#{i : s_i = s_t} + 1)) / (m + 1),   U ~ Uniform(0, 1)

over the ``m`` earlier scores (MAPIE 1.6,
``mapie.exchangeability_testing.OnlineMartingaleTest.compute_p_value``). If the reference scores
and the stream's scores are exchangeable, these smoothed p-values are independent and uniform on
[0, 1] (Vovk, Gammerman, Shafer, *Algorithmic Learning in a Random World*, 2005, §7.1), which is
exactly what Ville's inequality below needs. The runtime guard's own p-values
``(1 + #{c >= s}) / (n + 1)`` against a *fixed* calibration set are valid one at a time but
depend on each other through the shared set; fed to a martingale they make the bound approximate.

**Bets** (``method``):

* ``"step-jumper"`` (one-sided; the stream's default): Vovk et al.'s jumper construction (2005,
  §7.1; the same mixing as MAPIE's ``update_simple_jumper_martingale``) over the bets
  ``f(p) = 1`` (hold) and ``f_{a,b}(p) = 1 - a + (a / b) 1{p <= b}`` for ``a`` in
  :data:`STEP_SHARES` and ``b`` in :data:`STEP_LEVELS` ("a share ``a`` of the traffic now has
  p-values below ``b``"). Each step first moves a share ``jump_size`` of the total wealth onto
  the bets in fixed proportions (:data:`HOLD_SHARE` to the hold bet, the rest evenly; so a bet
  that lost while the stream was normal is refunded and can follow a shift that starts late),
  then multiplies each bet's wealth by its ``f(p)``. Every ``f`` is
  non-increasing with ``integral_0^1 f = 1`` (a p-to-e calibrator: Vovk and Wang, "E-values:
  calibration, combination and applications", Ann. Statist. 49, 2021), so
  ``E[f(p)] <= 1`` whenever ``P(p <= b) <= b``: the wealth is a non-negative supermartingale for
  uniform *and for conservative* p-values. Only small p-values (stranger inputs) are bet on: a
  calibration split that is stranger than the live traffic (e.g. one that holds inputs the guard
  deopted, selected for being novel) makes p-values large, which cannot raise an alarm.
* ``"jumper"``: MAPIE's simple jumper (bets ``1 + k (p - 0.5)``, ``k`` in ``{-1, 0, 1}``,
  two-sided, at most x1.5 per p-value).
* ``"plugin"``: MAPIE's plug-in martingale (Fedorova et al., ICML 2012): bets the p-value density
  estimated (reflected KDE) from the p-values seen before, shrunk towards uniform over the first
  ``burn_in`` p-values.

**Guarantee** (Ville's inequality): if, given the past, each p-value fed is uniform or
conservative (``P(p <= u) <= u``), the statistic is a non-negative (super)martingale starting at 1,
so the probability that it *ever* reaches ``1 / alpha`` before the next :meth:`reset` is at most
``alpha`` (for ``"plugin"``, up to the error of MAPIE's numerical density normalisation). With
:meth:`update_score` this holds when the scores fed since the reset are exchangeable with the
reference scores (``"step-jumper"``: or stochastically *less* strange). For a bench stream that
restarts the monitor at every installed generation, ``alpha`` bounds the false-alarm probability
*per generation*, not per stream. Nothing is claimed about how fast an alarm comes; an alarm says
the stream no longer looks like the reference: tighten the guard
(``auto_runtime.TieredTask.tighten``) and recompile from the new witnesses.
"""

from __future__ import annotations

import bisect
import math
import warnings
from typing import Any, Sequence

from auto.errors import ArgumentError

#: ``a`` of the one-sided step bets: the share of the traffic a bet expects to turn strange.
STEP_SHARES: tuple[float, ...] = (0.25, 0.5)
#: ``b`` of the one-sided step bets: the p-value level below which that share is expected.
STEP_LEVELS: tuple[float, ...] = (0.05, 0.1, 0.2)
#: The share of the starting wealth, and of every redistribution, that the hold bet ``f = 1`` gets
#: (the rest is split evenly across the step bets): wealth kept off the bets while the stream is
#: normal is what they can be refunded from once it shifts.
HOLD_SHARE = 0.5

METHODS = ("step-jumper", "jumper", "plugin")
_DESCRIPTION = {
    "step-jumper": "one-sided step-calibrator jumper martingale (Vovk et al. 2005 §7.1; bets 1 - a + (a/b) 1{p <= b})",
    "jumper": "jumper-martingale (mapie.exchangeability_testing.OnlineMartingaleTest)",
    "plugin": "plug-in martingale (mapie.exchangeability_testing.OnlineMartingaleTest)",
}


def _is_number(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(float(x))


class ShiftMonitor:
    """Online exchangeability monitor over a stream of conformal p-values or nonconformity scores.

    Args:
        alpha: false-alarm level in (0, 1); alarm when the statistic reaches ``1 / alpha`` (see the
            module docstring for what ``alpha`` bounds).
        jump_size: the jumper's mixing rate in (0, 1): the share of wealth redistributed evenly
            across the bets before each p-value (``"step-jumper"`` and ``"jumper"``).
        seed: seed of the tie-breaking ``U`` of :meth:`update_score` (MAPIE's generator).
        method: ``"jumper"`` (MAPIE's simple jumper; the default, as before), ``"step-jumper"``
            (one-sided step bets) or ``"plugin"`` (MAPIE's plug-in martingale).
        burn_in: ``"plugin"`` only: the number of p-values over which MAPIE shrinks the estimated
            density towards uniform (``regularization = min(1, burn_in / n)``); at least 1.

    Attributes:
        alarm: True once the statistic has reached ``1 / alpha`` (stays True until :meth:`reset`).
        statistic: the current martingale value (dimensionless, starts at 1).
        n: p-values fed since the last reset; alarm_at: the 1-based count at the alarm, or None.
        ignored: values that were not usable numbers (never raise, never move the statistic).
        reference_n: reference scores :meth:`update_score` ranks against (set by :meth:`reset`).

    Raises:
        ArgumentError: ``alpha`` or ``jump_size`` outside (0, 1), an unknown ``method``, or
            ``burn_in`` below 1.
    """

    def __init__(self, alpha: float = 0.01, *, jump_size: float = 0.01, seed: int = 0, method: str = "jumper",
                 burn_in: int = 20) -> None:
        for name, v in (("alpha", alpha), ("jump_size", jump_size)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < float(v) < 1.0:
                raise ArgumentError(f"{name} must be a number in (0, 1), got {v!r}")
        if method not in METHODS:
            raise ArgumentError(f"unknown shift-monitor method {method!r} (available: {', '.join(METHODS)})")
        if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 1:
            raise ArgumentError(f"burn_in must be an integer >= 1, got {burn_in!r}")
        self.alpha = float(alpha)
        self.jump_size = float(jump_size)
        self.seed = int(seed)
        self.method_name = method
        self.burn_in = burn_in
        self.resets = 0
        self.reset()

    @property
    def method(self) -> str:
        """A one-line description of the bets (for reports)."""
        return _DESCRIPTION[self.method_name]

    def reset(self, reference_scores: Sequence[float] | None = None) -> None:
        """Start a fresh martingale at 1 (after a recompile, the new calibration defines "normal").

        Args:
            reference_scores: nonconformity scores that :meth:`update_score` ranks new scores
                against (e.g. the installed generation's calibration scores; any order). ``None``
                or empty: new scores are ranked only against those fed since this reset (the null
                is then "the stream is exchangeable since the reset"). Values that are not finite
                numbers are dropped and counted in ``describe()["reference_dropped"]``.
        """
        from mapie.exchangeability_testing import OnlineMartingaleTest

        mapie_method = "plugin_martingale" if self.method_name == "plugin" else "jumper_martingale"
        self._test = OnlineMartingaleTest(test_method=mapie_method, test_level=self.alpha, warn=False,
                                          jump_size=self.jump_size, burn_in=self.burn_in,
                                          random_state=self.seed + self.resets)
        self.resets += 1
        ref = list(reference_scores) if reference_scores is not None else []
        self._scores = sorted(float(s) for s in ref if _is_number(s))
        self.reference_n = len(self._scores)
        self.reference_dropped = len(ref) - self.reference_n
        self._bets = [(0.0, 1.0)] + [(a, b) for a in STEP_SHARES for b in STEP_LEVELS]
        k = len(self._bets) - 1
        self._prior = [HOLD_SHARE] + [(1.0 - HOLD_SHARE) / k] * k
        self._wealth = list(self._prior)
        self._value = 1.0
        self.alarm = False
        self.alarm_at: int | None = None
        self.n = 0
        self.ignored = 0
        self.max_statistic = 1.0
        self.last_p_value: float | None = None

    def rebase(self, reference_scores: Sequence[float] | None = None) -> None:
        """Replace the reference scores of :meth:`update_score`, keeping the martingale's wealth.

        For a new scoring function (a routine recompile) when the evidence gathered so far should
        carry over: if, given everything before the rebase, the scores fed after it are
        exchangeable with the new reference, their p-values are again uniform given the past and
        the product stays a test (super)martingale, so the Ville bound of the module docstring
        then covers the whole run since the last :meth:`reset`. The alarm state is kept.

        Args:
            reference_scores: as for :meth:`reset`.
        """
        ref = list(reference_scores) if reference_scores is not None else []
        self._scores = sorted(float(s) for s in ref if _is_number(s))
        self.reference_n = len(self._scores)
        self.reference_dropped = len(ref) - self.reference_n

    @property
    def statistic(self) -> float:
        """The current martingale value."""
        return float(self._value)

    @property
    def threshold(self) -> float:
        """The alarm level ``1 / alpha``."""
        return 1.0 / self.alpha

    def _step(self, p: float) -> float:
        if self.method_name == "jumper":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return float(self._test.update_simple_jumper_martingale(p))
        if self.method_name == "plugin":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = float(self._test.update_plugin_martingale(p))
            # MAPIE's density estimate reads the p-values seen so far; record this one after betting on it
            self._test.pvalue_history.append(p)
            return value
        total = sum(self._wealth)
        self._wealth = [((1.0 - self.jump_size) * w + self.jump_size * pi * total) * ((1.0 - a) + (a / b if p <= b else 0.0))
                        for w, pi, (a, b) in zip(self._wealth, self._prior, self._bets)]
        return float(sum(self._wealth))

    def update(self, p_value: float) -> bool:
        """Feed one p-value; return whether the alarm is raised (now or earlier).

        A p-value that is not a number in [0, 1] (None, NaN, a deopt without a score) is
        counted in ``ignored`` and leaves the martingale unchanged; it never raises.
        """
        if isinstance(p_value, bool) or not isinstance(p_value, (int, float)) or not (0.0 <= float(p_value) <= 1.0):
            self.ignored += 1
            return self.alarm
        p = float(p_value)
        self._value = self._step(p)
        self.last_p_value = p
        self.n += 1
        if math.isfinite(self._value):
            self.max_statistic = max(self.max_statistic, self._value)
        if not self.alarm and self._value >= self.threshold:
            self.alarm = True
            self.alarm_at = self.n
        return self.alarm

    def online_p_value(self, score: float) -> float:
        """The smoothed conformal p-value of ``score`` against the reference and the scores fed so far.

        The formula of MAPIE's ``OnlineMartingaleTest.compute_p_value``
        (``(#{s_i > s} + U (#{s_i = s} + 1)) / (n + 1)``, ``U`` drawn from that test's own
        generator, so the p-values are MAPIE's to the bit: tests/test_guards_stats.py checks it),
        computed by binary search on the scores kept sorted: O(log n) per score instead of a pass
        over every past score (the ratchet feeds every tier-1 score). Larger scores give smaller
        p-values. Does not record ``score``.

        Raises:
            ArgumentError: ``score`` is not a finite number.
        """
        if not _is_number(score):
            raise ArgumentError(f"a nonconformity score must be a finite number, got {score!r}")
        x = float(score)
        rng = self._test.rng
        u = rng.uniform()
        n = len(self._scores)
        if n == 0:
            return float(rng.uniform())
        lo = bisect.bisect_left(self._scores, x)
        hi = bisect.bisect_right(self._scores, x)
        return float(((n - hi) + u * ((hi - lo) + 1)) / (n + 1.0))

    def update_score(self, score: float) -> bool:
        """Feed one nonconformity score (larger = stranger); return whether the alarm is raised.

        The score's online conformal p-value (:meth:`online_p_value`) is fed to the martingale and
        the score joins the reference for the next ones. A score that is not a finite number is
        counted in ``ignored`` and changes nothing; it never raises.
        """
        if not _is_number(score):
            self.ignored += 1
            return self.alarm
        p = self.online_p_value(score)
        bisect.insort(self._scores, float(score))
        return self.update(p)

    def describe(self) -> dict[str, Any]:
        """JSON-able state: method, alpha, threshold, n, ignored, statistic, max, alarm, alarm_at, reference_n."""
        return {"method": self.method, "alpha": self.alpha, "jump_size": self.jump_size,
                "threshold": self.threshold, "n": self.n, "ignored": self.ignored,
                "statistic": self.statistic, "max_statistic": self.max_statistic,
                "alarm": self.alarm, "alarm_at": self.alarm_at, "reference_n": self.reference_n,
                "reference_dropped": self.reference_dropped}
