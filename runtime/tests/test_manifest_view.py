"""The typed manifest (:class:`auto_runtime.manifest.Manifest`, :mod:`auto_runtime.guard.entries`).

It gives back the manifest it was read from key for key (so an artifact rebuilt from the view has
the same bytes), answers what the ratchet asks (labels, whether the artifact answers inputs never
witnessed, its calibration scores) and renders ``auto inspect``'s lines; the expected lines of the
memo, memo-first, program and specialist fixtures are what ``auto inspect`` printed before it read
the typed view.
"""

from __future__ import annotations

import pytest
import wasmtime

from auto_runtime.guard import GUARD_METHODS
from auto_runtime.guard.entries import (GUARD_ENTRIES, ConformalNoveltyEntry, GuardEntry, ProgramEvidenceEntry,
                                        SelectiveRiskEntry, StackEntry, guard_entry)
from auto_runtime.manifest import Manifest, append_manifest, manifest_payload, read_manifest
from auto_runtime.wasm_sections import parse

from .wasm_fixtures import BASE_MANIFEST, echo_wat

CAL = [0.1, 0.2, 0.3, 0.4, 0.5]
STACK = {
    "task": "triage", "generation": 3, "compiled_as": "memo-first",
    "interface": {"input": {"type": "object", "properties": {"ticket": {"type": "string"}}, "required": ["ticket"]},
                  "output": {"enum": ["billing", "bug", "other"]}},
    "model": {"kind": "memo-first", "estimator": "LogisticRegression", "classes": ["billing", "bug", "other"],
              "features": {"n_min": 1, "n_max": 3, "buckets": 4096}, "table_entries": 40},
    "parity": {"witnessed": {"n": 40, "agree": 40, "rate": 1.0, "ci95_low": 0.9119},
               "heldout": {"method": "5-fold out-of-fold", "n": 40, "agree": 37, "rate": 0.925, "ci95_low": 0.7961}},
    "guard": {"method": "stack", "fallback_reason": None, "statement": "tier-1 iff every component passes",
              "epsilon_refers_to": "disagreement with a fresh reference answer on the specialist's answers",
              "components": [
                  {"method": "conformal-novelty", "alpha": 0.05, "n": 5, "calibration_scores": CAL, "threshold": 0.5,
                   "heldout_coverage": 0.9, "never_deopts": True},
                  {"method": "selective-risk", "procedure": "learn-then-test", "epsilon": 0.05, "delta": 0.1, "n": 40,
                   "confidence_field": "margin", "threshold": 0.4766, "smallest_certifiable_epsilon": 0.0559,
                   "calibration_coverage": 0.93421, "calibration_selective_risk": 0.03378, "heldout_n": 12,
                   "heldout_coverage": 0.75, "heldout_selective_risk": 0.0, "heldout_selective_risk_ci95_high": 0.2831,
                   "notes": ["cross-fit"]}]},
    "fuel_per_call": {"p50": 126000, "p95": 180000},
    "provenance": {"witnesses": 40, "reference_model": "simulated: auto-sim-1"},
    "eval_runs": ["sha256:" + "ab" * 32],
}
PROGRAM = {
    "task": "route", "generation": 1, "compiled_as": "program", "interface": {"input": True, "output": {}},
    "model": {"kind": "program", "field": "request", "size": 9, "program_digest": "sha256:" + "cd" * 32,
              "text": "if contains(request, 'refund'): 'billing'\nelse: 'other'"},
    "parity": {"heldout": {"method": "5-fold out-of-fold", "n": 30, "agree": 30, "rate": 1.0, "ci95_low": 0.8843}},
    "guard": {"method": "program-evidence", "deopt_kinds": [1, 3, 4, 5],
              "parts": [{"name": "", "shape": "rules", "alpha": 0.05, "n": 30, "witnesses": 30,
                         "rules": ["billing", "other"], "specific_levels": ["word"],
                         "events": [{"rule": 0, "kind": 0, "support": 12, "precision": 0.9286},
                                    {"rule": 1, "kind": 2, "support": 18, "precision": 0.95}]}],
              "risk": {"threshold": None, "reason": "30 calibration points cannot certify epsilon 0.05 at delta 0.1"},
              "calibration": {"method": "5-fold out-of-fold", "n": 30, "unwitnessed": 1, "unwitnessed_wrong": 0,
                              "novel": 2, "novel_wrong": 1, "tier1": 27, "tier1_wrong": 0},
              "statement": "nothing is claimed for inputs not exchangeable with the witnesses"},
    "fuel_per_call": {"p50": 900, "p95": 1200}, "provenance": {"witnesses": 30, "reference_model": "recorded"},
    "eval_runs": [],
}
REGION = {
    "task": "inbox", "generation": 2, "compiled_as": "region", "interface": {"input": True, "output": {}},
    "model": {"kind": "region", "field": "ticket", "region_digest": "sha256:" + "ef" * 32,
              "text": "t = call lookup({q: ticket})\ncommit(t)\nreturn t"},
    "tools": [{"name": "lookup", "kind": "tool", "effects": "read", "cost_usd_micros_per_call": 3},
              {"name": "send", "kind": "tool", "effects": "effect"}],
    "tool_budget": {"calls": 2, "wall_ms": 3000.0},
    "guard": {"method": "program", "statement": "tier-1 when every compiled step answers"},
    "fuel_per_call": {"p50": 5446, "p95": 5586}, "provenance": {"witnesses": 12, "reference_model": "unknown"},
    "eval_runs": ["sha256:" + "01" * 32],
}
NOVELTY = {
    "task": "echo", "generation": None, "compiled_as": "specialist", "interface": {"input": True},
    "model": {"kind": "specialist", "fallback": {"kind": "LinearSVC", "classes": ["a", "b"],
                                                  "features": {"n_min": 2, "n_max": 4, "buckets": 1024}}},
    "parity": {"probes": {"hits": 0, "n": 50},
               "repetition": {"consistent": 9, "repeated_inputs": 10, "rate": 0.9, "ci95_low": 0.5550,
                              "specialist_eval_run": "sha256:" + "02" * 32}},
    "guard": {"method": "conformal-novelty", "alpha": 0.1, "n": 5, "calibration_scores": CAL, "threshold": 0.45,
              "coverage_heldout": 0.8889},
}
MEMO = {"task": "kt", "compiled_as": "memo", "interface": {"input": True},
        "model": {"kind": "memo", "entries": 64, "hash": "fnv1a-64"},
        "guard": {"method": "exact-match", "statement": "pass iff the input was witnessed"}}
