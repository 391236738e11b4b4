"""Compiling a task: the ladder of rungs that turns witnesses into one verified generation.

Public API::

    compile_task(store, task, contract=None, ...) -> CompileOutcome   # program → specialist → neardup → memo
    compile_memo(store, task, entries, probes=...) -> CompileOutcome  # a table of given entries
    CompileOutcome                                                    # the emitted generation

Modules: :mod:`~auto.compile.ladder` (the ordered rungs and the refusal that cites each),
:mod:`~auto.compile.climb` (the one refusal loop, for a task's rungs and a region's values),
:mod:`~auto.compile.rungs` (region, program, specialist, neardup, memo), :mod:`~auto.compile.witnesses`
(grouping, splits, input schema), :mod:`~auto.compile.manifest` (the one manifest builder),
:mod:`~auto.compile.measure` (fuel and latency through the runtime's sandbox),
:mod:`~auto.compile.generation` (emitting and storing a generation),
:mod:`~auto.compile.context` (what every rung is given).
"""

from auto.compile.generation import CompileOutcome
from auto.compile.ladder import RUNGS, compile_task, ladder
from auto.compile.rungs.memo import compile_memo

__all__ = ["RUNGS", "CompileOutcome", "compile_memo", "compile_task", "ladder"]
