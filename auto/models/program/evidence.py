"""The evidence behind a program's answer, per part: what the program's guard decides from.

A program's answer is a record of *parts* (one per key) or a single part. Beside the answer the
artifact reports, for every part, which rule decided it and what stood behind that rule on this
input: ``{"rule": int, "kind": int}``, computed by an *evidence expression* of the same DSL over
the same field (:func:`build_evidence`; the artifact evaluates it after the program, sharing its
subexpressions, :mod:`auto.codegen.program_expr`).

``rule``
  * a decision list (:class:`~auto.models.program.ast.If` whose values are constants): the index of the
    case that fired (``0 .. m-1``), ``m`` for the default reached by elimination;
  * any other part (an extractor such as ``search``, ``parse_money(search(...))``): ``0`` when it
    produced a value, ``1`` when it is null (the extractor found nothing);
  * a constant: ``0``.

``kind`` (the first that applies, in the order 3, 1, 4, 5, 2; else 0)
  * ``0`` *supported*: the rule fired and nothing below applies;
  * ``1`` *contested*: a rule of another label fired as well (a later case, or the default
    label's own evidence), and no training witness decided by this rule had that rival fire too,
    so the precedence between the two was never witnessed; for an extractor, it found nothing
    although the witnessed evidence of a value (:func:`auto.models.program.synth.lists.presence_evidence`)
    fired;
  * ``2`` *default without evidence*: the default was reached by elimination and the default
    label's positive evidence (:func:`auto.models.program.synth.lists.default_evidence`, learned by the
    synthesizer) is false on this input;
  * ``3``, ``4``, ``5`` *split*: the witnesses do not decide the answer. The program is rewritten
    with its atoms in more specific forms that are *equivalent on every training witness* (points
    of the version space towards its specific boundary, T. Mitchell, "Generalization as search",
    1982), and answers differently: ``3`` at word starts (a keyword must start a word, an
    extraction must stand between non-word characters, a numeric threshold moves to either end
    of its witnessed gap — the interval of thresholds that classify every witness the same — or a
    quantity is read with another of the program's extractors that answers as the program does
    on every witness the program answers right: :func:`alternative_extractors`),
    ``4`` at whole words (a keyword must be a whole word), ``5`` at phrases (a keyword must occur
    inside the longest phrase around it that every witness containing it contains). The answer
    then rests on a generalization no witness tested.

Kinds 1 and 3–5 mark a generalization the witnesses did not test (:data:`UNWITNESSED_KINDS`): by
construction they occur on a training witness only where the program misfits it (a contest
against presence evidence learned with a few exceptions, an alternative extractor within the
synthesizer's slack); the guard deopts them. How often they occur on inputs like the witnesses (what that costs) is measured on
out-of-fold predictions.

An *event* is the pair ``(rule, kind)``. :func:`event_table` counts, on witnesses, how often each
event occurs and how often the part was right then; the guard (:mod:`auto.guards.program`) turns
that into a conformal novelty test and a confidence (the event's precision).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from auto.errors import AutoError
from auto.models.program import ast as A
from auto.models.program.interp import DeoptSignal, ascii_lower, make_evaluator, same_value, to_answer
from auto.models.program.pretty import render
from auto.models.program.regex import compile_regex
from auto.models.program.synth.patterns import _lit, py_pattern
from auto.models.program.synth.pool import SLACK
from auto.models.program.values import FLOAT_SCALE, Fixed

KIND_NAMES = ("supported", "contested", "default without evidence", "split", "split at whole words",
              "split at phrases")
"""``kind`` values 0..5 (module docstring)."""
SUPPORTED, CONTESTED, NO_DEFAULT_EVIDENCE, SPLIT_STEM, SPLIT_WORD, SPLIT_PHRASE = range(6)
_SPLIT_KIND = {"stem-lo": SPLIT_STEM, "stem-hi": SPLIT_STEM, "extractor": SPLIT_STEM, "word": SPLIT_WORD,
               "phrase": SPLIT_PHRASE}

_RX: dict[str, re.Pattern] = {}


def _py(pattern: str) -> re.Pattern:
    """Python ``re`` for a safe-subset pattern (``$`` = end of text), cached."""
    r = _RX.get(pattern)
    if r is None:
        if len(_RX) > 20000:
            _RX.clear()
        r = _RX[pattern] = re.compile(py_pattern(pattern), re.ASCII)
    return r


def _re_search(x: str, pattern: str, group: int) -> str | None:
    m = _py(pattern).search(x)
    return None if m is None or group > (m.re.groups or 0) else m.group(group)


_EV = make_evaluator(_re_search)
_EVM = make_evaluator(_re_search, memo=True)
_MISSING = object()


def _value(ev: Callable, node: A.Node, inp: dict) -> Any:
    try:
        return ev(node, inp)
    except DeoptSignal:
        return _MISSING
    except (AutoError, ValueError, TypeError, re.error, RecursionError):
        return _MISSING


def parts_of(program: A.Node) -> list[tuple[str, A.Node]]:
    """``(name, part program)`` of every part: a record's fields in order, else ``[("", program)]``."""
    if type(program) is A.Record:
        return list(program.fields)
    return [("", program)]


