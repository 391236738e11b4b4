"""Program synthesis: witnessed ``(input, answer)`` pairs -> a DSL program (:mod:`auto.extract.ast`).

:func:`synthesize` searches the DSL bottom-up from what the witnesses show, never by blind
enumeration of trees:

- **records** (every answer an object with the same keys): one search per key, joined into a
  :class:`~auto.extract.ast.Record`;
- **extraction** (text answers that occur in the input, possibly after ASCII lower/upper-casing,
  and ``null`` where nothing should be found): :class:`~auto.extract.ast.Search` patterns built
  from the answers' character-class shape (literal common prefixes such as ``ORD-``, class runs
  such as ``[A-Z]+-\\d+`` or ``\\d{5}``, a union class) and from the text around them (mined
  literal left/right contexts, ``\\b``, ``$``), optionally wrapped in ``Strip``;
- **numbers**: ``ParseInt`` / ``ParseFloat`` / ``ParseMoney`` of a ``Search`` capture of
  number-shaped text with mined left/right contexts;
- **categorical answers** (a few distinct labels): precedence decision lists
  (:class:`~auto.extract.ast.If`) learned by sequential covering (CN2: P. Clark and T. Niblett,
  1989; RIPPER: W. Cohen, 1995) over mined predicates: keyword containment on ``Lower(field)``
  (words, bigrams, trigrams), word-bounded regex matches, numeric thresholds over extracted
  numbers (``Compare(ParseMoney(Search(field, p, 1)), op, θ)`` with θ the roundest number in the
  gap between two neighbouring witnessed values), a keyword with a threshold fitted to the
  witnesses it covers, and two keywords (the second possibly negated). The default is fixed
  first — each frequent label in turn, and deopt — and rules are learned only for the other
  labels; the rules of one label become one ``Or`` (an alternation such as
  ``blocked | blacklisted | banned``). A rule needs a minimum support, must pass the
  likelihood-ratio significance test of CN2 and must pay for its description length (see
  Ranking), so keywords that only memorize a few witnesses are not learned.

Ranking. Every candidate is scored on the training witnesses: ``score = agree − c · wrong``
where a deopt is neither (``c`` = ``wrong_cost``, default 3: a silent-wrong answer costs as much
as three deopts, so a majority default survives only where it is right more than 3/4 of the
time), and by the two-part code of minimum description length (J. Rissanen, 1978):
``mdl = score − r · size`` with ``size`` the :func:`description_length` and ``r`` the witnesses
one unit of it is worth (:func:`_mdl_ratio`, about 0.45 for 400 witnesses and 3 labels). The
finalists are the best-scoring candidates and those whose training agreement is within
:data:`SLACK` (3%) of the best — room for a few wrong reference labels — at most
:data:`FINALISTS` of them, best MDL score first. Without held-out witnesses the best MDL score wins;
with them the one-standard-error rule decides (L. Breiman et al., 1984): among the finalists
whose held-out score is within one standard error of the best, the best MDL score wins (so a
larger program must be clearly better on unseen witnesses, not luckier). Remaining ties
go to the training score, the smaller description length and the program's text, so the same
witnesses always give the same program.

Search-time evaluation uses Python's ``re`` with ``re.ASCII`` (the safe subset of
:mod:`auto.extract.regex` agrees with it; ``$`` is end-of-text only and is translated to
``\\Z``); the chosen program is type-checked (:func:`auto.extract.types.check`), its patterns are
compiled by :func:`auto.extract.regex.compile_regex`, and its reported agreements are recomputed
with the reference interpreter (:func:`auto.extract.interp.run_program`).
"""

from __future__ import annotations

import bisect
import heapq
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field as dc_field
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from auto.canonical import canonical_json
from auto.errors import AutoError, UsageError
from auto.extract import ast as A
from auto.extract.interp import (
    FLOAT_SCALE,
    DeoptSignal,
    ascii_lower,
    ascii_strip,
    ascii_upper,
    make_evaluator,
    parse_float,
    parse_int,
    run_program,
    to_answer,
)

WRONG_COST = 3.0
"""Default cost of one silent-wrong answer, in deopts (see the module docstring)."""
SLACK = 0.03
"""Finalists: the best-scoring candidates and those whose training agreement is within
``SLACK · n`` witnesses of the best (room for a few wrong reference labels)."""
MIN_AGREEMENT = 0.9
"""Default training (and held-out) agreement below which no program is returned."""
MAX_RULES = 32
"""Default maximum number of decision-list rules (more is memorization, not a program)."""
MAX_LABELS = 24
"""Answers with more distinct values than this are not treated as categorical."""
FINALISTS = 16
PRECEDENCE_DEFAULTS = 6
PRECEDENCE_SUPPORT = 0.005
"""Default minimum support of a precedence-list rule, as a share of the training witnesses (2 of
400); its rules must also pass the significance test (:data:`LRS_MIN`) and pay for their
description length."""
"""Precedence lists are learned with each of this many most frequent labels as the default."""
PROPOSER_ROUNDS = 3
PROPOSER_EXAMPLES = 12

_DEOPT = object()  # the fast evaluator's "declined" answer


# ----------------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------------

@dataclass
class FieldResult:
    """Synthesis of one part of the answer (one record key, or the whole scalar answer).

    Attributes:
        program: the chosen program for this part, or None.
        train_agreement: share of training witnesses (0..1) whose part it reproduces (search-time
            evaluator).
        heldout_agreement: the same on the held-out witnesses, None without them.
        candidates: how many candidate programs were evaluated for this part.
        kind: which family produced it (``"const"``, ``"search"``, ``"number"``, ``"rules"``,
            ``"proposed"``), None without a program.
        reason: why there is no program, None when there is one.
    """

    program: A.Node | None
    train_agreement: float | None
    heldout_agreement: float | None
    candidates: int
    kind: str | None = None
    reason: str | None = None


