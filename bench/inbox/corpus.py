"""Seeded corpus generator for the inbox family (F2): support tickets with a category cue, sometimes
an urgency or a no-rush cue, sometimes a second category's issue (ambiguous).

Categories are dealt round-robin; a ticket is an optional greeting, one issue of its category (a
phrase naming one of the category's cue words, with slots: products, amounts, order numbers,
days) in one of the frames every category shares, an optional priority
phrase (urgent ~25%, no rush ~20%, both ~6%: ambiguous), an optional detail and closer. With
probability ``mix_rate`` (3%) a second category's issue is appended (``Also, ...``: ambiguous). Each item carries the design category and
the oracle's answers (:func:`bench.inbox.oracle.inbox_oracle`). The same seed always gives the
same corpus; items are distinct.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.inbox.oracle import CATEGORY_ORDER, inbox_oracle

FIELD = "ticket"

_SLOTS = {
    "product": ["the Pro plan", "the mobile app", "the desktop client", "the analytics dashboard", "the API",
                "the team workspace", "the export tool", "the calendar sync", "the reporting module"],
    "amount": ["$19.99", "$49", "$120.50", "$9.99", "$240", "$75", "$1,200"],
    "order": ["A-1042", "B-2291", "C-3310", "D-4087", "E-5123", "F-6650", "G-7718", "H-8802"],
    "days": ["three", "five", "ten", "two", "four", "six"],
    "month": ["March", "April", "May", "June", "July", "August"],
}

ISSUES: dict[str, list[str]] = {
    # each issue is a noun phrase naming one of the oracle's cue words; the frames (FRAMES) are
    # shared by every category, so only the cue tells the categories apart
    "billing": ["my invoice", "a refund", "my last payment", "the billing page", "my receipt", "the charged amount",
                "an overcharged fee", "the invoice total for {month}", "a refund of {amount}", "a payment of {amount}"],
    "technical": ["an error", "a crash on start", "a bug in {product}", "a broken button", "a timeout",
                  "a screen that freezes", "a page not loading", "a crash in {product}", "an error in {product}"],
    "account": ["my password", "the login page", "my username", "two-factor codes", "my profile", "the sign in screen",
                "my login for {product}", "a password reset"],
    "shipping": ["my package", "the delivery of order {order}", "the shipping label", "tracking for order {order}",
                 "the courier", "a parcel for order {order}", "a package that is {days} days late"],
    "security": ["a phishing email", "a possible breach", "a hacked account", "suspicious activity on {product}",
                 "unauthorized changes", "a stolen API key", "a compromised account", "a breach of {product}"],
}
FRAMES = ["I have an issue with {issue}.", "There is a problem with {issue}.", "Please look at {issue}.",
          "Question about {issue}.", "Can someone check {issue}?", "Trouble with {issue} since {month}.",
          "I need help with {issue}.", "Something is wrong with {issue}.", "Writing about {issue}.",
          "We noticed {issue} for {product}.", "Heads up about {issue}.", "Help with {issue}, please."]
BOTH_RATE = 0.06
"""Share of tickets with both an urgency and a no-rush phrase (the priority is ambiguous)."""
URGENT = ["This is urgent.", "Please fix this asap.", "Our production is affected.", "We need this immediately.",
          "It is an emergency for our team.", "The whole service is down for us."]
RELAXED = ["No rush.", "Whenever you can.", "Reply when you get a chance.", "Just wondering.", "It is a minor thing."]
OPENERS = ["", "", "", "Hi, ", "Hello, ", "Hi support, ", "Good morning, ", "Hey team, "]
DETAILS = ["", "", "", " It started yesterday.", " I attached a screenshot.", " We are a team of 12.",
           " I have tried twice already.", " This happened before in {month}."]
CLOSERS = ["", "", " Thanks.", " Thank you!", " Regards, Sam", " Best, Priya", " Cheers, Jordan"]


@dataclass(frozen=True)
class InboxTicket:
    """One generated ticket: text, design category, mixed-in category, and the oracle's answers
    (``label`` = ``{"category", "priority"}``)."""

    ticket: str
    category: str
    mixed_with: str | None
    label: dict


def _fill(rng: random.Random, template: str) -> str:
    out = template
    for slot, values in _SLOTS.items():
        while "{" + slot + "}" in out:
            out = out.replace("{" + slot + "}", rng.choice(values), 1)
    return out


def _issue(rng: random.Random, category: str) -> str:
    text = _fill(rng, rng.choice(FRAMES).replace("{issue}", rng.choice(ISSUES[category])))
    return text[0].upper() + text[1:]


def _one(rng: random.Random, category: str, mix_rate: float) -> InboxTicket:
    body = _issue(rng, category)
    mixed = None
    if rng.random() < mix_rate:
        mixed = rng.choice([c for c in CATEGORY_ORDER if c != category])
        extra = _issue(rng, mixed)
        body += " Also, " + (extra[0].lower() + extra[1:] if extra[:2] != "I " else extra)
    u = rng.random()
    prio = (" " + rng.choice(URGENT)) if u < 0.25 else (" " + rng.choice(RELAXED)) if u < 0.45 else ""
    if rng.random() < BOTH_RATE:  # contradictory: an urgency and a no-rush cue (ambiguous priority)
        prio = " " + rng.choice(RELAXED) + " " + rng.choice(URGENT)
    opener = rng.choice(OPENERS)
    if opener:
        body = body[0].lower() + body[1:] if body[:2] != "I " else body
    text = (opener + body + prio + _fill(rng, rng.choice(DETAILS)) + rng.choice(CLOSERS)).strip()
    text = text[0].upper() + text[1:]
    return InboxTicket(text, category, mixed, inbox_oracle(text))


def generate(n: int, seed: int = 0, mix_rate: float = 0.03) -> list[InboxTicket]:
    """``n`` distinct tickets, categories round-robin (module docstring).

    Raises:
        ValueError: ``n`` distinct tickets cannot be produced.
    """
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[InboxTicket] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(f"could not generate {n} distinct tickets (got {len(out)})")
        t = _one(rng, CATEGORY_ORDER[len(out) % len(CATEGORY_ORDER)], mix_rate)
        if t.ticket not in seen:
            seen.add(t.ticket)
            out.append(t)
    return out


def default_corpus(seed: int = 0) -> dict[str, list[InboxTicket]]:
    """The frozen default corpus: ``train`` (800 tickets, recorded), ``heldout`` (200, never
    recorded) and ``ood`` (20 probes: other languages, no cue at all, contradictions)."""
    items = generate(1000, seed)
    ood = [InboxTicket(t, "ood", None, inbox_oracle(t)) for t in OOD]
    return {"train": items[:800], "heldout": items[800:], "ood": ood}


OOD = [
    "Me cobraron dos veces este mes, necesito un reembolso.",
    "Ich kann mich nicht mehr anmelden.",
    "Le colis n'est jamais arrivé.",
    "asdf qwerty zxcv",
    "Hello?",
    "I love your product, keep going!",
    "Not a billing question, but my invoice page shows an error.",
    "Is this the right place to ask about careers?",
    "My cat walked on the keyboard.",
    "URGENT URGENT URGENT",
    "Refund? No, I do not want a refund, just a receipt.",
    "The app works fine, I just wanted to say thanks.",
    "We were not hacked, but the security page is not loading.",
    "Please call me back on my phone.",
    "Where can I download the brochure?",
    "My account is fine; the package is what is missing.",
    "Can you explain your pricing tiers?",
    "How many people work at your company?",
    "I forgot what I wanted to ask.",
    "Thank you for the quick help yesterday.",
]
