"""The near-duplicate stream: hand-written support tickets and the surface variations people add.

**Tickets.** :data:`TICKETS` holds hand-written base tickets, each with its category and one or
two hand-written paraphrases (other words for the same request). ``{n}`` in a ticket is an
identifier (an order number) and ``{amt}`` an amount, drawn per rendering. Two kinds of ticket
are traps for a cache that merges by similarity: pairs that differ by one word that flips the
category (``cancel`` / ``don't cancel``, ``charged`` / ``not charged``), and tickets whose category
depends on the amount (:func:`category_of`: a refund of at least :data:`ESCALATE_AT` dollars is
``escalation``). Tickets marked ``shift`` (a new category, ``warranty``) appear only from the
shift on.

**Renderings** (:func:`render`): each draw picks the base text or a paraphrase, then adds, each
with its own probability, a greeting, a sign-off (often with a name), another casing, a typo
(a dropped, doubled or swapped letter, a vowel swapped for another) and fresh identifiers.

**Stream** (:func:`stream`): draws follow a Zipf law (exponent :data:`ZIPF_S`) over the base
tickets in a seeded order; ``repeat_share`` of the draws repeat an earlier rendering exactly (a
customer re-sending the same text).

All text here was written for this bench; nothing is taken from a dataset.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from auto.errors import ArgumentError

ESCALATE_AT = 500
"""A refund of at least this many dollars is an ``escalation`` (the reference's policy)."""

ZIPF_S = 1.1

FIELD = "ticket"

# (category, base text, paraphrases, shift)
TICKETS: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    ("shipping", "my order {n} has not arrived yet", ("order {n} still hasn't shown up", "still waiting on order {n}"), False),
    ("shipping", "the tracking page for order {n} has not updated in a week", ("tracking for {n} is stuck",), False),
    ("shipping", "the package was delivered to the wrong address", ("my parcel went to someone else's house",), False),
    ("shipping", "can you ship order {n} to my office instead", ("please change the delivery address of order {n}",), False),
    ("shipping", "the box arrived damaged and crushed", ("my package came in crushed",), False),
    ("billing", "i was charged twice for order {n}", ("there are two charges for order {n} on my card",), False),
    ("billing", "i was not charged for order {n} but it shipped", ("order {n} shipped without any charge",), False),
    ("billing", "my invoice shows the wrong tax amount", ("the tax on my invoice is wrong",), False),
    ("billing", "please update the credit card on my account", ("i need to change my payment card",), False),
    ("billing", "why did my subscription price go up", ("my monthly plan costs more now, why",), False),
    ("refund", "i would like a refund of ${amt} for order {n}", ("please refund ${amt} on order {n}",), False),
    ("refund", "the item i returned has not been refunded", ("still no refund for my return",), False),
    ("refund", "how long does a refund take", ("when will i get my money back",), False),
    ("account", "how do i reset my password", ("i forgot my password",), False),
    ("account", "i cannot log in to my account", ("login keeps failing for me",), False),
    ("account", "please delete my account and my data", ("close my account and remove my data",), False),
    ("account", "how do i change the email on my account", ("i want to use a different email address",), False),
    ("bug", "the app crashes when i open settings", ("opening settings makes the app crash",), False),
    ("bug", "the export button does nothing", ("clicking export has no effect",), False),
    ("bug", "search results never finish loading", ("the search page spins forever",), False),
    ("bug", "i get an error 500 when i upload a photo", ("photo upload fails with a server error",), False),
    ("cancel", "please cancel order {n}", ("i want to cancel order {n}",), False),
    ("keep", "please don't cancel order {n}, i still want it", ("do not cancel order {n}, i still need it",), False),
    ("cancel", "cancel my subscription at the end of the month", ("stop my plan when this month ends",), False),
    ("keep", "i changed my mind, do not cancel my subscription", ("keep my subscription, i changed my mind",), False),
    ("warranty", "my blender stopped working after two months, is it under warranty",
     ("is a broken blender covered by the warranty",), True),
    ("warranty", "how do i file a warranty claim for order {n}", ("i want to claim the warranty on order {n}",), True),
    ("warranty", "the screen on my tablet died, does the warranty cover it", ("tablet screen dead, warranty?",), True),
)

CATEGORIES = tuple(sorted({t[0] for t in TICKETS} | {"escalation"}))

