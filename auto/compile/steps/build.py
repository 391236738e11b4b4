"""From recorded runs to a region: which value comes from where, compiled step by step.

A run's observable behaviour is the sequence of tool calls it makes (which tool, with which
arguments) and the answer it returns; its model calls are how it computed them. The builder
reproduces that behaviour (:func:`build_region`):

1. **Paths.** Runs are grouped by the tools they call, in order. Where runs diverge (a different
   tool, or none, at the same position), the tool to call is itself a value to compile, and the
   region branches on it (:class:`~auto.models.region.Branch`); a branch with too few runs to compile is
   left out (its inputs deopt).
2. **Values.** Every argument of every tool call, the branch value and every field of the answer
   is *resolved*, in this order: a constant (the same in every run); a value the region already
   has (the task input, an earlier compiled value, an argument, a field of an earlier tool
   result; equal in every run); a value compiled from the task input by the ladder's own rungs
   (``compile_value``: program, then memo; each with its gate and eval run) — unless the value is
   generative (the runs that repeat an input disagree on it more often than
   :data:`GENERATIVE_BELOW` allows); and last, for the answer only, a model call kept as a
   declared capability (``kind: "model"``) whose content, as is or ASCII-stripped, is the value in
   every run. A text of the answer first tries a template over the region's scalar values (a
   tool's result included), each as its text and, for a text, as its JSON encoding: what the model
   saw when the agent sent ``json.dumps(result)`` back (:mod:`auto.compile.steps.template`), before
   the ladder: an answer that quotes what a tool said must follow the tool (a value compiled from the task input is checked against the recorded
   runs only, and would not follow a tool whose data changed). A value none of these reproduces
   refuses the region, naming it.
3. **Decide first, then act.** Per path, every step that can deopt moves before the first
   effectful or paid call (if it depends on one, the region is refused), a
   :class:`~auto.models.region.Commit` of the decided values goes there (or before the answer), and no
   branch may follow it; every commit also names its path and the input (:func:`mark_paths`), what
   the region's novelty guard decides on.

The result (:class:`RegionPlan`) carries the region, the tool declarations for the manifest, and
what each value was compiled as.
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from auto_runtime.guard.region import PATH_KEY

from auto.models import region as R
from auto.canonical import canonical_json
from auto.compile.steps.schemas import declared_schema, recorded_schema
from auto.compile.steps.template import synthesize_template
from auto.compile.steps.traces import ModelStep, TaskTrace
from auto.models.program import ast as A
from auto.models.program.interp import ascii_strip

GENERATIVE_BELOW = 0.8
"""A value whose repeated inputs got the same value less often than this is generative: it is
not given to the ladder (a program or table of it would repeat one sample of open-ended text)."""

MIN_BRANCH_RUNS = 8
"""A branch seen in fewer runs than this is left out of the region (its inputs deopt)."""

NO_TOOL = ""
"""The branch value of runs that call no further tool."""

MODEL_RESULT = {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"],
                "additionalProperties": True}
"""The result schema of a model call kept as a capability: ``{"content": <text>}``."""


class RegionRefused(Exception):
    """The runs cannot be compiled as a region; ``reason`` names the step or value at fault."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class ValueCompile:
    """What ``compile_value`` made of one value: the Bind's ``program`` (reading the task input
    field) or None, ``compiled_as`` (``program`` / ``memo`` / ``refused``), the gate's ``reason``,
    and the stored eval run / artifact of the step."""

    program: A.Node | None
    compiled_as: str
    reason: str
    eval_run_id: str | None = None
    artifact_id: str | None = None


CompileValue = Callable[[str, list[tuple[dict[str, Any], Any]]], ValueCompile]
"""``compile_value(label, [(input object, value), ...]) -> ValueCompile``."""


@dataclass
class ValueReport:
    """How one value of the region was obtained (``how``: const, reuse, get, program, memo,
    template, model), with the step's gate figures where it has one."""

    label: str
    name: str
    how: str
    detail: str = ""
    eval_run_id: str | None = None
    share: float | None = None


