"""F7 kernel-tuning family: CPU-side tests (no GPU; torch/triton-only parts are skipped).

Covers the workload corpus, the exact legality rules (Triton 3.6 on an H200: block dims powers of
2 and a block tensor at most 2**20 elements, from ``triton/language/semantic.py``; ``tl.dot``
needs M, N, K >= 16; shared memory at most 232,448 B per block, measured on the H200), the
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

TRACES = os.path.join(os.path.dirname(__file__), "..", "..", "traces", "kernel-tuning")


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


def test_shapes_of_the_models():
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


def test_smem_exact_numbers():
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
        forced = 1 if w.op in A.INDUCTOR_OPS else 0  # torch.compile's kernel, outside the top-k
        assert 2 + forced <= len(p.candidates) <= k + 1 + forced
        assert (p.candidates[1]["id"] == "inductor") == bool(forced)
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
    p = A.make_plan(w, version=A.ADVISOR_V1)
    assert p.supported and [c["id"] for c in p.candidates] == ["vendor"] and p.pruned
    # every Triton template is pruned; torch.compile's kernel (v2) still competes with the vendor path
    p = A.make_plan(w)
    assert [c["id"] for c in p.candidates] == ["vendor", "inductor"] and p.pruned
    assert all(q["family"] == "rmsnorm_rows" for q in p.pruned)


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


@pytest.mark.parametrize("name", ["pass1.jsonl", "pass2.jsonl", "holdout.jsonl", "faults.jsonl", "rerecord1.jsonl",
                                  "rerecord2.jsonl", "e2e_deopt.jsonl"])
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
            if a["kt.advisor"] != A.ADVISOR_V1:  # v2: torch.compile's kernel among the row ops' candidates
                assert (w.op in A.INDUCTOR_OPS) == ("inductor" in {c["id"] for c in a["kt.candidates"]})
            plan = A.make_plan(w, version=a["kt.advisor"])
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


# --------------------------------------------------------------------------- GPU verification (CPU parts)

from bench.kernel_tuning import specialist as S  # noqa: E402
from bench.kernel_tuning import verify as V  # noqa: E402
from bench.kernel_tuning import verify_report as VR  # noqa: E402
from bench.kernel_tuning.workloads import LAYERS, MODELS, SITES  # noqa: E402


class FakeBackend:
    """Deterministic stand-in for the GPU: ``us[id] = (P1 µs, P2 µs)``; ``bad[id]`` = rel_err,
    ``nan`` (non-finite) or ``raise`` (compile error). Logs every call in ``calls``."""

    def __init__(self, us=None, bad=None, default=(10.0, 8.0)):
        self.us, self.bad, self.default, self.calls = us or {}, bad or {}, default, []

    def _t(self, cid, i):
        return (self.us.get(cid) or self.default)[i]

    def begin(self, w):
        self.calls.append(("begin", w.key))

    def materialize(self, c):
        self.calls.append(("materialize", c["id"]))
        if self.bad.get(c["id"]) == "raise":
            raise RuntimeError("OutOfResources: shared memory")
        return c["id"]

    def check(self, res):
        b = self.bad.get(res)
        if b == "nan":
            return float("nan"), False
        return (b if isinstance(b, float) else 2e-3), True

    def p1_us(self, cid):
        self.calls.append(("P1", cid))
        return self._t(cid, 0)

    def p2_begin(self, cids):
        self.calls.append(("p2_begin", tuple(cids)))
        return {}

    def p2_us(self, cid):
        self.calls.append(("P2", cid))
        return self._t(cid, 1)

    def end(self):
        self.calls.append(("end",))

    def alive(self):
        return True


def _answer(c, protocol="P1"):
    return {"id": c["id"], "family": c["family"], "config": c["config"], "protocol": protocol}


def _item(w, spec_i=1, ref_i=1):
    cs = A.make_plan(w).candidates
    proto = "P2" if (w.op == "gemm" and w.m <= 8) else "P1"
    return V.Item(w=w, specialist=_answer(cs[spec_i], proto), reference=_answer(cs[ref_i], proto))


def _gemv(model, site, m=1):
    n, k = MODELS[model].gemm_sites()[site]
    return Workload("gemm", m, n, k, "bf16", model, site, "decode" if m <= 8 else "prefill", m, "x_rowmajor,w_NK")


ENV_V = dict(ENV, cc="9.0")


def test_verify_item_schema_interleaving_and_parity():
    w = _gemv("Qwen3-1.7B", "o_proj")
    it = _item(w, 1, 2)
    s_id, r_id = it.specialist["id"], it.reference["id"]
    be = FakeBackend(us={s_id: (10.0, 5.0), r_id: (10.3, 5.5), "vendor": (9.9, 6.0)})
    line, lost = V.verify_item(it, be, rounds=3, env=ENV_V, seed=1)
    assert not lost and line["status"] == "ok"
    assert set(line) == set(V.LINE_KEYS)
    assert line["protocols"] == ["P1", "P2"] and line["deciding_protocol"] == "P2"
    assert [c["roles"] for c in line["candidates"]] == [["specialist"], ["reference"], ["vendor"]]
    # numerics for every candidate before any timing; then round-robin a, b, vendor × 3 per protocol
    kinds = [c[0] for c in be.calls]
    assert kinds.index("P1") > max(i for i, k in enumerate(kinds) if k == "materialize")
    p1 = [c[1] for c in be.calls if c[0] == "P1"]
    assert p1 == [s_id, r_id, "vendor"] * 3
    assert [c[1] for c in be.calls if c[0] == "P2"] == [s_id, r_id, "vendor"] * 3
    for c in line["candidates"]:
        assert c["ok"] and c["rel_err"] == 2e-3 and len(c["P1"]["times_us"]) == 3
    p1b, p2b = line["parity"]["P1"], line["parity"]["P2"]
    assert p1b["min_us"] == 9.9 and p1b["best_id"] == "vendor"
    assert p1b["specialist_at_parity"] and p1b["reference_at_parity"]  # 10.0, 10.3 ≤ 1.05 × 9.9 = 10.395
    assert p1b["ratio_specialist_vendor"] == round(10.0 / 9.9, 5)
    assert p2b["specialist_at_parity"] and not p2b["reference_at_parity"]  # 5.5 > 1.05 × 5.0
    assert p2b["ratio_specialist_vendor"] == round(5.0 / 6.0, 5) and p2b["ratio_reference_vendor"] == round(5.5 / 6, 5)
    assert line["env_hash"] == R.env_hash(ENV_V) and line["env"]["gpu"] == "NVIDIA H200"
    json.loads(R.canonical_json(line))  # finite, canonical


def test_verify_item_same_choice_timed_once_and_p2_for_row_ops():
    w = Workload("rmsnorm", 4, 2560, 0, "bf16", "Qwen3-4B", "input_norm", "decode", 4, "x_rowmajor,w_D")
    it = _item(w, 2, 2)
    be = FakeBackend(us={it.specialist["id"]: (4.0, 1.5), "vendor": (5.0, 2.0)})
    line, _ = V.verify_item(it, be)
    assert line["same_choice"] and line["protocols"] == ["P1", "P2"]  # a row op is timed graph-replayed too
    assert [c["roles"] for c in line["candidates"]] == [["specialist", "reference"], ["vendor"]]
    assert [c[1] for c in be.calls if c[0] == "P1"] == [it.specialist["id"], "vendor"] * 3
    assert [c[1] for c in be.calls if c[0] == "P2"] == [it.specialist["id"], "vendor"] * 3
    pb = line["parity"]["P1"]
    assert pb["specialist_us"] == pb["reference_us"] == 4.0 and pb["ratio_specialist_reference"] == 1.0
    assert line["parity"]["P2"]["ratio_specialist_vendor"] == 0.75
    # with torch.compile's kernel as one more role (generation 2), parity is against the fastest of all
    it2 = V.Item(w=w, specialist=it.specialist, reference=it.reference, inductor=True)
    be = FakeBackend(us={it.specialist["id"]: (4.0, 1.5), "vendor": (5.0, 2.0), "inductor": (30.0, 1.0)})
    line, _ = V.verify_item(it2, be)
    assert [c["roles"] for c in line["candidates"]][-1] == ["inductor"]
    p2 = line["parity"]["P2"]
    assert p2["best_id"] == "inductor" and not p2["specialist_at_parity"] and p2["ratio_specialist_inductor"] == 1.5
    assert line["parity"]["P1"]["specialist_at_parity"]


def test_verify_prefill_gemm_is_p1_only():
    w = _gemv("Qwen3-1.7B", "qkv", 128)
    it = _item(w, 1, 1)
    be = FakeBackend(us={it.specialist["id"]: (40.0, 0), "vendor": (41.0, 0)})
    line, _ = V.verify_item(it, be)
    assert line["protocols"] == ["P1"]
    assert not any(c[0].startswith("p2") or c[0] == "P2" for c in be.calls)


@pytest.mark.parametrize("bad,kind", [(0.5, "numerics: rel_err"), ("nan", "numerics: non-finite"),
                                      ("raise", "compile: RuntimeError")])
def test_verify_item_failed_numerics_never_timed(bad, kind):
    w = _gemv("Qwen3-4B", "qkv", 2)
    it = _item(w, 1, 2)
    s_id = it.specialist["id"]
    be = FakeBackend(bad={s_id: bad}, us={"vendor": (12.0, 9.0)})
    line, lost = V.verify_item(it, be)
    assert not lost
    c = {c["id"]: c for c in line["candidates"]}[s_id]
    assert not c["ok"] and c["error"].startswith(kind)
    assert c["P1"] == {"times_us": [], "median_us": None} and c["P2"]["median_us"] is None
    assert ("P1", s_id) not in be.calls and ("P2", s_id) not in be.calls
    for p in ("P1", "P2"):
        pb = line["parity"][p]
        assert pb["specialist_us"] is None and not pb["specialist_at_parity"] and pb["ratio_specialist_vendor"] is None
        assert pb["reference_at_parity"]  # reference (10, 8) µs beats vendor (12, 9) under both
    assert line["status"] == "ok"


def test_verify_order_decode_gemm_then_row_ops_then_prefill():
    ws = [_gemv("Qwen3-1.7B", "qkv", 128), _gemv("Qwen3-1.7B", "qkv", 8), _gemv("Qwen3-1.7B", "qkv", 1),
          Workload("softmax", 1, 151936, 0, "fp32", "Qwen3-1.7B", "sampling_softmax", "decode", 1, "x_rowmajor"),
          Workload("rmsnorm", 4096, 2048, 0, "bf16", "Qwen3-1.7B", "input_norm", "prefill", 4096, "x_rowmajor,w_D"),
          _gemv("Qwen3-1.7B", "qkv", 4096)]
    order = [it.w.key for it in V.verify_order([_item(w) for w in ws])]
    assert order == [ws[2].key, ws[1].key, ws[4].key, ws[3].key, ws[0].key, ws[5].key]


def test_verify_plan_from_recorded_traces():
    if not (_trace("pass1.jsonl") and _trace("pass2.jsonl")):
        pytest.skip("pass1/pass2 not both recorded")
    items = V.build_plan(TRACES)
    assert len(items) == 176 == len({it.w.key for it in items})
    p1 = S.by_key(_trace("pass1.jsonl"))
    table = {e[2][0]["attributes"]["kt.workload_key"]: e[1] for e in S.table_entries([_trace("pass1.jsonl"),
                                                                                       _trace("pass2.jsonl")])}
    groups = []
    for it in items:
        assert it.specialist == table[it.w.key]
        assert it.reference["id"] == p1[it.w.key]["output"]["chosen_id"]
        assert it.protocols == (["P1", "P2"] if it.w.op != "gemm" or it.w.m <= 8 else ["P1"])
        ids = [c["id"] for c in it.candidates()]
        assert len(ids) == len(set(ids))
        assert "vendor" in ids
        assert set(it.recorded["pass1"]) == set(ids)
        g = 0 if (it.w.op == "gemm" and it.w.m <= 8) else (1 if it.w.op != "gemm" else 2)
        groups.append(g)
    assert groups == sorted(groups) and Counter(groups) == {0: 56, 1: 64, 2: 56}
    assert [it.w.m for it in items[:14]] == [1] * 14  # the M=1 GEMVs lead
    pre = V.precompile_items_for(items)
    assert all(fam != "vendor" for _, fam, _ in pre)
    assert len({(A.cand_id(fam, cfg), w.op) for w, fam, cfg in pre}) == len(pre)


def test_verify_main_with_fake_backend_resumes_and_stops(tmp_path):
    if not (_trace("pass1.jsonl") and _trace("pass2.jsonl")):
        pytest.skip("pass1/pass2 not both recorded")
    keys = "gemm:bf16:m1:n2048:k2048,rmsnorm:bf16:m1:n2048:k0,gemm:bf16:m128:n2048:k2048"
    out = str(tmp_path)
    argv = ["--traces", TRACES, "--out", out, "--keys", keys]
    assert V.main(argv[:] + ["--limit-s", "0"], backend_factory=FakeBackend, env=ENV_V) == 2
    assert not open(os.path.join(out, "verify.jsonl")).read()
    assert V.main(argv, backend_factory=FakeBackend, env=ENV_V) == 0
    lines = VR.load(os.path.join(out, "verify.jsonl"))
    assert [ln["key"] for ln in lines] == ["gemm:bf16:m1:n2048:k2048", "rmsnorm:bf16:m1:n2048:k0",
                                           "gemm:bf16:m128:n2048:k2048"]
    meta = json.load(open(os.path.join(out, "verify_meta.json")))
    assert meta["wrote"] == 3 and meta["rc"] == 0 and "previous" in meta
    # the recorded env hash is what the specialist's guard keys on
    assert meta["env_matches_recorded"] == (R.env_hash(ENV_V) == meta["recorded_env_hash"])
    assert V.main(argv, backend_factory=FakeBackend, env=ENV_V) == 0  # resume: nothing left
    assert len(open(os.path.join(out, "verify.jsonl")).read().splitlines()) == 3


def _synthetic_lines():
    """Qwen3-1.7B's 5 M=1 GEMVs (specialist 0.9× vendor under P2; lm_head exactly 100 µs), one
    RMSNorm whose specialist misses parity, one prefill GEMM falling back to vendor, one failure."""
    lines = []
    for site in SITES:
        w = _gemv("Qwen3-1.7B", site)
        it = _item(w, 1, 1)
        v2 = 100.0 / 0.9 if site == "lm_head" else 10.0
        be = FakeBackend(us={it.specialist["id"]: (11.0, 0.9 * v2), "vendor": (10.0, v2)})
        lines.append(V.verify_item(it, be)[0])
    w = Workload("rmsnorm", 1, 2048, 0, "bf16", "Qwen3-1.7B", "input_norm", "decode", 1, "x_rowmajor,w_D")
    it = _item(w, 1, 2)
    be = FakeBackend(us={it.specialist["id"]: (6.0, 3.0), it.reference["id"]: (5.0, 3.0), "vendor": (8.0, 4.0)})
    lines.append(V.verify_item(it, be)[0])
    w = _gemv("Qwen3-1.7B", "qkv", 128)
    it = V.Item(w=w, specialist=dict(V.VENDOR, protocol="P1"), reference=dict(V.VENDOR, protocol="P1"))
    lines.append(V.verify_item(it, FakeBackend(us={"vendor": (20.0, 0)}))[0])
    w = Workload("swiglu", 1, 6144, 0, "bf16", "Qwen3-1.7B", "swiglu", "decode", 1, "gu_rowmajor_[g|u]")
    it = _item(w, 1, 1)
    lines.append(V.verify_item(it, FakeBackend(bad={it.specialist["id"]: "nan"}))[0])
    return lines


def test_verify_report_on_synthetic_lines(tmp_path):
    lines = _synthetic_lines()
    p = tmp_path / "verify.jsonl"
    p.write_text("".join(R.canonical_json(ln) + "\n" for ln in lines))
    (tmp_path / "env.json").write_text(json.dumps({"copy_bandwidth": {"gbs": 4000.0}}))
    loaded = VR.load(str(p))
    s = VR.summarize(loaded, VR.copy_gbs(str(tmp_path)))
    assert s["n"] == 8 and s["status"] == {"ok": 8}
    # deciding protocol: 5 GEMVs (P2) + prefill vendor at parity; rmsnorm 6.0 > 1.05 × 5.0; swiglu failed
    assert s["deciding"]["n"] == 8 and s["deciding"]["specialist_at_parity"] == 6
    assert s["deciding"]["reference_at_parity"] == 7
    # P2 is measured for decode GEMMs and every row op (the swiglu specialist failed numerics)
    assert s["per_protocol"]["P2"]["n"] == 7 and s["per_protocol"]["P2"]["specialist_at_parity"] == 6
    # with a choice (>= 2 distinct candidates): not the prefill line, whose three roles are all vendor
    assert s["with_choice"]["n"] == 7 and s["with_choice"]["specialist_at_parity"] == 5
    # P1: GEMV specialist 11 vs vendor 10 → not at parity
    assert s["groups"]["gemm-decode"]["P1"]["specialist_at_parity"] == 0
    assert s["groups"]["gemm-decode"]["P2"]["geo_specialist_vs_vendor"] == pytest.approx(0.9, abs=1e-4)
    assert s["groups"]["gemm-decode"]["P1"]["geo_specialist_vs_vendor"] == pytest.approx(1.1, abs=1e-4)
    assert s["groups"]["gemm-prefill"]["P1"]["geo_specialist_vs_vendor"] == 1.0
    assert s["groups"]["rmsnorm"]["P1"]["geo_reference_vs_vendor"] == pytest.approx(5 / 8, abs=1e-4)
    # per token: 4 per-layer sites × 28 layers + lm_head once
    pt = s["per_token"]["P2"]["Qwen3-1.7B"]
    assert pt["complete"] and pt["layers"] == LAYERS["Qwen3-1.7B"] == 28
    v_ms = (4 * 10.0 * 28 + 100.0 / 0.9) / 1e3
    assert pt["vendor_ms"] == pytest.approx(v_ms, abs=1e-4)
    assert pt["specialist_ms"] == pytest.approx(0.9 * v_ms, abs=1e-4)
    assert pt["specialist_vs_vendor"] == pytest.approx(0.9, abs=1e-4)
    byts = sum((1 if site == "lm_head" else 28) * A.region(_gemv("Qwen3-1.7B", site))["min_bytes"] for site in SITES)
    assert pt["bytes"] == byts and pt["floor_ms"] == pytest.approx(byts / 4000e9 * 1e3, abs=1e-4)
    assert s["per_token"]["P2"]["Qwen3-4B"]["complete"] is False
    assert s["per_token"]["P2"]["Qwen3-4B"]["specialist_ms"] is None
    lm = s["lm_head"]["Qwen3-1.7B"]
    b = A.region(_gemv("Qwen3-1.7B", "lm_head"))["min_bytes"]
    assert lm["P2_specialist_us"] == pytest.approx(100.0, abs=1e-3)
    assert lm["P2_specialist_pct_copy_bw"] == round(100.0 * b / 100e-6 / 4000e9, 1)
    assert [(f["key"], f["roles"]) for f in s["failures"]] == [("swiglu:bf16:m1:n6144:k0", ["specialist", "reference"])]
    assert {r["key"] for r in s["not_at_parity"]} == {"rmsnorm:bf16:m1:n2048:k0", "swiglu:bf16:m1:n6144:k0"}
    assert "per token" in VR.render(s) and "lm_head" in VR.render(s)
    # agreement with itself; drift needs recorded medians (none here)
    ag = VR.agreement(loaded, loaded)
    assert ag["P2"] == {"n": 7, "same_flag": 7, "at_parity_in_both": 6, "geo_b_over_a": 1.0,
                        "max_b_over_a": 1.0, "min_b_over_a": 1.0}
    assert s["drift_vs_pass1"] == {}
    assert VR.main([str(tmp_path), "--json", str(tmp_path / "s.json"), "--repeat", "verify.jsonl"]) == 0


def test_verify_report_drift_and_launches():
    w = _gemv("Qwen3-1.7B", "down", 2)
    it = _item(w, 1, 1)
    sid = it.specialist["id"]
    it.recorded = {"pass1": {sid: {"P1": 10.0, "P2": 5.0}, "vendor": {"P1": 10.0, "P2": 5.0}}}
    line = V.verify_item(it, FakeBackend(us={sid: (20.0, 5.0), "vendor": (10.0, 5.0)}))[0]
    kind = f"triton-{VR.launches(line['candidates'][0])}launch"
    d = VR.drift([line])
    assert d[f"P1/{kind}"]["geo"] == 2.0 and d[f"P2/{kind}"]["geo"] == 1.0 and d["P1/vendor"]["within_5pct"] == 1.0
    assert VR.launches({"family": "gemv_splitk", "config": {"SPLIT_K": 2}}) == 2
    assert VR.launches({"family": "softmax_split", "config": {"CHUNKS": 8}}) == 2
    assert VR.launches({"family": "gemv_splitn", "config": {"SPLIT_K": 1}}) == 1


def test_recorded_verify_jsonl():
    p = os.path.join(TRACES, "verify.jsonl")
    if not os.path.exists(p):
        pytest.skip("no verify.jsonl recorded")
    lines = VR.load(p)
    assert lines and all(set(ln) == set(V.LINE_KEYS) for ln in lines)
    if _trace("pass1.jsonl") and _trace("pass2.jsonl"):
        plan = {it.w.key: it for it in V.build_plan(TRACES)}
        assert {ln["key"] for ln in lines} <= set(plan)
        for ln in lines:
            assert ln["specialist"] == plan[ln["key"]].specialist
    for ln in lines:
        assert ln["protocols"] == (["P1", "P2"] if ln["op"] == "gemm" and ln["m"] <= 8 else ["P1"])  # recorded so
        assert ln["env_hash"] == R.env_hash(ln["env"])
        for c in ln["candidates"]:
            if c["ok"]:
                assert c["rel_err"] is not None and c["rel_err"] <= 1e-2
                assert all(len(c[p]["times_us"]) == ln["rounds"] for p in ln["protocols"])
            else:
                assert all(c[p]["median_us"] is None for p in ln["protocols"])


def test_verify_gpu_backend_under_interpreter(monkeypatch):
    """The real backend on CPU (TRITON_INTERPRET=1; wall-clock timing, P2 over 2 host copies)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import sys

    kn = sys.modules.get("bench.kernel_tuning.kernels")
    if kn is not None and type(kn.gemv_kernel).__name__ != "InterpretedFunction":
        pytest.skip("kernels already imported without the interpreter")
    be = V.GPUBackend(seed=3, device="cpu")
    w = Workload("gemm", 1, 256, 512, "bf16", "tiny", "gemm", "decode", 1, "x_rowmajor,w_NK")
    it = _item(w, 1, 2)
    line, lost = V.verify_item(it, be, rounds=3, env=ENV_V)
    assert not lost and line["status"] == "ok" and line["protocols"] == ["P1", "P2"]
    for c in line["candidates"]:
        assert c["ok"] and c["rel_err"] < 1e-2, c
        assert c["P1"]["median_us"] > 0 and c["P2"]["median_us"] > 0
    w = Workload("rmsnorm", 4, 256, 0, "bf16", "tiny", "norm", "decode", 4, "x_rowmajor,w_D")
    line, _ = V.verify_item(_item(w, 2, 2), be, rounds=3, env=ENV_V)  # a Triton template (1 is torch.compile's)
    assert line["protocols"] == ["P1", "P2"] and all(c["ok"] for c in line["candidates"])


