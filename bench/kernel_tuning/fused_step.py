"""The fused decode step: a step-level candidate family (``fused_layer``) that fuses every
row-wise op of a decoder layer into the GEMV that consumes it, so one layer is 6 launches (7 with
Qwen3's QK-norm folded into rotary) instead of 11–12, optionally chained with programmatic
dependent launch (PDL).

Imports torch and triton at module import: import it lazily (``e2e`` does).

Per layer (B tokens; ``s`` the residual stream, ``d`` the previous MLP output):

1. ``qkv = rmsnorm(s + d)·w_in · Wqkvᵀ`` — :func:`fused_gemv_kernel` with the fused residual
   add + RMSNorm as its prologue: every program recomputes the row's sum of squares from the
   (L2-resident) activation row, program 0 writes the new residual ``s + d``.
2. QK-norm (Qwen3) + rotary + K/V cache write — :func:`qk_rope_kv_kernel`, one launch.
3. split-KV decode attention + combine (``decode_kernels.DecodeAttention``, 2 launches).
4. ``o = a · Woᵀ`` — the same GEMV kernel, no prologue.
5. ``gu = rmsnorm(s + o)·w_post · Wguᵀ`` — norm prologue, writes the new residual.
6. ``d = (silu(g)·u) · Wdownᵀ`` — SwiGLU prologue (``g``, ``u`` read from ``gu``).

then ``logits = rmsnorm(s + d)·w_final · Embᵀ`` (norm prologue). The RMSNorm prologue is one
pass: rmsnorm(v)·w = rstd(v)·(v·w) with one scalar rstd per row, so each program accumulates the
dot product of ``v·w`` and the row's sum of squares in the same K loop and scales its outputs at
the end. The residual sum and the SwiGLU output are rounded to bf16, as the unfused step stores
them; the normalized activation is not rounded before a B = 1 dot (fp32 throughout) and is rounded
before the scale for ``tl.dot`` (B > 1), so the fused step computes the unfused step's function
up to bf16 rounding of one operand and fp32 summation order — checked, like every candidate,
against the fp32 step (``e2e.numerics``).

GEMV kernel regimes: B = 1 accumulates ``W ⊙ x`` in a (BLOCK_N, BLOCK_K) fp32 tile and reduces it
once (as ``kernels.gemv_kernel``); B > 1 uses ``tl.dot`` on a 16-row activation tile (rows ≥ B
masked) with W loaded as its (BLOCK_K, BLOCK_N) transpose. The K loop's loads are
software-pipelined by Triton (``num_stages``). With PDL (``launch_pdl``, Hopper's
``griddepcontrol``) each GEMV loads its first W block, then waits for its predecessor
(``gdc_wait``: no load of an activation before it) and lets its successor launch
(``gdc_launch_dependents``); the rotary and attention kernels wait before their first load.

Configs (``fused_configs.PRESETS``, ``fused_configs.site_config``): per GEMV site the specialist's tuned batch-1 GEMV
config or a rule. The step is timed per preset in the e2e run and chosen only where it measures
faster than the per-op step (``e2e.measure``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import decode_kernels as DK
from .graphs import capture_step
from .decoder import DecoderConfig, Weights
from .fused_configs import Preset, site_config
from .legality import cdiv


@triton.jit
def _load_in(x_ptr, d_ptr, s_ptr, nw_ptr, rows, k, m_mask, stride_x, K, pid,
             PROLOGUE: tl.constexpr, HAS_RES: tl.constexpr):
    """One K block of the GEMV's input f(x) before the row scale: ``(xk, sq)`` with sq the block's
    per-row sum of squares (RMSNorm prologue) — rmsnorm(v)·nw = rstd·(v·nw), so the scale rstd is
    applied to the finished dot product."""
    ptrs = x_ptr + rows[:, None] * stride_x + k[None, :]
    mask = m_mask[:, None]
    if PROLOGUE == 2:  # SwiGLU: x is the gate/up output (B, 2K)
        g = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(ptrs + K, mask=mask, other=0.0).to(tl.float32)
        xk = (g * tl.sigmoid(g) * u).to(tl.bfloat16).to(tl.float32)
        sq = tl.zeros([xk.shape[0]], dtype=tl.float32)
    else:
        xk = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
        if HAS_RES:  # the residual stream is kept in bf16, as the unfused step keeps it
            dk = tl.load(d_ptr + rows[:, None] * stride_x + k[None, :], mask=mask, other=0.0)
            xk = (xk + dk.to(tl.float32)).to(tl.bfloat16).to(tl.float32)
            if pid == 0:
                tl.store(s_ptr + rows[:, None] * stride_x + k[None, :], xk.to(tl.bfloat16), mask=mask)
        sq = tl.sum(xk * xk, axis=1)
        if PROLOGUE == 1:
            xk = xk * tl.load(nw_ptr + k).to(tl.float32)[None, :]
    return xk, sq


@triton.jit
def _mac(acc, w, xk, USE_DOT: tl.constexpr):
    if USE_DOT:  # w: (BLOCK_K, BLOCK_N), xk: (16, BLOCK_K)
        acc = tl.dot(xk.to(tl.bfloat16), w, acc)
    else:  # w: (BLOCK_N, BLOCK_K), xk: (1, BLOCK_K)
        acc = acc + w.to(tl.float32) * xk
    return acc


@triton.jit
def fused_gemv_kernel(x_ptr, d_ptr, nw_ptr, s_ptr, w_ptr, y_ptr, M, N, K, stride_x, stride_y, eps,
                      PROLOGUE: tl.constexpr, HAS_RES: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, USE_DOT: tl.constexpr, PDL: tl.constexpr):
    # y[M, N] = f(x)[M, K] · W[N, K]ᵀ; PROLOGUE 0: f = id, 1: rmsnorm(x [+ d])·nw, 2: silu(g)·u
    pid = tl.program_id(0)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    rows = tl.arange(0, BLOCK_M)
    m_mask = rows < M
    offs_k0 = tl.arange(0, BLOCK_K)
    if USE_DOT:
        w_ptrs = w_ptr + offs_n[None, :].to(tl.int64) * K + offs_k0[:, None]
        w_mask = n_mask[None, :]
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    else:
        w_ptrs = w_ptr + offs_n[:, None].to(tl.int64) * K + offs_k0[None, :]
        w_mask = n_mask[:, None]
        acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    # the first K block of W before waiting for the previous kernel: weights are never written
    w = tl.load(w_ptrs, mask=w_mask, other=0.0)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    xk, ss = _load_in(x_ptr, d_ptr, s_ptr, nw_ptr, rows, offs_k0, m_mask, stride_x, K, pid, PROLOGUE, HAS_RES)
    acc = _mac(acc, w, xk, USE_DOT)
    for k0 in range(BLOCK_K, K, BLOCK_K):  # K % BLOCK_K == 0 (site_config)
        w = tl.load(w_ptrs + k0, mask=w_mask, other=0.0)
        xk, sq = _load_in(x_ptr, d_ptr, s_ptr, nw_ptr, rows, k0 + offs_k0, m_mask, stride_x, K, pid, PROLOGUE,
                          HAS_RES)
        ss += sq
        acc = _mac(acc, w, xk, USE_DOT)
    if USE_DOT:
        out = acc
    else:
        out = tl.sum(acc, axis=1)[None, :]
    if PROLOGUE == 1:
        out = out * tl.rsqrt(ss / K + eps)[:, None]
    tl.store(y_ptr + rows[:, None] * stride_y + offs_n[None, :], out.to(y_ptr.dtype.element_ty),
             mask=m_mask[:, None] & n_mask[None, :])


@triton.jit
def qk_rope_kv_kernel(qkv_ptr, stride_b, qkn_ptr, cos_ptr, sin_ptr, pos_ptr, q_out, k_cache, v_cache, H, KV, LMAX,
                      eps, HALF: tl.constexpr, QK_NORM: tl.constexpr, PDL: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pos = tl.load(pos_ptr + b)
    offs = tl.arange(0, HALF)
    src = qkv_ptr + b * stride_b + h * 2 * HALF  # q heads, then k heads, then v heads
    x1 = tl.load(src + offs).to(tl.float32)
    x2 = tl.load(src + HALF + offs).to(tl.float32)
    if h < H + KV:
        if QK_NORM:
            r = tl.rsqrt((tl.sum(x1 * x1, axis=0) + tl.sum(x2 * x2, axis=0)) / (2 * HALF) + eps)
            wsel = (h >= H).to(tl.int32)
            w1 = tl.load(qkn_ptr + wsel * 2 * HALF + offs).to(tl.float32)
            w2 = tl.load(qkn_ptr + wsel * 2 * HALF + HALF + offs).to(tl.float32)
            x1 = (x1 * r * w1).to(tl.bfloat16).to(tl.float32)
            x2 = (x2 * r * w2).to(tl.bfloat16).to(tl.float32)
        c = tl.load(cos_ptr + pos * HALF + offs)
        s = tl.load(sin_ptr + pos * HALF + offs)
        if h < H:
            dst = q_out + (b * H + h) * 2 * HALF
        else:
            dst = k_cache + ((b * KV + (h - H)) * LMAX + pos) * 2 * HALF
        tl.store(dst + offs, (x1 * c - x2 * s).to(dst.dtype.element_ty))
        tl.store(dst + HALF + offs, (x2 * c + x1 * s).to(dst.dtype.element_ty))
    else:
        dst = v_cache + ((b * KV + (h - H - KV)) * LMAX + pos) * 2 * HALF
        tl.store(dst + offs, x1.to(dst.dtype.element_ty))
        tl.store(dst + HALF + offs, x2.to(dst.dtype.element_ty))


class _Gemv:
    """One GEMV site: launches :func:`fused_gemv_kernel` with the site's config."""

    def __init__(self, n: int, k: int, batch: int, preset: Preset, prologue: int, has_res: bool, eps: float,
                 answer: dict | None = None):
        self.n, self.k, self.b, self.eps = n, k, batch, eps
        self.cfg = site_config(n, k, batch, preset, answer)
        self.prologue, self.has_res, self.pdl = prologue, has_res, preset.pdl
        self.grid = (cdiv(n, self.cfg["BLOCK_N"]),)

    def __call__(self, x, w, y, d=None, nw=None, s=None):
        c = self.cfg
        extra = {"launch_pdl": True} if self.pdl else {}
        fused_gemv_kernel[self.grid](
            x, d if d is not None else x, nw if nw is not None else w, s if s is not None else y, w, y,
            self.b, self.n, self.k, x.stride(0), y.stride(0), self.eps,
            PROLOGUE=self.prologue, HAS_RES=self.has_res, BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"],
            BLOCK_K=c["BLOCK_K"], USE_DOT=bool(c["USE_DOT"]), PDL=self.pdl,
            num_warps=c["num_warps"], num_stages=c["num_stages"], **extra)
        return y