def _is_decision_list(p: A.Node) -> bool:
    return (type(p) is A.If and bool(p.cases) and all(type(v) is A.Const for _c, v in p.cases)
            and type(p.default) in (A.Const, A.Deopt))


def _disjuncts(cond: A.Node) -> list[A.Node]:
    return list(cond.items) if type(cond) is A.Or else [cond]


# ---- the version space's specific boundary --------------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+")
_WORD_PATTERN = re.compile(r"\\b([a-z0-9]+(?: [a-z0-9]+)*)\\b")


def _phrases(text: str, n_max: int = 3) -> set[str]:
    """Token-aligned phrases of 1..n_max tokens of a lower-cased text (gaps of 1-2 characters
    without digits between tokens, as the synthesizer mines them)."""
    toks = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    out = set()
    for j in range(len(toks)):
        for n in range(1, n_max + 1):
            if j + n > len(toks):
                break
            ok = all(0 < toks[j + q + 1][0] - toks[j + q][1] <= 2
                     and not any(ch.isdigit() for ch in text[toks[j + q][1]:toks[j + q + 1][0]])
                     for q in range(n - 1))
            if not ok:
                break
            out.add(text[toks[j][0]:toks[j + n - 1][1]])
    return out


def _literal(s: str) -> str:
    return _lit(s)


LEVELS = ("stem", "word", "phrase")
"""The granularities of a keyword's specific form (:func:`_keyword_variant`)."""


def _keyword_parts(atom: A.Node) -> tuple[str, bool, A.Node] | None:
    """``(keyword, is a whole-word pattern, the lowered text node)`` of a keyword atom, or None."""
    if type(atom) is A.Contains and type(atom.x) is A.Lower and atom.s:
        return atom.s, False, atom.x
    if (type(atom) is A.Not and type(atom.x) is A.IsNull and type(atom.x.x) is A.Search
            and type(atom.x.x.x) is A.Lower and atom.x.x.group == 0):
        m = _WORD_PATTERN.fullmatch(atom.x.x.pattern)
        if m is not None:
            return m.group(1), True, atom.x.x.x
    return None


