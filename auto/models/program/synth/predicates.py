"""The predicates decision lists are learned over: keyword containment and word-bounded matches on
``Lower(field)``, and numeric thresholds over extracted numbers, with their training masks (bit
``i`` = witness ``i``)."""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from auto.models.program import ast as A
from auto.models.program.interp import parse_float
from auto.models.program.values import FLOAT_SCALE

from .extraction import _NUM_TOKEN, _is_word
from .mdl import _sig_digits, description_length
from .patterns import _lit, _rx
from .pool import _Part

_WORD = re.compile(r"[a-z0-9]+", re.ASCII)
_NUM_BODY = "-?\\$?\\d+(?:,\\d{3})*(?:\\.\\d+)?"
"""A number as written in text: digits with comma thousands groups (a comma that ends the number,
as in "$176,100, a supplier", is punctuation, not part of it), optional decimals."""
_DIGITS_BODY = "\\d+(?:,\\d{3})*(?:\\.\\d+)?"
"""The same without sign or currency (after a mined context that ends with ``$``)."""
_LAST = "(?:.|\\n)*"
"""A greedy prefix: before a pattern, it makes the search find the pattern's last occurrence."""


@dataclass
class _Pred:
    node: A.Node
    mask: int
    size: float
    text: str
    neg_ok: bool = False
    thr: tuple[Any, str] | None = None  # (extractor, op) of a threshold predicate


def _popcount(x: int) -> int:
    return x.bit_count()


def _mask(bools: list[bool]) -> int:
    m = 0
    for i, b in enumerate(bools):
        if b:
            m |= 1 << i
    return m


def _bits(mask: int, n: int) -> np.ndarray:
    """A witness mask as a boolean array of length ``n`` (bit ``i`` -> element ``i``)."""
    raw = np.frombuffer(mask.to_bytes((n + 7) // 8 or 1, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:n].astype(bool)


def _keyword_preds(part: _Part, min_support: int) -> list[_Pred]:
    """Keyword and word-bounded predicates mined from the lowered texts (cached per synthesis: they
    depend on the texts and ``min_support`` only)."""
    key = ("keyword_preds", min_support)
    if key not in part.shared:
        part.shared[key] = _mine_keyword_preds(part, min_support)
    return part.shared[key]


def _mine_keyword_preds(part: _Part, min_support: int) -> list[_Pred]:
    lowered = part.lower
    low = A.Lower(A.Field(part.field))
    df: Counter = Counter()
    phrases: Counter = Counter()
    for t in lowered:
        # pure numbers are left to the thresholds: as keywords they only memorize amounts and dates
        toks = [(m.group(), m.start(), m.end()) for m in _WORD.finditer(t) if not m.group().isdigit()]
        words = {w for w, _s, _e in toks if len(w) >= 2}
        df.update(words)
        ph = set()
        for n in (2, 3):
            for j in range(len(toks) - n + 1):
                s, e = toks[j][1], toks[j + n - 1][2]
                gaps_ok = all(0 < toks[j + q + 1][1] - toks[j + q][2] <= 2
                              and not any(ch.isdigit() for ch in t[toks[j + q][2]:toks[j + q + 1][1]])
                              for q in range(n - 1))
                if gaps_ok:
                    ph.add(t[s:e])
        phrases.update(ph)
    n = part.n
    preds: list[_Pred] = []
    cands = [w for w, c in df.items() if min_support <= c < n]
    cands += [p for p, c in phrases.items() if min_support <= c < n]
    for w in sorted(set(cands)):
        mask = _mask([w in t for t in lowered])
        c = _popcount(mask)
        if c < min_support or c == n:
            continue
        node = A.Contains(low, w)
        preds.append(_Pred(node, mask, description_length(node), repr(node), neg_ok=True))
        if len(w) <= 5 and w.isalnum():
            rx = re.compile(r"\b" + re.escape(w) + r"\b", re.ASCII)
            wmask = _mask([rx.search(t) is not None for t in lowered])
            if wmask != mask and _popcount(wmask) >= min_support:
                wnode = A.Not(A.IsNull(A.Search(low, "\\b" + _lit(w) + "\\b")))
                preds.append(_Pred(wnode, wmask, description_length(wnode), repr(wnode), neg_ok=True))
    return preds


def _number_extractors(part: _Part) -> list[_Extractor]:
    """Numeric features ``ParseMoney(Search(field, <context>(number), 1))`` for mined contexts."""
    texts = part.texts
    occ: list[tuple[int, int]] = []
    for i, t in enumerate(texts):
        for m in _NUM_TOKEN.finditer(t):
            occ.append((i, m.start()))
            d = m.start()
            while t[d] in "-$":
                d += 1
            if d != m.start():  # also the context that ends with the sign or currency ("$")
                occ.append((i, d))
    if not occ:
        return []
    # contexts are counted per text (a context before several numbers of one text counts once)
    cnt: Counter = Counter()
    for k in range(1, 17):
        seen: set[tuple[int, str]] = set()
        for i, s in occ:
            if s >= k:
                ctx = texts[i][s - k:s]
                before = texts[i][s - k - 1] if s - k - 1 >= 0 else ""
                if k == 1 or not _is_word(ctx[0]) or not before or not _is_word(before):
                    seen.add((i, ctx))
        for _i, ctx in seen:
            cnt[ctx] += 1
    ctxs = [c for c, k in sorted(cnt.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0])) if k >= 0.3 * part.n]
    patterns = ["(" + _NUM_BODY + ")"] + [_lit(c) + "(" + (_DIGITS_BODY if c.endswith("$") else _NUM_BODY) + ")"
                                         for c in ctxs[:8]]
    # the last occurrence as well as the first (a greedy prefix), for the two commonest contexts
    patterns += [_LAST + p for p in patterns[1:3]]
    out: list[_Extractor] = []
    seen_vals: set[tuple] = set()
    for p in patterns:
        rx = _rx(p)
        vals: list[int | None] = []
        for t in texts:
            m = rx.search(t)
            v = parse_float(m.group(1), money=True) if m else None
            vals.append(None if v is None else int(v))
        key = tuple(vals)
        if key in seen_vals or sum(v is not None for v in vals) < 0.3 * part.n:
            continue
        seen_vals.add(key)
        out.append(_Extractor(A.ParseMoney(A.Search(A.Field(part.field), p, 1)), vals))
    return out


