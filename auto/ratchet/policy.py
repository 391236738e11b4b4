"""When the ratchet compiles: on evidence, not on a cadence.

A compile is worth its cost when the evidence since the last attempt says a new generation would
answer more or answer better. :class:`CompilePolicy` reads the ratchet's counters
(:class:`PolicyState`) after every deopt and audit and names the trigger, or says "not yet":

- ``first``: no generation yet, and enough witnesses for the cheapest rung to have a chance (the
  memo's repetition evidence, or the specialist's ``min_witnesses``);
- ``risk-alarm``: the online risk monitor rejected the installed generation's certificate (it was
  rolled back); compile as soon as one new witness exists;
- ``shift-alarm``: the exchangeability monitor alarmed (the installed generation is tightened and
  deopts everything);
- ``new-label``: an output the installed generation cannot give was witnessed at least
  ``new_label_support`` times since;
- ``growth``: the witnesses grew by ``growth`` (a share) since the last attempt, and by at least
  ``min_new`` (geometric growth: each compile costs about as much as the previous ones together
  cost per witness, so the compile budget stays a constant share of the traffic);
- ``memo``: inputs seen again and answered consistently since the last attempt (``memo_new``
  of them): a cheap table refresh lets their next repeats answer at tier-1.

After a refusal the next attempt waits for ``growth`` again, so a task that cannot be compiled
costs a logarithmic number of attempts in the witnesses seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PolicyState:
    """The counters the policy reads (kept by the ratchet).

    Attributes:
        installed: the installed generation number, or None.
        witnesses: distinct witnessed inputs in the store for the task (as counted by the ratchet).
        witnesses_at_attempt: ``witnesses`` at the last compile attempt (0 before any).
        attempts: compile attempts so far (by this ratchet).
        repeats_consistent: inputs witnessed again with the same answer, in total.
        repeats_at_attempt: ``repeats_consistent`` at the last attempt.
        new_labels: outputs witnessed since the last attempt that the installed generation cannot
            give, with how often each was seen.
        alarm: ``"risk-alarm"`` or ``"shift-alarm"`` when one is pending, else None.
        new_since_alarm: witnesses captured since that alarm.
    """

    installed: int | None = None
    witnesses: int = 0
    witnesses_at_attempt: int = 0
    attempts: int = 0
    repeats_consistent: int = 0
    repeats_at_attempt: int = 0
    new_labels: dict[str, int] = field(default_factory=dict)
    alarm: str | None = None
    new_since_alarm: int = 0


@dataclass(frozen=True)
class CompilePolicy:
    """The trigger rules (see the module docstring).

    Attributes:
        first_at: witnesses before the first attempt.
        min_new: the fewest new witnesses a ``growth`` trigger needs.
        growth: the share by which witnesses must grow since the last attempt (0.15 = 15%).
        new_label_support: witnesses of an unanswerable output before ``new-label`` fires.
        memo_new: consistent repeats since the last attempt before ``memo`` fires (0: never).
    """

    first_at: int = 20
    min_new: int = 10
    growth: float = 0.15
    new_label_support: int = 5
    memo_new: int = 8

    def trigger(self, s: PolicyState) -> dict[str, Any] | None:
        """The trigger to compile on now, ``{"kind", "evidence"}``, or None."""
        new = s.witnesses - s.witnesses_at_attempt
        if s.alarm is not None and s.new_since_alarm >= 1:
            return {"kind": s.alarm, "evidence": {"new_witnesses_since_alarm": s.new_since_alarm}}
        if s.installed is None and s.attempts == 0:
            if s.witnesses >= self.first_at:
                return {"kind": "first", "evidence": {"witnesses": s.witnesses}}
            return None
        if s.installed is not None:
            seen = {k: v for k, v in s.new_labels.items() if v >= self.new_label_support}
            if seen:
                return {"kind": "new-label", "evidence": {"labels": seen}}
        if new >= self.min_new and new >= self.growth * max(1, s.witnesses_at_attempt):
            return {"kind": "growth", "evidence": {"witnesses": s.witnesses, "at_last_attempt": s.witnesses_at_attempt}}
        repeats = s.repeats_consistent - s.repeats_at_attempt
        if self.memo_new and repeats >= self.memo_new:
            return {"kind": "memo", "evidence": {"consistent_repeats_since_attempt": repeats}}
        return None
