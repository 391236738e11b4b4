"""``auto bench guards``: how well each guard variant keeps wrong tier-1 answers out (guards.json).

One triage generation is compiled from the recorded simulator (as :func:`bench.run.run_family`'s
phase 1 does), then every guard variant is measured on three splits:

* ``heldout`` — fresh in-distribution tickets from the corpus generator that are not in the
  training corpus; the reference answer is the simulator's oracle
  (:func:`bench.triage.oracle.triage_oracle`, the reference model at T=0).
* ``ood`` — the out-of-distribution probes of :mod:`bench.triage.probes` (reference answer:
  the oracle); ``admitted`` = tier-1 share, overall and per probe kind.
* ``stream`` — the shifted stream (shift to an unseen category halfway) through
  :func:`bench.stream.run_stream` with the variant's guard, the shift alarm, the shadow audit and
  recompiles; the reference answer is the control leg's (the simulator at T=0.3).

Guard variants:

* ``lexical`` — the compiled guard as it is: the in-artifact n-gram nonconformity (conformal
  novelty) and, for a ``stack`` guard, its selective-risk component.
* ``semantic`` — the novelty component replaced by the host-side semantic novelty test
  (:class:`auto.guards.semantic.SemanticNovelty`: cosine distance of a sentence embedding to the
  nearest reference witness, conformal p-value against calibration witnesses, the same α);
  every other component of the compiled guard (selective risk, program deopt, exact match) is
  kept.
* ``combined`` — the compiled guard *and* the semantic novelty test must both pass.

The embedding is WordLlama (``wordllama`` package, the ``semantic`` extra): its weights and
tokenizer ship inside the wheel and are loaded with downloads disabled; without it the semantic
rows are left out with the reason.

Row fields (``guards.json`` ``rows``): ``family, guard, split, n, tier1, false_proceed``
(wrong tier-1 answers / tier-1 answers), ``false_proceed_ci95_high``, ``false_abstain``
(deopted inputs the artifact would have answered correctly / inputs it would have answered
correctly), ``false_abstain_ci95_high``, ``tier1_share``, ``admitted`` (ood only: tier-1
share), ``notes``. Upper bounds are 95% Clopper–Pearson (:func:`auto.gate.clopper_pearson`).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from auto_runtime.guard import AlwaysDeopt, Guard
from auto_runtime.guard.entries import ConformalNoveltyEntry, GuardEntry
from auto_runtime.manifest import Manifest

from auto.canonical import canonical_json
from auto.errors import ArgumentError
from auto.guards.semantic import SemanticNovelty, SemanticUnavailable, load_embedder, make_host_guard, without_novelty
from auto.gate import clopper_pearson
from bench.triage.oracle import triage_oracle

VARIANTS = ("lexical", "semantic", "combined")
"""Guard variants, in report order (see the module docstring)."""

PUBLISHED_REFERENCE = {
    "source": "the published reference system 'Auto' (Rust; arXiv 2607.04542)",
    "ood_admitted": [{"admitted": 2, "probes": 5, "rate": 0.4, "guard": "lexical"},
                     {"admitted": 3, "probes": 5, "rate": 0.6, "guard": "lexical"}],
    "stream_silent_wrong": {"rate": 0.489, "guard": "loose", "items": 300,
                            "note": "48.9% of tier-1 answers silently wrong on a shifted 300-item stream"},
}
"""The reference system's published guard figures, printed beside ours."""


def variant_guard(variant: str, artifact: Any, semantic: SemanticNovelty | None) -> Any:
    """The guard for ``variant`` on ``artifact`` (a runtime ``Guard`` that ``TieredTask`` accepts).

    ``lexical`` returns the artifact's own guard. ``semantic`` / ``combined`` return the
    :class:`~auto.guards.semantic.HostGuard` of that mode, which must be primed with each input
    (``prime(input)``) before the call.

    Raises:
        ArgumentError: unknown variant, or a semantic variant without a :class:`SemanticNovelty`.
    """
    if variant not in VARIANTS:
        raise ArgumentError(f"unknown guard variant {variant!r} (available: {', '.join(VARIANTS)})")
    if variant == "lexical":
        return artifact.guard
    if semantic is None:
        raise ArgumentError(f"guard variant {variant!r} needs the semantic novelty test")
    return make_host_guard(variant, artifact, semantic)


# ----------------------------------------------------------------------------- measurement


def _eq(a: Any, b: Any) -> bool:
    return canonical_json(a) == canonical_json(b)