def _keyword_variant(atom: A.Node, lowered: list[str], level: str) -> A.Node | None:
    """A more specific form of a keyword atom that fires on exactly the same lowered training texts,
    or None.

    ``level``: ``"stem"`` — ``contains(lower(f), w)`` as a word start, ``/\bw/``; ``"word"`` — as a
    whole word, ``/\bw\b/``; ``"phrase"`` — the longest token-aligned phrase of two or three
    tokens containing ``w`` that every text containing ``w`` contains (``/\bphrase/``; for a
    whole-word pattern ``/\bw\b/``, ``/\bphrase\b/``)."""
    kp = _keyword_parts(atom)
    if kp is None:
        return None
    w, bounded, low = kp
    if level in ("stem", "word"):
        if bounded:
            return None
        pattern = r"\b" + _literal(w) + (r"\b" if level == "word" else "")
    else:
        wrx = _py(r"\b" + _literal(w) + r"\b")
        pos = [t for t in lowered if (wrx.search(t) if bounded else w in t)]
        if not pos:
            return None
        common: set[str] | None = None
        for t in pos:
            cand = {q for q in _phrases(t) if " " in q or not q.isalnum()}
            cand = {q for q in cand if (wrx.search(q) if bounded else w in q) and q != w}
            common = cand if common is None else common & cand
            if not common:
                return None
        best = max(common, key=lambda q: (len(q), q))
        pattern = r"\b" + _literal(best) + (r"\b" if bounded else "")
    try:
        compile_regex(pattern)
    except AutoError:
        return None
    rx = _py(pattern)
    base = [bool(_py(r"\b" + _literal(w) + r"\b").search(t)) if bounded else (w in t) for t in lowered]
    if [bool(rx.search(t)) for t in lowered] != base:
        return None
    return A.Not(A.IsNull(A.Search(low, pattern)))


TERMINATOR = r"(?:[^\w.]|\.(?:\W|$)|$)"
"""What a most specific extraction must be followed by: a character that is neither a word character
nor ``.``, a ``.`` that ends a sentence, or the end of the text (so ``$2.5k`` and ``ORD-12345X``
are not read as ``$2`` and ``ORD-12345``)."""
def _leader(pattern: str) -> str | None:
    """The zero-width assertion that the match is not preceded by a word character: ``\\b`` before a
    pattern that starts with a literal word character, ``\\B`` before one that starts with a literal
    non-word character (``\\$``); None when the first character is not a literal. Zero-width, so the
    artifact's first-byte skip still applies."""
    if not pattern:
        return None
    c = pattern[0]
    if c == "\\" and len(pattern) > 1 and pattern[1] in "$.()[]{}|*+?^\\-":
        return "\\B"
    if c.isascii() and (c.isalnum() or c == "_"):
        return "\\b"
    return None


def _search_variant(node: A.Search, inputs: list[dict]) -> A.Search | None:
    """The most specific form of an extractor that finds the same value on every training input:
    the pattern not preceded by a word character (:func:`_leader`) and followed by
    :data:`TERMINATOR`, or followed only, or not preceded only; None when none of them is
    equivalent."""
    p, g = node.pattern, node.group
    wrap_g = g if g > 0 else 1
    core = "(?:" + p + ")" if g > 0 else "(" + p + ")"
    lead = _leader(p)
    cands = []
    if lead is not None:
        cands.append(lead + core + TERMINATOR)
    cands.append(core + TERMINATOR)
    if lead is not None:
        cands.append(lead + core)
    bases = [_value(_EV, node.x, inp) for inp in inputs]
    want = [_value(_EV, node, inp) for inp in inputs]
    want = [None if w is _MISSING else w for w in want]
    for q in cands:
        try:
            if compile_regex(q).ngroups < wrap_g:
                continue
        except AutoError:
            continue
        got = [None if b is None or b is _MISSING else _re_search(b, q, wrap_g) for b in bases]
        if got == want:
            return A.Search(node.x, q, wrap_g)
    return None


def _units(v: Any) -> int | None:
    if isinstance(v, Fixed):
        return int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


def _number(units: int, is_float: bool) -> int | float:
    if not is_float:
        return units
    return units // FLOAT_SCALE if units % FLOAT_SCALE == 0 else units / FLOAT_SCALE


