"""The TRIAGE family of the simulated reference model: support tickets → one of six labels.

**Oracle.** :func:`triage_oracle` scores a ticket against per-label keyword lexicons
(:data:`LEXICONS`): the text is lower-cased, currency amounts become the token ``moneyamount``,
everything but letters/digits/apostrophes becomes a space; each lexicon entry that occurs scores
its weight once (single words 1.0, multi-word phrases 2.0, unless given explicitly; a trailing
``*`` matches any word with that prefix). The label with the highest score wins; ties go by
:data:`TIE_ORDER`.

**Ambiguity.** An input is *ambiguous* when no entry matched at all (top score 0: then the
answer is :data:`NO_SIGNAL` and the runner-up its second element), or when the runner-up scores
at least :data:`AMBIGUITY_RATIO` (0.6) times the top score.

**Noise model (the simulator's calibration).** With temperature ``T`` (OpenAI's default 1.0
when the request gives none):

* on ambiguous inputs the answer flips to the runner-up with probability
  ``p(T) = min(0.5, 0.35 * T)`` (0 at T=0, 0.105 at T=0.3, 0.35 at T=1);
* unambiguous inputs are always answered with the top label;
* the label's formatting varies with probability ``q(T) = min(0.15, 0.05 * T)``: one of
  ``Capitalized``, ``UPPER`` or ``label.`` (trailing period), uniformly.

At T=0 the simulator is therefore deterministic. All randomness comes from the per-request
``rng`` the server seeds from (server seed, request-body digest, occurrence count of that body).
This is a model of an LLM's behaviour chosen for testing Auto, not a measurement of any real
model.
"""

from __future__ import annotations

import random
import re
from typing import Any

from bench.chat import last_user_text, system_text

LABELS = ("billing", "bug", "feature", "account", "shipping", "security")
TIE_ORDER = ("security", "billing", "shipping", "account", "bug", "feature")
NO_SIGNAL = ("account", "feature")
AMBIGUITY_RATIO = 0.6
MARKER = "[auto-bench:triage]"

