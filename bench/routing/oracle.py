"""The ROUTING family of the simulated reference model: purchase request → approve/review/reject.

**Policy** (:func:`decide`; thresholds in US dollars, the bench's stated policy):

1. a blocked vendor → ``reject``;
2. amount ≥ 20,000 → ``reject``;
3. amount < 500 → ``approve``;
4. a preferred vendor and amount < 5,000 → ``approve``;
5. otherwise → ``review`` (this includes a request with no amount at all: nobody approves an
   unpriced purchase).

**Oracle** (:func:`routing_reading`, :func:`routing_oracle`). The *amount* is read with
:func:`bench.extraction.oracle.money_amounts` (``$45``, ``$1,200``, ``$58.40``, ``USD 300``,
``3k``, ``two thousand dollars``; a bare ``3k`` counts here); with several distinct amounts the
largest is the request's amount (the conservative reading of ``$400 now and $4,000 later``).
The *vendor tier* comes from cue words (:data:`BLOCKED_CUES`: blocked, blacklisted, banned,
on the block list, ...; :data:`PREFERRED_CUES`: preferred, pre-approved; plus a few Spanish,
German and French words); a cue with ``not``/``no longer``/``non``/``formerly``/
``previously``/... among the three words before it within its clause is ignored
(``not a preferred vendor``, ``a formerly blocked supplier``). Blocked outranks preferred; no
cue means a standard vendor. Currency is not converted: the number is compared as written.

**Ambiguity** and its runner-up: several amounts whose decisions differ (runner-up: the decision
for the first-mentioned amount, or the smallest when the first is the largest); both a blocked
and a preferred cue (runner-up: the decision as a preferred vendor); no amount at all on a
vendor that is not blocked (runner-up: ``approve`` for a preferred vendor, else ``reject``).

**Noise model** (same calibration as :mod:`bench.triage.oracle`; temperature ``T``): on ambiguous
requests the decision flips to the runner-up with probability ``p(T) = min(0.5, 0.35 * T)``;
with probability ``q(T) = min(0.15, 0.05 * T)`` the label's form varies (uniformly one of
``Capitalized``, ``UPPER``, ``label.``, ``  label\\n``); nothing else. At T=0 the reply is
exactly the oracle's label.

This is a model of an LLM's behaviour chosen for testing Auto, not a measurement of any real
model.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from bench.chat import last_user_text
from bench.extraction.oracle import _CLAUSE, money_amounts
from bench.triage.oracle import flip_probability, format_probability

MARKER = "[auto-bench:routing]"
LABELS = ("approve", "review", "reject")
APPROVE_BELOW = 500.0
"""Any non-blocked request below this amount (USD) is approved."""
PREFERRED_APPROVE_BELOW = 5_000.0
"""A preferred vendor's request below this amount (USD) is approved."""
REJECT_AT = 20_000.0
"""Any request at or above this amount (USD) is rejected."""
TIERS = ("blocked", "preferred", "standard")

BLOCKED_CUES = [
    r"\bblock(?:ed|listed)\b", r"\bblock ?list\b", r"\bblacklist(?:ed)?\b", r"\bbanned\b", r"\bbarred\b",
    r"\bdebarred\b", r"\bsanctioned\b", r"\bdo[- ]not[- ]use\b",
    r"\bbloquead[oa]s?\b", r"\bgesperrt\w*", r"\bbloqu[ée]e?s?\b",
]
"""Cue patterns of a blocked vendor (over the lower-cased request)."""
PREFERRED_CUES = [
    r"\bpreferred\b", r"\bpre-?approved\b", r"\bpreferid[oa]s?\b", r"\bpreferente\b", r"\bbevorzugt\w*",
    r"\bpr[ée]f[ée]r[ée]e?s?\b", r"\bprivil[ée]gi[ée]e?s?\b",
]
"""Cue patterns of a preferred vendor."""

_BLOCKED_RE = [re.compile(p) for p in BLOCKED_CUES]
_PREFERRED_RE = [re.compile(p) for p in PREFERRED_CUES]
_TIER_NEGATORS = {"not", "no", "non", "never", "longer", "formerly", "previously", "once", "ex", "isn't", "wasn't",
                  "aren't", "un", "nicht", "kein", "keine", "pas", "ya"}


def decide(amount: float | None, tier: str) -> str:
    """The routing policy (module docstring) for ``amount`` (USD, ``None`` = unstated) and
    ``tier`` (one of :data:`TIERS`).

    Raises:
        ValueError: unknown ``tier`` or a negative/non-finite amount.
    """
    if tier not in TIERS:
        raise ValueError(f"unknown vendor tier {tier!r} (known: {', '.join(TIERS)})")
    if amount is not None and not (amount >= 0 and amount != float("inf")):
        raise ValueError(f"amount must be a finite number >= 0, got {amount!r}")
    if tier == "blocked":
        return "reject"
    if amount is None:
        return "review"
    if amount >= REJECT_AT:
        return "reject"
    if amount < APPROVE_BELOW:
        return "approve"
    if tier == "preferred" and amount < PREFERRED_APPROVE_BELOW:
        return "approve"
    return "review"


