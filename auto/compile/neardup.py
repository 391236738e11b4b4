"""Near-duplicate canonicalization: inputs that differ by a greeting, a sign-off, casing,
punctuation, an identifier or a vowel typo, mapped to one key — only as far as the witnesses
show the reference answers such inputs alike.

A *canonicalizer* is a DSL expression (:mod:`auto.models.program.ast`) over the task's one text
field, so the key the compiler computes with the interpreter is the key the artifact computes in
WebAssembly (the program lowering, :mod:`auto.codegen.program_lower`). The candidates form a
chain, each step coarser than the one before (:data:`STEPS`):

1. ``case-punctuation``: ASCII lower case; :data:`APOSTROPHES` are deleted and the characters of
   :data:`PUNCTUATION` become spaces;
   runs of spaces collapse (up to 16 in a row) and the ends are stripped;
2. ``greeting-signoff``: then a leading greeting of :data:`GREETINGS` (with an optional
   addressee of :data:`ADDRESSEES`) is cut off, and the text is cut at the first sign-off of
   :data:`SIGNOFFS` (a sign-off word after a space, and everything after it);
3. ``identifiers``: then every digit is deleted (order numbers, amounts, dates);
4. ``vowels``: then every ASCII vowel (``aeiouy``) is deleted: a typo that adds, drops or
   changes a vowel, or swaps a vowel with a neighbour, maps to the same key.

Calibration (:func:`calibrate`) is leave-one-out over the distinct witnessed inputs (each with its
modal witnessed answer; an input whose witnesses disagree is a *conflict*): for an input ``u`` and
a candidate ``c``, the other witnessed inputs whose key ``c(x)`` equals ``c(u)`` form its
neighbourhood; when it holds at least one input and every one of them is consistent and has the
same answer, the neighbourhood answers ``u`` with that answer (a *merge*), which is wrong when it
differs from ``u``'s own answer. A neighbourhood with a conflict or two different answers never
answers (the per-neighbourhood rule the deployed table applies too: :func:`classes`). For each
candidate, ``k`` wrong of ``n`` merges gives the exact one-sided Clopper–Pearson upper bound of
the merge error at confidence ``1 − δ/m`` (Bonferroni over the ``m`` candidates; Clopper &
Pearson, Biometrika 26(4), 1934). A candidate is *certified* when that bound is ``≤ ε``; the
chosen one is the certified candidate with the most merges, the finer on a tie (None when none is
certified).

Guarantee: with probability ≥ 1 − δ over the witnessed inputs, every certified candidate's
merge error is ≤ ε, where the merge error is P(the neighbourhood's answer ≠ the reference's
witnessed answer | a new input, exchangeable with the distinct witnessed inputs, is answered by
its neighbourhood). Witnessed answers carry the reference's own per-call noise, so the bound
covers that noise too. Inputs that are not exchangeable with the witnesses (a new phrasing of a
new intent) are not covered; the shadow audit and the deopt re-verification see those.

Excess over the reference's own noise (``noise=`` with at least ``noise_min_reasked`` re-asked
inputs, :mod:`auto.guards.noise`): the merge error above counts the reference's disagreement with
itself (a neighbour's witnessed call against ``u``'s), which a memo of ``u``'s own answer carries as
well. Then ``delta`` is split evenly: ``δ/2`` for a one-sided Clopper–Pearson lower bound
``rho_low`` of the rate at which the first two witnesses of a re-asked input differ, and ``δ/2``
(Bonferroni over the ``m`` steps) for the merge-error bounds; every distinct input is a merge
target, a conflict input too, labelled with its *first* witnessed answer (one call, as a fresh
call is: dropping the inputs whose calls disagreed would understate the noise), and a step is
certified when its bound is ``≤ ε + rho_low``. Guarantee: with probability ≥ 1 − δ, every
certified step's merge error (against a fresh call) is at most ``ε`` above the reference's
self-disagreement rate, under the assumptions of :data:`auto.guards.noise.ASSUMPTIONS` (the
neighbourhoods' inputs are as noisy as the re-asked ones on average).

The vowel step is the only typo tolerance: a consonant typo (``shipping`` → ``shippinf``) gives
another key and deopts.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Sequence

from scipy.stats import beta

from auto.canonical import canonical_json
from auto.guards.noise import ASSUMPTIONS, ReferenceNoise, excess_plan
from auto.models.program import ast as A
from auto.models.program.interp import make_evaluator

PUNCTUATION = ",.!?;:()[]{}\"*_-#$%&/\\|~+=<>@\n\r\t"
"""Characters the first step turns into spaces."""

APOSTROPHES = "'`"
"""Characters the first step deletes (``hasn't`` and ``hasnt`` are one key)."""

GREETINGS = ("good morning", "good afternoon", "good evening", "greetings", "hello", "hiya", "hey", "dear", "hi")
"""Greetings cut off the start of the text (after the first step; longest first)."""

ADDRESSEES = ("there", "team", "support", "all", "folks", "everyone", "guys")
"""Words that may follow a greeting and are cut off with it."""

SIGNOFFS = ("many thanks", "thanks", "thank you", "thx", "regards", "best regards", "kind regards", "cheers",
            "sincerely", "best wishes", "cordially")
"""Sign-offs: the text is cut at the first one that follows a space (the sign-off and what follows
it, e.g. a name, are dropped)."""

VOWELS = "aeiouy"

STEPS = ("case-punctuation", "greeting-signoff", "identifiers", "vowels")
"""The candidate canonicalizers, finest first; each includes the steps before it."""


def _replace(x: A.Node, old: str, new: str) -> A.Node:
    return A.Join(A.Split(x, old), new)


def _collapse(x: A.Node) -> A.Node:
    for _ in range(4):  # each pass halves a run of spaces: 16 in a row become one
        x = _replace(x, "  ", " ")
    return A.Strip(x)


def _case_punctuation(x: A.Node) -> A.Node:
    x = A.Lower(x)
    for ch in APOSTROPHES:
        x = _replace(x, ch, "")
    for ch in PUNCTUATION:
        x = _replace(x, ch, " ")
    return _collapse(x)


def greeting_pattern() -> str:
    """The regex (safe subset) whose group 1 is the text after a leading greeting of
    :data:`GREETINGS`, with an optional addressee of :data:`ADDRESSEES`, and one space; a text
    without one is group 1 whole. (Run after the first step: no newline is left.)"""
    g = "|".join(sorted(GREETINGS, key=lambda s: (-len(s), s)))
    a = "|".join(sorted(ADDRESSEES, key=lambda s: (-len(s), s)))
    return f"^(?:(?:{g})(?: (?:{a}))? )?(.*)$"


def _greeting_signoff(x: A.Node) -> A.Node:
    x = A.Search(x, greeting_pattern(), 1)
    for s in sorted(SIGNOFFS, key=lambda s: (-len(s), s)):
        x = A.Index(A.Split(x, " " + s), 0)
    return A.Strip(x)


def _delete(x: A.Node, chars: str) -> A.Node:
    for ch in chars:
        x = _replace(x, ch, "")
    return _collapse(x)


def canonicalizer(step: str, field_name: str) -> A.Node:
    """The DSL expression of chain step ``step`` (one of :data:`STEPS`) over ``field_name``.

    Raises:
        ValueError: an unknown step.
    """
    if step not in STEPS:
        raise ValueError(f"unknown canonicalization step {step!r}; the steps are {', '.join(STEPS)}")
    x: A.Node = A.Field(field_name)
    x = _case_punctuation(x)
    if STEPS.index(step) >= 1:
        x = _greeting_signoff(x)
    if STEPS.index(step) >= 2:
        x = _delete(x, "0123456789")
    if STEPS.index(step) >= 3:
        x = _delete(x, VOWELS)
    return x


def _re_search(text: str, pattern: str, group: int) -> str | None:
    m = _compiled(pattern).search(text)
    return None if m is None else m.group(group)


@lru_cache(maxsize=8)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.ASCII)


