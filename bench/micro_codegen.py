"""Micro-benchmark of a compiled specialist: µs per ``run`` call and per ``run_batch`` item.

Usage: ``python -m bench.micro_codegen [--buckets 4096] [--per-class 4]``. Trains a 5-class
triage specialist on the seeded triage corpus, compiles it, and times ~200-byte tickets through
wasmtime-py's public API (so the per-call figure includes Python's call overhead; the per-item
batch figure is close to the time spent inside the artifact). Not a test: numbers only.
"""

from __future__ import annotations

import argparse
import json
import time

import wasmtime

from auto.codegen import compile_model
from auto.models.specialist.train import distill
from auto.emit import emit
from auto.models.specialist.features import FeatureSpec


def _corpus(n: int, seed: int) -> list[tuple[str, str]]:
    from bench.triage import corpus
    return [(t.ticket, t.category) for t in corpus.generate(n, seed=seed)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--buckets", type=int, default=4096)
    ap.add_argument("--per-class", type=int, default=4, help="prototypes per class")
    ap.add_argument("--n-min", type=int, default=3)
    ap.add_argument("--n-max", type=int, default=5)
    ap.add_argument("--model", default="logreg")
    args = ap.parse_args(argv)

    train = _corpus(400, seed=1)
    spec = FeatureSpec("ticket", args.n_min, args.n_max, args.buckets)
    r = distill([({"ticket": t}, c, 1.0) for t, c in train], [spec], models=(args.model,),
                prototypes_per_class=args.per_class)
    m = r.model
    code = compile_model(m)
    art = emit(code, {"model": m.manifest_model()})
    print(f"model: {m.kind} {m.estimator}, C={len(m.classes)}, B={m.features.buckets}, "
          f"n={m.features.n_min}..{m.features.n_max}, K={m.n_prototypes}; heldout agreement "
          f"{r.selected.heldout_agreement:.3f}")
    print(f"artifact: {len(art)} bytes ({len(code)} code+data)")

    eng = wasmtime.Engine()
    store = wasmtime.Store(eng)
    ex = wasmtime.Instance(store, wasmtime.Module(eng, art), []).exports(store)
    mem, alloc, run, run_batch = ex["memory"], ex["alloc"], ex["run"], ex["run_batch"]
    items = [json.dumps({"ticket": t}).encode() for t, _ in _corpus(400, seed=7)]
    items = [d for d in items if 180 <= len(d) <= 230][:32]
    print(f"inputs: {len(items)} tickets, mean {sum(map(len, items)) / len(items):.0f} bytes")

    best_run = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(100):
            for d in items:
                p = alloc(store, len(d))
                mem.write(store, d, p)
                run(store, p, len(d))
        best_run = min(best_run, (time.perf_counter() - t0) / (100 * len(items)) * 1e6)
    d = items[0]
    p = alloc(store, len(d))
    mem.write(store, d, p)
    best_bare = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(3000):
            run(store, p, len(d))
        best_bare = min(best_bare, (time.perf_counter() - t0) / 3000 * 1e6)
    batch = b"[" + b",".join(items * 60) + b"]"
    p = alloc(store, len(batch))
    mem.write(store, batch, p)
    run_batch(store, p, len(batch))
    best_batch = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        run_batch(store, p, len(batch))
        best_batch = min(best_batch, (time.perf_counter() - t0) / (60 * len(items)) * 1e6)
    print(f"run (alloc + write + run via wasmtime-py): {best_run:.1f} µs/call")
    print(f"run alone (input already in memory):        {best_bare:.1f} µs/call")
    print(f"run_batch ({60 * len(items)} items):                  {best_batch:.2f} µs/item")


if __name__ == "__main__":
    main()