# Entries: "word", "prefix*", "multi word phrase", or (entry, weight).
LEXICONS: dict[str, list[Any]] = {
    "billing": [
        "bill", "bills", "billed", "billing", "billing address", "charge*", "charged twice",
        "double charged", "overcharg*", "invoice*", "refund*", "money back", "payment*", "pay",
        "paid", "paying", "credit card", "debit card", "card", "subscription*", "price", "pricing",
        "cost", "costs", "fee", "fees", "receipt*", "vat", "tax", "taxes", "overdue", "balance",
        "renewal", "renew*", "auto renew", "trial ended", "after the trial", "free tier",
        "downgrad*", "upgrad*", "discount*", "coupon*", "promo code", "prorat*", "chargeback",
        "bank", "transaction*", "annual plan", "monthly plan", "plan should", "old price",
        "purchase order", "finance", "credit note", "moneyamount", ("plan", 0.5), "dollars",
        "euro*", "wire transfer", "paypal", "billed by mistake", "unexpected fee", "cancel my subscription",
        "cancelled before", "canceled before", "statement", "quote",
    ],
    "bug": [
        "bug", "bugs", "buggy", "crash*", "freez*", "frozen", "error", "errors", "error 500",
        "500", "404", "broken", "glitch*", "not working", "stopped working", "doesn't work",
        "does not work", "don't work", "won't load", "doesn't load", "does not load",
        "blank screen", "white screen", "blank white screen", "exception", "throws", "stack trace",
        "traceback", "timeout", "times out", "timed out", "spins forever", "hang*", "stuck",
        "unresponsive", "do not respond", "does not respond", "not respond*", "nothing happens",
        "lost changes", "changes are lost", "data loss", "corrupt*", "regression",
        "since the update", "after the update", "latest update", "wrong dates", "reproduce",
        "steps to reproduce", "console", "infinite loop", "arrive twice", "duplicate notifications",
        "misaligned", "rendering", "display issue", "looks broken", "fails", "failing",
        ("slow", 0.5), ("lag*", 0.5), "no results", "something is broken", "keeps crashing",
        "on startup",
    ],
    "feature": [
        "feature request", "feature", ("features", 0.5), "would be great", "would love",
        "could you add", "can you add", "please add", "add an option", "add support",
        "support for", "suggestion", "suggest*", "idea", "roadmap", "integration", "integrate",
        "dark mode", "shortcut*", "keyboard shortcuts", "option to", "ability to", "would like",
        "we would like", "wish", "enhancement", "improve*", "improvement*", "any plans",
        "plans to", "consider adding", "it would help", "would help", "nice to have",
        "custom fields", "bulk edit", "schedule reports", "export as", "export reports",
        "offline mode", "webhook*", "template*", "customiz*", "customis*", "filters", "filter by",
        "sort by", "new feature", "missing feature", "allow us", "let us", "recurring",
        "two way sync", "read only role", "is that on the roadmap", "add a way", "a way to",
        "request", "vote", "beta",
    ],
    "account": [
        "account", ("accounts", 1.0), "log in", "login", "logging in", "sign in", "signing in",
        "password", "reset my password", "password reset", "reset password", "forgot my password",
        "username", "user name", "email address", "change the email", "profile", "display name",
        "delete my account", "close my account", "account settings", "locked out",
        "too many login attempts", "merge", "two accounts", "transfer ownership", "ownership",
        "admin", "add another admin", "deactivat*", "team member*", "invite*", "seat*",
        "workspace", "phone number", "rename", "sign up", "signed up", "verify my email",
        "verification email", "confirm my email", "email never arrives", "never arrives in my inbox",
        "inbox", "my data", "delete my data", "employee who left", "role",
        "permissions", "access to my account", "can't access", "cannot access", "reactivat*",
        "update my details", "personal information",
    ],
    "shipping": [
        "ship", "ships", "shipped", "shipping", "shipment*", "delivery", "deliver*", "delivered",
        "package*", "parcel*", "tracking", "tracking number", "track", "courier", "carrier",
        "ups", "fedex", "dhl", "usps", "postal", "post office", "in transit", "transit",
        ("arriv*", 0.5), "has not arrived", "never arrived", "never received", "not received",
        "damaged", "crushed", "box", "warehouse", "reship", "redirect", "wrong address",
        "old address", "dispatch*", "express delivery", "expedited", "return label",
        "out for delivery", "customs", "lost package", "missing from the shipment", "doorstep",
        "porch", "wrong house", "left my parcel", "delivery date", ("order", 0.5),
        "order number", "processing for", "half of order", "estimated delivery", "eta",
    ],
    "security": [
        "security", "secure", "suspicious", "hacked", "hack*", "compromised", "phishing",
        "unauthorized", "unauthorised", "unauthorized access", "breach*", "vulnerab*",
        "attacker", "attack*", "brute force", "leak*", "leaked", "revoke", "api key",
        "session token", "token", "encrypt*", "unknown device", "unrecognized",
        "unrecognised", "ip address", "malware", "scam", "fraud*", "two factor",
        "two factor authentication", "2fa", "mfa", "sso", "certificate", "without my permission",
        "stranger", "accessed", "exposed", "xss", "sql injection", "csrf", "penetration test",
        "cve", "exploit*", "ddos", "suspicious login", "login alert", "another country",
        "audit log", "data breach", "pretending to be", "impersonat*", "spoof*",
    ],
}
"""Per-label lexicons (see the module docstring for matching and weights)."""

_MONEY = re.compile(r"[$€£]\s?\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s?(?:usd|eur|gbp|dollars)\b", re.I)
_NONWORD = re.compile(r"[^a-z0-9']+")


def _normalize(text: str) -> str:
    text = _MONEY.sub(" moneyamount ", text.lower())
    text = text.replace("-", " ")
    return " " + " ".join(_NONWORD.sub(" ", text).split()) + " "


def _compile() -> dict[str, list[tuple[str, bool, float]]]:
    out: dict[str, list[tuple[str, bool, float]]] = {}
    for label, entries in LEXICONS.items():
        comp = []
        for e in entries:
            text, weight = (e if isinstance(e, tuple) else (e, None))
            prefix = text.endswith("*")
            norm = _normalize(text.rstrip("*")).strip()
            if weight is None:
                weight = 2.0 if " " in norm else 1.0
            comp.append((norm, prefix, float(weight)))
        out[label] = comp
    return out


