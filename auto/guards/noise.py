"""The reference's disagreement with itself, estimated from inputs it was asked more than once.

A reference that samples (an LLM at a nonzero temperature, a labeller who hesitates) answers the
same input differently on different calls. A certificate against *single witnessed answers*
counts that noise as the artifact's error, so a compiled answer that disagrees with a fresh
reference call no more often than a second reference call would is still refused. The quantity
the excess silent-wrong measures is the difference:

    excess = P(tier-1 answer != a fresh reference answer) - P(a second reference answer != it)

The second term (``rho``, the self-disagreement rate) is estimated here from the *re-asked*
inputs: the distinct inputs with at least two witnesses (repeats paid before a table answered
them, shadow audits that re-asked the reference). Each contributes one pair, its first two
witnesses in store order, so the pairs are independent across inputs and each is a Bernoulli draw
with mean that input's ``rho_x``; the disagreeing pairs among ``n`` re-asked inputs are then a
sum of independent Bernoullis whose mean is the re-asked inputs' average ``rho``, and the exact
one-sided Clopper–Pearson *lower* bound (Clopper & Pearson, Biometrika 26(4), 1934; valid for
unequal means by Hoeffding, "On the distribution of the number of successes in independent
trials", Ann. Math. Statist. 27(3), 1956) is at most that average with probability at least the
stated confidence. A lower bound, not an upper one: a certificate of ``risk <= epsilon + rho_low``
implies ``excess <= epsilon`` only when ``rho_low <= rho``.

Assumptions the bound rests on (stated in every entry that uses it): whether an input is re-asked
does not depend on the value of its first answer, and the reference's self-disagreement on the
inputs an artifact admits is at least the average over the re-asked inputs (true when the noise
does not depend on the input, as a fixed sampling temperature over a fixed prompt; a reference
whose noise concentrates on inputs the guard refuses makes the certified excess an understatement).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from scipy.stats import beta

NOISE_DELTA_SHARE = 0.5
"""Share of ``delta`` spent on the lower bound of the self-disagreement when a certificate is on the
excess; the rest goes to the risk test. An even split: neither bound is known in advance to be the
tighter one."""

MAX_LEVEL = 0.999
"""The largest risk level tested (``epsilon + rho_low`` is capped here: a p-value needs a level below 1)."""

ASSUMPTIONS = ("the decision to re-ask an input does not depend on its first answer; the reference's self-disagreement "
               "on the inputs the artifact admits is at least its average over the re-asked inputs")


@dataclass(frozen=True)
class ReferenceNoise:
    """The re-asked inputs' evidence of the reference's self-disagreement.

    Attributes:
        reasked: distinct inputs with at least two witnesses (``n``).
        disagreeing: of them, inputs whose first two witnesses differ (``k``).
    """

    reasked: int
    disagreeing: int

    @property
    def rate(self) -> float | None:
        """``k / n``, or None when nothing was re-asked."""
        return self.disagreeing / self.reasked if self.reasked else None

    def lower_bound(self, confidence: float) -> float:
        """Exact one-sided Clopper–Pearson lower bound of the self-disagreement rate at ``confidence``
        (the ``1 - confidence`` quantile of Beta(k, n - k + 1)); 0.0 when ``k = 0`` or ``n = 0``.

        Raises:
            ValueError: ``confidence`` is not in (0, 1).
        """
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
        if self.disagreeing <= 0 or self.reasked <= 0:
            return 0.0
        return float(beta.ppf(1.0 - confidence, self.disagreeing, self.reasked - self.disagreeing + 1))

    def to_dict(self) -> dict[str, Any]:
        """``{"reasked", "disagreeing", "rate"}`` (the manifest's evidence)."""
        return {"reasked": self.reasked, "disagreeing": self.disagreeing, "rate": self.rate}


@dataclass(frozen=True)
class ExcessPlan:
    """How a certificate uses the noise evidence (:func:`excess_plan`).

    Attributes:
        used: whether the certificate is on the excess.
        level: the risk level the test runs at: ``epsilon``, or ``min(epsilon + lower_bound, MAX_LEVEL)``.
        delta_risk: the share of ``delta`` left for the risk test.
        lower_bound: ``rho_low`` (0.0 when not used).
        entry: the manifest's ``reference_noise`` entry (None without evidence).
    """

    used: bool
    level: float
    delta_risk: float
    lower_bound: float
    entry: dict[str, Any] | None


def excess_plan(noise: "ReferenceNoise | None", min_reasked: int | None, epsilon: float, delta: float) -> ExcessPlan:
    """The excess certificate's level and ``delta`` split, or the plain one's.

    With ``noise`` holding at least ``min_reasked`` re-asked inputs: ``delta_noise =
    NOISE_DELTA_SHARE * delta`` for ``rho_low`` (:meth:`ReferenceNoise.lower_bound` at ``1 -
    delta_noise``), the rest for the risk test at ``epsilon + rho_low``. Otherwise ``epsilon`` at
    ``delta``, and the entry's ``reason`` says why (None ``min_reasked``: the contract turned it
    off). The choice reads the count of re-asked inputs only, never their answers.

    Returns:
        :class:`ExcessPlan`; its ``entry`` is ``{"reasked", "disagreeing", "rate", "min_reasked",
        "used", "lower_bound", "delta_noise", "assumptions", "reason"}`` or None without ``noise``.
    """
    if noise is None:
        return ExcessPlan(False, epsilon, delta, 0.0, None)
    entry: dict[str, Any] = {**noise.to_dict(), "min_reasked": min_reasked, "used": False, "lower_bound": None,
                             "delta_noise": None, "assumptions": ASSUMPTIONS, "reason": None}
    if min_reasked is None:
        entry["reason"] = "the contract's noise_min_reasked is None: epsilon bounds disagreement with single witnessed answers"
        return ExcessPlan(False, epsilon, delta, 0.0, entry)
    if noise.reasked < min_reasked:
        entry["reason"] = (f"only {noise.reasked} re-asked inputs (< {min_reasked}): the reference's self-disagreement "
                           "is not estimated and epsilon bounds disagreement with single witnessed answers")
        return ExcessPlan(False, epsilon, delta, 0.0, entry)
    delta_noise = NOISE_DELTA_SHARE * delta
    low = noise.lower_bound(1.0 - delta_noise)
    entry.update(used=True, lower_bound=round(low, 9), delta_noise=delta_noise)
    return ExcessPlan(True, min(epsilon + low, MAX_LEVEL), delta - delta_noise, low, entry)


def reference_noise(groups: Mapping[str, Sequence[str]], keys: Iterable[str] | None = None) -> ReferenceNoise:
    """The self-disagreement evidence of witness groups (canonical input → canonical outputs in
    store order, :attr:`auto.compile.witnesses.WitnessSet.groups`): the first two outputs of
    every group with at least two (module docstring).

    Args:
        groups: the witness groups.
        keys: only these groups (e.g. the inputs a compile kept); None: every group.
    """
    sel = groups.values() if keys is None else (groups[k] for k in keys if k in groups)
    pairs = [(outs[0], outs[1]) for outs in sel if len(outs) >= 2]
    return ReferenceNoise(reasked=len(pairs), disagreeing=sum(1 for a, b in pairs if a != b))


def first_witnessed(groups: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Canonical input → its first witnessed output (store order): a single reference call, so
    disagreement with it estimates disagreement with a fresh call (a modal answer over several
    calls is less noisy than one call and would understate that)."""
    return {k: outs[0] for k, outs in groups.items() if outs}


__all__ = ["ASSUMPTIONS", "MAX_LEVEL", "NOISE_DELTA_SHARE", "ExcessPlan", "ReferenceNoise", "excess_plan",
           "first_witnessed", "reference_noise"]
