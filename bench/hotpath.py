"""Hot paths, side by side in one process (a benchmark, not a timed test): tier-1 table hits and
specialist answers beside a Python dict and GPTCache's exact cache, and an incremental table
refresh beside the full memo compile.

Sections (``--only`` picks some):

* ``table`` — an exact-match table of ``--entries`` triage tickets (table-only memo, its manifest
  declaring ``model.table``), every system filled with the same entries and asked the same
  witnessed inputs, interleaved in blocks of 100 calls so load drifts affect all alike (µs per
  call, p50/p99 over every call): ``tier1_fast`` (``TieredTask.__call__`` with the runtime's
  table fast path: schema check, table, guard, audit selection), ``tier1_wasm`` (the same through
  the WebAssembly code, ``table_fast_path=False``), ``artifact_fast`` / ``artifact_wasm``
  (``Artifact.call``), ``dict`` (a ``dict`` keyed by the ticket text), ``dict_canonical`` (keyed by
  the input's canonical JSON, as a cache of the input object must be) and ``gptcache_exact``
  (GPTCache's ``get`` over its ``map`` data manager, the prompt being the ticket text); then
  batches of ``--batch`` (per item, p50 over batches): ``tier1_batch_fast`` / ``tier1_batch_wasm``
  (``TieredTask.batch``) and ``artifact_batch_fast`` / ``artifact_batch_wasm`` (``Artifact.call_batch``),
  beside the same inputs answered one call at a time in a loop (``*_single_loop*``, ``dict_loop``):
  a batch's time includes whatever preempted it, so only the loops compare with it fairly.
* ``specialist`` — the specialist compiled from a triage store by the specialist rung (memo-first:
  its table in front), asked never-witnessed tickets (the specialist answers): ``tier1_single``,
  ``artifact_single``, ``tier1_batch`` and ``artifact_batch`` (per item), beside single calls in a
  loop over the same batches (``tier1_single_loop``, ``artifact_single_loop``); then
  ``profile_us``, the steps of one call timed on their own (:func:`specialist_profile`).
* ``refresh`` — a store of ``--refresh-entries`` distinct tickets witnessed twice, compiled once on
  the memo rung (``full_compile_s``); then :func:`auto.compile.rungs.memo_refresh.refresh_table`
  with ``--refresh-add`` new entries, from the installed artifact's bytes and from the loaded
  :class:`auto_runtime.Artifact` a ratchet serving it holds (its table verified at load, not read
  again) (seconds, and their stages), and a full compile of the same store with the added
  entries witnessed (``full_recompile_s``): the ratios are the figures.
* ``load`` — loading a table-only memo of ``--load-entries`` entries with the table fast path
  (the table read out of the bytes and verified) and with the code alone, in turn
  ``--load-rounds`` times (seconds).

Every row counts the calls that failed in the artifact (``timeouts``, ``failures``): a timeout on
a loaded host is a deopt, reported, never fatal.

    python -m bench.hotpath --entries 843 --calls 3000
    python -m bench.hotpath --only refresh --refresh-entries 10000 --refresh-add 100
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

from bench.latency import _failure_kind

LABELS = ("billing", "bug", "feature", "account", "security", "shipping")


def _q(xs: list[float]) -> dict[str, Any]:
    qs = statistics.quantiles(xs, n=100, method="inclusive") if len(xs) > 1 else [xs[0]] * 99
    return {"p50": round(qs[49], 3), "p99": round(qs[98], 3), "n": len(xs)}


def interleaved(systems: dict[str, Callable[[Any], Any]], inputs: list[Any], calls: int,
                block: int = 100) -> dict[str, dict[str, Any]]:
    """Per-call µs of every system, in blocks of ``block`` calls taken in turn (same inputs)."""
    clock = time.perf_counter_ns
    samples: dict[str, list[float]] = {k: [] for k in systems}
    fails: dict[str, dict[str, int]] = {k: {} for k in systems}
    k = len(inputs)
    for name, fn in systems.items():  # warm-up
        for i in range(min(200, calls)):
            fn(inputs[i % k])
    for start in range(0, calls, block):
        for name, fn in systems.items():
            s, f = samples[name], fails[name]
            for i in range(start, min(calls, start + block)):
                x = inputs[i % k]
                t0 = clock()
                try:
                    r = fn(x)
                except Exception as e:  # noqa: BLE001 - counted, never fatal
                    r = e
                s.append((clock() - t0) / 1000.0)
                kind = _failure_kind(r)
                if kind is not None:
                    f[kind] = f.get(kind, 0) + 1
    return {n: {**_q(samples[n]), "timeouts": fails[n].get("timeout", 0), "failures": fails[n]} for n in systems}


def interleaved_batches(systems: dict[str, Callable[[list[Any]], Any]], inputs: list[Any], batch: int,
                        rounds: int) -> dict[str, dict[str, Any]]:
    """Per-item µs of every batched system (p50/p99 over batches), batches taken in turn: wall
    time, and ``cpu_p50`` / ``cpu_p99``, the CPU time of the calling thread (a batch runs long
    enough to be preempted on a loaded host; its CPU time leaves out the time other processes
    ran, which its wall time includes)."""
    clock, cpu = time.perf_counter_ns, time.thread_time_ns
    chunks = [inputs[i:i + batch] for i in range(0, len(inputs), batch)]
    chunks = [c for c in chunks if len(c) == batch] or [inputs[:batch]]
    samples: dict[str, list[float]] = {k: [] for k in systems}
    cpus: dict[str, list[float]] = {k: [] for k in systems}
    fails: dict[str, dict[str, int]] = {k: {} for k in systems}
    for fn in systems.values():
        fn(chunks[0])
    for r in range(rounds):
        ch = chunks[r % len(chunks)]
        for name, fn in systems.items():
            c0 = cpu()
            t0 = clock()
            out = fn(ch)
            t1 = clock()
            cpus[name].append((cpu() - c0) / 1000.0 / len(ch))
            samples[name].append((t1 - t0) / 1000.0 / len(ch))
            for o in out:
                kind = _failure_kind(o)
                if kind is not None:
                    fails[name][kind] = fails[name].get(kind, 0) + 1
    res: dict[str, dict[str, Any]] = {}
    for n in systems:
        c = _q(cpus[n])
        res[n] = {**_q(samples[n]), "cpu_p50": c["p50"], "cpu_p99": c["p99"], "batch": len(chunks[0]),
                  "timeouts": fails[n].get("timeout", 0), "failures": fails[n]}
    return res


def _tickets(n: int, seed: int) -> list[str]:
    from bench.triage.corpus import generate

    out: list[str] = []
    seen: set[str] = set()
    s = seed
    while len(out) < n:
        for t in generate(max(64, n), seed=s):
            if t.ticket not in seen:
                seen.add(t.ticket)
                out.append(t.ticket)
                if len(out) == n:
                    break
        s += 1
    return out


def _gptcache(entries: list[tuple[str, str]]) -> Callable[[str], Any] | str:
    """GPTCache's exact cache filled with ``entries``, as ``get(prompt)``; or why it is missing."""
    try:
        from gptcache import Cache
        from gptcache.adapter.api import get, put
        from gptcache.manager.factory import manager_factory
        from gptcache.processor.pre import get_prompt
    except Exception as e:  # noqa: BLE001 - an optional comparison
        return f"gptcache is not installed ({type(e).__name__}: {e})"
    cache = Cache()
    cache.init(pre_embedding_func=get_prompt, data_manager=manager_factory("map", data_dir=tempfile.mkdtemp()))
    for q, a in entries:
        put(q, a, cache_obj=cache)
    return lambda q: get(q, cache_obj=cache)


