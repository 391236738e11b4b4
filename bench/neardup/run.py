"""``python -m bench.neardup``: the near-duplicate stream through the ratchet, beside its peers.

A cold deployment (no artifact, no witnesses) of a ticket classifier whose reference is
:class:`bench.neardup.reference.Reference`, driven item by item through
:func:`bench.stream.run_stream` (the ratchet with its control leg and a second reference call per
item; each compile awaited, so the figures follow the evidence rather than this machine's speed).
The peers (:mod:`bench.peers`: the memo-only ceiling, an exact dict, the GPTCache-style
similarity cache at each threshold) are replayed on the same items with the control leg's
answers. ``results.json`` carries the stream figures of :func:`bench.report.stream_figures`
(``cost_ratio`` counts the audit spend), the peers, ``ahead_of_similarity_cache`` (every threshold
whose excess silent-wrong is ≤ 1 point), ``ahead_at_equal_excess`` (ahead at every one of them
with the ratchet's own excess also ≤ 1 point), the generations and compiles, and per role (``seen``
categories, the ``shift``; :func:`bench.intents.run.role_figures`) the tier-1 share and the tier-1
answers that differ from the control leg's; ``neardup_replay``: the neardup rung's serving rule replayed on the same items without
its certificate (:mod:`bench.neardup.replay`, an upper reference, not the product); ``ratchet.csv``
has one row per item.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from auto.errors import ArgumentError


def run_neardup(*, out_dir: Path, items: int = 600, seed: int = 0, noise: float | None = None, audit_rate: float = 0.05,
                worker: str = "process",
                peers: bool = True, embed: Callable[[Any], Any] | None = None,
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the stream cold and write ``results.json`` (module docstring); returns it.

    ``noise``: the reference's per-call noise (default :data:`bench.neardup.reference.NOISE`).

    Raises:
        ArgumentError: ``items`` < 1, ``audit_rate`` outside [0, 1], ``noise`` outside [0, 1).
    """
    if not 0.0 <= audit_rate <= 1.0:
        raise ArgumentError(f"--audit-rate must be in [0, 1], got {audit_rate!r}")
    from auto.gate import Contract
    from bench.neardup import corpus
    from bench.neardup.reference import LATENCY_MS, NOISE, Reference
    from bench.peers import ahead_of_similarity_cache, items_from_rows, peer_figures
    from bench.report import stream_figures, write_ratchet_csv
    from bench.run import _fresh_store, shadow_audit_figures
    from bench.stream import Metered, run_stream

    say = progress or (lambda _m: None)
    stream, shift_at = corpus.stream(items, seed)
    ref = Reference(seed, NOISE if noise is None else noise)
    ref.register(stream)

    def metered(inp: dict[str, Any]) -> Metered:
        ans, cost = ref.answer(inp[corpus.FIELD])
        return Metered(answer=ans, cost_usd_micros=cost, latency_ms=LATENCY_MS, simulated=True)

    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    distinct = len({it.ticket for it in stream})
    results: dict[str, Any] = {"family": "neardup", "warm_start": False, "simulated": True, "seed": seed,
                               "stream_source": f"hand-written near-duplicate tickets (seed {seed}, {len(stream)} items, "
                                                f"{distinct} distinct texts, {len({it.base for it in stream})} base tickets, "
                                                f"shift at {shift_at})",
                               "reference_model": f"simulated (bench.neardup.reference, per-call noise {ref.noise:g})",
                               "reference_noise": ref.noise}
    store_path = out_dir / "stream.sqlite"
    _fresh_store(store_path).close()
    art_dir = Path(f"{store_path}.artifacts")
    for old in art_dir.glob("*.wasm") if art_dir.exists() else []:
        old.unlink()
    say(f"[stream] {len(stream)} items ({distinct} distinct) through the ratchet, cold")
    run = run_stream(task="neardup", items=[{corpus.FIELD: it.ticket} for it in stream],
                     labels=[corpus.category_of(it.base, it.amount) for it in stream], reference=metered,
                     store_path=store_path, contract=Contract.default_for("neardup"),
                     reference_model=results["reference_model"], progress=say, audit_rate=audit_rate,
                     audit_seed=seed, worker=worker)
    results.update(stream_figures(run.rows))
    from bench.intents.run import role_figures

    roles = role_figures(run.rows, ["shift" if it.shift else "seen" for it in stream])
    verdicts: dict[str, int] = {}
    for c in run.compiles:
        verdicts[str(c["verdict"])] = verdicts.get(str(c["verdict"]), 0) + 1
    results.update({"roles": roles, "shift_at": shift_at, "generations": run.generations,
                    "compiled_as": [g.get("compiled_as") for g in run.generations],
                    "recompiles": len(run.compiles), "compile_verdicts": verdicts,
                    "compile_errors": sum(1 for c in run.compiles if c["verdict"] not in ("pass", "refuse")),
                    "compiles": run.compiles, "shadow_audit": shadow_audit_figures(run, audit_rate),
                    "first_tier1_near_duplicate": next((r.position for r, it in zip(run.rows, stream) if r.tier == "tier-1"
                                                        and r.reason != "overlay" and it.ticket not in
                                                        {s.ticket for s in stream[:r.position]}), None),
                    "reference_calls": ref.calls})
    if peers:
        say("[peers] exact dict and similarity cache on the same items")
        peer_items = items_from_rows(run.rows, lambda inp: inp[corpus.FIELD])
        p = peer_figures(peer_items, embed)
        results["peers"] = p
        from bench.neardup.replay import replay

        results["neardup_replay"] = replay(peer_items, corpus.FIELD)
        results["memo_ceiling"] = p["memo_ceiling"]
        results["ahead_of_similarity_cache"] = ahead_of_similarity_cache(results, p)
        # ahead at equal excess: the ratchet's own excess must be within the same 1-point budget
        ex = results.get("excess_silent_wrong")
        results["ratchet_excess_within_1pt"] = ex is not None and ex <= 0.01
        results["ahead_at_equal_excess"] = bool(results["ahead_of_similarity_cache"]) and results[
            "ratchet_excess_within_1pt"] and all(a["ahead"] for a in results["ahead_of_similarity_cache"])
    results["wall_s"] = round(time.perf_counter() - started, 2)
    write_ratchet_csv(run.rows, out_dir / "ratchet.csv", simulated=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n",
                                          encoding="utf-8")
    return results


