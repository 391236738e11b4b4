"""Tier-1 latency, measured side by side in one process (a benchmark, not a timed test).

Rows (µs; p50 and p95 over ``n`` calls after a warm-up, cycling through the given inputs):

* ``tier1_single`` — ``TieredTask.__call__``: input schema check, canonical JSON in, the
  artifact's ``run``, JSON out, the guard's p-value (what a host pays per call);
* ``tier1_batch_per_item`` — ``TieredTask.batch`` over chunks of ``batch`` inputs, per item;
* ``artifact_call`` — ``Artifact.call`` alone (no schema check, no guard);
* ``python_reference`` — the compiler's Python reference of the same model (``CompiledModel.predict``);
* ``sklearn_predict`` — the scikit-learn estimator's own ``predict`` on one featurized input;
* ``bare_wasmtime_call`` — wasmtime-py's public ``Func.__call__`` of the artifact's ``alloc(0)``
  export: the cost of one call through the convenient binding, with no work inside.

The machine may be shared and noisy: compare rows of one run, not runs.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence


def _timeit(fn: Callable[[Any], Any], inputs: Sequence[Any], n: int, warmup: int = 200) -> dict[str, float]:
    k = len(inputs)
    for i in range(warmup):
        fn(inputs[i % k])
    samples = []
    clock = time.perf_counter_ns
    for i in range(n):
        x = inputs[i % k]
        t0 = clock()
        fn(x)
        samples.append((clock() - t0) / 1000.0)
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50": round(q[49], 2), "p95": round(q[94], 2), "n": n}


def latency_benchmark(wasm: bytes, inputs: Sequence[dict[str, Any]], *, model: Any = None,
                      sklearn_predict: Callable[[dict[str, Any]], Any] | None = None, n: int = 3000,
                      batch: int = 256) -> dict[str, Any]:
    """Measure every row of the module docstring on ``inputs``; returns ``{row: {p50, p95, n}}``.

    Raises:
        ValueError: ``inputs`` is empty.
    """
    import wasmtime
    from auto_runtime import Artifact, TieredTask

    if not inputs:
        raise ValueError("latency_benchmark needs at least one input")
    art = Artifact.load(wasm)
    tt = TieredTask(art, reference=None)
    out: dict[str, Any] = {"inputs": len(inputs), "call_path": getattr(art, "call_path", None)}
    out["tier1_single"] = _timeit(tt, inputs, n)
    chunks = [list(inputs[i:i + batch]) for i in range(0, len(inputs), batch)] or [list(inputs)]
    per_item: list[float] = []
    for _ in range(3):
        tt.batch(chunks[0])
    for _ in range(max(3, n // max(1, len(inputs)))):
        for ch in chunks:
            t0 = time.perf_counter_ns()
            tt.batch(ch)
            per_item.append((time.perf_counter_ns() - t0) / 1000.0 / len(ch))
    q = statistics.quantiles(per_item, n=100, method="inclusive") if len(per_item) > 1 else [per_item[0]] * 99
    out["tier1_batch_per_item"] = {"p50": round(q[49], 3), "p95": round(q[94], 3), "n": len(per_item), "batch": len(chunks[0])}
    out["artifact_call"] = _timeit(art.call, inputs, n)
    if model is not None:
        out["python_reference"] = _timeit(model.predict, inputs, min(n, 1000))
    if sklearn_predict is not None:
        out["sklearn_predict"] = _timeit(sklearn_predict, inputs, min(n, 1000))
    store = wasmtime.Store(wasmtime.Engine())
    inst = wasmtime.Instance(store, wasmtime.Module(store.engine, wasm), [])
    alloc = inst.exports(store)["alloc"]
    out["bare_wasmtime_call"] = _timeit(lambda _x: alloc(store, 0), inputs, n)
    return out
