"""A harder held-out set for the extraction family (F3): phrasings the training corpus never uses.

The training generator (:mod:`bench.extraction.corpus`) draws every request from a fixed set of
frames and cue phrases. A program synthesized from it can be right on those and still wrong on a
customer who writes differently. This generator writes emails the training corpus never
contains, one *kind* of departure per email, and labels each with the simulator oracle's answer
(:func:`bench.extraction.oracle.extraction_oracle`: what the reference answers at T=0), so a
synthesized rule is tested beyond the templates:

* ``inflection`` — the cue inflected (``refunded``, ``cancelled``, ``replacing``, ``exchanged``);
* ``new_frame`` — a request frame the training corpus does not use (``Hoping you can ...``,
  ``... — would that be possible?``), with a training cue phrase;
* ``reordered`` — the clauses in another order: the urgency first, the order id last, the request
  split over two sentences;
* ``negation`` — a cue negated (``please don't cancel``, ``not a refund, just ...``), so the
  intent is another one or none;
* ``second_amount`` — two money amounts (the oracle reads the first);
* ``amount_words`` / ``amount_k`` — an amount in words (``forty-five dollars``) or with ``k``
  (``$1.2k``) or a currency code (``USD 300``);
* ``language`` — Spanish, German or French, with the cue words the oracle reads in those
  languages;
* ``long`` — a long email: three to five sentences of context around the request.

The same seed always gives the same set; the emails are distinct and never equal a training email
of the same seed. These are design choices of this benchmark, not measurements of real email.
"""

from __future__ import annotations

import random

from bench.extraction.corpus import ADDRESSES, CONTEXT, DEFECTS, NAMES, PRODUCTS, WHEN, Item, _fill, _oid, default_corpus
from bench.extraction.oracle import extraction_oracle
from bench.hard_sets import deal_distinct

KINDS = ("inflection", "new_frame", "reordered", "negation", "second_amount", "amount_words", "amount_k",
         "language", "long")
"""The kinds of departure from the training corpus, one per email."""

INFLECTED = {
    "refund": ["I'd like this order refunded: {ref}", "Could {ref} be refunded?", "I am still waiting to be refunded for {ref}",
               "Please make sure {ref} gets refunded"],
    "cancel": ["I want {ref} cancelled", "Could you get {ref} cancelled before it ships?", "I'm cancelling {ref}",
               "{Ref} should be cancelled"],
    "replacement": ["I'm hoping you are replacing the {product} from {ref}", "Can the {product} in {ref} be exchanged?",
                    "I'd like the {product} from {ref} replaced", "Please get the {product} in {ref} exchanged"],
    "status": ["I'm tracking {ref} and it seems stuck", "Any news on {ref}?", "Could you tell me where {ref} is now?",
               "What's the status of {ref}?"],
}
NEW_FRAMES = ["Hoping you can {vp}.", "Would it be possible to {vp}? Let me know.", "Reaching out to ask you to {vp}.",
              "I have one request: {vp}.", "Quick favour - {vp}, if you can.", "My ask is simple: {vp}."]
NEW_FRAME_VP = {
    "refund": ["refund {ref}", "process a refund for {ref}"],
    "cancel": ["cancel {ref}", "process a cancellation for {ref}"],
    "replacement": ["replace the {product} from {ref}", "send me a replacement for {ref}"],
    "status": ["tell me the status of {ref}", "give me an update on {ref}"],
    "other": ["send me an invoice for {ref}", "change the delivery address on {ref} to {address}",
              "add a gift message to {ref}"],
}
URGENT_LEAD = ["Urgent: ", "This is urgent. ", "ASAP please: ", "No rush, but ", "Whenever you get a chance: ", ""]
NEGATIONS = [
    ("Please don't cancel {ref} - I still want it. Could you tell me where it is?", None),
    ("I do not want a refund for {ref}; please send a replacement instead.", None),
    ("Not a refund, please - just replace the {product} from {ref}.", None),
    ("I'm not asking to cancel {ref}, only to change the delivery address to {address}.", None),
    ("No need to replace the {product} from {ref}, a refund is fine.", None),
    ("Don't worry about a refund for {ref}. What's the status of the delivery?", None),
]
SECOND_AMOUNT = ["I was charged {a1} and then {a2} for {ref}; please refund the second charge.",
                 "The site said {a1} but my card shows {a2} for {ref}. Please refund the difference.",
                 "{Ref} cost {a1}, plus {a2} for shipping. I'd like a refund.",
                 "Two charges for {ref}: {a1} and {a2}. Please check the status."]
AMOUNT_WORDS = ["I was charged {w} for {ref}; please refund it.", "{Ref} came to {w} and arrived broken. Please replace it.",
                "I paid {w} for {ref}. Please cancel it."]
WORD_AMOUNTS = [("forty-five dollars", 45.0), ("twenty dollars", 20.0), ("one hundred and twenty dollars", 120.0),
                ("sixty dollars and fifty cents", 60.5), ("ninety-nine dollars", 99.0)]
AMOUNT_K = ["Refund {k} for {ref}, the order never arrived.", "{Ref} was about {k} and I need to cancel it.",
            "I was charged {k} for {ref}. Where is it?"]
