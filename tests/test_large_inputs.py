"""Hostile and large inputs through a real compiled artifact: an answer or a clean deopt, never a hang."""

from __future__ import annotations

import time

from auto_runtime import Artifact, TieredTask
from auto_runtime.sandbox import BUDGET_BYTES, budget_units


def test_budget_scales_with_input_size():
    assert budget_units(10) == 1 and budget_units(BUDGET_BYTES) == 1
    assert budget_units(BUDGET_BYTES + 1) == 2 and budget_units(1_000_000) == 4
    assert budget_units(10, items=64) == 64


def test_large_and_hostile_inputs(triage_artifact):
    path, outcome = triage_artifact
    art = Artifact.load(path)
    tt = TieredTask(art, reference=lambda inp: "REFERENCE")
    one_mb = ("My invoice is wrong and I was charged twice. " * 30000)[:1_000_000]
    t0 = time.perf_counter()
    r = tt({"ticket": one_mb})
    assert time.perf_counter() - t0 < 5
    assert r.reason.startswith(("guard-pass", "novelty")), r.reason  # ran to completion: no limit hit
    r = tt({"ticket": "é" * 1_100_000})  # over the artifact's 1 MiB input bound
    assert r.tier == "tier-0" and "too_large" in r.reason
    for text in ["(a+)+$" * 2000 + "!", "\x00\x01\ud7ff", "", " ", "😀" * 5000, "a" * 100_000]:
        r = tt({"ticket": text})
        assert r.tier in ("tier-0", "tier-1") and (r.answer == "REFERENCE" or r.answer in outcome.manifest["interface"]["output"]["enum"])
    # wrong field type / missing field / extra field: deopt with the schema's reason
    for bad in ({"ticket": None}, {}, {"ticket": "x", "extra": 1}):
        r = tt(bad)
        assert r.tier == "tier-0" and r.reason.startswith("input-schema"), r.reason
