"""The triage reference agent (tier-0): one model call per ticket through the official client.

This is an ordinary agent, written as its author would: a system prompt listing the labels, the
ticket as the user message, temperature 0.3, and light normalization of the reply (case,
surrounding whitespace, a trailing period). Auto only wraps it with ``@auto.task``.

The model endpoint is whatever the ``openai`` client is configured with: by default the bench
starts the embedded simulator and points ``OPENAI_BASE_URL`` at it; a user with a real endpoint
sets ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (and optionally ``AUTO_REFERENCE_MODEL``).
"""

from __future__ import annotations

import os
from typing import Any

import openai

import auto

LABELS = ("billing", "bug", "feature", "account", "shipping", "security")
SYSTEM_PROMPT = (
    "[auto-bench:triage] You are a customer-support triage assistant. Classify the support "
    "ticket into exactly one of these labels: " + ", ".join(LABELS) + ". "
    "Answer with the label only."
)
TEMPERATURE = 0.3

_client: openai.OpenAI | None = None


def model_name() -> str:
    """The reference model name: ``AUTO_REFERENCE_MODEL`` or the simulator's ``auto-sim-1``."""
    return os.environ.get("AUTO_REFERENCE_MODEL", "auto-sim-1")


def client() -> openai.OpenAI:
    """A process-wide client built from the environment (max_retries=3: the SDK retries 5xx)."""
    global _client
    if _client is None:
        _client = openai.OpenAI(max_retries=3)
    return _client


def reset_client() -> None:
    """Forget the cached client (after the endpoint in the environment changed)."""
    global _client
    _client = None


def normalize(reply: str | None) -> str:
    """Normalize a model reply to a label: strip, lower-case, drop a trailing period."""
    return (reply or "").strip().lower().rstrip(".").strip()


def _messages(ticket: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ticket}]


def ask(ticket: str) -> tuple[str, Any, dict[str, str]]:
    """One reference call: ``(label, parsed response, response headers)`` (not recorded).

    The bench meters cost and latency from the response's usage and headers.
    """
    raw = client().chat.completions.with_raw_response.create(
        model=model_name(), temperature=TEMPERATURE, messages=_messages(ticket)
    )
    resp = raw.parse()
    return normalize(resp.choices[0].message.content), resp, dict(raw.headers)


def classify(ticket: str) -> str:
    """Classify one ticket with the reference model (not recorded)."""
    resp = client().chat.completions.create(model=model_name(), temperature=TEMPERATURE, messages=_messages(ticket))
    return normalize(resp.choices[0].message.content)


@auto.task("triage")
def triage(ticket: str) -> str:
    """The recorded task: a support ticket → one label of :data:`LABELS`."""
    return classify(ticket)
