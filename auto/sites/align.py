"""Aligning the values of one text leaf across recorded requests: fixed text and slots.

A leaf template is a tuple of parts, each a fixed string or :data:`SLOT`; the text it matches is
the concatenation of its parts with any text in each slot. :func:`align` finds it from the
distinct values a leaf took:

1. fewer than :data:`MIN_ALIGN_VALUES` distinct values: the whole leaf is one slot (too few
   values to tell a template's fixed text from a coincidence);
2. otherwise a progressive alignment over a deterministic sample of at most
   :data:`MAX_ALIGN_VALUES` values: each value is split into tokens (runs of word characters,
   runs of whitespace, single other characters), and the template so far is aligned with it by
   :class:`difflib.SequenceMatcher` (longest matching blocks, no junk heuristic); tokens of the
   template that every value matched stay fixed, everything else becomes a slot;
3. fixed runs with fewer than :data:`MIN_FIXED_WORD_CHARS` word characters are folded into the
   slots beside them (a single space or a comma shared by every value is no template text);
4. the template must match every distinct value (:func:`extract`), else the leaf falls back to
   one slot.

Extraction (:func:`extract`) matches the parts left to right: each fixed part at its first
occurrence after the previous part (the last fixed part of a leaf that ends in fixed text at the
end), the slots take what lies between. Rendering the parts with the extracted slot values gives
back the text exactly, so a leaf's text and its slot values determine each other.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from typing import Callable, Sequence

SLOT = None
"""A slot in a leaf template."""

Parts = tuple  # tuple[str | None, ...]

MIN_ALIGN_VALUES = 8
"""Distinct values a leaf needs before its fixed text is searched for."""

MAX_ALIGN_VALUES = 64
"""At most this many distinct values (chosen by their sha-256, so the choice does not depend on
arrival order) are aligned; the template is then checked against every value."""

MAX_ALIGN_CHARS = 20_000
"""A leaf with a longer value is one slot (the alignment's cost grows with the square of the
length in the worst case)."""

MIN_FIXED_WORD_CHARS = 3
"""A fixed run between slots needs at least this many word characters to stay fixed."""

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
_WORD = re.compile(r"\w")


class _Slot:
    """A token that matches nothing (stands for a slot during the alignment)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)


def tokens(text: str) -> list[str]:
    """``text`` split into runs of word characters, runs of whitespace and single other characters."""
    return _TOKEN.findall(text)


def _sample(values: Sequence[str]) -> list[str]:
    return sorted(set(values), key=sample_key)[:MAX_ALIGN_VALUES]


def _fold(seq: list) -> Parts:
    """Tokens and slot markers → parts: adjacent fixed tokens joined, adjacent slots merged."""
    parts: list = []
    for t in seq:
        if isinstance(t, _Slot) or t is SLOT:
            if not parts or parts[-1] is not SLOT:
                parts.append(SLOT)
        elif parts and parts[-1] is not SLOT:
            parts[-1] += t
        else:
            parts.append(t)
    return tuple(parts)


def _align_two(template: list, value: list[str]) -> list:
    sm = difflib.SequenceMatcher(None, template, value, autojunk=False)
    out: list = []
    ai = bi = 0
    slot = _Slot()
    for a0, b0, size in sm.get_matching_blocks():
        if a0 > ai or b0 > bi:
            out.append(slot)
        out.extend(template[a0:a0 + size])
        ai, bi = a0 + size, b0 + size
    return out


def _drop_weak_fixed(parts: Parts) -> Parts:
    """Fold fixed runs with too few word characters into the neighbouring slots (a leaf that is
    wholly fixed keeps its text)."""
    if SLOT not in parts:
        return parts
    kept = [p if p is SLOT or len(_WORD.findall(p)) >= MIN_FIXED_WORD_CHARS else SLOT for p in parts]
    return _fold(kept)