@dataclass
class ModelCapability:
    """A model call kept as a declared capability: the tool ``name``, the model step's ``site``,
    the argument keys, its recorded cost per call (µ$, mean; None if unknown)."""

    name: str
    site: str
    arg_keys: tuple[str, ...]
    field: str
    tool_positions: tuple[int, ...]
    cost_usd_micros: float | None
    request_template: Any
    request_model: str | None
    temperature: Any

    @classmethod
    def from_declaration(cls, decl: dict[str, Any], field_name: str) -> "ModelCapability":
        """The capability a manifest's ``tools`` entry (``kind: "model"``) declares."""
        keys = tuple(sorted((decl.get("arguments") or {}).get("properties") or {}))
        positions = tuple(sorted(int(k.split("_", 1)[1]) for k in keys if k.startswith("result_")))
        req = decl.get("request") or {}
        return cls(decl["name"], decl.get("site", ""), keys, field_name, positions, decl.get("cost_usd_micros_per_call"),
                   req.get("messages"), req.get("model"), req.get("temperature"))

    def arguments(self, trace: TaskTrace) -> dict[str, Any]:
        """The capability's arguments in ``trace`` (the task input and the earlier tool calls)."""
        args: dict[str, Any] = {self.field: trace.input[self.field]}
        for j in self.tool_positions:
            if j < len(trace.tools):
                args[f"tool_{j}"] = trace.tools[j].name
                args[f"result_{j}"] = trace.tools[j].result
        return args

    def recording(self, trace: TaskTrace) -> dict[str, Any] | None:
        """The replay recording of this capability in ``trace`` (None when it has no such call)."""
        step = next((s for s in trace.models if s.site == self.site and s.content is not None), None)
        if step is None:
            return None
        return {"tool": self.name, "arguments": self.arguments(trace), "result": {"content": step.content}}


@dataclass
class RegionPlan:
    """A built region and what the manifest and the gate need about it."""

    region: R.Region
    tools: list[dict[str, Any]]
    values: list[ValueReport]
    models: list[ModelCapability]
    compiled_sites: list[str]
    notes: list[str] = field(default_factory=list)

    def recordings(self, trace: TaskTrace) -> list[dict[str, Any]]:
        """Every tool call of ``trace`` (and its kept model calls) as replay recordings."""
        out = [{"tool": t.name, "arguments": t.arguments, "result": t.result} for t in trace.tools]
        for m in self.models:
            r = m.recording(trace)
            if r is not None:
                out.append(r)
        return out


@dataclass
class _Avail:
    name: str | None
    kind: str
    values: dict[str, Any]
    pending: tuple[str, str] | None = None


_PREFER = {"value": 0, "field": 1, "arg": 2, "input": 3, "result": 4, "const": 5}


@dataclass
class _Path:
    steps: list[Any] = field(default_factory=list)
    avail: list[_Avail] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    calls_at: dict[int, tuple[str, str | None, str]] = field(default_factory=dict)
    """tool position -> (result value, the branch value naming the tool or None, the tool name)"""

    def fork(self) -> "_Path":
        return _Path([], copy.deepcopy(self.avail), set(self.names), dict(self.calls_at))


def _key(v: Any) -> str:
    return canonical_json(v)


def _is_text_scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool)) and not (isinstance(v, float) and v != v)