_COMPILED = _compile()


def triage_scores(ticket: str, labels: tuple[str, ...] = LABELS) -> dict[str, float]:
    """Lexicon score of each label for ``ticket`` (see module docstring)."""
    text = _normalize(ticket)
    scores = {}
    for label in labels:
        total = 0.0
        for norm, prefix, weight in _COMPILED[label]:
            needle = " " + norm + ("" if prefix else " ")
            if needle in text:
                total += weight
        scores[label] = round(total, 6)
    return scores


def triage_ranked(ticket: str, labels: tuple[str, ...] = LABELS) -> tuple[str, str, bool, dict[str, float]]:
    """``(top, runner_up, ambiguous, scores)`` for ``ticket`` over ``labels``."""
    scores = triage_scores(ticket, labels)
    order = {lab: i for i, lab in enumerate(TIE_ORDER)}
    ranked = sorted(labels, key=lambda lab: (-scores[lab], order.get(lab, 99)))
    top_score = scores[ranked[0]]
    if top_score == 0:
        pref = [lab for lab in NO_SIGNAL if lab in labels] + [lab for lab in ranked if lab not in NO_SIGNAL]
        return pref[0], (pref[1] if len(pref) > 1 else pref[0]), True, scores
    runner = ranked[1] if len(ranked) > 1 else ranked[0]
    ambiguous = len(ranked) > 1 and scores[runner] >= AMBIGUITY_RATIO * top_score
    return ranked[0], runner, ambiguous, scores


def triage_oracle(ticket: str) -> tuple[str, bool, dict[str, float]]:
    """``(label, ambiguous, scores)``: the simulator's noise-free answer for ``ticket``.

    ``label`` is what the simulator answers at T=0; at T>0 ambiguous inputs may flip to the
    runner-up (see the noise model in the module docstring).
    """
    top, _runner, ambiguous, scores = triage_ranked(ticket)
    return top, ambiguous, scores


def flip_probability(temperature: float) -> float:
    """``p(T) = min(0.5, 0.35 * T)``: chance an ambiguous input is answered with the runner-up."""
    return min(0.5, 0.35 * max(0.0, temperature))


def format_probability(temperature: float) -> float:
    """``q(T) = min(0.15, 0.05 * T)``: chance the label's formatting varies."""
    return min(0.15, 0.05 * max(0.0, temperature))


def allowed_labels(system_prompt: str) -> tuple[str, ...]:
    """The known labels named in the system prompt (in :data:`LABELS` order); all if none."""
    text = _normalize(system_prompt)
    found = tuple(lab for lab in LABELS if f" {lab} " in text)
    return found or LABELS


def respond(messages: list[dict], temperature: float, rng: random.Random, request: dict | None = None) -> Any:
    """Answer a triage request: the label text, or a tool call when a tool takes a ``label``.

    Args:
        messages: the chat messages (system prompt names the labels; the last user message is
            the ticket).
        temperature: sampling temperature T (drives the noise model).
        rng: the per-request random generator.
        request: the whole request body (to see ``tools``).
    """
    system = system_text(messages)
    ticket = last_user_text(messages)
    labels = allowed_labels(system)
    top, runner, ambiguous, _scores = triage_ranked(ticket, labels)
    answer = top
    # draw both numbers always, so the stream of draws does not depend on the branch taken
    u_flip, u_fmt, u_kind = rng.random(), rng.random(), rng.random()
    if ambiguous and u_flip < flip_probability(temperature):
        answer = runner
    text = answer
    if u_fmt < format_probability(temperature):
        text = (answer.capitalize(), answer.upper(), answer + ".")[min(2, int(u_kind * 3))]
    tool = _label_tool(request)
    if tool is not None:
        import json

        return [{"name": tool, "arguments": json.dumps({"label": answer})}]
    return text


def _label_tool(request: dict | None) -> str | None:
    for t in (request or {}).get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        props = ((fn or {}).get("parameters") or {}).get("properties") or {}
        if "label" in props:
            return fn.get("name")
    return None
