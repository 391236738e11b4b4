"""A harder held-out set for the routing family (F4): phrasings the training corpus never uses.

The training generator (:mod:`bench.routing.corpus`) writes every request from a fixed set of
frames, tier words and amount formats. This generator writes requests the training corpus never
contains, one *kind* of departure per request, labelled by the simulator oracle
(:func:`bench.routing.oracle.routing_oracle`, what the reference answers at T=0):

* ``new_frame`` — a sentence frame the training corpus does not use, with a training tier word;
* ``reordered`` — the vendor first and the amount last, or the request split over two sentences;
* ``negation`` — a tier word negated (``not a preferred vendor``, ``formerly blocked``,
  ``no longer blocked``), so the tier is another one;
* ``second_amount`` — two amounts (the oracle reads the largest);
* ``amount_k`` — an amount with ``k``, a currency code or in words (``$2.5k``, ``3k``,
  ``USD 450``, ``two thousand dollars``);
* ``new_tier_word`` — a synonym of a tier the training corpus never uses (``approved``,
  ``trusted``, ``sanctioned``, ``barred``);
* ``language`` — Spanish, German or French, with the tier words the oracle reads in those
  languages;
* ``boundary`` — an amount on a threshold in a new frame (499/500, 4,999/5,000, 19,999/20,000).

The same seed always gives the same set; the requests are distinct. Design choices of this
benchmark, not measurements of real purchase requests.
"""

from __future__ import annotations

import random

from bench.routing.corpus import DEPARTMENTS, ITEMS, VENDOR_NAMES, Item, default_corpus, format_amount
from bench.routing.oracle import routing_oracle
from bench.hard_sets import deal_distinct

KINDS = ("new_frame", "reordered", "negation", "second_amount", "amount_k", "new_tier_word", "language", "boundary")
"""The kinds of departure from the training corpus, one per request."""

TIERS = {"preferred": ["a preferred vendor", "our preferred supplier", "a pre-approved firm"],
         "standard": ["a standard vendor", "our usual supplier", "an existing reseller"],
         "new": ["a new vendor", "a first-time supplier"],
         "blocked": ["a blocked vendor", "a blacklisted supplier", "a banned reseller"]}
NEGATED = [("a vendor that is not preferred", "standard"), ("a formerly blocked supplier", "standard"),
           ("a supplier that is no longer blocked", "standard"), ("a vendor that isn't on our preferred list", "standard"),
           ("a non-preferred reseller", "standard")]
NEW_TIER_WORDS = ["an approved vendor", "a trusted supplier", "a sanctioned vendor", "a barred supplier",
                  "a vetted partner", "a do-not-use vendor"]
NEW_FRAMES = ["Could finance release {amount} so {dept} can buy {item}? It's from {tier}.",
              "{dept} here - we'd like {item} ({amount}), sourced from {tier}.",
              "Looking for approval on {item} for {dept}: {amount} with {tier}.",
              "Heads up, {dept} is ordering {item} at {amount} via {tier}."]
REORDERED = ["From {tier}: {item} for {dept}, {amount}.", "{tier_cap} would supply {item}. {dept} needs {amount} for it.",
             "Vendor: {tier}. Item: {item}. Team: {dept}. Cost: {amount}."]
SECOND = ["{dept} needs {a1} for {item} now and {a2} later, from {tier}.",
          "{item} for {dept}: {a1} per month, {a2} per year, {tier}.",
          "{a1} deposit plus {a2} on delivery for {item} ({dept}), {tier}."]
K_FORMATS = [("$2.5k", 2500.0), ("3k", 3000.0), ("USD 450", 450.0), ("$12k", 12000.0), ("two thousand dollars", 2000.0),
             ("$0.4k", 400.0), ("25k", 25000.0)]
LANGUAGE = ["Solicitud: {amount} para {item}, proveedor preferido.", "Solicitud: {amount} para {item}, proveedor bloqueado.",
            "Bitte {amount} für {item} freigeben, Lieferant ist bevorzugt.", "Bitte {amount} für {item} freigeben, Lieferant gesperrt.",
            "Demande de {amount} pour {item}, fournisseur privilégié.", "Demande de {amount} pour {item}, fournisseur bloqué."]
BOUNDARY = [499.0, 500.0, 4999.0, 5000.0, 19999.0, 20000.0]


def _amount(rng: random.Random) -> float:
    return float(rng.choice([rng.randrange(20, 500), rng.randrange(500, 5000), rng.randrange(5000, 20000) // 10 * 10,
                             rng.randrange(20000, 90000) // 50 * 50]))


def _one(rng: random.Random, kind: str) -> str:
    tier_name = rng.choice(list(TIERS))
    tier = rng.choice(TIERS[tier_name])
    if rng.random() < 0.3:
        tier = f"{rng.choice(VENDOR_NAMES)}, {tier}"
    slots = {"dept": rng.choice(DEPARTMENTS), "item": rng.choice(ITEMS), "tier": tier,
             "amount": format_amount(rng, _amount(rng))}
    if kind == "new_frame":
        frame = rng.choice(NEW_FRAMES)
    elif kind == "reordered":
        frame = rng.choice(REORDERED)
    elif kind == "negation":
        slots["tier"] = rng.choice(NEGATED)[0]
        frame = rng.choice(NEW_FRAMES + REORDERED)
    elif kind == "second_amount":
        a1, a2 = _amount(rng), _amount(rng)
        slots.update(a1=format_amount(rng, a1), a2=format_amount(rng, a2))
        frame = rng.choice(SECOND)
    elif kind == "amount_k":
        slots["amount"] = rng.choice(K_FORMATS)[0]
        frame = rng.choice(NEW_FRAMES + REORDERED)
    elif kind == "new_tier_word":
        slots["tier"] = rng.choice(NEW_TIER_WORDS)
        frame = rng.choice(NEW_FRAMES + REORDERED)
    elif kind == "language":
        frame = rng.choice(LANGUAGE)
    else:  # boundary
        slots["amount"] = format_amount(rng, rng.choice(BOUNDARY))
        frame = rng.choice(NEW_FRAMES + REORDERED)
    slots["tier_cap"] = slots["tier"][:1].upper() + slots["tier"][1:]
    text = frame
    for k, v in slots.items():
        text = text.replace("{" + k + "}", v)
    return text[:1].upper() + text[1:]


def hard_heldout(n: int = 160, seed: int = 0, exclude: set[str] | None = None) -> list[Item]:
    """``n`` distinct requests, the kinds of :data:`KINDS` dealt round-robin, each tagged with its
    ``kind`` and labelled by the oracle.

    Args:
        n: how many requests (>= 0).
        seed: RNG seed.
        exclude: texts never to produce (e.g. the training corpus of the same seed).

    Raises:
        ValueError: ``n`` is negative or ``n`` distinct requests cannot be produced.
    """
    return deal_distinct(n, random.Random(seed * 7919 + 29), KINDS, _one,
                         lambda text, kind: Item(request=text, label=routing_oracle(text), kind=kind), "requests", exclude)


def corpus_with_hard(seed: int = 0) -> dict[str, list[Item]]:
    """The family's frozen default corpus (``train``, ``heldout``, ``ood``) plus ``hard``: the
    harder held-out set of the same seed, disjoint from the training slice."""
    data = default_corpus(seed)
    data["hard"] = hard_heldout(seed=seed, exclude={getattr(it, "request") for it in data["train"]})
    return data