class _Builder:
    def __init__(self, task: str, field_name: str, compile_value: CompileValue, min_share: float,
                 say: Callable[[str], None]) -> None:
        self.task = task
        self.field = field_name
        self.compile_value = compile_value
        self.min_share = min_share
        self.say = say
        self.values: list[ValueReport] = []
        self.decls: dict[str, dict[str, Any]] = {}
        self.models: dict[str, ModelCapability] = {}
        self.notes: list[str] = []
        self.compiled_sites: set[str] = set()
        self.counter = 0
        self.last_reason = ""

    # ------------------------------------------------------------------ names

    def fresh(self, stem: str) -> str:
        self.counter += 1
        clean = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)[:40]
        return f"{clean}_{self.counter}"

    def emit_pending(self, path: _Path, a: _Avail) -> str:
        if a.name is None:
            var, key = a.pending  # type: ignore[misc]
            a.name = self.fresh(key)
            path.steps.append(R.Get(a.name, var, key))
            path.names.add(a.name)
        return a.name

    # ------------------------------------------------------------------ values

    def resolve(self, path: _Path, label: str, values: dict[str, Any], traces: list[TaskTrace], *,
                answer: bool) -> str | None:
        vals = [values[t.trace_id] for t in traces]
        keys = [_key(v) for v in vals]
        if len(set(keys)) == 1:
            name = self.fresh(label)
            path.steps.append(R.Const(name, vals[0]))
            path.names.add(name)
            path.avail.append(_Avail(name, "const", dict(values)))
            self.values.append(ValueReport(label, name, "const", f"always {keys[0][:80]}"))
            return name
        for a in sorted(path.avail, key=lambda a: _PREFER.get(a.kind, 9)):
            if all(t.trace_id in a.values and _key(a.values[t.trace_id]) == k for t, k in zip(traces, keys)):
                name = self.emit_pending(path, a)
                self.values.append(ValueReport(label, name, "get" if a.kind == "field" else "reuse",
                                               f"equals {a.kind} {name} in every run"))
                return name
        why: list[str] = []
        texts = answer and all(isinstance(v, str) for v in vals)
        if texts:  # an answer built from what the tools said follows the tools; try that first
            name = self.template(path, label, values, traces, why)
            if name is not None:
                return name
        generative = self.generative(traces, keys)
        if generative is not None:
            why.append(f"generative ({generative})")
        else:
            pairs = [({self.field: t.input[self.field]}, v) for t, v in zip(traces, vals)]
            vc = self.compile_value(label, pairs)
            if vc.program is not None:
                name = self.fresh(label)
                path.steps.append(R.Bind(name, self.field, vc.program, note=vc.compiled_as))
                path.names.add(name)
                path.avail.append(_Avail(name, "value", dict(values)))
                self.values.append(ValueReport(label, name, vc.compiled_as, vc.reason, vc.eval_run_id))
                return name
            why.append(f"{vc.compiled_as}: {vc.reason}")
        if texts:
            name = self.model(path, label, values, traces, why)
            if name is not None:
                return name
        self.last_reason = "; ".join(why) or "no source"
        return None

    def generative(self, traces: list[TaskTrace], keys: list[str]) -> str | None:
        by_input: dict[str, set[str]] = defaultdict(set)
        seen: Counter = Counter()
        for t, k in zip(traces, keys):
            i = _key(t.input.get(self.field))
            by_input[i].add(k)
            seen[i] += 1
        repeated = [i for i in seen if seen[i] >= 2]
        if not repeated:
            return None
        same = sum(1 for i in repeated if len(by_input[i]) == 1)
        share = same / len(repeated)
        if share < GENERATIVE_BELOW:
            return f"{same} of {len(repeated)} repeated inputs got the same value ({share:.0%})"
        return None

    def template(self, path: _Path, label: str, values: dict[str, Any], traces: list[TaskTrace],
                 why: list[str]) -> str | None:
        # every scalar value the region has, a tool's result included (a tool that returns a text or
        # a number), each as its text and, for a text, as its JSON encoding too: an agent that sends
        # json.dumps(result) back shows the model "processing" with its quotes, and the answer
        # quotes what the model saw (the longest occurrence is cut first, so the quoted form wins)
        cands = [a for a in path.avail
                 if all(t.trace_id in a.values and _is_text_scalar(a.values[t.trace_id]) for t in traces)]
        order = sorted(cands, key=lambda a: _PREFER.get(a.kind, 9))
        renders: list[tuple[str, str, _Avail]] = []  # (slot name, part kind, value)
        for i, a in enumerate(order):
            renders.append((f"s{i}", "var", a))
            if any(isinstance(a.values[t.trace_id], str) for t in traces):
                renders.append((f"j{i}", "json", a))
        slot_names = [r[0] for r in renders]
        slots = [{n: R.render_part(kind, a.values[t.trace_id]) for n, kind, a in renders} for t in traces]
        targets = [values[t.trace_id] for t in traces]
        # one example per distinct input: each of its modal values (a tie keeps every tied value)
        by_input: dict[str, list[int]] = defaultdict(list)
        for i, t in enumerate(traces):
            by_input[_key(t.input.get(self.field))].append(i)
        groups = []
        for members in by_input.values():
            counts = Counter(targets[i] for i in members)
            top = max(counts.values())
            groups.append([next(i for i in members if targets[i] == v) for v, n in counts.items() if n == top])
        parts, share = synthesize_template([targets[g[0]] for g in groups], [slots[g[0]] for g in groups],
                                           alternatives=[[(targets[i], slots[i]) for i in g] for g in groups])
        if parts is None or share < self.min_share:
            why.append("template: " + ("none found" if parts is None else
                                       f"reproduces {share:.1%} of inputs (needs {self.min_share:.0%})"))
            return None
        mapped = []
        for kind, p in parts:
            if kind == "text":
                mapped.append(("text", p))
            else:
                _n, part_kind, a = renders[slot_names.index(p)]
                mapped.append((part_kind, self.emit_pending(path, a)))
        name = self.fresh(label)
        path.steps.append(R.Concat(name, tuple(mapped)))
        path.names.add(name)
        path.avail.append(_Avail(name, "value", dict(values)))
        self.values.append(ValueReport(label, name, "template", f"reproduces {share:.1%} of the training inputs",
                                       share=share))
        return name

    def model(self, path: _Path, label: str, values: dict[str, Any], traces: list[TaskTrace],
              why: list[str]) -> str | None:
        sites = Counter(s.site for t in traces for s in t.models if s.content is not None)
        for site, _n in sites.most_common():
            steps: list[ModelStep | None] = [next((s for s in t.models if s.site == site and s.content is not None), None)
                                             for t in traces]
            if any(s is None for s in steps):
                continue
            targets = [values[t.trace_id] for t in traces]
            if all(s.content == v for s, v in zip(steps, targets)):  # type: ignore[union-attr]
                glue = None
            elif all(ascii_strip(s.content) == v for s, v in zip(steps, targets)):  # type: ignore[union-attr, arg-type]
                glue = "strip"
            else:
                continue
            first = steps[0]
            assert first is not None
            t0 = traces[0]
            sent = sum(1 for m in (first.request.get("messages") or []) if isinstance(m, dict) and m.get("role") == "tool")
            before = [j for j, tool in enumerate(t0.tools) if t0.steps.index(tool) < t0.steps.index(first)][-sent:] \
                if sent else []
            cap_name = f"model:{self.task}.{label}"
            if cap_name in self.models and self.models[cap_name].site != site:
                cap_name = f"{cap_name}.{len(self.models) + 1}"
            costs = [s.cost_usd_micros for s in steps if s is not None and s.cost_usd_micros is not None]
            cap = ModelCapability(cap_name, site, (self.field, *[f"{k}_{j}" for j in before for k in ("result", "tool")]),
                                  self.field, tuple(before), sum(costs) / len(costs) if costs and len(costs) == len(steps) else None,
                                  first.template, first.request.get("model"), first.request.get("temperature"))
            args: list[tuple[str, str]] = [(self.field, self.field)]
            if all(j in path.calls_at for j in before):
                for j in before:
                    rvar, tvar, tool = path.calls_at[j]
                    if tvar is None:
                        tvar = self.fresh(f"tool{j + 1}_name")
                        path.steps.append(R.Const(tvar, tool))
                        path.names.add(tvar)
                        path.calls_at[j] = (rvar, tvar, tool)
                    args += [(f"result_{j}", rvar), (f"tool_{j}", tvar)]
                self.models[cap_name] = cap
                self.decls[cap_name] = {
                    "name": cap_name, "kind": "model", "effects": "read", "site": site,
                    "arguments": {"type": "object", "properties": {
                        k: {"type": "object" if k.startswith("result_") else "string"} for k, _ in args},
                        "required": sorted(k for k, _ in args), "additionalProperties": False},
                    "result": MODEL_RESULT, "request": {"model": cap.request_model, "temperature": cap.temperature,
                                                        "messages": cap.request_template},
                    "cost_usd_micros_per_call": None if cap.cost_usd_micros is None else round(cap.cost_usd_micros, 3)}
                call = self.fresh(f"model_{label}")
                path.steps.append(R.Call(call, cap_name, tuple(sorted(args))))
                content = self.fresh(f"{label}_content")
                path.steps.append(R.Get(content, call, "content"))
                name = content
                if glue == "strip":
                    name = self.fresh(label)
                    path.steps.append(R.Bind(name, content, A.Strip(A.Field(content)), note="glue"))
                path.names |= {call, content, name}
                path.avail.append(_Avail(name, "value", dict(values)))
                self.values.append(ValueReport(label, name, "model", f"kept as the declared model call {cap_name} "
                                               f"(site {site}){'; glue: strip' if glue else ''}"))
                return name
        why.append("model: no model call's content is the value in every run")
        return None

    # ------------------------------------------------------------------ paths

    def node(self, traces: list[TaskTrace], depth: int, path: _Path) -> None:
        nexts = {t.trace_id: (t.tools[depth].name if len(t.tools) > depth else NO_TOOL) for t in traces}
        distinct = sorted(set(nexts.values()))
        if len(distinct) == 1:
            self.continue_with(traces, depth, path, distinct[0])
            return
        label = f"tool{depth + 1}"
        var = self.resolve(path, label, nexts, traces, answer=False)
        if var is None:
            raise RegionRefused(f"which tool the run calls at position {depth + 1} "
                                f"({', '.join(n or '(none)' for n in distinct)}) could not be compiled: {self.last_reason}")
        cases = []
        for name in distinct:
            sub = [t for t in traces if nexts[t.trace_id] == name]
            if len(sub) < MIN_BRANCH_RUNS:
                self.notes.append(f"branch {name or '(no tool)'} at position {depth + 1}: only {len(sub)} runs; left out "
                                  "(its inputs deopt)")
                continue
            fork = path.fork()
            try:
                self.continue_with(sub, depth, fork, name, tool_var=var)
            except RegionRefused as e:
                self.notes.append(f"branch {name or '(no tool)'} at position {depth + 1} left out (its inputs deopt): {e.reason}")
                continue
            cases.append((name, tuple(fork.steps)))
        if not cases:
            raise RegionRefused(f"no branch at position {depth + 1} could be compiled: " + "; ".join(self.notes[-len(distinct):]))
        path.steps.append(R.Branch(var, tuple(cases)))

    def continue_with(self, traces: list[TaskTrace], depth: int, path: _Path, name: str,
                      tool_var: str | None = None) -> None:
        if name == NO_TOOL:
            self.output(traces, path)
            return
        calls = {t.trace_id: t.tools[depth] for t in traces}
        keysets = {tuple(sorted(c.arguments)) for c in calls.values()}
        if len(keysets) != 1:
            raise RegionRefused(f"tool {name} (position {depth + 1}) is called with different argument keys: "
                                f"{sorted(keysets)}")
        effects = {c.effects for c in calls.values()}
        if len(effects) != 1:
            raise RegionRefused(f"tool {name} is recorded both as read and as effect")
        args = []
        for k in keysets.pop():
            var = self.resolve(path, f"{name}.{k}", {tid: c.arguments[k] for tid, c in calls.items()}, traces, answer=False)
            if var is None:
                raise RegionRefused(f"argument {k!r} of tool {name} (position {depth + 1}) could not be compiled: "
                                    f"{self.last_reason}")
            args.append((k, var))
        rvar = self.fresh(f"r{depth}_{name}")
        path.steps.append(R.Call(rvar, name, tuple(sorted(args))))
        path.names.add(rvar)
        results = {tid: c.result for tid, c in calls.items()}
        path.avail.append(_Avail(rvar, "result", results))
        path.calls_at[depth] = (rvar, tool_var, name)
        if all(isinstance(r, dict) for r in results.values()):
            common = set.intersection(*(set(r) for r in results.values()))
            for key in sorted(common):
                path.avail.append(_Avail(None, "field", {tid: r[key] for tid, r in results.items()}, (rvar, key)))
        self.declare(name, effects.pop(), traces, depth)
        self.node(traces, depth + 1, path)

    def declare(self, name: str, effects: str, traces: list[TaskTrace], depth: int) -> None:
        calls = [t.tools[depth] for t in traces]
        d = self.decls.setdefault(name, {"name": name, "kind": "tool", "effects": effects, "_args": [], "_results": [],
                                         "_declared": None})
        if d.get("kind") == "tool" and d["effects"] != effects:
            raise RegionRefused(f"tool {name} is recorded both as read and as effect")
        d["_args"] += [c.arguments for c in calls]
        d["_results"] += [c.result for c in calls]
        if d["_declared"] is None:
            for t, c in zip(traces, calls):
                asked = t.model_by_span(c.requested_by)
                if asked is not None:
                    d["_declared"] = declared_schema(asked.request, name)
                    break

    def output(self, traces: list[TaskTrace], path: _Path) -> None:
        outs = {t.trace_id: t.output for t in traces}
        keysets = {tuple(sorted(o)) if isinstance(o, dict) else None for o in outs.values()}
        if len(keysets) == 1 and (ks := keysets.pop()) and ks:
            pairs = []
            for k in ks:
                var = self.resolve(path, k, {tid: o[k] for tid, o in outs.items()}, traces, answer=True)
                if var is None:
                    raise RegionRefused(f"answer field {k!r} could not be compiled: {self.last_reason}")
                pairs.append((k, var))
            path.steps.append(R.Output(tuple(pairs)))
            return
        var = self.resolve(path, "answer", outs, traces, answer=True)
        if var is None:
            raise RegionRefused(f"the answer could not be compiled: {self.last_reason}")
        path.steps.append(R.Output(var))

    # ------------------------------------------------------------------ decide first, then act

    def after_commit(self, step: Any) -> bool:
        if not isinstance(step, R.Call):
            return False
        d = self.decls.get(step.tool) or {}
        return d.get("effects") == "effect" or d.get("kind") == "model"

    def place_commits(self, steps: tuple, bound: set[str], where: str = "the region") -> tuple:
        steps = list(steps)
        last = steps[-1]
        ac = next((i for i, s in enumerate(steps) if self.after_commit(s)), None)
        if ac is None:
            if isinstance(last, R.Branch):
                names = bound | _bound(steps[:-1])
                cases = tuple((v, self.place_commits(sub, names, f"branch {v or '(no tool)'}")) for v, sub in last.cases)
                return tuple(steps[:-1]) + (R.Branch(last.var, cases),)
            names = bound | _bound(steps[:-1])
            return tuple(steps[:-1]) + (R.Commit(tuple(sorted(names))), last)
        pre, rest = steps[:ac], steps[ac:]
        pre_vars = bound | _bound(pre) | {self.field}
        moved = True
        while moved:
            moved = False
            for s in list(rest):
                if isinstance(s, R.Bind) and _can_deopt(s):
                    deps = _reads(s)
                    if deps <= pre_vars:
                        rest.remove(s)
                        pre.append(s)
                        pre_vars.add(s.name)
                        moved = True
                    else:
                        movable = [x for x in rest if getattr(x, "name", None) in deps and isinstance(x, (R.Const, R.Get))
                                   and _reads(x) <= pre_vars]
                        for x in movable:
                            rest.remove(x)
                            pre.append(x)
                            pre_vars.add(x.name)
                            moved = True
        for s in rest:
            if isinstance(s, R.Bind) and _can_deopt(s):
                raise RegionRefused(f"value {s.name} in {where} is a decision that depends on an effectful or paid call; "
                                    "it cannot be decided before the call acts")
            if isinstance(s, R.Branch):
                raise RegionRefused(f"{where} branches after an effectful or paid call (a branch can deopt after acting)")
        names = (bound | _bound(pre)) - {self.field}
        return tuple(pre) + (R.Commit(tuple(sorted(names))),) + tuple(rest)

    def build(self, traces: list[TaskTrace]) -> RegionPlan:
        path = _Path()
        path.avail.append(_Avail(self.field, "input", {t.trace_id: t.input[self.field] for t in traces}))
        self.node(traces, 0, path)
        region = mark_paths(R.Region(self.field, self.place_commits(tuple(path.steps), set())))
        for p in region.paths():
            commits = [i for i, s in enumerate(p) if isinstance(s, R.Commit)]
            acs = [i for i, s in enumerate(p) if self.after_commit(s)]
            assert len(commits) == 1 and all(i > commits[0] for i in acs), "decide first, then act"
        tools = []
        for name in region.tool_names():
            d = self.decls[name]
            if d["kind"] == "model":
                tools.append({k: v for k, v in d.items() if not k.startswith("_")})
                continue
            args = d["_declared"] or recorded_schema(d["_args"], closed=True)
            tools.append({"name": name, "kind": "tool", "effects": d["effects"], "arguments": args,
                          "arguments_source": "declared to the model" if d["_declared"] else "recorded",
                          "result": recorded_schema(d["_results"], closed=False)})
        kept = {m.site for m in self.models.values()}
        for t in traces:
            self.compiled_sites |= {s.site for s in t.models if s.site not in kept}
        return RegionPlan(region, tools, self.values, list(self.models.values()), sorted(self.compiled_sites), self.notes)