GREETINGS = ("Hi", "Hello", "Hey", "Hi there", "Hello team", "Good morning", "Dear support", "hey all")
SIGNOFFS = ("Thanks", "Thank you", "Thanks!", "Regards", "Best regards", "Cheers", "Many thanks", "thx")
NAMES = ("Ana", "Bob", "Chen", "Dmitri", "Eva", "Farid", "Grace", "Hugo", "Ines", "Jun")


@dataclass(frozen=True)
class Item:
    """One stream item: the ticket text, its base ticket's index, the amount it names (or None),
    and whether it is a held-back (shift) ticket."""

    ticket: str
    base: int
    amount: int | None
    shift: bool


def category_of(base: int, amount: int | None) -> str:
    """The category a careful reader gives a rendering of base ticket ``base`` naming ``amount``."""
    cat = TICKETS[base][0]
    if cat == "refund" and amount is not None and amount >= ESCALATE_AT:
        return "escalation"
    return cat


def _typo(rng: random.Random, text: str) -> str:
    words = [i for i, w in enumerate(text.split(" ")) if len(w) >= 5 and w.isalpha()]
    if not words:
        return text
    ws = text.split(" ")
    i = rng.choice(words)
    w = ws[i]
    j = rng.randrange(1, len(w) - 1)
    kind = rng.randrange(4)
    if kind == 0:
        w = w[:j] + w[j + 1:]  # a dropped letter
    elif kind == 1:
        w = w[:j] + w[j] + w[j:]  # a doubled letter
    elif kind == 2:
        w = w[:j - 1] + w[j] + w[j - 1] + w[j + 1:]  # two letters swapped
    else:
        vowels = "aeiou"
        k = next((p for p in range(1, len(w)) if w[p] in vowels), None)
        if k is not None:
            w = w[:k] + rng.choice([v for v in vowels if v != w[k]]) + w[k + 1:]  # another vowel
    ws[i] = w
    return " ".join(ws)


def render(rng: random.Random, base: int) -> Item:
    """One rendering of base ticket ``base`` (see the module docstring)."""
    cat, text, paraphrases, shift = TICKETS[base]
    if paraphrases and rng.random() < 0.3:
        text = rng.choice(paraphrases)
    amount = None
    if "{amt}" in text:
        amount = rng.choice((20, 35, 60, 80, 120, 250, 400, 499, 500, 650, 900, 1200))
        text = text.replace("{amt}", str(amount))
    if "{n}" in text:
        text = text.replace("{n}", str(rng.randrange(10000, 99999)) if rng.random() < 0.7 else "#" + str(rng.randrange(1000, 9999)))
    if rng.random() < 0.25:
        text = _typo(rng, text)
    r = rng.random()
    if r < 0.5:
        text = text[0].upper() + text[1:]
    elif r < 0.6:
        text = text.upper()
    if not text.endswith(("?", ".", "!")) and rng.random() < 0.5:
        text += rng.choice((".", "?", "!", "!!"))
    if rng.random() < 0.5:
        text = f"{rng.choice(GREETINGS)}{rng.choice((',', '!', ''))} {text}"
    if rng.random() < 0.5:
        s = rng.choice(SIGNOFFS)
        text = f"{text} {s}" + (f", {rng.choice(NAMES)}" if rng.random() < 0.5 else "")
    return Item(text, base, amount, shift)


def stream(items: int, seed: int, repeat_share: float = 0.2, shift_at: float = 0.5) -> tuple[list[Item], int]:
    """``(items, shift position)``: the seeded stream (module docstring).

    Raises:
        ArgumentError: ``items`` < 1 or ``repeat_share`` outside [0, 1).
    """
    if items < 1:
        raise ArgumentError(f"--items must be at least 1, got {items}")
    if not 0.0 <= repeat_share < 1.0:
        raise ArgumentError(f"repeat share must be in [0, 1), got {repeat_share!r}")
    rng = random.Random(seed)
    before = [i for i, t in enumerate(TICKETS) if not t[3]]
    after = list(range(len(TICKETS)))
    rng.shuffle(before)
    order_after = before + [i for i in after if TICKETS[i][3]]
    rng.shuffle(order_after)
    shift = int(items * shift_at)
    out: list[Item] = []
    for pos in range(items):
        if out and rng.random() < repeat_share:
            out.append(rng.choice(out) if pos < shift else rng.choice(out[max(0, len(out) - 200):]))
            continue
        pool = before if pos < shift else order_after
        w = [1.0 / (k + 1) ** ZIPF_S for k in range(len(pool))]
        out.append(render(rng, rng.choices(pool, weights=w)[0]))
    return out, shift
