"""Compile fan-out: every compilable task of a store, compiled in parallel on a Ray cluster.

``auto compile --store S --all`` builds one :class:`CompileJob` per task that has witnesses and
per model-call site (:mod:`auto.sites`), and
runs :func:`compile_job` for each — serially (``workers=0``), on a local Ray cluster started for
the run (the default: ``workers`` CPUs, one compile per CPU), or on an existing cluster
(``address``, e.g. ``ray://head:10001`` or ``auto`` inside a cluster). Each job opens the store
itself, so every worker must reach it: a local SQLite file for a one-host cluster, a
``postgresql://`` store for workers on several hosts, and the artifact folder must be shared
storage (or read the artifacts back from the store: they are stored there too).

Results are the same bytes as a serial run: a compile depends only on the task's witnesses and
its contract (seeds are fixed, wall-clock numbers stay out of artifacts), and tasks do not read
each other's rows. A worker that dies mid-compile (killed, out of memory) is retried by Ray up
to ``retries`` times; a job that still fails is reported with ``verdict: "error"`` and the
reason, never left out: :func:`run_jobs` returns one result per job, in job order.

Needs ``pip install 'auto[distributed]'`` (Ray) for ``workers > 0``.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from auto.errors import ArgumentError, AutoError, GateRefused, StoreError

DEFAULT_RETRIES = 2
"""How many times Ray re-runs a job whose worker died."""

OBJECT_STORE_BYTES = 256 * 1024 * 1024
"""Object-store memory of a local cluster started for a run (results are small dicts)."""


@dataclass(frozen=True)
class CompileJob:
    """One task to compile.

    Attributes:
        store: the store's location (file path or ``postgresql://`` URI), opened by the worker.
        task: the task name.
        out_dir: folder the ``<task>.gen<N>.wasm`` file is written into (absolute).
        contract: contract fields applied to the task (``task`` excluded), or None for the
            task's default contract.
        memo, programs: as for :func:`auto.compile.compile_task`.
    """

    store: str
    task: str
    out_dir: str
    contract: dict | None = None
    memo: bool = True
    programs: bool = True


def artifact_name(task: str, generation: int) -> str:
    """``<task>.gen<N>.wasm`` with path separators and odd characters in the task name replaced."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task)
    return f"{safe}.gen{generation}.wasm"


def compile_job(job: CompileJob) -> dict[str, Any]:
    """Compile one job's task (in whatever process runs it) and report.

    Returns:
        ``{"task", "verdict": "pass", "generation", "artifact_id", "artifact_bytes",
        "artifact_path", "compiled_as", "reason", "eval_run_id", "seconds", "pid"}``;
        ``verdict: "refuse"`` with the reason and eval run when every rung refused;
        ``verdict: "error"`` with the reason when the compile failed otherwise.
    """
    from auto.compile import compile_task
    from auto.compile.context import next_generation
    from auto.store import Store
    from auto.gate import Contract

    t0 = time.perf_counter()
    base = {"task": job.task, "pid": os.getpid()}
    try:
        contract = Contract(**{**job.contract, "task": job.task}) if job.contract else Contract.default_for(job.task)
        with Store(job.store) as st:
            gen = next_generation(st, job.task)
            out = Path(job.out_dir) / artifact_name(job.task, gen)
            o = compile_task(st, job.task, contract=contract, generation=gen, out_path=out, memo=job.memo,
                             programs=job.programs)
        return {**base, "verdict": "pass", "generation": o.generation, "artifact_id": o.artifact_id,
                "artifact_bytes": o.artifact_bytes, "artifact_path": str(o.artifact_path),
                "compiled_as": o.typed_manifest.compiled_as, "reason": o.reason, "eval_run_id": o.eval_run_id,
                "seconds": round(time.perf_counter() - t0, 3)}
    except GateRefused as e:
        return {**base, "verdict": "refuse", "reason": e.reason, "eval_run_id": e.eval_run_id,
                "seconds": round(time.perf_counter() - t0, 3)}
    except AutoError as e:
        return {**base, "verdict": "error", "reason": f"{type(e).__name__}: {e}",
                "seconds": round(time.perf_counter() - t0, 3)}


def compilable_tasks(store: Any) -> list[str]:
    """The tasks of ``store`` with at least one task span, then its model-call sites (``site:<hex>``
    ids, found as the census finds them: :func:`auto.census.census_model_calls`), sorted by name."""
    from auto.census import MODEL_CALL_KIND, census_model_calls

    sites = census_model_calls(store.model_call_rows(MODEL_CALL_KIND), store.payload_texts).sites
    return sorted({*store.tasks(), *(s.site for s in sites if s.model_call is not None)})


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise StoreError("compiling on Ray needs it installed: pip install 'auto[distributed]' "
                         "(or --workers 0 to compile serially)") from None
    return ray


