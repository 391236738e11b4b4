"""Counterexample-guided proposals: a few rounds with a :class:`auto.models.program.propose.Proposer`
when the best enumerated program still fails training witnesses."""

from __future__ import annotations

import math
from typing import Any

from auto.errors import AutoError
from auto.models.program.serial import from_json, to_json
from auto.models.program.types import check

from .evaluate import _DEOPT, _answer, _same
from .pool import _Part

PROPOSER_ROUNDS = 3
PROPOSER_EXAMPLES = 12


def _ask_proposer(part: _Part, proposer: Any, notes: list[str]) -> bool:
    """A few counterexample rounds with ``proposer``; False when it declined (do not ask again)."""
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