def render(results: dict[str, Any]) -> str:
    """A human summary of ``results``."""
    def f(v: Any, fmt: str = ".3f") -> str:
        return "n/a" if v is None else format(v, fmt)

    lines = [f"near-duplicate stream ({results['stream_source']}; {results['reference_model']})",
             f"  ratchet: cost ratio {f(results['cost_ratio'], '.2f')}x with audits "
             f"({f(results.get('cost_ratio_without_audit'), '.2f')}x without), tier-1 {f(results['tier1_share'])}, "
             f"excess silent-wrong {f(results['excess_silent_wrong'], '+.4f')} (95% upper "
             f"{f(results['excess_silent_wrong_ci95_high'], '.4f')})",
             f"  compiles: {results['recompiles']} ({results['compile_verdicts']}); generations: "
             f"{', '.join(str(c) for c in results['compiled_as'])}"]
    p = results.get("peers")
    if p:
        from bench.peers import peer_lines

        lines += peer_lines(p)
        for a in results.get("ahead_of_similarity_cache") or []:
            lines.append(f"  vs similarity cache @{a['threshold']:g} (excess {a['peer_excess']:+.4f}): "
                         f"{'ahead' if a['ahead'] else 'NOT ahead'} ({f(a['ratchet_cost_ratio'], '.2f')}x vs "
                         f"{f(a['peer_cost_ratio'], '.2f')}x)")
        if "ahead_at_equal_excess" in results:
            lines.append(f"  ahead of every similarity-cache threshold within 1 point of excess, with the ratchet's own "
                         f"excess within 1 point: {'yes' if results['ahead_at_equal_excess'] else 'no'}")
    return "\n".join(lines)
