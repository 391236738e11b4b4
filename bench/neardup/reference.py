"""The simulated reference of the near-duplicate bench: a support-ticket classifier's behaviour.

**Belief (consistent per ticket).** The reference reads a rendering as a careful reader would:
its base ticket's category (:func:`bench.neardup.corpus.category_of`: a refund of at least
:data:`~bench.neardup.corpus.ESCALATE_AT` dollars is an escalation), whatever greeting, sign-off,
casing, typo or identifier it carries. It knows the rendering from :meth:`Reference.register`
(the bench registers every item of its stream before it starts); a text it was not told about
is ``other``.

**Per-call noise.** Each call answers the base category's confusable category
(:data:`CONFUSABLE`) with probability ``noise`` (default :data:`NOISE`; 0 models a reference called
at temperature 0), from a seeded generator (one draw per call).

**Cost.** Tokens as a chat model would count them (a 90-token system prompt plus 4 tokens per 3
words of the ticket; 2 completion tokens), priced as ``gpt-4o-mini`` by
:func:`auto.record.pricing.cost_usd_micros` (µ$). Latency is a simulated 400 ms (not slept).

A model of an LLM's behaviour chosen for testing Auto, not a measurement of any model.
"""

from __future__ import annotations

import random
import threading

from auto.errors import ArgumentError
from auto.record.pricing import cost_usd_micros
from bench.neardup.corpus import Item, category_of

NOISE = 0.02
"""Per-call probability of answering the confusable category."""

CONFUSABLE = {"shipping": "refund", "billing": "refund", "refund": "billing", "escalation": "refund",
              "account": "bug", "bug": "account", "cancel": "keep", "keep": "cancel", "warranty": "refund"}

MODEL = "gpt-4o-mini"
SYSTEM_TOKENS = 90
LATENCY_MS = 400.0


class Reference:
    """The simulated reference (module docstring); thread-safe (shadow audits call it from a
    background thread)."""

    def __init__(self, seed: int, noise: float = NOISE) -> None:
        if not 0.0 <= noise < 1.0:
            raise ArgumentError(f"--noise must be in [0, 1), got {noise!r}")
        self.noise = noise
        self._rng = random.Random(seed * 7919 + 17)
        self._lock = threading.Lock()
        self._known: dict[str, str] = {}
        self.calls = 0

    def register(self, items: list[Item]) -> None:
        """Tell the reference which base ticket (and amount) each rendering is."""
        for it in items:
            self._known[it.ticket] = category_of(it.base, it.amount)

    def belief(self, text: str) -> str:
        """The reference's consistent answer for ``text`` (no noise)."""
        return self._known.get(text, "other")

    def answer(self, text: str) -> tuple[str, float]:
        """One call: ``(category, cost in µ$)``."""
        belief = self.belief(text)
        with self._lock:
            self.calls += 1
            u = self._rng.random()
        ans = CONFUSABLE.get(belief, belief) if u < self.noise else belief
        tokens = SYSTEM_TOKENS + (4 * len(text.split()) + 2) // 3
        return ans, float(cost_usd_micros(MODEL, tokens, 2) or 0.0)
