"""Seeded corpus generator for the routing family (F4): purchase requests → approve/review/reject.

A request names an amount (``$45``, ``$1,200``, ``$58.40``), an item, a department and a vendor
with its tier (preferred / standard / new / blocked, in several words: vendor, supplier,
reseller, firm, partner; sometimes only a vendor name, which reads as standard), in one of many
sentence frames, with optional greetings, justifications and sign-offs. The target decision is
drawn first — approve 60%, review 25%, reject 15%, dealt in shuffled blocks of 20 so every
prefix of the corpus is close to that split — and an amount and tier consistent with the policy
of :mod:`bench.routing.oracle` are drawn for it; about 8% of the amounts sit on a threshold
(499/500, 4,999/5,000, 19,999/20,000). A share of requests (``mix_rate``) mention a second
amount (``$300 now and $4,000 at renewal``), which makes them ambiguous for the reference model.

Each item carries the decision the generator targeted (``intended``) and the simulator oracle's
answer (``label``, :func:`bench.routing.oracle.routing_oracle`); on unmixed items the two agree (the
tests check it). The same seed always gives the same corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.routing.oracle import APPROVE_BELOW, PREFERRED_APPROVE_BELOW, REJECT_AT, routing_oracle

FIELD = "request"
CLASS_SHARES = {"approve": 12, "review": 5, "reject": 3}
"""Decisions per block of 20 (60% / 25% / 15%)."""

DEPARTMENTS = ["Marketing", "Sales", "Engineering", "IT", "HR", "Finance", "Legal", "Ops", "Facilities", "Design",
               "Data", "Security", "Support", "R&D", "Procurement", "Customer Success"]
ITEMS = [
    "noise-cancelling headsets", "ergonomic chairs", "a projector", "cloud storage credits", "team offsite catering",
    "printer toner", "laptop docks", "a trade-show booth", "user research incentives", "a monitoring license",
    "desk plants", "a video editing suite", "conference tickets", "security awareness training", "a label printer",
    "standing desks", "shipping supplies", "a translation service", "a whiteboard wall", "spare keyboards",
    "a load-testing tool", "recruiting ads", "a legal research database", "replacement batteries",
    "a customer survey tool", "team lunch vouchers", "a 3D printer", "network cables", "an e-signature plan",
    "webcams for the new hires", "a copywriting contractor", "lab safety goggles", "a backup appliance",
    "office coffee beans", "a design system audit", "accessibility testing",
]
VENDOR_NAMES = ["Harbor Lane Supply", "Quillfeather Co.", "Brightwater Systems", "Oakridge Office", "Tessellate Labs",
                "Pinecrest Traders", "Northgate Electronics", "Lumen & Vale", "Copperleaf Services",
                "Bluefin Logistics", "Marlow Print Works", "Stonebridge IT", "Redkite Media", "Ashgrove Analytics"]
NOUNS = ["vendor", "supplier", "reseller", "firm", "partner"]
TIER_WORDS = {
    "preferred": ["preferred", "preferred", "pre-approved"],
    "standard": ["standard", "regular", "usual", "existing"],
    "new": ["new", "first-time", "unvetted"],
    "blocked": ["blocked", "blacklisted", "banned", "blocked"],
}
TIER_FRAMES = [
    "a {adj} {noun}", "our {adj} {noun}", "{name}, a {adj} {noun}", "{name} ({adj} {noun})",
    "{name}, one of our {adj} {noun}s", "a {noun} that is {adj}",
]
TIER_FRAMES_BLOCKED_EXTRA = ["{name}, which is on our block list", "a {noun} on the blocked list"]

FRAMES = [
    "{Dept} requests {amount} for {item} from {tier}.",
    "Please approve {amount} for {item} ({dept}), {tier}.",
    "{amount} for {item}, {dept}, {tier}.",
    "Purchase request: {item} for {dept}. Amount: {amount}. Vendor: {tier}.",
    "{dept} would like to buy {item} from {tier} for {amount}.",
    "Requesting {amount} to purchase {item} via {tier}; cost center {dept}.",
    "Can we get sign-off on {amount} for {item}? {dept} team, {tier}.",
    "New PO: {item}, total {amount}, {tier}, requested by {dept}.",
    "{dept} needs {item} ({amount}) from {tier}.",
    "Need a budget of {amount} for {item} - {tier}, {dept}.",
    "Spend request from {dept}: {amount}, {item}, {tier}.",
    "{dept} is asking to spend {amount} on {item}, supplied by {tier}.",
    "Approval needed: {amount} to {tier} for {item} ({dept}).",
    "For {dept}: {item} at {amount}, ordered through {tier}.",
]
OPENERS = ["", "", "", "", "Hi, ", "Hello, ", "Quick one: ", "Hi team, ", "FYI: "]
REASONS = ["", "", "", "", " It replaces equipment that broke.", " This was in the quarterly plan.",
           " Needed before the product launch.", " The team has grown this quarter.",
           " The old contract ends this month.", " We compared three quotes."]
CLOSERS = ["", "", "", " Thanks!", " Thank you.", " - Alex", " Cheers, Noor", " Regards, Kim"]
BOUNDARY = [499.0, 500.0, 4999.0, 5000.0, 19999.0, 20000.0]


@dataclass(frozen=True)
class Item:
    """One generated purchase request.

    Attributes:
        request: the text (the task's input field).
        label: the simulator oracle's decision (what the reference answers at T=0).
        intended: the decision the generator targeted (equals ``label`` unless ``mixed``).
        amount: the amount written in the request (USD), None for probes without one.
        tier: the vendor tier the generator used (``preferred``/``standard``/``new``/``blocked``).
        mixed: True when a second amount was added (ambiguous for the reference).
        kind: the probe kind for out-of-distribution probes, None for in-distribution items.
    """

    request: str
    label: str
    intended: str | None = None
    amount: float | None = None
    tier: str | None = None
    mixed: bool = False
    kind: str | None = None


def format_amount(rng: random.Random, value: float) -> str:
    """``$45``, ``$1,200`` or ``$58.40`` for ``value`` (cents shown when there are any, or
    sometimes for amounts under $1,000)."""
    if value != int(value) or (value < 1000 and rng.random() < 0.15):
        return f"${value:,.2f}"
    return f"${int(value):,}"


def _draw_amount(rng: random.Random, lo: float, hi: float) -> float:
    """A round-ish amount in ``[lo, hi)``, log-uniform (USD)."""
    for _ in range(100):
        v = lo * (hi / lo) ** rng.random()
        if v < 100:
            v = round(v, 2) if rng.random() < 0.3 else float(round(v))
        elif v < 1000:
            v = float(round(v)) if rng.random() < 0.6 else float(round(v / 10) * 10)
        else:
            step = 50 if rng.random() < 0.6 else 10
            v = float(round(v / step) * step)
        if lo <= v < hi:
            return v
    return lo


def _target(rng: random.Random, decision: str) -> tuple[float, str]:
    """An ``(amount, tier)`` whose policy decision is ``decision``."""
    boundary = rng.random() < 0.08
    if decision == "approve":
        if rng.random() < 0.7:
            tier = rng.choice(["standard", "standard", "new", "preferred"])
            return (499.0 if boundary else _draw_amount(rng, 5, APPROVE_BELOW)), tier
        return (rng.choice([500.0, 4999.0]) if boundary else _draw_amount(rng, APPROVE_BELOW, PREFERRED_APPROVE_BELOW)), "preferred"
    if decision == "review":
        if rng.random() < 0.7:
            tier = rng.choice(["standard", "standard", "new"])
            return (rng.choice([500.0, 19999.0]) if boundary else _draw_amount(rng, APPROVE_BELOW, REJECT_AT)), tier
        return (rng.choice([5000.0, 19999.0]) if boundary else _draw_amount(rng, PREFERRED_APPROVE_BELOW, REJECT_AT)), "preferred"
    if rng.random() < 0.5:
        return _draw_amount(rng, 20, 50000), "blocked"
    tier = rng.choice(["standard", "new", "preferred"])
    return (20000.0 if boundary else _draw_amount(rng, REJECT_AT, 250000)), tier


def _tier_phrase(rng: random.Random, tier: str) -> str:
    name = rng.choice(VENDOR_NAMES)
    if tier == "standard" and rng.random() < 0.25:
        return name  # no tier word: reads as a standard vendor
    frames = TIER_FRAMES + (TIER_FRAMES_BLOCKED_EXTRA if tier == "blocked" else [])
    frame = rng.choice(frames)
    return frame.format(adj=rng.choice(TIER_WORDS[tier]), noun=rng.choice(NOUNS), name=name)


def _one(rng: random.Random, decision: str, mix_rate: float) -> Item:
    amount, tier = _target(rng, decision)
    dept = rng.choice(DEPARTMENTS)
    amount_text = format_amount(rng, amount)
    mixed = rng.random() < mix_rate
    if mixed:
        second = _draw_amount(rng, 50, 30000)
        amount_text += rng.choice([" now and {s} at renewal", " up front plus {s} for support",
                                   " ({s} over the full contract)"]).format(s=format_amount(rng, second))
    frame = rng.choice(FRAMES)
    body = (frame.replace("{Dept}", dept).replace("{dept}", dept).replace("{amount}", amount_text)
            .replace("{item}", rng.choice(ITEMS)).replace("{tier}", _tier_phrase(rng, tier)))
    text = (rng.choice(OPENERS) + body + rng.choice(REASONS) + rng.choice(CLOSERS)).strip()
    text = text[0].upper() + text[1:]
    return Item(request=text, label=routing_oracle(text), intended=decision, amount=amount, tier=tier, mixed=mixed)


def generate(n: int, seed: int = 0, mix_rate: float = 0.04) -> list[Item]:
    """Generate ``n`` distinct purchase requests, decisions dealt 12/5/3 per shuffled block of 20.

    Args:
        n: number of distinct requests wanted (≥ 0).
        seed: RNG seed (the corpus is frozen by it).
        mix_rate: share of requests that mention a second amount (ambiguous for the reference).

    Raises:
        ValueError: ``n`` is negative, ``mix_rate`` is outside [0, 1], or ``n`` distinct
            requests cannot be produced.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 <= mix_rate <= 1.0:
        raise ValueError(f"mix_rate must be in [0, 1], got {mix_rate}")
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[Item] = []
    block: list[str] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(f"could not generate {n} distinct requests (got {len(out)})")
        if not block:
            block = [d for d, k in CLASS_SHARES.items() for _ in range(k)]
            rng.shuffle(block)
        item = _one(rng, block[-1], mix_rate)
        if item.request not in seen:
            seen.add(item.request)
            out.append(item)
            block.pop()
    return out


_PROBES: list[tuple[str, str]] = [
    ("language", "Solicitud de compra: 300 USD para material de oficina, proveedor preferido."),
    ("language", "Bitte 2.000 EUR für Laptops freigeben, Lieferant ist gesperrt."),
    ("language", "Demande d'achat de 800 EUR pour des chaises, fournisseur habituel."),
    ("missing_amount", "Marketing wants new banner stands from a preferred vendor."),
    ("missing_amount", "Please approve the annual renewal of our analytics tool, standard supplier."),
    ("two_amounts", "IT requests $450 per month for hosting ($5,400 per year) from a standard vendor."),
    ("two_amounts", "$300 for the deposit and $25,000 on delivery for a facilities fit-out, preferred firm."),
    ("negation", "Ops wants $1,300 for pallet racking from a supplier that is not blocked and is preferred."),
    ("negation", "$900 for event photography from a vendor that is not a preferred partner."),
    ("negation", "$2,000 for scanners from Pinecrest Traders, no longer on the blocked list, now a preferred vendor."),
    ("amount_words", "Sales needs two thousand dollars for client gifts from a standard vendor."),
    ("amount_format", "Engineering requests USD 300 for a USB hub batch, new vendor."),
    ("amount_format", "Design wants 3k for a font license from a preferred vendor."),
    ("amount_format", "Finance needs $2.5k for audit software from a standard supplier."),
    ("amount_format", "Legal requests €800 for notary fees from a preferred firm."),
    ("empty", ""),
    ("empty", "   "),
    ("garbage", "qzx 8812 ;; ;; vendor vendor $$$ ???"),
    ("garbage", "lorem ipsum dolor sit amet, consectetur adipiscing elit"),
    ("off_topic", "Can someone tell me when the office closes for the holidays?"),
]


def probes() -> list[Item]:
    """Out-of-distribution probes, each tagged with a ``kind``: ``language`` (Spanish, German,
    French), ``missing_amount``, ``two_amounts``, ``negation`` (``not blocked``, ``not a
    preferred partner``, ``no longer on the blocked list``), ``amount_words``, ``amount_format``
    (``USD 300``, ``3k``, ``$2.5k``, ``€800``), ``empty``, ``garbage``, ``off_topic``. Labels
    are the oracle's answers."""
    return [Item(request=text, label=routing_oracle(text), kind=kind) for kind, text in _PROBES]


def default_corpus(seed: int = 0) -> dict[str, list[Item]]:
    """The frozen default corpus: ``train`` (400), ``heldout`` (150) and ``ood`` (the probes).

    ``train`` and ``heldout`` are disjoint slices of one shuffled 550-request draw (all distinct).
    """
    base = generate(550, seed=seed)
    random.Random(seed + 1).shuffle(base)
    return {"train": base[:400], "heldout": base[400:], "ood": probes()}
