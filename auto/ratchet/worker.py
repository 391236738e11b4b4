"""Compiles off the request path: one compile at a time, in a child process with a time limit.

A compile runs :func:`auto.compile.compile_task` on the ratchet's store in a child process
(``python -m auto.ratchet.worker``: a fresh interpreter that inherits no state from the serving
process and never re-imports its main module), at lower CPU priority. The child writes its eval
runs and the artifact into the store and
sends back one summary; the serving process never waits for it on a request. A child process
rather than a thread keeps the compile's CPU work out of the serving interpreter (no GIL
contention on the request path) and lets a hung compile be killed.

Outcomes (:class:`CompileResult.verdict`): ``pass`` (a generation was stored), ``refuse`` (every
rung refused: the gate said no), ``error`` (the compile raised), ``timeout`` (it ran past the limit
and was killed), ``crashed`` (the child died without answering, e.g. killed). Only ``pass``
changes what is served; every outcome is recorded by the ratchet.

``mode="thread"`` runs the same compile on a thread of the serving process instead (no time
limit can be enforced: a hung compile is reported as ``timeout`` and left to finish); it is for
hosts that cannot spawn processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_S = 600.0
"""A compile still running after this many seconds is killed (the triage specialist compiles
in seconds at 1,000 witnesses on a 2-core machine)."""


@dataclass
class CompileRequest:
    """One compile, as the child process receives it (plain data: it crosses a process boundary).

    Attributes:
        store_path: the store file.
        task: the task name.
        contract: the contract's fields (``Contract.model_dump()``).
        generation: the generation number to compile.
        out_path: where the child writes the ``.wasm``.
        reference_model: provenance label (None: read from the store).
        programs, memo: the ladder's switches.
        rungs: the rung names to try (None: the ladder of ``programs`` / ``memo``).
        served: what the host's table overlay served from witnesses it never re-asked
            (:meth:`auto_runtime.overlay.TableOverlay.service`), the memo rung's evidence that
            the task repeats itself; None without an overlay.
    """

    store_path: str
    task: str
    contract: dict[str, Any]
    generation: int
    out_path: str
    reference_model: str | None = None
    programs: bool = True
    memo: bool = True
    rungs: list[str] | None = None
    served: dict[str, Any] | None = None


@dataclass
class CompileResult:
    """What a compile came to.

    Attributes:
        verdict: ``pass``, ``refuse``, ``error``, ``timeout`` or ``crashed``.
        reason: the gate's verdict or what went wrong (one line).
        generation: the generation number compiled.
        artifact_id: the stored artifact's id (``pass`` only).
        eval_run_id: the last eval run of the compile (``pass`` and ``refuse``).
        compiled_as: ``program``, ``memo-first``, ``specialist`` or ``memo`` (``pass`` only).
        seconds: wall time of the compile, including the child's start.
    """

    verdict: str
    reason: str
    generation: int
    artifact_id: str | None = None
    eval_run_id: str | None = None
    compiled_as: str | None = None
    seconds: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


def compile_once(req: CompileRequest, store: Any = None) -> CompileResult:
    """Run the compile in this process and summarize it (never raises). ``store``: an open
    :class:`auto.store.Store` of ``req.store_path`` to compile through (left open), instead of a
    connection of its own (None)."""
    from auto.compile import compile_task
    from auto.errors import AutoError, GateRefused
    from auto.store import Store
    from auto.gate import Contract

    t0 = time.perf_counter()
    try:
        with (contextlib.nullcontext(store) if store is not None else Store(req.store_path)) as store:
            try:
                out = compile_task(store, req.task, contract=Contract(**req.contract), generation=req.generation,
                                   out_path=req.out_path, reference_model=req.reference_model, programs=req.programs,
                                   memo=req.memo, rungs=req.rungs, served=req.served)
            except GateRefused as e:
                return CompileResult("refuse", e.reason, req.generation, eval_run_id=e.eval_run_id,
                                     seconds=time.perf_counter() - t0,
                                     detail={"rungs": e.rungs, "certificate": refusal_certificate(store, e.rungs)})
            return CompileResult("pass", out.reason, req.generation, artifact_id=out.artifact_id,
                                 eval_run_id=out.eval_run_id, compiled_as=out.typed_manifest.compiled_as,
                                 seconds=time.perf_counter() - t0,
                                 detail={"timings_s": out.timings_s, "rungs": out.rungs,
                                         "certificate": refusal_certificate(store, out.rungs)})
    except AutoError as e:
        return CompileResult("error", f"{type(e).__name__}: {e}", req.generation, seconds=time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 - a compile bug must not take the ratchet down; it is recorded
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        return CompileResult("error", f"unexpected {tb}", req.generation, seconds=time.perf_counter() - t0)


def refusal_certificate(store: Any, rungs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the slow rungs refused in ``rungs`` showed, read from their eval runs, or None when
    neither the program nor the specialist rung was refused:

    - ``"specialist"``: ``{"smallest_certifiable_epsilon", "calibration_n"}`` (its eval run's
      ``guard-certified`` check), None when it refused before calibrating a guard (e.g. too few
      witnesses: nothing predicts the next attempt);
    - ``"program"``: ``{"agree", "n", "min_agreement"}`` (its ``out-of-fold-agreement`` check).

    The ratchet predicts the next attempt's chance from them
    (:func:`auto.ratchet.policy.rungs_predicted_to_refuse`)."""
    from auto.gate import CheckName, EvalRun

    out: dict[str, Any] = {}
    for r in rungs:
        if r.get("verdict") != "refuse" or r.get("rung") not in ("program", "specialist") or not r.get("eval_run_id"):
            continue
        record = store.get_eval_run(r["eval_run_id"])
        try:
            run = EvalRun.from_record(record) if record is not None else None
        except (KeyError, TypeError, ValueError):  # not a gate's record: it predicts nothing
            run = None
        if run is None:
            continue
        if r["rung"] == "specialist" and (c := run.check(CheckName.GUARD_CERTIFIED)) is not None:
            out["specialist"] = {"smallest_certifiable_epsilon": c.get("smallest_certifiable_epsilon"),
                                 "calibration_n": c.get("calibration_n")}
        elif r["rung"] == "program" and (c := run.check(CheckName.OUT_OF_FOLD_AGREEMENT)) is not None:
            out["program"] = {"agree": c.get("agree"), "n": c.get("n"), "min_agreement": c.get("min_agreement")}
    return out or None