@dataclass
class SynthResult:
    """What :func:`synthesize` found.

    Attributes:
        program: the program (a :mod:`auto.extract.ast` node), or None.
        train_agreement: share of training witnesses (0..1) the program reproduces exactly
            (canonical JSON equality; a deopt counts as a disagreement), computed with the
            reference interpreter; for no program, the best candidate's share (or None).
        heldout_agreement: the same on ``heldout``; None without held-out witnesses.
        per_field: for record answers, each key's :class:`FieldResult`; for a scalar answer one
            entry under the key ``""``.
        candidates: candidate programs evaluated (all parts together).
        reason: why there is no program (None when there is one).
        seconds: wall time of the search, in seconds.
        notes: things worth knowing (proposer refusals, budget exhaustion, interpreter
            disagreements).
    """

    program: A.Node | None
    train_agreement: float | None
    heldout_agreement: float | None
    per_field: dict[str, FieldResult]
    candidates: int
    reason: str | None
    seconds: float
    notes: list[str] = dc_field(default_factory=list)


# ----------------------------------------------------------------------------------------------
# Helpers: equality, regex text, description length, the fast evaluator
# ----------------------------------------------------------------------------------------------

def _same(out: Any, ref: Any) -> bool:
    """Canonical-JSON equality of a JSON answer and a reference (``1`` != ``1.0`` != ``True``)."""
    if out is _DEOPT:
        return False
    if type(out) is not type(ref):
        return False
    if isinstance(out, (dict, list, float)):
        return canonical_json(out) == canonical_json(ref)
    return out == ref


_RX_SPECIAL = set("()[]{}|*+?.^$\\")


def _lit(s: str) -> str:
    """``s`` as a literal pattern of the safe subset (and of Python's ``re``)."""
    out = []
    for ch in s:
        if ch in _RX_SPECIAL:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch in "\f\v":
            out.append("\\f" if ch == "\f" else "\\v")
        else:
            out.append(ch)
    return "".join(out)


def py_pattern(pattern: str) -> str:
    """The Python ``re`` pattern equivalent to a safe-subset ``pattern``: an unescaped ``$``
    outside a class (end of text only) becomes ``\\Z``; everything else is kept."""
    out = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "^":
                out.append("[^")
                i += 2
                if pattern[i:i + 1] == "]":
                    out.append("]")
                    i += 1
                continue
            if pattern[i + 1:i + 2] == "]":
                out.append("[]")
                i += 2
                continue
        elif ch == "$":
            out.append("\\Z")
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_RE_CACHE: dict[str, re.Pattern] = {}


def _rx(pattern: str) -> re.Pattern:
    r = _RE_CACHE.get(pattern)
    if r is None:
        if len(_RE_CACHE) > 20000:
            _RE_CACHE.clear()
        r = _RE_CACHE[pattern] = re.compile(py_pattern(pattern), re.ASCII)
    return r


def description_length(node: A.Node) -> float:
    """The ranking's description length of a program: 1 per node, plus 0.25 per character of a
    regex pattern, 0.125 per character of other text payloads (keywords, constants, separators)
    and 0.1 per significant digit of a numeric constant (so ``20000`` is simpler than ``19873``).
    """
    t = type(node)
    if t is A.Const:
        v = node.value
        if isinstance(v, str):
            return 1 + len(v) / 8
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return 1 + 0.1 * _sig_digits(v)
        return 1.0
    n = 1.0
    if t is A.Search:
        n += len(node.pattern) / 4 + (0.25 if node.group else 0)
    elif t in (A.Contains, A.StartsWith, A.EndsWith):
        n += len(node.s) / 8
    elif t in (A.Split, A.Join):
        n += len(node.sep) / 8
    elif t is A.Compare:
        v = node.value
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            n += 0.1 * _sig_digits(v)
        elif isinstance(v, str):
            n += len(v) / 8
    for f in getattr(node, "__dataclass_fields__", {}):
        child = getattr(node, f)
        if type(child) in A.NODE_TYPES:
            n += description_length(child)
        elif isinstance(child, tuple):
            for item in child:
                if type(item) in A.NODE_TYPES:
                    n += description_length(item)
                elif isinstance(item, tuple):
                    for sub in item:
                        if type(sub) in A.NODE_TYPES:
                            n += description_length(sub)
                        elif isinstance(sub, str):
                            n += len(sub) / 8
    return n


def _sig_digits(v: int | float) -> int:
    s = repr(abs(v)).replace(".", "").rstrip("0").lstrip("0")
    return max(1, len(s.rstrip("0")))


def _re_search(x: str, pattern: str, group: int) -> str | None:
    m = _rx(pattern).search(x)
    if m is None or group > (m.re.groups or 0):
        return None
    return m.group(group)


_fast_ev = make_evaluator(_re_search)
"""The reference interpreter's semantics with Python ``re`` for :class:`Search` (search time only;
the regex subset is defined so the two agree, and the final program is re-checked with the
interpreter's own Pike VM)."""


def _answer(node: A.Node, inp: dict) -> Any:
    """Search-time answer of ``node`` on ``inp`` as a JSON value, or ``_DEOPT``."""
    try:
        return to_answer(_fast_ev(node, inp))
    except DeoptSignal:
        return _DEOPT
    except (AutoError, ValueError, TypeError, re.error, RecursionError):
        return _DEOPT


def _nodes(node: Any):
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) in A.NODE_TYPES:
            yield n
            for f in n.__dataclass_fields__:
                stack.append(getattr(n, f))
        elif isinstance(n, tuple):
            stack.extend(n)


# ----------------------------------------------------------------------------------------------
# The candidate pool
# ----------------------------------------------------------------------------------------------

@dataclass
class _Cand:
    program: A.Node
    kind: str
    outs: list[Any]
    agree: int
    wrong: int
    size: float
    score: float = 0.0
    mdl: float = 0.0
    h_agree: int | None = None
    h_wrong: int | None = None
    h_score: float | None = None
    text: str = ""


class _Budget:
    def __init__(self, seconds: float):
        self.deadline = time.perf_counter() + seconds
        self.exhausted = False

    def over(self) -> bool:
        if time.perf_counter() > self.deadline:
            self.exhausted = True
        return self.exhausted


