"""The INTENTS family's inputs: real human-written utterances (HWU64) and the streams built from them.

**Data.** ``hwu64.jsonl.gz`` (vendored beside this module): 10,020 utterances that people wrote to
a home assistant, each with its intent (64 intents over 18 scenarios), one JSON object a line
``{"text": ..., "intent": ...}``. Collected and annotated by X. Liu, A. Eshghi, P. Swietojanski
and V. Rieser, "Benchmarking Natural Language Understanding Services for building
Conversational Agents" (IWSDS 2019), released under CC BY 4.0 (the NLU-Evaluation-Data
collection; the union of its ten cross-validation test folds, annotation brackets removed).

**Label roles** (fixed, so every seed sees the same task):

* :data:`OUT_OF_SCOPE_INTENTS` are not in the agent's label list: their utterances are
  out-of-scope inputs, which the reference should answer :data:`OUT_OF_SCOPE`;
* :data:`SHIFT_INTENTS` are in the label list but their utterances appear only from the shift
  position on (held-back intents appearing mid-stream);
* every other intent is in scope from the first item.

**Streams** (:func:`stream`): each item draws a distinct utterance from a Zipf law over a seeded
ranking of the pool (probability ∝ ``1 / rank ** ZIPF_S``), as repeats in real support traffic
are long-tailed; :data:`OOS_SHARE` of the items come from the out-of-scope pool (its own Zipf law)
and, from the shift on, :data:`SHIFT_SHARE` from the held-back intents. The ``near-duplicate``
variant renders every draw with a seeded surface variation the reference treats alike (a
greeting, a sign-off, casing, one typo, a changed number), so most items are distinct strings.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from auto.errors import ArgumentError

FIELD = "utterance"
"""The task's input field."""

DATA_FILE = "hwu64.jsonl.gz"
OUT_OF_SCOPE = "out_of_scope"
"""The answer the agent's prompt asks for when no listed intent fits."""

OUT_OF_SCOPE_INTENTS = ("cooking_recipe", "takeaway_order", "takeaway_query", "social_post", "social_query")
SHIFT_INTENTS = ("alarm_set", "alarm_query", "alarm_remove", "iot_cleaning", "transport_taxi")

ZIPF_S = 0.95
"""Zipf exponent of the repeats (chosen so 3,000 items have about 2.3 items per distinct input)."""
OOS_SHARE = 0.05
SHIFT_SHARE = 0.2

GENERATORS = ("zipf", "near-duplicate")


@dataclass(frozen=True)
class Utterance:
    """One corpus utterance: its text, the dataset's intent, and its role
    (``"in-scope"``, ``"shift"`` or ``"out-of-scope"``)."""

    utterance: str
    intent: str
    role: str

    @property
    def label(self) -> str:
        """The answer a noise-free reference gives by the dataset's annotation: the intent, or
        :data:`OUT_OF_SCOPE` for an out-of-scope utterance."""
        return OUT_OF_SCOPE if self.role == "out-of-scope" else self.intent


@lru_cache(maxsize=1)
def load() -> tuple[Utterance, ...]:
    """Every utterance of the vendored data, in file order (the first of duplicated texts kept)."""
    raw = resources.files("bench.intents").joinpath(DATA_FILE).read_bytes()
    out, seen = [], set()
    for line in gzip.decompress(raw).decode("utf-8").splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        text, intent = obj["text"].strip(), obj["intent"]
        if not text or text in seen:
            continue
        seen.add(text)
        role = "out-of-scope" if intent in OUT_OF_SCOPE_INTENTS else "shift" if intent in SHIFT_INTENTS else "in-scope"
        out.append(Utterance(text, intent, role))
    return tuple(out)


def labels() -> tuple[str, ...]:
    """The agent's label list: the in-scope and shift intents, sorted, then :data:`OUT_OF_SCOPE`."""
    return tuple(sorted({u.intent for u in load() if u.role != "out-of-scope"})) + (OUT_OF_SCOPE,)


def default_corpus(seed: int = 0) -> dict[str, list[Utterance]]:
    """Seeded slices of the data: ``train`` (half of the in-scope utterances), ``heldout`` (the
    other half), ``shift`` (the held-back intents) and ``ood`` (the out-of-scope utterances)."""
    rng = random.Random(seed)
    data = load()
    ins = [u for u in data if u.role == "in-scope"]
    rng.shuffle(ins)
    half = len(ins) // 2
    return {"train": ins[:half], "heldout": ins[half:], "shift": [u for u in data if u.role == "shift"],
            "ood": [u for u in data if u.role == "out-of-scope"]}


