"""The decode step built from the specialist's kernel choices, captured in one CUDA graph.

Imports torch and triton at module import: import it lazily (``e2e`` does).

Every GEMM / GEMV (qkv, o_proj, gate_up, down, lm_head), norm (the first layer's input RMSNorm,
the fused residual add + RMSNorm of every later norm, Qwen3's QK-norm) and activation (SwiGLU)
runs the candidate the specialist answered for its workload key (``e2e.step_workloads``), built by
``kernels.build``; the QK-norm runs the answered config in the two-weight variant of
``decode_kernels.qk_norm_rows``. Fixed, untuned paths: the embedding lookup
(``torch.index_select``), rotary embedding + KV-cache write (``decode_kernels.rope_kv``) and
split-KV decode attention (``decode_kernels.DecodeAttention``).

Position and tokens live in device buffers (``pos``, ``tokens``), so one captured graph serves
every decoding position: ``set(tokens, pos)`` then ``replay()``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from . import decode_kernels as DK
from . import kernels as KN
from .decoder import DecoderConfig, Weights
from .graphs import capture_step
from .workloads import Workload


def _qk_vendor(cfg: DecoderConfig, batch: int):
    s = cfg.shape
    h, kv, hd, eps = s.heads, s.kv_heads, s.head_dim, cfg.eps

    def run(qkv, lw):
        q = qkv[:, :h * hd].view(batch, h, hd)
        k = qkv[:, h * hd:(h + kv) * hd].view(batch, kv, hd)
        return F.rms_norm(q, (hd,), lw["qn"], eps), F.rms_norm(k, (hd,), lw["kn"], eps)
    return run


def _qk_inductor(cfg: DecoderConfig, batch: int, device: str):
    s = cfg.shape
    h, kv, hd, eps = s.heads, s.kv_heads, s.head_dim, cfg.eps
    out = torch.empty((batch, h + kv, hd), device=device, dtype=torch.bfloat16)

    def f(qkv, qn, kn, o):
        q = qkv[:, :h * hd].view(batch, h, hd)
        k = qkv[:, h * hd:(h + kv) * hd].view(batch, kv, hd)
        o[:, :h].copy_(F.rms_norm(q, (hd,), qn, eps))
        o[:, h:].copy_(F.rms_norm(k, (hd,), kn, eps))

    cf = torch.compile(f, dynamic=False, fullgraph=True)

    def run(qkv, lw):
        cf(qkv, lw["qn"], lw["kn"], out)
        return out[:, :h], out[:, h:]
    return run


def _qk_triton(cfg: DecoderConfig, batch: int, conf: dict[str, int]):
    s = cfg.shape
    h, kv, hd, eps = s.heads, s.kv_heads, s.head_dim, cfg.eps

    def run(qkv, lw):
        DK.qk_norm_rows(conf, qkv, lw["qk"], h, kv, hd, eps)
        return (qkv[:, :h * hd].view(batch, h, hd), qkv[:, h * hd:(h + kv) * hd].view(batch, kv, hd))
    return run


class ChoiceStep:
    """The compiled decode step for ``batch`` sequences over caches of ``lmax`` positions.

    Args:
        cfg, weights: the decoder and its bf16 weights.
        batch: B.
        caches: per-layer (K, V) lists of (B, kv, lmax, hd) bf16 tensors.
        cos, sin: rotary tables (≥ lmax, hd/2) fp32.
        answers: ``{role: answer}`` for the roles of :func:`e2e.step_workloads` (``gemm/qkv``, …,
            ``rmsnorm/first``, ``rmsnorm_residual``, ``rmsnorm/qk``, ``swiglu``); an answer is the
            specialist's ``{"id", "family", "config", ...}``.
        workloads: ``{role: Workload}`` (the shapes the answers were asked for).

    Raises:
        ValueError: an answer names a family ``kernels.build`` does not know.
    """

    def __init__(self, cfg: DecoderConfig, weights: Weights, batch: int, caches: tuple[list, list],
                 cos: torch.Tensor, sin: torch.Tensor, answers: dict[str, dict[str, Any]],
                 workloads: dict[str, Workload]):
        s = cfg.shape
        self.cfg, self.w, self.b = cfg, weights, batch
        self.kc, self.vc = caches
        self.cos, self.sin = cos, sin
        lmax = self.kc[0].shape[2]
        dev, dt = str(weights.emb.device), torch.bfloat16
        self.tokens = torch.zeros((batch,), device=dev, dtype=torch.int64)
        self.pos = torch.zeros((batch,), device=dev, dtype=torch.int32)

        def build(role: str):
            a = answers[role]
            return KN.build(a["family"], a.get("config") or {}, workloads[role], device=dev, eps=cfg.eps)

        self.gemm = {site: build(f"gemm/{site}") for site in ("qkv", "o_proj", "gate_up", "down", "lm_head")}
        n = {site: s.gemm_sites()[site][0] for site in self.gemm}
        self.gout = {site: torch.empty((batch, n[site]), device=dev, dtype=dt) for site in self.gemm}
        self.norm0 = build("rmsnorm/first")
        self.norm0_out = torch.empty((batch, s.hidden), device=dev, dtype=dt)
        self.fused = build("rmsnorm_residual")
        self.fused_out = [torch.empty((2, batch, s.hidden), device=dev, dtype=dt) for _ in range(2 * cfg.layers)]
        self.swiglu = build("swiglu")
        self.act = torch.empty((batch, s.inter), device=dev, dtype=dt)
        if cfg.qk_norm:
            a = answers["rmsnorm/qk"]
            if a["family"] == "rmsnorm_rows":
                self.qk = _qk_triton(cfg, batch, a["config"])
            elif a["family"] == "inductor":
                self.qk = _qk_inductor(cfg, batch, dev)
            elif a["family"] == "vendor":
                self.qk = _qk_vendor(cfg, batch)
            else:
                raise ValueError(f"no QK-norm path for family {a['family']!r}")
        else:
            self.qk = None
        self.q = torch.empty((batch, s.heads, s.head_dim), device=dev, dtype=dt)
        self.attn = DK.DecodeAttention(batch, s.heads, s.kv_heads, s.head_dim, lmax, dt, device=dev)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None

    def set(self, tokens: torch.Tensor, pos: int) -> None:
        self.tokens.copy_(tokens)
        self.pos.fill_(pos)

    def forward(self) -> torch.Tensor:
        s, cfg = self.cfg.shape, self.cfg
        h, kv, hd = s.heads, s.kv_heads, s.head_dim
        x = torch.index_select(self.w.emb, 0, self.tokens)
        hn = self.norm0((x, self.w.layers[0]["in"]), self.norm0_out)
        d = None
        for i, lw in enumerate(self.w.layers):
            if i > 0:
                hn, x = self.fused((x, d, lw["in"]), self.fused_out[2 * i])
            qkv = self.gemm["qkv"]((hn, lw["qkv"]), self.gout["qkv"])
            if self.qk is not None:
                qs, ks = self.qk(qkv, lw)
            else:
                qs = qkv[:, :h * hd].view(self.b, h, hd)
                ks = qkv[:, h * hd:(h + kv) * hd].view(self.b, kv, hd)
            vs = qkv[:, (h + kv) * hd:].view(self.b, kv, hd)
            DK.rope_kv(qs, ks, vs, self.cos, self.sin, self.pos, self.q, self.kc[i], self.vc[i], h, kv)
            a = self.attn(self.q, self.kc[i], self.vc[i], self.pos)
            o = self.gemm["o_proj"]((a, lw["o"]), self.gout["o_proj"])
            hn, x = self.fused((x, o, lw["post"]), self.fused_out[2 * i + 1])
            gu = self.gemm["gate_up"]((hn, lw["gu"]), self.gout["gate_up"])
            act = self.swiglu((gu,), self.act)
            d = self.gemm["down"]((act, lw["down"]), self.gout["down"])
        hn, x = self.fused((x, d, self.w.final), self.fused_out[0])
        return self.gemm["lm_head"]((hn, self.w.emb), self.gout["lm_head"])

    def capture(self, warmup: int = 2) -> None:
        """Warm up on a side stream (compiles every kernel), then capture one step."""
        self.graph, self.logits = capture_step(self.forward, warmup)

    def replay(self) -> torch.Tensor:
        self.graph.replay()
        return self.logits
