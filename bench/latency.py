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

Every row counts the calls the artifact failed (``timeouts``, ``failures`` by kind): a wall-clock
timeout on a loaded host is a deopt in the runtime, and a benchmark reports it rather than dying.

The machine may be shared and noisy: compare rows of one run, not runs.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence


def _failure_kind(result: Any) -> str | None:
    """``"timeout"`` / ``"limit"`` / ``"trap"`` / ``"error"`` for a call that did not answer at
    tier 1 because the artifact failed (a :class:`CallResult` deopted with a ``limit:`` or
    ``trap:`` reason, or the exception a bare call raised); None otherwise."""
    reason = getattr(result, "reason", None)
    if isinstance(result, BaseException):
        from auto_runtime.tiered import failure_reason

        reason = failure_reason(result)
    if not isinstance(reason, str):
        return None
    if reason == "limit: timeout":
        return "timeout"
    if reason.startswith("limit:"):
        return "limit"
    if reason.startswith("trap:"):
        return "trap"
    if reason.startswith(("output-error:", "error:")):
        return "error"
    return None


def _timeit(fn: Callable[[Any], Any], inputs: Sequence[Any], n: int, warmup: int = 200) -> dict[str, Any]:
    """p50/p95 (µs) of ``fn`` over ``n`` calls cycling through ``inputs``, after ``warmup`` calls.

    A call the artifact failed (a wall-clock timeout on a loaded host, another limit, a trap) is
    a deopt in the runtime: here it is counted (``failures``, by kind; ``timeouts``) and its time
    kept in the sample, never raised."""
    from auto_runtime.errors import AutoError

    k = len(inputs)
    failures: dict[str, int] = {}
    samples = []
    clock = time.perf_counter_ns
    for i in range(warmup + n):
        x = inputs[i % k]
        t0 = clock()
        try:
            r = fn(x)
        except AutoError as e:
            r = e
        t1 = clock()
        if i >= warmup:
            samples.append((t1 - t0) / 1000.0)
            kind = _failure_kind(r)
            if kind is not None:
                failures[kind] = failures.get(kind, 0) + 1
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50": round(q[49], 2), "p95": round(q[94], 2), "n": n,
            "timeouts": failures.get("timeout", 0), "failures": dict(sorted(failures.items()))}


LATENCY_ROWS = ("tier1_single", "tier1_batch_per_item", "artifact_call", "python_reference", "sklearn_predict",
                "bare_wasmtime_call")
"""The rows :func:`latency_benchmark` measures, in order (a row without its model is skipped)."""

RATCHET_STEPS = ("side_by_side", "during_compile", "idle")
"""The steps :func:`ratchet_latency` measures, in order."""