def mark_paths(region: R.Region) -> R.Region:
    """``region`` with every commit naming its path and the input: a ``Const`` of the path's index
    (:data:`auto_runtime.guard.region.PATH_KEY`, in :meth:`~auto.models.region.Region.paths`
    order) before each :class:`~auto.models.region.Commit`, whose names gain that key and the input
    field, so the guard at the commit sees which path the call took and on what text
    (:class:`auto_runtime.guard.region.RegionNovelty`)."""
    n = 0

    def walk(steps: tuple) -> tuple:
        nonlocal n
        out: list[Any] = []
        for s in steps:
            if isinstance(s, R.Branch):
                out.append(R.Branch(s.var, tuple((v, walk(sub)) for v, sub in s.cases)))
            elif isinstance(s, R.Commit):
                out.append(R.Const(PATH_KEY, n))
                out.append(R.Commit(tuple(sorted(set(s.names) | {PATH_KEY, region.field}))))
                n += 1
            else:
                out.append(s)
        return tuple(out)

    return R.Region(region.field, walk(region.steps))


def _bound(steps: Sequence[Any]) -> set[str]:
    return {s.name for s in steps if isinstance(s, (R.Bind, R.Const, R.Get, R.Concat))}


def _reads(s: Any) -> set[str]:
    if isinstance(s, R.Bind):
        return {s.var}
    if isinstance(s, R.Get):
        return {s.var}
    if isinstance(s, R.Call):
        return {s.args} if isinstance(s.args, str) else {v for _k, v in s.args}
    if isinstance(s, R.Concat):
        return {p for k, p in s.parts if k != "text"}
    return set()