@lru_cache(maxsize=65536)
def _roundest(lo: int, hi: int, lo_open: bool, hi_open: bool) -> int | None:
    """The number with the fewest significant digits in the interval, in ten-thousandths (the
    DSL's float resolution): steps 10^e, 5·10^(e-1), 2·10^(e-1) from 10^18 units down to 1 unit;
    the smallest multiple of the first step that fits."""
    for e in range(18, -1, -1):
        p = 10 ** e
        for step in (p, p // 2, p // 5) if e else (1,):
            if step <= 0:
                continue
            cand = -(-lo // step) * step
            if lo_open and cand == lo:
                cand += step
            if cand < hi or (not hi_open and cand == hi):
                return cand
    return None


def _const_number(units: int) -> int | float:
    """A threshold in ten-thousandths as a DSL constant (an int when whole)."""
    if units % FLOAT_SCALE == 0:
        return units // FLOAT_SCALE
    return units / FLOAT_SCALE


class _Extractor:
    """A numeric feature over the training witnesses (values in ten-thousandths), with suffix
    masks over the sorted values for fast thresholding and the sorted values as arrays (``idx``:
    witness index, ``vs``: value; shape ``(non-null witnesses,)``) for fitting thresholds."""

    def __init__(self, node: A.Node, vals: list[int | None]):
        self.node = node
        self.vals = vals
        order = sorted((v, i) for i, v in enumerate(vals) if v is not None)
        self.idx = np.array([i for _v, i in order], dtype=np.int64)
        self.vs = np.array([v for v, _i in order], dtype=np.int64)
        self.sorted_vals = [v for v, _i in order]
        self.suffix = [0] * (len(order) + 1)
        for j in range(len(order) - 1, -1, -1):
            self.suffix[j] = self.suffix[j + 1] | (1 << order[j][1])
        self.nonnull = self.suffix[0]
        self.size = description_length(node)
        self.text = repr(node)

    def threshold(self, op: str, theta: int | float, mask: int) -> "_Pred":
        """The predicate ``Compare(op, node, theta)`` with its training ``mask`` (its size and
        text are composed without walking the tree: they are needed for many thresholds)."""
        node = A.Compare(op, self.node, theta)
        return _Pred(node, mask, 1 + 0.1 * _sig_digits(theta) + self.size,
                     f"Compare(op={op!r}, x={self.text}, value={theta!r})", thr=(self, op))

    def at_least(self, q: int, strict: bool) -> int:
        j = (bisect.bisect_right if strict else bisect.bisect_left)(self.sorted_vals, q)
        return self.suffix[j]


def _split_preds(base: int, extractors: list[_Extractor], lm: int, min_support: int, n: int,
                 tol: float = 1.0) -> list[_Pred]:
    """Thresholds that purify the witnesses of ``base`` (a mask) for one label (mask ``lm``):
    for each extractor the witnesses are sorted by value, and the best prefix (``x < θ``) and the
    best suffix (``x >= θ``) by Laplace precision, then positives, are kept, θ being the roundest
    number in the gap between the last value inside and the first value outside (ties: the
    earliest gap); a side whose precision within ``base`` is below ``1 - tol`` is dropped.
    Returns threshold predicates over all witnesses (to be used alone, when ``base`` is every
    remaining witness, or conjoined with the predicate that gave ``base``)."""
    out: list[_Pred] = []
    if _popcount(base & lm) < min_support:
        return out
    live = [ex for ex in extractors  # cheap integer tests first: enough values, enough positives
            if _popcount(base & ex.nonnull) >= min_support + 1 and _popcount(base & lm & ex.nonnull) >= min_support]
    if not live:
        return out
    base_bits, lab_bits = _bits(base, n), _bits(lm, n)
    for ex in live:
        keep = base_bits[ex.idx]
        vs = ex.vs[keep]
        if len(vs) < min_support + 1:
            continue
        cs = np.cumsum(lab_bits[ex.idx][keep], dtype=np.int64)
        total = int(cs[-1])
        if total < min_support:
            continue
        js = np.nonzero(vs[1:] != vs[:-1])[0] + 1  # gaps: prefix vs[:j], suffix vs[j:]
        if not len(js):
            continue
        below = cs[js - 1]
        for op, tp, c in (("lt", below, js), ("ge", total - below, len(vs) - js)):
            ok = (tp >= min_support) & (tp >= (1 - tol) * c - 1e-9)
            if not ok.any():
                continue
            lap = np.where(ok, (tp + 1) / (c + 2), -1.0)
            cand = np.nonzero(lap == lap.max())[0]
            k = cand[np.argmax(tp[cand])]  # the most positives; argmax takes the earliest gap
            j = int(js[k])
            q = _roundest(int(vs[j - 1]), int(vs[j]), lo_open=True, hi_open=False)
            if q is None:
                continue
            hi = ex.at_least(q, strict=False)
            out.append(ex.threshold(op, _const_number(q), hi if op == "ge" else ex.nonnull & ~hi))
    return out
