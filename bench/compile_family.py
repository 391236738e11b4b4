"""``auto bench run extraction|routing``: record → census → compile (the ladder) → verify → report.

These families stress the program rung: their reference behaviour is a parser and a rule table,
so the compiler should emit a DSL program, not a model. One run:

1. **inputs** — the family's seeded training corpus (default), or the user's own traffic
   (``--inputs FILE.jsonl``: one object per line with the family's input field);
2. **record** — the reference agent answers every input twice under ``auto.recording`` into
   ``store.sqlite`` (the simulator unless ``OPENAI_BASE_URL`` is set);
3. **census** — witnessed determinism per span site;
4. **compile** — :func:`auto.compile.compile_task` (program → specialist → memo → refusal);
5. **beside it** — the best distilled specialist on the same witnesses and split
   (:func:`auto.compile.compile_task` with ``programs=False, memo=False``: no memo table in front, so its held-out agreement
   is the model's own), or the reason it was refused;
6. **verify** — the compiled generation runs through :class:`auto_runtime.TieredTask` on fresh
   inputs never recorded (the corpus's held-out items; the harder held-out set of phrasings the
   training corpus never uses, per kind, :mod:`bench.extraction.hard` / :mod:`bench.routing.hard`;
   ``--eval-inputs FILE`` adds any JSONL file) and on out-of-distribution probes; tier-1 answers
   are compared with the reference's (the oracle's, T=0) answers, the guard's deopt reasons
   are counted, and for a program the answers its guard declined are compared too (what its
   deopts prevented and what they cost);
7. **latency** — tier-1 in-process latency of the program and the specialist, side by side, on
   the same inputs (a warm loop; compare rows of one run only).

Writes ``results.json`` (with ``compiled_as``, ``heldout_agreement`` and
``heldout_agreement_ci95_low`` — for a program, its out-of-fold agreement —, ``artifact_bytes``,
``program_rung``: the program rung's out-of-fold agreement per field, also when it was refused),
the store and the artifacts into ``--out``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from auto.errors import GateRefused, ArgumentError

from bench.run import _fresh_store, _read_stream, reference_endpoint


def _split_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Tier-1 share, silent-wrong and agreement of TieredTask rows (``tier``, ``agree``)."""
    from auto.gate import clopper_pearson

    n = len(rows)
    t1 = [r for r in rows if r["tier"] == 1]
    wrong = sum(1 for r in t1 if not r["agree"])
    lo, hi = clopper_pearson(wrong, len(t1))
    return {"n": n, "tier1": len(t1), "tier1_share": len(t1) / n if n else None,
            "tier1_wrong": wrong, "silent_wrong": wrong / len(t1) if t1 else None,
            "silent_wrong_ci95_high": hi if t1 else None}


def _evaluate(wasm: bytes, items: list[dict[str, Any]], answers: list[Any], kinds: list[str] | None = None) -> dict[str, Any]:
    """Run ``items`` through the tiered runtime with no reference (a deopt is declined) and compare
    tier-1 answers with the reference's ``answers``. For a program, also the answers its guard
    declined (the program answered, ``deopt`` false) and how many of them differ from the
    reference (``guard_declined``, ``guard_declined_would_be_wrong``: what the guard's deopts
    prevented, and what they cost)."""
    from auto_runtime import Artifact, TieredTask
    from auto_runtime.tiered import TIER_1

    from auto.canonical import canonical_json

    art = Artifact.load(wasm)
    program = art.typed_manifest.compiled_as == "program"
    tt = TieredTask(art, reference=None)
    rows = []
    declined = declined_wrong = 0
    for i, (inp, ans) in enumerate(zip(items, answers)):
        r = tt(inp)
        t1 = r.tier == TIER_1
        rows.append({"tier": 1 if t1 else 0, "agree": t1 and canonical_json(r.answer) == canonical_json(ans),
                     "kind": kinds[i] if kinds else None, "reason": r.reason})
        if program and not t1:
            raw = art.call(inp)
            if raw.get("deopt") is False:  # the program answered; its guard declined the answer
                declined += 1
                declined_wrong += canonical_json(raw.get("answer")) != canonical_json(ans)
    out = _split_figures(rows)
    if program:
        out["guard_declined"] = declined
        out["guard_declined_would_be_wrong"] = declined_wrong
    if kinds:
        out["by_kind"] = {k: _split_figures([r for r in rows if r["kind"] == k]) for k in sorted(set(kinds))}
    out["deopt_reasons"] = _reason_counts([r["reason"] for r in rows if r["tier"] == 0])
    return out


