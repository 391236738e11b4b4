"""Template synthesis: a text built from constants and values the region already has.

Given, for each example, the target text and the values available (name -> text as it would be
rendered in a template: :func:`auto.models.region.render_value`), :func:`synthesize_template` cuts every
target into constant pieces and value references — the occurrences of available values, longest
first, at least :data:`MIN_SLOT_CHARS` characters, never overlapping — and keeps the template
most examples share. It returns that template and the share of examples it reproduces exactly;
the caller decides whether that is enough (and the region gate measures it on held-out runs).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

MIN_SLOT_CHARS = 2
"""Values shorter than this are never cut out of a text (they occur anywhere by chance)."""

Parts = tuple[tuple[str, str], ...]


def cut(target: str, slots: dict[str, str]) -> Parts:
    """``target`` as ``("text", s)`` / ``("var", name)`` parts: occurrences of the slot values,
    longest value first (ties: the name order of ``slots``), leftmost, non-overlapping."""
    order = sorted((v, i, name) for i, (name, v) in enumerate(slots.items()) if len(v) >= MIN_SLOT_CHARS)
    order.sort(key=lambda t: (-len(t[0]), t[1]))
    taken: list[tuple[int, int, str]] = []
    for value, _i, name in order:
        start = 0
        while True:
            k = target.find(value, start)
            if k < 0:
                break
            end = k + len(value)
            if all(end <= a or k >= b for a, b, _ in taken):
                taken.append((k, end, name))
            start = k + 1
    taken.sort()
    parts: list[tuple[str, str]] = []
    pos = 0
    for a, b, name in taken:
        if a > pos:
            parts.append(("text", target[pos:a]))
        parts.append(("var", name))
        pos = b
    if pos < len(target):
        parts.append(("text", target[pos:]))
    return tuple(parts)


def fill(parts: Parts, slots: dict[str, str]) -> str | None:
    """The text of a template for these slot values (None when a referenced value is missing)."""
    out = []
    for kind, p in parts:
        if kind == "text":
            out.append(p)
        elif p in slots:
            out.append(slots[p])
        else:
            return None
    return "".join(out)


def synthesize_template(targets: Sequence[str], slots: Sequence[dict[str, str]],
                        alternatives: Sequence[Sequence[tuple[str, dict[str, str]]]] | None = None
                        ) -> tuple[Parts | None, float]:
    """The template most examples share and the share of examples it reproduces.

    Args:
        targets, slots: one target text and its slot values per example.
        alternatives: per example, every ``(target, slots)`` that counts as reproducing it (an
            input whose runs tied between several texts); default: the example itself.

    Returns:
        ``(parts, share)``; ``(None, 0.0)`` when there are no examples or no template uses a value.
    """
    if not targets:
        return None, 0.0
    alts = alternatives if alternatives is not None else [[(t, s)] for t, s in zip(targets, slots)]
    counts = Counter(cut(t, s) for t, s in zip(targets, slots))
    best = None
    best_share = 0.0
    for parts, _n in counts.most_common(5):
        if not any(k == "var" for k, _ in parts):
            continue
        share = sum(1 for a in alts if any(fill(parts, s) == t for t, s in a)) / len(alts)
        if share > best_share:
            best, best_share = parts, share
    return best, best_share


__all__ = ["MIN_SLOT_CHARS", "Parts", "cut", "fill", "synthesize_template"]