def sample_key(value: str) -> bytes:
    """The order in which distinct values are sampled for alignment: their SHA-256 (of UTF-8)."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()


def template_candidate(distinct: int, longest: int, only: str | None, sample: Sequence[str]) -> tuple[Parts, bool]:
    """:func:`leaf_template` up to its last step: ``(parts, check)`` — the template, and whether
    it holds only if every distinct value fits it (else the leaf is ``(SLOT,)``)."""
    if distinct == 1:
        return (only,), False
    if distinct < MIN_ALIGN_VALUES or longest > MAX_ALIGN_CHARS:
        return (SLOT,), False
    template: list = tokens(sample[0])
    for v in sample[1:]:
        template = _align_two(template, tokens(v))
        if not any(isinstance(t, str) for t in template):
            return (SLOT,), False
    parts = _drop_weak_fixed(_fold(template))
    if parts == (SLOT,):
        return parts, False
    return parts, True


def leaf_template(distinct: int, longest: int, only: str | None, sample: Sequence[str],
                  fits_all: Callable[[Parts], bool]) -> Parts:
    """The leaf template of a leaf from what is known of its distinct values (:func:`align`
    computes these from the values themselves; a database can compute them in SQL).

    Args:
        distinct: how many distinct values the leaf took (≥ 1).
        longest: the length (characters) of its longest value.
        only: its value when ``distinct`` is 1.
        sample: its distinct values with the :data:`MAX_ALIGN_VALUES` smallest
            :func:`sample_key`, in that order (read only when ``distinct`` ≥
            :data:`MIN_ALIGN_VALUES` and ``longest`` ≤ :data:`MAX_ALIGN_CHARS`).
        fits_all: ``fits_all(parts)`` — whether every distinct value fits ``parts`` (:func:`extract`).
    """
    parts, check = template_candidate(distinct, longest, only, sample)
    if check and not fits_all(parts):
        return (SLOT,)
    return parts


def align(values: Sequence[str] | set[str]) -> Parts:
    """The leaf template of ``values`` (the texts one leaf took; see the module docstring).

    Returns:
        ``(text,)`` when every value is the same; ``(SLOT,)`` when nothing is fixed or too few
        values were seen; otherwise fixed strings and slots, e.g. ``("Ticket: ", SLOT, "\\nReply
        with one label.")``.

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("align needs at least one value")
    distinct = set(values)
    longest = max(len(v) for v in distinct)
    need_sample = len(distinct) >= MIN_ALIGN_VALUES and longest <= MAX_ALIGN_CHARS
    return leaf_template(len(distinct), longest, next(iter(distinct)), _sample(list(distinct)) if need_sample else [],
                         lambda parts: all(extract(parts, v) is not None for v in distinct))


def extract(parts: Parts, text: str) -> list[str] | None:
    """The slot values of ``text`` under the leaf template ``parts`` (in order), or None when the
    text does not fit (a fixed part missing, or text outside the slots)."""
    values: list[str] = []
    pos = 0
    n = len(parts)
    for i, p in enumerate(parts):
        if p is SLOT:
            continue
        if i == 0:
            if not text.startswith(p):
                return None
            pos = len(p)
            continue
        if i == n - 1:  # the last part is fixed: it ends the text
            if not text.endswith(p) or len(text) - len(p) < pos:
                return None
            at = len(text) - len(p)
        else:
            at = text.find(p, pos)
            if at < 0:
                return None
        if parts[i - 1] is SLOT:
            values.append(text[pos:at])
        elif at != pos:
            return None
        pos = at + len(p)
    if parts and parts[-1] is SLOT:
        values.append(text[pos:])
    elif pos != len(text):
        return None
    return values


def render(parts: Parts, values: Sequence[str]) -> str:
    """The text of ``parts`` with ``values`` in its slots (the inverse of :func:`extract`).

    Raises:
        ValueError: the number of values is not the number of slots.
    """
    it = iter(values)
    out = []
    try:
        for p in parts:
            out.append(next(it) if p is SLOT else p)
    except StopIteration:
        raise ValueError(f"{sum(1 for p in parts if p is SLOT)} slots, fewer values given") from None
    if next(it, None) is not None:
        raise ValueError("more values than slots")
    return "".join(out)
