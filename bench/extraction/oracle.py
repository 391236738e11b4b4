"""The EXTRACTION family of the simulated reference model: customer email → typed record.

The answer for an email is always the four-key record::

    {"order_id": "ORD-12345" | None,
     "intent": "refund" | "replacement" | "status" | "cancel" | "other",
     "urgency": "high" | "normal" | "low",
     "amount": float | None}

**Oracle** (:func:`extraction_oracle`, :func:`extraction_reading`). The text is read field by
field, each with a stated precedence:

* ``order_id`` — the first match of :data:`ORDER_ID` (``ORD`` then an optional ``-``, space or
  ``#`` and 4–8 digits, any case), written back as ``ORD-<digits>``; ``None`` when absent.
* ``amount`` — the first money amount by position (:func:`money_amounts`: ``$58.40``,
  ``$1,200``, ``€20``, ``USD 300``, ``300 dollars``, ``$3k``, ``fifty-eight dollars and forty
  cents``), rounded to cents; ``None`` when absent. Bare numbers (sizes, dates, house numbers)
  are not money.
* ``intent`` — cue phrases per intent (:data:`INTENT_CUES`; English plus a few Spanish,
  German and French words). A cue is dropped when its clause puts a negation in the four words
  before it (``do not cancel``, ``instead of a refund``, ``I don't want a replacement``; but
  ``have not received`` is not a negation of the request). Among the intents with a remaining
  cue the first in :data:`INTENT_PRECEDENCE` wins (cancel > refund > replacement > status:
  cancelling implies any refund, an explicit refund outranks a replacement, and a status
  question often accompanies the other requests); with none, ``other``.
* ``urgency`` — low-urgency phrases (:data:`LOW_CUES`: ``no rush``, ``whenever you get a
  chance``, ``not urgent``, ...) are found first and masked out, then high-urgency words
  (:data:`HIGH_CUES`: ``urgent``, ``immediately``, ``ASAP``, ``right away``, ...); a negated high
  cue (``no need to hurry``) counts as low. Any high cue → ``high``; else any low cue → ``low``;
  else ``normal``.

**Ambiguity.** A field is ambiguous when the text supports a second reading: two distinct order
ids (runner-up: the second), two distinct money amounts (the second), cues of two intents (the
next one in precedence), or both high and low urgency cues (low). :func:`extraction_reading`
returns the runner-up per ambiguous field.

**Noise model** (same calibration as :mod:`bench.triage.oracle`; temperature ``T``):

* when some field is ambiguous, with probability ``p(T) = min(0.5, 0.35 * T)`` one ambiguous
  field (uniformly chosen) takes its runner-up value; unambiguous emails are never flipped;
* with probability ``q(T) = min(0.15, 0.05 * T)`` the JSON text varies in form only, uniformly
  one of: indented over several lines, wrapped in a ```` ```json ```` code fence, intent and
  urgency capitalized, surrounded by blank lines, keys in reverse order;
* at T=0 the reply is exactly ``json.dumps(answer)`` (keys in the order above).

This is a model of an LLM's behaviour chosen for testing Auto, not a measurement of any real
model.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from bench.chat import last_user_text
from bench.triage.oracle import flip_probability, format_probability

MARKER = "[auto-bench:extraction]"
INTENTS = ("refund", "replacement", "status", "cancel", "other")
URGENCIES = ("high", "normal", "low")
INTENT_PRECEDENCE = ("cancel", "refund", "replacement", "status")
KEYS = ("order_id", "intent", "urgency", "amount")

ORDER_ID = re.compile(r"\bORD[-\s#]?(\d{4,8})\b", re.I)
"""Order ids: ``ORD-12345`` (also ``ord 12345``, ``ORD#12345``), normalized to ``ORD-<digits>``."""

# -- money ----------------------------------------------------------------------------------

_NUM = r"\d{1,3}(?:\.\d{3})*,\d{2}(?![\d,])|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_DECIMAL_COMMA = re.compile(r"^\d{1,3}(?:\.\d{3})*,\d{2}$")
_MULT = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mm": 1e6, "million": 1e6}
_MULT_RE = r"(?:\s?(?P<mult>k|mm|m|thousand|million)\b)?"
_SYMBOL = re.compile(r"(?<![\w.])(?:us|ca|au)?[$€£]\s?(?P<num>" + _NUM + r")" + _MULT_RE, re.I)
_CODE_PREFIX = re.compile(r"\b(?:usd|eur|gbp|cad|aud)\s?(?P<num>" + _NUM + r")" + _MULT_RE, re.I)
_SUFFIX = re.compile(r"(?<![\w.,$€£])(?P<num>" + _NUM + r")\s?(?P<mult>k|mm|m|thousand|million)?\s?"
                     r"(?:usd|eur|gbp|cad|aud|dollars?|bucks|euros?)\b", re.I)
_BARE_K = re.compile(r"(?<![\w.,$€£])(?P<num>\d+(?:\.\d+)?)\s?(?P<mult>k)\b", re.I)

_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_WORD = r"(?:" + "|".join(sorted([*_UNITS, *_TENS, *_SCALES, "a", "and"], key=len, reverse=True)) + r")"
_WORDS = re.compile(r"\b(?P<words>" + _WORD + r"(?:[\s-]+" + _WORD + r")*)\s+(?:dollars?|bucks|euros?)"
                    r"(?:\s+and\s+(?P<cents>" + _WORD + r"(?:[\s-]+" + _WORD + r")*)\s+cents?)?\b", re.I)


def words_to_number(words: str) -> int | None:
    """English number words → int (``"fifty-eight"`` → 58, ``"two thousand five hundred"`` →
    2500, ``"a hundred"`` → 100); ``None`` when no word carries a number."""
    total, current, seen = 0, 0, False
    for w in re.split(r"[\s-]+", words.lower().strip()):
        if not w or w == "and":
            continue
        if w == "a":
            current = max(current, 1)
            continue
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = max(current, 1) * 100
        elif w in _SCALES:
            total += max(current, 1) * _SCALES[w]
            current = 0
        else:
            return None
        seen = seen or w not in ("a",)
    return total + current if seen else None


@dataclass(frozen=True)
class Money:
    """One money amount found in a text: ``value`` (a float, currency units) at ``[start, end)``."""

    value: float
    start: int
    end: int
    text: str


def money_amounts(text: str, bare_k: bool = False) -> list[Money]:
    """Every money amount in ``text``, in order of position (overlapping matches: the earliest,
    then the longest, wins).

    Recognized: a currency symbol before the number (``$45``, ``$1,200``, ``$58.40``, ``€20``,
    ``US$9``; a comma followed by exactly two digits is a decimal comma: ``49,90 EUR`` = 49.9), a code before or after (``USD 300``, ``300 EUR``), ``dollars``/``bucks``/``euros``
    after, a ``k``/``m``/``thousand``/``million`` multiplier (``$3k``), and amounts in words
    followed by a currency word (``fifty-eight dollars and forty cents`` = 58.4). With
    ``bare_k``, a bare ``3k`` also counts (the routing family reads budgets that way).
    Values are rounded to cents.
    """
    cands: list[Money] = []
    pats = [_SYMBOL, _CODE_PREFIX, _SUFFIX] + ([_BARE_K] if bare_k else [])
    for pat in pats:
        for m in pat.finditer(text):
            num = m.group("num")
            if _DECIMAL_COMMA.match(num):  # 49,90 / 1.234,56: a decimal comma
                num = num.replace(".", "").replace(",", ".")
            value = float(num.replace(",", ""))
            mult = (m.group("mult") or "").lower()
            value *= _MULT.get(mult, 1.0)
            cands.append(Money(round(value, 2), m.start(), m.end(), m.group(0)))
    for m in _WORDS.finditer(text):
        whole = words_to_number(m.group("words"))
        if whole is None:
            continue
        cents = words_to_number(m.group("cents")) if m.group("cents") else 0
        cands.append(Money(round(whole + (cents or 0) / 100.0, 2), m.start(), m.end(), m.group(0)))
    cands.sort(key=lambda c: (c.start, -(c.end - c.start)))
    out: list[Money] = []
    for c in cands:
        if out and c.start < out[-1].end:
            continue
        out.append(c)
    return out


def order_ids(text: str) -> list[str]:
    """Distinct order ids in ``text`` in order of appearance, each as ``ORD-<digits>``."""
    out: list[str] = []
    for m in ORDER_ID.finditer(text):
        oid = "ORD-" + m.group(1)
        if oid not in out:
            out.append(oid)
    return out


# -- intent and urgency cues ----------------------------------------------------------------

INTENT_CUES: dict[str, list[str]] = {
    "cancel": [
        r"\bcancel(?:l?ing)?\b", r"\bcancell?ation\b",
        r"\b(?:need|want|like|have|get|getting)\s+(?:\S+\s+){0,3}?cancell?ed\b",
        r"\bcall off (?:my|the|this) order\b", r"\bstop (?:my|the|this) order\b",
        r"\bno longer (?:need|want) (?:it|them|the order|this order|the item)\b",
        r"\bcancel(?:ar|e|en)\b", r"\bstornier\w*", r"\bannul(?:er|ez|ation)\b",
    ],
    "refund": [
        r"\brefund\w*", r"\b(?:money|difference|overcharge) back\b", r"\breimburse (?:me|my)\b", r"\bpay(?:ing)? me back\b",
        r"\bcredit (?:it |the amount |that |this )?back\b", r"\bchargeback\b",
        r"\breembols\w*", r"\bdevoluci[oó]n del dinero\b", r"\berstatt\w*", r"\brückerstattung\b",
        r"\brembours\w*",
    ],
    "replacement": [
        r"\breplac\w*", r"\bexchang\w*", r"\bswap (?:it|them|this)\b",
        r"\bsend (?:me |us )?(?:another|a new|a fresh|a working|the correct|a correct)\b",
        r"\breemplaz\w*", r"\bersatz\w*", r"\bumtausch\w*", r"\bremplac\w*", r"\béchang\w*",
    ],
    "status": [
        r"\bwhere(?:'s| is| are)\s+(?:my|the|our|this|it|they|order|ord)\b"
        r"(?!\s+(?:warranty|manual|form|invoice|receipt|link|page|option|setting))",
        r"\bwhere (?:my |the |this |our )?(?:order|package|parcel|shipment|delivery|item|box)\b",
        r"\bwhere (?:my|our|the) [\w'-]+(?: [\w'-]+){0,2} (?:is|are)\b",
        r"\bstatus\b", r"\btracking\b", r"\bupdate on\b", r"\bany news (?:on|about)\b",
        r"\b(?:when|how soon)\s+(?:will|is|does|should|can|would|might)\b[^.?!]{0,50}?"
        r"\b(?:ship|arrive|be delivered|get here|show up|be dispatched|go out)\b",
        r"\bexpected to (?:arrive|ship|be delivered)\b", r"\bestimated (?:delivery|arrival)\b",
        r"\bnever (?:arrived|showed up|came)\b", r"\bnothing (?:has )?(?:arrived|come)\b",
        r"\b(?:has|have|hasn't|haven't|did not|didn't)\s+(?:not\s+)?(?:yet\s+)?"
        r"(?:arrived|shown up|come|received)\b",
        r"\bstill (?:shows|says|showing|saying|listed as)\b", r"\bcheck(?:ing)? (?:in )?on\b",
        r"\bcheck where\b", r"\beta\b", r"\bon (?:its|the) way\b",
        r"\bd[oó]nde est[aá]\b", r"\bestado del pedido\b", r"\bwo (?:ist|bleibt)\b", r"\bo[uù] en est\b",
        r"\bsuivi\b",
    ],
}
"""Cue patterns per intent (regular expressions over the lower-cased email)."""

HIGH_CUES = [
    r"\burgent(?:ly)?\b", r"\bimmediate(?:ly)?\b", r"\basap\b", r"\bas soon as possible\b", r"\bright away\b",
    r"\bemergency\b", r"\bat once\b", r"\btime[- ]sensitive\b", r"\bwithout delay\b",
    r"\bplease hurry\b", r"\burgente\b", r"\bdringend\b", r"\bsofort\b", r"\binmediat\w*", r"\bimmédiatement\b",
]
"""High-urgency cue patterns (a negated one counts as low)."""

LOW_CUES = [
    r"\bno rush\b", r"\bno hurry\b", r"\bin no hurry\b", r"\bnot in a (?:rush|hurry)\b",
    r"\bnot (?:that |very |super |terribly )?urgent\b", r"\bnon[- ]urgent\b", r"\bno urgency\b",
    r"\bwhenever (?:you|it|is|convenient)\b", r"\bwhen(?:ever)? (?:it is |it's )?convenient\b",
    r"\bat your convenience\b", r"\bwhen you (?:get|have|find) (?:a|the) (?:chance|moment|minute)\b",
    r"\btake your time\b", r"\blow priority\b", r"\bsin prisa\b", r"\bkeine eile\b", r"\brien ne presse\b",
]
"""Low-urgency cue patterns (matched first, then masked out)."""

_INTENT_RE = {k: [re.compile(p) for p in v] for k, v in INTENT_CUES.items()}
_HIGH_RE = [re.compile(p) for p in HIGH_CUES]
_LOW_RE = [re.compile(p) for p in LOW_CUES]
_CLAUSE = re.compile(r"[.!?;:,()\n]|\s[-–—]+\s|\bbut\b")
_NEGATORS = {"not", "never", "no", "instead", "rather", "without", "nor", "dont", "don't", "didnt", "didn't",
             "doesnt", "doesn't", "wont", "won't", "shouldnt", "shouldn't", "neither"}
_RECEIPT = re.compile(r"^(?:receiv|got|get|gotten|seen|see|heard|arriv)")


def _lower(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").lower()


def negated(text: str, start: int) -> bool:
    """Whether the cue at ``start`` of the lower-cased ``text`` is negated: a negator (``not``,
    ``never``, ``no``, ``don't``, ``instead of``, ``rather than``, ...) among the four words
    before it within its clause, and no verb of receiving (``received``, ``got``) after that
    negator (``have not received a refund`` still asks about a refund)."""
    clause = _CLAUSE.split(text[max(0, start - 80):start])[-1]
    words = re.findall(r"[a-zà-ÿ']+", clause)[-4:]
    for i, w in enumerate(words):
        if w in _NEGATORS or w.endswith("n't"):
            return not any(_RECEIPT.match(x) for x in words[i + 1:])
    return False


def intent_cues(text: str) -> dict[str, list[str]]:
    """The non-negated cue phrases found per intent (only intents with at least one)."""
    low = _lower(text)
    out: dict[str, list[str]] = {}
    for intent, pats in _INTENT_RE.items():
        hits = [m.group(0) for p in pats for m in p.finditer(low) if not negated(low, m.start())]
        if hits:
            out[intent] = hits
    return out


def urgency_cues(text: str) -> tuple[list[str], list[str]]:
    """``(high, low)``: the high- and low-urgency phrases found (see the module docstring)."""
    low_text = _lower(text)
    low: list[str] = []
    masked = low_text
    for p in _LOW_RE:
        for m in p.finditer(low_text):
            low.append(m.group(0))
            masked = masked[:m.start()] + " " * (m.end() - m.start()) + masked[m.end():]
    high: list[str] = []
    for p in _HIGH_RE:
        for m in p.finditer(masked):
            (low if negated(masked, m.start()) else high).append(m.group(0))
    return high, low


@dataclass(frozen=True)
class ExtractionReading:
    """The oracle's reading of one email.

    Attributes:
        answer: the record (keys :data:`KEYS`).
        alternatives: runner-up value per ambiguous field (empty when unambiguous).
        cues: what was found (order ids, amounts, intent cues, urgency cues), for explanation.
    """

    answer: dict[str, Any]
    alternatives: dict[str, Any] = field(default_factory=dict)
    cues: dict[str, Any] = field(default_factory=dict)

    @property
    def ambiguous(self) -> bool:
        """True when at least one field has a second reading."""
        return bool(self.alternatives)


def extraction_reading(email: str) -> ExtractionReading:
    """Read ``email`` (see the module docstring for every rule); total for any string.

    Raises:
        TypeError: ``email`` is not a ``str``.
    """
    if not isinstance(email, str):
        raise TypeError(f"email must be a str, got {type(email).__name__}")
    ids = order_ids(email)
    amounts: list[float] = []
    for m in money_amounts(email):
        if m.value not in amounts:
            amounts.append(m.value)
    cues = intent_cues(email)
    present = [i for i in INTENT_PRECEDENCE if i in cues]
    high, low = urgency_cues(email)
    urgency = "high" if high else ("low" if low else "normal")
    answer = {
        "order_id": ids[0] if ids else None,
        "intent": present[0] if present else "other",
        "urgency": urgency,
        "amount": amounts[0] if amounts else None,
    }
    alt: dict[str, Any] = {}
    if len(ids) > 1:
        alt["order_id"] = ids[1]
    if len(present) > 1:
        alt["intent"] = present[1]
    if high and low:
        alt["urgency"] = "low"
    if len(amounts) > 1:
        alt["amount"] = amounts[1]
    return ExtractionReading(answer, alt, {"order_ids": ids, "amounts": amounts, "intent": cues,
                                           "urgency_high": high, "urgency_low": low})


def extraction_oracle(email: str) -> dict[str, Any]:
    """The simulator's noise-free record for ``email`` (what it answers at T=0).

    Returns:
        ``{"order_id": str | None, "intent": str, "urgency": str, "amount": float | None}``.

    Raises:
        TypeError: ``email`` is not a ``str``.
    """
    return dict(extraction_reading(email).answer)


# -- the responder --------------------------------------------------------------------------

FORMAT_VARIANTS = ("indented", "code_fence", "capitalized", "blank_lines", "reversed_keys")
"""The formatting variants of the reply (form only; the parsed record is unchanged up to case)."""


def format_reply(answer: dict[str, Any], variant: str | None = None) -> str:
    """The reply text for ``answer`` in formatting ``variant`` (``None``: canonical
    ``json.dumps``). Raises ``ValueError`` for an unknown variant."""
    if variant is None:
        return json.dumps(answer)
    if variant == "indented":
        return json.dumps(answer, indent=2)
    if variant == "code_fence":
        return "```json\n" + json.dumps(answer) + "\n```"
    if variant == "capitalized":
        cap = dict(answer, intent=str(answer["intent"]).capitalize(), urgency=str(answer["urgency"]).capitalize())
        return json.dumps(cap)
    if variant == "blank_lines":
        return "\n\n" + json.dumps(answer) + "  \n"
    if variant == "reversed_keys":
        return json.dumps({k: answer[k] for k in reversed(list(answer))})
    raise ValueError(f"unknown format variant {variant!r} (known: {', '.join(FORMAT_VARIANTS)})")


def respond(messages: list[dict], temperature: float, rng: random.Random, request: dict | None = None) -> Any:
    """Answer an extraction request: the record as JSON text, or a tool call when a tool of the
    request takes an ``intent`` argument.

    Args:
        messages: the chat messages; the last user message is the email.
        temperature: sampling temperature T (drives the noise model of the module docstring).
        rng: the per-request random generator (four draws per call, whatever the branch).
        request: the whole request body (to see ``tools``).
    """
    reading = extraction_reading(last_user_text(messages))
    answer = dict(reading.answer)
    u_flip, u_field, u_fmt, u_kind = rng.random(), rng.random(), rng.random(), rng.random()
    if reading.alternatives and u_flip < flip_probability(temperature):
        fields = sorted(reading.alternatives, key=KEYS.index)
        f = fields[min(len(fields) - 1, int(u_field * len(fields)))]
        answer[f] = reading.alternatives[f]
    tool = _record_tool(request)
    if tool is not None:
        return [{"name": tool, "arguments": json.dumps(answer)}]
    variant = None
    if u_fmt < format_probability(temperature):
        variant = FORMAT_VARIANTS[min(len(FORMAT_VARIANTS) - 1, int(u_kind * len(FORMAT_VARIANTS)))]
    return format_reply(answer, variant)


def _record_tool(request: dict | None) -> str | None:
    for t in (request or {}).get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        props = ((fn or {}).get("parameters") or {}).get("properties") or {}
        if "intent" in props:
            return fn.get("name")
    return None
