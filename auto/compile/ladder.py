"""The compile ladder: program → specialist → neardup → memo → refusal.

:func:`compile_task` compiles one generation of a task from the witnesses in a store. It reads
the task's witnesses once through the task index (:class:`~auto.compile.witnesses.WitnessSet`)
and, in the same snapshot, checks the integrity of the task's rows added since the last check
(the cost follows the task, not the store: :meth:`auto.store.Store.task_witnesses` with
``verify``, the check of :meth:`auto.store.Store.verify` with ``task`` and ``incremental``),
and tries the rungs in order through the one refusal loop (:func:`auto.compile.climb.climb`);
each rung has one signature (:data:`~auto.compile.climb.Rung`): it takes the witnesses, the
contract and the :class:`~auto.compile.context.RungContext`, and returns the emitted generation
or raises :class:`~auto.errors.RungRefused`. The first rung that passes its gate is the
generation. A refusal marked ``final`` stops the ladder (nothing below can help, e.g. every
witness has the same output); a rung for which the task is not of its kind steps aside (a
refusal that does not ``apply``: not recorded among the rungs tried, not cited). When every rung
refuses, the ladder raises :class:`~auto.errors.GateRefused` whose reason cites each rung's
refusal in order, then the last rung's reason, with the last eval run attached.

Rungs (:data:`RUNGS`):

- ``region`` (:mod:`auto.compile.rungs.region`): a task whose runs call tools or several models,
  compiled across its steps into a capability artifact; it steps aside for a single-call task,
  and its refusal is final for a task that calls tools (a whole-task program would skip them);
- ``program`` (:mod:`auto.compile.rungs.program`): a synthesized DSL program, gated on held-out
  inputs;
- ``specialist`` (:mod:`auto.compile.rungs.specialist`): a distilled classifier with a calibrated
  guard stack, memo-first unless ``memo=False``;
- ``neardup`` (:mod:`auto.compile.rungs.neardup`): the memo's entries plus one answer per
  neighbourhood of inputs that a certified canonicalization step maps to one key (greetings,
  sign-offs, casing, identifiers, vowel typos), a program computing the key in WebAssembly;
  only where the witnesses bound the merge error by the contract's ε;
- ``memo`` (:mod:`auto.compile.rungs.memo`): an exact-match table of the consistently answered
  inputs, only with evidence that the task repeats itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from auto.compile.bulk import cyclic_gc_paused
from auto.compile.climb import Rung, climb
from auto.compile.context import RungContext, next_generation
from auto.compile.generation import CompileOutcome
from auto.compile.rungs import memo as memo_rung
from auto.compile.rungs import neardup as neardup_rung
from auto.compile.rungs import program as program_rung
from auto.compile.rungs import region as region_rung
from auto.compile.rungs import specialist as specialist_rung
from auto.compile.witnesses import WitnessSet
from auto.errors import ArgumentError, GateRefused
from auto.gate import Contract

RUNGS: dict[str, Rung] = {
    region_rung.NAME: region_rung.compile_rung,
    program_rung.NAME: program_rung.compile_rung,
    specialist_rung.NAME: specialist_rung.compile_rung,
    neardup_rung.NAME: neardup_rung.compile_rung,
    memo_rung.NAME: memo_rung.compile_rung,
}
"""Every rung by name, in ladder order."""


def ladder(*, programs: bool = True, memo: bool = True) -> list[str]:
    """The rung names a compile tries: all of :data:`RUNGS`, without the program rung when
    ``programs`` is False and without the memo and neardup rungs when ``memo`` is False."""
    return [name for name in RUNGS if (programs or name != "program") and (memo or name not in ("memo", "neardup"))]


def compile_task(
    store: Any,
    task: str,
    *,
    contract: Contract | None = None,
    generation: int | None = None,
    out_path: str | Path | None = None,
    reference_model: str | None = None,
    memo: bool = True,
    programs: bool = True,
    rungs: list[str] | None = None,
    proposer: Any = None,
    progress: Callable[[str], None] | None = None, served: dict[str, Any] | None = None,
) -> CompileOutcome:
    """Compile one generation of ``task``: the ladder program → specialist → neardup → memo → refusal.

    Args:
        store: an :class:`auto.store.Store` holding the task's witnesses; eval runs and the
            artifact are stored there.
        task: the task name as recorded, or a model-call site id (``site:<hex>``,
            :mod:`auto.sites`; the manifest then carries the site's template under ``site``).
        contract: the gate's contract (default: :meth:`Contract.default_for`).
        generation: generation number (default: the store's latest for the task + 1).
        out_path: where to write the ``.wasm`` (default: ``<task>.gen<N>.wasm``).
        reference_model: label for provenance (default: read from recorded model-call spans).
        memo: the specialist is memo-first (witnessed inputs answered from an exact-match table)
            and the memo rung is on the ladder.
        programs: try the program rung first.
        rungs: the rung names to try, in order (default :func:`ladder` of ``programs`` / ``memo``).
        proposer: optional LLM-guided program proposer (:mod:`auto.models.program.propose`).
        progress: optional callback for human-readable progress lines.
        served: a table overlay's :meth:`auto_runtime.overlay.TableOverlay.service` (the memo's repeat evidence).

    Returns:
        The :class:`CompileOutcome` of the generation that passed a gate; its ``reason`` is
        prefixed by the refusals of the rungs tried before, its ``rungs`` lists every rung tried
        (``{"rung", "verdict", "seconds", "eval_run_id"}``: wall time per rung, in s). A
        :class:`GateRefused` carries the same list as ``rungs``.

    Raises:
        GateRefused: every rung refused (the last rung's eval run is attached; the reason cites
            each rung's refusal).
        IntegrityError: a stored digest of the task's rows does not match its content
            (``auto store verify`` checks the whole store).
        ArgumentError: an unknown rung name.
        CodegenError: lowering failed (a rung that cannot build a candidate, ``CompileError``, is
            a refusal and the ladder goes on; so is a rung that raises an exception outside
            Auto's error tree, logged with its traceback, so that the memo rung below it still
            compiles).
    """
    names = ladder(programs=programs, memo=memo) if rungs is None else list(rungs)
    unknown = [n for n in names if n not in RUNGS]
    if unknown or not names:
        raise ArgumentError(f"unknown rung(s) {unknown or names!r}; the rungs are {', '.join(RUNGS)}")
    contract = contract or Contract.default_for(task)
    # never compile from rows whose content no longer matches their digests: the task's rows,
    # through its index, those added since the last check, re-derived in the snapshot the
    # witnesses are read from (the rest of the store is not read)
    with cyclic_gc_paused():
        ws = WitnessSet.read(store, task, verify=True)
    ctx = RungContext(store=store, task=task, generation=generation or next_generation(store, task), out_path=out_path,
                      reference_model=reference_model or ws.reference_model, say=progress or (lambda _m: None),
                      memo_first=memo, proposer=proposer, site=ws.site, served=served)
    ctx.say(f"  {len(ws.witnesses)} witnesses of {task}; rungs to try: {', '.join(names)}")
    climbed = climb([(name, RUNGS[name]) for name in names], ws, contract, ctx)
    tried, outcome = climbed.tried, climbed.outcome
    if outcome is not None:
        outcome.rungs = tried
        if ctx.prior:
            outcome.reason = "; ".join([*(r.citation for r in ctx.prior), outcome.reason])
        return outcome
    if not ctx.prior:
        raise GateRefused(f"no rung applies to task {task!r} (tried {', '.join(names)})")
    last = ctx.prior[-1]
    err = GateRefused("; ".join([*(r.citation for r in ctx.prior[:-1]), last.reason]), last.eval_run_id)
    err.rungs = tried
    raise err
