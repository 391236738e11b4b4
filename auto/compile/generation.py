"""A generation that passed its gate: the one place where an artifact is emitted, stored and written.

:func:`emit_generation` finishes the manifest (:class:`auto.compile.manifest.ManifestDraft`),
appends it to the code (:func:`auto.emit.emit`), stores the artifact with its generation number,
and writes the ``.wasm`` file atomically (a temporary file renamed over the target, so a reader
never sees half a file). It returns the :class:`CompileOutcome`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from auto_runtime.manifest import Manifest

from auto.canonical import canonical_json, digest
from auto.compile.context import RungContext
from auto.compile.manifest import ManifestDraft
from auto.compile.measure import fuel_per_call, latency_summary
from auto.emit import emit, read_manifest
from auto.models.specialist.features import featurize_row
from auto.guards.stack import without_scores
from auto.gate import Contract


@dataclass
class CompileOutcome:
    """A generation that passed the gate (refusals raise :class:`~auto.errors.GateRefused`).

    Attributes:
        task, generation: what was compiled.
        reason: the gate's one-line verdict (prefixed by the refusals of the rungs tried before).
        eval_run_id: the stored eval run the manifest cites.
        artifact_id: ``sha256:<hex>`` of ``wasm``; artifact_bytes: ``len(wasm)`` (bytes).
        artifact_path: where the file was written.
        wasm: the artifact's bytes; manifest: its manifest.
        timings_s: seconds per stage (synthesize / distill, codegen, calibrate, gate, emit).
        latency_us: measured ``Artifact.call`` latency on held-out (or witnessed) inputs at
            compile time (``{"p50", "p95", "n", "what"}``, µs); kept out of the manifest so builds
            are reproducible.
        model: the compiled model (its ``predict`` / the interpreter is the Python reference).
        sklearn_predict: the scikit-learn estimator's own predict on one input (featurize +
            predict), kept in memory so benchmarks can time it beside the artifact.
        rungs: the ladder's rungs tried for it, in order (``{"rung", "verdict", "seconds",
            "eval_run_id"}``; set by :func:`auto.compile.compile_task`).
    """

    task: str
    generation: int
    reason: str
    eval_run_id: str
    artifact_id: str
    artifact_bytes: int
    artifact_path: Path | None
    wasm: bytes
    manifest: dict[str, Any]
    timings_s: dict[str, float] = field(default_factory=dict)
    latency_us: dict[str, Any] | None = None
    model: Any = None
    sklearn_predict: Callable[[dict[str, Any]], Any] | None = None
    rungs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def typed_manifest(self) -> Manifest:
        """The typed view of :attr:`manifest` (:meth:`auto_runtime.manifest.Manifest.of`)."""
        return Manifest.of(self.manifest)

    def summary(self) -> dict[str, Any]:
        """JSON-friendly summary (no bytes, no calibration scores)."""
        m = self.typed_manifest
        return {
            "verdict": "pass",
            "task": self.task,
            "generation": self.generation,
            "reason": self.reason,
            "eval_run_id": self.eval_run_id,
            "artifact_id": self.artifact_id,
            "artifact_bytes": self.artifact_bytes,
            "artifact_path": str(self.artifact_path) if self.artifact_path else None,
            "compiled_as": m.compiled_as,
            "model": m.model,
            "parity": m.parity,
            "guard": without_scores(m.guard.to_dict()),
            "latency_us": self.latency_us,
            "fuel_per_call": m.fuel_per_call,
            "timings_s": self.timings_s,
            "rungs": self.rungs,
        }


def reference_model_label(store: Any, task: str) -> str:
    """The reference model named by the task's recorded model-call spans (``simulated: <name>``
    when the recorder marked it simulated), or a statement that none was recorded."""
    for s in store.spans(task=task, kind="llm"):
        a = s.get("attributes") or {}
        name = a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
        if name:
            return f"simulated: {name}" if a.get("auto.reference_model.simulated") else str(name)
    return "unknown (no model-call spans recorded)"


def witness_set_digest(store: Any, task: str, witnesses: Sequence[Any]) -> str:
    """The digest naming the witnesses a generation was compiled from (``digest`` of their span
    digests in read order), recorded in the store (:meth:`auto.store.Store.put_witness_set`)
    so the list can be read back from it; a manifest cites the digest, not one trace id per
    witness. Witnesses that are not stored spans (a region's per-step values, derived from its
    runs) are named by the digest of their trace ids and contents, and not recorded."""
    put = getattr(store, "put_witness_set", None)
    spans = all(isinstance(getattr(w, "digest", None), str) and w.digest for w in witnesses)
    if put is not None and spans:
        return put(task, list(witnesses))
    if spans:
        return digest([w.digest for w in witnesses])
    # derived witnesses (a region's per-step values): no span digest; named by their trace and content
    return digest([canonical_json([getattr(w, "trace_id", None), w.input, w.output]) for w in witnesses])


def emit_generation(ctx: RungContext, contract: Contract, draft: ManifestDraft, code: bytes, candidate: Any, *,
                    guard: dict[str, Any], parity: dict[str, Any], eval_runs: list[str], reason: str,
                    witnesses: Sequence[Any], store_digest: str | None, distinct_inputs: int, fuel_inputs: Sequence[dict[str, Any]],
                    latency: Sequence[float], timings: dict[str, float], model: Any = None,
                    estimator: Any = None, fuel_sessions: Any = None,
                    cost_usd_micros_per_call: float | None = 0) -> CompileOutcome:
    """Finish the manifest, emit the ``.wasm``, store it, and write the file atomically.

    Args:
        ctx: the compile's context (store, task, generation, out_path, reference model).
        contract: the contract the gate checked.
        draft: the candidate's manifest draft.
        code: the module bytes the gate ran (no manifest section).
        candidate: the provisional :class:`auto_runtime.Artifact` of ``code`` (fuel is measured on it).
        guard, parity: the manifest's guard entry and parity figures.
        eval_runs: eval run ids to cite, the gate's last.
        reason: the gate's verdict.
        witnesses: every witness the compile read (provenance: the manifest cites their set's
            digest, :func:`witness_set_digest`).
        store_digest: the task's store digest read with them (None: read it now).
        distinct_inputs: how many distinct inputs the candidate was built from.
        fuel_inputs: inputs fuel is measured on.
        latency: ``Artifact.call`` samples in µs (the outcome's ``latency_us``).
        timings: seconds per stage so far (``emit`` is added).
        model: the compiled model; estimator: the scikit-learn estimator behind a specialist.
        fuel_sessions: for a capability artifact, ``sessions(input)`` replaying its tools while
            fuel is measured.
        cost_usd_micros_per_call: the manifest's paid cost of a tier-1 call (µ$; 0 when pure).

    Raises:
        ManifestError: the manifest is not canonical-JSON serializable.
        OSError: the file cannot be written.
    """
    t0 = time.perf_counter()
    store = ctx.store
    provenance = {
        "witness_set": {"digest": witness_set_digest(store, ctx.task, witnesses), "n": len(witnesses)},
        "store_digest": store_digest or store.digest(ctx.task),
        "witnesses": len(witnesses),
        "distinct_inputs": distinct_inputs,
        "reference_model": ctx.reference_model or reference_model_label(store, ctx.task),
    }
    manifest = draft.final(contract=contract, eval_runs=eval_runs, provenance=provenance, parity=parity, guard=guard,
                           fuel_per_call=fuel_per_call(candidate, fuel_inputs, sessions=fuel_sessions),
                           cost_usd_micros_per_call=cost_usd_micros_per_call)
    if ctx.site is not None:
        manifest["site"] = ctx.site  # the template a model-call site's input is cut with
    wasm = emit(code, manifest)
    manifest = read_manifest(wasm)  # as stored in the file (with its manifest_digest)
    aid = store.put_artifact(wasm, manifest, ctx.task, ctx.generation)
    path = Path(ctx.out_path) if ctx.out_path else Path(f"{ctx.task.replace(':', '-')}.gen{ctx.generation}.wasm")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(wasm)
    tmp.replace(path)
    timings["emit"] = time.perf_counter() - t0
    spec = getattr(model, "features", None)
    sk = None
    if estimator is not None and spec is not None:
        # classes are canonical JSON texts internally; the task's answer is the JSON value
        def sk(inp: dict[str, Any]) -> Any:
            return json.loads(estimator.predict(featurize_row(inp[spec.field], spec))[0])
    return CompileOutcome(task=ctx.task, generation=ctx.generation, reason=reason, eval_run_id=eval_runs[-1],
                          artifact_id=aid, artifact_bytes=len(wasm), artifact_path=path, wasm=wasm, manifest=manifest,
                          timings_s={k: round(v, 4) for k, v in timings.items()}, latency_us=latency_summary(latency),
                          model=model, sklearn_predict=sk)