def guard_row(*, family: str, guard: str, split: str, tier1: Sequence[bool], answers: Sequence[Any],
              references: Sequence[Any], notes: str = "", kind: str | None = None) -> dict[str, Any]:
    """One ``guards.json`` row from per-input outcomes.

    Args:
        tier1: per input, whether the guard let the tier-1 answer through.
        answers: per input, the artifact's answer regardless of the guard (``None`` if it had none).
        references: per input, the reference answer.
        kind: the OOD probe kind for a per-kind row (``None`` for the split's overall row).

    Returns:
        The row (see the module docstring for the fields; rates are ``None`` when their
        denominator is 0).

    Raises:
        ArgumentError: the three sequences differ in length.
    """
    n = len(tier1)
    if len(answers) != n or len(references) != n:
        raise ArgumentError(f"tier1/answers/references lengths differ: {n}, {len(answers)}, {len(references)}")
    correct = [a is not None and _eq(a, r) for a, r in zip(answers, references)]
    t1 = sum(1 for t in tier1 if t)
    wrong_t1 = sum(1 for t, c in zip(tier1, correct) if t and not c)
    n_correct = sum(correct)
    abstain_correct = sum(1 for t, c in zip(tier1, correct) if c and not t)
    _, fp_high = clopper_pearson(wrong_t1, t1)
    _, fa_high = clopper_pearson(abstain_correct, n_correct)
    row = {
        "family": family, "guard": guard, "split": split, "n": n, "tier1": t1,
        "tier1_wrong": wrong_t1,
        "false_proceed": (wrong_t1 / t1) if t1 else None,
        "false_proceed_ci95_high": fp_high,
        "would_be_correct": n_correct,
        "false_abstain_count": abstain_correct,
        "false_abstain": (abstain_correct / n_correct) if n_correct else None,
        "false_abstain_ci95_high": fa_high,
        "tier1_share": (t1 / n) if n else None,
        "admitted": ((t1 / n) if n else None) if split == "ood" else None,
        "notes": notes,
    }
    if kind is not None:
        row["kind"] = kind
    return row


def evaluate_offline(artifact_bytes: bytes, artifact_id: str, inputs: Sequence[dict[str, Any]], *, variant: str,
                     semantic: SemanticNovelty | None) -> tuple[list[bool], list[Any], list[str]]:
    """Run ``inputs`` through ``TieredTask`` (no reference: declined = deopt) under ``variant``.

    Returns:
        ``(tier1, artifact_answers, reasons)`` per input; ``artifact_answers`` is the artifact's
        answer regardless of the guard (``None`` on an error output or a sandbox limit).
    """
    from auto_runtime import Artifact, TieredTask

    art = Artifact.load(artifact_bytes, expected_id=artifact_id)
    art.guard = variant_guard(variant, art, semantic)
    tiered = TieredTask(art, reference=None)
    raw = Artifact.load(artifact_bytes, expected_id=artifact_id)
    tier1: list[bool] = []
    answers: list[Any] = []
    reasons: list[str] = []
    prime = getattr(art.guard, "prime", None)
    for inp in inputs:
        if prime is not None:
            prime(inp)
        res = tiered(inp)
        tier1.append(res.tier == "tier-1")
        reasons.append(res.reason)
        try:
            out = raw.call(inp)
            answers.append(out.get("answer") if isinstance(out, dict) else None)
        except Exception:  # noqa: BLE001 - a limit or trap: the artifact has no answer
            answers.append(None)
    return tier1, answers, reasons


def _stream_row(family: str, variant: str, run: Any, notes: str) -> dict[str, Any]:
    rows = run.rows
    row = guard_row(family=family, guard=variant, split="stream", tier1=[r.tier == "tier-1" for r in rows],
                    answers=[r.artifact_answer if r.tier != "tier-1" else r.answer for r in rows],
                    references=[r.reference_answer for r in rows], notes=notes)
    row["shift_alarms"] = [a["position"] for a in run.shift_alarms]
    row["generations"] = sum(1 for c in run.compiles if c["verdict"] == "pass")
    row["recompiles"] = len(run.compiles)
    return row


def _stream_extra(run: Any, shift_at: int | None, audit_rate: float) -> dict[str, Any]:
    from bench.report import stream_figures
    from bench.run import guard_figures, shadow_audit_figures

    figs = stream_figures(run.rows)
    out = {k: figs[k] for k in ("items", "tier1", "tier1_share", "silent_wrong", "silent_wrong_count",
                                "silent_wrong_ci95_high", "parity", "reference_self_agreement", "cost_ratio")}
    if shift_at is not None:
        post = stream_figures([r for r in run.rows if r.position >= shift_at])
        out["after_shift"] = {k: post[k] for k in ("items", "tier1_share", "silent_wrong", "silent_wrong_ci95_high")}
    out["shift_alarms"] = run.shift_alarms
    out["compiles"] = [{k: c.get(k) for k in ("position", "generation", "verdict", "compiled_as", "after_shift_alarm")}
                       for c in run.compiles]
    out["guard"] = guard_figures(run.last_manifest)
    out["shadow_audit"] = shadow_audit_figures(run, audit_rate)
    return out