ALL = {"stack": STACK, "program": PROGRAM, "region": REGION, "novelty": NOVELTY, "memo": MEMO}
GOLDEN = {'memo': ['task       kt  generation None  compiled as memo',
          'model      exact-match table of 64 witnessed inputs (hash fnv1a-64)',
          'guard      exact-match: pass iff the input was witnessed',
          'work       None fuel units per call p50, None p95 (≈ wasm instructions, measured at compile)',
          'provenance None witnesses, reference model None',
          'eval runs  '],
 'novelty': ['task       echo  generation None  compiled as specialist',
             "model      specialist  LinearSVC over 2-4-grams, 1024 buckets  classes ['a', 'b']",
             'parity     probes    0 of 50 never-witnessed probes hit the table',
             'evidence   9 of 10 repeated inputs answered consistently (rate 0.9, 95% CP low 0.555); the '
             'specialist was refused (eval run '
             'sha256:0202020202020202020202020202020202020202020202020202020202020202)',
             'guard      conformal-novelty  alpha 0.1  calibration n 5  threshold 0.45  held-out coverage 0.889',
             'work       None fuel units per call p50, None p95 (≈ wasm instructions, measured at compile)',
             'provenance None witnesses, reference model None',
             'eval runs  '],
 'program': ['task       route  generation 1  compiled as program',
             "model      program over field 'request', 9 nodes (digest "
             'sha256:cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd)',
             "           if contains(request, 'refund'): 'billing'",
             "           else: 'other'",
             'parity     5-fold out-of-fold 30/30 = 1.0 (95% CP low 0.884)',
             "guard      program-evidence: tier-1 iff the program does not deopt, no part's evidence is "
             "unwitnessed (contested, split, split at whole words, split at phrases), and every part's event "
             'passes its novelty test',
             '  part answer (rules)  alpha 0.05  calibration n 30  witnesses 30  specific forms tested: word',
             "     rule 0 -> 'billing': supported 12 (precision 0.929)",
             "     else -> 'other': default without evidence 18 (precision 0.950)",
             '  risk     no threshold: 30 calibration points cannot certify epsilon 0.05 at delta 0.1',
             '  calibration 5-fold out-of-fold: 30 witnesses, 1 with unwitnessed evidence (0 of them wrong), 2 '
             'novel (1 wrong), tier-1 27 (0 wrong)',
             'statement  nothing is claimed for inputs not exchangeable with the witnesses',
             'work       900 fuel units per call p50, 1200 p95 (≈ wasm instructions, measured at compile)',
             'provenance 30 witnesses, reference model recorded',
             'eval runs  '],
 'region': ['task       inbox  generation 2  compiled as region',
            "model      region over field 'ticket' (digest "
            'sha256:efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef)',
            '           t = call lookup({q: ticket})',
            '           commit(t)',
            '           return t',
            'tool       lookup  tool, effects read, 3 µ$ per call (recorded)',
            'tool       send  tool, effects effect',
            'budget     2 tool call(s), 3000.0 ms of tool time per call',
            'guard      program: tier-1 when every compiled step answers',
            'work       5446 fuel units per call p50, 5586 p95 (≈ wasm instructions, measured at compile)',
            'provenance 12 witnesses, reference model unknown',
            'eval runs  sha256:0101010101010101010101010101010101010101010101010101010101010101'],
 'stack': ['task       triage  generation 3  compiled as memo-first',
           'model      memo-first (40 table entries in front)  LogisticRegression over 1-3-grams, 4096 buckets  '
           "classes ['billing', 'bug', 'other']",
           'parity     witnessed 40/40 = 1.0 (95% CP low 0.912)',
           'parity     5-fold out-of-fold 37/40 = 0.925 (95% CP low 0.796)',
           'guard      stack of 2 components; tier-1 iff every component passes',
           '  novelty  alpha 0.05  n 5  threshold (max passing score) 0.5  held-out coverage 0.9  (never deopts: '
           'n too small for alpha)',
           '  risk     learn-then-test  epsilon 0.05  delta 0.1  n 40  threshold margin >= 0.4766  smallest '
           'certifiable epsilon 0.0559',
           '           calibration: coverage 0.934  selective risk 0.034',
           '           held-out (12 inputs, whole stack): coverage 0.75  selective risk 0.0 (95% CP high 0.283)',
           '           note: cross-fit',
           "epsilon    disagreement with a fresh reference answer on the specialist's answers",
           'work       126000 fuel units per call p50, 180000 p95 (≈ wasm instructions, measured at compile)',
           'provenance 40 witnesses, reference model simulated: auto-sim-1',
           'eval runs  sha256:abababababababababababababababababababababababababababababababab']}


