"""The intents reference agent (tier-0): one model call per utterance through the official client.

An ordinary agent: a system prompt listing the intents (and ``out_of_scope``), the utterance as
the user message, temperature 0.3, the reply lower-cased and stripped. The client is the triage
agent's (:func:`bench.triage.agent.client`), configured from the environment, so the bench's
reference endpoint (the embedded simulator by default) serves both families.
"""

from __future__ import annotations

from typing import Any

import auto
from bench.intents import corpus
from bench.triage.agent import client, model_name

TEMPERATURE = 0.3
SYSTEM_PROMPT = (
    "[auto-bench:intents] You are the intent classifier of a home assistant. Classify the user's utterance "
    "into exactly one of these intents: " + ", ".join(corpus.labels()[:-1]) + ". If none of them fits, answer "
    f"{corpus.OUT_OF_SCOPE}. Answer with the intent only."
)


def normalize(reply: str | None) -> str:
    """Strip, lower-case and drop a trailing period."""
    return (reply or "").strip().lower().rstrip(".").strip()


def _messages(utterance: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": utterance}]


def ask(utterance: str) -> tuple[str, Any, dict[str, str]]:
    """One unrecorded reference call: ``(intent, parsed response, response headers)``."""
    raw = client().chat.completions.with_raw_response.create(model=model_name(), temperature=TEMPERATURE,
                                                             messages=_messages(utterance))
    resp = raw.parse()
    return normalize(resp.choices[0].message.content), resp, dict(raw.headers)


@auto.task("intents")
def classify_intent(utterance: str) -> str:
    """The recorded task: an utterance → one intent of the prompt's list (or ``out_of_scope``)."""
    resp = client().chat.completions.create(model=model_name(), temperature=TEMPERATURE, messages=_messages(utterance))
    return normalize(resp.choices[0].message.content)
