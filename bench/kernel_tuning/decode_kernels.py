"""The fixed (untuned) Triton kernels of the decode step, and the QK-norm variant of the tuned
RMSNorm template.

Imports torch and triton at module import: import it lazily (``choice_step`` does).

* :func:`qk_norm_rows`: the ``rmsnorm_rows`` template (its BLOCK_D, ROWS, num_warps come from the
  specialist's answer for the QK-norm workload ``rmsnorm m = B·(heads+kv) n = head_dim``) in a
  variant that normalizes the q and k heads in place inside the fused QKV output (rows addressed
  as (token, head), two weight vectors: q heads use ``q_norm``, k heads ``k_norm``).
* :func:`rope_kv`: rotary embedding of q and k (the half-split convention of Hugging Face's
  ``rotate_half``), q written to a (B, heads, head_dim) buffer, k and v written into the KV cache
  at the position read from a device tensor: one launch of (B, heads + 2·kv) programs.
* :func:`decode_attention`: split-KV decode attention (one query token per sequence, grouped-query
  heads): (B·kv, S) programs each reduce one chunk of the cache for the kv head's query group with
  an online softmax (``tl.dot`` over the group padded to 16 rows), then a combine kernel of B·heads
  programs merges the S partial (max, sum, accumulator) triples. The sequence length is read from
  the device (position + 1), so one captured CUDA graph serves every position. Fixed config:
  BLOCK_N = 64 keys, 4 warps, 2 stages; S chosen so that B·kv·S ≈ 2 × 132 SMs.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .legality import cdiv, next_pow2

SMS = 132  # H200 multiprocessors (torch.cuda.get_device_properties on the device)
ATTN_BLOCK_N = 64
ATTN_WARPS = 4
ATTN_STAGES = 2
# Triton 3.6's interpreter (TRITON_INTERPRET=1, CPU tests) computes bf16 tl.dot wrongly; there the
# attention dots run on fp32 operands (exact in numpy). On a GPU they stay bf16 (wgmma).
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit(do_not_specialize=["R"])
def qk_norm_kernel(x_ptr, w_ptr, R, D, G, H, stride_b, stride_r, eps,
                   BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    rmask = rows < R
    cmask = cols < D
    mask = rmask[:, None] & cmask[None, :]
    tok = rows // G
    head = rows % G
    ptrs = (tok * stride_b + head * stride_r)[:, None] + cols[None, :]
    x = tl.load(x_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=1) / D
    r = tl.rsqrt(ms + eps)
    wsel = (head >= H).to(tl.int32)
    wv = tl.load(w_ptr + wsel[:, None] * D + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    y = x * r[:, None] * wv
    tl.store(x_ptr + ptrs, y.to(x_ptr.dtype.element_ty), mask=mask)


def qk_norm_rows(cfg: dict[str, int], qkv: torch.Tensor, w_qk: torch.Tensor, heads: int, kv_heads: int,
                 head_dim: int, eps: float) -> None:
    """Normalize, in place, the q and k heads of ``qkv`` (B, (heads + 2·kv)·head_dim) with
    ``w_qk`` (2, head_dim) = [q_norm; k_norm], using the ``rmsnorm_rows`` config ``cfg``."""
    b = qkv.shape[0]
    g = heads + kv_heads
    rows = b * g
    qk_norm_kernel[(cdiv(rows, cfg["ROWS"]),)](qkv, w_qk, rows, head_dim, g, heads, qkv.stride(0), head_dim, eps,
                                             BLOCK_D=cfg["BLOCK_D"], ROWS=cfg["ROWS"], num_warps=cfg["num_warps"])


@triton.jit
def rope_kv_kernel(q_src, q_sb, q_sr, k_src, k_sb, k_sr, v_src, v_sb, cos_ptr, sin_ptr, pos_ptr,
                   q_out, k_cache, v_cache, H, KV, LMAX, HALF: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    pos = tl.load(pos_ptr + b)
    offs = tl.arange(0, HALF)
    if h < H + KV:
        c = tl.load(cos_ptr + pos * HALF + offs)
        s = tl.load(sin_ptr + pos * HALF + offs)
        if h < H:
            src = q_src + b * q_sb + h * q_sr
            dst = q_out + (b * H + h) * 2 * HALF
        else:
            src = k_src + b * k_sb + (h - H) * k_sr
            dst = k_cache + ((b * KV + (h - H)) * LMAX + pos) * 2 * HALF
        x1 = tl.load(src + offs).to(tl.float32)
        x2 = tl.load(src + HALF + offs).to(tl.float32)
        tl.store(dst + offs, (x1 * c - x2 * s).to(dst.dtype.element_ty))
        tl.store(dst + HALF + offs, (x2 * c + x1 * s).to(dst.dtype.element_ty))
    else:
        kvh = h - H - KV
        src = v_src + b * v_sb + kvh * 2 * HALF
        dst = v_cache + ((b * KV + kvh) * LMAX + pos) * 2 * HALF
        tl.store(dst + offs, tl.load(src + offs))
        tl.store(dst + HALF + offs, tl.load(src + HALF + offs))


def rope_kv(q_src: torch.Tensor, k_src: torch.Tensor, v_src: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            pos: torch.Tensor, q_out: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
            heads: int, kv_heads: int) -> None:
    """q_src (B, heads, hd) / k_src (B, kv, hd) / v_src (B, kv, hd): strided views whose last dim is
    contiguous; cos/sin fp32 (LMAX, hd/2); pos int32 (B,); q_out (B, heads, hd); caches
    (B, kv, LMAX, hd)."""
    b = q_src.shape[0]
    hd = q_out.shape[-1]
    rope_kv_kernel[(b, heads + 2 * kv_heads)](
        q_src, q_src.stride(0), q_src.stride(1), k_src, k_src.stride(0), k_src.stride(1), v_src, v_src.stride(0),
        cos, sin, pos, q_out, k_cache, v_cache, heads, kv_heads, k_cache.shape[2], HALF=hd // 2, num_warps=1)


@triton.jit
def attn_split_kernel(q_ptr, k_cache, v_cache, pos_ptr, part_ptr, ml_ptr, KV, LMAX, CHUNK, S, scale,
                      G: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, HD: tl.constexpr,
                      DOT_F32: tl.constexpr, PDL: tl.constexpr):
    if PDL:  # programmatic dependent launch: wait for the rotary kernel's q and K/V writes
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b = pid // KV
    kvh = pid % KV
    seq = tl.load(pos_ptr + b) + 1
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, seq)
    hr = tl.arange(0, BLOCK_H)
    hmask = hr < G
    d = tl.arange(0, HD)
    head = kvh * G + hr
    q = tl.load(q_ptr + (b * (KV * G) + head)[:, None] * HD + d[None, :], mask=hmask[:, None], other=0.0)
    if DOT_F32:
        q = q.to(tl.float32)
    m_i = tl.full([BLOCK_H], -1e30, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, HD], dtype=tl.float32)
    base = (b * KV + kvh) * LMAX * HD
    for n0 in range(start, end, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        nmask = n < end
        k = tl.load(k_cache + base + n[:, None] * HD + d[None, :], mask=nmask[:, None], other=0.0)
        if DOT_F32:
            k = k.to(tl.float32)
        sc = tl.dot(q, tl.trans(k)) * scale
        sc = tl.where(nmask[None, :], sc, -1e30)
        m_new = tl.maximum(m_i, tl.max(sc, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(sc - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_cache + base + n[:, None] * HD + d[None, :], mask=nmask[:, None], other=0.0)
        if DOT_F32:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    row = (b * (KV * G) + head) * S + split
    tl.store(part_ptr + row[:, None] * HD + d[None, :], acc, mask=hmask[:, None])
    tl.store(ml_ptr + row * 2, m_i, mask=hmask)
    tl.store(ml_ptr + row * 2 + 1, l_i, mask=hmask)


@triton.jit
def attn_combine_kernel(part_ptr, ml_ptr, out_ptr, S, HD: tl.constexpr, BLOCK_S: tl.constexpr, PDL: tl.constexpr):
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pid = tl.program_id(0)  # b * heads + h
    s = tl.arange(0, BLOCK_S)
    smask = s < S
    d = tl.arange(0, HD)
    m = tl.load(ml_ptr + (pid * S + s) * 2, mask=smask, other=-1e30)
    lsum = tl.load(ml_ptr + (pid * S + s) * 2 + 1, mask=smask, other=0.0)
    mx = tl.max(m, axis=0)
    wgt = tl.exp(m - mx)
    den = tl.sum(wgt * lsum, axis=0)
    acc = tl.load(part_ptr + (pid * S + s)[:, None] * HD + d[None, :], mask=smask[:, None], other=0.0)
    o = tl.sum(acc * wgt[:, None], axis=0) / den
    tl.store(out_ptr + pid * HD + d, o.to(out_ptr.dtype.element_ty))


class DecodeAttention:
    """Split-KV decode attention over a (B, kv, LMAX, hd) cache; workspaces preallocated so the
    call can be graph-captured. ``__call__(q (B, heads, hd), k_cache, v_cache, pos (B,) int32)``
    returns (B, heads·hd) in q's dtype (attention over positions 0..pos inclusive). ``pdl``
    launches both kernels with programmatic dependent launch (each waits for its predecessor
    before its first load; ``fused_step`` chains its launches so)."""

    def __init__(self, batch: int, heads: int, kv_heads: int, head_dim: int, lmax: int, dtype: torch.dtype,
                 device: str = "cuda", pdl: bool = False):
        self.pdl = pdl
        self.b, self.h, self.kv, self.hd, self.lmax = batch, heads, kv_heads, head_dim, lmax
        self.g = heads // kv_heads
        n_blocks = cdiv(lmax, ATTN_BLOCK_N)
        s = min(n_blocks, max(1, cdiv(2 * SMS, batch * kv_heads)))
        self.chunk = cdiv(n_blocks, s) * ATTN_BLOCK_N
        self.splits = cdiv(lmax, self.chunk)
        self.part = torch.empty((batch * heads * self.splits, head_dim), device=device, dtype=torch.float32)
        self.ml = torch.empty((batch * heads * self.splits, 2), device=device, dtype=torch.float32)
        self.out = torch.empty((batch, heads * head_dim), device=device, dtype=dtype)
        self.scale = head_dim ** -0.5
        self.block_h = max(16, next_pow2(self.g))

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        extra = {"launch_pdl": True} if self.pdl else {}
        attn_split_kernel[(self.b * self.kv, self.splits)](
            q, k_cache, v_cache, pos, self.part, self.ml, self.kv, self.lmax, self.chunk, self.splits, self.scale,
            G=self.g, BLOCK_H=self.block_h, BLOCK_N=ATTN_BLOCK_N, HD=self.hd, DOT_F32=INTERPRET, PDL=self.pdl,
            num_warps=ATTN_WARPS, num_stages=ATTN_STAGES, **extra)
        attn_combine_kernel[(self.b * self.h,)](self.part, self.ml, self.out, self.splits, HD=self.hd,
                                                BLOCK_S=max(2, next_pow2(self.splits)), PDL=self.pdl, num_warps=4,
                                                **extra)
        return self.out
