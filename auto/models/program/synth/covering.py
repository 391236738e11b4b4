"""Sequential covering: the rules of a precedence decision list, one at a time (CN2: P. Clark and
T. Niblett, 1989; RIPPER: W. Cohen, 1995)."""

from __future__ import annotations

import heapq
import math
from typing import Callable

from .pool import _Part
from .predicates import _Extractor, _popcount, _Pred, _split_preds

# Precedence lists: a default label chosen first, rules ranked by Laplace precision.


def _laplace(tp: int, c: int) -> float:
    """Laplace-corrected precision ``(tp + 1) / (c + 2)`` of a rule covering ``c`` witnesses, ``tp``
    of them with its label: the rule quality of CN2 (P. Clark and R. Boswell, 1991). A rule that
    covers few witnesses scores low even when it is pure, so it has to pay for itself."""
    return (tp + 1) / (c + 2)


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


def _cached_splits(part: _Part, base: int, lm: int, extractors: list[_Extractor], min_support: int,
                   tol: float) -> list[_Pred]:
    """:func:`_split_preds` of ``base`` for the label mask ``lm``, cached on ``part`` (thresholds
    depend only on the base, label mask, support, tolerance and extractors; the cache is emptied
    past 50,000 entries)."""
    cache = part.split_cache
    key = (base, lm, min_support, tol, tuple(id(e) for e in extractors))
    got = cache.get(key)
    if got is None:
        if len(cache) > 50_000:
            cache.clear()
        got = cache[key] = _split_preds(base, extractors, lm, min_support, part.n, tol)
    return got


def _candidate_rules(live: list[tuple[_Pred, int]], rem: int, lm: int, split: Callable[[int, int], list[_Pred]],
                     min_support: int, pairs: bool):
    """The candidate conditions of one covering step for the label mask ``lm`` over the remaining
    witnesses ``rem``, as ``(comps, covered mask, size, text)``: each live predicate and fitted
    threshold; among the :data:`POOL` impure ones with most positives, pairs (with ``pairs``) and a
    predicate with a threshold fitted inside it (the first half); and for the first 8 (with
    ``pairs``), the predicate without the 8 negatable predicates that remove most of its wrong
    witnesses."""
    scored = []
    for p, cov in live + [(t, t.mask & rem) for t in split(rem, lm)]:
        tp = _popcount(cov & lm)
        if tp < min_support:
            continue
        c = _popcount(cov)
        yield [(p, False)], cov, p.size, p.text
        if c > tp:  # impure: a second condition may help
            scored.append((-tp, c, p.size, p.text, p))
    pool = [x[-1] for x in heapq.nsmallest(POOL, scored)]
    for a_i, pa in enumerate(pool):
        ma = pa.mask & rem
        for pb in pool[a_i + 1:] if pairs else ():
            yield [(pa, False), (pb, False)], ma & pb.mask, 1 + pa.size + pb.size, pa.text + "&" + pb.text
        if a_i >= POOL // 2:
            continue
        for pt in split(ma, lm):
            yield [(pa, False), (pt, False)], ma & pt.mask, 1 + pa.size + pt.size, pa.text + "&" + pt.text
    for pa in pool[:8] if pairs else ():
        ma = pa.mask & rem
        fp_a = ma & ~lm
        # negations that remove some of pa's wrong witnesses
        negs = [(-_popcount(pb.mask & fp_a), pb.size, pb.text, pb) for pb, cov in live
                if pb.neg_ok and cov & fp_a and pb is not pa]
        for _k, _s, _t, pb in heapq.nsmallest(8, negs):
            yield [(pa, False), (pb, True)], ma & ~pb.mask, 2 + pa.size + pb.size, pa.text + "&!" + pb.text


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

    def split(base: int, lm: int) -> list[_Pred]:
        return _cached_splits(part, base, lm, extractors, min_support, tol)

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

            for comps, cov, size, text in _candidate_rules(live, rem, lm, split, min_support, pairs):
                c = _popcount(cov)
                tp = _popcount(cov & lm)
                if tp < min_support or tp < (1 - tol) * c - 1e-9 or _lrs(tp, c, share) < LRS_MIN:
                    continue
                if gain_ratio is None:
                    key = (_laplace(tp, c), tp, -size)
                else:
                    gain = tp - fp_cost * (c - tp) - gain_ratio * size
                    if gain <= 0:
                        continue
                    key = (gain, _laplace(tp, c), -size)
                if _outranks(key, text, best):
                    best = (key, comps, lab, cov, text)
        if best is None:
            if rare_first:
                queue.pop(0)
                continue
            break
        rules.append((best[1], best[2]))
        rem &= ~best[3]
    return rules
