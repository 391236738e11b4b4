"""A pinned price table for model calls, in µ$ (millionths of a US dollar) per token.

A price of ``$X per 1M tokens`` is exactly ``X µ$ per token``, so the table below reads like the
vendor's page. Costs are computed **only from usage the API reported** (``prompt_tokens``,
``completion_tokens``, ``prompt_tokens_details.cached_tokens``), never from anything the agent
claims; if usage is unknown (a stream without ``include_usage``) or the model is not in the
table, the cost is ``None`` ("unknown"), never 0.

Sources (prices pinned, not fetched at run time):

* OpenAI API pricing, https://openai.com/api/pricing/ and
  https://platform.openai.com/docs/pricing, standard (non-batch) tier, as listed in
  August 2025 (:data:`PRICES_AS_OF`). Reasoning tokens are part of ``completion_tokens`` and
  billed as output. Cached input applies to ``prompt_tokens_details.cached_tokens``.
* ``auto-sim-1`` (the embedded simulator, :mod:`auto.sim`) is priced like ``gpt-4o``
  ($2.50/M input, $1.25/M cached input, $10.00/M output) by Auto's own convention, so
  simulated runs report the cost the same workload would have had on a comparable real model.

Model names resolve exactly, or by stripping a dated snapshot suffix (``-2024-08-06`` or
``-0125``): ``gpt-4o-2024-11-20`` → ``gpt-4o``. Other variants (``gpt-4o-realtime-preview``,
fine-tunes ``ft:...``) are unknown → ``None``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping

PRICES_AS_OF = "2025-08"
PRICE_SOURCE = "https://openai.com/api/pricing/ (standard tier, as listed 2025-08)"


@dataclass(frozen=True)
class Price:
    """Per-token prices in µ$ (= $ per 1M tokens). ``cached_input`` None: no cache discount."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    source: str = PRICE_SOURCE


def _p(inp: str, out: str, cached: str | None = None, source: str = PRICE_SOURCE) -> Price:
    return Price(Decimal(inp), Decimal(out), None if cached is None else Decimal(cached), source)


PRICES: dict[str, Price] = {
    # model:               input   output  cached input   (µ$ per token = $ per 1M tokens)
    "gpt-5":               _p("1.25", "10.00", "0.125"),
    "gpt-5-mini":          _p("0.25", "2.00", "0.025"),
    "gpt-5-nano":          _p("0.05", "0.40", "0.005"),
    "gpt-4.1":             _p("2.00", "8.00", "0.50"),
    "gpt-4.1-mini":        _p("0.40", "1.60", "0.10"),
    "gpt-4.1-nano":        _p("0.10", "0.40", "0.025"),
    "gpt-4o":              _p("2.50", "10.00", "1.25"),
    "gpt-4o-2024-05-13":   _p("5.00", "15.00"),
    "gpt-4o-mini":         _p("0.15", "0.60", "0.075"),
    "o1":                  _p("15.00", "60.00", "7.50"),
    "o1-mini":             _p("1.10", "4.40", "0.55"),
    "o3":                  _p("2.00", "8.00", "0.50"),
    "o3-mini":             _p("1.10", "4.40", "0.55"),
    "o4-mini":             _p("1.10", "4.40", "0.275"),
    "gpt-4-turbo":         _p("10.00", "30.00"),
    "gpt-4":               _p("30.00", "60.00"),
    "gpt-3.5-turbo":       _p("0.50", "1.50"),
    "auto-sim-1":          _p("2.50", "10.00", "1.25",
                              source="Auto convention: priced like gpt-4o (" + PRICE_SOURCE + ")"),
}
"""Pinned prices, µ$ per token. See the module docstring for sources and date."""

_SNAPSHOT = re.compile(r"^(?P<base>.+?)-(?:\d{4}-\d{2}-\d{2}|\d{4})$")


def price_for(model: str | None) -> Price | None:
    """The :class:`Price` of ``model`` (exact name or dated snapshot of a listed name), or None."""
    if not model:
        return None
    if model in PRICES:
        return PRICES[model]
    m = _SNAPSHOT.match(model)
    if m and m.group("base") in PRICES:
        return PRICES[m.group("base")]
    return None


@functools.lru_cache(maxsize=4096)
def cost_usd_micros(
    model: str | None,
    input_tokens: int | None,
    output_tokens: int | None,
    cached_input_tokens: int | None = 0,
) -> float | None:
    """Cost of one call in µ$ from reported token counts, or None when it cannot be known.

    Args:
        model: the model name (prefer the response's ``model``; snapshots resolve).
        input_tokens: ``usage.prompt_tokens`` (includes cached tokens), None if unreported.
        output_tokens: ``usage.completion_tokens`` (includes reasoning tokens), None if unreported.
        cached_input_tokens: ``usage.prompt_tokens_details.cached_tokens`` (None → 0).

    Returns:
        µ$ as a float (exact to the table's precision), or None if the model is unknown or
        either token count is None. Cached per arguments (the table is fixed; a call's counts
        repeat).
    """
    price = price_for(model)
    if price is None or input_tokens is None or output_tokens is None:
        return None
    cached = min(int(cached_input_tokens or 0), int(input_tokens))
    cached_price = price.cached_input if price.cached_input is not None else price.input
    total = (Decimal(int(input_tokens) - cached) * price.input
             + Decimal(cached) * cached_price
             + Decimal(int(output_tokens)) * price.output)
    return float(total)


def usage_tokens(usage: Mapping[str, Any] | None) -> tuple[int | None, int | None, int | None]:
    """``(input, output, cached_input)`` token counts from an OpenAI ``usage`` object, or Nones."""
    if not usage:
        return None, None, None
    inp = usage.get("prompt_tokens", usage.get("input_tokens"))
    out = usage.get("completion_tokens", usage.get("output_tokens"))
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    as_int = lambda v: v if isinstance(v, int) and not isinstance(v, bool) else None  # noqa: E731
    return as_int(inp), as_int(out), as_int(cached)


def cost_from_usage(model: str | None, usage: Mapping[str, Any] | None) -> float | None:
    """:func:`cost_usd_micros` of a reported ``usage`` object (None when usage is absent)."""
    inp, out, cached = usage_tokens(usage)
    return cost_usd_micros(model, inp, out, cached or 0)