def _can_deopt(s: R.Bind) -> bool:
    return any(isinstance(n, A.Deopt) for n in A.walk(s.program))


def build_region(task: str, field_name: str, traces: list[TaskTrace], compile_value: CompileValue, *,
                 min_share: float, say: Callable[[str], None] | None = None) -> RegionPlan:
    """Build the region reproducing ``traces`` (see the module docstring).

    Args:
        task: the task name (names kept model calls ``model:<task>.<value>``).
        field_name: the task input's one text field.
        traces: the training runs.
        compile_value: the ladder's rungs over one value (:data:`CompileValue`).
        min_share: the share of training inputs a template must reproduce.
        say: progress callback.

    Raises:
        RegionRefused: a value, branch or ordering the region cannot reproduce (named).
    """
    b = _Builder(task, field_name, compile_value, min_share, say or (lambda _m: None))
    return b.build(traces)


def plan_summary(plan: RegionPlan) -> dict[str, Any]:
    """JSON-able summary of a plan: values (how each was obtained), tools, kept model calls."""
    return {"values": [{"label": v.label, "name": v.name, "how": v.how, "detail": v.detail,
                        "eval_run_id": v.eval_run_id} for v in plan.values],
            "tools": [{"name": t["name"], "kind": t["kind"], "effects": t["effects"]} for t in plan.tools],
            "kept_model_calls": [{"name": m.name, "site": m.site, "cost_usd_micros": m.cost_usd_micros}
                                 for m in plan.models],
            "compiled_sites": plan.compiled_sites, "notes": plan.notes}


__all__ = ["CompileValue", "GENERATIVE_BELOW", "MIN_BRANCH_RUNS", "ModelCapability", "RegionPlan", "RegionRefused",
           "ValueCompile", "ValueReport", "build_region", "mark_paths", "plan_summary"]