def _reason_counts(reasons: list[str]) -> dict[str, int]:
    """Deopt reasons grouped by their stem (a part and an evidence kind, without the numbers)."""
    import re
    from collections import Counter

    def stem(r: str) -> str:
        r = re.sub(r"rule \d+ \([^)]*\) ", "", r or "")
        return re.split(r", seen on|: a generalization| \(| p=|[0-9]", r, maxsplit=1)[0].strip()

    return dict(sorted(Counter(stem(r) for r in reasons).items(), key=lambda kv: (-kv[1], kv[0])))


def _program_rung(store: Any, task: str) -> dict[str, Any] | None:
    """The latest program-rung eval run of ``task``: verdict, reason, out-of-fold agreement overall
    and per field, and the procedure chosen (None when the rung stored nothing)."""
    for row in reversed(store.eval_runs(task)):
        rec = row.record
        checks = {c.get("name"): c for c in rec.get("checks") or []}
        if "out-of-fold-agreement" in checks or "program-synthesized" in checks:
            o = checks.get("out-of-fold-agreement") or {}
            syn = checks.get("program-synthesized") or ((rec.get("candidate") or {}).get("synthesis") or {})
            oof = syn.get("out_of_fold") or {}
            return {"verdict": rec.get("verdict"), "reason": rec.get("reason"), "eval_run_id": row.id,
                    "out_of_fold": {k: o.get(k, oof.get(k)) for k in ("n", "agree", "rate", "ci95_low", "compared")},
                    "parts": o.get("parts") or oof.get("parts"), "settings": oof.get("settings"),
                    "procedure": syn.get("procedure"), "fields": syn.get("fields")}
    return None


def _guard_summary(g: dict[str, Any]) -> dict[str, Any]:
    """The guard entry without calibration scores and event tables (method, levels, threshold,
    out-of-fold calibration figures, statement)."""
    from auto.guards.stack import without_scores

    return without_scores(g)