class _Zipf:
    """Draws from a seeded ranking of ``pool`` with probability ∝ 1 / rank ** s."""

    def __init__(self, pool: list[Utterance], rng: random.Random, s: float) -> None:
        self.pool = list(pool)
        rng.shuffle(self.pool)
        acc, self.cum = 0.0, []
        for r in range(1, len(self.pool) + 1):
            acc += 1.0 / r ** s
            self.cum.append(acc)

    def draw(self, rng: random.Random) -> Utterance:
        import bisect

        return self.pool[min(len(self.pool) - 1, bisect.bisect_left(self.cum, rng.random() * self.cum[-1]))]


GREETINGS = ("hi", "hello", "hey", "hi there", "good morning", "hey assistant", "ok google", "excuse me")
SIGN_OFFS = ("thanks", "thank you", "please", "thanks a lot", "cheers", "thx", "if you can", "asap")
VARIATIONS = ("greeting", "sign-off", "casing", "typo", "number", "greeting+sign-off")


def vary(text: str, rng: random.Random) -> tuple[str, str]:
    """One surface variation of ``text`` the reference treats alike: ``(new text, variation)``.

    Variations (:data:`VARIATIONS`, uniform): a greeting in front (``"hi, ..."``), a sign-off at the
    end (``"..., thanks"``), the casing changed (upper-cased first letter, or all lower/upper),
    one typo (two adjacent letters of a word of four letters or more swapped), a number changed
    (every digit run replaced by another number; falls back to a greeting without digits), or
    both a greeting and a sign-off.
    """
    import re

    kind = rng.choice(VARIATIONS)
    if kind == "number" and not re.search(r"\d", text):
        kind = "greeting"
    if kind == "typo":
        words = text.split(" ")
        long_ = [i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha()]
        if not long_:
            kind = "sign-off"
        else:
            i = rng.choice(long_)
            w = words[i]
            j = rng.randrange(len(w) - 1)
            words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2:]
            return " ".join(words), kind
    if kind == "greeting":
        return f"{rng.choice(GREETINGS)}, {text}", kind
    if kind == "sign-off":
        return f"{text.rstrip('.?! ')}, {rng.choice(SIGN_OFFS)}", kind
    if kind == "greeting+sign-off":
        return f"{rng.choice(GREETINGS)} {text.rstrip('.?! ')} {rng.choice(SIGN_OFFS)}", kind
    if kind == "casing":
        pick = rng.randrange(3)
        return (text.upper() if pick == 0 else text.lower() if pick == 1 else text[:1].upper() + text[1:]), kind
    return re.sub(r"\d+", lambda m: str((int(m.group()) + rng.randrange(1, 9)) % 100 or 1), text), kind


def stream(items: int, seed: int = 0, generator: str = "zipf", shift_at: int | None = None
           ) -> tuple[list[Utterance], int]:
    """A stream of ``items`` utterances and its shift position (``items // 2`` unless given).

    Raises:
        ArgumentError: ``items`` < 1 or an unknown ``generator`` (:data:`GENERATORS`).
    """
    if isinstance(items, bool) or not isinstance(items, int) or items < 1:
        raise ArgumentError(f"--items must be a positive number of stream items, got {items!r}")
    if generator not in GENERATORS:
        raise ArgumentError(f"unknown intents stream {generator!r} (choose from {', '.join(GENERATORS)})")
    rng = random.Random(f"intents-stream|{seed}")
    data = load()
    main = _Zipf([u for u in data if u.role == "in-scope"], rng, ZIPF_S)
    held = _Zipf([u for u in data if u.role == "shift"], rng, ZIPF_S)
    oos = _Zipf([u for u in data if u.role == "out-of-scope"], rng, ZIPF_S)
    cut = items // 2 if shift_at is None else shift_at
    out: list[Utterance] = []
    for pos in range(items):
        u = rng.random()
        src = oos if u < OOS_SHARE else held if pos >= cut and u < OOS_SHARE + SHIFT_SHARE else main
        it = src.draw(rng)
        if generator == "near-duplicate" and rng.random() < 0.7:
            text, _kind = vary(it.utterance, rng)
            it = Utterance(text, it.intent, it.role)
        out.append(it)
    return out, cut
