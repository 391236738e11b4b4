"""``auto bench run FAMILY``: record → census → compile → verify, then the stream (the ratchet).

Phases of the default run (``--stream`` replaces only phase 2's items):

1. **offline** — the family's seeded corpus: the reference agent is recorded twice over the
   training slice into ``offline.sqlite``; the census runs over those traces; one generation is
   compiled and verified (its gate numbers are reported).
2. **stream** — a fresh deployment: a separate store, no artifact; items go through the tiered
   runtime, new witnesses feed recompiles; a control leg (reference on every item) is run beside
   it (see :mod:`bench.stream`).

Outputs in ``--out``: ``results.json``, ``ratchet.csv``, ``cost.png``, the stores and the
artifacts. Besides the control leg's ``silent_wrong`` figures, ``results.json`` carries the guard
stack of the last installed generation (``guard``: α, ε, δ, thresholds, n), the stream positions
where the shift monitor alarmed (``shift_alarms``) and the shadow audit's measured silent-wrong
rate (``shadow_audit``: n, disagreements, Clopper–Pearson 95% interval; ``--audit-rate``). The reference model is the embedded simulator unless ``OPENAI_BASE_URL`` is set; every
output it influences says so in ``reference_model``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from auto_runtime.manifest import Manifest

from auto.errors import ArgumentError, GateRefused, ReferenceModelError

from auto.progress import Progress
from bench.jsonl import read_objects
from bench.peers import items_from_rows, peer_figures
from bench.report import plot_stream, steady_state, stream_figures, write_ratchet_csv
from bench.stream import Metered, run_stream


@contextlib.contextmanager
def reference_endpoint(seed: int) -> Iterator[str]:
    """Point the ``openai`` client at the reference model; yield its label for reports.

    With ``OPENAI_BASE_URL`` set, that endpoint is used as it is (``OPENAI_API_KEY`` from the
    environment). Otherwise the embedded simulator starts on loopback and the environment points
    at it for the duration (restored afterwards).

    Raises:
        ReferenceModelError: ``OPENAI_BASE_URL`` is set without ``OPENAI_API_KEY`` (before any
            work), or the endpoint could not be reached or refused a call (one line, from the
            ``openai`` error raised inside the block).
    """
    from bench.triage import agent

    url = os.environ.get("OPENAI_BASE_URL")
    if url:
        if not os.environ.get("OPENAI_API_KEY"):
            raise ReferenceModelError(
                f"OPENAI_BASE_URL is set ({url}) but OPENAI_API_KEY is not: set it (any value for a server that "
                f"takes none), or unset OPENAI_BASE_URL to use the embedded simulator")
        agent.reset_client()
        with _endpoint_errors(url):
            yield f"{agent.model_name()} at {url}"
        return
    from bench.sim import SimServer

    saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    with SimServer(seed=seed) as sim:
        os.environ["OPENAI_BASE_URL"] = sim.base_url
        os.environ["OPENAI_API_KEY"] = "sk-simulated-no-key"
        agent.reset_client()
        try:
            with _endpoint_errors(sim.base_url):
                yield f"simulated: {agent.model_name()} (bench.sim, seed {seed})"
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            agent.reset_client()


@contextlib.contextmanager
def _endpoint_errors(url: str) -> Iterator[None]:
    """An ``openai`` error leaving the block becomes one :class:`ReferenceModelError` line."""
    import openai

    try:
        yield
    except openai.APIConnectionError as e:  # also APITimeoutError
        cause = e.__cause__ or e.__context__
        raise ReferenceModelError(
            f"cannot reach the reference model at {url} ({e}{f' {type(cause).__name__}: {cause}' if cause else ''}; "
            f"after the client's retries): start the server, fix OPENAI_BASE_URL, or unset it to use the embedded "
            f"simulator") from None
    except openai.APIStatusError as e:
        raise ReferenceModelError(f"the reference model at {url} refused a call: HTTP {e.status_code}: "
                                  f"{str(e.message).splitlines()[0] if e.message else ''}") from None
    except openai.OpenAIError as e:
        raise ReferenceModelError(f"the reference model at {url} could not be used: {type(e).__name__}: "
                                  f"{str(e).splitlines()[0] if str(e) else ''}") from None


def shadow_audit_figures(run: Any, audit_rate: float) -> dict[str, Any]:
    """``results.json``'s ``shadow_audit``: the audit's counts and silent-wrong rate with its CI.

    ``n`` audited tier-1 answers, ``disagreements`` with the re-asked reference, ``silent_wrong``
    = disagreements / n with 95% Clopper–Pearson bounds (:func:`auto.guards.audit.audit_summary`),
    plus the configured ``rate``, the audit's reference spend (µ$) and its repeat budget
    (``repeat_budget``: the share, derived answers offered, exact-match answers selected and
    left unaudited by the budget; :class:`auto_runtime.audit.ShadowAudit`).
    """
    from auto.guards.audit import audit_summary

    if run.audit is None or audit_rate <= 0:
        return {"rate": audit_rate, "n": 0, "disagreements": 0, "silent_wrong": None, "note": "shadow audit off"}
    st = run.audit.stats()
    return {"rate": audit_rate, **audit_summary(run.audit), "cost_usd_micros": round(run.audit_cost_usd_micros, 3),
            "repeat_budget": {k: st.get(k) for k in ("hit_budget", "derived", "hit_selected", "hit_over_budget")}}


def _metered_triage(inp: dict[str, Any]) -> Metered:
    from auto.record.pricing import cost_usd_micros
    from bench.triage import agent

    t0 = time.perf_counter()
    label, resp, headers = agent.ask(inp["ticket"])
    wall_ms = (time.perf_counter() - t0) * 1000.0
    sim_ms = headers.get("x-auto-latency-ms")
    usage = getattr(resp, "usage", None)
    cost = None
    if usage is not None:
        cost = cost_usd_micros(resp.model or agent.model_name(), usage.prompt_tokens, usage.completion_tokens)
    return Metered(answer=label, cost_usd_micros=cost, latency_ms=float(sim_ms) if sim_ms else wall_ms, simulated=sim_ms is not None)


def _read_stream(path: Path, field: str) -> tuple[list[dict[str, Any]], list[str | None]]:
    items: list[dict[str, Any]] = []
    labels: list[str | None] = []
    for obj in read_objects(path, field):
        items.append({field: obj[field]})
        lab = obj.get("category", obj.get("label"))
        labels.append(lab if isinstance(lab, str) else None)
    if not items:
        raise ArgumentError(f"{path}: no items")
    return items, labels


def _open_store(path: Path) -> Any:
    from auto.store import Store

    return Store(path)


def _fresh_store(path: Path) -> Any:
    from auto.store import Store

    for suffix in ("", "-wal", "-shm"):
        p = Path(str(path) + suffix)
        if p.exists():
            p.unlink()
    return Store(path)


def offline_generation(data: dict[str, Any], *, out_dir: Path, contract: Any, reference_label: str,
                       progress: Callable[[str], None] | None = None) -> tuple[dict[str, Any], Any]:
    """Phase 1: record the reference agent twice over ``data["train"]``, census, compile one generation.

    Needs the reference endpoint configured (inside :func:`reference_endpoint`). Writes
    ``offline.sqlite`` (replaced) and ``triage.offline.wasm`` into ``out_dir``.

    Returns:
        ``(offline_results, outcome)``: the ``results.json`` ``offline`` object (census, task site,
        compile summary or refusal) and the :class:`~auto.compile.CompileOutcome`, or ``None``
        when the gate refused.
    """
    import auto
    from auto.census import census
    from auto.compile import compile_task
    from bench.triage import agent

    say = progress or (lambda _m: None)
    offline = _fresh_store(out_dir / "offline.sqlite")
    train = data["train"]
    say(f"[offline] recording the reference agent twice over {len(train)} training tickets")
    with auto.recording(offline), Progress("[offline] recorded", 2 * len(train), say,
                                           stream=sys.stderr if progress is not None else None) as done:
        for _ in range(2):
            for t in train:
                agent.triage(t.ticket)
                done.advance()
    cen = census(offline.spans())
    task_site = next((s for s in cen.sites if s.kind == "task"), None)
    say(f"[offline] census: {cen.deterministic_spans}/{cen.spans} spans witnessed-deterministic"
        + (f" ({cen.headline:.1%})" if cen.headline is not None else ""))
    offline_res: dict[str, Any] = {"census": cen.to_dict(), "task_site": task_site.to_dict() if task_site else None}
    outcome = None
    try:
        outcome = compile_task(offline, "triage", contract=contract, out_path=out_dir / "triage.offline.wasm",
                               reference_model=reference_label)
        offline_res["compile"] = outcome.summary()
        say(f"[offline] compiled: {outcome.reason}")
    except GateRefused as e:
        offline_res["compile"] = {"verdict": "refuse", "reason": e.reason, "eval_run_id": e.eval_run_id}
        say(f"[offline] compile refused: {e.reason}")
    finally:
        offline.close()
    return offline_res, outcome


STREAMS = ("shifted", "repetitive")
"""The generated streams: ``shifted`` (fresh tickets, one shift to an unseen category) and
``repetitive`` (about 60 distinct tickets with heavy repetition and three shifts)."""


def generated_stream(data: dict[str, Any], *, items: int, seed: int, kind: str = "shifted"
                     ) -> tuple[list[dict[str, Any]], list[str | None], list[int]]:
    """A generated stream: ``(inputs, design labels, shift positions)``.

    ``shifted``: the shift to the held-back category starts at ``min(150, items // 2)``
    (:func:`bench.triage.corpus.shifted_stream`). ``repetitive``: shifts at each quarter
    (:func:`bench.triage.corpus.repetitive_stream`).

    Raises:
        ArgumentError: an unknown ``kind``.
    """
    from bench.triage import corpus

    if kind == "shifted":
        shift_at = min(150, items // 2)
        stream = corpus.shifted_stream(data, items=items, shift_at=shift_at, seed=seed)
        shifts = [shift_at]
    elif kind == "repetitive":
        shifts = [items // 4, items // 2, (3 * items) // 4]
        stream = corpus.repetitive_stream(items=items, shifts=tuple(shifts), seed=seed)
    else:
        raise ArgumentError(f"unknown stream {kind!r} (choose from {', '.join(STREAMS)})")
    return [{"ticket": t.ticket} for t in stream], [t.category for t in stream], shifts


SCORE_KEYS = ("calibration_scores", "calibration_scores_by_label")
"""A guard entry's calibration scores (pooled, per label): left out of the figures."""


def guard_figures(manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """The guard entry of a manifest without its calibration scores (ε, δ, α, thresholds, n).

    For a ``stack`` guard each component is kept the same way; ``None`` without a manifest.
    """
    if manifest is None:
        return None
    m = Manifest.of(manifest)
    g = {k: v for k, v in m.guard.to_dict().items() if k not in SCORE_KEYS}
    if isinstance(g.get("components"), list):
        g["components"] = [{k: v for k, v in c.items() if k not in SCORE_KEYS} if isinstance(c, dict) else c
                           for c in g["components"]]
    return {"generation": m.generation, "compiled_as": m.compiled_as, **g}


def run_family(family: str, *, out_dir: Path, stream_path: Path | None = None, items: int = 1000, seed: int = 0,
               warm_start: bool = False, audit_rate: float = 0.05, stream_kind: str = "shifted",
               worker: str = "process", progress: Callable[[str], None] | None = None,
               audit_seed: int | None = None) -> dict[str, Any]:
    """Run one AUTO-BENCH family end to end and write its reports into ``out_dir``.

    With ``warm_start`` the stream begins with the offline generation adopted and the offline
    witnesses in its store (a generation compiled before deployment); by default it starts with
    no artifact and no witnesses, as a fresh deployment would. ``audit_rate`` is the shadow
    audit's share of tier-1 answers re-asked at tier 0 in the background; ``stream_kind`` picks
    the generated stream (:data:`STREAMS`); ``worker`` the ratchet's compile worker;
    ``audit_seed`` the audit's selection seed (None: ``seed``; ``results.json`` records it).

    Returns:
        The ``results.json`` object.

    Raises:
        ArgumentError: unknown family or stream, a malformed ``--stream`` file, ``items`` < 1, or
            ``audit_rate`` outside [0, 1].
    """
    if not 0.0 <= audit_rate <= 1.0:
        raise ArgumentError(f"--audit-rate must be in [0, 1], got {audit_rate!r}")
    if family != "triage":
        raise ArgumentError(f"unknown bench family {family!r} (available: triage)")
    if isinstance(items, bool) or not isinstance(items, int) or items < 1:
        raise ArgumentError(f"--items must be a positive number of stream items, got {items!r}")
    if stream_kind not in STREAMS:
        raise ArgumentError(f"unknown stream {stream_kind!r} (choose from {', '.join(STREAMS)})")
    say = progress or (lambda _m: None)
    from auto.gate import Contract
    from bench.triage import corpus

    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("triage.gen*.wasm"):
        old.unlink()
    contract = Contract.default_for("triage")
    user_stream = _read_stream(stream_path, "ticket") if stream_path is not None else None  # fail before any work
    results: dict[str, Any] = {"family": family}
    started = time.perf_counter()
    with reference_endpoint(seed) as ref_label:
        results["reference_model"] = ref_label
        say(f"reference model: {ref_label}")
        data = corpus.default_corpus(seed)

        # ---- phase 1: offline record ×2 → census → compile → verify
        offline_res, outcome = offline_generation(data, out_dir=out_dir, contract=contract, reference_label=ref_label,
                                                  progress=say)
        results["offline"] = offline_res

        # ---- phase 2: the stream, through the product's ratchet
        if user_stream is not None and stream_path is not None:
            stream_items, labels = user_stream
            shifts: list[int] = []
            results["stream_source"] = str(stream_path.name)
        else:
            stream_items, labels, shifts = generated_stream(data, items=items, seed=seed, kind=stream_kind)
            results["stream_source"] = (f"generated {stream_kind} stream (seed {seed}, {len(stream_items)} items, shifts at "
                                        f"{', '.join(map(str, shifts))})")
        store_path = out_dir / "stream.sqlite"
        _fresh_store(store_path).close()
        for old in Path(f"{store_path}.artifacts").glob("*.wasm") if Path(f"{store_path}.artifacts").exists() else []:
            old.unlink()
        initial = outcome if warm_start else None
        if initial is not None:
            with _open_store(out_dir / "offline.sqlite") as off, _open_store(store_path) as st:
                st.ingest(off.spans(), off.traces())
            say(f"[stream] {len(stream_items)} items through the ratchet (warm start: offline generation "
                f"{initial.generation} adopted with its witnesses)")
        else:
            say(f"[stream] {len(stream_items)} items through the ratchet (starts with no artifact and no witnesses)")
        results["warm_start"] = initial is not None
        run = run_stream(task="triage", items=stream_items, labels=labels, reference=_metered_triage,
                         store_path=store_path, contract=contract, initial=initial, reference_model=ref_label,
                         progress=say, audit_rate=audit_rate, audit_seed=seed if audit_seed is None else audit_seed,
                         worker=worker)

    figs = stream_figures(run.rows)
    results.update(figs)
    results.update({
        "steady_state": steady_state(run.rows),
        "generations": run.generations,
        "generation_count": len(run.generations),
        "recompiles": len(run.compiles),  # compile attempts during the stream
        "refused_compiles": sum(1 for c in run.compiles if c["verdict"] != "pass"),
        "compiles": run.compiles,
        "shift_at": shifts[0] if shifts else None,
        "shifts": shifts,
        "guard": guard_figures(run.last_manifest),
        "shift_alarms": [a["position"] for a in run.shift_alarms],
        "shift_alarm_details": run.shift_alarms,
        "rollbacks": run.rollbacks,
        "shift_monitor": run.shift_monitor,
        "shadow_audit": shadow_audit_figures(run, audit_rate),
        "ratchet": {"worker": worker, "audit_rate": audit_rate, "audit_seed": seed if audit_seed is None else audit_seed,
                    "final": run.status},
        "wall_s": round(time.perf_counter() - started, 2),
    })
    if shifts:
        cut = shifts[0]
        pre = stream_figures([r for r in run.rows if r.position < cut])
        post = stream_figures([r for r in run.rows if r.position >= cut])
        keys = ("items", "tier1_share", "silent_wrong", "silent_wrong_ci95_high", "excess_silent_wrong", "parity")
        results["before_shift"] = {k: pre[k] for k in keys}
        results["after_shift"] = {k: post[k] for k in keys}
    # the peers a user would pick instead, replayed on the same items with the control leg's answers
    # and costs (bench.peers): the memo-only ceiling, an exact dict, a similarity cache
    say("[peers] exact dict and similarity cache on the same items")
    results["peers"] = peer_figures(items_from_rows(run.rows, lambda inp: inp["ticket"]))
    # time the specialist path of the offline generation (the stream's generations are compiled in
    # a child process; their Python models are not in this one)
    if outcome is not None:
        from bench.latency import LATENCY_ROWS, RATCHET_STEPS, latency_benchmark, ratchet_latency

        say("[latency] measuring tier-1 in-process latency side by side (warm loop)")
        rows = Progress("[latency] rows measured", len(LATENCY_ROWS), say,
                        stream=sys.stderr if progress is not None else None, every_s=0.0)
        # never-witnessed tickets: they miss any exact-match table, so this times the specialist path
        fresh = [{"ticket": t.ticket} for t in corpus.generate(200, seed=seed + 1000)]
        results["latency_benchmark"] = {
            "artifact": f"generation {outcome.generation} (offline), compiled as {outcome.typed_manifest.compiled_as}",
            "inputs_note": "200 freshly generated, never-witnessed tickets",
            **latency_benchmark(outcome.wasm, fresh, model=outcome.model, sklearn_predict=outcome.sklearn_predict,
                                progress=lambda _row: rows.advance()),
        }
        rows.close()
        say("[latency] the ratchet's request path beside TieredTask, idle and during a background compile")
        lat_store = out_dir / "latency.sqlite"
        with _open_store(out_dir / "offline.sqlite") as off, _fresh_store(lat_store) as ls:
            ls.ingest(off.spans(), off.traces())
        with Progress("[latency] ratchet steps done", len(RATCHET_STEPS), say,
                      stream=sys.stderr if progress is not None else None, every_s=0.0) as steps:
            results["latency_benchmark"]["ratchet"] = ratchet_latency(outcome.wasm, fresh, lat_store, worker=worker,
                                                                      progress=lambda _step: steps.advance())
    else:
        results["latency_benchmark"] = None
    write_ratchet_csv(run.rows, out_dir / "ratchet.csv", simulated=results["reference_model"].startswith("simulated"))
    plot_stream(run.rows, run.compiles, out_dir / "cost.png",
                title=f"AUTO-BENCH {family}: tiered vs control ({results['reference_model']})", shifts=shifts)
    results["reference_latency_simulated"] = results["reference_model"].startswith("simulated")
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return results