def test_recorded_verify2_jsonl():
    """The current generation's re-verification: row ops under P1 and P2 with torch.compile's
    kernel as a fourth role; the specialist's answers are the generation-2 table's."""
    p = os.path.join(TRACES, "verify2.jsonl")
    if not os.path.exists(p):
        pytest.skip("no verify2.jsonl recorded")
    lines = VR.load(p)
    plan = {it.w.key: it for it in V.build_plan(TRACES, generation=2)}
    assert {ln["key"] for ln in lines} == set(plan) and len(lines) == 176
    for ln in lines:
        assert set(ln) == set(V.LINE_KEYS)
        assert ln["specialist"] == plan[ln["key"]].specialist
        assert ln["protocols"] == (["P1", "P2"] if ln["op"] != "gemm" or ln["m"] <= 8 else ["P1"])
        roles = [r for c in ln["candidates"] for r in c["roles"]]
        assert ("inductor" in roles) == (ln["op"] in A.INDUCTOR_OPS)
        assert ln["deciding_protocol"] == ("P1" if ln["op"] == "gemm" and ln["m"] > 8 else "P2")
    s = VR.summarize(lines)
    wc = s["with_choice"]
    assert wc["n"] == sum(1 for ln in lines if len(ln["candidates"]) >= 2) == 84
    assert 0 <= wc["specialist_at_parity"] <= wc["n"]
