"""The memo rung: an exact-match table of what was witnessed, only where the task repeats itself.

The lowest rung generalizes nothing, so it needs no held-out evidence; it needs evidence that
repeating an observation is sound. Divergent inputs (≥ 2 distinct outputs) are never tabulated.
The memo is compiled only when the inputs seen more than once were answered consistently at the
contract's rates — point estimate ≥ ``memo_min_consistency`` *and* 95% Clopper–Pearson lower
bound ≥ ``memo_min_consistency_ci95_low`` (Clopper & Pearson, Biometrika 26(4), 1934) — the
census's evidence that the task repeats itself, or when a runtime table overlay answered repeats
from their first witness (so they were never re-asked) and the re-asked inputs do not contradict
consistency (:func:`compile_rung`); without either the memo is refused. A table hit repeats a witnessed reference answer, so its disagreement with a
fresh reference answer is the reference's own on that input (zero excess silent-wrong) as long as
the reference's behaviour on an input does not change; the bar is about usefulness, not safety.

The artifact answers exactly the witnessed inputs with their outputs and reports nonconformity
1.0 on anything else; its guard (``exact-match``) deopts every input that was not witnessed. The
gate (:func:`auto.gate.run_memo_gate`) requires every witnessed output to be repeated exactly
and every probe (a never-witnessed variant of a witnessed input) to miss.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

from auto_runtime import Artifact
from auto_runtime.artifact import MAX_ARTIFACT_BYTES
from auto_runtime.manifest import Interface

from auto.canonical import canonical_json, digest_bytes
from auto.codegen import TableModel, compile_table
from auto.compile.batching import chunked, text_size
from auto.compile.bulk import cyclic_gc_paused
from auto.compile.context import RungContext, next_generation
from auto.compile.generation import CompileOutcome, emit_generation
from auto.compile.manifest import ManifestDraft
from auto.compile.measure import call_latency_us
from auto.compile.witnesses import WitnessSet, input_schema
from auto.emit import emit
from auto.errors import CompileError, MemoryLimitExceeded, RungRefused
from auto.gate import CheckName, Contract, EvalRun, Verdict, clopper_pearson, run_memo_gate

NAME = "memo"

EXACT_MATCH_GUARD = {
    "method": "exact-match",
    "statement": "tier-1 only on inputs byte-identical (canonical JSON) to a witnessed input; every other input deopts",
}

PROBE_LIMIT = 50
"""At most this many probes are made from the witnessed inputs."""

MANIFEST_HEADROOM = 256 * 1024
"""Bytes kept free for the manifest below the runtime's artifact cap when sizing a table."""


def probes_for(inputs: Sequence[dict[str, Any]], seen: set[str], limit: int = PROBE_LIMIT) -> list[dict[str, Any]]:
    """Never-witnessed variants of witnessed inputs (each string field gets a ``" [probe]"``
    suffix), skipping any variant that is itself in ``seen`` (canonical JSON texts)."""
    out = []
    for inp in list(inputs)[:limit]:
        probe = {k: (v + " [probe]" if isinstance(v, str) else v) for k, v in inp.items()}
        if canonical_json(probe) not in seen:
            out.append(probe)
    return out


def served_evidence(served: Any) -> dict[str, int] | None:
    """The table overlay's service figures a compile was handed (``answers``, ``inputs``,
    ``min_lead``: :meth:`auto_runtime.overlay.TableOverlay.service`) when they show at least one
    repeat answered; None otherwise (absent, malformed, or nothing served)."""
    if not isinstance(served, dict):
        return None
    vals = {k: served.get(k) for k in ("answers", "inputs", "min_lead")}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vals.values()):
        return None
    return vals if vals["answers"] > 0 and vals["inputs"] > 0 and vals["min_lead"] >= 1 else None