def _artifact(m: dict) -> tuple[bytes, bytes]:
    code = bytes(wasmtime.wat2wasm(echo_wat()))
    full = {"format": "auto.artifact/1", "abi": BASE_MANIFEST["abi"], "capabilities": [], **m}
    return code, append_manifest(code, full)


@pytest.mark.parametrize("name", sorted(ALL))
def test_the_view_gives_back_the_manifest_and_the_same_bytes(name):
    code, wasm = _artifact(ALL[name])
    view = Manifest.read(wasm)
    assert view.to_dict() == read_manifest(wasm)
    assert append_manifest(code, view.to_dict()) == wasm  # artifact bytes unchanged through the view
    assert view.guard.to_dict() == ALL[name]["guard"]
    assert manifest_payload(parse(wasm))  # one section


@pytest.mark.parametrize("name", sorted(ALL))
def test_inspect_lines_are_what_inspect_printed(name):
    view = Manifest.of(ALL[name])
    assert [view.summary_line(), *view.inspect_lines()] == GOLDEN[name]


def test_typed_fields_and_the_ratchet_s_questions():
    stack = Manifest.of(STACK)
    assert stack.task == "triage" and stack.generation == 3 and stack.compiled_as == "memo-first"
    assert stack.labels == ("billing", "bug", "other") and stack.eval_runs == ("sha256:" + "ab" * 32,)
    assert isinstance(stack.guard, StackEntry)
    assert [type(c) for c in stack.guard.components] == [ConformalNoveltyEntry, SelectiveRiskEntry]
    assert stack.answers_new_inputs and stack.calibration_scores == CAL
    # a stack whose risk component certified no threshold, or that falls back, answers only the table
    no_threshold = {**STACK, "guard": {**STACK["guard"], "components": [
        STACK["guard"]["components"][0], {**STACK["guard"]["components"][1], "threshold": None}]}}
    assert not Manifest.of(no_threshold).answers_new_inputs
    assert not Manifest.of({**STACK, "guard": {**STACK["guard"], "fallback_reason": "too few"}}).answers_new_inputs
    assert Manifest.of(PROGRAM).answers_new_inputs and Manifest.of(REGION).answers_new_inputs
    assert not Manifest.of(MEMO).answers_new_inputs and Manifest.of(MEMO).calibration_scores is None
    assert Manifest.of(NOVELTY).calibration_scores == CAL and not Manifest.of(NOVELTY).answers_new_inputs
    assert isinstance(Manifest.of(PROGRAM).guard, ProgramEvidenceEntry) and Manifest.of(PROGRAM).labels == ()
    region = Manifest.of(REGION)
    assert [(t.name, t.effects, t.cost_usd_micros_per_call) for t in region.tools] == [
        ("lookup", "read", 3), ("send", "effect", None)]
    assert stack.model == STACK["model"] and stack.parity == STACK["parity"]
    assert stack.fuel_per_call == STACK.get("fuel_per_call") and Manifest.of(MEMO).parity is None
    assert region.tool_budget == REGION["tool_budget"] and stack.tool_budget is None
    assert Manifest.of({**REGION, "cost_usd_micros_per_call": 12}).cost_usd_micros_per_call == 12


