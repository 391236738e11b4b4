"""Static legality of a (family, config) on a workload, before anything is compiled.

Pure Python. Two kinds of rule (Triton 3.6 sources named per rule; limits measured on an H200):

* ``exact``: what Triton 3.6 on sm_90 refuses, or what our templates cannot compute:
  power-of-two block dims (``tl.arange``), block tensor numel ≤ 2**20 (``TRITON_MAX_TENSOR_NUMEL``),
  ``num_warps`` a power of two ≤ 32, ``tl.dot`` dims ≥ 16, software-pipeline shared memory
  ``stages·(BM·BK + BK·BN)·2 B`` ≤ 232,448 B (opt-in limit; OutOfResources otherwise), one-pass
  rows must fit one block, every split-K slice must own at least one K block, ...
* ``heuristic``: estimated register spills (fp32 elements per thread of the largest live tile);
  these are pruned too but are marked ``(est.)`` so a reader can tell them apart.

``check(family, config, workload)`` returns the list of :class:`Violation`; empty = legal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SMEM_OPTIN_BYTES = 232_448
MAX_TENSOR_NUMEL = 1 << 20
MAX_WARPS = 32
ONEPASS_ROW_BYTES = 65_536  # Triton tutorial 05-layer-norm MAX_FUSED_SIZE = 65536 // elem
TC_ACC_REGS_PER_THREAD = 200  # fp32 accumulator elements per thread above which spills (est.)
# fp32 elements per thread of a live register tile above which ptxas spills. Checked offline with
# Triton 3.6 + ptxas -v for sm_90a over the corpus' GEMV variants (aot_check): 256/thread spilled
# 512-4928 B in every case, <= 128/thread never spilled; softmax one-pass at 128 x 2 live spilled.
REG_TILE_PER_THREAD = 128

ELEM_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}

FAMILIES = {
    "vendor": "gemm|rmsnorm|swiglu|softmax|rmsnorm_residual",
    "inductor": "rmsnorm|swiglu|softmax|rmsnorm_residual",
    "gemv_splitn": "gemm",
    "gemv_splitk": "gemm",
    "tc_gemm": "gemm",
    "tc_gemm_splitk": "gemm",
    "rmsnorm_rows": "rmsnorm",
    "rmsnorm_residual_rows": "rmsnorm_residual",
    "softmax_onepass": "softmax",
    "softmax_online": "softmax",
    "softmax_split": "softmax",
    "swiglu_2d": "swiglu",
}

PARAMS = {
    "vendor": (),
    "inductor": (),
    "gemv_splitn": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages"),
    "gemv_splitk": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages"),
    "tc_gemm": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K", "num_warps", "num_stages"),
    "tc_gemm_splitk": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K", "num_warps", "num_stages"),
    "rmsnorm_rows": ("BLOCK_D", "ROWS", "num_warps"),
    "rmsnorm_residual_rows": ("BLOCK_D", "ROWS", "num_warps"),
    "softmax_onepass": ("BLOCK", "num_warps"),
    "softmax_online": ("BLOCK", "num_warps", "num_stages"),
    "softmax_split": ("BLOCK", "CHUNKS", "num_warps"),
    "swiglu_2d": ("BLOCK", "num_warps"),
}

SUPPORTED_DTYPES = {"gemm": ("bf16",), "rmsnorm": ("bf16",), "swiglu": ("bf16",), "softmax": ("fp32",),
                    "rmsnorm_residual": ("bf16",)}


@dataclass(frozen=True)
class Violation:
    rule: str
    kind: str  # "exact" | "heuristic"
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"rule": self.rule, "kind": self.kind, "detail": self.detail}


def is_pow2(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1 and (x & (x - 1)) == 0


def next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (int(x) - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tc_smem_bytes(bm: int, bn: int, bk: int, stages: int, elem: int = 2) -> int:
    """Shared memory of the pipelined A/B tiles: stages·(BM·BK + BK·BN)·elem (exact: on an H200 Triton
    3.6 raised ``OutOfResources ... Required: 393216, Hardware limit: 232448`` for (128, 256, 128, 4
    stages), as ``traces/kernel-tuning/faults.jsonl`` records)."""
    return stages * (bm * bk + bk * bn) * elem


def workload_support(op: str, m: int, n: int, k: int, dtype: str) -> str | None:
    """Why the Triton templates cannot serve this workload at all (None when they can)."""
    if op not in SUPPORTED_DTYPES:
        return f"unsupported op {op!r}"
    if dtype not in SUPPORTED_DTYPES[op]:
        return f"unsupported dtype {dtype!r} for {op}"
    if m < 1 or n < 1 or (op == "gemm" and k < 1):
        return "empty shape"
    if op == "gemm" and (k % 8 or n % 8):
        return "N and K must be multiples of 8 (16-byte rows)"
    if max(m, n, k) >= 2**31 or m * max(n, 1) >= 2**31 or n * max(k, 1) >= 2**31:
        return "int32 index overflow"
    return None


def check(family: str, cfg: dict[str, int], op: str, m: int, n: int, k: int, dtype: str) -> list[Violation]:
    """All violated rules of ``family`` with ``cfg`` on the workload (empty list = legal)."""
    v: list[Violation] = []

    def ex(rule: str, detail: str) -> None:
        v.append(Violation(rule, "exact", detail))

    def he(rule: str, detail: str) -> None:
        v.append(Violation(rule, "heuristic", detail + " (est.)"))

    if family not in FAMILIES:
        ex("unknown_family", family)
        return v
    if family != "vendor" and op not in FAMILIES[family].split("|"):
        ex("family_op", f"{family} does not implement {op}")
        return v
    if family == "vendor":
        return v
    if family == "inductor":  # torch.compile of the vendor path: no parameters, any shape the op takes
        if cfg:
            ex("config_keys", f"inductor takes no parameters, got {sorted(cfg)}")
        return v
    why = workload_support(op, m, n, k, dtype)
    if why:
        ex("unsupported_workload", why)
        return v
    want = PARAMS[family]
    missing = [p for p in want if p not in cfg]
    extra = [p for p in cfg if p not in want]
    if missing or extra:
        ex("config_keys", f"missing {missing} extra {extra}")
        return v
    for p in want:
        if not isinstance(cfg[p], int) or isinstance(cfg[p], bool):
            ex("int_param", f"{p}={cfg[p]!r}")
    if v:
        return v
    warps = cfg["num_warps"]
    if not is_pow2(warps) or warps > MAX_WARPS:
        ex("num_warps_pow2", f"num_warps={warps} must be a power of 2 in 1..{MAX_WARPS}")
    if "num_stages" in cfg and not 1 <= cfg["num_stages"] <= 8:
        ex("num_stages_range", f"num_stages={cfg['num_stages']} not in 1..8")
    for p in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_D", "BLOCK", "ROWS", "CHUNKS", "SPLIT_K", "GROUP_M"):
        if p in cfg and not is_pow2(cfg[p]):
            ex("pow2", f"{p}={cfg[p]} is not a power of 2 (tl.arange range must be a power of 2)")
    if v:
        return v
    threads = 32 * warps
    elem = ELEM_BYTES.get(dtype, 2)

    def numel(name: str, x: int) -> None:
        if x > MAX_TENSOR_NUMEL:
            ex("max_numel", f"{name} has {x} elements > {MAX_TENSOR_NUMEL}")

    if family in ("gemv_splitn", "gemv_splitk"):
        bm, bn, bk, sk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["SPLIT_K"]
        if m > 8:
            ex("gemv_m", f"GEMV templates serve M <= 8, got {m}")
        if bm < m or bm != next_pow2(m):
            ex("gemv_block_m", f"BLOCK_M={bm} must equal next_pow2(M)={next_pow2(m)}")
        if family == "gemv_splitn" and sk != 1:
            ex("splitn_sk", "gemv_splitn has SPLIT_K=1")
        if family == "gemv_splitk" and sk < 2:
            ex("splitk_sk", "gemv_splitk needs SPLIT_K >= 2")
        if sk > 16:
            ex("split_k_range", f"SPLIT_K={sk} > 16")
        if cdiv(k, bk) < sk:
            ex("empty_split", f"cdiv(K={k}, BLOCK_K={bk}) = {cdiv(k, bk)} < SPLIT_K={sk}")
        numel("w tile", bn * bk)
        numel("x*w product", bm * bn * bk)
        if bk < 64:
            ex("gemv_bk_min", "BLOCK_K < 64 cannot form 16-byte loads across a warp")
        per_thread = bm * bn * bk // threads
        if per_thread > REG_TILE_PER_THREAD:
            he("spill_risk", f"BM·BN·BK/threads = {per_thread} fp32 > {REG_TILE_PER_THREAD}")
    elif family in ("tc_gemm", "tc_gemm_splitk"):
        bm, bn, bk, sk, st = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["SPLIT_K"], cfg["num_stages"]
        for name, d in (("BLOCK_M", bm), ("BLOCK_N", bn), ("BLOCK_K", bk)):
            if d < 16:
                ex("dot_min_dim", f"tl.dot needs M,N,K >= 16: {name}={d}")
        if family == "tc_gemm" and sk != 1:
            ex("tc_sk", "tc_gemm has SPLIT_K=1")
        if family == "tc_gemm_splitk" and sk < 2:
            ex("tc_splitk_sk", "tc_gemm_splitk needs SPLIT_K >= 2")
        if sk > 16:
            ex("split_k_range", f"SPLIT_K={sk} > 16")
        if cdiv(k, bk) < sk:
            ex("empty_split", f"cdiv(K={k}, BLOCK_K={bk}) = {cdiv(k, bk)} < SPLIT_K={sk}")
        smem = tc_smem_bytes(bm, bn, bk, st, elem)
        if smem > SMEM_OPTIN_BYTES:
            ex("smem", f"stages·(BM·BK+BK·BN)·{elem} = {smem} B > {SMEM_OPTIN_BYTES} B")
        numel("A tile", bm * bk)
        numel("B tile", bk * bn)
        numel("acc", bm * bn)
        if warps not in (4, 8):
            ex("tc_warps", "Hopper wgmma tiles here use num_warps 4 or 8")
        acc = bm * bn // threads
        if acc > TC_ACC_REGS_PER_THREAD:
            he("acc_spill", f"BM·BN/threads = {acc} fp32 acc regs > {TC_ACC_REGS_PER_THREAD}")
        if cfg["GROUP_M"] > 64:
            ex("group_m_range", f"GROUP_M={cfg['GROUP_M']} > 64")
    elif family in ("rmsnorm_rows", "rmsnorm_residual_rows"):
        bd, rows = cfg["BLOCK_D"], cfg["ROWS"]
        if bd < n:
            ex("row_fits_block", f"BLOCK_D={bd} < D={n} (one-pass template)")
        if bd * elem > ONEPASS_ROW_BYTES:
            ex("onepass_row_bytes", f"BLOCK_D·{elem} = {bd * elem} B > {ONEPASS_ROW_BYTES} B")
        numel("rows×D tile", rows * bd)
        if rows * bd // threads > REG_TILE_PER_THREAD:
            he("spill_risk", f"ROWS·BLOCK_D/threads = {rows * bd // threads} fp32 > {REG_TILE_PER_THREAD}")
        if rows > 64:
            ex("rows_range", f"ROWS={rows} > 64")
    elif family == "softmax_onepass":
        b = cfg["BLOCK"]
        if b < n:
            ex("row_fits_block", f"BLOCK={b} < C={n} (one-pass template)")
        numel("row block", b)
        if b // threads > 64:
            he("spill_risk", f"BLOCK/threads = {b // threads} fp32 > 64 (x and e live: spilled at 128)")
    elif family == "softmax_online":
        b = cfg["BLOCK"]
        numel("chunk", b)
        if b > n and b > 1024:
            ex("chunk_gt_row", f"BLOCK={b} > C={n}")
        if b // threads > 64:
            he("spill_risk", f"BLOCK/threads = {b // threads} fp32 > 64")
    elif family == "softmax_split":
        b, ch = cfg["BLOCK"], cfg["CHUNKS"]
        numel("chunk", b)
        if ch < 2 or ch > 1024:
            ex("chunks_range", f"CHUNKS={ch} not in 2..1024")
        if cdiv(n, ch) < b // 2:
            ex("chunk_too_small", f"cdiv(C,CHUNKS)={cdiv(n, ch)} < BLOCK/2={b // 2}")
        if b // threads > 64:
            he("spill_risk", f"BLOCK/threads = {b // threads} fp32 > 64")
    elif family == "swiglu_2d":
        b = cfg["BLOCK"]
        numel("block", b)
        if b // threads > 64:
            he("spill_risk", f"BLOCK/threads = {b // threads} fp32 > 64")
        if b // threads < 1:
            ex("block_lt_threads", f"BLOCK={b} < threads={threads}")
    return v


def is_legal(family: str, cfg: dict[str, int], op: str, m: int, n: int, k: int, dtype: str) -> bool:
    return not check(family, cfg, op, m, n, k, dtype)