def _threshold_ends(node: A.Compare, inputs: list[dict]) -> tuple[Any, Any] | None:
    """The two ends of the witnessed gap of a numeric threshold: ``(theta_lo, theta_hi)`` that
    classify every training input as ``node`` does, at the gap's two ends; None without a gap on
    both sides or for ``eq`` / ``ne``."""
    if node.op not in ("lt", "le", "gt", "ge") or isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
        return None
    vals = [_value(_EV, node.x, inp) for inp in inputs]
    vals = [v for v in vals if v is not None and v is not _MISSING]
    if not vals:
        return None
    is_float = any(isinstance(v, Fixed) for v in vals)
    us = sorted({_units(v) for v in vals if _units(v) is not None})
    theta = node.value
    t = round(theta * FLOAT_SCALE) if is_float else (theta if isinstance(theta, int) else None)
    if t is None:
        return None
    step = 1
    if node.op in ("lt", "ge"):  # v < theta: every theta' in (a, b] classifies the witnesses alike
        below = [u for u in us if u < t]
        above = [u for u in us if u >= t]
        if not below or not above:
            return None
        lo, hi = below[-1] + step, above[0]
    else:  # v <= theta: every theta' in [a, b)
        below = [u for u in us if u <= t]
        above = [u for u in us if u > t]
        if not below or not above:
            return None
        lo, hi = below[-1], above[0] - step
    if is_float and (abs(lo) >= 10 ** 18 or abs(hi) >= 10 ** 18):
        return None
    return _number(lo, is_float), _number(hi, is_float)


def _rebuild(node: Any, f: Callable[[A.Node], A.Node | None]) -> Any:
    """``node`` with every sub-node ``n`` for which ``f(n)`` is not None replaced by it (the
    replacement is not descended into); unchanged subtrees are the same objects."""
    r = f(node) if type(node) in A.NODE_TYPES else None
    if r is not None:
        return r
    t = type(node)
    if t in A.NODE_TYPES:
        changed = False
        kw = {}
        for name in node.__dataclass_fields__:
            v = getattr(node, name)
            nv = _rebuild(v, f)
            changed = changed or nv is not v
            kw[name] = nv
        return t(**kw) if changed else node
    if isinstance(node, tuple):
        items = tuple(_rebuild(x, f) for x in node)
        return items if any(a is not b for a, b in zip(items, node)) else node
    return node


def specific_variants(program: A.Node, inputs: list[dict], field: str) -> list[tuple[str, A.Node]]:
    """The program at the specific boundary of its version space, at several granularities, each
    equal to the program on every input of ``inputs``: ``[(level, variant), ...]`` for the levels
    where some atom changed (module docstring, kinds 3-5):

    * ``"stem-lo"`` / ``"stem-hi"``: keywords as word starts, extractors between :data:`LEADER` and
      :data:`TERMINATOR`, thresholds at the low / high end of their witnessed gaps;
    * ``"word"``: keywords as whole words;
    * ``"phrase"``: keywords as the longest phrase common to every witness containing them.
    """
    lowered = [ascii_lower(inp[field]) for inp in inputs]
    search: dict[A.Node, A.Node] = {}
    ends: dict[A.Node, tuple[Any, Any]] = {}
    keyword: dict[str, dict[A.Node, A.Node]] = {lv: {} for lv in LEVELS}
    for n in A.walk(program):
        t = type(n)
        if n in search or n in ends or any(n in keyword[lv] for lv in LEVELS):
            continue
        if _keyword_parts(n) is not None:
            for lv in LEVELS:
                v = _keyword_variant(n, lowered, lv)
                if v is not None:
                    keyword[lv][n] = v
        elif t is A.Search and type(n.x) is not A.Lower:
            v = _search_variant(n, inputs)
            if v is not None:
                search[n] = v
        elif t is A.Compare:
            e = _threshold_ends(n, inputs)
            if e is not None and (e[0] != n.value or e[1] != n.value):
                ends[n] = e

    def rewrite(kw: dict[A.Node, A.Node], with_search: bool, end: int | None) -> Callable[[A.Node], A.Node | None]:
        def f(n: A.Node) -> A.Node | None:
            if n in kw:
                return kw[n]
            if with_search and n in search:
                return search[n]
            if end is not None and n in ends:
                return A.Compare(n.op, _rebuild(n.x, f), ends[n][end])
            return None
        return f

    out = []
    for name, kw, ws, end in (("stem-lo", keyword["stem"], True, 0), ("stem-hi", keyword["stem"], True, 1),
                              ("word", keyword["word"], False, None), ("phrase", keyword["phrase"], False, None)):
        v = _rebuild(program, rewrite(kw, ws, end))
        if v is not program and all(v != w for _n, w in out):
            out.append((name, v))
    return out


