"""Reading OpenAI chat-completions messages: the text of a message and of the prompt's parts.

A message is a dict with a ``role`` and a ``content`` that is a string or a list of content
parts (``{"type": "text", "text": ...}``; other parts carry no text). Used by the simulator and
by the families' simulated responders.
"""

from __future__ import annotations

from typing import Any


def message_text(content: Any) -> str:
    """The text of a message's ``content``: the string itself, the ``text`` of its content parts
    joined by single spaces, or ``""`` for anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def system_text(messages: list[Any]) -> str:
    """The text of every ``system`` and ``developer`` message, joined by single spaces."""
    return " ".join(message_text(m.get("content")) for m in messages
                    if isinstance(m, dict) and m.get("role") in ("system", "developer"))


def last_user_text(messages: list[Any]) -> str:
    """The text of the last ``user`` message (``""`` when there is none)."""
    users = [message_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return users[-1] if users else ""