def _overlay_entries(ws: WitnessSet, k: int) -> tuple[list[tuple[dict[str, Any], Any]], int]:
    """``(entries, single)``: every input whose witnesses all agree and number at least ``k`` (the
    overlay's admission rule on unanimous witnesses), sorted by canonical input, and how many of
    them were witnessed once."""
    out, single = [], 0
    for key, (inp, out_value, share) in zip(sorted(ws.groups), ws.items):
        n = len(ws.groups[key])
        if share == 1.0 and n >= k:
            out.append((inp, out_value))
            single += n == 1
    return out, single


@cyclic_gc_paused()
def compile_rung(ws: WitnessSet, contract: Contract, ctx: RungContext) -> CompileOutcome:
    """Tabulate the consistently answered inputs when the repetition evidence allows.

    Two kinds of evidence that the task repeats itself admit a table:

    - **re-asked inputs**: the inputs witnessed twice or more were answered consistently at the
      contract's rates (point estimate and 95% Clopper–Pearson lower bound); every unanimously
      answered input is tabulated;
    - **served from the first witness**: the host's table overlay answered repeats of witnessed
      inputs without asking the reference again (``ctx.served``,
      :meth:`auto_runtime.overlay.TableOverlay.service`), so few inputs have a second witness.
      The table then admits what the overlay's rule admits on unanimous witnesses (at least its
      ``k`` agreeing witnesses, none disagreeing), unless the re-asked inputs that do exist
      measure a consistency below ``memo_min_consistency``. The manifest's
      ``parity.repetition`` states determinism as measured on the re-asked inputs alone
      (``repeated_inputs``, ``consistent``, ``rate`` and ``ci95_low``: null where nothing was
      re-asked), the served figures beside it, and how many entries rest on one witness.

    The eval run of this rung cites the refusal it stands in for (the previous rung's), and the
    manifest cites the refused specialist's eval run.

    Raises:
        RungRefused: no evidence of repetition, or too little consistency (eval run stored); a
            gate check failed.
    """
    cited = ctx.prior[-1].citation if ctx.prior else None
    rep = ws.repetition()
    low, _ = clopper_pearson(rep.consistent, rep.repeated)
    served = served_evidence(ctx.served)
    evidence = (f"{rep.consistent} of {rep.repeated} repeated inputs answered consistently"
                + (f" (rate {rep.rate:.3f}, 95% CP lower bound {low:.3f})" if rep.rate is not None else ""))
    measured = (rep.rate is not None and rep.rate >= contract.memo_min_consistency
                and low >= contract.memo_min_consistency_ci95_low)
    contradicted = rep.rate is not None and rep.rate < contract.memo_min_consistency
    k = served["min_lead"] if served else contract.overlay_min_lead
    if served is not None:
        evidence += (f"; {served['answers']} repeats of {served['inputs']} witnessed inputs answered by the table "
                     f"overlay from their witnesses, never re-asked (rule: >= {k} agreeing witnesses)")
    if not measured and (served is None or contradicted):
        if rep.rate is not None:
            own = (f"memo refused: {evidence}, the contract needs {contract.memo_min_consistency:.2f} "
                   f"(lower bound {contract.memo_min_consistency_ci95_low:.2f})")
        else:
            own = "memo refused: no input was witnessed twice, so there is no evidence the task repeats itself"
        r = ctx.refuse(NAME, contract, f"{cited}; {own}" if cited else own,
                       [{"name": "memo-determinism-evidence", "repeated": rep.repeated, "consistent": rep.consistent,
                         "rate": rep.rate, "ci95_low": low, "min_consistency": contract.memo_min_consistency,
                         "min_consistency_ci95_low": contract.memo_min_consistency_ci95_low,
                         "served_from_first_witness": served, "passed": False}])
        raise RungRefused(NAME, own, r.eval_run_id)
    if measured:
        entries = ws.consistent_entries()
        single = sum(1 for outs in ws.groups.values() if len(outs) == 1)
        admitted_by = "re-asked inputs answered consistently"
    else:
        entries, single = _overlay_entries(ws, k)
        admitted_by = f"table overlay rule: >= {k} agreeing witnesses, none disagreeing"
    specialist = ctx.prior_refusal("specialist")
    ctx.say(f"  {cited + '; ' if cited else ''}compiling the exact-match memo of {len(entries)} consistently answered "
            f"inputs ({evidence})")
    return tabulate(ctx, contract, entries, probes=probes_for([e[0] for e in entries], set(ws.groups)),
                    note=f"memo: {evidence}; {ws.n - len(entries)} inputs left out (divergent, or fewer than the "
                         f"rule's witnesses)", cited=cited,
                    witnesses=ws.witnesses, store_digest=ws.store_digest,
                    evidence={"repeated_inputs": rep.repeated, "consistent": rep.consistent, "rate": rep.rate,
                              "ci95_low": low, "specialist_eval_run": specialist.eval_run_id if specialist else None,
                              "admitted_by": admitted_by, "single_witness_entries": single,
                              "served_from_first_witness": ({"answers": served["answers"], "inputs": served["inputs"]}
                                                            if served else None)})