_EXTRACTORS = (A.ParseMoney, A.ParseFloat, A.ParseInt, A.Search)


def alternative_extractors(program: A.Node, inputs: list[dict], refs: list[Any]) -> list[tuple[str, A.Node]]:
    """Programs that read a quantity with another of the program's own extractors (``parse_money``
    of the first ``$`` amount where the program also reads the last one, ...) and fit the training
    witnesses about as well as the program: ``[("extractor", variant), ...]``.

    A variant belongs when its training agreement is within :data:`auto.models.program.synth.SLACK` of
    the witnesses of the program's: the tolerance the synthesizer gives its finalists (room for a
    few wrong reference labels), i.e. the Rashomon set of near-optimal models (L. Semenova,
    C. Rudin, R. Parr, "On the existence of simpler machine learning models", 2022) restricted to
    these rewrites. Where such a variant answers differently the witnesses do not decide which
    reading is meant — two amounts in one request, say (kind 3)."""
    exts: list[A.Node] = []
    for n in A.walk(program):
        if type(n) in _EXTRACTORS and n not in exts and not any(n in set(A.walk(e)) for e in exts):
            exts.append(n)
    if len(exts) < 2 or not inputs:
        return []

    def agree(prog: A.Node) -> int:
        return sum(same_answer(_value(_EV, prog, inp), ref) for inp, ref in zip(inputs, refs))

    base = agree(program)
    tol = SLACK * len(inputs)
    out = []
    for a in exts:
        for b in exts:
            if a is b or type(a) is not type(b):
                continue
            v = _rebuild(program, lambda node, _a=a, _b=b: _b if node == _a else None)
            if v != program and all(v != w for _k, w in out) and agree(v) >= base - tol - 1e-9:
                out.append(("extractor", v))
    return out


# ---- contests ---------------------------------------------------------------------------------------

def _fires(ev: Callable, node: A.Node, inp: dict) -> bool:
    return _value(ev, node, inp) is True


def _contest_expr(cases: list[tuple[A.Node, A.Node]], default: A.Node, dev: A.Node | None,
                  inputs: list[dict]) -> A.Node:
    """``contested`` of a decision list (kind 1): true when the case that fired has a firing rival
    disjunct (of a later case with another label, or of the default label's evidence) that never
    fired on a training input decided by that case together with the deciding case's firing
    disjuncts."""
    labels = [v.value for _c, v in cases]
    dis = [_disjuncts(c) for c, _v in cases]
    dlabel = default.value if type(default) is A.Const else None
    dev_dis = _disjuncts(dev) if dev is not None else []
    rivals: list[list[A.Node]] = []
    for k in range(len(cases)):
        r = [d for j in range(k + 1, len(cases)) if labels[j] != labels[k] for d in dis[j]]
        if dlabel is not None and labels[k] != dlabel:
            r += dev_dis
        seen = []
        for d in r:
            if d not in seen:
                seen.append(d)
        rivals.append(seen)
    # witnessed[k][rival] = the deciding disjuncts of case k seen firing with that rival
    witnessed: list[dict[A.Node, set[int]]] = [defaultdict(set) for _ in cases]
    for inp in inputs:
        k = next((i for i, (c, _v) in enumerate(cases) if _fires(_EV, c, inp)), None)
        if k is None or not rivals[k]:
            continue
        fired = [i for i, d in enumerate(dis[k]) if _fires(_EV, d, inp)]
        for r in rivals[k]:
            if _fires(_EV, r, inp):
                witnessed[k][r].update(fired)
    out_cases = []
    for k, (cond, _v) in enumerate(cases):
        terms = []
        for r in rivals[k]:
            w = sorted(witnessed[k].get(r, ()))
            if len(w) == len(dis[k]):
                continue  # every deciding disjunct was seen with this rival: never contested
            if not w:
                terms.append(r)
            else:
                cover = [dis[k][i] for i in w]
                terms.append(A.And((r, A.Not(cover[0] if len(cover) == 1 else A.Or(tuple(cover))))))
        value = A.Const(False) if not terms else (terms[0] if len(terms) == 1 else A.Or(tuple(terms)))
        out_cases.append((cond, value))
    while out_cases and out_cases[-1][1] == A.Const(False):
        out_cases.pop()
    if not out_cases:
        return A.Const(False)
    return A.If(tuple(out_cases), A.Const(False))


