"""Seeded corpus generator for the extraction family (F3): customer emails → typed records.

Only the cue phrases carry a label; everything else is drawn from pools shared by every intent
and urgency level, independently of the labels (a greeting, a sign-off, context sentences about
the purchase, the product, a defect or the delivery, filler about the shop, connectives, a money
amount), so that no filler word is correlated with a label — in real email such words do not
depend on the urgency or the intent.

An email is assembled from:

* a **request sentence**: a shared sentence frame (an imperative ``Please {vp}.``, a question
  ``Could you {vp}?``, a want ``I would like {np} {ref}.``, the order first ``{Ref}: I'd like
  {np} it.``, the cue first ``{Np} {ref}, please.``, ...) filled with one of several synonymous
  cue phrases of the intent (:data:`INTENT_VP`, :data:`INTENT_NP`; for ``other``, a request
  with no intent cue: an invoice, an address change, a warranty question), optionally after a
  shared connective (``Anyway,``); the order is named by id in several forms or only as
  ``my order``;
* an **urgency slot** that every email has, in one of three shared shapes: a predicate sentence
  (``This is {adj}.``: ``urgent`` / ``not urgent`` / a neutral ``a routine request`` for
  ``normal``), an adverbial (``ASAP`` / ``at your convenience`` / nothing, attached before or
  after the request or in ``Please get back to me {adv}.``) or an interjection (``Urgent!`` /
  ``No rush.`` / nothing); see :data:`URGENCY_PREDICATE`, :data:`URGENCY_ADVERB`,
  :data:`URGENCY_INTERJECTION`;
* zero to two context sentences (:data:`CONTEXT`), an optional amount sentence (35% of the
  emails whatever the intent; ``$45``, ``$1,200``, ``$58.40``), each at a random position, so
  the cue phrases land at the start, in the middle or at the end of the email.

A share of emails (``mix_rate``) adds a second reading of a field the email already has —
another intent's cue (not for ``other`` emails), a second order id or a second amount — which
makes them genuinely ambiguous for the reference model. Each item carries the record the
generator composed (``intended``) and the simulator oracle's answer (``label``,
:func:`bench.extraction.oracle.extraction_oracle`); on unmixed items the two agree (the tests check
it). The same seed always gives the same corpus.

Intents are balanced round-robin; urgency is drawn high 30% / normal 45% / low 25%; 88% of the
emails carry an order id; 35% mention an amount. These shares are design choices of this
benchmark, not measurements of real email.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from bench.extraction.oracle import INTENTS, extraction_oracle

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
            "Thank you!", "Many thanks.", "- {name}", "Thanks in advance, {name}", "Thanks for your help, {name}"]

CONTEXT = [
    # the purchase
    "I placed the order {when}.", "I bought the {product} {when}.", "I ordered it from the mobile app.",
    "I ordered it through your website.", "This was my first order with you.",
    "I have ordered from you many times before.", "It was meant as a present for my sister.",
    "My account is under my work email.", "I paid with my credit card.", "I paid the full price.",
    # the product (with or without a defect)
    "The {product} {defect}.", "Unfortunately the {product} {defect}.", "It's the {product} in blue.",
    "The {product} is for my new flat.", "The box was fine, but the {product} {defect}.",
    "It's the {product} from your spring sale.", "I kept the receipt and the original box.",
    # the delivery and the account
    "The courier was very friendly.", "The package came {when}.", "I live at {address}.",
    "My contact details are the same as before.", "My name and phone number are on the account.",
    "The gift wrap was lovely.", "I got a copy of the invoice by email.", "The warranty card was in the box.",
    "I read the assembly guide twice.", "I may change my email address soon.",
    # filler about the shop
    "I love your shop.", "Your app made ordering easy.", "I know you are busy this time of year.",
    "I checked the FAQ first.", "This is my second message about it.", "I have a question about it.",
    "Just a quick question.", "Hopefully this is a simple one.", "It's probably a routine matter for you.",
    "Your team was really helpful last time.",
]
"""Context sentences, drawn for every intent and urgency alike (none contains a cue)."""

CONNECTIVES = ["", "", "", "", "Anyway, ", "In short, ", "To be clear, ", "With that in mind, ", "So, "]
"""Connectives that may start the request sentence (shared by every intent)."""

INTENT_VP: dict[str, list[str]] = {
    "refund": ["refund {ref}", "process a refund for {ref}", "refund the {product} from {ref}",
               "give me my money back on {ref}", "refund me the cost of {ref}",
               "tell me how to get a refund for {ref}", "reimburse me for {ref}"],
    "replacement": ["replace {ref}", "replace the {product} from {ref}", "send me a new {product} for {ref}",
                    "ship me a replacement for {ref}", "exchange the {product} in {ref}",
                    "process an exchange for {ref}", "send a working {product} for {ref}",
                    "tell me how to exchange the {product} in {ref}"],
    "cancel": ["cancel {ref}", "cancel the {product} from {ref}", "process a cancellation for {ref}",
               "cancel {ref} before it ships", "tell me how to cancel {ref}", "cancel everything in {ref}",
               "call off the order{o_sp}"],
    "status": ["check on {ref}", "tell me the status of {ref}", "give me an update on {ref}", "check where {ref} is",
               "send me the tracking link for {ref}", "confirm that {ref} is on its way",
               "tell me the estimated delivery date for {ref}"],
    "other": ["change the delivery address on {ref} to {address}", "send me an invoice for {ref}",
              "add a gift message to {ref}", "combine {ref} with my other purchase",
              "leave {ref} with my neighbour at number 9", "put my partner's name on {ref}",
              "send me the assembly guide for the {product} from {ref}",
              "tell me how to register the warranty for {ref}", "update the phone number on {ref}",
              "deliver {ref} to my office", "confirm which size is in {ref}",
              "send me a copy of the receipt for {ref}"],
}
"""Verb phrases per intent: the cue phrase (for ``other``, a request with no cue) and the order.
For the four cued intents the phrasings are listed from common to rare (see :func:`_cue_choice`)."""

INTENT_NP: dict[str, list[str]] = {
    "refund": ["a refund for", "a full refund for", "a refund on", "my money back for", "the refund of",
               "an overdue refund for"],
    "replacement": ["a replacement for", "an exchange for", "a replacement unit for", "a replacement item for",
                    "an exchange on"],
    "cancel": ["a cancellation of", "a cancellation for", "the cancellation for", "an order cancellation for",
               "a cancellation on"],
    "status": ["a status update for", "an update on", "the tracking number for", "the delivery status of",
               "an ETA for"],
    "other": ["an invoice for", "a copy of the receipt for", "the warranty details for", "the assembly guide for",
              "a gift message on", "a name change on", "a size check for"],
}
"""Noun phrases per intent, each ending in the preposition that takes the order (common to rare)."""

VP_FRAMES = ["Please {vp}.", "Could you please {vp}?", "Can you {vp}?", "I'd like you to {vp}.",
             "Would you be able to {vp}?", "I am writing to ask you to {vp}.", "I need you to {vp}.",
             "Kindly {vp}.", "{VP}, please.", "Is it possible to {vp}?"]
NP_FRAMES = ["I would like {np} {ref}.", "I'd like {np} {ref}, please.", "Could I get {np} {ref}?",
             "Please arrange {np} {ref}.", "I am asking for {np} {ref}.", "I'm writing to request {np} {ref}.",
             "{REF}: I'd like {np} it.", "What I need is {np} {ref}.", "{NP} {ref}, please."]
"""Request sentence frames, shared by every intent (``{VP}``/``{NP}``/``{REF}``: capitalized)."""

URGENCY_PREDICATE = {
    "frames": ["This is {x}.", "It is {x}.", "To be honest, it is {x}.", "Honestly, it's {x}.",
               "Just so you know, this is {x}."],
    "high": ["urgent", "really urgent", "an emergency"],
    "low": ["not urgent", "low priority", "not that urgent", "not really urgent"],
    "normal": ["a routine matter", "a simple one", "my first message about it", "just a quick question",
               "my second message about it", "my first order with you", "a present for my sister",
               "the {product} in blue", "an ordinary order"],
}
URGENCY_ADVERB = {
    "frames": ["Please get back to me{x}.", "I'd appreciate a reply{x}.", "Please handle it{x}.",
               "Let me know{x}."],
    "high": ["ASAP", "as soon as possible", "right away", "immediately", "urgently"],
    "low": ["whenever you get a chance", "at your convenience", "when convenient", "whenever you have a moment"],
    "normal": [""],
}
URGENCY_INTERJECTION = {
    "high": ["Urgent!", "ASAP please.", "Please hurry."],
    "low": ["No rush.", "No hurry.", "Take your time.", "No hurry, please."],
    "normal": [""],
}
"""The urgency slot: one shape per email (same frames for every level), filled with a cue of the
level (high, low; listed from common to rare, drawn as in :func:`_cue_choice`) or with a neutral
filler (normal, uniformly)."""

AMOUNT_SENTENCES = ["I paid {amount} for it.", "The total was {amount}.", "It cost {amount}.",
                    "I was charged {amount}.", "The charge of {amount} is on my statement.",
                    "That was {amount} on my card.", "The order came to {amount}."]

MIX_FRAMES = ["Otherwise, please {vp}.", "If that is not possible, please {vp}.", "Failing that, I would like {np} it.",
              "If that does not work, I'd like {np} it."]
"""Frames of the second intent added to mixed emails (the order is ``the order`` / ``it``)."""


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


def _fill(template: str, slots: dict[str, str]) -> str:
    out = template
    for k, v in slots.items():
        out = out.replace("{" + k + "}", v)
    return out


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _lower_first(s: str) -> str:
    """``s`` with its first letter lower-cased, unless it starts with the pronoun ``I`` or an order id."""
    first = s.split(" ", 1)[0]
    keep = first == "I" or first.startswith("I'") or first.startswith("ORD")
    return s if keep else s[:1].lower() + s[1:]


def _cue_choice(rng: random.Random, label: str, options: list[str]) -> str:
    """One phrasing of ``label``'s cue: the k-th listed phrasing (from 0) is drawn with weight
    1/(k+1), a Zipf-like skew (a few phrasings common, the synonyms rarer; a design choice of this
    benchmark, not a measurement). Labels without a cue (``other``, ``normal``) draw uniformly."""
    if label in ("other", "normal"):
        return rng.choice(options)
    return rng.choices(options, weights=[1.0 / (k + 1) for k in range(len(options))])[0]


def _request(rng: random.Random, intent: str, slots: dict[str, str], adverb: str) -> str:
    """One request sentence for ``intent`` (``adverb``, if any, follows the cue phrase)."""
    tail = " " + adverb if adverb else ""
    if rng.random() < 0.5:
        vp = _fill(_cue_choice(rng, intent, INTENT_VP[intent]), slots) + tail
        return _fill(rng.choice(VP_FRAMES), {"vp": vp, "VP": _cap(vp)})
    np_ = _cue_choice(rng, intent, INTENT_NP[intent])
    frame = rng.choice(NP_FRAMES)
    ref = slots["ref"] + tail
    if "{REF}" in frame:
        frame = frame.replace(" it.", " it" + tail + ".")
        ref = slots["ref"]
    return _fill(frame, {"np": np_, "NP": _cap(np_), "ref": ref, "REF": _cap(ref)})


def _one(rng: random.Random, intent: str, mix_rate: float) -> Item:
    has_id = rng.random() < 0.88
    oid = _oid(rng)
    if has_id:
        ref = rng.choice(["order {o}", "my order {o}", "order number {o}", "{o}", "order #{o}"]).format(o=oid)
    else:
        ref = rng.choice(["my last order", "my recent order", "my order"])
    slots = {"ref": ref, "o_sp": " " + oid if has_id else "", "product": rng.choice(PRODUCTS),
             "defect": rng.choice(DEFECTS), "when": rng.choice(WHEN), "address": rng.choice(ADDRESSES),
             "name": rng.choice(NAMES)}
    u = rng.random()
    urgency = "high" if u < 0.30 else ("low" if u >= 0.75 else "normal")
    shape = rng.choice(["predicate", "adverb", "adverb", "interjection"])
    adverb, urgency_sentence, adverb_first = "", "", False
    if shape == "predicate":
        urgency_sentence = _fill(rng.choice(URGENCY_PREDICATE["frames"]),
                                 {"x": _fill(_cue_choice(rng, urgency, URGENCY_PREDICATE[urgency]), slots)})
    elif shape == "interjection":
        urgency_sentence = _cue_choice(rng, urgency, URGENCY_INTERJECTION[urgency])
    else:
        filler = _cue_choice(rng, urgency, URGENCY_ADVERB[urgency])
        where = rng.random()
        if where < 0.4:
            urgency_sentence = _fill(rng.choice(URGENCY_ADVERB["frames"]), {"x": " " + filler if filler else ""})
        elif where < 0.6:
            adverb, adverb_first = filler, True
        else:
            adverb = filler
    request = _request(rng, intent, slots, "" if adverb_first else adverb)
    if adverb_first and adverb:
        request = _cap(adverb) + ", " + _lower_first(request)
    else:
        connective = rng.choice(CONNECTIVES)
        if connective:
            request = connective + _lower_first(request)
    body: list[str] = [request]
    n_context = rng.choice([0, 1, 1, 2])
    for template in rng.sample(CONTEXT, n_context):
        body.insert(rng.randrange(len(body) + 1), _fill(template, slots))
    amount_text, amount = None, None
    if rng.random() < 0.35:
        amount_text, amount = _amount(rng)
        body.insert(rng.randrange(len(body) + 1), rng.choice(AMOUNT_SENTENCES).format(amount=amount_text))
    if urgency_sentence:
        body.insert(rng.randrange(len(body) + 1), urgency_sentence)
    mixed = None
    options = (["intent", "intent"] if intent != "other" else []) + (["order_id"] if has_id else []) + (
        ["amount"] if amount_text else [])
    if rng.random() < mix_rate and options:
        mixed = rng.choice(options)
        if mixed == "intent":
            second = rng.choice([i for i in INTENTS if i not in (intent, "other")])
            frame = rng.choice(MIX_FRAMES)
            vp = _fill(rng.choice(INTENT_VP[second]), dict(slots, ref="the order", o_sp=""))
            body.append(_fill(frame, {"vp": vp, "np": rng.choice(INTENT_NP[second])}))
        elif mixed == "order_id":
            other = _oid(rng)
            while other == oid:
                other = _oid(rng)
            body.append(f"I also have {other} open with you.")
        else:
            second_text, second_value = _amount(rng)
            while second_value == amount:
                second_text, second_value = _amount(rng)
            body.append(f"A second charge of {second_text} also appeared.")
    greeting = rng.choice(GREETINGS)
    signoff = _fill(rng.choice(SIGNOFFS), slots)
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
    """The frozen default corpus: ``train`` (800), ``heldout`` (150) and ``ood`` (the probes).

    ``train`` and ``heldout`` are disjoint slices of one shuffled 950-email draw (all distinct).
    800 training emails, not 400: each label's cues come in several synonymous phrasings drawn
    with rank weights, and at 400 the program rung's 240 training witnesses saw the rarer
    phrasings 0–2 times (held-out 0.84 against the gate's 0.97; 0.975 at 800).
    """
    base = generate(950, seed=seed)
    random.Random(seed + 1).shuffle(base)
    return {"train": base[:800], "heldout": base[800:], "ood": probes()}
