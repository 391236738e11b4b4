"""Seeded corpus generator for the extraction family (F3): customer emails → typed records.

An email is assembled from parts: an optional greeting; a request sentence for one of five
intents (many templates per intent, each naming the order by id or only as "my order"); optional
context, a money amount (``$45``, ``$1,200``, ``$58.40`` in several phrasings) and an urgency
sentence (high, low, or none = normal) whose position varies (before or after the request); an
optional sign-off. A share of emails (``mix_rate``) adds a second reading of a field the email
already has — another intent (not for ``other`` emails), a second order id or a second amount —
which makes them genuinely ambiguous for the reference model. Each item carries the record the
generator composed (``intended``) and the simulator oracle's answer (``label``,
:func:`auto.sim.extraction.extraction_oracle`); on unmixed items the two agree (the tests check
it). The same seed always gives the same corpus.

Intents are balanced round-robin; urgency is drawn high 30% / normal 45% / low 25%; 88% of the
emails carry an order id; about 35% mention an amount.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from auto.sim.extraction import INTENTS, extraction_oracle

FIELD = "email"

PRODUCTS = [
    "wireless headphones", "standing desk", "ceramic mug set", "hiking backpack", "air fryer", "yoga block",
    "desk chair", "bluetooth speaker", "cast iron skillet", "electric toothbrush", "rain jacket", "table lamp",
    "laptop sleeve", "coffee maker", "throw blanket", "phone charger", "garden hose", "wall clock",
    "water bottle", "baby monitor", "mechanical keyboard", "bike helmet", "duvet cover", "kitchen scale",
    "tent", "sunglasses", "board game", "vacuum cleaner", "picture frame", "winter boots", "webcam",
    "bath towels", "camping stove", "smart plug", "dog bed", "chef's knife", "stroller", "printer ink",
    "running shorts", "tea kettle",
]
DEFECTS = [
    "stopped working after a week", "arrived broken", "has a cracked lid", "is the wrong color",
    "does not turn on", "arrived with a dent", "is missing a part", "came in the wrong size",
    "has a torn seam", "smells of smoke", "is scratched all over", "overheats after a few minutes",
]
WHEN = ["last Tuesday", "on Monday", "two weeks ago", "at the start of the month", "ten days ago",
        "over the weekend", "on the 3rd", "last Friday", "a month ago", "yesterday"]
NAMES = ["Sam", "Priya", "Jordan", "Mei", "Lukas", "Ana", "Tom", "Fatima", "Diego", "Grace", "Olu", "Hannah",
         "Ravi", "Chloe", "Marek", "Yusuf"]
ADDRESSES = ["12 Birch Road", "88 Harbor Street, Apt 4", "301 Elm Avenue", "7 Mill Lane", "45 Orchard Close"]

GREETINGS = ["", "", "", "Hi,", "Hello,", "Hi there,", "Dear support team,", "Good afternoon,", "Hey,",
             "Hello customer service,", "Good morning team,", "To whom it may concern,"]
SIGNOFFS = ["", "", "", "Thanks, {name}", "Best regards, {name}", "Cheers, {name}", "Kind regards, {name}",
            "Thank you!", "Many thanks.", "- {name}", "Thanks in advance, {name}"]
CONTEXT = ["", "", "", "I have ordered from you many times before.", "I placed the order {when}.",
           "It was meant as a present.", "I ordered it from the mobile app.", "My account is under my work email.",
           "The package came {when}.", "I checked the FAQ first."]

REQUESTS: dict[str, list[str]] = {
    "refund": [
        "Please refund {ref}, the {product} {defect}.",
        "I would like a refund for the {product} from {ref}.",
        "Can I get my money back for {ref}? The {product} {defect}.",
        "I returned the {product} from {ref} {when} and still need the refund processed.",
        "I want a full refund on {ref}.",
        "The {product} in {ref} {defect}, so I am asking for a refund.",
        "Kindly issue a refund for {ref}; the {product} is not what was described.",
        "Could you refund {ref} to my card? The {product} {defect}.",
        "{ref_cap}: the {product} {defect}. I'd like my money back, please.",
        "Requesting a refund for {ref} because the {product} {defect}.",
    ],
    "replacement": [
        "The {product} from {ref} {defect}. Could you send a replacement?",
        "I'd like to exchange the {product} in {ref} for one that works.",
        "Please replace the {product} from {ref}, it {defect}.",
        "Can you ship me a replacement {product}? {ref_cap} {defect_short}.",
        "Please send me a new {product} for {ref}; the first one {defect}.",
        "The {product} in {ref} {defect} - can I get it replaced?",
        "{ref_cap}: the {product} {defect}. A replacement would be great.",
        "Could you swap it for a working unit? I mean the {product} from {ref}, which {defect}.",
        "I'm requesting an exchange for {ref}, since the {product} {defect}.",
        "Would it be possible to get a replacement for the {product} in {ref}? It {defect}.",
    ],
    "status": [
        "Where is {ref}? It was supposed to arrive {when}.",
        "Can you give me an update on {ref}?",
        "What is the status of {ref}? I ordered the {product} {when}.",
        "When will {ref} ship? I ordered the {product} {when}.",
        "I have not received {ref} yet and the tracking has not changed since {when}.",
        "Could you check on {ref} for me? The {product} was due {when}.",
        "Any news on {ref}? The {product} still shows as processing.",
        "I'm wondering where my {product} is - {ref}, placed {when}.",
        "{ref_cap} was marked as shipped {when} but never arrived. Where is it?",
        "How soon will {ref} arrive? I need the {product} for a trip.",
    ],
    "cancel": [
        "Please cancel {ref}.",
        "I need to cancel {ref} for the {product}.",
        "I'd like {ref} cancelled, I ordered the {product} by mistake.",
        "Can you cancel {ref} before it ships?",
        "Cancel {ref}, please. I found the {product} cheaper elsewhere.",
        "Please cancel {ref}; I no longer need the {product}.",
        "I want to cancel the {product} on {ref}.",
        "{ref_cap} - please cancel it, I placed it twice by accident.",
        "Could you process a cancellation of {ref}? My plans changed.",
        "I changed my mind about the {product}, please cancel {ref}.",
    ],
    "other": [
        "Could you change the delivery address on {ref} to {address}?",
        "Can you send me an invoice for {ref}? Our finance team needs it.",
        "Please add a gift message to {ref} saying Happy Birthday.",
        "How do I register the warranty for the {product} from {ref}?",
        "Can I get the assembly instructions for the {product} in {ref}?",
        "Please update the phone number on {ref}.",
        "Is the {product} from {ref} covered by the two-year guarantee?",
        "Could you combine {ref} with my other purchase into one box?",
        "I'd like to leave feedback about the courier who delivered {ref}, he was very friendly.",
        "Can the driver leave {ref} with my neighbour at number 9?",
        "Please change the name on {ref} to my partner's name.",
        "Do you sell spare filters for the {product} I bought in {ref}?",
    ],
}

AMOUNT_SENTENCES = ["I paid {amount} for it.", "The total was {amount}.", "It cost {amount}.",
                    "I was charged {amount}.", "The charge of {amount} is on my statement.",
                    "That was {amount} on my card.", "The order came to {amount}."]
HIGH = ["This is urgent.", "Please handle this ASAP.", "I need this sorted immediately.",
        "Please deal with it right away.", "It is urgent, I need this resolved as soon as possible.",
        "Urgent, please.", "Please treat this as urgent.", "I need an answer right away."]
LOW = ["No rush.", "No hurry on this.", "Whenever you get a chance is fine.", "Take your time.",
       "It's not urgent.", "When convenient, thanks.", "Handle it at your convenience.",
       "There is no rush at all."]

MIX_INTENT = {
    "refund": "If a refund is not possible, a replacement would do.",
    "replacement": "Otherwise please refund me.",
    "status": "If it has not shipped yet, please cancel it.",
    "cancel": "If it is too late to cancel, please tell me where the order is.",
}


@dataclass(frozen=True)
class Item:
    """One generated email.

    Attributes:
        email: the text (the task's input field).
        label: the simulator oracle's record for it (what the reference answers at T=0).
        intended: the record the generator composed (equals ``label`` unless ``mixed``).
        mixed: which second reading was added (``"intent"``, ``"order_id"``, ``"amount"``) or None.
        kind: the probe kind for out-of-distribution probes, None for in-distribution items.
    """

    email: str
    label: dict[str, Any]
    intended: dict[str, Any] = field(default_factory=dict)
    mixed: str | None = None
    kind: str | None = None


def _oid(rng: random.Random) -> str:
    return "ORD-%05d" % rng.randrange(10000, 100000)


def _amount(rng: random.Random) -> tuple[str, float]:
    style = rng.random()
    if style < 0.4:
        v = float(rng.randrange(5, 500))
        return f"${int(v)}", v
    if style < 0.75:
        v = rng.randrange(300, 50000) / 100.0
        return f"${v:,.2f}", round(v, 2)
    v = float(rng.randrange(10, 300) * 10)
    return f"${int(v):,}", v


def _fill(rng: random.Random, template: str, slots: dict[str, str]) -> str:
    out = template
    for k, v in slots.items():
        out = out.replace("{" + k + "}", v)
    return out


def _one(rng: random.Random, intent: str, mix_rate: float) -> Item:
    has_id = rng.random() < 0.88
    oid = _oid(rng)
    if has_id:
        ref = rng.choice(["order {o}", "my order {o}", "order number {o}", "{o}", "order #{o}"]).format(o=oid)
    else:
        ref = rng.choice(["my last order", "my recent order", "my order"])
    slots = {"ref": ref, "ref_cap": ref[0].upper() + ref[1:], "product": rng.choice(PRODUCTS),
             "defect": rng.choice(DEFECTS), "defect_short": rng.choice(["arrived broken", "is faulty", "is damaged"]),
             "when": rng.choice(WHEN), "address": rng.choice(ADDRESSES), "name": rng.choice(NAMES)}
    request = _fill(rng, rng.choice(REQUESTS[intent]), slots)
    u = rng.random()
    urgency = "high" if u < 0.30 else ("low" if u >= 0.75 else "normal")
    urgency_sentence = {"high": rng.choice(HIGH), "low": rng.choice(LOW), "normal": ""}[urgency]
    amount_text, amount = None, None
    if rng.random() < (0.55 if intent in ("refund", "cancel") else 0.2):
        amount_text, amount = _amount(rng)
    body: list[str] = [request]
    context = _fill(rng, rng.choice(CONTEXT), slots)
    if context:
        body.insert(rng.randrange(2), context)
    if amount_text:
        body.insert(rng.randrange(1, len(body) + 1), rng.choice(AMOUNT_SENTENCES).format(amount=amount_text))
    mixed = None
    options = (["intent", "intent"] if intent != "other" else []) + (["order_id"] if has_id else []) + (
        ["amount"] if amount_text else [])
    if rng.random() < mix_rate and options:
        mixed = rng.choice(options)
        if mixed == "intent":
            body.append(MIX_INTENT[intent])
        elif mixed == "order_id":
            body.append(f"I also have {_oid(rng)} open with you.")
        else:
            second, _v = _amount(rng)
            body.append(f"A second charge of {second} also appeared.")
    if urgency_sentence:
        if rng.random() < 0.4:
            body.insert(0, urgency_sentence)
        else:
            body.append(urgency_sentence)
    greeting = rng.choice(GREETINGS)
    signoff = _fill(rng, rng.choice(SIGNOFFS), slots)
    sep = rng.choice([" ", " ", "\n"])
    text = sep.join(p for p in [greeting, " ".join(body), signoff] if p)
    intended = {"order_id": oid if has_id else None, "intent": intent, "urgency": urgency, "amount": amount}
    return Item(email=text, label=extraction_oracle(text), intended=intended, mixed=mixed)


def generate(n: int, seed: int = 0, mix_rate: float = 0.08) -> list[Item]:
    """Generate ``n`` distinct emails, intents balanced round-robin over :data:`INTENTS`.

    Args:
        n: number of distinct emails wanted (≥ 0).
        seed: RNG seed (the corpus is frozen by it).
        mix_rate: share of emails given a second reading (ambiguous for the reference).

    Raises:
        ValueError: ``n`` is negative, ``mix_rate`` is outside [0, 1], or ``n`` distinct emails
            cannot be produced.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 <= mix_rate <= 1.0:
        raise ValueError(f"mix_rate must be in [0, 1], got {mix_rate}")
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[Item] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(f"could not generate {n} distinct emails (got {len(out)})")
        item = _one(rng, INTENTS[len(out) % len(INTENTS)], mix_rate)
        if item.email not in seen:
            seen.add(item.email)
            out.append(item)
    return out


_PROBES: list[tuple[str, str]] = [
    ("language", "Hola, por favor cancele el pedido ORD-40112 lo antes posible, es urgente. Gracias."),
    ("language", "Guten Tag, die Lampe aus Bestellung ORD-77820 ist kaputt angekommen. Ich möchte eine Erstattung von 49,90 EUR. Keine Eile."),
    ("language", "Bonjour, où en est ma commande ORD-51934 ? Elle devait arriver lundi."),
    ("missing_order_id", "Hi, I ordered a blender last week and it arrived broken. Please send a replacement."),
    ("missing_order_id", "Can you tell me where my package is? I lost the confirmation email with the order number."),
    ("missing_amount", "Please refund order ORD-66310, I was overcharged but I do not remember by how much."),
    ("two_amounts", "Order ORD-20557: I was charged $84.20 and then another $12.99 for shipping I never chose. Please refund the shipping."),
    ("two_amounts", "The price on the site was $30 but my card shows $45 for order ORD-11873. I want the difference back."),
    ("two_order_ids", "Please cancel ORD-31415 and ORD-92653, both were placed by my son without asking."),
    ("negation", "Please do not cancel order ORD-48210, I still want it. Just confirm it is on the way."),
    ("negation", "I don't want a refund for ORD-73301; a replacement is fine. No rush."),
    ("negation", "This is not urgent at all: could you update the billing name on ORD-65002?"),
    ("amount_words", "I was charged fifty-eight dollars and forty cents twice for order ORD-19283, please refund one charge."),
    ("amount_format", "Refund USD 300 for order ORD-50021, the tent poles snapped on the first night."),
    ("amount_format", "My order ORD-80764 was around $3k of furniture and half of it is missing. Where is the rest?"),
    ("empty", ""),
    ("empty", "   \n  "),
    ("garbage", "asdkj qweoi zzz 1234 !!!! ###"),
    ("garbage", "ORD ORD ORD ------ $$$ ...."),
    ("off_topic", "What is the best way to cook rice in a pan without it sticking?"),
]


def probes() -> list[Item]:
    """Out-of-distribution probes, each tagged with a ``kind``: ``language`` (Spanish, German,
    French), ``missing_order_id``, ``missing_amount``, ``two_amounts``, ``two_order_ids``,
    ``negation`` (meaning flipped), ``amount_words``, ``amount_format`` (``USD 300``, ``$3k``),
    ``empty``, ``garbage``, ``off_topic``. Labels are the oracle's answers."""
    return [Item(email=text, label=extraction_oracle(text), kind=kind) for kind, text in _PROBES]


def default_corpus(seed: int = 0) -> dict[str, list[Item]]:
    """The frozen default corpus: ``train`` (400), ``heldout`` (150) and ``ood`` (the probes).

    ``train`` and ``heldout`` are disjoint slices of one shuffled 550-email draw (all distinct).
    """
    base = generate(550, seed=seed)
    random.Random(seed + 1).shuffle(base)
    return {"train": base[:400], "heldout": base[400:], "ood": probes()}
