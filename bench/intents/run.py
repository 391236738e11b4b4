"""``auto bench run intents``: real utterances through the product's ratchet, beside its peers.

A cold deployment (no artifact, no witnesses) of the intents agent (:mod:`bench.intents.agent`)
driven item by item through :func:`bench.stream.run_stream` (the ratchet, with the control leg)
over a stream of :mod:`bench.intents.corpus` (Zipf repeats, the held-back intents from the shift
on, out-of-scope utterances; ``near-duplicate``: surface variations). The reference model is the
embedded simulator (:mod:`bench.intents.oracle`) unless ``OPENAI_BASE_URL`` is set.

``results.json`` carries the stream figures of :func:`bench.report.stream_figures` with
``cost_ratio`` = the audited ratio (audit spend counted in the tiered leg;
``cost_ratio_without_audit`` keeps the other), the peers (:mod:`bench.peers`: memo-only ceiling,
exact dict, similarity cache at each threshold) on the same items, per-role figures (in-scope,
shift, out-of-scope: ``out_of_scope_admitted_disagreeing`` is the share of out-of-scope items
answered at tier 1 with an answer other than the control leg's), and every compile with its
verdict (``compile_errors`` counts those that ended in an error rather than a pass or a refusal).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from auto.canonical import canonical_json
from auto.errors import ArgumentError


def _metered(inp: dict[str, Any]) -> Any:
    from auto.record.pricing import cost_usd_micros
    from bench.intents import agent
    from bench.stream import Metered
    from bench.triage.agent import model_name

    t0 = time.perf_counter()
    label, resp, headers = agent.ask(inp["utterance"])
    wall_ms = (time.perf_counter() - t0) * 1000.0
    sim_ms = headers.get("x-auto-latency-ms")
    usage = getattr(resp, "usage", None)
    cost = None
    if usage is not None:
        cost = cost_usd_micros(resp.model or model_name(), usage.prompt_tokens, usage.completion_tokens)
    return Metered(answer=label, cost_usd_micros=cost, latency_ms=float(sim_ms) if sim_ms else wall_ms,
                   simulated=sim_ms is not None)


def role_figures(rows: list[Any], roles: list[str]) -> dict[str, Any]:
    """Per role: items, tier-1 share, and tier-1 answers that differ from the control leg's answer
    (count and share of the role's items). Beside them, on the same tier-1 items, how often the
    reference's second answer differs from the control's (``reference_self_disagreeing``: the share
    a fresh reference call would disagree anyway, its per-call noise) and the excess
    (``admitted_disagreeing_excess_share``: the difference of the two counts over the role's items)."""
    out: dict[str, Any] = {}
    for role in sorted(set(roles)):
        rs = [r for r, k in zip(rows, roles) if k == role]
        t1 = [r for r in rs if r.tier == "tier-1"]
        bad = sum(1 for r in t1 if canonical_json(r.answer) != canonical_json(r.reference_answer))
        own = sum(1 for r in t1 if canonical_json(r.reference_answer_2) != canonical_json(r.reference_answer))
        out[role] = {"items": len(rs), "tier1": len(t1), "tier1_share": len(t1) / len(rs) if rs else None,
                     "admitted_disagreeing": bad, "admitted_disagreeing_share": bad / len(rs) if rs else None,
                     "reference_self_disagreeing": own,
                     "admitted_disagreeing_excess_share": (bad - own) / len(rs) if rs else None}
    return out


def run_intents(*, out_dir: Path, items: int = 3000, seed: int = 0, generator: str = "zipf", audit_rate: float = 0.05,
                worker: str = "process", peers: bool = True, embed: Callable[[Any], Any] | None = None,
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the intents stream cold and write ``results.json``, ``ratchet.csv`` and ``cost.png``.

    Args:
        out_dir: output folder (created).
        items: stream length; seed: stream and simulator seed; generator: ``zipf`` or
            ``near-duplicate`` (:data:`bench.intents.corpus.GENERATORS`).
        audit_rate: the shadow audit's share of tier-1 answers; worker: the ratchet's compile worker.
        peers: also replay the exact dict and the similarity cache on the same items.
        embed: the similarity cache's embedding (default WordLlama, :func:`bench.peers.peer_figures`).

    Returns:
        The ``results.json`` object.

    Raises:
        ArgumentError: ``items`` < 1, an unknown generator, ``audit_rate`` outside [0, 1].
    """
    if not 0.0 <= audit_rate <= 1.0:
        raise ArgumentError(f"--audit-rate must be in [0, 1], got {audit_rate!r}")
    from auto.gate import Contract
    from bench.intents import corpus
    from bench.peers import ahead_of_similarity_cache, items_from_rows, peer_figures
    from bench.report import plot_stream, steady_state, stream_figures, write_ratchet_csv
    from bench.run import _fresh_store, guard_figures, reference_endpoint, shadow_audit_figures
    from bench.stream import run_stream

    say = progress or (lambda _m: None)
    stream, shift_at = corpus.stream(items, seed, generator)  # fails before any work
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict[str, Any] = {"family": "intents", "generator": generator, "warm_start": False}
    inputs = [{"utterance": u.utterance} for u in stream]
    roles = [u.role for u in stream]
    distinct = len({u.utterance for u in stream})
    results["stream_source"] = (f"generated {generator} stream over HWU64 (seed {seed}, {len(stream)} items, "
                                f"{distinct} distinct, shift at {shift_at})")
    with reference_endpoint(seed) as ref_label:
        results["reference_model"] = ref_label
        say(f"reference model: {ref_label}")
        store_path = out_dir / "stream.sqlite"
        _fresh_store(store_path).close()
        art_dir = Path(f"{store_path}.artifacts")
        for old in art_dir.glob("*.wasm") if art_dir.exists() else []:
            old.unlink()
        say(f"[stream] {len(inputs)} items ({distinct} distinct) through the ratchet, cold")
        run = run_stream(task="intents", items=inputs, labels=[u.label for u in stream], reference=_metered,
                         store_path=store_path, contract=Contract.default_for("intents"), reference_model=ref_label,
                         progress=say, audit_rate=audit_rate, audit_seed=seed, worker=worker)
    figs = stream_figures(run.rows)
    results.update(figs)  # cost_ratio is the audited figure, cost_ratio_without_audit beside it
    roles_f = role_figures(run.rows, roles)
    oos = roles_f.get("out-of-scope", {})
    verdicts: dict[str, int] = {}
    for c in run.compiles:
        verdicts[str(c["verdict"])] = verdicts.get(str(c["verdict"]), 0) + 1
    results.update({
        "steady_state": steady_state(run.rows),
        "roles": roles_f,
        "out_of_scope_admitted_disagreeing": oos.get("admitted_disagreeing_share"),
        "out_of_scope_admitted_disagreeing_excess": oos.get("admitted_disagreeing_excess_share"),
        "shift_at": shift_at, "shifts": [shift_at],
        "generations": run.generations, "generation_count": len(run.generations),
        "compiled_as": [g.get("compiled_as") for g in run.generations],
        "recompiles": len(run.compiles), "compile_verdicts": verdicts,
        "compile_errors": sum(1 for c in run.compiles if c["verdict"] not in ("pass", "refuse")),
        "compiles": run.compiles,
        "guard": guard_figures(run.last_manifest),
        "shift_alarms": [a["position"] for a in run.shift_alarms], "rollbacks": run.rollbacks,
        "shadow_audit": shadow_audit_figures(run, audit_rate),
        "ratchet": {"worker": worker, "audit_rate": audit_rate, "final": run.status},
        "noise_probe": (run.status or {}).get("noise_probe"),
    })
    if peers:
        say("[peers] exact dict and similarity cache on the same items")
        p = peer_figures(items_from_rows(run.rows, lambda inp: inp["utterance"]), embed)
        results["peers"] = p
        results["memo_ceiling"] = p["memo_ceiling"]
        results["ahead_of_similarity_cache"] = ahead_of_similarity_cache(results, p)
    results["wall_s"] = round(time.perf_counter() - started, 2)
    write_ratchet_csv(run.rows, out_dir / "ratchet.csv", simulated=results["reference_model"].startswith("simulated"))
    plot_stream(run.rows, run.compiles, out_dir / "cost.png",
                title=f"AUTO-BENCH intents ({generator}): tiered vs control", shifts=[shift_at])
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n",
                                          encoding="utf-8")
    return results


def render(results: dict[str, Any]) -> str:
    """A human summary of ``results`` (stderr)."""
    def f(v: Any, fmt: str = ".3f") -> str:
        return "n/a" if v is None else format(v, fmt)

    lines = [f"AUTO-BENCH intents ({results['stream_source']}; {results['reference_model']})",
             f"  ratchet: cost ratio {f(results['cost_ratio'], '.2f')}x with audits "
             f"({f(results.get('cost_ratio_without_audit'), '.2f')}x without), tier-1 {f(results['tier1_share'])}, "
             f"excess silent-wrong {f(results['excess_silent_wrong'], '+.4f')} (95% upper "
             f"{f(results['excess_silent_wrong_ci95_high'], '.4f')}), out-of-scope admitted and disagreeing "
             f"{f(results.get('out_of_scope_admitted_disagreeing'), '.4f')} (excess over the reference's own "
             f"{f(results.get('out_of_scope_admitted_disagreeing_excess'), '+.4f')})",
             f"  compiles: {results['recompiles']} ({results['compile_verdicts']}), generations "
             f"{results['generation_count']}: {', '.join(str(c) for c in results['compiled_as'])}"]
    np_ = results.get("noise_probe")
    if np_:
        lines.append(f"  noise probe: {np_['probes']} paid re-asks (cap {np_['max']}, share {np_['share']:g}), "
                     f"{np_['disagreeing']} of {np_['answered']} answered differently"
                     + (f"; not running: {np_['why_not']}" if np_.get("why_not") else ""))
    p = results.get("peers")
    if p:
        lines.append(f"  memo-only ceiling (items/distinct): {f(p['memo_ceiling'], '.2f')}x")
        for q in [p["exact_dict"]] + list(p.get("similarity_cache") or []):
            lines.append(f"  {q['peer']:<24} cost ratio {f(q['cost_ratio'], '.2f')}x, served {f(q['served_share'])}, "
                         f"excess {f(q['excess_silent_wrong'], '+.4f')} (95% upper {f(q['excess_silent_wrong_ci95_high'], '.4f')})")
        if p.get("similarity_cache_unavailable"):
            lines.append(f"  similarity cache unavailable: {p['similarity_cache_unavailable']}")
    return "\n".join(lines)