K_AMOUNTS = [("$1.2k", 1200.0), ("$3k", 3000.0), ("USD 300", 300.0), ("250 EUR", 250.0), ("$2.5k", 2500.0)]
LANGUAGE = [
    "Hola, por favor cancele el pedido {oid}. Es urgente.",
    "Hola, quiero un reembolso del pedido {oid}, sin prisa.",
    "Guten Tag, bitte stornieren Sie die Bestellung {oid}. Dringend!",
    "Guten Tag, ich möchte eine Erstattung für {oid}. Keine Eile.",
    "Bonjour, je voudrais un remboursement pour la commande {oid}, rien ne presse.",
    "Bonjour, où en est ma commande {oid} ? C'est urgent.",
]


def _slots(rng: random.Random) -> dict[str, str]:
    oid = _oid(rng)
    ref = rng.choice(["order {o}", "my order {o}", "{o}", "order #{o}"]).format(o=oid)
    return {"ref": ref, "Ref": ref[:1].upper() + ref[1:], "oid": oid, "product": rng.choice(PRODUCTS),
            "defect": rng.choice(DEFECTS), "when": rng.choice(WHEN), "address": rng.choice(ADDRESSES),
            "name": rng.choice(NAMES)}


def _money(rng: random.Random) -> str:
    v = rng.choice([rng.randrange(5, 500), rng.randrange(300, 5000) / 100.0])
    return f"${v:,.2f}" if isinstance(v, float) else f"${v}"


def _context(rng: random.Random, slots: dict[str, str], k: int) -> list[str]:
    return [_fill(t, slots) for t in rng.sample(CONTEXT, k)]


def _one(rng: random.Random, kind: str) -> str:
    s = _slots(rng)
    intent = rng.choice(["refund", "cancel", "replacement", "status", "other"])
    if kind == "inflection":
        body = _fill(rng.choice(INFLECTED[intent if intent != "other" else "refund"]), s) + "."
        parts = [body] + _context(rng, s, rng.randrange(0, 2))
    elif kind == "new_frame":
        parts = [_fill(rng.choice(NEW_FRAMES), {"vp": _fill(rng.choice(NEW_FRAME_VP[intent]), s)})]
        parts += _context(rng, s, rng.randrange(0, 2))
    elif kind == "reordered":
        vp = _fill(rng.choice(NEW_FRAME_VP[intent]), dict(s, ref="it"))
        parts = [rng.choice(URGENT_LEAD).strip() or "One request.", f"It's about {s['ref']}.", f"Please {vp}."]
        if rng.random() < 0.5:
            parts = [parts[1], parts[2], parts[0]]
    elif kind == "negation":
        parts = [_fill(rng.choice(NEGATIONS)[0], s)] + _context(rng, s, rng.randrange(0, 2))
    elif kind == "second_amount":
        a1, a2 = _money(rng), _money(rng)
        while a2 == a1:
            a2 = _money(rng)
        parts = [_fill(rng.choice(SECOND_AMOUNT), dict(s, a1=a1, a2=a2))]
    elif kind == "amount_words":
        w, _v = rng.choice(WORD_AMOUNTS)
        parts = [_fill(rng.choice(AMOUNT_WORDS), dict(s, w=w))]
    elif kind == "amount_k":
        k, _v = rng.choice(K_AMOUNTS)
        parts = [_fill(rng.choice(AMOUNT_K), dict(s, k=k))]
    elif kind == "language":
        parts = [_fill(rng.choice(LANGUAGE), s)]
    else:  # long
        vp = _fill(rng.choice(NEW_FRAME_VP[intent]), s)
        parts = _context(rng, s, rng.randrange(3, 6))
        parts.insert(rng.randrange(len(parts) + 1), f"Could you please {vp}?")
    greet = rng.choice(["", "Hi,", "Hello,", "Dear team,"])
    sign = _fill(rng.choice(["", "Thanks, {name}", "Best, {name}"]), s)
    return " ".join(p for p in [greet, " ".join(parts), sign] if p)


def hard_heldout(n: int = 180, seed: int = 0, exclude: set[str] | None = None) -> list[Item]:
    """``n`` distinct emails, the kinds of :data:`KINDS` dealt round-robin, each tagged with its
    ``kind`` and labelled by the oracle.

    Args:
        n: how many emails (>= 0).
        seed: RNG seed.
        exclude: texts never to produce (e.g. the training corpus of the same seed).

    Raises:
        ValueError: ``n`` is negative or ``n`` distinct emails cannot be produced.
    """
    return deal_distinct(n, random.Random(seed * 7919 + 17), KINDS, _one,
                         lambda text, kind: Item(email=text, label=extraction_oracle(text), kind=kind), "emails", exclude)


def corpus_with_hard(seed: int = 0) -> dict[str, list[Item]]:
    """The family's frozen default corpus (``train``, ``heldout``, ``ood``) plus ``hard``: the
    harder held-out set of the same seed, disjoint from the training slice."""
    data = default_corpus(seed)
    data["hard"] = hard_heldout(seed=seed, exclude={getattr(it, "email") for it in data["train"]})
    return data
