"""Seeded corpus generator for the triage family (F1): support tickets in six categories.

Five categories form the training distribution (billing, bug, feature, account, security);
``shipping`` is held back as the scheduled shift (a category never seen in training). Tickets
are assembled from per-category issue templates with slot fillers, plus optional openers,
detail sentences and closers, so phrasing and length vary (roughly 8 to 80 words). A share of
tickets mix two categories' issues, which makes them genuinely ambiguous for the reference
model. The same seed always gives the same corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

TRAIN_CATEGORIES = ("billing", "bug", "feature", "account", "security")
SHIFT_CATEGORY = "shipping"
CATEGORIES = TRAIN_CATEGORIES + (SHIFT_CATEGORY,)

_SLOTS = {
    "amount": ["$12.99", "$49", "$120.00", "$7.50", "$310", "$89.95", "$15", "$2,400"],
    "plan": ["Pro", "Team", "Basic", "Enterprise", "Starter", "Premium"],
    "feature": ["the dashboard", "the export screen", "the mobile app", "the calendar view",
                "the search page", "the reports tab", "the settings page", "the API",
                "the notifications panel", "the file uploader", "the checkout page"],
    "device": ["iPhone 14", "Pixel 8", "Windows 11 laptop", "MacBook", "iPad", "Chromebook",
               "Galaxy S23", "Linux desktop"],
    "browser": ["Chrome", "Firefox", "Safari", "Edge"],
    "days": ["two", "three", "five", "ten", "twelve", "four"],
    "order": ["4482", "88213", "19034", "55710", "70921", "31877", "64002"],
    "fmt": ["CSV", "PDF", "Excel", "JSON", "Markdown"],
    "tool": ["Slack", "Google Calendar", "Salesforce", "Jira", "Zapier", "Outlook", "GitHub"],
    "carrier": ["UPS", "FedEx", "DHL", "USPS", "the courier"],
    "item": ["the headphones", "my package", "the replacement part", "the monitor",
             "the starter kit", "my parcel", "the box", "the order"],
}

_ISSUES = {
    "billing": [
        "I was charged twice for my {plan} subscription this month and need the duplicate refunded.",
        "My invoice shows {amount} but my plan should only cost less than that.",
        "Please refund the {amount} charge from last week, I cancelled before the renewal.",
        "The receipt for my last payment never arrived, can you resend the invoice?",
        "Why did my credit card get billed {amount} when I am on the free tier?",
        "I downgraded to {plan} but I am still being charged the old price.",
        "There is an unexpected {amount} fee on my bill that nobody explained.",
        "Can you update the billing address on my invoices for tax purposes?",
        "My payment failed and now the account shows an overdue balance of {amount}.",
        "I need a refund for the annual {plan} plan, we were billed by mistake.",
        "The VAT on my invoice is wrong and finance needs a corrected invoice.",
        "You charged my card {amount} after the trial ended without any warning.",
    ],
    "bug": [
        "{feature} crashes every time I open it on my {device}.",
        "When I click save in {feature} nothing happens and my changes are lost.",
        "The app freezes and shows a blank white screen in {browser}.",
        "Exporting to {fmt} produces a corrupted file that will not open.",
        "I get an error 500 whenever I load {feature}.",
        "{feature} shows the wrong dates after the latest update.",
        "The sync with {tool} stopped working and throws an exception.",
        "Buttons on {feature} do not respond in {browser}, it looks broken.",
        "Since the update the app keeps crashing on startup on my {device}.",
        "Search returns no results even for items that clearly exist, something is broken.",
        "The page spins forever and then times out with a stack trace.",
        "Notifications arrive twice and sometimes the app crashes when I tap them.",
    ],
    "feature": [
        "It would be great if {feature} supported dark mode.",
        "Could you add an option to export reports as {fmt}?",
        "Please add an integration with {tool}, our whole team uses it.",
        "I would love keyboard shortcuts in {feature}.",
        "Can you add a way to schedule reports to be emailed weekly?",
        "Feature request: let us bulk edit items in {feature}.",
        "It would help a lot to have custom fields on tasks.",
        "Would you consider adding two-way sync with {tool}?",
        "Please add support for recurring events in {feature}.",
        "We would like a read-only role for guests, is that on the roadmap?",
        "Suggestion: add filters by date range to {feature}.",
        "Any plans to offer an offline mode for the {device} app?",
    ],
    "account": [
        "I cannot log in even though I reset my password twice.",
        "Please change the email address on my account to my new work address.",
        "How do I transfer ownership of the workspace to a colleague?",
        "I want to delete my account and all my data.",
        "My username is wrong, can you rename my profile?",
        "I am locked out of my account after too many login attempts.",
        "Please merge my two accounts, I signed up twice by accident.",
        "How can I add another admin to our team account?",
        "The password reset email never arrives in my inbox.",
        "I need to update the phone number on my profile.",
        "Please deactivate the account of an employee who left the company.",
        "I cannot find where to change my display name in account settings.",
    ],
    "security": [
        "I got a suspicious login alert from another country, was my account hacked?",
        "Someone changed my password without my permission, I think my account is compromised.",
        "I received a phishing email pretending to be from your company.",
        "Two-factor authentication codes stopped arriving and I worry about unauthorized access.",
        "There is an unknown device signed in to my account, please help me secure it.",
        "I think my API key leaked in a public repository, how do I revoke it?",
        "Please report this vulnerability: the session token is visible in the URL.",
        "An attacker seems to be trying to brute force our admin login.",
        "I see login attempts from an unrecognized IP address every night.",
        "Is my data encrypted at rest? Our security team needs to know after the breach news.",
        "A stranger accessed our shared files, we suspect a security breach.",
        "Our SSO certificate expired and we fear unauthorized access to the workspace.",
    ],
    "shipping": [
        "My package has not arrived after {days} weeks and tracking has not moved.",
        "{carrier} says {item} was delivered but I never received it.",
        "Order {order} shipped to my old address, can you redirect the delivery?",
        "The tracking number for order {order} does not work on the {carrier} website.",
        "{item} arrived damaged, the box was crushed in transit.",
        "When will order {order} ship? It has said processing for {days} days.",
        "I paid for express delivery but {item} is still in transit.",
        "The courier left my parcel at the wrong house.",
        "Can I change the delivery date for order {order}?",
        "Only half of order {order} was delivered, the rest is missing from the shipment.",
        "{carrier} returned {item} to the warehouse, please reship it.",
        "Delivery was scheduled for yesterday but nothing showed up.",
    ],
}

_OPENERS = ["", "", "", "Hi team, ", "Hello, ", "Hey there. ", "Good morning, ", "Hi support, ",
            "Quick question: ", "Urgent: ", "Hello support team, ", "Hi, hope you are well. "]
_DETAILS = [
    "", "", "", "", " This has happened several times now.", " I have attached a screenshot.",
    " We are a team of 40 people.", " I have been a customer for three years.",
    " It started on Monday.", " My colleague sees the same thing.",
    " I already tried the help center articles.", " This is blocking our month-end work.",
    " I contacted you last week but got no reply.",
]
_CLOSERS = ["", "", "", " Thanks.", " Thank you!", " Please help.", " Thanks in advance.",
            " Regards, Sam", " Cheers, Priya", " Best, Jordan", " Any update would be appreciated."]


@dataclass(frozen=True)
class Ticket:
    """One generated ticket: the text and the category it was generated from (design label)."""

    ticket: str
    category: str
    mixed_with: str | None = None


def _fill(rng: random.Random, template: str) -> str:
    out = template
    for slot, values in _SLOTS.items():
        while "{" + slot + "}" in out:
            out = out.replace("{" + slot + "}", rng.choice(values), 1)
    return out[0].upper() + out[1:]


def _one(rng: random.Random, category: str, mix_rate: float, pool: tuple[str, ...]) -> Ticket:
    body = _fill(rng, rng.choice(_ISSUES[category]))
    mixed = None
    if rng.random() < mix_rate:
        mixed = rng.choice([c for c in pool if c != category])
        body = body + " Also, " + _fill(rng, rng.choice(_ISSUES[mixed])).lower()
    text = rng.choice(_OPENERS) + body + rng.choice(_DETAILS) + rng.choice(_CLOSERS)
    return Ticket(ticket=text.strip(), category=category, mixed_with=mixed)


def generate(n: int, seed: int = 0, categories: tuple[str, ...] = TRAIN_CATEGORIES, mix_rate: float = 0.12) -> list[Ticket]:
    """Generate ``n`` distinct tickets, categories balanced round-robin.

    Args:
        n: number of distinct tickets wanted.
        seed: RNG seed (the corpus is frozen by it).
        categories: categories to draw from (default: the five training categories).
        mix_rate: share of tickets that append a second category's issue (ambiguous).

    Raises:
        ValueError: ``n`` distinct tickets cannot be produced (templates exhausted).
    """
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[Ticket] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(f"could not generate {n} distinct tickets (got {len(out)})")
        cat = categories[len(out) % len(categories)]
        t = _one(rng, cat, mix_rate, categories)
        if t.ticket not in seen:
            seen.add(t.ticket)
            out.append(t)
    return out


SHIFT_POOL = 480
"""Distinct ``shipping`` tickets in the default corpus: enough for a 1,000-item stream whose shift
(40% of the traffic from item 150 on) lasts to its end."""


def default_corpus(seed: int = 0) -> dict[str, list[Ticket]]:
    """The frozen default corpus: ``train`` (400), ``stream_pool`` (300) and ``shift``
    (:data:`SHIFT_POOL`).

    All tickets are distinct. ``train`` and ``stream_pool`` are drawn from the five training
    categories; ``shift`` holds tickets of the held-back ``shipping`` category.
    """
    base = generate(700, seed=seed)
    rng = random.Random(seed + 1)
    rng.shuffle(base)
    shift = generate(SHIFT_POOL, seed=seed + 2, categories=(SHIFT_CATEGORY,), mix_rate=0.0)
    seen = {t.ticket for t in base}
    shift = [t for t in shift if t.ticket not in seen]
    return {"train": base[:400], "stream_pool": base[400:], "shift": shift}


def shifted_stream(corpus: dict[str, list[Ticket]], items: int = 300, shift_at: int = 150,
                   shift_share: float = 0.4, repeat_share: float = 0.1, seed: int = 0) -> list[Ticket]:
    """A stream of ``items`` tickets with one scheduled shift.

    Before ``shift_at`` items come from the training distribution; from ``shift_at`` on, each
    item is a ``shipping`` ticket with probability ``shift_share``. A ``repeat_share`` of items
    repeat an earlier stream item (deployment traffic repeats itself).
    """
    rng = random.Random(seed + 3)
    pool = list(corpus["stream_pool"])
    shift = list(corpus["shift"])
    rng.shuffle(pool)
    rng.shuffle(shift)
    out: list[Ticket] = []
    for pos in range(items):
        if out and rng.random() < repeat_share:
            out.append(rng.choice(out))
        elif pos >= shift_at and shift and rng.random() < shift_share:
            out.append(shift.pop())
        else:
            out.append(pool.pop() if pool else rng.choice(corpus["train"]))
    return out


REPETITIVE_PHASES = (
    ("billing", "bug", "feature"),
    ("billing", "bug", "feature", "account"),
    ("billing", "bug", "account", "security"),
    ("billing", "bug", "account", "security", "shipping"),
)
"""The active categories of the repetitive stream's four phases (three shifts): one arrives at
each shift, one leaves at the second."""


def repetitive_stream(items: int = 500, *, per_category: int = 10, shifts: tuple[int, ...] = (125, 250, 375),
                      zipf: float = 1.1, seed: int = 0) -> list[Ticket]:
    """A stream with realistic repetition: about 60 distinct tickets, heavily repeated.

    ``per_category`` distinct tickets for each of the six categories (60 by default) are the
    whole vocabulary of the stream. Each item picks one of the current phase's categories
    (:data:`REPETITIVE_PHASES`; the phase changes at each position in ``shifts``) uniformly, then
    one of that category's tickets with Zipf popularity (the ``r``-th most popular has weight
    ``r ** -zipf``): a few tickets make most of the traffic, as support queues do.

    Raises:
        ValueError: ``shifts`` is not three increasing positions, or ``items`` < 1.
    """
    if items < 1:
        raise ValueError(f"items must be >= 1, got {items}")
    if len(shifts) != len(REPETITIVE_PHASES) - 1 or list(shifts) != sorted(shifts):
        raise ValueError(f"shifts must be {len(REPETITIVE_PHASES) - 1} increasing positions, got {shifts!r}")
    rng = random.Random(seed + 11)
    vocab: dict[str, list[Ticket]] = {}
    for i, cat in enumerate(CATEGORIES):
        vocab[cat] = generate(per_category, seed=seed + 100 + i, categories=(cat,), mix_rate=0.0)
    weights = [(r + 1) ** -zipf for r in range(per_category)]
    out: list[Ticket] = []
    for pos in range(items):
        phase = sum(1 for s in shifts if pos >= s)
        cat = rng.choice(REPETITIVE_PHASES[phase])
        out.append(rng.choices(vocab[cat], weights=weights)[0])
    return out
