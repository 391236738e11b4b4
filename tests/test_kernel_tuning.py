"""F7 kernel-tuning family: CPU-side tests (no GPU; torch/triton-only parts are skipped).

Covers the workload corpus, the exact legality rules (numbers from kernel-tuning.md §2), the
heuristic advisor's determinism and schema, the LLM hook's discard rules, the decision-record
schema (and the recorded traces in traces/kernel-tuning when present) and the replay census.
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter

import pytest

from bench.kernel_tuning import advisor as A
from bench.kernel_tuning import legality as L
from bench.kernel_tuning import record as R
from bench.kernel_tuning.workloads import (
    DECODE_M,
    PREFILL_M,
    Workload,
    holdout_workloads,
    seen_workloads,
    seen_workloads_raw,
)

TRACES = os.path.join(os.path.dirname(__file__), "..", "traces", "kernel-tuning")


# --------------------------------------------------------------------------- workloads


def test_seen_corpus_counts():
    raw = seen_workloads_raw()
    seen = seen_workloads()
    ops = Counter(w.op for w in seen)
    assert len(seen) >= 150
    assert ops["gemm"] == 112  # 3 models × 5 sites × 8 M = 120, minus 8 shared o_proj 2048×2048
    assert sum(1 for w in raw if w.op == "gemm") == 120
    assert ops["softmax"] == 8 and ops["swiglu"] == 24 and ops["rmsnorm"] == 32
    assert len({w.key for w in seen}) == len(seen)
    shared = [w for w in seen if w.op == "gemm" and w.n == 2048 and w.k == 2048]
    assert all("Llama-3.2-1B/o_proj" in w.also for w in shared)
    assert {w.m for w in seen if w.op == "gemm"} == set(DECODE_M + PREFILL_M)


def test_holdout_is_novel():
    seen = {w.key for w in seen_workloads()}
    ho = holdout_workloads()
    assert 55 <= len(ho) <= 65
    assert not seen & {w.key for w in ho}
    assert {w.model for w in ho} >= {"Qwen3-0.6B", "Qwen3-8B"}
    assert {3, 16, 1024} <= {w.m for w in ho}


def test_workload_fields_and_roundtrip():
    for w in seen_workloads() + holdout_workloads():
        d = w.to_json()
        for f in ("op", "m", "n", "k", "dtype", "model", "site", "phase", "key"):
            assert f in d
        assert Workload.from_json(d) == w
        assert w.phase == ("decode" if w.m_tokens <= 8 else "prefill")


def test_shapes_from_notes():
    ks = {(w.model, w.site): (w.n, w.k) for w in seen_workloads_raw() if w.op == "gemm"}
    assert ks[("Qwen3-4B", "qkv")] == (6144, 2560)
    assert ks[("Qwen3-4B", "o_proj")] == (2560, 4096)
    assert ks[("Qwen3-4B", "gate_up")] == (19456, 2560)
    assert ks[("Llama-3.2-1B", "qkv")] == (3072, 2048)
    assert ks[("Llama-3.2-1B", "lm_head")] == (128256, 2048)
    assert ks[("Qwen3-1.7B", "down")] == (2048, 6144)


def test_measure_order_decode_first_prefill_4096_last():
    seen = seen_workloads()
    phases = [w.phase for w in seen]
    assert phases.index("prefill") > max(i for i, p in enumerate(phases) if p == "decode")
    assert seen[-1].m_tokens == 4096


# --------------------------------------------------------------------------- legality


def _tc(bm, bn, bk, st, warps=8, sk=1, gm=8):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": gm, "SPLIT_K": sk, "num_warps": warps,
            "num_stages": st}


def _rules(viol):
    return {v.rule for v in viol}


def test_smem_exact_numbers_from_notes():
    assert L.tc_smem_bytes(128, 256, 128, 4) == 393_216
    assert L.tc_smem_bytes(256, 256, 128, 4) == 524_288
    v = L.check("tc_gemm", _tc(128, 256, 128, 4), "gemm", 2048, 12288, 2048, "bf16")
    assert "smem" in _rules(v) and any("393216" in x.detail for x in v)
    assert "smem" in _rules(L.check("tc_gemm", _tc(256, 256, 128, 4), "gemm", 2048, 12288, 2048, "bf16"))
    assert "smem" in _rules(L.check("tc_gemm", _tc(128, 128, 128, 4), "gemm", 2048, 12288, 2048, "bf16"))  # 262,144
    assert L.check("tc_gemm", _tc(128, 256, 64, 3), "gemm", 2048, 12288, 2048, "bf16") == []  # 147,456
    assert L.tc_smem_bytes(128, 256, 64, 4) == 196_608 <= L.SMEM_OPTIN_BYTES


def test_pow2_numel_dot_warps_rules():
    g = {"BLOCK_M": 1, "BLOCK_N": 24, "BLOCK_K": 512, "SPLIT_K": 1, "num_warps": 4, "num_stages": 1}
    assert "pow2" in _rules(L.check("gemv_splitn", g, "gemm", 1, 2048, 2048, "bf16"))
    g = {"BLOCK_M": 1, "BLOCK_N": 1024, "BLOCK_K": 2048, "SPLIT_K": 1, "num_warps": 8, "num_stages": 1}
    assert "max_numel" in _rules(L.check("gemv_splitn", g, "gemm", 1, 2048, 2048, "bf16"))
    assert "dot_min_dim" in _rules(L.check("tc_gemm", _tc(8, 64, 64, 3, warps=4), "gemm", 128, 2048, 2048, "bf16"))
    g = {"BLOCK_M": 1, "BLOCK_N": 16, "BLOCK_K": 512, "SPLIT_K": 1, "num_warps": 3, "num_stages": 1}
    assert "num_warps_pow2" in _rules(L.check("gemv_splitn", g, "gemm", 1, 2048, 2048, "bf16"))
    g = {"BLOCK_M": 1, "BLOCK_N": 16, "BLOCK_K": 512, "SPLIT_K": 1, "num_warps": 64, "num_stages": 1}
    assert "num_warps_pow2" in _rules(L.check("gemv_splitn", g, "gemm", 1, 2048, 2048, "bf16"))


def test_split_k_and_gemv_rules():
    g = {"BLOCK_M": 1, "BLOCK_N": 16, "BLOCK_K": 1024, "SPLIT_K": 8, "num_warps": 4, "num_stages": 1}
    assert "empty_split" in _rules(L.check("gemv_splitk", g, "gemm", 1, 2048, 2048, "bf16"))  # 2 K blocks < 8
    g = {"BLOCK_M": 2, "BLOCK_N": 16, "BLOCK_K": 512, "SPLIT_K": 1, "num_warps": 4, "num_stages": 1}
    assert "gemv_block_m" in _rules(L.check("gemv_splitn", g, "gemm", 4, 2048, 2048, "bf16"))
    assert "gemv_m" in _rules(L.check("gemv_splitn", dict(g, BLOCK_M=16), "gemm", 16, 2048, 2048, "bf16"))
    assert "splitk_sk" in _rules(L.check("gemv_splitk", dict(g, BLOCK_M=4), "gemm", 4, 2048, 2048, "bf16"))


def test_heuristic_spill_rules_marked_est():
    g = {"BLOCK_M": 8, "BLOCK_N": 16, "BLOCK_K": 512, "SPLIT_K": 1, "num_warps": 4, "num_stages": 1}
    v = L.check("gemv_splitn", g, "gemm", 8, 2048, 2048, "bf16")  # 512 fp32 / thread
    assert [x.kind for x in v] == ["heuristic"] and "(est.)" in v[0].detail
    v = L.check("tc_gemm", _tc(256, 256, 64, 3), "gemm", 2048, 12288, 2048, "bf16")
    assert _rules(v) == {"acc_spill"}


def test_row_ops_rules():
    assert "onepass_row_bytes" in _rules(
        L.check("rmsnorm_rows", {"BLOCK_D": 65536, "ROWS": 1, "num_warps": 16}, "rmsnorm", 4, 40960, 0, "bf16"))
    assert "row_fits_block" in _rules(
        L.check("rmsnorm_rows", {"BLOCK_D": 1024, "ROWS": 1, "num_warps": 4}, "rmsnorm", 4, 2048, 0, "bf16"))
    assert "row_fits_block" in _rules(
        L.check("softmax_onepass", {"BLOCK": 131072, "num_warps": 32}, "softmax", 1, 151936, 0, "fp32"))
    assert L.check("softmax_split", {"BLOCK": 2048, "CHUNKS": 64, "num_warps": 4}, "softmax", 1, 151936, 0,
                   "fp32") == []


def test_workload_support_and_family_op():
    assert L.workload_support("gemm", 1, 2048, 2050, "bf16")
    assert L.workload_support("gemm", 1, 2048, 2048, "fp8")
    assert L.workload_support("attention", 1, 1, 1, "bf16")
    assert L.workload_support("gemm", 1, 2048, 2048, "bf16") is None
    assert "family_op" in _rules(L.check("swiglu_2d", {"BLOCK": 1024, "num_warps": 4}, "gemm", 1, 8, 8, "bf16"))
    assert "unknown_family" in _rules(L.check("nope", {}, "gemm", 1, 8, 8, "bf16"))
    assert "config_keys" in _rules(L.check("swiglu_2d", {"BLOCK": 1024}, "swiglu", 1, 8192, 0, "bf16"))


# --------------------------------------------------------------------------- advisor


def _all():
    return seen_workloads() + holdout_workloads()


def test_advisor_deterministic_and_schema_valid():
    for w in _all():
        p1 = A.make_plan(w)
        p2 = A.make_plan(w)
        assert R.canonical_json(p1.advisor_input) == R.canonical_json(p2.advisor_input)
        assert R.canonical_json(p1.advisor_output) == R.canonical_json(p2.advisor_output)
        assert R.canonical_json(p1.candidates) == R.canonical_json(p2.candidates)
        assert R.canonical_json(p1.pruned) == R.canonical_json(p2.pruned)
        A.validate_input(p1.advisor_input)
        A.validate_output(p1.advisor_output)
        A._builtin_validate_input(p1.advisor_input)
        A._builtin_validate_output(p1.advisor_output)
        assert p1.advisor_input["region"]["cublas_us"] is None  # no measured numbers in the input


def test_plan_candidates_legal_vendor_first_topk():
    for w in _all():
        p = A.make_plan(w)
        assert p.candidates[0]["id"] == "vendor"
        k = p.advisor_input["budget"]["top_k"]
        assert 2 <= len(p.candidates) <= k + 1
        assert len({c["id"] for c in p.candidates}) == len(p.candidates)
        for c in p.candidates[1:]:
            assert L.check(c["family"], c["config"], w.op, w.m, w.n, w.k, w.dtype) == []
            assert c["family"] in p.advisor_input["space"]["families"]
        for q in p.pruned:
            assert q["violations"]
        if w.op == "gemm" and w.m <= 8:
            fams = {c["family"] for c in p.candidates}
            assert "gemv_splitn" in fams


def test_plan_prunes_known_illegal_tc_tiles():
    w = [x for x in seen_workloads() if x.op == "gemm" and x.m == 2048][0]
    p = A.make_plan(w)
    smem = [q for q in p.pruned if any(v["rule"] == "smem" for v in q["violations"])]
    assert any(q["config"]["BLOCK_K"] == 128 and q["config"]["num_stages"] == 4 for q in smem)


def test_unsupported_workload_plans_vendor_only():
    w = Workload("gemm", 1, 2048, 2050, "bf16", "synthetic", "x", "decode", 1, "x_rowmajor,w_NK")
    p = A.make_plan(w)
    assert not p.supported and [c["id"] for c in p.candidates] == ["vendor"]
    w = Workload("rmsnorm", 4, 40960, 0, "bf16", "synthetic", "wide", "decode", 4, "")
    p = A.make_plan(w)
    assert p.supported and [c["id"] for c in p.candidates] == ["vendor"] and p.pruned


def test_schema_rejects_bad_outputs():
    w = seen_workloads()[0]
    good = A.make_plan(w).advisor_output
    bads = []
    b = copy.deepcopy(good)
    del b["risks"]
    bads.append(b)
    b = copy.deepcopy(good)
    b["fallback"] = "cublas_lt"
    bads.append(b)
    b = copy.deepcopy(good)
    b["candidates"] = [{"family": "gemv_splitn", "BLOCK_N": "16"}]
    bads.append(b)
    b = copy.deepcopy(good)
    b["candidates"] = [{"family": "warp_magic", "BLOCK_N": 16}]
    bads.append(b)
    b = copy.deepcopy(good)
    b["extra"] = 1
    bads.append(b)
    bads.append("not json")
    for bad in bads:
        with pytest.raises(A.SchemaError):
            A.validate_output(bad)
        with pytest.raises(A.SchemaError):
            A._builtin_validate_output(bad)


def test_llm_hook_off_by_default_and_discards(monkeypatch):
    monkeypatch.delenv("AUTO_KT_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("AUTO_KT_LLM_MODEL", raising=False)
    assert not A.LLMAdvisor().enabled
    w = [x for x in seen_workloads() if x.op == "gemm" and x.m == 2][0]
    base = A.make_plan(w)
    # garbage → discarded, same candidate list as the heuristic
    p = A.make_plan(w, llm=A.LLMAdvisor(transport=lambda s: "{not json"))
    assert p.llm["enabled"] and p.llm["accepted"] is False
    assert [c["id"] for c in p.candidates] == [c["id"] for c in base.candidates]
    # schema-valid but illegal (BLOCK_N=3) → discarded
    out = dict(base.advisor_output)
    out["candidates"] = [{"family": "gemv_splitn", "BLOCK_M": 2, "BLOCK_N": 3, "BLOCK_K": 512, "SPLIT_K": 1,
                          "num_warps": 4, "num_stages": 1}]
    p = A.make_plan(w, llm=A.LLMAdvisor(transport=lambda s: json.dumps(out)))
    assert p.llm["accepted"] is False and "illegal" in p.llm["reason"]
    assert [c["id"] for c in p.candidates] == [c["id"] for c in base.candidates]
    # legal proposal → accepted, advisor name tagged, still legal candidates only
    out["candidates"] = [{"family": "gemv_splitn", "BLOCK_M": 2, "BLOCK_N": 64, "BLOCK_K": 128, "SPLIT_K": 1,
                          "num_warps": 8, "num_stages": 2}]
    p = A.make_plan(w, llm=A.LLMAdvisor(transport=lambda s: json.dumps(out)))
    assert p.llm["accepted"] is True and p.advisor_name.endswith("+llm")
    for c in p.candidates[1:]:
        assert L.check(c["family"], c["config"], w.op, w.m, w.n, w.k, w.dtype) == []


def test_pydantic_validator_used_on_cpu():
    pytest.importorskip("pydantic")
    assert A.validator_name() == "pydantic"


# --------------------------------------------------------------------------- records + census

ENV = {"gpu": "NVIDIA H200", "sms": 132, "driver": "580", "cuda": "13.0", "triton": "3.6.0", "torch": "2.11.0"}


def fake_record(w: Workload, medians: dict[str, float], pass_name="pass1", status="ok") -> dict:
    plan = A.make_plan(w)
    cands = []
    for c in plan.candidates:
        med = medians.get(c["id"])
        cands.append({"id": c["id"], "family": c["family"], "config": c["config"], "compiled": med is not None,
                      "error": None if med is not None else "compile: OutOfResources: x", "rel_err": 2e-3,
                      "times_us": [med] * 3 if med is not None else [], "median_us": med})
    timed = [c for c in cands if c["median_us"] is not None]
    best = min(timed, key=lambda c: c["median_us"])
    out = {"chosen_id": best["id"], "family": best["family"], "config": best["config"],
           "fallback": best["id"] == "vendor", "reason": "fastest"}
    attrs = {"kt.pass": pass_name, "kt.workload_key": w.key, "kt.advisor": A.ADVISOR_NAME,
             "kt.advisor_output": plan.advisor_output, "kt.candidates": cands, "kt.pruned": plan.pruned,
             "kt.vendor_us": medians.get("vendor"), "kt.chosen_id": best["id"], "kt.protocol": "P1",
             "kt.env_hash": R.env_hash(ENV), "kt.wall_s": 1.0}
    return R.make_record(inp=plan.advisor_input, output=out, attributes=attrs, status=status, error=None,
                         started_ns=1, ended_ns=2)


def test_env_hash_is_canonical():
    h = R.env_hash(ENV)
    assert h == R.env_hash(dict(reversed(list(ENV.items()))))
    assert h == R.env_hash(dict(ENV, extra="ignored"))
    assert h != R.env_hash(dict(ENV, driver="581"))
    assert h.startswith("sha256:") and len(h) == 71


def test_record_schema_and_digest():
    w = seen_workloads()[0]
    ids = [c["id"] for c in A.make_plan(w).candidates]
    rec = fake_record(w, {ids[0]: 10.0, ids[1]: 9.0})
    assert R.validate_record(rec) == []
    line = R.dumps_line(rec)
    assert line == R.canonical_json(json.loads(line)) + "\n"
    bad = copy.deepcopy(rec)
    bad["output"]["chosen_id"] = "x"
    assert "digest mismatch" in R.validate_record(bad)
    bad = copy.deepcopy(rec)
    bad["attributes"]["kt.candidates"][0]["times_us"] = [1.0]
    R.seal(bad)
    assert any("3 medians" in p for p in R.validate_record(bad))


def test_census_classes():
    ws = [w for w in seen_workloads() if w.op == "gemm" and w.m == 1][:4]
    a, b = [], []
    for i, w in enumerate(ws):
        ids = [c["id"] for c in A.make_plan(w).candidates]
        v, c1, c2 = ids[0], ids[1], ids[2]
        if i == 0:  # exact
            a.append(fake_record(w, {v: 10, c1: 8, c2: 9}))
            b.append(fake_record(w, {v: 10, c1: 8.1, c2: 9}, "pass2"))
        elif i == 1:  # tolerant: A chose c1, B chose c2 but c1 within 5% in B
            a.append(fake_record(w, {v: 10, c1: 8, c2: 9}))
            b.append(fake_record(w, {v: 10, c1: 8.3, c2: 8.0}, "pass2"))
        elif i == 2:  # divergent: c1 is 20% slower in B
            a.append(fake_record(w, {v: 10, c1: 8, c2: 9}))
            b.append(fake_record(w, {v: 10, c1: 9.6, c2: 8.0}, "pass2"))
        else:  # divergent: A's choice failed in B
            a.append(fake_record(w, {v: 10, c1: 8, c2: 9}))
            b.append(fake_record(w, {v: 10, c2: 8.0}, "pass2"))
    c = R.census_from_records(a, b, eps=0.05)
    assert c["n"] == 4
    assert c["counts"] == {"exact": 1, "tolerant": 1, "divergent": 2}
    assert c["self_parity"] == pytest.approx(0.5)
    assert [r["class"] for r in c["rows"]] == [
        {r["key"]: r["class"] for r in c["rows"]}[w.key] for w in sorted(ws, key=lambda w: w.key)]
    # identical passes: self-parity 1
    assert R.census_from_records(a, a)["self_parity"] == 1.0


# --------------------------------------------------------------------------- recorded traces


def _trace(name):
    p = os.path.join(TRACES, name)
    return R.load_jsonl(p) if os.path.exists(p) else None


@pytest.mark.parametrize("name", ["pass1.jsonl", "pass2.jsonl", "holdout.jsonl", "faults.jsonl"])
def test_recorded_traces_schema(name):
    recs = _trace(name)
    if recs is None:
        pytest.skip(f"no {name} recorded")
    assert recs
    keys = [r["attributes"]["kt.workload_key"] for r in recs]
    assert len(keys) == len(set(keys))
    for r in recs:
        assert R.validate_record(r) == [], (r["attributes"]["kt.workload_key"], R.validate_record(r))
        a = r["attributes"]
        assert a["kt.env_hash"] == R.env_hash(a["kt.env"])
        chosen = {c["id"]: c for c in a["kt.candidates"]}[r["output"]["chosen_id"]]
        if r["status"] == "ok" and chosen["id"] != "vendor":
            assert chosen["error"] is None and chosen["rel_err"] is not None and chosen["rel_err"] <= 1e-2
            assert chosen["median_us"] < a["kt.vendor_us"]
        if r["output"]["fallback"]:
            assert r["output"]["reason"] != "fastest" or chosen["id"] == "vendor"
        # the advisor part of the record is reproducible on CPU
        w = Workload.from_json(a["kt.workload"])
        if a.get("kt.corpus") != "faults":
            plan = A.make_plan(w)
            assert R.canonical_json(plan.advisor_input) == R.canonical_json(r["input"])
            assert [c["id"] for c in plan.candidates] == [c["id"] for c in a["kt.candidates"]]


def test_recorded_census_when_two_passes():
    a, b = _trace("pass1.jsonl"), _trace("pass2.jsonl")
    if not a or not b:
        pytest.skip("pass1/pass2 not both recorded")
    c = R.census_from_records(a, b)
    assert c["n"] > 0
    assert sum(c["counts"].values()) == c["n"]
    assert 0.0 <= c["self_parity"] <= 1.0


def test_recorded_faults_fall_back_with_reasons():
    recs = _trace("faults.jsonl")
    if not recs:
        pytest.skip("no faults recorded")
    reasons = {r["output"]["reason"].split(":")[0] for r in recs}
    assert {"unsupported_shape", "no_legal_candidate"} <= reasons
    errs = " ".join(str(c["error"]) for r in recs for c in r["attributes"]["kt.candidates"])
    assert "non-finite" in errs


# --------------------------------------------------------------------------- GPU-stack parts


def test_kernels_interpreter_smoke(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # before triton is imported: read at decoration
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import sys

    if "bench.kernel_tuning.kernels" in sys.modules:
        pytest.skip("kernels already imported without the interpreter")
    from bench.kernel_tuning import kernels as KN

    w = Workload("gemm", 3, 96, 320, "bf16", "t", "t", "decode", 3, "")
    p = KN.Problem(w, device="cpu", seed=1)
    run = KN.build("gemv_splitk", {"BLOCK_M": 4, "BLOCK_N": 16, "BLOCK_K": 64, "SPLIT_K": 2, "num_warps": 4,
                                   "num_stages": 1}, w, device="cpu")
    p.poison()
    err, finite = KN.rel_err(run(p.args, p.out), p.ref)
    assert finite and err < 1e-2
