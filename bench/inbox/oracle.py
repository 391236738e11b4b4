"""The INBOX family (F2) of the simulated reference model: three prompts of one agent.

The agent (:mod:`bench.inbox.agent`) asks three things of every ticket, each with the family
marker :data:`MARKER` and a step name in its system prompt (``step: classify`` / ``priority`` /
``summary``):

**classify** (:func:`classify_reading`): the category is the first of :data:`CATEGORY_ORDER` whose
cue words (:data:`CATEGORY_CUES`, over the lower-cased ticket, word-bounded) occur; no cue reads as
``technical``. Two categories with cues make the ticket ambiguous; the runner-up is the other one.

**priority** (:func:`priority_reading`): ``P1`` for a security ticket or an urgency cue
(:data:`URGENT_CUES`), ``P3`` for a low-priority cue (:data:`LOW_CUES`) without an urgency cue,
``P2`` otherwise. Both kinds of cue make it ambiguous (runner-up ``P2``); so does a ticket whose
category is ambiguous between security and another (runner-up: that category's priority).

**summary**: open-ended text (:func:`summarize`): one of several sentence frames around the ticket's
first clause, chosen at random; at temperature T the frame and the wording are drawn from
``Random`` per call (divergent, as an LLM's summary is), at T = 0 the first frame.

**Noise** (as the other families, :mod:`bench.triage.oracle`): on ambiguous tickets the label flips
to the runner-up with probability ``p(T) = min(0.5, 0.35 T)``; with probability
``q(T) = min(0.15, 0.05 T)`` the label's form varies (``Billing``, ``BILLING``, ``billing.``,
surrounding whitespace). This models an LLM for testing Auto; it measures no real model.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from bench.chat import last_user_text, system_text
from bench.triage.oracle import flip_probability, format_probability

MARKER = "[auto-bench:inbox]"
STEPS = ("classify", "priority", "summary")
CATEGORY_ORDER = ("security", "billing", "account", "shipping", "technical")
CATEGORY_CUES: dict[str, tuple[str, ...]] = {
    "security": ("hacked", "phishing", "suspicious", "unauthorized", "breach", "stolen", "compromised"),
    "billing": ("charged", "invoice", "refund", "payment", "billing", "receipt", "overcharged"),
    "account": ("password", "log in", "login", "username", "two-factor", "profile", "sign in"),
    "shipping": ("package", "delivery", "shipping", "tracking", "courier", "parcel"),
    "technical": ("error", "crash", "crashes", "bug", "broken", "timeout", "freezes", "not loading"),
}
URGENT_CUES = ("urgent", "asap", "immediately", "outage", "is down", "production", "emergency", "right now")
LOW_CUES = ("no rush", "whenever", "when you get a chance", "just wondering", "minor", "low priority")
PRIORITIES = ("P1", "P2", "P3")

_CUE_RE = {c: [re.compile(r"(?<![a-z])" + re.escape(w) + r"(?![a-z])") for w in ws] for c, ws in CATEGORY_CUES.items()}
_URGENT_RE = [re.compile(r"(?<![a-z])" + re.escape(w) + r"(?![a-z])") for w in URGENT_CUES]
_LOW_RE = [re.compile(r"(?<![a-z])" + re.escape(w) + r"(?![a-z])") for w in LOW_CUES]


@dataclass(frozen=True)
class Reading:
    """A label, its runner-up (equal when unambiguous) and whether the input is ambiguous."""

    label: str
    runner_up: str
    ambiguous: bool


def categories_cued(ticket: str) -> list[str]:
    """The categories whose cues occur in ``ticket``, in :data:`CATEGORY_ORDER`."""
    low = ticket.lower()
    return [c for c in CATEGORY_ORDER if any(p.search(low) for p in _CUE_RE[c])]


def classify_reading(ticket: str) -> Reading:
    """The category of ``ticket`` (module docstring)."""
    cued = categories_cued(ticket)
    if not cued:
        return Reading("technical", "technical", False)
    return Reading(cued[0], cued[1] if len(cued) > 1 else cued[0], len(cued) > 1)


def _priority_for(ticket: str, category: str) -> tuple[str, bool]:
    low = ticket.lower()
    urgent = any(p.search(low) for p in _URGENT_RE)
    relaxed = any(p.search(low) for p in _LOW_RE)
    if category == "security" or urgent:
        return "P1", urgent and relaxed and category != "security"
    if relaxed:
        return "P3", False
    return "P2", False


def priority_reading(ticket: str) -> Reading:
    """The priority of ``ticket`` (module docstring)."""
    cat = classify_reading(ticket)
    label, both = _priority_for(ticket, cat.label)
    if both:
        return Reading(label, "P2", True)
    if cat.ambiguous:
        alt, _ = _priority_for(ticket, cat.runner_up)
        if alt != label:
            return Reading(label, alt, True)
    return Reading(label, label, False)


_FRAMES = ("Customer reports: {gist}.", "{gist} (customer asks for help).", "The customer writes that {gist}.",
           "Ticket about {cat}: {gist}.", "User says {gist}; needs follow-up.", "Summary: {gist}.")


def _gist(ticket: str) -> str:
    text = re.sub(r"^(hi|hello|hey|good morning)[^,.:!]*[,.:!]\s*", "", ticket.strip(), flags=re.I)
    first = re.split(r"(?<=[.!?])\s|;", text)[0].strip().rstrip(".!?")
    words = first.split()
    return " ".join(words[:14]) if words else "no details given"


def summarize(ticket: str, temperature: float, rng: random.Random) -> str:
    """A one-line summary (module docstring); two calls at T > 0 usually differ."""
    gist = _gist(ticket)
    cat = classify_reading(ticket).label
    if temperature <= 0:
        frame = _FRAMES[0]
    else:
        frame = rng.choice(_FRAMES)
        if rng.random() < min(0.9, 0.6 * temperature):
            gist = gist[0].lower() + gist[1:] if gist else gist
        if rng.random() < min(0.9, 0.5 * temperature):
            words = gist.split()
            gist = " ".join(words[: max(3, len(words) - rng.randint(1, 4))])
    return frame.format(gist=gist, cat=cat)


_FORMS = ("capitalized", "upper", "trailing_period", "whitespace")


def _form(label: str, u: float) -> str:
    kind = _FORMS[min(len(_FORMS) - 1, int(u * len(_FORMS)))]
    return {"capitalized": label.capitalize(), "upper": label.upper(), "trailing_period": label + ".",
            "whitespace": "  " + label + "\n"}[kind]


def step_of(messages: list[dict]) -> str | None:
    """The step named in the system prompt (``step: classify`` ...), or None."""
    m = re.search(r"step:\s*(\w+)", system_text(messages))
    return m.group(1) if m and m.group(1) in STEPS else None


def respond(messages: list[dict], temperature: float, rng: random.Random, request: dict | None = None) -> Any:
    """Answer one of the inbox agent's prompts (module docstring).

    Raises:
        ValueError: the system prompt names no inbox step (the simulator answers that with an
            error rather than an invented reply).
    """
    step = step_of(messages)
    ticket = last_user_text(messages)
    u_flip, u_fmt, u_kind = rng.random(), rng.random(), rng.random()
    if step == "summary":
        return summarize(ticket, temperature, rng)
    if step == "classify":
        reading = classify_reading(ticket)
    elif step == "priority":
        reading = priority_reading(ticket)
    else:
        raise ValueError("inbox prompt without a known step (classify, priority, summary)")
    label = reading.runner_up if reading.ambiguous and u_flip < flip_probability(temperature) else reading.label
    if u_fmt < format_probability(temperature):
        label = _form(label, u_kind)
    return label


def inbox_oracle(ticket: str) -> dict[str, str]:
    """The noise-free answers of the deterministic steps: ``{"category", "priority"}``."""
    return {"category": classify_reading(ticket).label, "priority": priority_reading(ticket).label}


__all__ = ["CATEGORY_CUES", "CATEGORY_ORDER", "LOW_CUES", "MARKER", "PRIORITIES", "Reading", "STEPS", "URGENT_CUES",
           "classify_reading", "inbox_oracle", "priority_reading", "respond", "step_of", "summarize"]
