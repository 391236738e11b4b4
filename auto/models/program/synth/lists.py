"""Categorical answers: precedence decision lists (:class:`~auto.models.program.ast.If`) learned by
sequential covering (:mod:`.covering`), their thresholds refitted to round numbers, tidied,
pruned by description length, and built into programs."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from typing import Any

from auto.canonical import canonical_json
from auto.models.program import ast as A
from auto.models.program.values import FLOAT_SCALE

from .covering import _learn_precedence
from .mdl import _mdl_ratio, description_length
from .pool import _Part
from .predicates import _const_number, _keyword_preds, _mask, _number_extractors, _popcount, _Pred, _roundest

MAX_LABELS = 24
"""Answers with more distinct values than this are not treated as categorical."""
PRECEDENCE_DEFAULTS = 6
"""Precedence lists are learned with each of this many most frequent labels as the default."""
PRECEDENCE_SUPPORT = 0.005
"""Default minimum support of a precedence-list rule, as a share of the training witnesses (2 of
400); its rules must also pass the significance test (:data:`~.covering.LRS_MIN`) and pay for
their description length."""

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


def _rule_mask(comps, full: int) -> int:
    """The training witnesses a rule's conjunction of components covers (a mask)."""
    m = full
    for p, neg, q in comps:
        m &= _comp_mask(p, neg, q, full)
    return m


def _rules_agreement(rules, default: str | None, lab_mask: dict[str, int], full: int) -> int:
    """Training agreement of the decision list ``rules`` (each ``(components, label)``) with
    ``default`` as its last answer (None: deopt)."""
    return _list_agreement([_rule_mask(c, full) for c, _lab in rules], [lab for _c, lab in rules],
                           default, lab_mask, full)


def _polish(rules, default: str | None, lab_mask: dict[str, int], n: int):
    """Refit every threshold of a learned list without losing training agreement: widen its
    interval to every θ that keeps the list's training agreement, and take the roundest number
    in it (``amount < 500`` rather than ``< 395``).

    Returns the polished rules as ``[([(pred, negated, theta_units | None), ...], label)]``.
    """
    full = (1 << n) - 1
    rs = [([(p, neg, _theta_units(p)) for p, neg in comps], lab) for comps, lab in rules]

    def agreement(rr):
        return _rules_agreement(rr, default, lab_mask, full)

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


def _regroup(rs, default: str | None, lab_mask: dict[str, int], n: int, ratio: float):
    """Tidy a polished list, then drop the rules that do not pay for themselves:

    1. move each rule up to just after the last earlier rule of its label (so one label's rules
       merge into one ``Or``) when no training witness it covers is covered by a rule it passes
       (so the order between them was never witnessed);
    2. drop each rule (last first) whose removal costs fewer training witnesses than its
       description length is worth (``ratio`` witnesses per unit, :func:`_mdl_ratio`).
    """
    full = (1 << n) - 1

    def agreement(rr):
        return _rules_agreement(rr, default, lab_mask, full)

    rs = list(rs)
    base = agreement(rs)
    for k in range(1, len(rs)):
        lab = rs[k][1]
        last = max((j for j in range(k) if rs[j][1] == lab), default=None)
        if last is None or last + 1 == k:
            continue
        mk = _rule_mask(rs[k][0], full)
        if all(not (mk & _rule_mask(rs[j][0], full)) for j in range(last + 1, k)):
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
    ratio = part.mdl_scale * _mdl_ratio(n, len(labels))
    part.lists = {"keys": keys, "value_of": value_of, "lab_mask": lab_mask, "singles": singles,
                  "extractors": extractors, "min_support": ms}
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


def default_evidence(part: _Part, default: Any, max_rules: int) -> A.Node | None:
    """Positive evidence for a decision list's default label: the rules sequential covering learns
    for ``default`` alone (``default`` against every other label, pure rules, the predicates of
    the list search), as one condition (an ``Or`` of the rules), or None when no admissible rule
    exists (the default label is then defined by the absence of the other labels' cues, as a
    "normal" urgency is).

    A default that a new input reaches by elimination (no rule fired) while this condition is
    false has no positive evidence on that input; the program's guard
    (:mod:`auto.models.program.evidence`) reports it.
    """
    ctx = part.lists
    if ctx is None:
        return None
    key = canonical_json(default)
    if key not in ctx["lab_mask"]:
        return None
    rules = _learn_precedence(part, [key], ctx["lab_mask"], ctx["singles"], ctx["extractors"], ctx["min_support"],
                              0.0, max_rules, pairs=False)
    conds = [_rule_node([(p, neg, _theta_units(p)) for p, neg in comps]) for comps, _lab in rules]
    if not conds:
        return None
    return conds[0] if len(conds) == 1 else A.Or(tuple(conds))


def presence_evidence(part: _Part, max_rules: int) -> A.Node | None:
    """Positive evidence that a value part (an extractor) has a value: the keyword rules sequential
    covering learns for "the answer is not null" against "null" (pure rules), as one condition, or
    None when the part is never null, always null, or no admissible rule exists.

    An extractor that finds nothing on a new input while this condition holds (``charged`` with no
    amount the extractor can read, as in ``charged fifty-eight dollars``) answers null against the
    witnessed evidence; the program's guard (:mod:`auto.models.program.evidence`) reports it.
    """
    present = [r is not None for r in part.refs]
    if all(present) or not any(present):
        return None
    n = part.n
    ms = max(2, round(PRECEDENCE_SUPPORT * n))
    keys = ["1" if p else "0" for p in present]
    lab_mask = {k: _mask([kk == k for kk in keys]) for k in ("0", "1")}
    by_mask: dict[int, _Pred] = {}
    for p in _keyword_preds(part, ms):
        q = by_mask.get(p.mask)
        if q is None or (p.size, p.text) < (q.size, q.text):
            by_mask[p.mask] = p
    singles = sorted(by_mask.values(), key=lambda p: (p.size, p.text))
    rules = _learn_precedence(part, ["1"], lab_mask, singles, [], ms, 0.0, max_rules, pairs=False)
    conds = [_rule_node([(p, neg, _theta_units(p)) for p, neg in comps]) for comps, _lab in rules]
    if not conds:
        return None
    return conds[0] if len(conds) == 1 else A.Or(tuple(conds))


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