def run_jobs(fn: Callable[[Any], dict[str, Any]], jobs: Sequence[Any], *, workers: int | None = None,
             address: str | None = None, retries: int = DEFAULT_RETRIES,
             progress: Callable[[dict[str, Any]], None] | None = None,
             name: Callable[[Any], str] = lambda j: getattr(j, "task", repr(j))) -> list[dict[str, Any]]:
    """Run ``fn(job)`` for every job and return the results in job order.

    Args:
        fn: a function of one job returning a JSON-able dict (it is shipped to the workers:
            module-level functions by reference, closures by value).
        jobs: the jobs.
        workers: 0 = serially in this process; otherwise the CPUs of a local Ray cluster started
            for this call (default: ``os.cpu_count()``); ignored with ``address``.
        address: an existing Ray cluster (``ray.init(address=...)``) instead of a local one.
        retries: Ray re-runs a job whose worker process died up to this many times.
        progress: called with each result as it arrives.
        name: the job's name in error results (default: its ``task``).

    Returns:
        One dict per job; a job that failed in every attempt is
        ``{"task": name(job), "verdict": "error", "reason": ...}``.

    Raises:
        StoreError: Ray is not installed (``workers > 0``) or the cluster cannot be reached.
        ArgumentError: a negative ``workers`` or ``retries``.
    """
    if workers is not None and workers < 0 or retries < 0:
        raise ArgumentError("workers and retries must be >= 0")
    say = progress or (lambda _r: None)
    if workers == 0 and address is None:
        out = []
        for j in jobs:
            try:
                r = fn(j)
            except Exception as e:  # noqa: BLE001 - one job's failure is its result, not the run's
                r = {"task": name(j), "verdict": "error", "reason": f"{type(e).__name__}: {e}"}
            say(r)
            out.append(r)
        return out
    ray = _ray()
    started = False
    if not ray.is_initialized():
        opts: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        try:
            if address:
                ray.init(address=address, **opts)
            else:
                ray.init(num_cpus=workers or os.cpu_count() or 1, object_store_memory=OBJECT_STORE_BYTES, **opts)
        except Exception as e:  # noqa: BLE001 - Ray raises many kinds; one line for the user
            raise StoreError(f"cannot start or reach the Ray cluster{' at ' + address if address else ''}: "
                             f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
        started = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=False)(fn)
        refs = [remote.remote(j) for j in jobs]
        index = {r: i for i, r in enumerate(refs)}
        results: list[dict[str, Any] | None] = [None] * len(refs)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i = index[ref]
                try:
                    r = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - worker died past its retries, or fn raised
                    msg = str(e).strip().splitlines()
                    r = {"task": name(jobs[i]), "verdict": "error",
                         "reason": f"{type(e).__name__} after {retries} retr{'y' if retries == 1 else 'ies'}: "
                                   f"{msg[-1] if msg else ''}"}
                results[i] = r
                say(r)
        return [r for r in results if r is not None]
    finally:
        if started:
            ray.shutdown()


def compile_all(store: str, *, out_dir: str | os.PathLike, tasks: Sequence[str] | None = None,
                workers: int | None = None, address: str | None = None, retries: int = DEFAULT_RETRIES,
                contract: dict | None = None, memo: bool = True, programs: bool = True,
                progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Compile every compilable task of the store at ``store`` (or the given ``tasks``).

    Args:
        store: the store's location (file path or ``postgresql://`` URI).
        out_dir: where the artifacts are written (created).
        tasks: the tasks to compile (default :func:`compilable_tasks`).
        workers, address, retries, progress: as for :func:`run_jobs`.
        contract: contract fields applied to every task (default: each task's default contract).
        memo, programs: as for :func:`auto.compile.compile_task`.

    Returns:
        One :func:`compile_job` result per task, sorted by task name.
    """
    from auto.store import Store

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if tasks is None:
        with Store(store) as st:
            tasks = compilable_tasks(st)
    jobs = [CompileJob(store=str(store), task=t, out_dir=str(out), contract=contract, memo=memo, programs=programs)
            for t in sorted(tasks)]
    return run_jobs(compile_job, jobs, workers=workers, address=address, retries=retries, progress=progress)


__all__ = ["CompileJob", "artifact_name", "compilable_tasks", "compile_all", "compile_job", "run_jobs"]