def latency_benchmark(wasm: bytes, inputs: Sequence[dict[str, Any]], *, model: Any = None,
                      sklearn_predict: Callable[[dict[str, Any]], Any] | None = None, n: int = 3000,
                      batch: int = 256, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure every row of the module docstring on ``inputs``; returns ``{row: {p50, p95, n}}``.

    ``progress(row)`` is called after each row of :data:`LATENCY_ROWS` is measured (or skipped),
    between the timed loops, never inside one.

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
    done = progress or (lambda _row: None)
    out["tier1_single"] = _timeit(tt, inputs, n)
    done("tier1_single")
    chunks = [list(inputs[i:i + batch]) for i in range(0, len(inputs), batch)] or [list(inputs)]
    per_item: list[float] = []
    for _ in range(3):
        tt.batch(chunks[0])
    batch_failures: dict[str, int] = {}
    for _ in range(max(3, n // max(1, len(inputs)))):
        for ch in chunks:
            t0 = time.perf_counter_ns()
            rs = tt.batch(ch)
            per_item.append((time.perf_counter_ns() - t0) / 1000.0 / len(ch))
            for r in rs:
                kind = _failure_kind(r)
                if kind is not None:
                    batch_failures[kind] = batch_failures.get(kind, 0) + 1
    q = statistics.quantiles(per_item, n=100, method="inclusive") if len(per_item) > 1 else [per_item[0]] * 99
    out["tier1_batch_per_item"] = {"p50": round(q[49], 3), "p95": round(q[94], 3), "n": len(per_item), "batch": len(chunks[0]),
                                   "timeouts": batch_failures.get("timeout", 0), "failures": dict(sorted(batch_failures.items()))}
    done("tier1_batch_per_item")
    out["artifact_call"] = _timeit(art.call, inputs, n)
    done("artifact_call")
    if model is not None:
        out["python_reference"] = _timeit(model.predict, inputs, min(n, 1000))
    done("python_reference")
    if sklearn_predict is not None:
        out["sklearn_predict"] = _timeit(sklearn_predict, inputs, min(n, 1000))
    done("sklearn_predict")
    store = wasmtime.Store(wasmtime.Engine())
    inst = wasmtime.Instance(store, wasmtime.Module(store.engine, wasm), [])
    alloc = inst.exports(store)["alloc"]
    out["bare_wasmtime_call"] = _timeit(lambda _x: alloc(store, 0), inputs, n)
    done("bare_wasmtime_call")
    return out


def ratchet_latency(wasm: bytes, inputs: Sequence[dict[str, Any]], store_path: Any, *, n: int = 3000,
                    worker: str = "process", progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """What the ratchet adds to a tier-1 call, and what a background compile does to its tail.

    Side by side in one process, on the same artifact and inputs (all tier-1: the artifact's
    guard admits them): ``TieredTask.__call__`` alone, and ``Ratchet.call_result`` with the
    artifact adopted (the ratchet's counters, score batching for the shift monitor; no audit, so
    the comparison is of the request path only), interleaved call by call. Then the ratchet's
    tier-1 p50/p99 while a compile of the task runs in the background (``worker``) and then idle,
    over the same request stream (a 1 ms pause every 50 calls) and as many calls, so that both
    tails are taken over windows of the same length.

    Args:
        wasm: an artifact of the task ``triage`` whose guard admits ``inputs``.
        inputs: task inputs.
        store_path: a store holding the task's witnesses (the background compile reads them).
        progress: ``progress(step)`` after each step of :data:`RATCHET_STEPS`, between the timed loops.

    Returns:
        ``{"tiered": {p50, p99}, "ratchet": {p50, p99}, "overhead_us_p50", "idle": {p50, p99, n},
        "during_compile": {p50, p99, n, "compile_s"}, "p99_ratio"}`` (µs).
    """
    from auto_runtime import Artifact, TieredTask

    from auto.ratchet import Ratchet

    art = Artifact.load(wasm)
    tt = TieredTask(art, reference=lambda _i: None)
    r = Ratchet(lambda _i: None, store_path, art.task, audit_rate=0.0, worker=worker, load=False)
    try:
        r.adopt(wasm)
        admitted = [x for x in inputs if tt(x).tier == "tier-1"] or list(inputs)
        k = len(admitted)
        a_s: list[float] = []
        b_s: list[float] = []
        clock = time.perf_counter_ns
        for i in range(200):
            tt(admitted[i % k])
            r.call_result(admitted[i % k])
        for i in range(n):
            x = admitted[i % k]
            t0 = clock()
            tt(x)
            t1 = clock()
            r.call_result(x)
            t2 = clock()
            a_s.append((t1 - t0) / 1000.0)
            b_s.append((t2 - t1) / 1000.0)
        done = progress or (lambda _step: None)
        done("side_by_side")

        def q(v: list[float]) -> dict[str, float]:
            qs = statistics.quantiles(v, n=100, method="inclusive")
            return {"p50": round(qs[49], 2), "p99": round(qs[98], 2), "n": len(v)}

        def stream(calls: int | None, while_: Callable[[], bool] = lambda: True) -> list[float]:
            # a request stream, not a spin: every 50 calls a 1 ms pause (leaves a compile its share of the GIL)
            lat: list[float] = []
            i = 0
            while (calls is None or i < calls) and while_():
                t0 = clock()
                r.call_result(admitted[i % k])
                lat.append((clock() - t0) / 1000.0)
                i += 1
                if i % 50 == 0:
                    time.sleep(0.001)
            return lat

        started = time.perf_counter()
        r.compile_now("latency benchmark")
        busy = stream(None, lambda: r._compiling is not None and r._compiling.is_alive())
        compile_s = time.perf_counter() - started
        done("during_compile")
        r.wait_idle(60)
        idle = stream(max(len(busy), n))  # the same stream, as many calls, with nothing compiling
        done("idle")
        out = {"tiered": q(a_s), "ratchet": q(b_s),
               "overhead_us_p50": round(statistics.median(b) - statistics.median(a), 2) if (a := a_s) and (b := b_s) else None,
               "idle": q(idle), "during_compile": {**(q(busy) if len(busy) > 1 else {"p50": None, "p99": None, "n": len(busy)}),
                                                   "compile_s": round(compile_s, 2), "worker": worker}}
        dc = out["during_compile"].get("p99")
        out["p99_ratio"] = round(dc / out["idle"]["p99"], 3) if dc and out["idle"]["p99"] else None
        return out
    finally:
        r.close()