class _Part:
    """One synthesis problem: texts of the input field and the reference values of one part."""

    def __init__(self, name: str, field: str, train: list[tuple[dict, Any]], heldout: list[tuple[dict, Any]],
                 wrong_cost: float, budget: _Budget):
        self.name = name
        self.field = field
        self.inputs = [p[0] for p in train]
        self.texts: list[str] = [p[0][field] for p in train]
        self.refs = [p[1] for p in train]
        self.h_inputs = [p[0] for p in heldout]
        self.h_refs = [p[1] for p in heldout]
        self.n = len(self.refs)
        self.wrong_cost = wrong_cost
        self.budget = budget
        self.lower = [ascii_lower(t) for t in self.texts]
        self.upper = [ascii_upper(t) for t in self.texts]
        self.cands: list[_Cand] = []
        self.seen: set[A.Node] = set()
        self.count = 0
        self.best_agree = -1
        self.ratio = _mdl_ratio(self.n, len({canonical_json(r) for r in self.refs}))

    # -- evaluation ------------------------------------------------------------------------
    def max_errors(self) -> int:
        return max(0, self.n - self.best_agree) + int(SLACK * self.n)

    def add(self, program: A.Node, kind: str, outs: list[Any] | None = None) -> _Cand | None:
        """Evaluate ``program`` on the training witnesses (``outs`` when the caller computed the
        answers already) and keep it if it can still be a finalist."""
        if program in self.seen:
            return None
        self.seen.add(program)
        self.count += 1
        if outs is None:
            outs = []
            bad, limit = 0, self.max_errors()
            for inp, ref in zip(self.inputs, self.refs):
                o = _answer(program, inp)
                outs.append(o)
                if not _same(o, ref):
                    bad += 1
                    if bad > limit:
                        return None
        agree = sum(1 for o, r in zip(outs, self.refs) if _same(o, r))
        wrong = sum(1 for o, r in zip(outs, self.refs) if o is not _DEOPT and not _same(o, r))
        c = _Cand(program, kind, outs, agree, wrong, description_length(program))
        c.score = agree - self.wrong_cost * wrong
        c.mdl = agree - self.ratio * c.size
        self.best_agree = max(self.best_agree, agree)
        self.cands.append(c)
        return c

    def search_outputs(self, base: str, pattern: str, group: int, post: Callable[[str], Any] | None) -> list[Any] | None:
        """Answers of ``post(Search(base(field), pattern, group))`` with early abort (None when it
        cannot be a finalist)."""
        texts = self.texts if base == "field" else self.lower if base == "lower" else self.upper
        rx = _rx(pattern)
        limit = self.max_errors()
        bad = 0
        outs = []
        for t, ref in zip(texts, self.refs):
            m = rx.search(t)
            v = m.group(group) if m is not None else None
            if v is not None and post is not None:
                v = post(v)
            if not (v == ref and type(v) is type(ref)):
                bad += 1
                if bad > limit:
                    return None
            outs.append(v)
        return outs

    def add_search(self, base: str, pattern: str, group: int, wrap: str | None, kind: str) -> None:
        x: A.Node = A.Field(self.field)
        if base == "lower":
            x = A.Lower(x)
        elif base == "upper":
            x = A.Upper(x)
        node: A.Node = A.Search(x, pattern, group)
        post = None
        if wrap == "strip":
            node, post = A.Strip(node), ascii_strip
        elif wrap == "int":
            node, post = A.ParseInt(node), parse_int
        elif wrap in ("float", "money"):
            money = wrap == "money"
            node = A.ParseMoney(node) if money else A.ParseFloat(node)

            def post(s: str, _m: bool = money) -> Any:
                v = parse_float(s, money=_m)
                return None if v is None else v.to_float()
        if node in self.seen:
            return
        try:
            outs = self.search_outputs(base, pattern, group, post)
        except re.error:
            return
        if outs is None:
            self.seen.add(node)
            self.count += 1
            return
        self.add(node, kind, outs)

    # -- ranking ---------------------------------------------------------------------------
    def finalists(self) -> list[_Cand]:
        if not self.cands:
            return []
        for c in self.cands:
            c.text = repr(c.program)
        best = max(c.score for c in self.cands)
        best_agree = max(c.agree for c in self.cands)
        fin = [c for c in self.cands if c.score >= best or c.agree >= best_agree - SLACK * self.n]
        fin.sort(key=lambda c: (-c.mdl, -c.score, c.size, c.text))
        return fin[:FINALISTS]

    def rank(self, fin: list[_Cand]) -> list[_Cand]:
        """Finalists best first: without held-out witnesses by the MDL score, then the score;
        with them, the one-standard-error rule (L. Breiman et al., *Classification and
        Regression Trees*, 1984): the candidates whose held-out score is within one standard
        error of the best (``sqrt(m·p(1-p))`` witnesses of ``m``, ``p`` the best's Laplace-smoothed
        held-out agreement, each worth ``1 + wrong_cost`` points of score, as a wrong answer is)
        come first, by MDL score; the rest by held-out score."""
        if self.h_refs:
            m = len(self.h_refs)
            for c in fin:
                outs = [_answer(c.program, inp) for inp in self.h_inputs]
                c.h_agree = sum(1 for o, r in zip(outs, self.h_refs) if _same(o, r))
                c.h_wrong = sum(1 for o, r in zip(outs, self.h_refs) if o is not _DEOPT and not _same(o, r))
                c.h_score = c.h_agree - self.wrong_cost * c.h_wrong
            if not fin:
                return []
            top = max(fin, key=lambda c: (c.h_score, c.h_agree))
            p = (top.h_agree + 1) / (m + 2)
            se = math.sqrt(p * (1 - p) * m) * (1 + self.wrong_cost)  # a wrong answer moves the score 1 + c
            cut = top.h_score - se - 1e-9
            return sorted(fin, key=lambda c: (c.h_score < cut, -c.mdl if c.h_score >= cut else -c.h_score,
                                              -c.h_score, -c.score, c.size, c.text))
        return sorted(fin, key=lambda c: (-c.mdl, -c.score, c.size, c.text))


# ----------------------------------------------------------------------------------------------
# Text and number extraction
# ----------------------------------------------------------------------------------------------

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


