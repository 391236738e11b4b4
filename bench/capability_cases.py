"""Hostile cases of the capability contract, each run against a compiled region and reported as a row.

Every case attacks one rule of :mod:`auto_runtime.tools` with the family's compiled artifact (a
variant of its manifest, a variant of its region, or a misbehaving host tool) and records how it
ended: ``refused at load`` (:class:`~auto_runtime.errors.CapabilityError`), ``deopt`` (the call
went to the reference, with the host's reason), or ``gate refused`` (the hermetic gate). A case is
*contained* when it ended that way and no tool ran outside its declaration (counted by wrapping
the host's tools). The same cases are tests (``bench/tests/test_bench_regions.py``).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from auto_runtime import Artifact, TieredTask
from auto_runtime.errors import CapabilityError
from auto_runtime.guard import AlwaysDeopt
from auto_runtime.manifest import MANIFEST_SECTION, manifest_payload
from auto_runtime.tools import ToolBudget
from auto_runtime.wasm_sections import custom_section, parse

from auto.models import region as R
from auto.canonical import digest_bytes
from auto.codegen.region_lower import compile_region
from auto.compile.steps.build import ModelCapability, RegionPlan, ValueReport
from auto.compile.steps.gate import run_region_gate
from auto.compile.steps.traces import TaskTrace, ToolStep
from auto.emit import emit
from auto.gate import Contract


def code_of(wasm: bytes) -> bytes:
    """The module bytes of an artifact without its ``auto.manifest`` section (the last one)."""
    tail = custom_section(MANIFEST_SECTION, manifest_payload(parse(wasm)))
    return wasm[: len(wasm) - len(tail)]


class Counted:
    """A host tool wrapped to count its runs."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.runs = 0

    def __call__(self, **kw: Any) -> Any:
        self.runs += 1
        return self.fn(**kw)


def _row(case: str, outcome: str, reason: str, outside: int, contained: bool) -> dict[str, Any]:
    return {"case": case, "outcome": outcome, "reason": " ".join(str(reason).split())[:400],
            "tool_runs_outside_declaration": outside, "contained": contained and outside == 0}


def _serve(art: Artifact, tools: dict[str, Any], field: str, text: str, **kw: Any) -> Any:
    ref_calls: list = []
    tt = TieredTask(art, lambda inp: ref_calls.append(inp) or "REFERENCE", tools=tools, **kw)
    return tt({field: text})


def plan_of(manifest: dict[str, Any]) -> RegionPlan:
    """The :class:`RegionPlan` a region artifact's manifest describes (its region, tools and kept
    model calls), as the hermetic gate needs it."""
    model = manifest["model"]
    region = R.from_json(model["region"])
    models, values = [], []
    for d in manifest.get("tools") or []:
        if d.get("kind") == "model":
            models.append(ModelCapability.from_declaration(d, region.field))
            values.append(ValueReport(d["name"].rsplit(".", 1)[-1], d["name"], "model"))
    return RegionPlan(region, manifest.get("tools") or [], values, models, [])


def run_cases(family: str, wasm: bytes, store: Any, traces: list[TaskTrace], serving: Any,
              samples: list[str]) -> list[dict[str, Any]]:
    """Run every hostile case (module docstring) on the compiled ``wasm``; one row per case (the
    runtime's per-deopt warnings are silenced meanwhile: each case's reason is in its row)."""
    tiered_log = logging.getLogger("auto_runtime.tiered")
    level = tiered_log.level
    tiered_log.setLevel(logging.ERROR)
    try:
        return _run_cases(wasm, traces, serving, samples)
    finally:
        tiered_log.setLevel(level)