# ---- the evidence expression ------------------------------------------------------------------------

@dataclass(frozen=True)
class PartEvidence:
    """One part's evidence.

    Attributes:
        name: the record key (``""`` for a scalar answer).
        shape: ``"rules"`` (a decision list), ``"value"`` (an extractor) or ``"const"``.
        rules: the label (decision list) or outcome (``"value"`` / ``"null"``) of each rule id.
        rule_text: the readable condition of each rule id (for ``auto inspect``).
        expr: the part's evidence expression, ``record {kind: int, rule: int}``.
        specific: the levels of :func:`specific_variants` at which the part has a more specific
            equivalent form (empty: no split test).
        default_evidence: the default label's evidence condition used, or None.
    """

    name: str
    shape: str
    rules: tuple[Any, ...]
    rule_text: tuple[str, ...]
    expr: A.Node
    specific: tuple[str, ...]
    default_evidence: A.Node | None


@dataclass(frozen=True)
class ProgramEvidence:
    """A program's evidence: one :class:`PartEvidence` per part and the whole evidence expression
    (``record {<part name>: record {kind, rule}, ...}``)."""

    parts: tuple[PartEvidence, ...]
    expr: A.Node

    def describe(self) -> list[dict[str, Any]]:
        """JSON-able summary per part (no expressions)."""
        return [{"name": p.name, "shape": p.shape, "rules": list(p.rules), "specific_levels": list(p.specific),
                 "default_evidence": render(p.default_evidence) if p.default_evidence is not None else None}
                for p in self.parts]


def _clip(text: str, n: int = 160) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[:n - 1] + "…"


def _part_evidence(name: str, p: A.Node, inputs: list[dict], refs: list[Any], field: str,
                   dev: A.Node | None) -> PartEvidence:
    variants = specific_variants(p, inputs, field) + alternative_extractors(p, inputs, refs)
    splits: list[tuple[A.Node, A.Node]] = []  # (condition, kind), in kind priority
    for kind in (SPLIT_STEM, SPLIT_WORD, SPLIT_PHRASE):
        vs = [v for lv, v in variants if _SPLIT_KIND[lv] == kind]
        if vs:
            same = [A.Same(p, v) for v in vs]
            splits.append((A.Not(same[0] if len(same) == 1 else A.And(tuple(same))), A.Const(kind)))
    if _is_decision_list(p):
        cases = list(p.cases)
        m = len(cases)
        rule = A.If(tuple((c, A.Const(i)) for i, (c, _v) in enumerate(cases)), A.Const(m))
        contested = _contest_expr(cases, p.default, dev, inputs)
        kcases = [c for c in splits if c[1] == A.Const(SPLIT_STEM)]
        if contested != A.Const(False):
            kcases.append((contested, A.Const(CONTESTED)))
        kcases += [c for c in splits if c[1] != A.Const(SPLIT_STEM)]
        if type(p.default) is A.Const:
            elim = A.Compare("eq", rule, m)
            kcases.append((elim if dev is None else A.And((elim, A.Not(dev))), A.Const(NO_DEFAULT_EVIDENCE)))
        kind: A.Node = A.If(tuple(kcases), A.Const(SUPPORTED)) if kcases else A.Const(SUPPORTED)
        labels = tuple([v.value for _c, v in cases] + [p.default.value if type(p.default) is A.Const else None])
        texts = tuple([_clip(render(c)) for c, _v in cases] + ["else (by elimination)"])
        shape = "rules"
    elif type(p) is A.Const:
        rule, kind, labels, texts, shape = A.Const(0), A.Const(SUPPORTED), (p.value,), ("constant",), "const"
        dev = None
    else:
        rule = A.If(((A.IsNull(p), A.Const(1)),), A.Const(0))
        kcases = list(splits)
        if dev is not None:  # null although the witnessed evidence of a value fired: contested
            kcases.insert(1 if splits and splits[0][1] == A.Const(SPLIT_STEM) else 0,
                          (A.And((A.IsNull(p), dev)), A.Const(CONTESTED)))
        kind = A.If(tuple(kcases), A.Const(SUPPORTED)) if kcases else A.Const(SUPPORTED)
        labels, texts, shape = ("value", "null"), (_clip(render(p)), "null (nothing found)"), "value"
    expr = A.Record((("kind", kind), ("rule", rule)))
    return PartEvidence(name, shape, labels, texts, expr, tuple(lv for lv, _v in variants), dev)


