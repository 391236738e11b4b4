"""Dealing a harder held-out set: ``n`` distinct texts, the kinds dealt round-robin.

Shared by :mod:`bench.extraction.hard` and :mod:`bench.routing.hard`.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Sequence


def deal_distinct(n: int, rng: random.Random, kinds: Sequence[str], one: Callable[[random.Random, str], str],
                  make: Callable[[str, str], Any], what: str, exclude: set[str] | None = None) -> list[Any]:
    """``n`` items ``make(text, kind)``, the ``kinds`` dealt round-robin, each text ``one(rng,
    kind)`` distinct from the others and from ``exclude``.

    Raises:
        ValueError: ``n`` is negative, or ``n`` distinct texts were not found within
            ``100 n + 1000`` draws (``what`` names the texts in the message).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    seen = set(exclude or ())
    out: list[Any] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 100 * n + 1000:
            raise ValueError(f"could not generate {n} distinct hard {what} (got {len(out)})")
        kind = kinds[len(out) % len(kinds)]
        text = one(rng, kind)
        if text in seen:
            continue
        seen.add(text)
        out.append(make(text, kind))
    return out
