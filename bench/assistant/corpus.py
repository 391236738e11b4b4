"""Seeded corpus generator for the assistant family: requests that need a tool (or none).

Intents (shares): weather 25%, currency 25%, order status 22%, cancel 20%, no tool 4%, weather next
to an order (ambiguous) 4%; each a request frame with slots (cities, amounts such as ``250``,
``19.99`` or ``1,200``, currency codes, order ids ``A-1234``), an optional greeting and closer.
Each item carries the intent and the oracle's choice (``label``,
:func:`bench.assistant.oracle.assistant_oracle`). The same seed always gives the same corpus; items
are distinct.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.assistant.oracle import assistant_oracle
from bench.assistant.tools import WEATHER

FIELD = "request"
CITIES = sorted(WEATHER)
CUR = {c: [c] for c in ("USD", "EUR", "GBP", "JPY", "CHF", "CAD")}
"""Currencies as users of the bench write them: ISO codes (the oracle also reads words such as
``dollars``; the probes use them)."""
FRAMES = {
    "weather": ["What's the weather in {city}?", "How warm is it in {city} today?", "Is it raining in {city}?",
                "Weather forecast for {city}, please.", "What is the temperature in {city} right now?",
                "Tell me the weather in {city}.", "How cold is it in {city}?"],
    "currency": ["Convert {amount} {c1} to {c2}.", "How much is {amount} {c1} in {c2}?",
                 "What are {amount} {c1} worth in {c2}?", "{amount} {c1} to {c2}, please.",
                 "I need {amount} {c1} converted into {c2}."],
    "lookup": ["Where is my order {order}?", "What's the status of order {order}?", "Has order {order} shipped yet?",
               "Track order {order} for me.", "When will order {order} arrive?", "Any news on order {order}?"],
    "cancel": ["Please cancel order {order}.", "Cancel my order {order}, I changed my mind.",
               "I want to cancel order {order}.", "Can you cancel order {order}?"],
    "none": ["Tell me a joke.", "Who are you?", "Thanks for the help!", "What can you do?", "Good night.",
             "Do you like music?"],
    "mixed": ["Will the weather in {city} delay order {order}?", "Is it raining in {city}? I wonder about order {order}."],
}
SHARES = [("weather", 0.25), ("currency", 0.25), ("lookup", 0.22), ("cancel", 0.20), ("none", 0.04), ("mixed", 0.04)]
OPENERS = ["", "", "", "Hi! ", "Hello, ", "Hey, ", "Quick question: "]
CLOSERS = ["", "", "", " Thanks!", " Thank you.", " Cheers."]


@dataclass(frozen=True)
class Request:
    """One generated request: text, intent, and the oracle's choice (``label``)."""

    request: str
    intent: str
    label: dict


def _amount(rng: random.Random) -> str:
    u = rng.random()
    if u < 0.5:
        return str(rng.choice([5, 10, 20, 25, 40, 50, 75, 100, 120, 150, 200, 250, 300, 500, 800]))
    if u < 0.8:
        return f"{rng.randint(1, 99)}.{rng.randint(0, 99):02d}"
    return f"{rng.randint(1, 9)},{rng.randint(0, 999):03d}"


def _one(rng: random.Random) -> Request:
    u, acc, intent = rng.random(), 0.0, "weather"
    for name, share in SHARES:
        acc += share
        if u < acc:
            intent = name
            break
    frame = rng.choice(FRAMES[intent])
    c1, c2 = rng.sample(sorted(CUR), 2)
    text = frame.format(city=rng.choice(CITIES), amount=_amount(rng), c1=rng.choice(CUR[c1]), c2=rng.choice(CUR[c2]),
                        order=f"{rng.choice('ABCDEFGHJK')}-{rng.randint(1000, 9999)}")
    if intent != "none":
        text = rng.choice(OPENERS) + text + rng.choice(CLOSERS)
    return Request(text, intent, assistant_oracle(text))


def generate(n: int, seed: int = 0) -> list[Request]:
    """``n`` distinct requests (module docstring); "no tool" requests repeat a few texts, so fewer
    of them are distinct.

    Raises:
        ValueError: ``n`` distinct requests cannot be produced.
    """
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[Request] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(f"could not generate {n} distinct requests (got {len(out)})")
        r = _one(rng)
        if r.request not in seen:
            seen.add(r.request)
            out.append(r)
    return out


OOD = [
    "What's the weather on Mars?", "Convert 5 bitcoin to dollars.", "Cancel all my orders.",
    "Wie ist das Wetter in Berlin?", "Don't cancel order A-1234, just tell me where it is.",
    "¿Cuánto son 100 euros en dólares?", "Where is order 12345?", "What's the weather in Springfield?",
    "Convert dollars to euros.", "How much is 40 dollars in euros?", "order A-1234 order B-5678 status", "Is it raining in paris?",
    "Please cancel order a-1234.", "How much is 3.14159 USD in EUR?", "weather weather weather",
    "Track my package from last week.", "I want to cancel my subscription.",
]


def default_corpus(seed: int = 0) -> dict[str, list[Request]]:
    """The frozen default corpus: ``train`` (1,200 requests, recorded: each tool's branch needs about
    175 distinct training inputs before a program of its arguments can meet the program gate's
    lower bound), ``heldout`` (200, never recorded) and ``ood`` (16 probes: other languages, unknown
    places, malformed ids, negations)."""
    items = generate(1400, seed)
    return {"train": items[:1200], "heldout": items[1200:], "ood": [Request(t, "ood", assistant_oracle(t)) for t in OOD]}
