"""The witnessed-domain guard of a program: deopt where the program's extractors fail.

A synthesized program answers every input its rules reach, including inputs unlike anything it
was synthesized from: a request whose amount is written ``3k`` or ``300 EUR`` makes an amount
extractor return null, every threshold comparison is then false, and a decision list falls
through to its default — a confident, silent wrong answer. The program's own extractors say when
this happens. An *extractor* is a maximal ``Search``, ``ParseInt``, ``ParseFloat`` or
``ParseMoney`` sub-expression. If an extractor produced a value on **every** witnessed input, a
null from it on a new input is outside the witnessed domain, so the guarded program is::

    if is_null(E1) or is_null(E2) ... -> deopt
    else -> <program>

Extractors that were null on some witness (an order id that is sometimes absent) are left alone:
null is part of their witnessed behaviour. The guard only adds deopts, so it can lower
agreement (a deopt counts as a disagreement at the gate) but never adds a wrong answer.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any, Iterator

from auto.models.program import ast as A
from auto.models.program.interp import DeoptSignal, evaluate

EXTRACTOR_TYPES = (A.Search, A.ParseInt, A.ParseFloat, A.ParseMoney)


def _children(node: Any) -> Iterator[A.Node]:
    for f in fields(node):
        v = getattr(node, f.name)
        if is_dataclass(v):
            yield v
        elif isinstance(v, tuple):
            for x in v:
                if is_dataclass(x):
                    yield x
                elif isinstance(x, tuple):
                    yield from (y for y in x if is_dataclass(y))


def extractors(program: A.Node) -> list[A.Node]:
    """Maximal extractor sub-expressions of ``program``, distinct, in first-occurrence order
    (depth-first). A ``Search`` inside a ``Parse*`` belongs to that parse."""
    out: list[A.Node] = []

    def walk(node: A.Node) -> None:
        if isinstance(node, EXTRACTOR_TYPES):
            if node not in out:
                out.append(node)
            return
        for c in _children(node):
            walk(c)

    walk(program)
    return out


def guard_domain(program: A.Node, inputs: list[dict[str, Any]]) -> tuple[A.Node, list[A.Node]]:
    """Wrap ``program`` so it deopts where an always-defined extractor returns null.

    Args:
        program: a type-correct program.
        inputs: the witnessed inputs the program was synthesized and selected on.

    Returns:
        ``(guarded program, the guarded extractors)``; the program itself when no extractor was
        defined on every input (or there are no inputs).
    """
    if not inputs:
        return program, []
    always: list[A.Node] = []
    for e in extractors(program):
        try:
            if all(evaluate(e, inp) is not None for inp in inputs):
                always.append(e)
        except DeoptSignal:  # extractors contain no Deopt; defensive only
            continue
    if not always:
        return program, []
    cond: A.Node = A.IsNull(always[0]) if len(always) == 1 else A.Or(tuple(A.IsNull(e) for e in always))
    return A.If(((cond, A.Deopt()),), program), always