def _run_cases(wasm: bytes, traces: list[TaskTrace], serving: Any, samples: list[str]) -> list[dict[str, Any]]:
    art0 = Artifact.load(wasm)
    m = art0.manifest
    field = R.from_json(m["model"]["region"]).field
    host = serving.host_tools(m.get("tools") or [])
    code = code_of(wasm)
    rows: list[dict[str, Any]] = []
    reads = [t for t in m["tools"] if t.get("kind") == "tool" and t.get("effects") == "read"] or \
        [t for t in m["tools"] if t.get("kind") == "tool"]
    first, text = reads[0], samples[0]
    for t in reads:  # a tool some sample's tier-1 path calls, and that sample
        hit = next((s for s in samples if _path_calls(wasm, t["name"], host, field, s)), None)
        if hit is not None:
            first, text = t, hit
            break

    # 1. an import the manifest does not declare
    bad = dict(m, capabilities=[c for c in m["capabilities"] if c["name"] != "commit"])
    try:
        Artifact.load(emit(code, bad))
        rows.append(_row("undeclared import (auto.commit)", "loaded (NOT contained)", "", 0, False))
    except CapabilityError as e:
        rows.append(_row("undeclared import (auto.commit)", "refused at load", str(e), 0, True))
    # 2. the host lacks a declared tool
    try:
        TieredTask(Artifact.load(wasm), lambda i: None, tools={k: v for k, v in host.items() if k != first["name"]})
        rows.append(_row("host missing a declared tool", "served (NOT contained)", "", 0, False))
    except CapabilityError as e:
        rows.append(_row("host missing a declared tool", "refused at load", str(e), 0, True))
    # 3. the host offers a tool the manifest does not declare
    shell = Counted(lambda **kw: {"ran": True})
    try:
        Artifact.load(wasm, tools={**host, "shell": shell})
        rows.append(_row("host tool the manifest does not declare", "loaded (NOT contained)", "", shell.runs, False))
    except CapabilityError as e:
        rows.append(_row("host tool the manifest does not declare", "refused at load", str(e), shell.runs, True))
    # 4. the per-call tool budget
    calls = max(1, len([c for c in _serve(Artifact.load(wasm), host, field, text).tool_calls or []]))
    if calls >= 2:
        res = _serve(Artifact.load(wasm), host, field, text, tool_budget=ToolBudget(calls=calls - 1, wall_ms=60_000))
        rows.append(_row(f"exceeding the tool budget ({calls - 1} call(s))", res.tier, res.reason, 0,
                         res.tier == "tier-0" and "budget" in res.reason))
    slow = Counted(lambda **kw: (time.sleep(0.05), host[first["name"]](**kw))[1])
    res = _serve(Artifact.load(wasm), {**host, first["name"]: slow}, field, text, tool_budget=ToolBudget(calls=calls, wall_ms=20))
    rows.append(_row("exceeding the tool budget (20 ms of tool time)", res.tier, res.reason, 0,
                     res.tier == "tier-0" and "budget" in res.reason))
    # 5. arguments that violate the tool's schema never reach the tool
    strict = dict(first, arguments={"type": "object", "properties": {}, "additionalProperties": False})
    variant = dict(m, tools=[strict if t["name"] == first["name"] else t for t in m["tools"]])
    guarded = Counted(host[first["name"]])
    res = _serve(Artifact.load(emit(code, variant)), {**host, first["name"]: guarded}, field, text)
    rows.append(_row("schema-violating arguments from the artifact", res.tier, res.reason, guarded.runs,
                     res.tier == "tier-0" and "schema" in res.reason))
    # 6-8. a tool that raises, hangs, or returns a wrong type
    def boom(**kw: Any) -> Any:
        raise RuntimeError("backend unavailable")
    for case, fn, budget, want in (
            ("a tool that raises", boom, None, "raised"),
            ("a tool that hangs (2 s, 200 ms budget)", lambda **kw: time.sleep(2.0) or {}, ToolBudget(calls=calls, wall_ms=200),
             "ran past"),
            ("a tool that returns a wrong type (a list)", lambda **kw: ["not", "an", "object"], None, "result violates"),
            ("a tool that returns a wrong type (not JSON)", lambda **kw: {"x": {1, 2}}, None, "not JSON")):
        t0 = time.perf_counter()
        res = _serve(Artifact.load(wasm), {**host, first["name"]: fn}, field, text, tool_budget=budget)
        ms = (time.perf_counter() - t0) * 1000.0
        rows.append(_row(case, res.tier, f"{res.reason} ({ms:.0f} ms)", 0, res.tier == "tier-0" and want in res.reason))
    # 9. a replay mismatch in the hermetic gate
    altered = [TaskTrace(t.trace_id, t.span_id, t.input, t.output,
                         [ToolStep(s.span_id, s.name, {k: (v + " (altered)" if isinstance(v, str) else v)
                                                       for k, v in s.arguments.items()}, s.result, s.effects,
                                   s.requested_by) if isinstance(s, ToolStep) else s for s in t.steps])
               for t in traces[:40]]
    record, _ = run_region_gate(contract=Contract.default_for(m["task"]), artifact=Artifact.load(wasm), plan=plan_of(m),
                                train=altered[:30], heldout=altered[30:], candidate={}, generation=0)
    um = next(c for c in record["checks"] if c["name"] == "unmatched-tool-calls")
    rows.append(_row("replay mismatch in the gate (altered recordings)", f"gate {record['verdict']}", record["reason"], 0,
                     record["verdict"] == "refuse" and um["unmatched"] > 0))
    # 10-11. effects: a declined commit, and an artifact that acts before its commit
    effect_tools = [t["name"] for t in m["tools"] if t.get("effects") == "effect"]
    if effect_tools:
        name = effect_tools[0]
        acted = Counted(host[name])
        effect_text = next((s for s in samples if _path_calls(wasm, name, host, field, s)), None)
        if effect_text is not None:
            art = Artifact.load(wasm)
            art.guard = AlwaysDeopt("declined by the hostile case")
            res = _serve(art, {**host, name: acted}, field, effect_text)
            rows.append(_row(f"commit declined before an effect ({name})", res.tier, res.reason, acted.runs,
                             res.tier == "tier-0"))
            early = _commit_last(R.from_json(m["model"]["region"]))
            early_code = compile_region(early)
            art = Artifact.load(emit(early_code, dict(m, model=dict(m["model"], region=R.to_json(early),
                                                                     code_digest=digest_bytes(early_code)))))
            acted2 = Counted(host[name])
            res = _serve(art, {**host, name: acted2}, field, effect_text)
            rows.append(_row(f"artifact calls {name} before its commit", res.tier, res.reason, acted2.runs,
                             res.tier == "tier-0" and "before the guard admitted" in res.reason))
    return rows


def _path_calls(wasm: bytes, tool: str, host: dict[str, Any], field: str, text: str) -> bool:
    """Whether serving ``text`` at tier-1 calls ``tool`` (the sample for the effect cases)."""
    res = _serve(Artifact.load(wasm), host, field, text)
    return res.tier == "tier-1" and any(c["tool"] == tool for c in res.tool_calls or [])


def _commit_last(region: R.Region) -> R.Region:
    """The region with every commit moved to just before its path's answer (after the effects)."""
    def fix(steps: tuple) -> tuple:
        out = []
        commit = None
        for s in steps:
            if isinstance(s, R.Commit):
                commit = s
                continue
            if isinstance(s, R.Branch):
                out.append(R.Branch(s.var, tuple((v, fix(sub)) for v, sub in s.cases)))
                continue
            if isinstance(s, R.Output) and commit is not None:
                out.append(R.Commit(tuple(n for n in commit.names)))
            out.append(s)
        return tuple(out)
    return R.Region(region.field, fix(region.steps))
