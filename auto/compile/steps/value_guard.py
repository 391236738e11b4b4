"""A value program inside a region deopts where its own evidence does.

A value of a region that the program rung compiled (a tool choice, a tool argument, an answer
field) arrives as the rung's program; the rung's artifact decides each answer with the
``program-evidence`` guard (:mod:`auto.guards.program`) from the evidence expression beside it
(:mod:`auto.models.program.evidence`). A region runs the program alone, so without this step an
input on which the program answers through its default branch by elimination, with the default
label's own evidence false (kind *default without evidence*), or through an unwitnessed
generalization (a contested precedence, a split version space), is answered inside the region
as if it were supported, and the region's tools act on it.

:func:`evidence_guarded` puts the evidence in front of the program: the value deopts unless every
part's evidence kind is *supported* (kind 0). Within a region no event table or risk threshold is
calibrated per value, so a default without evidence always deopts there (the program artifact's
guard deopts it only where it was rare or imprecise on the witnesses); the region's hermetic gate
then counts those deopts as misses of the field (:mod:`auto.compile.steps.gate`), so a value that
answers held-out inputs only through an unsupported default refuses the region instead of
passing as a program.
"""

from __future__ import annotations

from typing import Any

from auto.models.program import ast as A
from auto.models.program.evidence import SUPPORTED
from auto.models.program.serial import from_json


def _kinds(evidence: A.Node) -> list[A.Node]:
    """The ``kind`` expression of every part of an evidence record
    (``record {<part>: record {kind, rule}, ...}``)."""
    if type(evidence) is not A.Record:
        raise ValueError("an evidence expression is a record of parts")
    out = []
    for _name, part in evidence.fields:
        kind = dict(part.fields).get("kind") if type(part) is A.Record else None
        if kind is None:
            raise ValueError("every part of an evidence expression is a record with a kind")
        out.append(kind)
    return out


def evidence_guarded(program: A.Node, evidence: Any) -> A.Node:
    """``program`` that deopts wherever some part's evidence kind is not *supported* (module
    docstring): ``if not(kind_1 == 0 and …) -> deopt else -> program``.

    Args:
        program: the value program the program rung compiled (its ``CompileOutcome.model``).
        evidence: its evidence expression, as a node or in the JSON form the rung's manifest keeps
            (``model.evidence``).

    Returns:
        the guarded program (same answers wherever every part is supported).

    Raises:
        ValueError: ``evidence`` is not an evidence record (a record of ``{kind, rule}`` records).
    """
    node = from_json(evidence) if isinstance(evidence, (dict, list)) else evidence
    supported = [A.Compare("eq", k, SUPPORTED) for k in _kinds(node)]
    if not supported:
        return program
    every = supported[0] if len(supported) == 1 else A.And(tuple(supported))
    return A.If(((A.Not(every), A.Deopt()),), program)


__all__ = ["evidence_guarded"]
