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
"""

from __future__ import annotations

from auto.models.program import ast as A

from .evaluate import _DEOPT
from .pool import _Cand, _Part
from .results import FieldResult

SELECTIVE_EXTRACTORS = 8
"""How many of the part's best extractors (most training witnesses right first) get a
deopt-where-null variant."""


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
            return FieldResult(c.program, c.agree / max(1, part.n), None, part.count, "selective", answered=answered,
                               score=c.score)
    return None


__all__ = ["SELECTIVE_EXTRACTORS", "selective_part"]