def run_guards(*, out_dir: Path, seed: int = 0, family: str = "triage", items: int = 300, heldout: int = 300,
               warm_start: bool = False, audit_rate: float = 0.1, variants: Sequence[str] = VARIANTS,
               progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Compile one triage generation and measure every guard variant; write ``guards.json``.

    Args:
        out_dir: output folder (stores, artifacts, ``guards.json``).
        seed: corpus, probe and simulator seed.
        family: only ``triage``.
        items: stream length (the shift starts at ``min(150, items // 2)``).
        heldout: number of fresh in-distribution tickets.
        warm_start: begin each stream with the offline generation installed.
        audit_rate: the stream's shadow-audit rate.
        variants: which guard variants to measure (subset of :data:`VARIANTS`).
        progress: callback for human-readable progress lines.

    Returns:
        The ``guards.json`` object: ``rows`` (overall rows per variant and split),
        ``ood_by_kind`` (per-probe-kind rows), ``stream`` (per-variant stream figures),
        ``semantic`` (the embedding test's description, or why it is unavailable),
        ``published_reference``, ``reference_model``, ``offline`` (compile summary), ``wall_s``.

    Raises:
        ArgumentError: unknown family or variant, ``items`` / ``heldout`` below 1.
        GateRefused: the offline generation was refused (nothing to measure).
    """
    from auto.errors import GateRefused
    from auto.gate import Contract
    from bench.run import _fresh_store, _metered_triage, _open_store, generated_stream, offline_generation, reference_endpoint
    from bench.report import write_ratchet_csv
    from bench.stream import run_stream
    from bench.triage import corpus
    from bench.triage.probes import KINDS, generate_probes

    if family != "triage":
        raise ArgumentError(f"unknown guard-bench family {family!r} (available: triage)")
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        raise ArgumentError(f"unknown guard variant(s) {', '.join(bad)} (available: {', '.join(VARIANTS)})")
    if items < 1 or heldout < 1:
        raise ArgumentError("--items and the held-out count must be >= 1")
    say = progress or (lambda _m: None)
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    contract = Contract.default_for("triage")
    results: dict[str, Any] = {"family": family, "seed": seed, "published_reference": PUBLISHED_REFERENCE,
                               "warm_start": warm_start, "audit_rate": audit_rate}
    try:
        embed = load_embedder()
        semantic_status: dict[str, Any] = {"available": True}
    except SemanticUnavailable as e:
        embed = None
        semantic_status = {"available": False, "reason": str(e)}
        say(f"[guards] semantic rows left out: {e}")
    live = [v for v in variants if v == "lexical" or embed is not None]
    rows: list[dict[str, Any]] = []
    by_kind: list[dict[str, Any]] = []
    streams: dict[str, Any] = {}
    with reference_endpoint(seed) as ref_label:
        results["reference_model"] = ref_label
        say(f"reference model: {ref_label}")
        data = corpus.default_corpus(seed)
        offline_res, outcome = offline_generation(data, out_dir=out_dir, contract=contract, reference_label=ref_label,
                                                  progress=say)
        results["offline"] = offline_res.get("compile")
        if outcome is None:
            raise GateRefused(f"the offline generation was refused: {offline_res['compile'].get('reason')}",
                              offline_res["compile"].get("eval_run_id"))
        alpha = _novelty_alpha(outcome.typed_manifest.guard, contract.alpha)
        semantic = None
        if embed is not None:
            semantic = SemanticNovelty.from_witness_texts([t.ticket for t in data["train"]], alpha, embed)
            semantic_status.update(semantic.describe())
        results["semantic"] = semantic_status

        train_texts = {t.ticket for t in data["train"]}
        fresh = [t for t in corpus.generate(heldout + len(train_texts), seed=seed + 5000) if t.ticket not in train_texts][:heldout]
        held_inputs = [{"ticket": t.ticket} for t in fresh]
        held_refs = [triage_oracle(t.ticket)[0] for t in fresh]
        probes = generate_probes(seed)
        probe_inputs = [{"ticket": p.ticket} for p in probes]
        probe_refs = [triage_oracle(p.ticket)[0] for p in probes]
        results["heldout_source"] = (f"{len(fresh)} fresh generated tickets (seed {seed + 5000}) not in training; "
                                     "reference: simulator oracle (T=0)")
        results["ood_source"] = f"{len(probes)} probes (bench.triage.probes, seed {seed}); reference: simulator oracle (T=0)"
        for v in live:
            say(f"[guards] {v}: held-out and OOD probes")
            t1, ans, _ = evaluate_offline(outcome.wasm, outcome.artifact_id, held_inputs, variant=v, semantic=semantic)
            rows.append(guard_row(family=family, guard=v, split="heldout", tier1=t1, answers=ans, references=held_refs,
                                  notes=_variant_note(v, outcome.typed_manifest)))
            t1, ans, _ = evaluate_offline(outcome.wasm, outcome.artifact_id, probe_inputs, variant=v, semantic=semantic)
            rows.append(guard_row(family=family, guard=v, split="ood", tier1=t1, answers=ans, references=probe_refs,
                                  notes=_variant_note(v, outcome.typed_manifest)))
            groups: dict[str, list[int]] = defaultdict(list)
            for i, p in enumerate(probes):
                groups[p.kind].append(i)
            for k in KINDS:
                idx = groups.get(k, [])
                by_kind.append(guard_row(family=family, guard=v, split="ood", kind=k, tier1=[t1[i] for i in idx],
                                         answers=[ans[i] for i in idx], references=[probe_refs[i] for i in idx]))

        stream_items, labels, shifts = generated_stream(data, items=items, seed=seed)
        shift_at = shifts[0]
        results["stream_source"] = f"generated (seed {seed}, shift to '{corpus.SHIFT_CATEGORY}' at item {shift_at})"
        for v in live:
            say(f"[guards] {v}: the shifted stream ({len(stream_items)} items)")
            vdir = out_dir / f"stream-{v}"
            vdir.mkdir(parents=True, exist_ok=True)
            for old in vdir.glob("triage.gen*.wasm"):
                old.unlink()
            st = _fresh_store(vdir / "stream.sqlite")
            if warm_start:
                with _open_store(out_dir / "offline.sqlite") as off:
                    st.ingest(off.spans(), off.traces())
            st.close()

            factory = None if v == "lexical" else semantic_guard_factory(v, embed, contract.alpha)  # type: ignore[arg-type]
            run = run_stream(task="triage", items=stream_items, labels=labels, reference=_metered_triage,
                             store_path=vdir / "stream.sqlite", contract=contract,
                             initial=outcome if warm_start else None, reference_model=ref_label, progress=say,
                             audit_rate=audit_rate, audit_seed=seed, guard_factory=factory, worker="thread")
            write_ratchet_csv(run.rows, vdir / "ratchet.csv", simulated=ref_label.startswith("simulated"))
            rows.append(_stream_row(family, v, run, _variant_note(v, outcome.typed_manifest)
                                    + "; reference: the control leg (simulator at T=0.3)"))
            streams[v] = _stream_extra(run, shift_at, audit_rate)
    for v in VARIANTS:
        if v in variants and v not in live:
            for split in ("heldout", "ood", "stream"):
                rows.append({"family": family, "guard": v, "split": split, "n": 0, "tier1": 0, "tier1_wrong": 0,
                             "false_proceed": None, "false_proceed_ci95_high": None, "would_be_correct": 0,
                             "false_abstain_count": 0, "false_abstain": None, "false_abstain_ci95_high": None,
                             "tier1_share": None, "admitted": None,
                             "notes": f"left out: {semantic_status.get('reason')}"})
    results["rows"] = rows
    results["ood_by_kind"] = by_kind
    results["stream"] = streams
    results["wall_s"] = round(time.perf_counter() - started, 2)
    (out_dir / "guards.json").write_text(json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                                         encoding="utf-8")
    return results


def semantic_guard_factory(variant: str, embed: Callable[[Sequence[str]], np.ndarray],
                           default_alpha: float) -> Callable[[Any, Any], Guard]:
    """A ``guard_factory`` for :func:`bench.stream.run_stream`: at each installed generation,
    calibrate :class:`SemanticNovelty` on the stream store's witnesses (the same α as the
    artifact's novelty test) and build the ``variant`` guard. Too few witnesses to split into
    reference and calibration sets gives an :class:`AlwaysDeopt` guard for that generation.
    """
    def factory(art: Any, store: Any) -> Guard:
        texts = [w.input.get("ticket") for w in store.witnesses(art.task) if isinstance(w.input, dict)]
        texts = [t for t in texts if isinstance(t, str)]
        try:
            sem = SemanticNovelty.from_witness_texts(texts, _novelty_alpha(art.typed_manifest.guard, default_alpha), embed)
        except ArgumentError as e:
            return AlwaysDeopt(f"semantic novelty not calibrated: {e}")
        return variant_guard(variant, art, sem)

    return factory


def _novelty_alpha(entry: GuardEntry, default: float) -> float:
    """α of the compiled novelty test (the guard entry itself or its first novelty stack
    component), else ``default``."""
    for e in (entry, *getattr(entry, "components", ())):
        if isinstance(e, ConformalNoveltyEntry) and isinstance(e.alpha, (int, float)):
            return float(e.alpha)
    return float(default)


def _variant_note(variant: str, manifest: Manifest) -> str:
    entry = manifest.guard.to_dict()
    if variant == "lexical":
        comps = entry.get("components")
        what = ", ".join(str(c.get("method")) for c in comps) if isinstance(comps, list) else str(entry.get("method"))
        return f"compiled guard as is ({what}; artifact compiled as {manifest.compiled_as})"
    _rest, note = without_novelty(entry)
    if variant == "semantic":
        return f"semantic novelty (host embedding) instead of the n-gram novelty; {note}"
    return "compiled guard and semantic novelty must both pass"


# ----------------------------------------------------------------------------- report


def render_table(results: dict[str, Any]) -> str:
    """The human table: one line per (variant, split), then OOD per kind, then the published figures."""
    def pct(v: Any) -> str:
        return "   n/a" if v is None else f"{v:6.1%}"

    lines = [f"guard bench: family {results['family']}   reference model: {results.get('reference_model')}",
             f"{'guard':<9} {'split':<8} {'n':>4} {'tier1':>5} {'share':>6}  {'false-proceed':>13} {'(95% hi)':>8}  "
             f"{'false-abstain':>13} {'(95% hi)':>8}"]
    for r in results["rows"]:
        if r["n"] == 0 and r["notes"].startswith("left out"):
            lines.append(f"{r['guard']:<9} {r['split']:<8}  {r['notes']}")
            continue
        lines.append(f"{r['guard']:<9} {r['split']:<8} {r['n']:>4} {r['tier1']:>5} {pct(r['tier1_share'])}  "
                     f"{pct(r['false_proceed']):>13} {pct(r['false_proceed_ci95_high']):>8}  "
                     f"{pct(r['false_abstain']):>13} {pct(r['false_abstain_ci95_high']):>8}")
    if results.get("ood_by_kind"):
        lines.append("OOD probes admitted (tier-1) per kind:")
        kinds: list[str] = []
        for r in results["ood_by_kind"]:
            if r["kind"] not in kinds:
                kinds.append(r["kind"])
        guards = [g for g in VARIANTS if any(r["guard"] == g for r in results["ood_by_kind"])]
        lines.append("  " + f"{'kind':<18}" + "".join(f"{g:>12}" for g in guards))
        for k in kinds:
            cells = []
            for g in guards:
                r = next(x for x in results["ood_by_kind"] if x["kind"] == k and x["guard"] == g)
                cells.append(f"{r['tier1']:>4}/{r['n']:<3}{pct(r['admitted']).strip():>5}" if r["n"] else "n/a")
            lines.append("  " + f"{k:<18}" + "".join(f"{c:>12}" for c in cells))
    pub = results["published_reference"]
    ours_ood = {r["guard"]: r for r in results["rows"] if r["split"] == "ood" and r["n"]}
    ours_stream = {r["guard"]: r for r in results["rows"] if r["split"] == "stream" and r["n"]}
    lines.append(f"published reference ({pub['source']}):")
    lines.append("  OOD probes admitted: " + ", ".join(f"{x['admitted']}/{x['probes']} ({x['rate']:.0%}, {x['guard']})"
                                                     for x in pub["ood_admitted"])
                 + "   ours: " + ", ".join(f"{g} {r['tier1']}/{r['n']} ({pct(r['admitted']).strip()})" for g, r in ours_ood.items()))
    lines.append(f"  stream silent-wrong tier-1 answers: {pub['stream_silent_wrong']['rate']:.1%} ({pub['stream_silent_wrong']['guard']} guard)"
                 + "   ours: " + ", ".join(f"{g} {r['tier1_wrong']}/{r['tier1']} ({pct(r['false_proceed']).strip()}, "
                                          f"95% hi {pct(r['false_proceed_ci95_high']).strip()})" for g, r in ours_stream.items()))
    sem = results.get("semantic") or {}
    if not sem.get("available", True):
        lines.append(f"semantic rows left out: {sem.get('reason')}")
    return "\n".join(lines)