CHILD_NICENESS = 10
"""The compile child lowers its CPU priority by this much (``os.nice``): on a host whose cores
the serving process shares, the scheduler then favours the requests over the compile."""


THREAD_LIMIT_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                     "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
"""The environment variables through which OpenMP, OpenBLAS, MKL, BLIS, Accelerate and numexpr
read their thread-pool size (each library's documented variable)."""


def child_env(environ: dict[str, str] | None = None, cpu_count: int | None = None) -> dict[str, str]:
    """The compile child's environment: ``environ`` (default ``os.environ``) with each of
    :data:`THREAD_LIMIT_VARS` the user has not set capped at one core fewer than the host has
    (at least 1), so that the compile's numeric thread pools leave a core to the serving process.
    A value the user set is kept."""
    env = dict(os.environ if environ is None else environ)
    n = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    cap = str(max(1, n - 1))
    for var in THREAD_LIMIT_VARS:
        env.setdefault(var, cap)
    return env


def run_compile(req: CompileRequest, *, timeout_s: float = DEFAULT_TIMEOUT_S, mode: str = "process",
                store: Any = None) -> CompileResult:
    """Run one compile in a child process (or a thread) and wait for it, at most ``timeout_s``.

    The child is ``python -m auto.ratchet.worker``, a fresh interpreter that reads the request as
    JSON on stdin and writes the result as JSON on stdout: it never imports the serving program's
    ``__main__`` module (``multiprocessing``'s spawn would re-run a user's script that lacks an
    ``if __name__ == "__main__":`` guard). It runs at :data:`CHILD_NICENESS` with its numeric
    thread pools capped (:func:`child_env`). Called on the ratchet's background thread, never on a
    request.

    ``store`` (thread mode only): the serving process's open store to compile through, so the
    process keeps one connection to the file.

    Raises:
        ValueError: ``mode`` is neither ``"process"`` nor ``"thread"``.
    """
    t0 = time.perf_counter()
    if mode == "thread":
        box: list[CompileResult] = []
        th = threading.Thread(target=lambda: box.append(compile_once(req, store)), name="auto-ratchet-compile", daemon=True)
        th.start()
        th.join(timeout_s)
        if box:
            return box[0]
        return CompileResult("timeout", f"the compile ran past {timeout_s:g} s (left running on its thread)",
                             req.generation, seconds=time.perf_counter() - t0)
    if mode != "process":
        raise ValueError(f"mode must be 'process' or 'thread', got {mode!r}")
    proc = subprocess.Popen([sys.executable, "-P", "-m", "auto.ratchet.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
    try:
        out, err = proc.communicate(json.dumps(dataclasses.asdict(req)).encode("utf-8"), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return CompileResult("timeout", f"the compile ran past {timeout_s:g} s and was killed", req.generation,
                             seconds=time.perf_counter() - t0)
    seconds = time.perf_counter() - t0
    if proc.returncode == 0:
        try:
            res = CompileResult(**json.loads(out.decode("utf-8")))
            res.seconds = seconds
            return res
        except (ValueError, TypeError):
            pass
    last = (err.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:300]
    return CompileResult("crashed", f"the compile process died without a result (exit code {proc.returncode})"
                         + (f": {last}" if last else ""), req.generation, seconds=seconds)


def main() -> None:  # pragma: no cover - the child process's entry point (exercised by the tests)
    """``python -m auto.ratchet.worker``: one :class:`CompileRequest` as JSON on stdin, one
    :class:`CompileResult` as JSON on stdout."""
    try:
        os.nice(CHILD_NICENESS)
    except OSError:  # not permitted here: compile at the same priority
        pass
    req = CompileRequest(**json.loads(sys.stdin.buffer.read().decode("utf-8")))
    res = compile_once(req)
    sys.stdout.write(json.dumps(dataclasses.asdict(res)))
    sys.stdout.flush()


def default_out_path(store_path: str | Path, task: str, generation: int) -> str:
    """Where a ratchet's generation is written: ``<store>.artifacts/<task>.gen<N>.wasm``."""
    return str(Path(f"{store_path}.artifacts") / f"{task.replace(':', '-')}.gen{generation}.wasm")


if __name__ == "__main__":  # pragma: no cover
    main()
