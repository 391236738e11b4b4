"""When the ratchet compiles: on evidence, not on a cadence.

A compile is worth its cost when the evidence since the last attempt says a new generation would
answer more or answer better. :class:`CompilePolicy` reads the ratchet's counters
(:class:`PolicyState`) after every deopt and audit and names the trigger, or says "not yet":

- ``first``: no generation yet, and enough evidence for the cheapest rung to have a chance
  (``first_at`` distinct witnesses, or ``first_repeats`` repeats: inputs seen again with the same
  answer, or repeats the table overlay answered from their first witness — the memo's evidence);
- ``risk-alarm``: the online risk monitor rejected the installed generation's certificate (it was
  rolled back); compile as soon as one new witness exists;
- ``shift-alarm``: the exchangeability monitor alarmed (the installed generation is tightened and
  deopts everything); the ``k``-th alarm-triggered compile in a row waits for ``2**k`` new
  witnesses since the alarm, so a shift the next generations cannot learn yet (garbage, another
  language) costs a logarithmic number of compiles, not one per alarm;
- ``new-label``: an output the installed generation cannot give was witnessed at least
  ``new_label_support`` times since, when that generation answers inputs never witnessed (a
  table answers only the inputs it holds: a new label is one more entry, which the table lane
  adds, not a reason for a full compile) (:func:`unanswerable_labels`: for a record, only the values of
  its categorical fields count; an open-valued field's new value, an id or an amount, never does);
- ``growth``: the witnesses grew by ``growth`` (a share) since the last attempt, and by at least
  ``min_new`` (geometric growth: each compile costs about as much as the previous ones together
  cost per witness, so the compile budget stays a constant share of the traffic), or by
  ``max_new`` whatever the share (a compile costs seconds of CPU, a deopt a paid model call: in
  the steady state new witnesses are few and each one is worth learning from soon);
- ``headroom``: the installed generation, re-verified on the inputs it deopted since the last
  attempt (its would-be answers against the reference's), would have been right on at least
  ``headroom_accuracy`` of at least ``headroom_min`` of them: a generation calibrated on them
  would answer more;
- ``memo``: the task repeats itself (consistent repeats seen, or repeats the table overlay
  answered from their first witness) and, since the last attempt, ``memo_new`` calls deopted on
  inputs that were already witnessed, or ``memo_new`` inputs were first answered by the overlay
  while no installed table held them (the installed table lags the witnesses): a cheap table
  refresh (the memo rung alone, when no specialist is installed) lets their next repeats answer
  at tier-1 from the table, which a restart or another process on the store loads (the
  overlay's entries live in one process).

``growth`` and ``new-label`` count from the last full attempt (a table refresh does not reset
them); ``memo`` counts from the last attempt of any kind.

After a refusal the next attempt waits for ``growth`` again, so a task that cannot be compiled
costs a logarithmic number of attempts in the witnesses seen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from auto.canonical import canonical_json
from auto.ratchet.events import Fired, Trigger


def unanswerable_labels(output: Any, labels: set[str], fields: dict[str, set[str]]) -> list[str]:
    """The labels of a witnessed ``output`` that the installed generation cannot give.

    Args:
        output: the reference's answer (a JSON value).
        labels: the canonical JSON of every answer the generation declares (its output ``enum``;
            empty when it declares none).
        fields: per categorical field of a record-valued generation, the canonical JSON of its
            declared values (:func:`auto.compile.fields.declared_fields`).

    Returns:
        For a record output: ``"<key>=<value JSON>"`` for each declared categorical field whose
        value is not declared (open-valued fields, and every field of a generation that declares
        none, never count); for any other output, its canonical JSON when it is not in ``labels``;
        ``[]`` otherwise.
    """
    if isinstance(output, dict):
        return [f"{k}={canonical_json(output[k])}" for k, vals in sorted(fields.items())
                if k in output and canonical_json(output[k]) not in vals]
    key = canonical_json(output)
    return [] if key in labels else [key]



RETRY_GROWTH = 3
"""A refused specialist is tried again whatever its certificate predicts once the witnesses have
grown to ``RETRY_GROWTH / 2`` times (1.5×) what they were at the refusal."""


def program_could_pass(certificate: dict[str, Any] | None, witnesses_now: int) -> bool:
    """Whether the program rung could pass now, from its last refusal's out-of-fold agreement
    ``agree`` of ``n`` (``certificate["program"]``, None: True): even if every witness since is
    answered right, the agreement reaches the contract's ``min_agreement`` only once
    ``(agree + m) / (n + m) >= min_agreement`` with ``m = witnesses_now - n`` new witnesses; it is
    tried again anyway once the witnesses grew by half (:data:`RETRY_GROWTH`)."""
    p = (certificate or {}).get("program")
    if not p or not all(isinstance(p.get(k), (int, float)) for k in ("agree", "n", "min_agreement")):
        return True
    k, n, a = p["agree"], p["n"], p["min_agreement"]
    if 2 * witnesses_now >= RETRY_GROWTH * max(1, n) or a >= 1.0:
        return True
    m = max(0, witnesses_now - n)
    return (k + m) >= a * (n + m)


def noise_evidence_grew(reasked_then: int, reasked_now: int, min_reasked: int | None) -> bool:
    """Whether the re-asked inputs grew enough since a refusal for the excess certificate to
    differ: at least ``min_reasked`` of them now (None: the contract never uses them), and
    :data:`RETRY_GROWTH` / 2 (1.5×) as many as at the refusal, so the specialist is retried on
    noise evidence a logarithmic number of times in the re-asked inputs."""
    return (min_reasked is not None and reasked_now >= min_reasked
            and 2 * reasked_now >= RETRY_GROWTH * max(1, reasked_then))


def slow_rungs_could_pass(certificate: dict[str, Any] | None, witnesses_then: int, witnesses_now: int,
                          epsilon: float, delta: float = 0.1, noise_allowance: float = 0.0) -> bool:
    """Whether the specialist rung could pass now, predicted from its last refusal.

    ``certificate`` is what the refused attempt certified (``smallest_certifiable_epsilon`` at
    ``witnesses_then`` distinct witnesses: the ``"specialist"`` part of
    :func:`auto.ratchet.worker.refusal_certificate`), None when the last attempt was not refused
    (then: True). The smallest certifiable level is
    an upper confidence bound; with no errors it shrinks as ``1 / n`` (``1 - delta^(1/n)``, about
    ``log(1/delta) / n``), faster than with errors (``1 / sqrt(n)``, Hoeffding), so at
    ``witnesses_now`` it is predicted at best ``eps_min * witnesses_then / witnesses_now``; the
    rung could pass when that is at most ``epsilon`` (``epsilon + noise_allowance`` when the
    re-asked inputs grew since the refusal, :func:`noise_evidence_grew`: the excess certificate
    lowers the smallest certifiable level by at most the reference's self-disagreement, of which
    the allowance, the contract's ``noise_probe_margin``, is the plausible size). A refusal for too few calibration points (``calibration_n`` below the
    ``ceil(log(delta) / log(1 - epsilon))`` that zero errors need) could pass once the witnesses
    have grown in proportion to reach that many. When nothing was certifiable, or the prediction
    fails, the rung is tried again once the witnesses have grown by half (:data:`RETRY_GROWTH`:
    the model itself may get better with data), so a task whose specialist never passes costs a
    logarithmic number of slow compiles.
    """
    if certificate is None:
        return True
    if 2 * witnesses_now >= RETRY_GROWTH * max(1, witnesses_then):
        return True
    eps_min = certificate.get("smallest_certifiable_epsilon")
    cal_n = certificate.get("calibration_n")
    if isinstance(cal_n, int) and cal_n < _min_points(epsilon, delta):
        return cal_n * witnesses_now >= _min_points(epsilon, delta) * max(1, witnesses_then)
    if not isinstance(eps_min, (int, float)):
        return False
    return eps_min * max(1, witnesses_then) / max(1, witnesses_now) <= epsilon + noise_allowance


def _min_points(epsilon: float, delta: float) -> int:
    """Calibration points that zero errors need to certify ``epsilon`` at ``delta``
    (``ceil(log(delta) / log(1 - epsilon))``, as :func:`auto.guards.risk.min_points`)."""
    return int(math.ceil(math.log(delta) / math.log1p(-epsilon) - 1e-9))


@dataclass
class PolicyState:
    """The counters the policy reads (kept by the ratchet).

    Attributes:
        installed: the installed generation number, or None.
        installed_generalizes: the installed generation answers inputs never witnessed (not a
            table alone).
        witnesses: distinct witnessed inputs in the store for the task (as counted by the ratchet).
        witnesses_at_attempt: ``witnesses`` at the last full compile attempt (0 before any).
        attempts: compile attempts so far (by this ratchet).
        deopts_since_attempt: deopts (with a would-be answer) since the last full attempt.
        would_be_correct_since_attempt: of those, would-be answers equal to the reference's.
        known_misses: deopts of inputs that were already witnessed, in total.
        known_misses_at_attempt: ``known_misses`` at the last attempt of any kind.
        repeats_consistent: inputs witnessed again with the same answer, in total.
        repeats_changed: witnesses of an already witnessed input with another answer than its first.
        repeats_at_attempt: ``repeats_consistent`` at the last attempt.
        new_labels: outputs witnessed since the last attempt that the installed generation cannot
            give (:func:`unanswerable_labels`), with how often each was seen.
        alarm: ``"risk-alarm"`` or ``"shift-alarm"`` when one is pending, else None.
        new_since_alarm: witnesses captured since that alarm.
        alarm_streak: alarm-triggered compiles since the last compile of another kind.
        refusal: per slow rung whose last attempt refused, what it showed
            (:func:`auto.ratchet.worker.refusal_certificate`, with ``witnesses`` at that attempt);
            None when none did.
        overlay_answers: repeats the table overlay answered from witnesses (never re-asked).
        overlay_new_inputs: inputs first answered by the overlay while no installed table held
            them (only grows; :meth:`auto_runtime.overlay.TableOverlay.service`), counted only
            while a table lane can rebuild the installed generation.
        overlay_new_inputs_at_attempt: ``overlay_new_inputs`` at the last attempt of any kind.
        reasked_at_attempt: :attr:`reasked` at the last full attempt.
    """

    installed: int | None = None
    installed_generalizes: bool = False
    witnesses: int = 0
    witnesses_at_attempt: int = 0
    attempts: int = 0
    repeats_consistent: int = 0
    repeats_changed: int = 0
    repeats_at_attempt: int = 0
    known_misses: int = 0
    known_misses_at_attempt: int = 0
    deopts_since_attempt: int = 0
    would_be_correct_since_attempt: int = 0
    new_labels: dict[str, int] = field(default_factory=dict)
    alarm: str | None = None
    new_since_alarm: int = 0
    alarm_streak: int = 0
    refusal: dict[str, Any] | None = None
    overlay_answers: int = 0
    overlay_new_inputs: int = 0
    overlay_new_inputs_at_attempt: int = 0
    reasked_at_attempt: int = 0

    @property
    def reasked(self) -> int:
        """Witnesses of already witnessed inputs (consistent or changed): the re-asked evidence."""
        return self.repeats_consistent + self.repeats_changed

    @property
    def repeats(self) -> int:
        """Repeats seen: consistent re-witnessed ones plus overlay answers."""
        return self.repeats_consistent + self.overlay_answers


@dataclass(frozen=True)
class CompilePolicy:
    """The trigger rules (see the module docstring).

    Attributes:
        first_at: witnesses before the first attempt.
        min_new: the fewest new witnesses a ``growth`` trigger needs.
        max_new: new witnesses that trigger ``growth`` whatever the share.
        growth: the share by which witnesses must grow since the last attempt (0.15 = 15%).
        new_label_support: witnesses of an unanswerable output before ``new-label`` fires.
        first_repeats: consistent repeats that allow the first attempt before ``first_at``.
        headroom_min, headroom_accuracy: the re-verification bar of ``headroom``.
        memo_new: deopts of already witnessed inputs since the last attempt before ``memo``
            fires, once ``first_repeats`` consistent repeats were seen (0: never).
    """

    first_at: int = 20
    min_new: int = 10
    max_new: int = 25
    growth: float = 0.15
    new_label_support: int = 5
    first_repeats: int = 6
    memo_new: int = 3
    headroom_min: int = 20
    headroom_accuracy: float = 0.95

    def trigger(self, s: PolicyState) -> Fired | None:
        """The trigger to compile on now (a :class:`~auto.ratchet.events.Fired`: its kind and
        evidence), or None."""
        new = s.witnesses - s.witnesses_at_attempt
        if s.alarm is not None and s.new_since_alarm >= 2 ** min(s.alarm_streak, 16):
            return Fired(Trigger(s.alarm), {"new_witnesses_since_alarm": s.new_since_alarm,
                                            "alarm_compiles_in_a_row": s.alarm_streak})
        if s.installed is None and s.attempts == 0:
            if s.witnesses >= self.first_at or s.repeats >= self.first_repeats:
                return Fired(Trigger.FIRST, {"witnesses": s.witnesses, "consistent_repeats": s.repeats_consistent,
                                             "overlay_answers": s.overlay_answers})
            return None
        if s.installed is not None and s.installed_generalizes:
            seen = {k: v for k, v in s.new_labels.items() if v >= self.new_label_support}
            if seen:
                return Fired(Trigger.NEW_LABEL, {"labels": seen})
        if (s.installed is not None and s.deopts_since_attempt >= self.headroom_min
                and s.would_be_correct_since_attempt >= self.headroom_accuracy * s.deopts_since_attempt):
            return Fired(Trigger.HEADROOM, {"deopts": s.deopts_since_attempt,
                                            "would_be_correct": s.would_be_correct_since_attempt})
        if new >= self.min_new and (new >= self.growth * max(1, s.witnesses_at_attempt) or new >= self.max_new):
            return Fired(Trigger.GROWTH, {"witnesses": s.witnesses, "at_last_attempt": s.witnesses_at_attempt})
        lag = s.known_misses - s.known_misses_at_attempt
        served = s.overlay_new_inputs - s.overlay_new_inputs_at_attempt
        if self.memo_new and s.repeats >= self.first_repeats and (lag >= self.memo_new or served >= self.memo_new):
            return Fired(Trigger.MEMO, {"deopts_of_witnessed_inputs": lag, "consistent_repeats": s.repeats_consistent,
                                        "overlay_inputs_not_in_table": served, "overlay_answers": s.overlay_answers})
        return None