def _tier_hits(low: str, pats: list[re.Pattern]) -> list[str]:
    hits = []
    for p in pats:
        for m in p.finditer(low):
            clause = _CLAUSE.split(low[max(0, m.start() - 60):m.start()])[-1]
            words = re.findall(r"[a-zà-ÿ']+", clause)[-3:]
            if not any(w in _TIER_NEGATORS or w.endswith("n't") for w in words):
                hits.append(m.group(0))
    return hits


@dataclass(frozen=True)
class RoutingReading:
    """The oracle's reading of one request.

    Attributes:
        decision: ``approve`` / ``review`` / ``reject``.
        amount: the request's amount (USD as written; the largest one mentioned) or ``None``.
        amounts: every distinct amount found, in order of mention.
        tier: ``blocked`` / ``preferred`` / ``standard``.
        runner_up: the second reading's decision (equals ``decision`` when unambiguous).
        ambiguous: whether a second reading exists (see the module docstring).
    """

    decision: str
    amount: float | None
    amounts: tuple[float, ...]
    tier: str
    runner_up: str
    ambiguous: bool


def routing_reading(request: str) -> RoutingReading:
    """Read ``request`` (module docstring); total for any string.

    Raises:
        TypeError: ``request`` is not a ``str``.
    """
    if not isinstance(request, str):
        raise TypeError(f"request must be a str, got {type(request).__name__}")
    low = request.replace("\u2019", "'").lower()
    amounts: list[float] = []
    for m in money_amounts(request, bare_k=True):
        if m.value not in amounts:
            amounts.append(m.value)
    blocked = bool(_tier_hits(low, _BLOCKED_RE))
    preferred = bool(_tier_hits(low, _PREFERRED_RE))
    tier = "blocked" if blocked else ("preferred" if preferred else "standard")
    amount = max(amounts) if amounts else None
    decision = decide(amount, tier)
    runner = decision
    if blocked and preferred:
        runner = decide(amount, "preferred")
    elif amount is None and tier != "blocked":
        runner = "approve" if tier == "preferred" else "reject"
    elif len(amounts) > 1:
        other = amounts[0] if amounts[0] != amount else min(amounts)
        runner = decide(other, tier)
    return RoutingReading(decision, amount, tuple(amounts), tier, runner, runner != decision)


def routing_oracle(request: str) -> str:
    """The simulator's noise-free decision for ``request`` (what it answers at T=0).

    Raises:
        TypeError: ``request`` is not a ``str``.
    """
    return routing_reading(request).decision


FORMAT_VARIANTS = ("capitalized", "upper", "trailing_period", "whitespace")
"""The formatting variants of the label (form only)."""


def format_label(label: str, variant: str | None = None) -> str:
    """``label`` in formatting ``variant`` (``None``: as is). Raises ``ValueError`` for an
    unknown variant."""
    if variant is None:
        return label
    forms = {"capitalized": label.capitalize(), "upper": label.upper(), "trailing_period": label + ".",
             "whitespace": "  " + label + "\n"}
    if variant not in forms:
        raise ValueError(f"unknown format variant {variant!r} (known: {', '.join(FORMAT_VARIANTS)})")
    return forms[variant]


def respond(messages: list[dict], temperature: float, rng: random.Random, request: dict | None = None) -> Any:
    """Answer a routing request: the decision text, or a tool call when a tool of the request
    takes a ``decision`` or ``label`` argument.

    Args:
        messages: the chat messages; the last user message is the purchase request.
        temperature: sampling temperature T (drives the noise model of the module docstring).
        rng: the per-request random generator (three draws per call, whatever the branch).
        request: the whole request body (to see ``tools``).
    """
    reading = routing_reading(last_user_text(messages))
    answer = reading.decision
    u_flip, u_fmt, u_kind = rng.random(), rng.random(), rng.random()
    if reading.ambiguous and u_flip < flip_probability(temperature):
        answer = reading.runner_up
    for t in (request or {}).get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        props = ((fn or {}).get("parameters") or {}).get("properties") or {}
        key = "decision" if "decision" in props else ("label" if "label" in props else None)
        if key is not None:
            return [{"name": fn.get("name"), "arguments": json.dumps({key: answer})}]
    variant = None
    if u_fmt < format_probability(temperature):
        variant = FORMAT_VARIANTS[min(len(FORMAT_VARIANTS) - 1, int(u_kind * len(FORMAT_VARIANTS)))]
    return format_label(answer, variant)
