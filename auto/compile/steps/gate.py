"""The hermetic gate of a region: every recorded input replayed, no live tool, every field checked.

Each distinct recorded input runs twice — through the artifact (WebAssembly, with a replay
:class:`~auto_runtime.tools.ToolSession`) and through the interpreter (:func:`auto.models.region.run_region`)
— with its tools answered from the recordings, matched by tool name and canonical arguments
(never by order): the input's own run first, then every other run. No live tool runs, and a call
no recording answers is a refusal of that input.

Checks (:func:`run_region_gate`):

- ``unmatched-tool-calls`` (informational): the inputs whose run was refused because a call had
  no recording (a compiled path that asked for something the reference never did on that input:
  a wrong tool, or wrong arguments); each counts as a miss of every field, and the record lists
  examples with their reason;
- ``wasm-matches-python-reference``: artifact and interpreter give the same output on every
  input (byte for byte in canonical JSON; a refusal must be the same refusal). The interpreter's
  tool calls pass the host's checks too (arguments and result against the declared schemas), so
  a value outside a tool's schema is the same refusal on both sides;
- ``field-agreement:<field>``, per answer field, on the held-out inputs: the compiled value equals
  the reference's — the modal value over the input's runs for a compiled value, the replayed
  run's own value for a value from a kept model call; a deopt counts as a disagreement. Each must
  reach ``contract.program_min_agreement`` with a 95% Clopper–Pearson lower bound of at least
  ``contract.program_min_agreement_ci95_low`` (the program gate's bar, per field);
- ``heldout-agreement`` (informational): every field at once, per held-out input;
- ``witnessed-agreement`` (informational): the same on the training inputs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Callable, Sequence

from auto_runtime.errors import AutoError, InputSchemaError, ToolCallError
from auto_runtime.tools import Replay

from auto.models import region as R
from auto.canonical import canonical_json
from auto.compile.steps.build import RegionPlan
from auto.compile.steps.traces import TaskTrace
from auto.gate import Check, CheckName, Contract, clopper_pearson, eval_record, first_refusal


class _Unmatched(Exception):
    pass


def group_by_input(traces: Sequence[TaskTrace], field: str) -> dict[str, list[TaskTrace]]:
    """Runs grouped by their input's canonical JSON (``{field: text}``), in first-seen order."""
    out: dict[str, list[TaskTrace]] = defaultdict(list)
    for t in traces:
        out[canonical_json({field: t.input[field]})].append(t)
    return dict(out)


def answer_fields(output: Any) -> dict[str, Any]:
    """The answer as ``{field: value}`` (``{"answer": value}`` for a single value)."""
    return dict(output) if isinstance(output, dict) else {"answer": output}


def _expected(runs: list[TaskTrace], replayed: TaskTrace, model_fields: set[str]) -> dict[str, set[str]]:
    """Per answer field, the canonical values that count as the reference's answer: the modal
    values over the input's runs (every value of a tie), or the replayed run's own value for a
    field from a kept model call."""
    fields = answer_fields(runs[0].output)
    out = {}
    for k in fields:
        if k in model_fields:
            out[k] = {canonical_json(answer_fields(replayed.output).get(k))}
            continue
        vals = Counter(canonical_json(answer_fields(r.output).get(k)) for r in runs)
        top = max(vals.values())
        out[k] = {v for v, n in vals.items() if n == top}
    return out


class RegionRun:
    """One input's gate result: the artifact's output (or refusal), the interpreter's, the
    expected fields (canonical JSON texts)."""

    def __init__(self, key: str, wasm: Any, interp: Any, expected: dict[str, set[str]]) -> None:
        self.key = key
        self.wasm = wasm
        self.interp = interp
        self.expected = expected

    @property
    def answered(self) -> bool:
        return isinstance(self.wasm, dict) and self.wasm.get("deopt") is False and "answer" in self.wasm

    def field_ok(self, k: str) -> bool:
        if not self.answered:
            return False
        return canonical_json(answer_fields(self.wasm["answer"]).get(k)) in self.expected.get(k, set())

    def all_ok(self) -> bool:
        return self.answered and all(self.field_ok(k) for k in self.expected)


def replay_runs(artifact: Any, plan: RegionPlan, groups: dict[str, list[TaskTrace]],
                all_recordings: list[dict[str, Any]], model_fields: set[str]) -> list[RegionRun]:
    """Run every input of ``groups`` through the artifact and the interpreter with replayed tools."""
    region = plan.region
    decls = getattr(artifact, "tools", None) or {}
    out = []
    for key, runs in groups.items():
        own = runs[0]
        recs = plan.recordings(own) + all_recordings
        inp = {region.field: own.input[region.field]}
        try:
            w: Any = artifact.call(inp, session=artifact.new_session(replay=Replay(recs)))
        except ToolCallError as e:
            w = f"refused: {e.reason}"
        except AutoError as e:
            w = f"failed: {type(e).__name__}: {e}"
        replay = Replay(recs)

        def call_tool(tool: str, args: dict[str, Any], replay: Replay = replay) -> Any:
            # the host's checks, as the artifact's session applies them: the interpreter models the
            # deployed call, so a value outside a tool's declared schema is the same refusal
            decl = decls.get(tool)
            if decl is not None:
                try:
                    decl.check_arguments(args)
                except InputSchemaError as e:
                    raise _Unmatched(f"tool {tool}: arguments violate its schema: {e}") from None
            found, result = replay.lookup(tool, canonical_json(args))
            if not found:
                raise _Unmatched(f"replay: no recording of tool {tool} with arguments {canonical_json(args)[:200]}")
            if decl is not None:
                try:
                    decl.check_result(result)
                except InputSchemaError as e:
                    raise _Unmatched(f"tool {tool}: result violates its schema: {e}") from None
            return result

        try:
            p: Any = R.run_region(region, inp, call_tool)
        except _Unmatched as e:
            p = f"refused: {e}"
        out.append(RegionRun(key, w, p, _expected(runs, own, model_fields)))
    return out


