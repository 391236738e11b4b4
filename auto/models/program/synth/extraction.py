"""Text and number extraction: :class:`~auto.models.program.ast.Search` patterns built from the answers'
character-class shape and the literal contexts mined around them, optionally wrapped in
``Strip`` or ``ParseInt`` / ``ParseFloat`` / ``ParseMoney``."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from auto.models.program.interp import ascii_lower, ascii_upper, parse_float, parse_int

from .patterns import _lit
from .pool import _Part


def _cls(ch: str) -> str:
    if "A" <= ch <= "Z":
        return "A"
    if "a" <= ch <= "z":
        return "a"
    if "0" <= ch <= "9":
        return "9"
    return ch


_CLS_RX = {"A": "[A-Z]", "a": "[a-z]", "9": "\\d"}


def _runs(s: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for ch in s:
        c = _cls(ch)
        if out and out[-1][0] == c:
            out[-1] = (c, out[-1][1] + 1)
        else:
            out.append((c, 1))
    return out


def _quant(counts: list[int], mode: str) -> str:
    lo, hi = min(counts), max(counts)
    if mode == "plus":
        return "+"
    if lo == hi:
        return "" if lo == 1 else "{%d}" % lo
    if mode == "range" and hi <= 32:
        return "{%d,%d}" % (lo, hi)
    return "+"


def _common_prefix(strs: list[str]) -> str:
    if not strs:
        return ""
    p = strs[0]
    for s in strs[1:]:
        k = 0
        while k < len(p) and k < len(s) and p[k] == s[k]:
            k += 1
        p = p[:k]
    return p


def _class_union(strs: list[str]) -> str | None:
    chars = set("".join(strs))
    if not chars:
        return None
    parts = []
    if any("A" <= c <= "Z" for c in chars):
        parts.append("A-Z")
    if any("a" <= c <= "z" for c in chars):
        parts.append("a-z")
    if any("0" <= c <= "9" for c in chars):
        parts.append("0-9")
    other = sorted(c for c in chars if _cls(c) == c)
    dash = "-" in other
    for c in other:
        if c == "-":
            continue
        if ord(c) > 127:
            return None
        if c in "]\\^[":
            parts.append("\\" + c)
        elif c == "\n":
            parts.append("\\n")
        elif c == "\t":
            parts.append("\\t")
        else:
            parts.append(c)
    if dash:
        parts.append("\\-")
    return "[" + "".join(parts) + "]+"


def _shape_bodies(answers: list[str]) -> list[str]:
    """Body patterns matching every answer: literal prefix + class runs, a union class, generic."""
    bodies: list[str] = []
    if not answers:
        return bodies
    distinct = sorted(set(answers))
    if len(distinct) == 1:
        bodies.append(_lit(distinct[0]))
    prefix = _common_prefix(distinct)
    # keep the prefix up to the last non-alphanumeric char or class change (e.g. "ORD-" of "ORD-123")
    cut_points = [0]
    for k in range(1, len(prefix) + 1):
        if k == len(prefix) or _cls(prefix[k - 1]) != _cls(prefix[k]):
            cut_points.append(k)
    if len(distinct) > 1:
        cut_points = [k for k in cut_points if all(len(a) > k for a in distinct)] or [0]
    for k in sorted(set(cut_points)):
        lit, rests = prefix[:k], [a[k:] for a in distinct]
        sigs = {tuple(c for c, _ in _runs(r)) for r in rests}
        if len(sigs) == 1 and rests[0]:
            sig = next(iter(sigs))
            runs = [_runs(r) for r in rests]
            for mode in ("exact", "range", "plus"):
                parts = []
                for j, c in enumerate(sig):
                    counts = [rr[j][1] for rr in runs]
                    if c in _CLS_RX:
                        parts.append(_CLS_RX[c] + _quant(counts, mode))
                    elif len(set(counts)) == 1:
                        parts.append(_lit(c * counts[0]))
                    else:
                        parts.append(_lit(c) + "+")
                bodies.append(_lit(lit) + "".join(parts))
        union = _class_union(rests)
        if union is not None and all(rests):
            bodies.append(_lit(lit) + union)
    bodies += ["\\w+", "\\S+"]
    if not any("\n" in a for a in distinct):
        bodies.append("[^\\n]+")
    out, seen = [], set()
    for b in bodies:
        if b not in seen:
            seen.add(b)
            out.append(b)
    return out


def _is_word(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


def _mine_context(texts: list[str], occ: list[tuple[int, int]], side: str, limit: int, max_len: int,
                  min_share: float) -> list[str]:
    """Literal contexts on one ``side`` (``"left"``: before each occurrence's start, ``"right"``:
    after its end): for each length ``k``, the most frequent ``k``-character context, kept when
    it covers ``min_share`` of the occurrences and ends at a word boundary on its far side (so
    ``"Order ID: "`` rather than ``"der ID: "``); the most frequent first, at most ``limit``."""
    if not occ:
        return []
    m = len(occ)
    left = side == "left"
    found: list[tuple[int, int, str]] = []
    for k in range(1, max_len + 1):
        cnt: Counter = Counter()
        first: dict[str, tuple[int, int]] = {}
        for wi, at in occ:
            if (at >= k) if left else (at + k <= len(texts[wi])):
                s = texts[wi][at - k:at] if left else texts[wi][at:at + k]
                cnt[s] += 1
                first.setdefault(s, (wi, at))
        if not cnt:
            break
        s, c = min(cnt.items(), key=lambda kv: (-kv[1], kv[0]))
        if c < min_share * m:
            break
        wi, at = first[s]
        if left:
            edge, beyond = s[0], texts[wi][at - k - 1] if at - k - 1 >= 0 else ""
        else:
            edge, beyond = s[-1], texts[wi][at + k] if at + k < len(texts[wi]) else ""
        if k == 1 or not _is_word(edge) or not beyond or not _is_word(beyond):
            found.append((c, k, s))
    found.sort(key=lambda x: (-x[0], x[1]))
    out = []
    for _c, _k, s in found:
        if s not in out:
            out.append(s)
    return out[:limit]


def _mine_left(texts: list[str], occ: list[tuple[int, int]], limit: int = 10, max_len: int = 24,
               min_share: float = 0.5) -> list[str]:
    """Literal left contexts of the occurrences ``(witness, start)`` (:func:`_mine_context`)."""
    return _mine_context(texts, occ, "left", limit, max_len, min_share)


def _mine_right(texts: list[str], occ: list[tuple[int, int]], limit: int = 5, max_len: int = 8,
                min_share: float = 0.5) -> list[str]:
    """Literal right contexts of the occurrences ``(witness, end)`` (:func:`_mine_context`)."""
    return _mine_context(texts, occ, "right", limit, max_len, min_share)


def _enumerate_search(part: _Part, base: str, bodies: list[str], left_occ: list[tuple[int, int]],
                      right_occ: list[tuple[int, int]], wraps: list[str | None], kind: str) -> None:
    texts = part.texts if base == "field" else part.lower if base == "lower" else part.upper
    lefts = [("", False), ("\\b", False)] + [(_lit(s), True) for s in _mine_left(texts, left_occ)]
    stripped = [s for s in _mine_left(texts, left_occ) if s.endswith(" ") and s.strip()]
    lefts += [(_lit(s.rstrip(" ")) + "\\s*", True) for s in stripped[:2]]
    rights = [("", False), ("\\b", False), ("$", False)] + [(_lit(s), True) for s in _mine_right(texts, right_occ)]
    for body in bodies:
        for left, lcons in lefts:
            for right, rcons in rights:
                if part.budget.over():
                    return
                capture = lcons or rcons
                pattern = left + ("(" + body + ")" if capture else body) + right
                for wrap in wraps:
                    part.add_search(base, pattern, 1 if capture else 0, wrap, kind)


def _text_extraction(part: _Part) -> None:
    refs = part.refs
    nonnull = [(i, r) for i, r in enumerate(refs) if r is not None]
    if not nonnull or not all(isinstance(r, str) and r for _i, r in nonnull):
        return
    for base in ("field", "lower", "upper"):
        texts = part.texts if base == "field" else part.lower if base == "lower" else part.upper
        if base == "lower" and any(ascii_lower(r) != r for _i, r in nonnull):
            continue
        if base == "upper" and any(ascii_upper(r) != r for _i, r in nonnull):
            continue
        occ_l, occ_r, found = [], [], 0
        for i, r in nonnull:
            j = texts[i].find(r)
            if j >= 0:
                found += 1
                occ_l.append((i, j))
                occ_r.append((i, j + len(r)))
        if found < 0.5 * len(nonnull):
            continue
        if base == "upper" and all(r in part.texts[i] for i, r in nonnull):
            continue  # upper-casing adds nothing when the raw text already holds the answers
        answers = [r for _i, r in nonnull]
        bodies = _shape_bodies(answers)
        wraps: list[str | None] = [None]
        _enumerate_search(part, base, bodies, occ_l, occ_r, wraps, "search")
        # rest-of-line captures may carry surrounding spaces: Strip them
        _enumerate_search(part, base, ["[^\\n]+"], occ_l, occ_r, ["strip"], "search")
        if part.budget.over():
            return


_NUM_TOKEN = re.compile(r"-?\$?\d+(?:,\d{3})*(?:\.\d+)?", re.ASCII)


def _number_occurrences(text: str, ref: Any, wraps: list[str]) -> list[tuple[int, int, str]]:
    out = []
    for m in _NUM_TOKEN.finditer(text):
        s, e = m.span()
        while e > s and text[e - 1] == ",":
            e -= 1
        starts = [s]
        if text[s] == "-":
            starts.append(s + 1)
        if text[starts[-1]] == "$":
            starts.append(starts[-1] + 1)
        for st in starts:
            sub = text[st:e]
            for w in wraps:
                if w == "int":
                    v: Any = parse_int(sub)
                else:
                    fv = parse_float(sub, money=w == "money")
                    v = None if fv is None else fv.to_float()
                if v is not None and type(v) is type(ref) and v == ref:
                    out.append((st, e, w))
    return out


def _number_extraction(part: _Part) -> None:
    nonnull = [(i, r) for i, r in enumerate(part.refs) if r is not None]
    if not nonnull or not all(type(r) in (int, float) for _i, r in nonnull):
        return
    kinds = {type(r) for _i, r in nonnull}
    if len(kinds) != 1:
        return
    wraps = ["int"] if int in kinds else ["float", "money"]
    occ_l: dict[str, list[tuple[int, int]]] = {w: [] for w in wraps}
    occ_r: dict[str, list[tuple[int, int]]] = {w: [] for w in wraps}
    for i, r in nonnull:
        occs = _number_occurrences(part.texts[i], r, wraps)
        for w in wraps:
            mine = [o for o in occs if o[2] == w]
            if mine:
                # the first occurrence, preferring the one without a leading sign or "$"
                st, e, _w = min(mine, key=lambda o: (o[1], -o[0]))
                occ_l[w].append((i, st))
                occ_r[w].append((i, e))
    neg = any(r < 0 for _i, r in nonnull)
    sign = "-?" if neg else ""
    for w in wraps:
        if len(occ_l[w]) < 0.5 * len(nonnull):
            continue
        digits = ["\\d+", "\\d+(?:,\\d{3})*"] if w == "int" else [
            "\\d+(?:\\.\\d+)?", "\\d+(?:,\\d{3})*(?:\\.\\d+)?", "\\d+\\.\\d+", "\\d+(?:,\\d{3})*\\.\\d+"]
        bodies = [sign + d for d in digits]
        if w == "money":
            bodies = [sign + "\\$?" + d for d in digits] + bodies
        _enumerate_search(part, "field", bodies, occ_l[w], occ_r[w], [w], "number")
        if part.budget.over():
            return
