"""The invoice reference agent (tier-0): one simulated model call per invoice → a four-field record.

Written as its author would: the invoice text goes to the model with :data:`SYSTEM_PROMPT`, the
JSON reply is parsed. The model here is the simulated reference of
:mod:`bench.invoices.reference` (in process, seeded, labelled simulated in every report); Auto only
wraps the function with ``@auto.task("invoice")``.
"""

from __future__ import annotations

import json
import random
import threading

import auto
from bench.invoices.reference import SYSTEM_PROMPT, reference_reply

__all__ = ["SYSTEM_PROMPT", "calls", "extract", "invoice", "reseed"]

_LOCK = threading.Lock()
_RNG = random.Random(0)
_CALLS = [0]


def reseed(seed: int) -> None:
    """Restart the simulated reference's sampling (and its call count) from ``seed``."""
    with _LOCK:
        _RNG.seed(seed)
        _CALLS[0] = 0


def calls() -> int:
    """Reference calls made since the last :func:`reseed` (each one a paid model call)."""
    return _CALLS[0]


def extract(text: str) -> dict:
    """One reference call: the invoice's ``{"invoice_no", "total", "currency", "due_date"}``."""
    with _LOCK:
        _CALLS[0] += 1
        reply = reference_reply(text, _RNG)
    return json.loads(reply)


@auto.task("invoice")
def invoice(text: str) -> dict:
    """The recorded task: an invoice's text → its record."""
    return extract(text)
