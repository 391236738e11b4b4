"""The inbox reference agent (tier-0): classify → look up the owning team → priority → summary.

An ordinary agent as its author would write it: three model calls through the official client
(classification and priority at temperature 0.3, the summary at 0.7), one tool call
(:func:`bench.inbox.tools.lookup_team`), light normalization of the labels. Auto only wraps it
with ``@auto.task("inbox")`` and ``@auto.tool``. The endpoint is the process-wide client of
:mod:`bench.triage.agent` (the embedded simulator unless ``OPENAI_BASE_URL`` is set).
"""

from __future__ import annotations

from typing import Any

import auto
from bench.inbox.tools import lookup_team
from bench.triage.agent import client, model_name

CLASSIFY_PROMPT = (
    "[auto-bench:inbox] step: classify. You are the intake desk of a support inbox. Read the ticket and "
    "answer with exactly one category: billing (charges, invoices, refunds, payments), technical (errors, "
    "crashes, bugs, pages not loading), account (passwords, log-in, profile, two-factor), shipping (packages, "
    "delivery, tracking), security (hacked accounts, phishing, unauthorized access, breaches). If several "
    "apply, security comes first, then billing, account, shipping, technical. Answer with the category only."
)
PRIORITY_PROMPT = (
    "[auto-bench:inbox] step: priority. Assign a priority to the support ticket. P1: a security incident, or "
    "anything urgent (the service is down, production is affected, 'urgent', 'asap', 'immediately', an "
    "emergency). P3: the customer says there is no rush, or it is a minor question. P2: everything else. "
    "Answer with P1, P2 or P3 only."
)
SUMMARY_PROMPT = "[auto-bench:inbox] step: summary. Summarize the support ticket in one short line for the agent who picks it up."
TEMPERATURES = {"classify": 0.3, "priority": 0.3, "summary": 0.7}


def normalize(reply: str | None) -> str:
    """A label reply as a label: strip, lower-case, drop a trailing period."""
    return (reply or "").strip().lower().rstrip(".").strip()


def _ask(prompt: str, ticket: str, temperature: float) -> Any:
    return client().chat.completions.create(model=model_name(), temperature=temperature,
                                            messages=[{"role": "system", "content": prompt},
                                                      {"role": "user", "content": ticket}])


def classify(ticket: str) -> str:
    """The category of ``ticket`` (one model call)."""
    return normalize(_ask(CLASSIFY_PROMPT, ticket, TEMPERATURES["classify"]).choices[0].message.content)


def prioritize(ticket: str) -> str:
    """The priority of ``ticket`` (one model call), ``P1`` / ``P2`` / ``P3``."""
    return normalize(_ask(PRIORITY_PROMPT, ticket, TEMPERATURES["priority"]).choices[0].message.content).upper()


def summary_content(ticket: str) -> str:
    """The summary model call's raw content (the step a compiled inbox keeps as a model call)."""
    return _ask(SUMMARY_PROMPT, ticket, TEMPERATURES["summary"]).choices[0].message.content or ""


def summarize(ticket: str) -> str:
    """A one-line summary of ``ticket`` (one model call)."""
    return summary_content(ticket).strip()


def ask(ticket: str) -> tuple[dict, None, dict[str, str]]:
    """The whole agent, unrecorded: ``(answer, None, {})`` (the family registry's ``ask``; a
    multi-step run has no single response to meter)."""
    return inbox.__wrapped__(ticket), None, {}  # type: ignore[attr-defined]


def ask(ticket: str) -> tuple[dict, None, dict[str, str]]:
    """The whole agent, unrecorded: ``(answer, None, {})`` (the family registry's ``ask``; a
    multi-step run has no single response to meter)."""
    return inbox.__wrapped__(ticket), None, {}  # type: ignore[attr-defined]


@auto.task("inbox")
def inbox(ticket: str) -> dict:
    """The recorded task: ``{"category", "team", "queue", "priority", "summary"}``."""
    category = classify(ticket)
    route = lookup_team(category)
    priority = prioritize(ticket)
    summary = summarize(ticket)
    return {"category": category, "team": route["team"], "queue": route["queue"], "priority": priority,
            "summary": summary}