def key_function(step: str, field_name: str) -> Callable[[dict[str, Any]], str | None]:
    """``key(input) -> str | None``: the interpreter's value of :func:`canonicalizer` (the text
    the artifact computes), None when the field is missing or not a string."""
    node = canonicalizer(step, field_name)
    # Python's re agrees with the Pike VM on the safe subset (as in synthesis); the gate checks
    # the artifact against the reference interpreter on every witness
    ev = make_evaluator(_re_search, memo=False)

    def key(inp: dict[str, Any]) -> str | None:
        v = inp.get(field_name) if isinstance(inp, dict) else None
        if not isinstance(v, str):
            return None
        return ev(node, inp)
    return key


@dataclass
class StepEvidence:
    """One candidate's leave-one-out evidence.

    Attributes:
        step: the chain step.
        merges: distinct witnessed inputs answered by their neighbourhood (``n``).
        wrong: of them, answered differently from their own witnessed answer (``k``).
        upper: the one-sided Clopper–Pearson upper bound of ``k/n`` at ``1 − δ/m`` (None: n = 0).
        certified: ``upper <= ε``.
        classes: distinct keys; served_classes: keys whose neighbourhood answers (the deployed
            table's size).
    """

    step: str
    merges: int
    wrong: int
    upper: float | None
    certified: bool
    classes: int
    served_classes: int

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "merges": self.merges, "wrong": self.wrong,
                "merge_error": (self.wrong / self.merges) if self.merges else None, "upper": self.upper,
                "certified": self.certified, "classes": self.classes, "served_classes": self.served_classes}