def run_compile_family(family: str, *, out_dir: Path, inputs_path: Path | None = None, eval_path: Path | None = None,
                       seed: int = 0, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the ``extraction`` or ``routing`` family end to end; write ``results.json`` into ``out_dir``.

    Args:
        family: ``"extraction"`` or ``"routing"``.
        out_dir: output folder (created).
        inputs_path: compile from these inputs (JSONL with the family's input field) instead of
            the generated training corpus.
        eval_path: extra inputs (JSONL) to run the compiled generation on after compiling.
        seed: corpus and simulator seed.
        progress: callback for human-readable progress lines.

    Returns:
        The ``results.json`` object.

    Raises:
        ArgumentError: unknown family, or a malformed inputs file.
    """
    import auto
    from auto.census import census
    from auto.compile import compile_task
    from auto.gate import Contract
    from bench.families import get_family

    say = progress or (lambda _m: None)
    fam = get_family(family)
    if family not in ("extraction", "routing"):
        raise ArgumentError(f"{family!r} is not a compile family (extraction, routing)")
    user_inputs = _read_stream(inputs_path, fam.field)[0] if inputs_path is not None else None
    eval_inputs = _read_stream(eval_path, fam.field)[0] if eval_path is not None else None
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob(f"{fam.task}.*.wasm"):
        old.unlink()
    contract = Contract.default_for(fam.task)
    data = fam.default_corpus(seed)
    texts = [d[fam.field] for d in user_inputs] if user_inputs is not None else [fam.text_of(it) for it in data["train"]]
    results: dict[str, Any] = {"family": family, "inputs_source": inputs_path.name if inputs_path else f"generated (seed {seed})",
                               "inputs": len(texts)}
    started = time.perf_counter()
    with reference_endpoint(seed) as ref_label:
        results["reference_model"] = ref_label
        say(f"reference model: {ref_label}")
        store = _fresh_store(out_dir / "store.sqlite")
        say(f"[record] the reference agent twice over {len(texts)} inputs")
        with auto.recording(store):
            for _ in range(2):
                for t in texts:
                    fam.run_agent(t)
        cen = census(store.spans())
        results["census"] = {"spans": cen.spans, "deterministic_spans": cen.deterministic_spans, "headline": cen.headline}
        say(f"[census] {cen.deterministic_spans}/{cen.spans} spans witnessed-deterministic")

        t0 = time.perf_counter()
        outcome = None
        try:
            outcome = compile_task(store, fam.task, contract=contract, out_path=out_dir / f"{fam.task}.gen1.wasm",
                                   reference_model=ref_label, progress=say)
        except GateRefused as e:
            results.update({"compiled_as": "refused", "reason": e.reason, "eval_run_id": e.eval_run_id})
            say(f"[compile] refused: {e.reason}")
        results["compile_s"] = round(time.perf_counter() - t0, 2)
        results["program_rung"] = _program_rung(store, fam.task)
        if outcome is not None:
            m = outcome.typed_manifest
            held = (m.parity or {}).get("heldout") or {}
            results.update({
                "compiled_as": m.compiled_as, "reason": outcome.reason, "eval_run_id": outcome.eval_run_id,
                "heldout_agreement": held.get("rate"), "heldout_agreement_ci95_low": held.get("ci95_low"),
                "heldout_n": held.get("n"), "artifact_bytes": outcome.artifact_bytes, "artifact_id": outcome.artifact_id,
                "program": (m.model or {}).get("text") if m.compiled_as == "program" else None,
                "compile_latency_us": outcome.latency_us,
                "guard": _guard_summary(m.guard.to_dict()),
                "parity": m.parity,
                "fuel_per_call": m.fuel_per_call,
            })
            say(f"[compile] {m.compiled_as}: {outcome.reason}")

        # beside it: the best distilled specialist on the same witnesses and split
        spec = None
        try:
            spec = compile_task(store, fam.task, contract=contract, generation=99, programs=False, memo=False,
                                      out_path=out_dir / f"{fam.task}.specialist.wasm", reference_model=ref_label)
            sh = (spec.typed_manifest.parity or {}).get("heldout") or {}
            results["specialist"] = {"compiled": True, "heldout_agreement": sh.get("rate"),
                                     "heldout_agreement_ci95_low": sh.get("ci95_low"), "artifact_bytes": spec.artifact_bytes,
                                     "estimator": (spec.typed_manifest.model or {}).get("estimator"), "reason": spec.reason}
        except GateRefused as e:
            results["specialist"] = {"compiled": False, "reason": e.reason, "eval_run_id": e.eval_run_id}
        sp = results["specialist"]
        say("[beside] specialist: " + (f"compiled ({sp['estimator']}), held-out {sp['heldout_agreement']:.3f}, {sp['artifact_bytes']} bytes"
                                       if sp["compiled"] else f"refused: {sp['reason']}"))
        store.close()

        # verify on never-recorded inputs and out-of-distribution probes
        if outcome is not None:
            fresh = [{fam.field: fam.text_of(it)} for it in data["heldout"]]
            results["fresh_heldout"] = _evaluate(outcome.wasm, fresh, [fam.label_of(it) for it in data["heldout"]])
            hard = data.get("hard") or []
            if hard:
                results["hard_heldout"] = _evaluate(outcome.wasm, [{fam.field: fam.text_of(it)} for it in hard],
                                                    [fam.label_of(it) for it in hard], kinds=[it.kind for it in hard])
            ood = data.get("ood") or []
            results["ood"] = _evaluate(outcome.wasm, [{fam.field: fam.text_of(it)} for it in ood],
                                       [fam.label_of(it) for it in ood], kinds=[getattr(it, "kind", None) or "probe" for it in ood])
            if eval_inputs is not None:
                results["eval_inputs"] = {"source": eval_path.name if eval_path else None,
                                          **_evaluate(outcome.wasm, eval_inputs, [fam.oracle(d[fam.field]) for d in eval_inputs])}
            if spec is not None:
                results["specialist"]["fresh_heldout"] = _evaluate(spec.wasm, fresh, [fam.label_of(it) for it in data["heldout"]])

    # latency, side by side in one process
    lat_inputs = [{fam.field: fam.text_of(it)} for it in data["heldout"]][:200]
    if outcome is not None and lat_inputs:
        from bench.latency import latency_benchmark

        say("[latency] tier-1 warm loop, compiled generation" + (" and specialist" if spec is not None else ""))
        results["latency_benchmark"] = {"compiled": latency_benchmark(outcome.wasm, lat_inputs, n=2000)}
        if spec is not None:
            results["latency_benchmark"]["specialist"] = latency_benchmark(spec.wasm, lat_inputs, n=2000)
            results["specialist"]["tier1_latency_us_p50"] = results["latency_benchmark"]["specialist"]["tier1_single"]["p50"]
        results["tier1_latency_us_p50"] = results["latency_benchmark"]["compiled"]["tier1_single"]["p50"]
    results["wall_s"] = round(time.perf_counter() - started, 2)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
    return results