def _mine_left(texts: list[str], occ: list[tuple[int, int]], limit: int = 10, max_len: int = 24,
               min_share: float = 0.5) -> list[str]:
    """Literal left contexts: for each length ``k``, the most frequent ``k``-character suffix of
    the text before the occurrences, kept when it covers ``min_share`` of them and starts at a
    word start (so ``"Order ID: "`` rather than ``"der ID: "``)."""
    if not occ:
        return []
    m = len(occ)
    found: list[tuple[int, int, str]] = []
    for k in range(1, max_len + 1):
        cnt: Counter = Counter()
        first: dict[str, tuple[int, int]] = {}
        for wi, start in occ:
            if start >= k:
                s = texts[wi][start - k:start]
                cnt[s] += 1
                first.setdefault(s, (wi, start))
        if not cnt:
            break
        s, c = min(cnt.items(), key=lambda kv: (-kv[1], kv[0]))
        if c < min_share * m:
            break
        wi, start = first[s]
        before = texts[wi][start - k - 1] if start - k - 1 >= 0 else ""
        if k == 1 or not _is_word(s[0]) or not before or not _is_word(before):
            found.append((c, k, s))
    found.sort(key=lambda x: (-x[0], x[1]))
    out = []
    for _c, _k, s in found:
        if s not in out:
            out.append(s)
    return out[:limit]


def _mine_right(texts: list[str], occ: list[tuple[int, int]], limit: int = 5, max_len: int = 8,
                min_share: float = 0.5) -> list[str]:
    if not occ:
        return []
    m = len(occ)
    found: list[tuple[int, int, str]] = []
    for k in range(1, max_len + 1):
        cnt: Counter = Counter()
        first: dict[str, tuple[int, int]] = {}
        for wi, end in occ:
            if end + k <= len(texts[wi]):
                s = texts[wi][end:end + k]
                cnt[s] += 1
                first.setdefault(s, (wi, end))
        if not cnt:
            break
        s, c = min(cnt.items(), key=lambda kv: (-kv[1], kv[0]))
        if c < min_share * m:
            break
        wi, end = first[s]
        after = texts[wi][end + k] if end + k < len(texts[wi]) else ""
        if k == 1 or not _is_word(s[-1]) or not after or not _is_word(after):
            found.append((c, k, s))
    found.sort(key=lambda x: (-x[0], x[1]))
    out = []
    for _c, _k, s in found:
        if s not in out:
            out.append(s)
    return out[:limit]


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


# ----------------------------------------------------------------------------------------------
# Categorical answers: decision lists
# ----------------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+", re.ASCII)
_NUM_BODY = "-?\\$?\\d+(?:,\\d{3})*(?:\\.\\d+)?"
"""A number as written in text: digits with comma thousands groups (a comma that ends the number,
as in "$176,100, a supplier", is punctuation, not part of it), optional decimals."""
_DIGITS_BODY = "\\d+(?:,\\d{3})*(?:\\.\\d+)?"
_LAST = "(?:.|\\n)*"
"""A greedy prefix: before a pattern, it makes the search find the pattern's last occurrence."""
"""The same without sign or currency (after a mined context that ends with ``$``)."""


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


def _keyword_preds(part: _Part, min_support: int) -> list[_Pred]:
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


# A rule during refitting: components [(pred, negated, theta_units | None)], label key.

def _comp_mask(pred: _Pred, neg: bool, q: int | None, full: int) -> int:
    if q is not None and pred.thr is not None:
        ex, op = pred.thr
        if op in ("ge", "gt"):
            m = ex.at_least(q, strict=op == "gt")
        else:
            m = ex.nonnull & ~ex.at_least(q, strict=op == "le")
    else:
        m = pred.mask
    return (full & ~m) if neg else m


def _list_agreement(conds: list[int], labs: list[str], default: str | None, lab_mask: dict[str, int], full: int) -> int:
    rem, agree = full, 0
    for cm, lab in zip(conds, labs):
        hit = cm & rem
        agree += _popcount(hit & lab_mask[lab])
        rem &= ~hit
    if default is not None:
        agree += _popcount(rem & lab_mask[default])
    return agree


def _polish(rules, default: str | None, lab_mask: dict[str, int], n: int):
    """Refit every threshold of a learned list without losing training agreement: widen its
    interval to every θ that keeps the list's training agreement, and take the roundest number
    in it (``amount < 500`` rather than ``< 395``).

    Returns the polished rules as ``[([(pred, negated, theta_units | None), ...], label)]``.
    """
    full = (1 << n) - 1
    rs = [([(p, neg, _theta_units(p)) for p, neg in comps], lab) for comps, lab in rules]

    def masks(rr):
        out = []
        for comps, _lab in rr:
            m = full
            for p, neg, q in comps:
                m &= _comp_mask(p, neg, q, full)
            out.append(m)
        return out

    def agreement(rr):
        return _list_agreement(masks(rr), [lab for _c, lab in rr], default, lab_mask, full)

    base = agreement(rs)
    for k in range(len(rs)):
        comps, lab = rs[k]
        for ci, (p, neg, q) in enumerate(comps):
            if p.thr is None or q is None:
                continue
            ex, op = p.thr
            vals = sorted(set(ex.sorted_vals))
            if len(vals) < 2:
                continue

            def with_q(qq, _k=k, _ci=ci):
                cc = list(rs[_k][0])
                pp, nn, _ = cc[_ci]
                cc[_ci] = (pp, nn, qq)
                return rs[:_k] + [(cc, rs[_k][1])] + rs[_k + 1:]

            strict = op in ("gt", "le")  # theta in [v_j, v_j+1) for gt/le, (v_j, v_j+1] for ge/lt
            # class index: number of values "below" theta
            pos = bisect.bisect_right(vals, q) if strict else bisect.bisect_left(vals, q)
            lo_i = hi_i = pos
            while lo_i > 0 and agreement(with_q(_class_rep(vals, lo_i - 1, strict))) >= base:
                lo_i -= 1
            while hi_i < len(vals) and agreement(with_q(_class_rep(vals, hi_i + 1, strict))) >= base:
                hi_i += 1
            # classes lo_i..hi_i are valid: theta in (vals[lo_i-1], vals[hi_i]] (ge/lt) or
            # [vals[lo_i-1], vals[hi_i]) (gt/le); open ends are bounded by the extreme values
            lo_v = vals[lo_i - 1] if lo_i > 0 else vals[0] - 1
            hi_v = vals[hi_i] if hi_i < len(vals) else vals[-1] + 1
            qn = _roundest(lo_v, hi_v, lo_open=not strict, hi_open=strict)
            if qn is not None and agreement(with_q(qn)) >= base:
                rs = with_q(qn)
    return rs