@dataclass
class Calibration:
    """:func:`calibrate`'s result: per step its evidence, the chosen step (None: none certified)."""

    epsilon: float
    delta: float
    inputs: int
    steps: list[StepEvidence] = field(default_factory=list)
    chosen: str | None = None
    level: float | None = None
    noise: dict[str, Any] | None = None

    def chosen_evidence(self) -> StepEvidence | None:
        return next((s for s in self.steps if s.step == self.chosen), None)

    def to_dict(self) -> dict[str, Any]:
        """``{"method", "epsilon", "delta", "inputs", "chosen", "steps", "level" (what a step's bound
        is compared with: ``epsilon``, or ``epsilon + rho_low``), "epsilon_refers_to",
        "reference_noise" (None without noise evidence; else its counts, ``min_reasked``, ``used``,
        ``lower_bound``, ``delta_noise``, ``assumptions``, ``reason``)}``."""
        used = bool(self.noise and self.noise.get("used"))
        return {"method": "leave-one-out merges, one-sided Clopper-Pearson, Bonferroni over the steps",
                "epsilon": self.epsilon, "delta": self.delta, "inputs": self.inputs, "chosen": self.chosen,
                "steps": [s.to_dict() for s in self.steps],
                "level": self.epsilon if self.level is None else self.level,
                "epsilon_refers_to": ("the excess of the merge error (against a fresh reference call) over the "
                                      "reference's own disagreement rate between two calls" if used else
                                      "the merge error against single witnessed answers (the reference's noise counts)"),
                "reference_noise": self.noise}


def upper_bound(k: int, n: int, confidence: float) -> float | None:
    """Exact one-sided Clopper–Pearson upper bound of a proportion ``k/n`` at ``confidence``
    (the ``confidence`` quantile of Beta(k + 1, n − k); 1.0 when k = n; None when n = 0)."""
    if n == 0:
        return None
    if k >= n:
        return 1.0
    return float(beta.ppf(confidence, k + 1, n - k))


Member = tuple[str, Any]  # (canonical answer text or None for a conflict, answer)