def run_region_gate(*, contract: Contract, artifact: Any, plan: RegionPlan, train: Sequence[TaskTrace],
                    heldout: Sequence[TaskTrace], candidate: dict[str, Any], generation: int,
                    say: Callable[[str], None] | None = None) -> tuple[dict[str, Any], list[RegionRun]]:
    """The eval-run record of the region gate (module docstring) and the held-out runs.

    Returns:
        ``(record, heldout runs)``; the record has the shape of :func:`auto.gate.eval_record`.
    """
    field = plan.region.field
    model_fields = {v.label for v in plan.values if v.how == "model"}
    all_recs = [r for t in list(train) + list(heldout) for r in plan.recordings(t)]
    w_groups, h_groups = group_by_input(train, field), group_by_input(heldout, field)
    w_runs = replay_runs(artifact, plan, w_groups, all_recs, model_fields)
    h_runs = replay_runs(artifact, plan, h_groups, all_recs, model_fields)
    runs = w_runs + h_runs
    checks: list[Check] = []
    unmatched = [r for r in runs if isinstance(r.wasm, str) and r.wasm.startswith("refused: replay")]
    checks.append(Check(CheckName.UNMATCHED_TOOL_CALLS, True,
                        {"unmatched": len(unmatched), "n": len(runs), "heldout": sum(1 for r in h_runs if r in unmatched),
                         "examples": [r.wasm[:200] for r in unmatched[:5]]}, informational=True))
    mism = [r for r in runs if canonical_json(r.wasm) != canonical_json(r.interp)]
    checks.append(Check(CheckName.WASM_MATCHES_PYTHON_REFERENCE, not mism,
                        {"mismatches": len(mism), "n": len(runs),
                         "examples": [{"input": r.key[:200], "wasm": canonical_json(r.wasm)[:300],
                                       "interpreter": canonical_json(r.interp)[:300]} for r in mism[:3]]},
                        refusal=f"WebAssembly and the region interpreter disagree on {len(mism)} inputs"))
    also = (f"; {len(unmatched)} run(s) refused for a call no recording answers, e.g. {unmatched[0].wasm[9:160]}"
            if unmatched else "")
    fields = sorted({k for r in runs for k in r.expected})
    lo_bar, rate_bar = contract.program_min_agreement_ci95_low, contract.program_min_agreement
    for k in fields:
        agree = sum(r.field_ok(k) for r in h_runs)
        n = len(h_runs)
        lo, hi = clopper_pearson(agree, n)
        rate = agree / n if n else None
        ok = rate is not None and rate >= rate_bar and lo is not None and lo >= lo_bar
        checks.append(Check(CheckName.FIELD_AGREEMENT, ok,
                            {"n": n, "agree": agree, "rate": rate, "ci95_low": lo, "ci95_high": hi,
                             "min_agreement": rate_bar, "min_agreement_ci95_low": lo_bar}, field=k,
                            refusal=f"answer field {k!r}: held-out agreement {agree}/{n} = {rate if rate is None else round(rate, 3)} "
                                    f"(95% CP lower bound {lo if lo is None else round(lo, 3)}; deopts count as disagreement) "
                                    f"does not meet {rate_bar:.2f} with lower bound {lo_bar:.2f}" + also))
    for split, rs in (("heldout", h_runs), ("witnessed", w_runs)):
        agree = sum(r.all_ok() for r in rs)
        answered = sum(r.answered for r in rs)
        lo, hi = clopper_pearson(agree, len(rs))
        name = CheckName.HELDOUT_AGREEMENT if split == "heldout" else CheckName.WITNESSED_AGREEMENT
        checks.append(Check(name, True, {"n": len(rs), "agree": agree, "rate": agree / len(rs) if rs else None,
                                         "ci95_low": lo, "ci95_high": hi, "answered": answered,
                                         "coverage": answered / len(rs) if rs else None,
                                         "precision": agree / answered if answered else None}, informational=True))
    failed = first_refusal(checks)
    h = next(c for c in checks if c.name is CheckName.HELDOUT_AGREEMENT)
    if failed is None:
        reason = (f"region held-out agreement {h['agree']}/{h['n']} = {h['rate']:.3f} on every field at once "
                  f"(coverage {h['coverage']:.3f}); each of {len(fields)} fields meets {rate_bar:.2f} / {lo_bar:.2f}; "
                  f"{len(unmatched)} run(s) refused for a call no recording answers; WebAssembly equals the interpreter")
    else:
        reason = failed.refusal
    return eval_record(contract, generation, candidate, checks, reason), h_runs


__all__ = ["RegionRun", "answer_fields", "group_by_input", "replay_runs", "run_region_gate"]