def _class_rep(vals: list[int], i: int, strict: bool) -> int:
    """A θ (units) in threshold class ``i`` (``i`` values lie below θ)."""
    if strict:  # theta in [vals[i-1], vals[i])
        return vals[i - 1] if i > 0 else vals[0] - 1
    return vals[i - 1] + 1 if i > 0 else vals[0]  # theta in (vals[i-1], vals[i]]


def _theta_units(p: _Pred) -> int | None:
    if p.thr is None:
        return None
    v = p.node.value
    return v * FLOAT_SCALE if isinstance(v, int) else round(v * FLOAT_SCALE)


def _rule_node(comps) -> A.Node:
    items = []
    for p, neg, q in comps:
        node = p.node
        if p.thr is not None and q is not None:
            node = A.Compare(node.op, node.x, _const_number(q))
        items.append(A.Not(node) if neg else node)
    return items[0] if len(items) == 1 else A.And(tuple(items))


def _label_const(label: Any) -> A.Node:
    return A.Const(label)


# -- precedence lists: a default label chosen first, rules ranked by Laplace precision ---------------

def _laplace(tp: int, c: int) -> float:
    """Laplace-corrected precision ``(tp + 1) / (c + 2)`` of a rule covering ``c`` witnesses, ``tp``
    of them with its label: the rule quality of CN2 (P. Clark and R. Boswell, 1991). A rule that
    covers few witnesses scores low even when it is pure, so it has to pay for itself."""
    return (tp + 1) / (c + 2)