def tabulate(ctx: RungContext, contract: Contract, entries: list[tuple[dict[str, Any], Any]], *,
             probes: list[dict[str, Any]], witnesses: Sequence[Any], store_digest: str | None = None,
             note: str | None = None, cited: str | None = None,
             evidence: dict[str, Any] | None = None) -> CompileOutcome:
    """Compile, gate and emit an exact-match table (``compiled_as: memo``) of ``entries``.

    Args:
        ctx: the compile's context.
        contract: the contract (recorded; the memo gate's checks are fixed).
        entries: ``(input, output)`` pairs, one output per distinct input.
        probes: inputs that were never witnessed (all must miss).
        witnesses: every witness of the task (provenance); store_digest: read with them.
        note: prefix of the gate's reason (the evidence that justified tabulating).
        cited: the refusal this memo stands in for; prefixed to the stored eval run's reason only.
        evidence: the repetition evidence (the manifest's ``parity.repetition``; its
            ``specialist_eval_run``, when set, is cited by the manifest too).

    Returns:
        The emitted generation; its ``reason`` does not repeat ``cited`` (the ladder prefixes
        the refusals it went through).

    Raises:
        RungRefused: a gate check failed, or the table would exceed the runtime's artifact cap
            (:data:`~auto_runtime.artifact.MAX_ARTIFACT_BYTES`; eval run stored).
        CompileError: no entries.
    """
    if not entries:
        raise CompileError(f"no witnessed inputs to tabulate for task {ctx.task!r}")
    timings: dict[str, float] = {}
    cap = MAX_ARTIFACT_BYTES - MANIFEST_HEADROOM
    t0 = time.perf_counter()
    table = TableModel(entries)
    payload = sum(map(len, table.keys)) + sum(len(a.encode("utf-8")) for a in table.answers)
    if payload > cap:  # the table's bytes alone would not fit: refuse before lowering it
        raise _too_large(ctx, contract, len(entries), payload, "its inputs and answers alone take", cap)
    code, decl = compile_table(table)
    timings["codegen"] = time.perf_counter() - t0
    if len(code) > cap:
        raise _too_large(ctx, contract, len(entries), len(code), "the compiled table takes", cap)
    answers = sorted(set(table.answers))
    draft = ManifestDraft(
        task=ctx.task, generation=ctx.generation, compiled_as="memo",
        interface=Interface(input=input_schema([e[0] for e in entries]),
                            output={"enum": [json.loads(a) for a in answers]}),
        model={**table.manifest_model(), "table": decl, "code_digest": digest_bytes(code)})
    try:
        # the gate runs the code, never the runtime's table fast path (which answers from the table itself)
        art = Artifact.load(emit(code, draft.provisional()), table_fast_path=False)
    except MemoryLimitExceeded as exc:
        raise _too_large(ctx, contract, len(entries), len(code), f"the table does not fit the sandbox ({exc});", cap) from None
    t0 = time.perf_counter()
    texts = [(canonical_json(e[0]), canonical_json(e[1])) for e in entries]  # each entry encoded once
    record = run_memo_gate(contract=contract, run_batch=chunked(art.call_batch_texts, measure=text_size),
                           reference_text=lambda t: table.lookup(t.encode("utf-8")) or "null",
                           witnessed=texts, probes=[canonical_json(p) for p in probes], candidate=draft.model,
                           generation=ctx.generation, note=note)
    own_reason = record["reason"]
    if cited:
        record["reason"] = f"{cited}; {own_reason}"
    lat = call_latency_us(art, [e[0] for e in entries])
    record["guard"] = EXACT_MATCH_GUARD
    if evidence is not None:
        record["repetition_evidence"] = evidence
    eval_id = ctx.store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    run = EvalRun.from_record(record)
    if run.verdict is not Verdict.PASS:
        raise RungRefused(NAME, own_reason, eval_id)
    wa, probes = run.check(CheckName.WITNESSED_AGREEMENT), run.check(CheckName.UNWITNESSED_PROBES_MISS)
    parity = {"witnessed": {k: wa[k] for k in ("n", "agree", "rate", "ci95_low")}, "heldout": None,
              "probes": {"n": probes["n"], "hits": probes["hits"]},
              "repetition": evidence}
    cite = [evidence["specialist_eval_run"]] if evidence and evidence.get("specialist_eval_run") else []
    return emit_generation(ctx, contract, draft, code, art, guard=EXACT_MATCH_GUARD, parity=parity,
                           eval_runs=[*cite, eval_id], reason=own_reason, witnesses=witnesses, store_digest=store_digest,
                           distinct_inputs=len(entries), fuel_inputs=[e[0] for e in entries], latency=lat,
                           timings=timings, model=table)