def classes(keys: Sequence[str | None], answers: Sequence[Any], consistent: Sequence[bool]
            ) -> dict[str, list[int]]:
    """Key → indices of the inputs with that key (None keys left out)."""
    out: dict[str, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        if k is not None:
            out[k].append(i)
    return out


def served_answer(members: Sequence[int], answers_c: Sequence[str | None]) -> str | None:
    """The neighbourhood's answer (canonical JSON) when every member is consistent and they all
    agree, else None (the per-neighbourhood rule)."""
    vals = {answers_c[i] for i in members}
    if len(vals) != 1 or None in vals:
        return None
    return next(iter(vals))


def evidence_of(step: str, keys: Sequence[str | None], answers_c: Sequence[str | None], epsilon: float,
                confidence: float, targets: Sequence[str | None] | None = None) -> StepEvidence:
    """Leave-one-out evidence of one step from each input's key and canonical answer (None for a
    conflict input). ``targets``: the label each input is judged against as a merge target (its
    first witnessed answer, conflicts included); None: ``answers_c``, conflicts left out.
    ``epsilon`` is the level the bound is compared with."""
    groups = classes(keys, answers_c, [a is not None for a in answers_c])
    labels = answers_c if targets is None else targets
    merges = wrong = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        for i in members:
            if labels[i] is None:
                continue
            others = [j for j in members if j != i]
            a = served_answer(others, answers_c)
            if a is None:
                continue
            merges += 1
            wrong += a != labels[i]
    up = upper_bound(wrong, merges, confidence)
    served = sum(1 for m in groups.values() if served_answer(m, answers_c) is not None)
    return StepEvidence(step, merges, wrong, up, up is not None and up <= epsilon, len(groups), served)


def calibrate(inputs: Sequence[dict[str, Any]], answers: Sequence[Any], consistent: Sequence[bool],
              field_name: str, *, epsilon: float, delta: float, steps: Sequence[str] = STEPS,
              noise: ReferenceNoise | None = None, noise_min_reasked: int | None = None,
              first_answers: Sequence[Any] | None = None) -> Calibration:
    """Certify the chain's steps on the distinct witnessed inputs (see the module docstring).

    Args:
        inputs: distinct witnessed inputs (objects with the text field ``field_name``).
        answers: each input's modal witnessed answer (JSON values).
        consistent: whether each input's witnesses all gave that answer.
        epsilon, delta: the risk level and the allowed probability of certifying a step above it,
            both in (0, 1).
        steps: the candidates (default :data:`STEPS`).
        noise: the reference's self-disagreement evidence over these inputs
            (:func:`auto.guards.noise.reference_noise`); with at least ``noise_min_reasked``
            re-asked inputs the bound is on the excess over it (module docstring).
        noise_min_reasked: the contract's ``noise_min_reasked`` (None: never the excess bound).
        first_answers: each input's first witnessed answer (JSON values), the merge targets'
            labels on the excess path (default ``answers``).

    Raises:
        ValueError: mismatched lengths, epsilon or delta outside (0, 1), an unknown step.
    """
    if not (len(inputs) == len(answers) == len(consistent)):
        raise ValueError("inputs, answers and consistent must have the same length")
    if first_answers is not None and len(first_answers) != len(inputs):
        raise ValueError("first_answers must have one answer per input")
    if not (0.0 < epsilon < 1.0 and 0.0 < delta < 1.0):
        raise ValueError(f"epsilon and delta must be in (0, 1), got {epsilon!r}, {delta!r}")
    answers_c = [canonical_json(a) if ok else None for a, ok in zip(answers, consistent)]
    plan = excess_plan(noise, noise_min_reasked, epsilon, delta)
    level = plan.level
    targets = [canonical_json(a) for a in (answers if first_answers is None else first_answers)] if plan.used else None
    confidence = 1.0 - plan.delta_risk / max(1, len(steps))
    cal = Calibration(epsilon=epsilon, delta=delta, inputs=len(inputs), level=level, noise=plan.entry)
    for step in steps:
        key = key_function(step, field_name)
        ev = evidence_of(step, [key(x) for x in inputs], answers_c, level, confidence, targets)
        cal.steps.append(ev)
    certified = [s for s in cal.steps if s.certified]
    if certified:
        cal.chosen = max(certified, key=lambda s: (s.merges, -STEPS.index(s.step))).step  # a tie: the finer step
    return cal


def table(step: str, field_name: str, inputs: Sequence[dict[str, Any]], answers: Sequence[Any],
          consistent: Sequence[bool]) -> list[tuple[str, Any]]:
    """The deployed neighbourhood table of ``step``: ``(key, answer)`` for every key whose
    neighbourhood answers (every member consistent, one answer), sorted by key."""
    key = key_function(step, field_name)
    keys = [key(x) for x in inputs]
    answers_c = [canonical_json(a) if ok else None for a, ok in zip(answers, consistent)]
    out = []
    for k, members in sorted(classes(keys, answers_c, consistent).items()):
        if served_answer(members, answers_c) is not None:
            out.append((k, answers[members[0]]))
    return out


__all__ = ["ADDRESSEES", "APOSTROPHES", "ASSUMPTIONS", "Calibration", "GREETINGS", "PUNCTUATION", "SIGNOFFS", "STEPS", "StepEvidence", "VOWELS",
           "calibrate", "canonicalizer", "evidence_of", "greeting_pattern", "key_function", "table", "upper_bound"]
