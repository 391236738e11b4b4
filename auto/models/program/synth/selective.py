"""A record field that deopts where it is unsure: the per-field choice of a part program.

A record compiles *per field* (:func:`auto.models.program.synth.synthesize` with ``per_field``) when
some field has no program that reproduces its training witnesses: that field's part may still
answer where it is right and deopt elsewhere, and the whole record then answers at tier-1 exactly
when every field answers (any field's deopt deopts the record; the reference answers it whole).

:func:`selective_part` picks, among the candidates the part's search evaluated, plus each
extractor made to deopt where it finds nothing (``if is_null(x) -> deopt else -> x``, when no
training answer of the field is null), the one that answers the most training witnesses with a
precision ``agree / (agree + wrong)`` of at least the synthesizer's ``min_agreement`` (a deopt
is neither: the ranking's convention, :mod:`auto.models.program.synth`). Deopt-default decision
lists (learned for every categorical part) are such candidates: they answer only where a rule
fires. Among those, the best by the synthesizer's score ``agree - wrong_cost * wrong`` wins; the
driver takes it in place of the field's best program when it scores better.

A *categorical* field (:func:`categorical`: a few labels, each witnessed more than once) computed
by an extractor rather than by a list of labels is closed over its witnessed values
(:func:`closed_part`: ``lookup(x) {value -> value, ...} else deopt``): an extracted text no
witness had as that field's answer (``dollars`` where the witnesses all said ``USD``, ``EUR``, …)
is a generalization no witness tested, and deopts.
"""

from __future__ import annotations

from collections import Counter

from auto.canonical import canonical_json
from auto.models.program import ast as A

from .evaluate import _DEOPT
from .lists import MAX_LABELS
from .pool import _Cand, _Part
from .results import FieldResult

MAX_SINGLETON_SHARE = 0.1
"""A field whose once-witnessed values are on more than this share of the witnesses is
open-valued (an id unique per input), not categorical."""
SELECTIVE_EXTRACTORS = 8
"""How many of the part's best extractors (most training witnesses right first) get a
deopt-where-null variant."""


def categorical(values: list) -> bool:
    """Whether a field's witnessed values are labels: scalars other than non-integral numbers, at
    most :data:`~auto.models.program.synth.lists.MAX_LABELS` distinct ones, and at most
    :data:`MAX_SINGLETON_SHARE` of the witnesses carrying a value witnessed only once."""
    if not values or not all(v is None or isinstance(v, (str, bool, int)) for v in values):
        return False
    counts = Counter(canonical_json(v) for v in values)
    once = sum(1 for c in counts.values() if c == 1)
    return len(counts) <= MAX_LABELS and once <= MAX_SINGLETON_SHARE * len(values)


def _labels_only(p: A.Node) -> bool:
    if type(p) is A.Const:
        return True
    return (type(p) is A.If and all(type(v) is A.Const for _c, v in p.cases)
            and type(p.default) in (A.Const, A.Deopt))


def closed_part(res: FieldResult, refs: list) -> FieldResult:
    """``res`` with its extractor closed over the witnessed text answers (module docstring) when the
    field is :func:`categorical`, every answer is a text, and the part is not a list of labels
    already; else ``res`` unchanged. A closed part is of kind ``"selective"`` (it may deopt)."""
    p = res.program
    if p is None or _labels_only(p) or not all(isinstance(r, str) for r in refs) or not categorical(refs):
        return res
    table = tuple((v, A.Const(v)) for v in sorted(set(refs)))
    closed = A.Lookup(p, table, A.Deopt())
    return FieldResult(closed, res.train_agreement, res.heldout_agreement, res.candidates, "selective",
                       answered=res.answered if res.answered is not None else res.train_agreement)


def _precise(c: _Cand, min_precision: float) -> bool:
    answered = c.agree + c.wrong
    return c.agree > 0 and c.agree >= min_precision * answered - 1e-9


def selective_part(part: _Part, min_precision: float, validate) -> FieldResult | None:
    """The best-scoring part program that answers training witnesses at precision >=
    ``min_precision`` (module docstring), as a :class:`FieldResult` of kind ``"selective"`` (``train_agreement``:
    the share of the part's training witnesses it answers right; ``answered``: the share it
    answers), or None when no candidate answers any witness at that precision. ``validate(program)``
    returns None for a valid program, else why not."""
    if all(r is not None for r in part.refs):
        extractors = sorted((c for c in part.cands if c.kind in ("search", "number", "proposed")
                             and type(c.program) is not A.If),
                            key=lambda c: (-c.agree, c.size, repr(c.program)))[:SELECTIVE_EXTRACTORS]
        for c in extractors:
            outs = [_DEOPT if o is None else o for o in c.outs]
            part.add(A.If(((A.IsNull(c.program), A.Deopt()),), c.program), c.kind, outs)
    ok = sorted((c for c in part.cands if _precise(c, min_precision)),
                key=lambda c: (-c.score, -c.agree, c.size, repr(c.program)))
    for c in ok:
        if validate(c.program) is None:
            answered = (c.agree + c.wrong) / max(1, part.n)
            res = FieldResult(c.program, c.agree / max(1, part.n), None, part.count, "selective", answered=answered)
            res.score = c.score  # type: ignore[attr-defined]
            return res
    return None


__all__ = ["MAX_SINGLETON_SHARE", "SELECTIVE_EXTRACTORS", "categorical", "closed_part", "selective_part"]