@pytest.mark.parametrize("entry", [None, 3, "x", {}, {"method": 7}, {"method": "no-such-method", "statement": "s"},
                                   {"method": "stack", "components": "nope"},
                                   {"method": "conformal-novelty", "calibration_scores": [1, "x"]}])
def test_reading_an_unusable_entry_never_raises_and_certifies_nothing(entry):
    g = guard_entry(entry)
    assert isinstance(g, GuardEntry) and not g.certifies_unwitnessed and g.calibration_scores is None
    assert isinstance(g.lines(), list)


def test_every_guard_method_the_runtime_evaluates_is_read_by_a_type_or_the_plain_entry():
    """A guard method added to the evaluators must be given an entry type here, or be one whose
    plain reading (no calibration scores, certifies nothing) is right."""
    plain = {"exact-match", "program", "none"}
    assert set(GUARD_METHODS) == set(GUARD_ENTRIES) | plain


def test_a_loaded_artifact_answers_through_its_typed_manifest():
    from auto_runtime import Artifact

    _code, wasm = _artifact(STACK)
    art = Artifact.load(wasm)
    view = art.typed_manifest
    assert isinstance(view, Manifest) and view is art.typed_manifest  # built once
    assert view.to_dict() == art.manifest and view.compiled_as == "memo-first"
    assert isinstance(view.guard, StackEntry) and view.calibration_scores == CAL
