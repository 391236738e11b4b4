"""The extraction reference agent (tier-0): one model call per customer email → a typed record.

An ordinary agent, written as its author would: a system prompt that names the four fields and
their values, the email as the user message, temperature 0.3, and a lenient parse of the reply
(a surrounding code fence, blank lines, key order and the case of the labels do not matter).
Auto only wraps it with ``@auto.task("extraction")``.

The model endpoint is whatever the ``openai`` client is configured with (the process-wide client
of :mod:`bench.triage.agent`, shared by all bench agents so one ``reset_client()`` re-points
them all): by default the embedded simulator; a user with a real endpoint sets
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (and optionally ``AUTO_REFERENCE_MODEL``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import auto
from auto.errors import ReferenceModelError
from bench.triage.agent import client, model_name, reset_client

__all__ = ["INTENTS", "SYSTEM_PROMPT", "TEMPERATURE", "URGENCIES", "ask", "client", "extract_fields", "extract_record",
           "model_name", "normalize", "reset_client"]

INTENTS = ("refund", "replacement", "status", "cancel", "other")
URGENCIES = ("high", "normal", "low")
SYSTEM_PROMPT = (
    "[auto-bench:extraction] You read customer emails for an online shop and extract a record. "
    "Reply with one JSON object only, with exactly these keys: "
    '"order_id" (the order id as written, like "ORD-12345", or null), '
    '"intent" (one of: ' + ", ".join(INTENTS) + "), "
    '"urgency" (one of: ' + ", ".join(URGENCIES) + "; urgent/immediately/ASAP/right away mean high, "
    "no rush/no hurry/whenever/when convenient mean low), "
    '"amount" (the first money amount mentioned, as a number such as 58.4, or null).'
)
TEMPERATURE = 0.3

_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.S)


def _label(value: Any) -> Any:
    return value.strip().lower().rstrip(".").strip() if isinstance(value, str) else value


def _amount(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return round(float(value), 2) if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip().lstrip("$€£").replace(",", "").strip()
        try:
            num = float(text)
        except ValueError:
            return None
        return round(num, 2) if math.isfinite(num) else None
    return None


def normalize(reply: str | None) -> dict[str, Any]:
    """Parse a model reply into the record ``{"order_id", "intent", "urgency", "amount"}``.

    Tolerated (form only): surrounding whitespace and blank lines, a Markdown code fence, a
    trailing period after the object, any key order, capitalized labels, an amount written as a
    string (``"$58.40"``). ``order_id`` is upper-cased (``None`` stays ``None``), ``intent`` and
    ``urgency`` lower-cased, ``amount`` a float rounded to cents or ``None``; missing keys
    become ``None``.

    Raises:
        ReferenceModelError: the reply is not a JSON object.
    """
    text = (reply or "").strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1).strip()
    if text.endswith("."):
        text = text[:-1].rstrip()
    try:
        obj = json.loads(text)
    except ValueError:
        raise ReferenceModelError(f"extraction reply is not JSON: {(reply or '')[:120]!r}") from None
    if not isinstance(obj, dict):
        raise ReferenceModelError(f"extraction reply is not a JSON object: {(reply or '')[:120]!r}")
    oid = obj.get("order_id")
    return {
        "order_id": oid.strip().upper() if isinstance(oid, str) and oid.strip() else None,
        "intent": _label(obj.get("intent")),
        "urgency": _label(obj.get("urgency")),
        "amount": _amount(obj.get("amount")),
    }


def _messages(email: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": email}]


def ask(email: str) -> tuple[dict[str, Any], Any, dict[str, str]]:
    """One reference call: ``(record, parsed response, response headers)`` (not recorded).

    The bench meters cost and latency from the response's usage and headers.

    Raises:
        ReferenceModelError: the reply is not a JSON object.
        openai.APIError: the endpoint failed (after the client's retries).
    """
    raw = client().chat.completions.with_raw_response.create(
        model=model_name(), temperature=TEMPERATURE, messages=_messages(email)
    )
    resp = raw.parse()
    return normalize(resp.choices[0].message.content), resp, dict(raw.headers)


def extract_record(email: str) -> dict[str, Any]:
    """Extract the record of one email with the reference model (not recorded)."""
    resp = client().chat.completions.create(model=model_name(), temperature=TEMPERATURE, messages=_messages(email))
    return normalize(resp.choices[0].message.content)


@auto.task("extraction")
def extract_fields(email: str) -> dict[str, Any]:
    """The recorded task: a customer email → ``{"order_id", "intent", "urgency", "amount"}``."""
    return extract_record(email)