def specific_condition(cond: A.Node, inputs: Sequence[dict], field: str) -> A.Node:
    """``cond`` with each keyword atom in its most specific form among whole word and word start
    that fires on the same training inputs (positive evidence should not fire on a keyword inside
    another word, as ``put`` in ``kaputt``); atoms without such a form are kept."""
    lowered = [ascii_lower(inp[field]) for inp in inputs]
    memo: dict[A.Node, A.Node | None] = {}

    def f(n: A.Node) -> A.Node | None:
        if _keyword_parts(n) is None:
            return None
        if n not in memo:
            memo[n] = _keyword_variant(n, lowered, "word") or _keyword_variant(n, lowered, "stem")
        return memo[n]

    return _rebuild(cond, f)


UNWITNESSED_KINDS = (CONTESTED, SPLIT_STEM, SPLIT_WORD, SPLIT_PHRASE)
"""Kinds that mark an unwitnessed generalization (a contest is a precedence, or a missing value
against its evidence, the witnesses never showed; a split a generalization no witness tested): the guard deopts them whatever their frequency."""


def build_evidence(program: A.Node, witnesses: Sequence[tuple[dict, Any]], field: str,
                   default_evidence: dict[str, A.Node | None] | None = None) -> ProgramEvidence:
    """The evidence expression of ``program`` (module docstring), built from the training witnesses.

    Args:
        program: the synthesized program (without its witnessed-domain guard).
        witnesses: the training witnesses ``(input, reference answer)`` the program was
            synthesized from (the version space and the contests are measured on them).
        field: the input field the program reads.
        default_evidence: per part name, the default label's evidence condition from synthesis
            (:attr:`auto.models.program.synth.FieldResult.default_evidence`), or None.

    Returns:
        A :class:`ProgramEvidence`; its ``expr`` reads only ``field`` and never deopts.
    """
    inputs = [w[0] for w in witnesses]
    dev = {k: specific_condition(v, inputs, field) for k, v in (default_evidence or {}).items() if v is not None}
    parts = []
    for name, p in parts_of(program):
        refs = [(w[1].get(name) if isinstance(w[1], dict) else None) if name else w[1] for w in witnesses]
        parts.append(_part_evidence(name, p, inputs, refs, field, dev.get(name)))
    parts = tuple(parts)
    expr = A.Record(tuple((pe.name, pe.expr) for pe in parts))
    return ProgramEvidence(parts, expr)


def events(evidence: ProgramEvidence, inp: dict) -> dict[str, tuple[int, int]] | None:
    """``{part name: (rule, kind)}`` of ``evidence`` on ``inp`` (search-time evaluator, memoized),
    or None when it cannot be evaluated."""
    v = _value(_EVM, evidence.expr, inp)
    if not isinstance(v, dict):
        return None
    return {k: (int(e["rule"]), int(e["kind"])) for k, e in v.items()}


def evaluate_fast(program: A.Node, inp: dict) -> tuple[bool, Any]:
    """``(deopt, value)`` of ``program`` on ``inp`` with the search-time evaluator (Python ``re``,
    which agrees with the Pike VM on the safe subset); a program that fails to evaluate counts as
    a deopt."""
    v = _value(_EVM, program, inp)
    return (True, None) if v is _MISSING else (False, v)


