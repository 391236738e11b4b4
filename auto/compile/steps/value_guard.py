"""A value program inside a region deopts where the program's own guard would.

A value of a region that the program rung compiled (a tool choice, a tool argument, an answer
field) arrives as the rung's program; the rung's artifact decides each answer with its
``program-evidence`` guard (:mod:`auto.guards.program`) from the evidence expression beside it
(:mod:`auto.models.program.evidence`): per part, the *event* ``(rule, kind)`` — the rule that
decided it and the kind of evidence behind that rule on this input. A region runs the program
alone, so without this step an input on which the program answers through its default branch
by elimination with the default label's own evidence false, through a rule few witnesses took,
or through an unwitnessed generalization, was answered inside the region as if the guard had
passed it, and the region's tools acted on it.

:func:`evidence_guarded` puts the guard in front of the program as part of it: the guard's
decision is a conjunction over the parts of a per-part test of the part's event alone (novelty of
the event, its kind, its precision against the risk threshold:
:meth:`auto_runtime.guard.program.ProgramEvidence.admits`), so the set of events each part admits
is finite and known at compile time; the value deopts unless every part's event is one of them
(``if not(<part 1 admitted> and …) -> deopt else -> program``). The region's hermetic gate then
counts those deopts as misses of the field (:mod:`auto.compile.steps.gate`), so a value that
answers held-out inputs only through events its guard would not admit refuses the region instead
of passing as a program.
"""

from __future__ import annotations

from typing import Any

from auto_runtime.guard import build_guard
from auto_runtime.guard.program import ProgramEvidence, ProgramGuard

from auto.models.program import ast as A
from auto.models.program.serial import from_json


def _events(evidence: A.Node) -> dict[str, tuple[A.Node, A.Node]]:
    """``{part name: (rule expression, kind expression)}`` of an evidence record
    (``record {<part>: record {kind, rule}, ...}``).

    Raises:
        ValueError: not such a record.
    """
    if type(evidence) is not A.Record:
        raise ValueError("an evidence expression is a record of parts")
    out = {}
    for name, part in evidence.fields:
        fields = dict(part.fields) if type(part) is A.Record else {}
        if "rule" not in fields or "kind" not in fields:
            raise ValueError(f"part {name!r} of the evidence expression is not a record {{kind, rule}}")
        out[name] = (fields["rule"], fields["kind"])
    return out


def evidence_guarded(program: A.Node, evidence: Any, guard: Any) -> A.Node:
    """``program`` that deopts wherever the program rung's guard would decline it (module docstring).

    Args:
        program: the value program the program rung compiled (its ``CompileOutcome.model``).
        evidence: its evidence expression, as a node or in the JSON form the rung's manifest keeps
            (``model.evidence``).
        guard: the rung's manifest ``guard`` entry (a ``program-evidence`` entry; a plain
            ``program`` entry checks nothing beyond the program's own deopts, and the program is
            returned as it is; an unusable entry makes the value always deopt).

    Returns:
        the guarded program: the same answer wherever the guard admits every part's event, a deopt
        elsewhere.

    Raises:
        ValueError: ``evidence`` is not an evidence record, or it lacks a part the guard names.
    """
    g = build_guard(guard)
    if type(g) is ProgramGuard:
        return program
    if not isinstance(g, ProgramEvidence):  # unusable (always deopts), or not a program's guard
        return A.Deopt()
    events = _events(from_json(evidence) if isinstance(evidence, (dict, list)) else evidence)
    oks = []
    for i, (name, *_rest, labels) in enumerate(g.parts):
        if name not in events:
            raise ValueError(f"the guard names part {name!r}, which the evidence expression does not have")
        rule, kind = events[name]
        admitted = [A.And((A.Compare("eq", rule, r), A.Compare("eq", kind, k)))
                    for r in range(len(labels)) for k in range(g.kind_count) if g.admits(i, r, k)]
        if not admitted:
            return A.Deopt()
        oks.append(admitted[0] if len(admitted) == 1 else A.Or(tuple(admitted)))
    if not oks:
        return program
    every = oks[0] if len(oks) == 1 else A.And(tuple(oks))
    return A.If(((A.Not(every), A.Deopt()),), program)


__all__ = ["evidence_guarded"]