def _bits(mask: int, n: int) -> np.ndarray:
    """A witness mask as a boolean array of length ``n`` (bit ``i`` -> element ``i``)."""
    raw = np.frombuffer(mask.to_bytes((n + 7) // 8 or 1, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:n].astype(bool)


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
    base_bits, lab_bits = _bits(base, n), _bits(lm, n)
    for ex in extractors:
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


LRS_MIN = 6.635
"""A rule is kept only when its likelihood-ratio statistic reaches the chi-square 99% point for
one degree of freedom (6.635), the significance test of CN2 (Clark and Niblett, 1989): a rule
whose label is merely the common one among the witnesses it sees is not evidence."""


def _lrs(tp: int, c: int, share: float) -> float:
    """Likelihood-ratio statistic ``2 Σ f ln(f / e)`` of a rule covering ``c`` witnesses, ``tp``
    with its label, against the label's ``share`` (0..1) among the remaining witnesses."""
    out = 0.0
    for f, e in ((tp, c * share), (c - tp, c * (1 - share))):
        if f > 0:
            out += f * math.log(f / e) if e > 0 else math.inf
    return 2 * out


def _outranks(key: tuple, text: str, best) -> bool:
    """Rule order: the larger ``(laplace, positives, -size)`` key, then the smaller text."""
    return best is None or key > best[0] or (key == best[0] and text < best[4])


POOL = 24
"""Conjunctions are formed among the ``POOL`` impure predicates with the most positives (with a
fitted threshold: among the first half of them)."""


def _learn_precedence(part: _Part, targets: list[str], lab_mask: dict[str, int], singles: list[_Pred],
                      extractors: list[_Extractor], min_support: int, tol: float,
                      max_rules: int, pairs: bool = True, rare_first: bool = False,
                      gain_ratio: float | None = None) -> list[tuple[list[tuple[_Pred, bool]], str]]:
    """Sequential covering for the labels ``targets`` (every label but the default): each step
    adds the admissible rule (precision ``>= 1 - tol``, at least ``min_support`` positives, a
    likelihood-ratio statistic of at least :data:`LRS_MIN` against the label's share of the
    remaining witnesses) of the best Laplace precision, then the most positives, the smaller
    description and the text. Returns ``[([(predicate, negated), ...], label key), ...]`` in
    list order.
    Candidate conditions: a keyword predicate; a threshold fitted to the remaining witnesses
    (:func:`_split_preds`); two predicates, the second possibly negated; a predicate and a
    threshold fitted to the witnesses it covers. With ``pairs`` False, two keyword predicates
    are never combined (the simpler hypothesis space: keyword alternations and thresholds).
    With ``rare_first``, the labels are taken one at a time, the least frequent first, each until
    it has no admissible rule left (the class order of RIPPER: W. Cohen, 1995), so the rules of
    a rare label (an exception such as a blocked vendor) precede the broad rules that would
    swallow its witnesses. With ``gain_ratio`` (witnesses per unit of description length,
    :func:`_mdl_ratio`), rules are ranked by their description-length gain ``tp - (1 + c) · fp -
    gain_ratio · size`` (``c`` the wrong-answer cost) instead of Laplace precision: a rule that
    covers many witnesses with one unexplained label beats a pure one that covers fewer."""
    n = part.n
    rem = (1 << n) - 1
    rules: list[tuple[list[tuple[_Pred, bool]], str]] = []
    queue = sorted(targets, key=lambda k: (_popcount(lab_mask[k]), k))
    fp_cost = 1 + part.wrong_cost
    while rem and len(rules) < max_rules and not part.budget.over():
        if rare_first:
            if not queue:
                break
            targets = queue[:1]
        live = [(p, p.mask & rem) for p in singles]
        live = [(p, cov) for p, cov in live if _popcount(cov) >= min_support]
        best = None  # (key, comps, label, covered mask, text)
        for lab in targets:
            lm = lab_mask[lab] & rem
            if _popcount(lm) < min_support:
                continue
            share = _popcount(lm) / _popcount(rem)

            def consider(comps, cov, size, text, _lab=lab, _lm=lm, _share=share):
                nonlocal best
                c = _popcount(cov)
                tp = _popcount(cov & _lm)
                if tp < min_support or tp < (1 - tol) * c - 1e-9 or _lrs(tp, c, _share) < LRS_MIN:
                    return
                if gain_ratio is None:
                    key = (_laplace(tp, c), tp, -size)
                else:
                    gain = tp - fp_cost * (c - tp) - gain_ratio * size
                    if gain <= 0:
                        return
                    key = (gain, _laplace(tp, c), -size)
                if _outranks(key, text, best):
                    best = (key, comps, _lab, cov, text)

            scored = []
            for p, cov in live + [(t, t.mask & rem) for t in _split_preds(rem, extractors, lm, min_support, n, tol)]:
                tp = _popcount(cov & lm)
                if tp < min_support:
                    continue
                c = _popcount(cov)
                consider([(p, False)], cov, p.size, p.text)
                if c > tp:  # impure: a second condition may help
                    scored.append((-tp, c, p.size, p.text, p))
            pool = [x[-1] for x in heapq.nsmallest(POOL, scored)]
            for a_i, pa in enumerate(pool):
                ma = pa.mask & rem
                for pb in pool[a_i + 1:] if pairs else ():
                    consider([(pa, False), (pb, False)], ma & pb.mask, 1 + pa.size + pb.size, pa.text + "&" + pb.text)
                if a_i >= POOL // 2:
                    continue
                for pt in _split_preds(ma, extractors, lm, min_support, n, tol):
                    consider([(pa, False), (pt, False)], ma & pt.mask, 1 + pa.size + pt.size, pa.text + "&" + pt.text)
            for pa in pool[:8] if pairs else ():
                ma = pa.mask & rem
                fp_a = ma & ~lm
                # negations that remove some of pa's wrong witnesses
                negs = [(-_popcount(pb.mask & fp_a), pb.size, pb.text, pb) for pb, cov in live
                        if pb.neg_ok and cov & fp_a and pb is not pa]
                for _k, _s, _t, pb in heapq.nsmallest(8, negs):
                    consider([(pa, False), (pb, True)], ma & ~pb.mask, 2 + pa.size + pb.size, pa.text + "&!" + pb.text)
        if best is None:
            if rare_first:
                queue.pop(0)
                continue
            break
        rules.append((best[1], best[2]))
        rem &= ~best[3]
    return rules


def _mdl_ratio(n: int, n_labels: int) -> float:
    """Witnesses one unit of description length is worth: ``log2(#node kinds) / (log2(n) +
    log2(#labels))`` — the bits to name one node against the bits to list one exception (which
    witness, which answer), after the two-part code of minimum description length (J. Rissanen,
    1978; J. R. Quinlan and R. Rivest, 1989)."""
    return math.log2(len(A.NODE_TYPES)) / (math.log2(max(2, n)) + math.log2(max(2, n_labels)))


def _regroup(rs, default: str | None, lab_mask: dict[str, int], n: int, ratio: float):
    """Tidy a polished list, then drop the rules that do not pay for themselves:

    1. move each rule up to just after the last earlier rule of its label (so one label's rules
       merge into one ``Or``) when no training witness it covers is covered by a rule it passes
       (so the order between them was never witnessed);
    2. drop each rule (last first) whose removal costs fewer training witnesses than its
       description length is worth (``ratio`` witnesses per unit, :func:`_mdl_ratio`).
    """
    full = (1 << n) - 1

    def cond_mask(comps):
        m = full
        for p, neg, q in comps:
            m &= _comp_mask(p, neg, q, full)
        return m

    def agreement(rr):
        return _list_agreement([cond_mask(c) for c, _lab in rr], [lab for _c, lab in rr], default, lab_mask, full)

    rs = list(rs)
    base = agreement(rs)
    for k in range(1, len(rs)):
        lab = rs[k][1]
        last = max((j for j in range(k) if rs[j][1] == lab), default=None)
        if last is None or last + 1 == k:
            continue
        mk = cond_mask(rs[k][0])
        if all(not (mk & cond_mask(rs[j][0])) for j in range(last + 1, k)):
            rs = rs[:last + 1] + [rs[k]] + rs[last + 1:k] + rs[k + 1:]
    for k in range(len(rs) - 1, -1, -1):
        if default is None and len(rs) == 1:
            break
        trial = rs[:k] + rs[k + 1:]
        cost = ratio * description_length(_rule_node(rs[k][0]))
        got = agreement(trial)
        if got > base - cost:
            rs, base = trial, got
    return rs


def _decision_lists(part: _Part, min_support: int | None, max_rules: int) -> None:
    """Categorical answers: the constant labels, then precedence lists (:func:`_learn_precedence`)
    with each of the :data:`PRECEDENCE_DEFAULTS` most frequent labels, and deopt, as the default,
    learned two ways (Laplace order with pure rules; description-length gain with a 10% tolerance
    and the rarest label first), without and, for the two defaults whose lists have the best MDL
    score, with conjunctions of two keywords. Each list has its thresholds refitted to round
    numbers (:func:`_polish`) and is tidied and pruned (:func:`_regroup`)."""
    refs = part.refs
    if any(isinstance(r, (dict, list)) for r in refs):
        return
    keys = [canonical_json(r) for r in refs]
    counts = Counter(keys)
    labels = sorted(counts, key=lambda k: (-counts[k], k))
    value_of = {canonical_json(r): r for r in refs}
    for k in labels:
        part.add(_label_const(value_of[k]), "const")
    if len(labels) < 2 or len(labels) > MAX_LABELS:
        return
    if any(isinstance(v, float) for v in value_of.values()) and len(labels) > 0.5 * part.n:
        return
    n = part.n
    ms = min_support if min_support is not None else max(2, round(PRECEDENCE_SUPPORT * n))
    lab_mask = {k: _mask([kk == k for kk in keys]) for k in labels}
    extractors = _number_extractors(part)
    # deduplicate keyword predicates by their training mask (keep the smallest description)
    by_mask: dict[int, _Pred] = {}
    for p in _keyword_preds(part, ms):
        q = by_mask.get(p.mask)
        if q is None or (p.size, p.text) < (q.size, q.text):
            by_mask[p.mask] = p
    singles = sorted(by_mask.values(), key=lambda p: (p.size, p.text))
    ratio = _mdl_ratio(n, len(labels))
    defaults: list[str | None] = [k for k in labels if counts[k] >= ms][:PRECEDENCE_DEFAULTS] + [None]
    mdl_of: dict[str | None, float] = {}

    def precedence(default: str | None, pairs: bool, gain: bool) -> None:
        targets = [k for k in labels if k != default]
        rules = _learn_precedence(part, targets, lab_mask, singles, extractors, ms, 0.1 if gain else 0.0,
                                  max_rules, pairs, rare_first=gain, gain_ratio=ratio if gain else None)
        polished = _regroup(_polish(rules, default, lab_mask, n), default, lab_mask, n, ratio)
        lists = [(polished, default)]
        if default is None and polished:  # the last rule's label as the default instead of deopt
            lists.append((polished[:-1], polished[-1][1]))
        for rs, dflt in lists:
            c = part.add(_build_list([(_rule_node(cs), lab) for cs, lab in rs], value_of, dflt), "rules")
            if c is not None:
                mdl_of[default] = max(mdl_of.get(default, -math.inf), c.mdl)

    for default in defaults:
        for gain in (False, True):
            if not part.budget.over():
                precedence(default, False, gain)
    ranked = sorted(mdl_of, key=lambda d: (-mdl_of[d], d is None, d or ""))
    for default in ranked[:2]:
        for gain in (False, True):
            if not part.budget.over():
                precedence(default, True, gain)


def _build_list(rules: list[tuple[A.Node, str]], value_of: dict[str, Any], default: str | None) -> A.Node:
    """A decision list: rules with the default's label at the end are dropped, consecutive rules
    with one label are merged into an ``Or``; ``default`` None means :class:`Deopt`."""
    rs = list(rules)
    if default is not None:
        while rs and rs[-1][1] == default:
            rs.pop()
    merged: list[tuple[list[A.Node], str]] = []
    for cond, lab in rs:
        if merged and merged[-1][1] == lab:
            merged[-1][0].append(cond)
        else:
            merged.append(([cond], lab))
    cases = tuple((conds[0] if len(conds) == 1 else A.Or(tuple(conds)), _label_const(value_of[lab]))
                  for conds, lab in merged)
    dflt: A.Node = A.Deopt() if default is None else _label_const(value_of[default])
    if not cases:
        return dflt
    return A.If(cases, dflt)


# ----------------------------------------------------------------------------------------------
# Proposals
# ----------------------------------------------------------------------------------------------

def _ask_proposer(part: _Part, proposer: Any, notes: list[str]) -> bool:
    """A few counterexample rounds with ``proposer``; False when it declined (do not ask again)."""
    from auto.extract.serial import from_json, to_json
    from auto.extract.types import check

    label = part.name or "answer"
    for _round in range(PROPOSER_ROUNDS):
        fin = part.finalists()
        best = part.rank(fin)[0] if fin else None
        if best is not None and best.agree == part.n:
            return True
        failing = [(inp, ref) for inp, ref, o in zip(part.inputs, part.refs, best.outs if best else [_DEOPT] * part.n)
                   if not _same(o, ref)][:PROPOSER_EXAMPLES]
        current = to_json(best.program) if best is not None else None
        try:
            proposals = proposer.propose(part.field, failing, current)
        except AutoError as e:
            notes.append(f"{label}: proposer declined ({type(e).__name__}: {e}); synthesis continued without proposals")
            return False
        if not proposals:
            return True
        improved = False
        for pj in proposals:
            try:
                prog = from_json(pj)
                check(prog, part.field)
            except (AutoError, ValueError, TypeError, KeyError) as e:
                notes.append(f"{label}: proposal rejected ({type(e).__name__}: {str(e)[:120]})")
                continue
            if prog in part.seen:
                continue
            before = best.score if best is not None else -math.inf
            c = part.add(prog, "proposed", [_answer(prog, inp) for inp in part.inputs])
            if c is not None and c.score > before:
                improved = True
        if not improved:
            return True
    return True


# ----------------------------------------------------------------------------------------------
# The driver
# ----------------------------------------------------------------------------------------------

def _validate(program: A.Node, field: str) -> str | None:
    """None when the program type-checks and every pattern compiles; else the reason."""
    from auto.extract.regex import compile_regex
    from auto.extract.types import check

    try:
        check(program, field)
        for n in _nodes(program):
            if type(n) is A.Search:
                compile_regex(n.pattern)
    except AutoError as e:
        return f"{type(e).__name__}: {e}"
    return None


def _synth_part(part: _Part, *, proposer: Any, notes: list[str], min_support: int | None,
                max_rules: int, state: dict[str, Any]) -> FieldResult:
    refs = part.refs
    if all(r is None for r in refs):
        part.add(A.Const(None), "const")
    else:
        kinds = {type(r) for r in refs if r is not None}
        if kinds <= {str}:
            _text_extraction(part)
        if kinds <= {int} or kinds <= {float}:
            _number_extraction(part)
        if kinds and all(k in (str, int, float, bool) for k in kinds):
            _decision_lists(part, min_support, max_rules)
    if proposer is not None and not part.budget.over():
        fin = part.finalists()
        if not fin or part.rank(fin)[0].agree < part.n:
            if not _ask_proposer(part, proposer, notes):
                state["proposer_declined"] = True
    fin = part.rank(part.finalists())
    for c in fin:
        why = _validate(c.program, part.field)
        if why is None:
            h = None if c.h_agree is None else c.h_agree / len(part.h_refs)
            return FieldResult(c.program, c.agree / part.n, h, part.count, c.kind)
        notes.append(f"{part.name or 'answer'}: candidate dropped by validation ({why[:160]})")
    kinds = sorted({type(r).__name__ for r in refs})
    return FieldResult(None, None, None, part.count, None,
                       f"no candidate program for answers of type {', '.join(kinds)}")


def _check_witnesses(pairs: Any, field: str, what: str) -> list[tuple[dict, Any]]:
    if not isinstance(pairs, (list, tuple)):
        raise UsageError(f"{what} must be a list of (input object, answer) pairs")
    out = []
    for k, p in enumerate(pairs):
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            raise UsageError(f"{what}[{k}] is not an (input object, answer) pair")
        inp, ans = p
        if not isinstance(inp, dict):
            raise UsageError(f"{what}[{k}]: the input must be a dict, not {type(inp).__name__}")
        if not isinstance(inp.get(field), str):
            raise UsageError(f"{what}[{k}]: the input has no string field {field!r}")
        try:
            canonical_json(ans)
        except (TypeError, ValueError) as e:
            raise UsageError(f"{what}[{k}]: the answer is not a JSON value ({e})") from None
        out.append((inp, ans))
    return out


def synthesize(
    train: list[tuple[dict, Any]],
    *,
    field: str,
    heldout: list[tuple[dict, Any]] | None = None,
    proposer: Any = None,
    time_budget_s: float = 30.0,
    min_agreement: float = MIN_AGREEMENT,
    wrong_cost: float = WRONG_COST,
    min_support: int | None = None,
    max_rules: int = MAX_RULES,
) -> SynthResult:
    """Synthesize a program that maps each training input to its reference answer.

    Args:
        train: witnesses ``(input object, reference answer)``; the answer is a JSON value (text,
            number, bool, null, or an object with the same keys in every witness).
        field: the input's string field the program reads (``Field(field)``).
        heldout: witnesses used only to choose among the finalists (and reported).
        proposer: an optional :class:`auto.extract.propose.Proposer`, asked (a few rounds) when
            the best enumerated program still fails training witnesses; its proposals are
            type-checked, evaluated and kept only when they score better. A proposer that raises
            an :class:`~auto.errors.AutoError` (e.g. :class:`~auto.errors.SpendCapExceeded`) is
            not asked again; the refusal is recorded in ``notes``.
        time_budget_s: wall-clock budget in seconds for the whole search; when it runs out the
            best program found so far is kept and ``notes`` says so.
        min_agreement: training agreement (0..1) — and held-out agreement, when given — below
            which no program is returned (``reason`` says which fell short).
        wrong_cost: cost of a silent-wrong answer in deopts (ranking score, module docstring).
        min_support: training witnesses a decision-list rule must cover; default
            ``max(2, round(0.005 · n))`` (:data:`PRECEDENCE_SUPPORT`).
        max_rules: decision lists with more rules are not learned further.

    Returns:
        A :class:`SynthResult`; its agreements come from the reference interpreter.

    Raises:
        UsageError: ``train`` is empty or malformed (not pairs, input not a dict, ``field``
            missing or not a string, answer not JSON), record answers have different keys, or
            an argument is out of range.
    """
    t0 = time.perf_counter()
    if not isinstance(field, str) or not field:
        raise UsageError("field must be a non-empty string")
    train = _check_witnesses(train, field, "train")
    heldout = _check_witnesses(heldout or [], field, "heldout")
    if not train:
        raise UsageError("synthesis needs at least one training witness")
    if not (time_budget_s > 0):
        raise UsageError(f"time_budget_s must be positive, got {time_budget_s!r}")
    if not 0.0 <= min_agreement <= 1.0:
        raise UsageError(f"min_agreement must be in [0, 1], got {min_agreement!r}")
    if wrong_cost < 0:
        raise UsageError(f"wrong_cost must be >= 0, got {wrong_cost!r}")
    budget = _Budget(time_budget_s)
    notes: list[str] = []
    state: dict[str, Any] = {"proposer_declined": False}
    answers = [a for _i, a in train]
    record = all(isinstance(a, dict) for a in answers)
    if record:
        keyset = {tuple(sorted(a)) for a in answers}
        if len(keyset) != 1:
            raise UsageError("record answers must have the same keys in every witness; saw "
                             + "; ".join(str(list(k)) for k in sorted(keyset)[:3]))
        if heldout and not all(isinstance(a, dict) and tuple(sorted(a)) in keyset for _i, a in heldout):
            raise UsageError("held-out record answers must have the training answers' keys")
        keys = list(next(iter(keyset)))
        if not keys:
            raise UsageError("record answers have no keys")
    per_field: dict[str, FieldResult] = {}
    if record:
        for k in keys:
            part = _Part(k, field, [(i, a[k]) for i, a in train], [(i, a[k]) for i, a in heldout], wrong_cost, budget)
            per_field[k] = _synth_part(part, proposer=None if state["proposer_declined"] else proposer, notes=notes,
                                       min_support=min_support, max_rules=max_rules, state=state)
        missing = [k for k in keys if per_field[k].program is None]
        program = None if missing else A.Record(tuple((k, per_field[k].program) for k in keys))
        reason = (None if not missing else
                  "; ".join(f"field {k!r}: {per_field[k].reason}" for k in missing))
    else:
        part = _Part("", field, train, heldout, wrong_cost, budget)
        per_field[""] = _synth_part(part, proposer=proposer, notes=notes, min_support=min_support, max_rules=max_rules,
                                    state=state)
        program = per_field[""].program
        reason = per_field[""].reason
    if budget.exhausted:
        notes.append(f"time budget of {time_budget_s:g} s exhausted; the best program found so far was kept")
    candidates = sum(f.candidates for f in per_field.values())
    if program is None:
        return SynthResult(None, None, None, per_field, candidates, reason, time.perf_counter() - t0, notes)

    train_ag, train_fast = _interp_agreement(program, train, notes, "train")
    held_ag = _interp_agreement(program, heldout, notes, "held-out")[0] if heldout else None
    short = []
    if train_ag < min_agreement:
        short.append(f"training agreement {train_ag:.3f} < {min_agreement:.2f}")
    if held_ag is not None and held_ag < min_agreement:
        short.append(f"held-out agreement {held_ag:.3f} < {min_agreement:.2f}")
    if record:
        for k in keys:
            f = per_field[k]
            if f.train_agreement is not None and f.train_agreement < min_agreement:
                short.append(f"field {k!r} training agreement {f.train_agreement:.3f} < {min_agreement:.2f}")
    if short:
        rules = sum(1 for n in _nodes(program) if type(n) is A.If)
        return SynthResult(None, train_ag, held_ag, per_field, candidates,
                           "best program does not fit the witnesses: " + "; ".join(short)
                           + ("" if not rules else " (the answers do not follow rules over the mined predicates)"),
                           time.perf_counter() - t0, notes)
    return SynthResult(program, train_ag, held_ag, per_field, candidates, None, time.perf_counter() - t0, notes)


def _interp_agreement(program: A.Node, pairs: list[tuple[dict, Any]], notes: list[str], what: str) -> tuple[float, float]:
    """Agreement (0..1) of ``program`` with ``pairs`` under the reference interpreter; a deopt is
    a disagreement. Also returns the search-time evaluator's figure; a difference is noted."""
    agree = fast = 0
    for inp, ref in pairs:
        out = run_program(program, inp)
        if not out["deopt"] and _same(out["answer"], ref):
            agree += 1
        if _same(_answer(program, inp), ref):
            fast += 1
    if agree != fast:
        notes.append(f"{what}: the reference interpreter agrees on {agree} witnesses, the search-time "
                     f"evaluator on {fast}; the interpreter's figure is reported")
    n = max(1, len(pairs))
    return agree / n, fast / n