def _too_large(ctx: RungContext, contract: Contract, entries: int, nbytes: int, what: str, cap: int) -> RungRefused:
    """The refusal of a table too large for one artifact (eval run stored)."""
    reason = (f"memo refused: a table of {entries} entries is too large for one artifact ({what} {nbytes} bytes; "
              f"the runtime loads at most {MAX_ARTIFACT_BYTES} bytes, {cap} of them for the table)")
    r = ctx.refuse(NAME, contract, reason, [{"name": "artifact-size", "entries": entries, "bytes": nbytes,
                                               "cap_bytes": cap, "passed": False}])
    return RungRefused(NAME, reason, r.eval_run_id)


def compile_memo(store: Any, task: str, entries: list[tuple[dict[str, Any], Any]], *, probes: list[dict[str, Any]],
                 contract: Contract | None = None, generation: int | None = None, out_path: str | Path | None = None,
                 reference_model: str | None = None, note: str | None = None,
                 evidence: dict[str, Any] | None = None) -> CompileOutcome:
    """Compile an exact-match table of given ``entries`` directly (no repetition evidence
    check: the caller vouches for the entries, e.g. resolved decisions of a domain census).

    Args:
        store: the :class:`auto.store.Store` (eval run and artifact are stored there).
        task: the task name.
        entries, probes, note, evidence: as for :func:`tabulate`.
        contract: default :meth:`Contract.default_for`; generation: default the store's latest + 1.
        out_path, reference_model: as for :func:`auto.compile.compile_task`.

    Raises:
        GateRefused: a gate check failed (eval run stored). CompileError: no entries.
    """
    contract = contract or Contract.default_for(task)
    ctx = RungContext(store=store, task=task, generation=generation or next_generation(store, task),
                      out_path=out_path, reference_model=reference_model)
    ws, sdigest = store.task_witnesses(task)
    return tabulate(ctx, contract, entries, probes=probes, witnesses=ws, store_digest=sdigest, note=note,
                    evidence=evidence)
