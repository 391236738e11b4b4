"""Triton templates of the F7 candidate families, and the vendor (torch) paths.

Imports torch and triton at module import: import this module lazily (``agent`` does), so the
rest of ``bench.kernel_tuning`` imports on machines without either.

Families (config keys in ``legality.PARAMS``):

* ``vendor``: ``F.linear`` (cuBLAS), ``F.rms_norm``, ``F.silu(g)*u``, ``torch.softmax``, and for
  ``rmsnorm_residual`` the unfused ``s = x + d; F.rms_norm(s)``.
* ``gemv_splitn`` / ``gemv_splitk``: one program per (BLOCK_N rows of W, K slice); up to 8
  activation rows share each W tile (BLOCK_M = next_pow2(M), per-row fp32 2-D accumulators,
  reduced once at the end). Split-K writes fp32 partials [SPLIT_K, M, N] reduced by a second
  kernel in fixed order (deterministic, no atomics).
* ``tc_gemm`` / ``tc_gemm_splitk``: tutorial-style grouped ``tl.dot`` GEMM (wgmma on sm_90
  when BLOCK_M ≥ 64), optional split-K through the same workspace + reduce.
* ``rmsnorm_rows``: ROWS rows per program, one pass (BLOCK_D = next_pow2(D)).
* ``softmax_onepass`` (row in one block), ``softmax_online`` (one program per row, online
  max/sum then a write pass), ``softmax_split`` (CHUNKS programs per row: partial (max,sum)
  then a combine-and-write kernel).
* ``swiglu_2d``: ``silu(g)·u`` over a (rows, I/BLOCK) grid.
* ``rmsnorm_residual_rows``: the fused residual add + RMSNorm of a decoder block
  (``s = x + d``; ``y = rmsnorm(s)·w``; both written), ROWS rows per program, one pass.
* ``inductor``: ``torch.compile`` (Inductor, default mode, static shapes) of the vendor path of
  a non-GEMM op, writing into the preallocated output; compiled at first call.

M (and the row count R) are marked ``do_not_specialize`` so one compiled kernel serves every
M of a bucket; N, K are multiples of 16 in the corpus, so kernels are shared across shapes.

Fault families (only injected by ``run --faults``): ``fault_skip_tail`` (a GEMV whose grid
misses the last N block: the NaN poison must catch it), ``fault_oob`` (stores far out of
bounds: an illegal address that loses the CUDA context).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from .legality import cdiv

DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

# --------------------------------------------------------------------------- GEMV


@triton.jit
def _acc_row(acc, w, x_ptr, row, stride_xm, offs_k, k_mask, M):
    x = tl.load(x_ptr + row * stride_xm + offs_k, mask=k_mask & (row < M), other=0.0).to(tl.float32)
    return acc + w * x[None, :]


@triton.jit
def _store_row(acc, y_ptr, row, stride_ym, offs_n, n_mask, M):
    r = tl.sum(acc, axis=1)
    tl.store(y_ptr + row * stride_ym + offs_n, r.to(y_ptr.dtype.element_ty), mask=n_mask & (row < M))


@triton.jit(do_not_specialize=["M", "PER"])
def gemv_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym, stride_ys, PER,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                SPLIT_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k0 = tl.arange(0, BLOCK_K)
    n_mask = offs_n < N
    lo = pid_k * PER  # PER = cdiv(cdiv(K, BLOCK_K), SPLIT_K) K blocks per split (host-computed)
    a0 = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    a1 = a0
    a2 = a0
    a3 = a0
    a4 = a0
    a5 = a0
    a6 = a0
    a7 = a0
    for kb in range(0, PER):
        offs_k = (lo + kb) * BLOCK_K + offs_k0
        k_mask = offs_k < K
        w = tl.load(w_ptr + offs_n[:, None] * stride_wn + offs_k[None, :],
                    mask=n_mask[:, None] & k_mask[None, :], other=0.0).to(tl.float32)
        a0 = _acc_row(a0, w, x_ptr, 0, stride_xm, offs_k, k_mask, M)
        if BLOCK_M > 1:
            a1 = _acc_row(a1, w, x_ptr, 1, stride_xm, offs_k, k_mask, M)
        if BLOCK_M > 2:
            a2 = _acc_row(a2, w, x_ptr, 2, stride_xm, offs_k, k_mask, M)
            a3 = _acc_row(a3, w, x_ptr, 3, stride_xm, offs_k, k_mask, M)
        if BLOCK_M > 4:
            a4 = _acc_row(a4, w, x_ptr, 4, stride_xm, offs_k, k_mask, M)
            a5 = _acc_row(a5, w, x_ptr, 5, stride_xm, offs_k, k_mask, M)
            a6 = _acc_row(a6, w, x_ptr, 6, stride_xm, offs_k, k_mask, M)
            a7 = _acc_row(a7, w, x_ptr, 7, stride_xm, offs_k, k_mask, M)
    # SPLIT_K == 1: y is the [M, N] output; else y is the fp32 workspace [SPLIT_K, M, N]
    yb = y_ptr + pid_k * stride_ys
    _store_row(a0, yb, 0, stride_ym, offs_n, n_mask, M)
    if BLOCK_M > 1:
        _store_row(a1, yb, 1, stride_ym, offs_n, n_mask, M)
    if BLOCK_M > 2:
        _store_row(a2, yb, 2, stride_ym, offs_n, n_mask, M)
        _store_row(a3, yb, 3, stride_ym, offs_n, n_mask, M)
    if BLOCK_M > 4:
        _store_row(a4, yb, 4, stride_ym, offs_n, n_mask, M)
        _store_row(a5, yb, 5, stride_ym, offs_n, n_mask, M)
        _store_row(a6, yb, 6, stride_ym, offs_n, n_mask, M)
        _store_row(a7, yb, 7, stride_ym, offs_n, n_mask, M)


@triton.jit(do_not_specialize=["MN"])
def splitk_reduce_kernel(ws_ptr, y_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def oob_store_kernel(y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs + (1 << 40), tl.zeros([BLOCK], dtype=tl.float32).to(y_ptr.dtype.element_ty))


# --------------------------------------------------------------------------- TC GEMM


@triton.jit(do_not_specialize=["M", "PER"])
def tc_gemm_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym, stride_ys, PER,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    lo = pid_k * PER
    a_ptrs = x_ptr + offs_am[:, None] * stride_xm + (lo * BLOCK_K + offs_k)[None, :]
    b_ptrs = w_ptr + offs_bn[None, :] * stride_wn + (lo * BLOCK_K + offs_k)[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, PER):
        kk = (lo + kb) * BLOCK_K + offs_k
        a = tl.load(a_ptrs, mask=kk[None, :] < K, other=0.0)
        b = tl.load(b_ptrs, mask=kk[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    c_ptrs = y_ptr + pid_k * stride_ys + offs_cm[:, None] * stride_ym + offs_cn[None, :]
    tl.store(c_ptrs, acc.to(y_ptr.dtype.element_ty), mask=c_mask)


# --------------------------------------------------------------------------- RMSNorm


@triton.jit(do_not_specialize=["R"])
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, R, D, stride, eps,
                   BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    rmask = rows < R
    cmask = cols < D
    mask = rmask[:, None] & cmask[None, :]
    ptrs = rows[:, None] * stride + cols[None, :]
    x = tl.load(x_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=1) / D
    r = tl.rsqrt(ms + eps)
    wv = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    y = x * r[:, None] * wv[None, :]
    tl.store(y_ptr + ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["R"])
def rmsnorm_residual_kernel(x_ptr, d_ptr, w_ptr, y_ptr, s_ptr, R, D, stride, eps,
                            BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    rmask = rows < R
    cmask = cols < D
    mask = rmask[:, None] & cmask[None, :]
    ptrs = rows[:, None] * stride + cols[None, :]
    x = tl.load(x_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
    d = tl.load(d_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
    # the residual stream is kept in the activation dtype, as the unfused path keeps it
    s = (x + d).to(s_ptr.dtype.element_ty)
    tl.store(s_ptr + ptrs, s, mask=mask)
    sf = s.to(tl.float32)
    ms = tl.sum(sf * sf, axis=1) / D
    r = tl.rsqrt(ms + eps)
    wv = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    y = sf * r[:, None] * wv[None, :]
    tl.store(y_ptr + ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------- softmax


@triton.jit
def softmax_onepass_kernel(x_ptr, y_ptr, C, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < C
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride + offs, (e / s).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, C, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs0 = tl.arange(0, BLOCK)
    m_vec = tl.full([BLOCK], -1e30, dtype=tl.float32)
    s_vec = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, C, BLOCK):
        offs = start + offs0
        x = tl.load(x_ptr + row * stride + offs, mask=offs < C, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        s_vec = s_vec * tl.exp(m_vec - m_new) + tl.exp(x - m_new)
        m_vec = m_new
    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)
    inv = 1.0 / s
    for start in range(0, C, BLOCK):
        offs = start + offs0
        mask = offs < C
        x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * stride + offs, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_split_stats_kernel(x_ptr, ws_ptr, C, stride, blocks_per_chunk,
                               BLOCK: tl.constexpr, CHUNKS: tl.constexpr):
    row = tl.program_id(0)
    ch = tl.program_id(1)
    offs0 = tl.arange(0, BLOCK)
    m_vec = tl.full([BLOCK], -1e30, dtype=tl.float32)
    s_vec = tl.zeros([BLOCK], dtype=tl.float32)
    base = ch * blocks_per_chunk * BLOCK
    for b in range(0, blocks_per_chunk):
        offs = base + b * BLOCK + offs0
        x = tl.load(x_ptr + row * stride + offs, mask=offs < C, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        s_vec = s_vec * tl.exp(m_vec - m_new) + tl.exp(x - m_new)
        m_vec = m_new
    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)
    tl.store(ws_ptr + (row * CHUNKS + ch) * 2, m)
    tl.store(ws_ptr + (row * CHUNKS + ch) * 2 + 1, s)


@triton.jit
def softmax_split_write_kernel(x_ptr, y_ptr, ws_ptr, C, stride, blocks_per_chunk,
                               BLOCK: tl.constexpr, CHUNKS: tl.constexpr):
    row = tl.program_id(0)
    ch = tl.program_id(1)
    cidx = tl.arange(0, CHUNKS)
    ms = tl.load(ws_ptr + (row * CHUNKS + cidx) * 2)
    ss = tl.load(ws_ptr + (row * CHUNKS + cidx) * 2 + 1)
    m = tl.max(ms, axis=0)
    s = tl.sum(ss * tl.exp(ms - m), axis=0)
    inv = 1.0 / s
    offs0 = tl.arange(0, BLOCK)
    base = ch * blocks_per_chunk * BLOCK
    for b in range(0, blocks_per_chunk):
        offs = base + b * BLOCK + offs0
        mask = offs < C
        x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * stride + offs, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------- SwiGLU


@triton.jit
def swiglu_kernel(gu_ptr, y_ptr, I, stride_gu, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    pid = tl.program_id(1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < I
    g = tl.load(gu_ptr + row * stride_gu + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(gu_ptr + row * stride_gu + I + offs, mask=mask, other=0.0).to(tl.float32)
    y = g * tl.sigmoid(g) * u
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


# --------------------------------------------------------------------------- problems


class Problem:
    """Inputs (fresh random, never zeros), a preallocated output and the fp32/fp64 reference."""

    def __init__(self, w, device: str = "cuda", seed: int = 0, with_ref: bool = True):
        self.w = w
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        dt = DT[w.dtype]
        if w.op == "gemm":
            x = torch.randn(w.m, w.k, device=device, dtype=torch.float32, generator=g).to(dt)
            W = (torch.randn(w.n, w.k, device=device, dtype=torch.float32, generator=g) * (w.k ** -0.5)).to(dt)
            self.args = (x, W)
            self.out_shape = (w.m, w.n)
            self.out_dtype = dt
        elif w.op == "rmsnorm":
            x = torch.randn(w.m, w.n, device=device, dtype=torch.float32, generator=g).to(dt)
            wt = (1.0 + 0.1 * torch.randn(w.n, device=device, dtype=torch.float32, generator=g)).to(dt)
            self.args = (x, wt)
            self.out_shape = (w.m, w.n)
            self.out_dtype = dt
        elif w.op == "rmsnorm_residual":
            x = torch.randn(w.m, w.n, device=device, dtype=torch.float32, generator=g).to(dt)
            d = torch.randn(w.m, w.n, device=device, dtype=torch.float32, generator=g).to(dt)
            wt = (1.0 + 0.1 * torch.randn(w.n, device=device, dtype=torch.float32, generator=g)).to(dt)
            self.args = (x, d, wt)
            self.out_shape = (2, w.m, w.n)
            self.out_dtype = dt
        elif w.op == "swiglu":
            gu = (2.0 * torch.randn(w.m, 2 * w.n, device=device, dtype=torch.float32, generator=g)).to(dt)
            self.args = (gu,)
            self.out_shape = (w.m, w.n)
            self.out_dtype = dt
        elif w.op == "softmax":
            x = 4.0 * torch.randn(w.m, w.n, device=device, dtype=torch.float32, generator=g).to(dt)
            self.args = (x,)
            self.out_shape = (w.m, w.n)
            self.out_dtype = dt
        else:
            raise ValueError(f"no problem generator for op {w.op!r}")
        self.out = torch.empty(self.out_shape, device=device, dtype=self.out_dtype)
        self.ref = reference(w, self.args) if with_ref else None

    def poison(self) -> None:
        self.out.fill_(float("nan"))


def reference(w, args, eps: float | None = None) -> torch.Tensor:
    """fp32 (fp64 for softmax) reference of the op on upcast inputs. ``rmsnorm_residual`` gives
    ``stack((rmsnorm(x + d)·w, x + d))``, the residual rounded to the activation dtype first as the
    candidates keep it."""
    eps = EPS if eps is None else eps
    if w.op == "rmsnorm_residual":
        x, d, wt = args
        s = (x.float() + d.float()).to(x.dtype).float()
        y = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps) * wt.float()
        return torch.stack((y, s))
    if w.op == "gemm":
        x, W = args
        return x.float() @ W.float().t()
    if w.op == "rmsnorm":
        x, wt = args
        xf = x.float()
        return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * wt.float()
    if w.op == "swiglu":
        (gu,) = args
        g, u = gu.float().chunk(2, dim=-1)
        return F.silu(g) * u
    if w.op == "softmax":
        (x,) = args
        return torch.softmax(x.double(), dim=-1).float()
    raise ValueError(w.op)


EPS = 1e-6


def rel_err(out: torch.Tensor | tuple, ref: torch.Tensor) -> tuple[float, bool]:
    """(‖out−ref‖/‖ref‖, all finite). A tuple result (``rmsnorm_residual``: ``(y, s)``) is stacked."""
    if isinstance(out, (tuple, list)):
        out = torch.stack(tuple(out))
    o = out.float()
    finite = bool(torch.isfinite(o).all().item())
    if not finite:
        return float("nan"), False
    num = torch.linalg.vector_norm(o - ref).item()
    den = torch.linalg.vector_norm(ref).item()
    return (num / den if den > 0 else num), True


# --------------------------------------------------------------------------- runners

Runner = Callable[[tuple, torch.Tensor], torch.Tensor]


def build(family: str, cfg: dict[str, int], w, device: str = "cuda", eps: float = EPS) -> Runner:
    """A callable ``run(args, out) -> result`` for this candidate on this workload (workspaces
    preallocated here, so the call can be graph-captured). Compilation happens at first call.

    ``eps`` is the RMSNorm epsilon (1e-6 in the recorded workloads; a decoder passes its own).
    ``rmsnorm_residual`` runners take ``args = (x, d, w)`` and ``out`` of shape (2, M, D) and
    return ``(y, s)``: the normalized rows and the new residual ``s = x + d``.

    Raises:
        ValueError: unknown family, or no vendor / Inductor path for the op.
    """
    m, n, k = w.m, w.n, w.k
    if family == "inductor":
        return _inductor(w, eps)
    if family == "vendor":
        if w.op == "gemm":
            return lambda args, out: F.linear(args[0], args[1])
        if w.op == "rmsnorm":
            return lambda args, out: F.rms_norm(args[0], (n,), args[1], eps)
        if w.op == "rmsnorm_residual":
            def _rr(args, out):
                s = args[0] + args[1]
                return F.rms_norm(s, (n,), args[2], eps), s
            return _rr
        if w.op == "swiglu":
            def _sw(args, out):
                g, u = args[0].chunk(2, dim=-1)
                return F.silu(g) * u
            return _sw
        if w.op == "softmax":
            return lambda args, out: torch.softmax(args[0], dim=-1)
        raise ValueError(f"no vendor path for {w.op}")
    if family in ("gemv_splitn", "gemv_splitk", "fault_skip_tail"):
        bm, bn, bk, sk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["SPLIT_K"]
        nw, ns = cfg["num_warps"], cfg["num_stages"]
        grid_n = cdiv(n, bn) - (1 if family == "fault_skip_tail" else 0)
        per = cdiv(cdiv(k, bk), sk)
        if sk == 1:
            def _g(args, out):
                x, W = args
                gemv_kernel[(grid_n, 1)](x, W, out, m, n, k, x.stride(0), W.stride(0), out.stride(0), 0, per,
                                         BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=1,
                                         num_warps=nw, num_stages=ns)
                return out
            return _g
        ws = torch.empty((sk, m, n), device=device, dtype=torch.float32)
        rb = 1024

        def _gk(args, out):
            x, W = args
            gemv_kernel[(grid_n, sk)](x, W, ws, m, n, k, x.stride(0), W.stride(0), n, m * n, per,
                                      BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=sk,
                                      num_warps=nw, num_stages=ns)
            splitk_reduce_kernel[(cdiv(m * n, rb),)](ws, out, m * n, SPLIT_K=sk, BLOCK=rb, num_warps=4)
            return out
        return _gk
    if family in ("tc_gemm", "tc_gemm_splitk"):
        bm, bn, bk, gm, sk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["GROUP_M"], cfg["SPLIT_K"]
        nw, ns = cfg["num_warps"], cfg["num_stages"]
        tiles = cdiv(m, bm) * cdiv(n, bn)
        per = cdiv(cdiv(k, bk), sk)
        if sk == 1:
            def _t(args, out):
                x, W = args
                tc_gemm_kernel[(tiles, 1)](x, W, out, m, n, k, x.stride(0), W.stride(0), out.stride(0), 0, per,
                                           BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, SPLIT_K=1,
                                           num_warps=nw, num_stages=ns)
                return out
            return _t
        ws = torch.empty((sk, m, n), device=device, dtype=torch.float32)
        rb = 1024

        def _tk(args, out):
            x, W = args
            tc_gemm_kernel[(tiles, sk)](x, W, ws, m, n, k, x.stride(0), W.stride(0), n, m * n, per,
                                        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, SPLIT_K=sk,
                                        num_warps=nw, num_stages=ns)
            splitk_reduce_kernel[(cdiv(m * n, rb),)](ws, out, m * n, SPLIT_K=sk, BLOCK=rb, num_warps=4)
            return out
        return _tk
    if family == "rmsnorm_rows":
        bd, rows, nw = cfg["BLOCK_D"], cfg["ROWS"], cfg["num_warps"]

        def _r(args, out):
            x, wt = args
            rmsnorm_kernel[(cdiv(m, rows),)](x, wt, out, m, n, x.stride(0), eps, BLOCK_D=bd, ROWS=rows,
                                             num_warps=nw)
            return out
        return _r
    if family == "rmsnorm_residual_rows":
        bd, rows, nw = cfg["BLOCK_D"], cfg["ROWS"], cfg["num_warps"]

        def _rr2(args, out):
            x, d, wt = args
            rmsnorm_residual_kernel[(cdiv(m, rows),)](x, d, wt, out[0], out[1], m, n, x.stride(0), eps,
                                                      BLOCK_D=bd, ROWS=rows, num_warps=nw)
            return out[0], out[1]
        return _rr2
    if family == "softmax_onepass":
        b, nw = cfg["BLOCK"], cfg["num_warps"]

        def _s1(args, out):
            (x,) = args
            softmax_onepass_kernel[(m,)](x, out, n, x.stride(0), BLOCK=b, num_warps=nw)
            return out
        return _s1
    if family == "softmax_online":
        b, nw, ns = cfg["BLOCK"], cfg["num_warps"], cfg["num_stages"]

        def _s2(args, out):
            (x,) = args
            softmax_online_kernel[(m,)](x, out, n, x.stride(0), BLOCK=b, num_warps=nw, num_stages=ns)
            return out
        return _s2
    if family == "softmax_split":
        b, ch, nw = cfg["BLOCK"], cfg["CHUNKS"], cfg["num_warps"]
        bpc = cdiv(cdiv(n, b), ch)
        ws = torch.empty((m, ch, 2), device=device, dtype=torch.float32)

        def _s3(args, out):
            (x,) = args
            softmax_split_stats_kernel[(m, ch)](x, ws, n, x.stride(0), bpc, BLOCK=b, CHUNKS=ch, num_warps=nw)
            softmax_split_write_kernel[(m, ch)](x, out, ws, n, x.stride(0), bpc, BLOCK=b, CHUNKS=ch, num_warps=nw)
            return out
        return _s3
    if family == "swiglu_2d":
        b, nw = cfg["BLOCK"], cfg["num_warps"]

        def _sw2(args, out):
            (gu,) = args
            swiglu_kernel[(m, cdiv(n, b))](gu, out, n, gu.stride(0), out.stride(0), BLOCK=b, num_warps=nw)
            return out
        return _sw2
    if family == "fault_oob":
        def _oob(args, out):
            oob_store_kernel[(1,)](out, BLOCK=128, num_warps=4)
            return out
        return _oob
    raise ValueError(f"unknown family {family!r}")


def _inductor(w, eps: float) -> Runner:
    """``torch.compile`` (Inductor, default mode, ``dynamic=False``) of the vendor path of a
    non-GEMM op, writing its result into ``out`` inside the compiled region (so Inductor can fuse
    the store). One compiled function per workload: its kernel is specialized to the shape."""
    n = w.n
    if w.op == "rmsnorm":
        def f(x, wt, out):
            out.copy_(F.rms_norm(x, (n,), wt, eps))
    elif w.op == "rmsnorm_residual":
        def f(x, d, wt, out):
            s = x + d
            out[1].copy_(s)
            out[0].copy_(F.rms_norm(s, (n,), wt, eps))
    elif w.op == "swiglu":
        def f(gu, out):
            g, u = gu.chunk(2, dim=-1)
            out.copy_(F.silu(g) * u)
    elif w.op == "softmax":
        def f(x, out):
            out.copy_(torch.softmax(x, dim=-1))
    else:
        raise ValueError(f"no Inductor path for {w.op}")
    # every workload's function shares one code object, so each shape is a recompile of it:
    # lift dynamo's per-code recompile limit (8 by default; with fullgraph=True the 9th fails)
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 4096))
    cf = torch.compile(f, dynamic=False, fullgraph=True)

    def run(args, out):
        cf(*args, out)
        if w.op == "rmsnorm_residual":
            return out[0], out[1]
        return out
    return run


MAX_COPIES = 64


def make_copies(w, problem: Problem, l2_bytes: int, factor: int = 4, device: str = "cuda",
                max_copies: int = MAX_COPIES) -> list[tuple]:
    """Rotated copies of the inputs whose total exceeds ``factor``·L2 (protocol P2), at most
    ``max_copies`` (so a few-KB row op replays 64 copies, L2-resident as in a decode step; no
    decode GEMM of the corpora needs more than 62)."""
    nbytes = sum(a.numel() * a.element_size() for a in problem.args)
    n = min(max_copies, max(2, cdiv(factor * l2_bytes, max(1, nbytes)) + 1))
    copies = [problem.args]
    for _ in range(n - 1):
        copies.append(tuple(a.clone() for a in problem.args))
    return copies


def env_probe() -> dict[str, Any]:
    import subprocess

    props = torch.cuda.get_device_properties(0)
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception as e:  # pragma: no cover
        drv = f"unknown ({type(e).__name__})"
    try:
        smem = int(triton.runtime.driver.active.utils.get_device_properties(0)["max_shared_mem"])
    except Exception:  # pragma: no cover
        smem = None
    return {
        "gpu": torch.cuda.get_device_name(0),
        "sms": int(props.multi_processor_count),
        "cc": f"{props.major}.{props.minor}",
        "l2": int(getattr(props, "L2_cache_size", 0)),
        "mem_bytes": int(props.total_memory),
        "smem_optin": smem,
        "driver": drv,
        "cuda": torch.version.cuda,
        "triton": triton.__version__,
        "torch": torch.__version__,
    }


def copy_bandwidth(nbytes: int = 2 << 30, reps: int = 10) -> dict[str, Any]:
    """Device-to-device copy (bytes read + written) — median of ``reps`` timed copies."""
    a = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32).normal_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        b.copy_(a)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) / 1e3)
    ts.sort()
    med = ts[len(ts) // 2]
    del a, b
    torch.cuda.empty_cache()
    return {"bytes_moved": 2 * nbytes, "median_s": med, "gbs": 2 * nbytes / med / 1e9,
            "times_ms": [round(t * 1e3, 4) for t in ts]}
