"""The assistant family's tools: small tables the bench ships, behind four ``@auto.tool`` functions.

=================  =======  =====================================================================
tool               effects  answers
=================  =======  =====================================================================
get_weather        read     ``{"city", "temp_c", "conditions"}`` from :data:`WEATHER` (an unknown
                            city: ``conditions: "unknown"``, ``temp_c: null``)
convert_currency   read     ``{"amount", "from_currency", "to_currency", "rate", "converted"}`` at
                            the fixed :data:`USD_RATES` (``converted`` rounded to 2 decimals)
lookup_order       read     ``{"order_id", "status", "eta"}`` from :func:`order_row`
cancel_order       effect   ``{"order_id", "cancelled", "message"}``; appends to :data:`LEDGER`
=================  =======  =====================================================================

Orders are a pure function of the id (a seeded draw per id), so two runs asking about the same
order get the same answer; ``cancel_order`` records every call in :data:`LEDGER` (the bench counts
effects there) without changing what later calls answer.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import threading
from typing import Iterator

import auto

WEATHER = {
    "Paris": (18, "sunny"), "London": (12, "rainy"), "Berlin": (15, "cloudy"), "Madrid": (27, "sunny"),
    "Rome": (24, "clear"), "Oslo": (4, "snowy"), "Tokyo": (21, "humid"), "Sydney": (19, "windy"),
    "Toronto": (9, "cloudy"), "Chicago": (7, "windy"), "Lisbon": (22, "sunny"), "Vienna": (14, "foggy"),
    "Dublin": (11, "drizzly"), "Athens": (29, "hot"), "Prague": (13, "overcast"), "Seoul": (17, "clear"),
}
USD_RATES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.0, "CHF": 0.88, "CAD": 1.36}
"""Units of each currency per US dollar (fixed for the bench)."""
STATUSES = ("processing", "shipped", "delivered", "in transit")
MONTHS = ("May", "June", "July")

LEDGER: list[dict] = []
"""Every ``cancel_order`` call, in order (``{"order_id"}``)."""
_LEDGER_LOCK = threading.Lock()
_CALLS: contextvars.ContextVar[list | None] = contextvars.ContextVar("assistant_tool_calls", default=None)


@contextlib.contextmanager
def capture_calls() -> Iterator[list]:
    """Inside the block, every tool call of this context is appended to the yielded list as
    ``{"tool", "arguments"}`` (the bench compares the reference's calls with the artifact's)."""
    calls: list = []
    token = _CALLS.set(calls)
    try:
        yield calls
    finally:
        _CALLS.reset(token)


def _log(tool: str, arguments: dict) -> None:
    calls = _CALLS.get()
    if calls is not None:
        calls.append({"tool": tool, "arguments": arguments})


def weather(city: str) -> dict:
    temp, cond = WEATHER.get(city, (None, "unknown"))
    return {"city": city, "temp_c": temp, "conditions": cond}


def convert(amount: float, from_currency: str, to_currency: str) -> dict:
    f, t = USD_RATES.get(from_currency), USD_RATES.get(to_currency)
    if f is None or t is None:
        return {"amount": amount, "from_currency": from_currency, "to_currency": to_currency, "rate": None,
                "converted": None}
    rate = round(t / f, 4)
    return {"amount": amount, "from_currency": from_currency, "to_currency": to_currency, "rate": rate,
            "converted": round(amount * rate, 2)}


def order_row(order_id: str) -> dict:
    """The order's status and delivery estimate (a seeded draw per id)."""
    h = int.from_bytes(hashlib.sha256(order_id.encode()).digest()[:4], "big")
    status = STATUSES[h % len(STATUSES)]
    eta = "delivered" if status == "delivered" else f"{MONTHS[(h >> 4) % 3]} {1 + (h >> 8) % 28}"
    return {"order_id": order_id, "status": status, "eta": eta}


def cancel(order_id: str) -> dict:
    row = order_row(order_id)
    ok = row["status"] == "processing"
    message = (f"order {order_id} is cancelled and will be refunded" if ok
               else f"order {order_id} is already {row['status']} and cannot be cancelled")
    return {"order_id": order_id, "cancelled": ok, "message": message}


@auto.tool("get_weather", effects="read")
def get_weather(city: str) -> dict:
    _log("get_weather", {"city": city})
    return weather(city)


@auto.tool("convert_currency", effects="read")
def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict:
    _log("convert_currency", {"amount": amount, "from_currency": from_currency, "to_currency": to_currency})
    return convert(amount, from_currency, to_currency)


@auto.tool("lookup_order", effects="read")
def lookup_order(order_id: str) -> dict:
    _log("lookup_order", {"order_id": order_id})
    return order_row(order_id)


@auto.tool("cancel_order", effects="effect")
def cancel_order(order_id: str) -> dict:
    _log("cancel_order", {"order_id": order_id})
    with _LEDGER_LOCK:
        LEDGER.append({"order_id": order_id})
    return cancel(order_id)


TOOL_FUNCTIONS = {"get_weather": get_weather, "convert_currency": convert_currency, "lookup_order": lookup_order,
                  "cancel_order": cancel_order}
"""The agent's tools by name (recorded; ``cancel_order`` is effectful)."""

CURRENCIES = sorted(USD_RATES)
TOOL_SCHEMAS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                     "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "convert_currency", "description": "Convert an amount of money.",
                                      "parameters": {"type": "object", "properties": {
                                          "amount": {"type": "number"},
                                          "from_currency": {"type": "string", "enum": CURRENCIES},
                                          "to_currency": {"type": "string", "enum": CURRENCIES}},
                                          "required": ["amount", "from_currency", "to_currency"],
                                          "additionalProperties": False}}},
    {"type": "function", "function": {"name": "lookup_order", "description": "Status of an order.",
                                      "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                                                     "required": ["order_id"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "cancel_order", "description": "Cancel an order (irreversible).",
                                      "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                                                     "required": ["order_id"], "additionalProperties": False}}},
]
"""The tools as the agent declares them to the model (OpenAI ``tools``)."""
