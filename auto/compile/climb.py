"""The ladder's refusal loop: rungs tried in order until one passes its gate.

:func:`climb` is the one loop that tries rungs: a task's ladder
(:func:`auto.compile.ladder.compile_task`) runs it over the task, and the region rung
(:mod:`auto.compile.rungs.region`) runs it over each value of a region. Every rung has one
signature (:data:`Rung`) and either returns the emitted generation or raises
:class:`~auto.errors.RungRefused`; the first that returns ends the climb. A rung that cannot build
a candidate (:class:`~auto.errors.CompileError`) refused, and so did a rung that raised an
exception outside Auto's error tree (logged with its traceback: a rung's bug costs that rung
only, so that the rungs below it still compile). A refusal marked ``final`` ends the climb
(nothing below can help); a refusal marked not ``applies`` is a rung stepping aside (the task is
not of its kind): it is neither recorded among the rungs tried nor cited.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from auto.compile.context import RungContext
from auto.compile.generation import CompileOutcome
from auto.compile.witnesses import WitnessSet
from auto.errors import AutoError, CompileError, RungRefused
from auto.gate import Contract

log = logging.getLogger("auto.compile")

Rung = Callable[[WitnessSet, Contract, RungContext], CompileOutcome]
"""``rung(witnesses, contract, ctx) -> CompileOutcome``; raises :class:`~auto.errors.RungRefused`."""


@dataclass
class Climb:
    """What :func:`climb` found.

    Attributes:
        outcome: the generation of the first rung that passed, or None when every rung tried
            refused (the refusals are in the context's ``prior``, in order).
        tried: per rung tried, ``{"rung", "verdict": "pass"|"refuse", "seconds" (wall time, s),
            "eval_run_id"}``, in order.
    """

    outcome: CompileOutcome | None
    tried: list[dict[str, Any]] = field(default_factory=list)


def attempt(name: str, rung: Rung, ws: WitnessSet, contract: Contract, ctx: RungContext) -> CompileOutcome:
    """Run one rung; a :class:`~auto.errors.CompileError` or an exception outside Auto's error
    tree becomes that rung's :class:`~auto.errors.RungRefused` (module docstring)."""
    try:
        return rung(ws, contract, ctx)
    except CompileError as e:  # the rung could not build a candidate: a refusal, the ladder goes on
        raise RungRefused(name, f"{name} rung: {e}") from None
    except (AutoError, RungRefused):
        raise
    except Exception as e:  # noqa: BLE001 - a rung's bug (e.g. a model library's ValueError) costs that rung only
        log.exception("task %s: the %s rung failed", ctx.task, name)
        raise RungRefused(name, f"{name} rung failed: {type(e).__name__}: {e}") from None


def climb(rungs: Sequence[tuple[str, Rung]], ws: WitnessSet, contract: Contract, ctx: RungContext) -> Climb:
    """Try ``rungs`` (``(name, rung)`` pairs) in order on ``ws`` until one passes.

    Each refusal is appended to ``ctx.prior`` (a later rung may cite it) and said through
    ``ctx.say``; a ``final`` one stops the climb. Raises only what a rung raises outside
    :func:`attempt`'s conversions (e.g. :class:`~auto.errors.CodegenError`).
    """
    out = Climb(None)
    for i, (name, rung) in enumerate(rungs, 1):
        ctx.say(f"  trying the {name} rung ({i} of {len(rungs)})")  # a long phase: say which rung runs
        t0 = time.perf_counter()
        try:
            outcome = attempt(name, rung, ws, contract, ctx)
        except RungRefused as r:
            if not r.applies:
                ctx.say(f"  {r.reason}")
                continue
            out.tried.append({"rung": name, "verdict": "refuse", "seconds": round(time.perf_counter() - t0, 3),
                              "eval_run_id": r.eval_run_id})
            ctx.prior.append(r)
            if r.final:
                break
            ctx.say(f"  {r.citation}")
            continue
        out.tried.append({"rung": name, "verdict": "pass", "seconds": round(time.perf_counter() - t0, 3),
                          "eval_run_id": outcome.eval_run_id})
        out.outcome = outcome
        break
    return out
