"""The candidate pool of one synthesis problem: evaluation on the training witnesses with early
abort, finalists, and ranking (MDL score; with held-out witnesses the one-standard-error rule)."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from auto.canonical import canonical_json
from auto.models.program import ast as A
from auto.models.program.interp import ascii_lower, ascii_strip, ascii_upper, parse_float, parse_int

from .evaluate import _DEOPT, _answer, _same
from .mdl import _mdl_ratio, description_length
from .patterns import _rx

SLACK = 0.03
"""Finalists: the best-scoring candidates and those whose training agreement is within
``SLACK · n`` witnesses of the best (room for a few wrong reference labels)."""
FINALISTS = 16
"""At most this many finalists are ranked (best MDL score first)."""


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
                 wrong_cost: float, budget: _Budget, mdl_scale: float = 1.0, shared: dict | None = None):
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
        self.shared = shared if shared is not None else {}  # per synthesis: what depends on the texts only
        if "lower" not in self.shared:
            self.shared["lower"] = [ascii_lower(t) for t in self.texts]
            self.shared["upper"] = [ascii_upper(t) for t in self.texts]
        self.lower = self.shared["lower"]
        self.upper = self.shared["upper"]
        self.cands: list[_Cand] = []
        self.seen: set[A.Node] = set()
        self.count = 0
        self.best_agree = -1
        self.mdl_scale = mdl_scale
        self.ratio = mdl_scale * _mdl_ratio(self.n, len({canonical_json(r) for r in self.refs}))
        self.lists: dict[str, Any] | None = None  # the decision-list search's predicates (lists.py)
        self.split_cache: dict[tuple, Any] = {}  # fitted thresholds per (base, label) (covering.py)

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