def part_answers(program: A.Node, inp: dict) -> dict[str, Any] | None:
    """Every part's value (interpreter value) on ``inp``, or None when the program deopts or fails."""
    out = {}
    for name, p in parts_of(program):
        v = _value(_EV, p, inp)
        if v is _MISSING:
            return None
        out[name] = v
    return out


def same_answer(value: Any, reference: Any) -> bool:
    """Whether an interpreter value is the JSON answer ``reference`` (1 != 1.0 != true)."""
    a = to_answer(value)
    if type(a) is not type(reference):
        return False
    if isinstance(a, float):
        return a == reference
    return same_value(a, reference) if isinstance(a, (dict, list)) else a == reference


@dataclass(frozen=True)
class EventTable:
    """Per part, how often each event ``(rule, kind)`` occurred on witnesses and how often the part
    was right then. ``n``: the witnesses counted."""

    n: int
    counts: dict[str, Counter]
    right: dict[str, Counter]
    _loo: dict[str, list[float]] = field(default_factory=dict, compare=False, repr=False)

    def support(self, part: str, event: tuple[int, int]) -> int:
        """Witnesses on which ``event`` occurred for ``part``."""
        return self.counts.get(part, Counter()).get(event, 0)

    def precision(self, part: str, event: tuple[int, int]) -> float:
        """The Laplace-smoothed share ``(right + 1) / (support + 2)`` of witnesses the part was
        right on when ``event`` occurred (P. Clark and R. Boswell, 1991: the rule quality of CN2);
        0.5 for an event never seen."""
        c = self.support(part, event)
        return (self.right.get(part, Counter()).get(event, 0) + 1) / (c + 2)

    def loo_scores(self, part: str) -> list[float]:
        """Every counted witness's leave-one-out nonconformity for ``part``, ascending: for a
        witness whose event occurred ``c`` times, ``1 - (c - 1) / (n - 1)`` (its event's share among
        the other ``n - 1`` witnesses; a new input's is ``1 - c / n`` against all ``n``, the
        jackknife form of a conformal score), rounded to 9 digits."""
        if part in self._loo:
            return self._loo[part]
        if self.n <= 1:
            return [1.0] * self.n
        out = []
        for _e, c in self.counts.get(part, Counter()).items():
            out += [round(1.0 - (c - 1) / (self.n - 1), 9)] * c
        self._loo[part] = sorted(out)
        return self._loo[part]

    def to_dict(self) -> dict[str, Any]:
        """``{"n", "parts": {name: [{"rule", "kind", "support", "right"}, ...]}}`` sorted by event."""
        return {"n": self.n, "parts": {name: [{"rule": r, "kind": k, "support": c, "right": self.right[name].get((r, k), 0)}
                                               for (r, k), c in sorted(cnt.items())]
                                       for name, cnt in self.counts.items()}}


def event_table(evidence: ProgramEvidence, program: A.Node, witnesses: Iterable[tuple[dict, Any]]) -> EventTable:
    """Count the events of ``evidence`` on ``witnesses`` (``(input, reference answer)``) and whether
    each part of ``program`` was right (a record's parts against the reference's keys)."""
    counts: dict[str, Counter] = {p.name: Counter() for p in evidence.parts}
    right: dict[str, Counter] = {p.name: Counter() for p in evidence.parts}
    n = 0
    for inp, ref in witnesses:
        ev = events(evidence, inp)
        vals = part_answers(program, inp)
        if ev is None or vals is None:
            continue
        n += 1
        for name, e in ev.items():
            counts[name][e] += 1
            want = ref.get(name) if name and isinstance(ref, dict) else ref
            right[name][e] += int(same_answer(vals[name], want))
    return EventTable(n, counts, right)


__all__ = ["CONTESTED", "KIND_NAMES", "LEVELS", "NO_DEFAULT_EVIDENCE", "SPLIT_PHRASE", "SPLIT_STEM", "SPLIT_WORD", "SUPPORTED", "UNWITNESSED_KINDS", "EventTable", "PartEvidence",
           "ProgramEvidence", "build_evidence", "evaluate_fast", "event_table", "events", "part_answers", "parts_of",
           "same_answer", "specific_condition", "specific_variants"]
