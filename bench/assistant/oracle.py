"""The ASSISTANT family of the simulated reference model: a function-calling loop.

First call (the request carries ``tools``; no ``tool`` message yet) — the tool choice and its
arguments (:func:`choose`): an order id (``A-1234``) with a "cancel" cue → ``cancel_order``; an
order id → ``lookup_order``; a weather cue with a known city → ``get_weather``; a number with two
currency words → ``convert_currency`` (the first currency is converted into the second; the amount
as a float); anything else → no tool, a fixed reply. A weather cue next to an order id is ambiguous
(runner-up ``get_weather``).

Second call (a ``tool`` message answers the call) — the phrasing (:func:`phrase`): one sentence per
tool, values copied from the tool's JSON as it wrote them; at temperature T another sentence frame
with probability ``min(0.3, 0.1 T)``.

Noise: an ambiguous request takes the runner-up with probability ``p(T) = min(0.5, 0.35 T)``
(:func:`bench.triage.oracle.flip_probability`). A model of an LLM for testing Auto; it measures no
real model.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from bench.assistant.tools import WEATHER
from bench.chat import last_user_text
from bench.triage.oracle import flip_probability

MARKER = "[auto-bench:assistant]"
ORDER_RE = re.compile(r"\b[A-Z]-\d{4}\b")
CURRENCY_WORDS = {"usd": "USD", "dollars": "USD", "eur": "EUR", "euros": "EUR", "gbp": "GBP", "pounds": "GBP",
                  "jpy": "JPY", "yen": "JPY", "chf": "CHF", "francs": "CHF", "cad": "CAD"}
WEATHER_CUES = ("weather", "temperature", "forecast", "how warm", "how cold", "raining")
NO_TOOL_REPLY = "I can help with the weather, currency conversions and your orders."
_CUR_RE = re.compile(r"\b(" + "|".join(CURRENCY_WORDS) + r")\b", re.I)
_NUM_RE = re.compile(r"\d[\d,]*(?:\.\d+)?")
_CITY_RE = re.compile(r"\b(" + "|".join(WEATHER) + r")\b")


@dataclass(frozen=True)
class Choice:
    """A tool (None: answer directly) with its arguments, the runner-up choice, ambiguity."""

    tool: str | None
    args: dict
    runner_up: "Choice | None" = None

    @property
    def ambiguous(self) -> bool:
        return self.runner_up is not None


def _weather(request: str) -> Choice | None:
    low = request.lower()
    m = _CITY_RE.search(request)
    if m and any(c in low for c in WEATHER_CUES):
        return Choice("get_weather", {"city": m.group(1)})
    return None


def choose(request: str) -> Choice:
    """The tool and arguments the reference model picks for ``request`` (module docstring)."""
    low = request.lower()
    order = ORDER_RE.search(request)
    if order:
        tool = "cancel_order" if re.search(r"\bcancel", low) else "lookup_order"
        w = _weather(request)
        return Choice(tool, {"order_id": order.group(0)}, w if w and tool == "lookup_order" else None)
    w = _weather(request)
    if w:
        return w
    curs = [CURRENCY_WORDS[m.group(1).lower()] for m in _CUR_RE.finditer(request)]
    num = _NUM_RE.search(request)
    if num and len(curs) >= 2:
        return Choice("convert_currency", {"amount": float(num.group(0).replace(",", "")), "from_currency": curs[0],
                                           "to_currency": curs[1]})
    return Choice(None, {})


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


FRAMES = {
    "get_weather": ("It is {temp_c}°C and {conditions} in {city} right now.", "{city}: {conditions}, {temp_c}°C."),
    "convert_currency": ("{amount} {from_currency} is {converted} {to_currency} (rate {rate}).",
                         "That comes to {converted} {to_currency}."),
    "lookup_order": ("Order {order_id} is {status}; expected delivery: {eta}.", "Your order {order_id}: {status} ({eta})."),
    "cancel_order": ("Update: {message}.", "All right: {message}."),
}


def phrase(tool: str, result: dict, temperature: float, rng: random.Random) -> str:
    """One sentence from the tool's result (module docstring)."""
    frames = FRAMES.get(tool)
    if frames is None or not isinstance(result, dict):
        return "I could not use that tool."
    frame = frames[1] if rng.random() < min(0.3, 0.1 * max(0.0, temperature)) else frames[0]
    return frame.format(**{k: _text(v) for k, v in result.items()})


def respond(messages: list[dict], temperature: float, rng: random.Random, request: dict | None = None) -> Any:
    """Answer one call of the assistant loop (module docstring).

    Raises:
        ValueError: a first call without ``tools`` (the loop always offers them).
    """
    u_flip = rng.random()
    tool_msgs = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    if tool_msgs:
        asked = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")]
        name = ((asked[-1]["tool_calls"][0].get("function") or {}).get("name")) if asked else None
        try:
            result = json.loads(tool_msgs[-1].get("content") or "null")
        except ValueError:
            result = None
        return phrase(name or "", result, temperature, rng)
    c = choose(last_user_text(messages))
    if c.ambiguous and u_flip < flip_probability(temperature):
        c = c.runner_up  # type: ignore[assignment]
    if c.tool is None:
        return NO_TOOL_REPLY
    if not (request or {}).get("tools"):
        raise ValueError("assistant request without tools")
    return [{"name": c.tool, "arguments": json.dumps(c.args, sort_keys=True)}]


def assistant_oracle(request: str) -> dict:
    """The noise-free tool choice: ``{"tool": name or None, "arguments": {...}}``."""
    c = choose(request)
    return {"tool": c.tool, "arguments": c.args}


__all__ = ["Choice", "FRAMES", "MARKER", "NO_TOOL_REPLY", "assistant_oracle", "choose", "phrase", "respond"]
