"""Advisor I/O (schema ``auto.kt.advise.v1``), the deterministic heuristic advisor, the optional
LLM hook (off by default), the analytic ranker and the candidate plan.

Pure Python: no torch, no triton. The pipeline for one workload:

    advisor_input(workload, hw) ─► advisor (heuristic; LLM hook optional) ─► schema validation
      ─► proposals ─► legality.check (exact + est. rules; pruned ones are kept with reasons)
      ─► analytic rank (bytes/BW, wave quantization) ─► top-k (at least one per family)
      ─► [vendor] + top-k = the candidate list the harness materializes and measures.

Everything here is an exact function of (workload, hardware summary, top_k): the heuristic
advisor's output, the pruned set and the candidate list are what a compiled specialist can
reproduce without a GPU; only the timing argmin is not.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Any

from . import legality as L
from .workloads import Workload

SCHEMA = "auto.kt.advise.v1"
ADVISOR_V1 = "heuristic-v1"
# v2 adds torch.compile's kernel (family ``inductor``) as a candidate of every non-GEMM op and the
# fused residual add + RMSNorm op; its GEMM plans equal v1's.
ADVISOR_NAME = "heuristic-v2"
ADVISORS = (ADVISOR_V1, ADVISOR_NAME)

# Nominal hardware summary fed to the advisor (fixed numbers, so the advisor input of a workload
# is identical across passes; the measured environment goes to env.json and the env hash).
H200 = {
    "gpu": "NVIDIA H200",
    "sms": 132,
    "cc": "9.0",
    "smem_optin": 232448,
    "l2": 62914560,
    "bw_gbs": 4244,
    "bf16_tflops": 790,
    "triton": "3.6.0",
}

LAUNCH_US = 2.5  # per extra kernel launch, est.

FAMILIES_BY_REGIME = {
    "decode_gemm": ["gemv_splitn", "gemv_splitk", "tc_gemm_splitk", "vendor"],
    "mid_gemm": ["tc_gemm", "tc_gemm_splitk", "vendor"],
    "large_gemm": ["tc_gemm", "tc_gemm_splitk", "vendor"],
    "rmsnorm": ["rmsnorm_rows", "vendor"],
    "softmax": ["softmax_split", "softmax_online", "softmax_onepass", "vendor"],
    "swiglu": ["swiglu_2d", "vendor"],
    "rmsnorm_residual": ["rmsnorm_residual_rows", "vendor"],
}
INDUCTOR_OPS = ("rmsnorm", "softmax", "swiglu", "rmsnorm_residual")

DEFAULT_TOP_K = {"decode_gemm": 8, "mid_gemm": 6, "large_gemm": 6, "rmsnorm": 6, "softmax": 6, "swiglu": 6,
                 "rmsnorm_residual": 6}

# Fixed tile palettes, so compiled kernels are shared across shapes (M, N, K are runtime args).
TC_TILES = [  # (BM, BN, BK, warps, stages)
    (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4),
    (256, 128, 64, 8, 3),
    (128, 128, 64, 4, 4),
    (128, 128, 64, 8, 3),
    (128, 128, 128, 8, 3),
    (128, 128, 128, 8, 4),  # 262,144 B smem: pruned (exact) — kept as a visible pruning case
    (128, 256, 128, 8, 3),  # 294,912 B: pruned
    (64, 256, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 64, 64, 4, 4),
    (64, 128, 128, 4, 3),
    (256, 256, 64, 8, 3),  # acc 256 regs/thread: pruned (est.)
]
TC_SMALL_M_TILES = [  # for M <= 64: (BM, BN, BK, warps, stages)
    (16, 64, 128, 4, 3),
    (16, 128, 128, 4, 3),
    (16, 64, 256, 4, 3),
    (32, 64, 128, 4, 3),
    (32, 128, 128, 4, 3),
    (64, 64, 128, 4, 3),
    (64, 128, 64, 4, 4),
]


def regime(w: Workload) -> str:
    if w.op == "gemm":
        if w.m <= 8:
            return "decode_gemm"
        if w.m < 190:
            return "mid_gemm"
        return "large_gemm"
    return w.op


# --------------------------------------------------------------------------- advisor input


def region(w: Workload, hw: dict[str, Any] = H200) -> dict[str, Any]:
    bw = hw["bw_gbs"] * 1e9
    peak = hw["bf16_tflops"] * 1e12
    e = L.ELEM_BYTES.get(w.dtype, 2)
    if w.op == "gemm":
        flops = 2 * w.m * w.n * w.k
        min_bytes = e * (w.m * w.k + w.n * w.k + w.m * w.n)
    elif w.op == "rmsnorm":
        flops = 4 * w.m * w.n
        min_bytes = e * (2 * w.m * w.n + w.n)
    elif w.op == "rmsnorm_residual":  # read x, d, w; write y and s
        flops = 5 * w.m * w.n
        min_bytes = e * (4 * w.m * w.n + w.n)
    elif w.op == "swiglu":
        flops = 5 * w.m * w.n
        min_bytes = e * 3 * w.m * w.n
    elif w.op == "softmax":
        flops = 4 * w.m * w.n
        min_bytes = e * 2 * w.m * w.n
    else:
        flops, min_bytes = 0, 0
    t_mem = min_bytes / bw
    t_fl = flops / peak
    intensity = flops / min_bytes if min_bytes else 0.0
    return {
        "flops": flops,
        "min_bytes": min_bytes,
        "intensity": round(intensity, 3),
        "bound": "compute" if t_fl > t_mem else "memory",
        "floor_us": round(max(t_mem, t_fl) * 1e6, 3),
        "cublas_us": None,
    }


def space(w: Workload, version: str = ADVISOR_NAME) -> dict[str, Any]:
    r = regime(w)
    fams = list(FAMILIES_BY_REGIME.get(r, ["vendor"]))
    if version != ADVISOR_V1 and w.op in INDUCTOR_OPS:
        fams.insert(len(fams) - 1, "inductor")
    if r == "decode_gemm":
        params = {"BLOCK_M": [L.next_pow2(w.m)], "BLOCK_N": [4, 8, 16, 32, 64, 128],
                  "BLOCK_K": [128, 256, 512, 1024], "num_warps": [2, 4, 8], "num_stages": [1, 2, 3, 4],
                  "SPLIT_K": [1, 2, 4, 8]}
        cons = ["BN*BK<=1048576", "BM*BN*BK/(32*warps)<=128 (spills above, ptxas sm_90a)", "cdiv(K,BK)>=SPLIT_K"]
    elif r in ("mid_gemm", "large_gemm"):
        params = {"BLOCK_M": [16, 32, 64, 128, 256], "BLOCK_N": [64, 128, 256], "BLOCK_K": [64, 128, 256],
                  "GROUP_M": [8], "num_warps": [4, 8], "num_stages": [2, 3, 4], "SPLIT_K": [1, 2, 4, 8]}
        cons = ["stages*(BM*BK+BK*BN)*2<=232448", "dot dims>=16", "BM*BN/(32*warps)<=200 (est.)"]
    elif r in ("rmsnorm", "rmsnorm_residual"):
        params = {"BLOCK_D": [L.next_pow2(w.n)], "ROWS": [1, 2, 4, 8, 16], "num_warps": [1, 2, 4, 8, 16]}
        cons = ["BLOCK_D>=D", "BLOCK_D*2<=65536", "ROWS*BLOCK_D<=1048576"]
    elif r == "softmax":
        params = {"BLOCK": [1024, 2048, 4096, 8192, 16384, L.next_pow2(w.n)], "CHUNKS": [16, 32, 64, 128],
                  "num_warps": [4, 8, 16, 32], "num_stages": [1, 2]}
        cons = ["BLOCK<=1048576", "one-pass: BLOCK>=C", "one-pass: BLOCK/(32*warps)<=64"]
    elif r == "swiglu":
        params = {"BLOCK": [512, 1024, 2048, 4096, 8192], "num_warps": [2, 4, 8]}
        cons = ["BLOCK/(32*warps)<=64 (est.)"]
    else:
        params, cons = {}, []
    return {"families": fams, "params": params, "constraints": cons}


def advisor_input(w: Workload, hw: dict[str, Any] = H200, *, top_k: int | None = None,
                  max_candidates: int = 48, version: str = ADVISOR_NAME) -> dict[str, Any]:
    """The advisor's input JSON for one workload. It never contains measured numbers.

    Raises:
        ValueError: unknown advisor ``version`` (one of :data:`ADVISORS`).
    """
    if version not in ADVISORS:
        raise ValueError(f"unknown advisor version {version!r}; known: {', '.join(ADVISORS)}")
    return {
        "schema": SCHEMA,
        "workload": {"op": w.op, "m": w.m, "n": w.n, "k": w.k, "dtype": w.dtype, "layout": w.layout,
                     "model": w.model, "site": w.site, "phase": w.phase, "m_tokens": w.m_tokens,
                     "key": w.key},
        "hardware": dict(hw),
        "region": region(w, hw),
        "space": space(w, version),
        "budget": {"max_candidates": max_candidates,
                   "top_k": top_k if top_k is not None else DEFAULT_TOP_K.get(regime(w), 6),
                   "max_device_s": 20},
    }


# --------------------------------------------------------------------------- schema

_INPUT_KEYS = {"schema", "workload", "hardware", "region", "space", "budget"}
_OUTPUT_KEYS = {"labels", "family_priority", "param_hints", "candidates", "risks", "fallback"}

try:  # pydantic is a project dependency on the CPU side; the device image may lack it
    from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

    class _Strict(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)

    class WorkloadModel(_Strict):
        op: str
        m: int
        n: int
        k: int
        dtype: str
        layout: str
        model: str
        site: str
        phase: str
        m_tokens: int
        key: str

    class HardwareModel(_Strict):
        gpu: str
        sms: int
        cc: str
        smem_optin: int
        l2: int
        bw_gbs: int | float
        bf16_tflops: int | float
        triton: str

    class RegionModel(_Strict):
        flops: int
        min_bytes: int
        intensity: float | int
        bound: str
        floor_us: float | int
        cublas_us: float | int | None

    class SpaceModel(_Strict):
        families: list[str]
        params: dict[str, list[int]]
        constraints: list[str]

    class BudgetModel(_Strict):
        max_candidates: int
        top_k: int
        max_device_s: int | float

    class AdvisorInputModel(_Strict):
        schema_: str
        workload: WorkloadModel
        hardware: HardwareModel
        region: RegionModel
        space: SpaceModel
        budget: BudgetModel

        model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

        @field_validator("schema_")
        @classmethod
        def _schema(cls, v: str) -> str:
            if v != SCHEMA:
                raise ValueError(f"schema must be {SCHEMA}")
            return v

    class CandidateModel(BaseModel):
        model_config = ConfigDict(extra="allow", strict=True)
        family: str

        @field_validator("family")
        @classmethod
        def _fam(cls, v: str) -> str:
            if v not in L.FAMILIES:
                raise ValueError(f"unknown family {v}")
            return v

    class AdvisorOutputModel(_Strict):
        labels: list[str]
        family_priority: list[str]
        param_hints: dict[str, list[int]]
        candidates: list[CandidateModel]
        risks: list[str]
        fallback: str

        @field_validator("fallback")
        @classmethod
        def _fb(cls, v: str) -> str:
            if v != "vendor":
                raise ValueError("fallback must be 'vendor'")
            return v

        @field_validator("family_priority")
        @classmethod
        def _fp(cls, v: list[str]) -> list[str]:
            bad = [f for f in v if f not in L.FAMILIES]
            if bad:
                raise ValueError(f"unknown families {bad}")
            return v

    HAVE_PYDANTIC = True
except Exception:  # pragma: no cover - exercised on the device image without pydantic
    HAVE_PYDANTIC = False


class SchemaError(ValueError):
    pass


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _builtin_validate_output(obj: Any) -> None:
    if not isinstance(obj, dict) or set(obj) != _OUTPUT_KEYS:
        raise SchemaError(f"output keys must be {sorted(_OUTPUT_KEYS)}")
    for f in ("labels", "risks", "family_priority"):
        if not isinstance(obj[f], list) or not all(isinstance(s, str) for s in obj[f]):
            raise SchemaError(f"{f} must be a list of strings")
    if any(f not in L.FAMILIES for f in obj["family_priority"]):
        raise SchemaError("unknown family in family_priority")
    ph = obj["param_hints"]
    if not isinstance(ph, dict) or not all(isinstance(k, str) and isinstance(v, list) and all(_is_int(i) for i in v)
                                           for k, v in ph.items()):
        raise SchemaError("param_hints must map names to lists of ints")
    if not isinstance(obj["candidates"], list):
        raise SchemaError("candidates must be a list")
    for c in obj["candidates"]:
        if not isinstance(c, dict) or not isinstance(c.get("family"), str) or c["family"] not in L.FAMILIES:
            raise SchemaError("candidate needs a known family")
        if not all(_is_int(v) for k, v in c.items() if k != "family"):
            raise SchemaError("candidate params must be ints")
    if obj["fallback"] != "vendor":
        raise SchemaError("fallback must be 'vendor'")


def _builtin_validate_input(obj: Any) -> None:
    if not isinstance(obj, dict) or set(obj) != _INPUT_KEYS or obj.get("schema") != SCHEMA:
        raise SchemaError("bad advisor input envelope")
    w = obj["workload"]
    need = {"op": str, "m": int, "n": int, "k": int, "dtype": str, "layout": str, "model": str, "site": str,
            "phase": str, "m_tokens": int, "key": str}
    if not isinstance(w, dict) or set(w) != set(need) or not all(isinstance(w[k], t) for k, t in need.items()):
        raise SchemaError("bad workload")
    for part in ("hardware", "region", "space", "budget"):
        if not isinstance(obj[part], dict):
            raise SchemaError(f"bad {part}")


def validator_name() -> str:
    return "pydantic" if HAVE_PYDANTIC else "builtin"


def validate_output(obj: Any) -> dict[str, Any]:
    """Validate an advisor output; raises :class:`SchemaError`. Returns the object unchanged."""
    if HAVE_PYDANTIC:
        try:
            m = AdvisorOutputModel.model_validate(obj)
        except ValidationError as e:
            raise SchemaError(str(e).splitlines()[0]) from None
        for c in m.candidates:
            extra = c.model_extra or {}
            if not all(_is_int(v) for v in extra.values()):
                raise SchemaError("candidate params must be ints")
        return obj
    _builtin_validate_output(obj)
    return obj


def validate_input(obj: Any) -> dict[str, Any]:
    if HAVE_PYDANTIC:
        try:
            d = dict(obj) if isinstance(obj, dict) else obj
            if isinstance(d, dict) and "schema" in d:
                d = {("schema_" if k == "schema" else k): v for k, v in d.items()}
            AdvisorInputModel.model_validate(d)
        except ValidationError as e:
            raise SchemaError(str(e).splitlines()[0]) from None
        return obj
    _builtin_validate_input(obj)
    return obj


# --------------------------------------------------------------------------- heuristic advisor


def _product(fam: str, grid: dict[str, list[int]]) -> list[dict[str, Any]]:
    names = list(grid)
    out = []
    for vals in itertools.product(*(grid[n] for n in names)):
        c = {"family": fam}
        c.update(dict(zip(names, vals)))
        out.append(c)
    return out


def _fair_cap(cands: list[dict[str, Any]], fams: list[str], cap: int) -> list[dict[str, Any]]:
    """At most ``cap`` proposals, taken round-robin over families in priority order (each
    family's own order kept), so a long family cannot crowd the others out."""
    if len(cands) <= cap:
        return cands
    groups = {f: [c for c in cands if c["family"] == f] for f in fams}
    for c in cands:
        groups.setdefault(c["family"], [])
        if c["family"] not in fams and c not in groups[c["family"]]:
            groups[c["family"]].append(c)
    out: list[dict[str, Any]] = []
    i = 0
    while len(out) < cap and any(i < len(g) for g in groups.values()):
        for g in groups.values():
            if i < len(g) and len(out) < cap:
                out.append(g[i])
        i += 1
    return out


def heuristic_advise(inp: dict[str, Any]) -> dict[str, Any]:
    """Deterministic advisor: labels, family priority, hints, proposals, risks."""
    w = inp["workload"]
    hw = inp["hardware"]
    sms = int(hw["sms"])
    op, m, n, k = w["op"], w["m"], w["n"], w["k"]
    labels: list[str] = []
    risks: list[str] = []
    cands: list[dict[str, Any]] = []
    hints: dict[str, list[int]] = {}
    if L.workload_support(op, m, n, k, w["dtype"]):
        return {"labels": ["unsupported"], "family_priority": ["vendor"], "param_hints": {}, "candidates": [],
                "risks": [L.workload_support(op, m, n, k, w["dtype"]) or ""], "fallback": "vendor"}
    if op == "gemm":
        if m <= 8:
            labels += ["decode_gemv", "memory_bound", "fusable_prologue:rmsnorm"]
            bm = L.next_pow2(m)
            bns = [8, 16, 32, 64] if m <= 2 else [8, 16, 32]
            bks = [256, 512] if m <= 2 else [128, 256, 512]
            hints = {"BLOCK_M": [bm], "BLOCK_N": bns, "BLOCK_K": bks, "num_warps": [4, 8], "num_stages": [1, 3]}
            cands += _product("gemv_splitn", {"BLOCK_M": [bm], "BLOCK_N": bns, "BLOCK_K": bks, "SPLIT_K": [1],
                                              "num_warps": [4, 8], "num_stages": [1, 3]})
            # split-K where split-N alone under-fills the machine (cdiv(N, BN) < 2·SMs)
            for bn in bns:
                tiles = L.cdiv(n, bn)
                if tiles < 2 * sms:
                    sk = min(8, L.next_pow2(L.cdiv(2 * sms, tiles)))
                    risks.append(f"cdiv(N,{bn})={tiles} < 2*SMs → split-K {sk}")
                    for bk in bks:
                        cands += _product("gemv_splitk", {"BLOCK_M": [bm], "BLOCK_N": [bn], "BLOCK_K": [bk],
                                                          "SPLIT_K": [sk], "num_warps": [4], "num_stages": [1, 3]})
            for bm_, bn_, bk_, wp, st in TC_SMALL_M_TILES[:3]:
                tiles = L.cdiv(n, bn_)
                sk = max(2, min(8, L.next_pow2(L.cdiv(sms, tiles))))
                cands.append({"family": "tc_gemm_splitk", "BLOCK_M": bm_, "BLOCK_N": bn_, "BLOCK_K": bk_,
                              "GROUP_M": 8, "SPLIT_K": sk, "num_warps": wp, "num_stages": st})
            fam = ["gemv_splitn", "gemv_splitk", "tc_gemm_splitk", "vendor"]
        else:
            labels += ["tensor_core_gemm", "memory_bound" if m < 190 else "compute_bound"]
            tiles_src = (TC_SMALL_M_TILES if m <= 64 else []) + TC_TILES
            for bm_, bn_, bk_, wp, st in tiles_src:
                base = {"BLOCK_M": bm_, "BLOCK_N": bn_, "BLOCK_K": bk_, "GROUP_M": 8, "num_warps": wp,
                        "num_stages": st}
                cands.append({"family": "tc_gemm", **base, "SPLIT_K": 1})
                tiles = L.cdiv(m, bm_) * L.cdiv(n, bn_)
                if tiles < sms:
                    sk = min(8, L.next_pow2(L.cdiv(sms, tiles)))
                    if sk >= 2:
                        cands.append({"family": "tc_gemm_splitk", **base, "SPLIT_K": sk})
                        risks.append(f"tiles {bm_}x{bn_}={tiles} < SMs → split-K {sk}")
            hints = {"BLOCK_M": sorted({c[0] for c in tiles_src}), "BLOCK_N": sorted({c[1] for c in tiles_src}),
                     "BLOCK_K": sorted({c[2] for c in tiles_src}), "num_warps": [4, 8], "num_stages": [3, 4]}
            fam = ["tc_gemm", "tc_gemm_splitk", "vendor"]
    elif op in ("rmsnorm", "rmsnorm_residual"):
        bd = L.next_pow2(n)
        labels += (["residual_add"] if op == "rmsnorm_residual" else []) + ["row_reduction", "memory_bound"] \
            + (["latency_bound"] if m * n * 2 < (1 << 20) else [])
        rows_opts = [1, 2, 4, 8, 16] if bd <= 512 else [1, 2]
        warp_opts = [1, 2, 4] if bd <= 512 else [2, 4, 8, 16]
        hints = {"BLOCK_D": [bd], "ROWS": rows_opts, "num_warps": warp_opts}
        tfam = "rmsnorm_rows" if op == "rmsnorm" else "rmsnorm_residual_rows"
        cands += _product(tfam, {"BLOCK_D": [bd], "ROWS": rows_opts, "num_warps": warp_opts})
        fam = [tfam, "vendor"]
        risks.append("fusion into the next GEMV is the real lever (est.)")
    elif op == "softmax":
        labels += ["row_softmax", "vocab_row", "memory_bound"]
        big = L.next_pow2(n)
        cands += _product("softmax_onepass", {"BLOCK": [big], "num_warps": [16, 32]})
        cands += _product("softmax_online", {"BLOCK": [2048, 4096, 8192], "num_warps": [8, 16], "num_stages": [1]})
        cands += _product("softmax_split", {"BLOCK": [1024, 2048, 4096], "CHUNKS": [16, 32, 64],
                                            "num_warps": [4, 8]})
        hints = {"BLOCK": [1024, 2048, 4096, 8192, big], "CHUNKS": [16, 32, 64], "num_warps": [4, 8, 16, 32]}
        fam = ["softmax_split", "softmax_online", "softmax_onepass", "vendor"]
        if m < sms:
            risks.append(f"rows={m} < SMs: one program per row leaves SMs idle → split rows")
    elif op == "swiglu":
        labels += ["elementwise", "memory_bound"] + (["latency_bound"] if m * n * 6 < (1 << 20) else [])
        cands += _product("swiglu_2d", {"BLOCK": [512, 1024, 2048, 4096], "num_warps": [2, 4, 8]})
        hints = {"BLOCK": [512, 1024, 2048, 4096], "num_warps": [2, 4, 8]}
        fam = ["swiglu_2d", "vendor"]
        risks.append("fusion into the down-projection prologue is the real lever (est.)")
    else:  # pragma: no cover - guarded by workload_support
        fam = ["vendor"]
    if "inductor" in inp["space"]["families"]:  # torch.compile's kernel competes as one more candidate
        cands.append({"family": "inductor"})
        fam.insert(len(fam) - 1, "inductor")
    maxc = int(inp["budget"]["max_candidates"])
    return {"labels": labels, "family_priority": fam, "param_hints": hints, "candidates": _fair_cap(cands, fam, maxc),
            "risks": risks, "fallback": "vendor"}


# --------------------------------------------------------------------------- LLM hook (off)


class LLMAdvisor:
    """Optional OpenAI-compatible advisor; OFF unless ``AUTO_KT_LLM_BASE_URL`` and
    ``AUTO_KT_LLM_MODEL`` are set (and never on the device, which has no network). Calls go through
    :class:`auto.frontier.FrontierClient`: with the default spend cap of 0 they are refused, and
    the refusal (like any failure) makes ``advise`` return None, i.e. the heuristic plan is used.

    ``advise`` returns the parsed JSON object or None; it never raises. Its output is used only
    after :func:`validate_output` and the legality filter: it can change order and coverage,
    never correctness.
    """

    def __init__(self, base_url: str | None = None, model: str | None = None, transport: Any = None):
        self.base_url = base_url if base_url is not None else os.environ.get("AUTO_KT_LLM_BASE_URL")
        self.model = model if model is not None else os.environ.get("AUTO_KT_LLM_MODEL")
        self.transport = transport  # callable(prompt_json: str) -> str, for tests

    @property
    def enabled(self) -> bool:
        return bool(self.transport) or bool(self.base_url and self.model)

    def advise(self, inp: dict[str, Any]) -> Any:
        if not self.enabled:
            return None
        try:
            prompt = json.dumps(inp, sort_keys=True)
            if self.transport is not None:
                text = self.transport(prompt)
            else:  # a paid call: only through Auto's spend-capped client (default cap 0 refuses)
                from openai import OpenAI

                from auto.frontier import FrontierClient

                client = FrontierClient(self.model, client=OpenAI(base_url=self.base_url,
                                                                  api_key=os.environ.get("AUTO_KT_LLM_API_KEY", "none")))
                text = client.chat(
                    [{"role": "system", "content": "Return only JSON matching auto.kt.advise.v1 output."},
                     {"role": "user", "content": prompt}], purpose="kernel-tuning advisor", temperature=0)
            return json.loads(text)
        except Exception:
            return None


# --------------------------------------------------------------------------- rank + plan


def cand_id(family: str, cfg: dict[str, int]) -> str:
    if family in ("vendor", "inductor"):
        return family
    return family + ":" + ",".join(f"{k}={cfg[k]}" for k in sorted(cfg))


def split_cand(c: dict[str, Any]) -> tuple[str, dict[str, int]]:
    fam = c["family"]
    cfg = {k: v for k, v in c.items() if k != "family"}
    return fam, cfg


def predict_us(family: str, cfg: dict[str, int], w: Workload, hw: dict[str, Any] = H200) -> float:
    """Analytic time estimate (µs): bytes/BW and FLOP/peak with wave quantization and
    occupancy/latency penalties. Only an ordering device: all coefficients are (est.)."""
    bw = hw["bw_gbs"] * 1e9 * 0.9
    peak = hw["bf16_tflops"] * 1e12
    sms = hw["sms"]
    e = L.ELEM_BYTES.get(w.dtype, 2)
    m, n, k = w.m, w.n, w.k
    if family == "vendor":
        return region(w, hw)["floor_us"] * 1.15 + 4.0
    if family == "inductor":  # one fused generated kernel (est.)
        return region(w, hw)["floor_us"] * 1.1 + 3.0
    if family in ("gemv_splitn", "gemv_splitk"):
        bn, bk, sk, wp, st = cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["SPLIT_K"], cfg["num_warps"], cfg["num_stages"]
        ctas = L.cdiv(n, bn) * sk
        byts = e * (n * k + m * k + m * n) + (8 * sk * m * n if sk > 1 else 0)
        occ = max(1, min(16, 64 // wp))
        active = min(L.cdiv(ctas, sms), occ)
        inflight = active * bn * bk * e * max(1, min(st, 2))
        lat = min(1.0, inflight / 40960.0)
        waves = L.cdiv(ctas, sms * occ)
        wave_eff = ctas / (waves * sms * occ) if ctas < sms * occ else 1.0
        fill = min(1.0, ctas / (2 * sms))
        eff = max(0.05, lat * max(fill, wave_eff))
        per_thread = cfg["BLOCK_M"] * bn * bk / (32 * wp)
        reg_pen = 1.0 + max(0.0, per_thread / 128.0 - 1.0) * 0.3
        iters = L.cdiv(L.cdiv(k, sk), bk)
        iter_pen = 1.0 + 0.2 / iters
        return byts / (bw * eff) * 1e6 * reg_pen * iter_pen + 3.0 + (LAUNCH_US if sk > 1 else 0.0)
    if family in ("tc_gemm", "tc_gemm_splitk"):
        bm, bn, bk, sk, wp = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["SPLIT_K"], cfg["num_warps"]
        tiles = L.cdiv(m, bm) * L.cdiv(n, bn) * sk
        waves = L.cdiv(tiles, sms)
        wave_eff = tiles / (waves * sms)
        area = bm * bn
        tile_eff = 0.85 if area >= 32768 else 0.75 if area >= 16384 else 0.6 if area >= 8192 else 0.45 if area >= 4096 else 0.3
        if wp == 4 and area >= 32768:
            tile_eff *= 0.9
        m_waste = m / (L.cdiv(m, bm) * bm)
        t_c = 2 * m * n * k / (peak * tile_eff * wave_eff * m_waste)
        traffic = e * (m * k * L.cdiv(n, bn) * 0.25 + n * k * max(1.0, L.cdiv(m, bm) * 0.25) + m * n)
        if sk > 1:
            traffic += 8 * sk * m * n
        fill = min(1.0, tiles / sms)
        t_m = traffic / (bw * max(0.1, fill))
        iters = L.cdiv(L.cdiv(k, sk), bk)
        iter_pen = 1.0 + 1.0 / iters
        return max(t_c, t_m) * 1e6 * iter_pen + 3.0 + (LAUNCH_US if sk > 1 else 0.0)
    if family in ("rmsnorm_rows", "rmsnorm_residual_rows"):
        rows, wp, bd = cfg["ROWS"], cfg["num_warps"], cfg["BLOCK_D"]
        progs = L.cdiv(m, rows)
        byts = e * ((2 if family == "rmsnorm_rows" else 4) * m * n + n)
        fill = min(1.0, progs / (2 * sms))
        pad = n / bd
        per_thread = rows * bd / (32 * wp)
        vec = 1.0 if per_thread >= 8 else 0.6 + 0.05 * per_thread
        return byts / (bw * max(0.05, fill * pad * vec)) * 1e6 + 3.0
    if family == "swiglu_2d":
        b, wp = cfg["BLOCK"], cfg["num_warps"]
        progs = m * L.cdiv(n, b)
        byts = e * 3 * m * n
        fill = min(1.0, progs / (2 * sms))
        per_thread = b / (32 * wp)
        vec = 1.0 if per_thread >= 8 else 0.6 + 0.05 * per_thread
        return byts / (bw * max(0.05, fill * vec)) * 1e6 + 3.0
    if family == "softmax_onepass":
        byts = e * 2 * m * n
        fill = min(1.0, m / sms)
        return byts / (bw * max(0.02, fill * 0.8)) * 1e6 + 3.0
    if family == "softmax_online":
        byts = e * 3 * m * n
        fill = min(1.0, m / sms)
        per_sm_bw = 0.06  # one SM streams ~6% of HBM BW (est.)
        return byts / (bw * max(per_sm_bw * m, fill)) * 1e6 + 3.0
    if family == "softmax_split":
        ch, b, wp = cfg["CHUNKS"], cfg["BLOCK"], cfg["num_warps"]
        progs = m * ch
        byts = e * 3 * m * n + 8 * m * ch
        fill = min(1.0, progs / (2 * sms))
        per_thread = b / (32 * wp)
        vec = 1.0 if per_thread >= 8 else 0.6 + 0.05 * per_thread
        return byts / (bw * max(0.03, fill * vec)) * 1e6 + 3.0 + LAUNCH_US
    return 1e9


_DIV_FIELDS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "ROWS", "BLOCK", "CHUNKS")


def _div_key(c: dict[str, Any]) -> tuple:
    return (c["family"],) + tuple(c["config"].get(f) for f in _DIV_FIELDS)


@dataclass
class Plan:
    workload: Workload
    advisor_input: dict[str, Any]
    advisor_output: dict[str, Any]
    advisor_name: str
    supported: bool
    unsupported_reason: str | None
    proposals: int
    pruned: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)  # [vendor] + top-k, with ids
    llm: dict[str, Any] = field(default_factory=dict)


def make_plan(w: Workload, hw: dict[str, Any] = H200, *, top_k: int | None = None,
              llm: LLMAdvisor | None = None, extra_candidates: list[dict[str, Any]] | None = None,
              version: str = ADVISOR_NAME) -> Plan:
    """Advisor → schema check → legality → analytic rank → top-k. Deterministic when ``llm`` is
    off. ``extra_candidates`` (fault injection / tests) bypass the advisor but not legality,
    unless an entry carries ``"_bypass_legality": True``.

    The candidate list is ``[vendor]`` + (``inductor`` when the advisor proposes it: always
    measured, outside the top-k) + the top-k Triton candidates. ``version`` selects the advisor
    (:data:`ADVISORS`; a record's ``kt.advisor`` names the one that planned it, ``+llm`` aside).

    Raises:
        ValueError: unknown ``version``.
    """
    version = version.removesuffix("+llm")
    inp = advisor_input(w, hw, top_k=top_k, version=version)
    validate_input(inp)
    out = heuristic_advise(inp)
    validate_output(out)
    name = version
    llm_info: dict[str, Any] = {"enabled": bool(llm and llm.enabled)}
    proposals = list(out["candidates"])
    if llm is not None and llm.enabled:
        raw = llm.advise(inp)
        try:
            validate_output(raw)
            legal_llm = []
            dropped = 0
            for c in raw["candidates"]:
                fam, cfg = split_cand(c)
                if fam in inp["space"]["families"] and L.is_legal(fam, cfg, w.op, w.m, w.n, w.k, w.dtype):
                    legal_llm.append(c)
                else:
                    dropped += 1
            if dropped:
                raise L_IllegalProposal(f"{dropped} illegal or out-of-space LLM candidates")
            proposals = legal_llm + proposals
            llm_info.update(accepted=True, n=len(legal_llm))
            name = version + "+llm"
        except (SchemaError, L_IllegalProposal, TypeError, KeyError) as e:
            llm_info.update(accepted=False, reason=str(e)[:200])
    why = L.workload_support(w.op, w.m, w.n, w.k, w.dtype)
    vendor = {"id": "vendor", "family": "vendor", "config": {}, "predicted_us": round(predict_us("vendor", {}, w, hw), 3)}
    plan = Plan(w, inp, out, name, why is None, why, len(proposals), llm=llm_info)
    if why is not None:
        plan.candidates = [vendor]
        return plan
    seen: set[str] = set()
    legal: list[dict[str, Any]] = []
    forced: list[dict[str, Any]] = []
    for c in proposals:
        fam, cfg = split_cand(c)
        cid = cand_id(fam, cfg)
        if cid in seen or fam == "vendor":
            continue
        if fam == "inductor" and not L.check(fam, cfg, w.op, w.m, w.n, w.k, w.dtype):
            seen.add(cid)
            forced.append({"id": cid, "family": fam, "config": cfg,
                           "predicted_us": round(predict_us(fam, cfg, w, hw), 3)})
            continue
        seen.add(cid)
        viol = L.check(fam, cfg, w.op, w.m, w.n, w.k, w.dtype)
        if viol:
            plan.pruned.append({"id": cid, "family": fam, "config": cfg, "violations": [x.to_json() for x in viol]})
            continue
        legal.append({"id": cid, "family": fam, "config": cfg, "predicted_us": round(predict_us(fam, cfg, w, hw), 3)})
    k_top = int(inp["budget"]["top_k"])
    order = {f: i for i, f in enumerate(out["family_priority"])}
    legal.sort(key=lambda c: (c["predicted_us"], order.get(c["family"], 99), c["id"]))
    chosen: list[dict[str, Any]] = []
    # diversity: the best of each family first (in family-priority order), then by rank
    for fam in out["family_priority"]:
        best = next((c for c in legal if c["family"] == fam), None)
        if best is not None and len(chosen) < k_top:
            chosen.append(best)
    # then the best of each new tile shape (diversity key), then the rest by rank
    seen_div = {_div_key(c) for c in chosen}
    for c in legal:
        if len(chosen) >= k_top:
            break
        if c not in chosen and _div_key(c) not in seen_div:
            chosen.append(c)
            seen_div.add(_div_key(c))
    for c in legal:
        if len(chosen) >= k_top:
            break
        if c not in chosen:
            chosen.append(c)
    chosen.sort(key=lambda c: (c["predicted_us"], c["id"]))
    for c in extra_candidates or []:
        fam, cfg = split_cand({k: v for k, v in c.items() if k != "_bypass_legality"})
        cid = cand_id(fam, cfg)
        if not c.get("_bypass_legality"):
            viol = L.check(fam, cfg, w.op, w.m, w.n, w.k, w.dtype)
            if viol:
                plan.pruned.append({"id": cid, "family": fam, "config": cfg,
                                    "violations": [x.to_json() for x in viol]})
                continue
        chosen.append({"id": cid, "family": fam, "config": cfg, "predicted_us": None,
                       "injected": True})
    plan.candidates = [vendor] + forced + chosen
    return plan


class L_IllegalProposal(ValueError):
    pass
