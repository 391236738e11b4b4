"""The routing reference agent (tier-0): one model call per purchase request → a decision.

An ordinary agent, written as its author would: a system prompt stating the approval policy,
the request as the user message, temperature 0.3, and light normalization of the reply (case,
surrounding whitespace, a trailing period). Auto only wraps it with ``@auto.task("routing")``.

The model endpoint is whatever the ``openai`` client is configured with (the process-wide client
of :mod:`bench.triage.agent`, shared by all bench agents): by default the embedded simulator; a
user with a real endpoint sets ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.
"""

from __future__ import annotations

from typing import Any

import auto
from bench.triage.agent import client, model_name, reset_client

__all__ = ["LABELS", "SYSTEM_PROMPT", "TEMPERATURE", "ask", "client", "decide_request", "model_name", "normalize",
           "reset_client", "route"]

LABELS = ("approve", "review", "reject")
SYSTEM_PROMPT = (
    "[auto-bench:routing] You route purchase requests under this policy, applied in order: "
    "a blocked vendor -> reject; an amount of $20,000 or more -> reject; an amount under $500 -> "
    "approve; a preferred vendor and an amount under $5,000 -> approve; anything else -> review. "
    "Answer with one word: " + ", ".join(LABELS) + "."
)
TEMPERATURE = 0.3


def normalize(reply: str | None) -> str:
    """Normalize a model reply to a label: strip, lower-case, drop a trailing period."""
    return (reply or "").strip().lower().rstrip(".").strip()


def _messages(request: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": request}]


def ask(request: str) -> tuple[str, Any, dict[str, str]]:
    """One reference call: ``(label, parsed response, response headers)`` (not recorded).

    Raises:
        openai.APIError: the endpoint failed (after the client's retries).
    """
    raw = client().chat.completions.with_raw_response.create(
        model=model_name(), temperature=TEMPERATURE, messages=_messages(request)
    )
    resp = raw.parse()
    return normalize(resp.choices[0].message.content), resp, dict(raw.headers)


def decide_request(request: str) -> str:
    """Route one request with the reference model (not recorded)."""
    resp = client().chat.completions.create(model=model_name(), temperature=TEMPERATURE, messages=_messages(request))
    return normalize(resp.choices[0].message.content)


@auto.task("routing")
def route(request: str) -> str:
    """The recorded task: a purchase request → one label of :data:`LABELS`."""
    return decide_request(request)