class FusedStep:
    """The fused decode step for ``batch`` sequences (same interface as ``choice_step.ChoiceStep``:
    ``set(tokens, pos)``, ``capture()``, ``replay()`` → logits (B, vocab) bf16).

    Args:
        cfg, weights, batch, caches, cos, sin: as ``ChoiceStep``.
        preset: the step-level config (:data:`PRESETS`).
        answers: the specialist's ``{role: answer}`` at this batch (``gemm/<site>`` read by presets
            with ``from_answers``).

    Raises:
        ValueError: a GEMV site's K is not a multiple of 16, or batch > 16.
    """

    def __init__(self, cfg: DecoderConfig, weights: Weights, batch: int, caches: tuple[list, list],
                 cos: torch.Tensor, sin: torch.Tensor, preset: Preset, answers: dict | None = None):
        s = cfg.shape
        self.cfg, self.w, self.b, self.preset = cfg, weights, batch, preset
        self.kc, self.vc = caches
        self.cos, self.sin = cos, sin
        dev, dt = weights.emb.device, torch.bfloat16
        sites = s.gemm_sites()
        eps = cfg.eps
        an = {site: (answers or {}).get(f"gemm/{site}") for site in sites}
        self.qkv0 = _Gemv(*sites["qkv"], batch, preset, 1, False, eps, an["qkv"])
        self.qkv = _Gemv(*sites["qkv"], batch, preset, 1, True, eps, an["qkv"])
        self.o = _Gemv(*sites["o_proj"], batch, preset, 0, False, eps, an["o_proj"])
        self.gu = _Gemv(*sites["gate_up"], batch, preset, 1, True, eps, an["gate_up"])
        self.down = _Gemv(*sites["down"], batch, preset, 2, False, eps, an["down"])
        self.head = _Gemv(*sites["lm_head"], batch, preset, 1, True, eps, an["lm_head"])
        self.configs = {name: g.cfg for name, g in (("qkv", self.qkv), ("o_proj", self.o), ("gate_up", self.gu),
                                                     ("down", self.down), ("lm_head", self.head))}
        self.buf = {site: torch.empty((batch, n), device=dev, dtype=dt) for site, (n, _) in sites.items()}
        self.res = [torch.empty((batch, s.hidden), device=dev, dtype=dt) for _ in range(3)]
        self.q = torch.empty((batch, s.heads, s.head_dim), device=dev, dtype=dt)
        self.attn = DK.DecodeAttention(batch, s.heads, s.kv_heads, s.head_dim, self.kc[0].shape[2], dt,
                                       device=str(dev), pdl=preset.pdl)
        self.tokens = torch.zeros((batch,), device=dev, dtype=torch.int64)
        self.pos = torch.zeros((batch,), device=dev, dtype=torch.int32)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None

    def set(self, tokens: torch.Tensor, pos: int) -> None:
        self.tokens.copy_(tokens)
        self.pos.fill_(pos)

    def _rope(self, qkv: torch.Tensor, lw: dict, i: int) -> None:
        s = self.cfg.shape
        extra = {"launch_pdl": True} if self.preset.pdl else {}
        qkn = lw["qk"] if self.cfg.qk_norm else qkv
        qk_rope_kv_kernel[(self.b, s.heads + 2 * s.kv_heads)](
            qkv, qkv.stride(0), qkn, self.cos, self.sin, self.pos, self.q, self.kc[i], self.vc[i], s.heads,
            s.kv_heads, self.kc[i].shape[2], self.cfg.eps, HALF=s.head_dim // 2, QK_NORM=self.cfg.qk_norm,
            PDL=self.preset.pdl, num_warps=1, **extra)

    def forward(self) -> torch.Tensor:
        b = self.buf
        x = torch.index_select(self.w.emb, 0, self.tokens)
        d = None
        r = 0
        for i, lw in enumerate(self.w.layers):
            if i == 0:
                self.qkv0(x, lw["qkv"], b["qkv"], nw=lw["in"])
            else:
                nxt = self.res[r]
                self.qkv(x, lw["qkv"], b["qkv"], d=d, nw=lw["in"], s=nxt)
                x, r = nxt, (r + 1) % 3
            self._rope(b["qkv"], lw, i)
            a = self.attn(self.q, self.kc[i], self.vc[i], self.pos)
            self.o(a, lw["o"], b["o_proj"])
            nxt = self.res[r]
            self.gu(x, lw["gu"], b["gate_up"], d=b["o_proj"], nw=lw["post"], s=nxt)
            x, r = nxt, (r + 1) % 3
            d = self.down(b["gate_up"], lw["down"], b["down"])
        return self.head(x, self.w.emb, b["lm_head"], d=d, nw=self.w.final, s=self.res[r])

    def capture(self, warmup: int = 2) -> None:
        """Warm up on a side stream (compiles every kernel), then capture one step."""
        self.graph, self.logits = capture_step(self.forward, warmup)

    def replay(self) -> torch.Tensor:
        self.graph.replay()
        return self.logits