def table_section(entries: int, calls: int, batch: int, seed: int) -> dict[str, Any]:
    from auto_runtime import Artifact, TieredTask
    from auto_runtime.jsonio import canonical_text

    from auto.codegen import TableModel, compile_table
    from auto.compile.witnesses import input_schema
    from auto.emit import emit

    texts = _tickets(entries, seed)
    pairs = [({"ticket": t}, LABELS[i % len(LABELS)]) for i, t in enumerate(texts)]
    model = TableModel(pairs)
    code, decl = compile_table(model)
    man = {"format": "auto.artifact/1", "task": "triage", "generation": 1, "compiled_as": "memo",
           "interface": {"input": input_schema([p[0] for p in pairs]), "output": {"enum": list(LABELS)}},
           "capabilities": [], "model": {**model.manifest_model(), "table": decl},
           "guard": {"method": "exact-match"}}
    wasm = emit(code, man)
    t0 = time.perf_counter()
    fast = Artifact.load(wasm)
    load_fast_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    code_art = Artifact.load(wasm, table_fast_path=False)
    load_wasm_s = time.perf_counter() - t0
    tf, tw = TieredTask(fast, reference=None), TieredTask(code_art, reference=None)
    inputs = [p[0] for p in pairs]
    assert all(tf(x).tier == "tier-1" for x in inputs[:50])
    by_text = {p[0]["ticket"]: p[1] for p in pairs}
    by_canon = {canonical_text(p[0]): p[1] for p in pairs}
    systems: dict[str, Callable[[Any], Any]] = {
        "tier1_fast": tf, "tier1_wasm": tw, "artifact_fast": fast.call, "artifact_wasm": code_art.call,
        "dict": lambda x: by_text.get(x["ticket"]), "dict_canonical": lambda x: by_canon.get(canonical_text(x)),
    }
    gc = _gptcache([(p[0]["ticket"], p[1]) for p in pairs])
    if callable(gc):
        assert gc(inputs[0]["ticket"]) == pairs[0][1]
        systems["gptcache_exact"] = lambda x: gc(x["ticket"])
    single = interleaved(systems, inputs, calls)
    batches = interleaved_batches({"tier1_batch_fast": tf.batch, "tier1_batch_wasm": tw.batch,
                                   "tier1_single_loop_fast": lambda ch: [tf(x) for x in ch],
                                   "artifact_batch_fast": fast.call_batch, "artifact_batch_wasm": code_art.call_batch,
                                   "artifact_single_loop_fast": lambda ch: [fast.call(x) for x in ch],
                                   "dict_loop": lambda ch: [by_text.get(x["ticket"]) for x in ch]},
                                  inputs, batch, max(50, calls // batch))
    out: dict[str, Any] = {"entries": entries, "load_s": {"fast": round(load_fast_s, 3), "wasm": round(load_wasm_s, 3)},
                           "single_us": single, "batch_us_per_item": batches}
    if not callable(gc):
        out["gptcache_exact"] = gc
    p = {k: v["p50"] for k, v in single.items()}
    out["ratios_p50"] = {"tier1_wasm/tier1_fast": round(p["tier1_wasm"] / p["tier1_fast"], 2),
                         "tier1_fast/dict": round(p["tier1_fast"] / p["dict"], 1),
                         **({"gptcache_exact/tier1_fast": round(p["gptcache_exact"] / p["tier1_fast"], 2)}
                            if "gptcache_exact" in p else {})}
    return out


def _triage_store(path: str, tickets: list[str], reps: int = 1) -> None:
    from bench.triage.oracle import triage_oracle

    from auto.store import Store, new_span_id, new_trace_id

    with Store(path) as st:
        batch = []
        for rep in range(reps):
            for i, t in enumerate(tickets):
                ns = 1_600_000_000_000_000_000 + (rep * len(tickets) + i) * 1000
                batch.append({"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None,
                              "name": "triage", "kind": "task", "task": "triage", "site": None, "started_ns": ns,
                              "ended_ns": ns + 10, "status": "ok", "input": {"ticket": t},
                              "output": triage_oracle(t)[0], "error": None, "attributes": {}})
        st.ingest(batch)


def specialist_section(calls: int, batch: int, seed: int) -> dict[str, Any]:
    from auto_runtime import Artifact, TieredTask

    from auto.compile import compile_task
    from auto.store import Store

    d = tempfile.mkdtemp()
    path = os.path.join(d, "triage.sqlite")
    _triage_store(path, _tickets(600, seed))
    with Store(path) as st:
        o = compile_task(st, "triage", rungs=["specialist"], out_path=os.path.join(d, "spec.wasm"))
    art = Artifact.load(o.wasm)
    tt = TieredTask(art, reference=None)
    fresh = [{"ticket": t} for t in _tickets(400, seed + 1000)]
    fresh = [x for x in fresh if art.table is None or art.call(x)["nonconformity"] != 0.0]
    single = interleaved({"tier1_single": tt, "artifact_single": art.call}, fresh, calls)
    batches = interleaved_batches({"tier1_batch": tt.batch, "artifact_batch": art.call_batch,
                                   "tier1_single_loop": lambda ch: [tt(x) for x in ch],
                                   "artifact_single_loop": lambda ch: [art.call(x) for x in ch]}, fresh, batch,
                                  max(50, calls // batch))
    tier1 = sum(r.tier == "tier-1" for r in tt.batch(fresh))
    return {"compiled_as": o.typed_manifest.compiled_as, "inputs": len(fresh), "tier1_share": round(tier1 / len(fresh), 3),
            "single_us": single, "batch_us_per_item": batches, "profile_us": specialist_profile(art, fresh)}


def specialist_profile(art: Any, inputs: list[Any], rounds: int = 15) -> dict[str, float]:
    """Where one specialist call's time goes: µs per input of each step on its own (the best of
    ``rounds`` loops over ``inputs``, CPU time of this thread, so a descheduled loop does not
    count): ``encode`` (canonical JSON bytes), ``validate`` (the input schema), ``invoke`` (the
    sandbox call: fuel and deadline set, ``alloc``, the copy in, ``run``, the copy out),
    ``boundary`` (the same call on the input ``1``, which the code refuses at once: the call
    boundary with almost no WebAssembly work), ``decode`` (strict JSON of the output and its
    check) and ``guard`` (the guard's decision on the output); ``wasm_eval`` = ``invoke`` -
    ``boundary`` (featurizer, model and writing the answer, inside WebAssembly)."""
    from auto_runtime.abi_output import read_one
    from auto_runtime.jsonio import canonical_text

    clock = time.thread_time_ns
    datas = [canonical_text(x).encode("utf-8") for x in inputs]
    raws = [art._sandbox.invoke(d) for d in datas]
    outs = [read_one(r) for r in raws]

    def best(fn: Callable[[Any], Any], xs: list[Any]) -> float:
        b = math.inf
        for _ in range(rounds):
            t0 = clock()
            for x in xs:
                fn(x)
            b = min(b, (clock() - t0) / 1000.0 / len(xs))
        return round(b, 3)

    prof = {"encode": best(lambda x: canonical_text(x).encode("utf-8"), inputs),
            "validate": best(art.validate_input, inputs),
            "invoke": best(lambda d: art._sandbox.invoke(d), datas),
            "boundary": best(lambda d: art._sandbox.invoke(b"1"), datas),
            "decode": best(read_one, raws),
            "guard": best(art.guard.decide_output, outs)}
    prof["wasm_eval"] = round(prof["invoke"] - prof["boundary"], 3)
    return prof


def refresh_section(entries: int, add: int, seed: int) -> dict[str, Any]:
    from auto.compile import compile_task
    from auto.compile.rungs.memo_refresh import refresh_table
    from auto.store import Store, new_span_id, new_trace_id

    d = tempfile.mkdtemp()
    path = os.path.join(d, "memo.sqlite")

    def spans(lo: int, hi: int) -> list[dict[str, Any]]:
        out = []
        for rep in range(2):
            for i in range(lo, hi):
                ns = 1_600_000_000_000_000_000 + (rep * 10**7 + i) * 1000
                out.append({"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None,
                            "name": "memo", "kind": "task", "task": "memo", "site": None, "started_ns": ns,
                            "ended_ns": ns + 10, "status": "ok",
                            "input": {"ticket": f"Ticket {i:07d}: my order arrived damaged and I want a refund please"},
                            "output": LABELS[(i * 7) % len(LABELS)], "error": None, "attributes": {}})
        return out

    with Store(path) as st:
        st.ingest(spans(0, entries))
    with Store(path) as st:
        t0 = time.perf_counter()
        first = compile_task(st, "memo", rungs=["memo"], out_path=os.path.join(d, "g1.wasm"))
        full_s = time.perf_counter() - t0
    new = spans(entries, entries + add)
    added = [(s["input"], s["output"]) for s in new[:add]]
    from auto_runtime import Artifact

    serving = Artifact.load(first.wasm)  # what a ratchet serving generation 1 holds
    with Store(path) as st:
        st.ingest(new)
        t0 = time.perf_counter()
        r = refresh_table(st, "memo", first.wasm, added, out_path=os.path.join(d, "g2.wasm"),
                          generation=first.generation + 1)
        refresh_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        r2 = refresh_table(st, "memo", serving, added, out_path=os.path.join(d, "g2b.wasm"),
                           generation=first.generation + 1)
        refresh_loaded_s = time.perf_counter() - t0
    assert r2.wasm == r.wasm
    with Store(path) as st:
        t0 = time.perf_counter()
        full2 = compile_task(st, "memo", rungs=["memo"], out_path=os.path.join(d, "g3.wasm"))
        full2_s = time.perf_counter() - t0
    same = r.typed_manifest.model["table"]["digest"] == full2.typed_manifest.model["table"]["digest"]
    return {"entries": entries, "added": add, "full_compile_s": round(full_s, 3),
            "refresh_from_bytes_s": round(refresh_s, 3), "refresh_from_bytes_stages_s": r.timings_s,
            "refresh_from_loaded_artifact_s": round(refresh_loaded_s, 3), "refresh_from_loaded_stages_s": r2.timings_s,
            "full_recompile_s": round(full2_s, 3),
            "full_recompile/refresh_from_bytes": round(full2_s / refresh_s, 1),
            "full_recompile/refresh_from_loaded": round(full2_s / refresh_loaded_s, 1),
            "same_table_as_full_recompile": same}


def load_section(entries: int, rounds: int) -> dict[str, Any]:
    """Seconds to load a table-only memo of ``entries`` entries with the table fast path (the
    table read and verified) and without it (the code alone), taken in turn ``rounds`` times."""
    from auto_runtime import Artifact

    from auto.codegen import TableModel, compile_table
    from auto.compile.witnesses import input_schema
    from auto.emit import emit

    pairs = [({"ticket": f"Ticket {i:07d}: my order arrived damaged and I want a refund please"}, LABELS[(i * 7) % 6])
             for i in range(entries)]
    model = TableModel(pairs)
    code, decl = compile_table(model)
    man = {"format": "auto.artifact/1", "task": "memo", "generation": 1, "compiled_as": "memo",
           "interface": {"input": input_schema([p[0] for p in pairs[:100]]), "output": {"enum": list(LABELS)}},
           "capabilities": [], "model": {**model.manifest_model(), "table": decl}, "guard": {"method": "exact-match"}}
    wasm = emit(code, man)
    times: dict[str, list[float]] = {"fast": [], "code": []}
    for _ in range(rounds):
        for name, fast in (("fast", True), ("code", False)):
            t0 = time.perf_counter()
            art = Artifact.load(wasm, table_fast_path=fast)
            times[name].append(round(time.perf_counter() - t0, 3))
            assert (art.table is not None) == fast
    return {"entries": entries, "bytes": len(wasm), "load_s": times,
            "fast/code_median": round(statistics.median(times["fast"]) / statistics.median(times["code"]), 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="table,specialist,refresh,load")
    ap.add_argument("--entries", type=int, default=843)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--refresh-entries", type=int, default=10_000)
    ap.add_argument("--refresh-add", type=int, default=100)
    ap.add_argument("--load-entries", type=int, default=102_400)
    ap.add_argument("--load-rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    only = set(a.only.split(","))
    out: dict[str, Any] = {"load_before": round(os.getloadavg()[0], 2)}
    if "table" in only:
        out["table"] = table_section(a.entries, a.calls, a.batch, a.seed)
        print(json.dumps({"table": out["table"]}), file=sys.stderr, flush=True)
    if "specialist" in only:
        out["specialist"] = specialist_section(a.calls, a.batch, a.seed)
        print(json.dumps({"specialist": out["specialist"]}), file=sys.stderr, flush=True)
    if "refresh" in only:
        out["refresh"] = refresh_section(a.refresh_entries, a.refresh_add, a.seed)
    if "load" in only:
        out["load"] = load_section(a.load_entries, a.load_rounds)
    out["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
