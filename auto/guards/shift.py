"""Shift: an online test of exchangeability over the live stream's conformal p-values.

:class:`ShiftMonitor` feeds each p-value to the simple jumper betting martingale of
``mapie.exchangeability_testing.OnlineMartingaleTest`` (MAPIE 1.6; Vovk, Gammerman, Shafer,
*Algorithmic Learning in a Random World*, 2005, §7.1). The martingale starts at 1 and is
multiplied, per p-value ``p``, by a mixture of the bets ``1 + k (p - 0.5)`` for ``k`` in
``{-1, 0, 1}``: a run of small p-values (inputs stranger than the calibration inputs) makes it
grow. The monitor raises an alarm once the martingale reaches ``1 / alpha``.

Guarantee: if the p-values are independent and uniform on [0, 1] (exchangeable inputs with
smoothed, online conformal p-values), the martingale is a non-negative martingale with mean 1, so
by Ville's inequality the probability that it *ever* reaches ``1 / alpha`` is at most ``alpha``.
The novelty guard's p-values against a fixed calibration set are discrete and, given that set,
not exactly uniform; for them the bound is approximate (the monitor is a detector, not a
certificate). An alarm says the stream no longer looks like the calibration data: tighten the
guard (``auto_runtime.TieredTask.tighten``) and recompile from the new witnesses.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from auto.errors import UsageError


class ShiftMonitor:
    """Online exchangeability monitor over a stream of conformal p-values.

    Args:
        alpha: false-alarm level in (0, 1); alarm when the martingale reaches ``1 / alpha``.
        jump_size: the jumper martingale's mixing rate in (0, 1) (MAPIE's ``jump_size``): the
            share of wealth redistributed across bets each step, which lets it follow a shift
            that starts late.
        seed: seed of MAPIE's internal generator (unused by the p-value path; kept for
            reproducibility of the wrapped object).

    Attributes:
        alarm: True once the martingale has reached ``1 / alpha`` (stays True until :meth:`reset`).
        statistic: the current martingale value (dimensionless, starts at 1).
        n: p-values seen since the last reset; alarm_at: the 1-based count at the alarm, or None.

    Raises:
        UsageError: ``alpha`` or ``jump_size`` outside (0, 1).
    """

    method = "jumper-martingale (mapie.exchangeability_testing.OnlineMartingaleTest)"

    def __init__(self, alpha: float = 0.01, *, jump_size: float = 0.01, seed: int = 0) -> None:
        for name, v in (("alpha", alpha), ("jump_size", jump_size)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < float(v) < 1.0:
                raise UsageError(f"{name} must be a number in (0, 1), got {v!r}")
        self.alpha = float(alpha)
        self.jump_size = float(jump_size)
        self.seed = int(seed)
        self.reset()

    def reset(self) -> None:
        """Start a fresh martingale (after a recompile, the new calibration defines "normal")."""
        from mapie.exchangeability_testing import OnlineMartingaleTest

        self._test = OnlineMartingaleTest(test_method="jumper_martingale", test_level=self.alpha, warn=False,
                                          jump_size=self.jump_size, burn_in=0, random_state=self.seed)
        self.alarm = False
        self.alarm_at: int | None = None
        self.n = 0
        self.ignored = 0
        self.max_statistic = 1.0

    @property
    def statistic(self) -> float:
        """The current martingale value."""
        return float(self._test.current_martingale_value)

    @property
    def threshold(self) -> float:
        """The alarm level ``1 / alpha``."""
        return 1.0 / self.alpha

    def update(self, p_value: float) -> bool:
        """Feed one p-value; return whether the alarm is raised (now or earlier).

        A p-value that is not a number in [0, 1] (None, NaN, a deopt without a score) is
        counted in ``ignored`` and leaves the martingale unchanged; it never raises.
        """
        if isinstance(p_value, bool) or not isinstance(p_value, (int, float)) or not (0.0 <= float(p_value) <= 1.0):
            self.ignored += 1
            return self.alarm
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = self._test.update_simple_jumper_martingale(float(p_value))
        self.n += 1
        if math.isfinite(value):
            self.max_statistic = max(self.max_statistic, value)
        if not self.alarm and value >= self.threshold:
            self.alarm = True
            self.alarm_at = self.n
        return self.alarm

    def describe(self) -> dict[str, Any]:
        """JSON-able state: method, alpha, threshold, n, ignored, statistic, max, alarm, alarm_at."""
        return {"method": self.method, "alpha": self.alpha, "jump_size": self.jump_size,
                "threshold": self.threshold, "n": self.n, "ignored": self.ignored,
                "statistic": self.statistic, "max_statistic": self.max_statistic,
                "alarm": self.alarm, "alarm_at": self.alarm_at}
