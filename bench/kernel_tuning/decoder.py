"""The decoder of the end-to-end decode step: configs, random weights, and the torch step that the
eager, eager + CUDA graph and torch.compile legs run (and, on fp32 weights, the reference).

Imports torch at module import: import it lazily (``e2e`` does).

Configs (Hugging Face ``config.json`` of Qwen/Qwen3-1.7B, Qwen/Qwen3-4B, meta-llama/Llama-3.2-1B):
hidden, intermediate, heads / kv heads, head_dim and vocabulary as in :data:`workloads.MODELS`;
28 / 36 / 16 layers; RMSNorm epsilon 1e-6 / 1e-6 / 1e-5; rope theta 1e6 / 1e6 / 5e5 (Llama with
the ``llama3`` frequency scaling: factor 32, low 1, high 4, original context 8192); Qwen3 has
per-head RMSNorm of q and k (``q_norm``, ``k_norm``); all three tie the LM head to the embedding.

One decoder layer, as the torch step runs it (B tokens, one per sequence; grouped-query heads):

    x = x + delta                       (delta: the previous layer's MLP output; zeros at layer 0)
    h = rms_norm(x)·w_in;  qkv = h·Wqkvᵀ;  q, k, v = split(qkv)
    [Qwen3] q = rms_norm(q)·q_norm;  k = rms_norm(k)·k_norm       (per head, D = head_dim)
    q, k = rope(q, k, pos);  K[pos], V[pos] = k, v
    a = SDPA(q (B, heads, 1, hd), K[:L], V[:L], enable_gqa=True);  x = x + a·Woᵀ
    h = rms_norm(x)·w_post;  g, u = h·Wguᵀ;  delta = (silu(g)·u)·Wdownᵀ

then ``logits = rms_norm(x + delta)·w_final · Embᵀ``. Attention is the standard grouped-query call
of ``torch.nn.functional.scaled_dot_product_attention``: the query heads as heads with one query
position, the cache's kv heads, ``enable_gqa=True``, so query head ``h`` attends to kv head
``h // (heads/kv)`` (Hugging Face's ``repeat_kv`` order) without copying the cache, and PyTorch picks
its SDPA backend (the call a user of ``torch.nn.functional`` writes for grouped-query decode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from .workloads import LAYERS, MODELS, ModelShape


@dataclass(frozen=True)
class DecoderConfig:
    shape: ModelShape
    layers: int
    eps: float
    rope_theta: float
    qk_norm: bool
    llama3_scaling: tuple[float, float, float, int] | None = None  # factor, low, high, original context

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def group(self) -> int:
        return self.shape.heads // self.shape.kv_heads


CONFIGS: dict[str, DecoderConfig] = {
    "Qwen3-1.7B": DecoderConfig(MODELS["Qwen3-1.7B"], LAYERS["Qwen3-1.7B"], 1e-6, 1e6, True),
    "Qwen3-4B": DecoderConfig(MODELS["Qwen3-4B"], LAYERS["Qwen3-4B"], 1e-6, 1e6, True),
    "Llama-3.2-1B": DecoderConfig(MODELS["Llama-3.2-1B"], LAYERS["Llama-3.2-1B"], 1e-5, 5e5, False,
                                  (32.0, 1.0, 4.0, 8192)),
}


def inv_freq(cfg: DecoderConfig) -> torch.Tensor:
    """Rotary inverse frequencies (hd/2,) in fp64, with Llama 3's frequency scaling when set
    (long wavelengths divided by ``factor``, short ones kept, a smooth blend between)."""
    hd = cfg.shape.head_dim
    f = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    if cfg.llama3_scaling is None:
        return f
    factor, low, high, orig = cfg.llama3_scaling
    wavelen = 2 * math.pi / f
    low_wl, high_wl = orig / low, orig / high
    smooth = (orig / wavelen - low) / (high - low)
    scaled = torch.where(wavelen > low_wl, f / factor, f)
    mid = (wavelen <= low_wl) & (wavelen >= high_wl)
    return torch.where(mid, (1 - smooth) * f / factor + smooth * f, scaled)


def rope_tables(cfg: DecoderConfig, lmax: int, device: str = "cuda") -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (lmax, hd/2) in fp32."""
    t = torch.arange(lmax, dtype=torch.float64)
    ang = torch.outer(t, inv_freq(cfg))
    return ang.cos().float().to(device), ang.sin().float().to(device)


@dataclass
class Weights:
    emb: torch.Tensor  # (V, D); also the LM head (tied)
    final: torch.Tensor  # (D,)
    layers: list[dict[str, torch.Tensor]]  # in, qkv, qn, kn, qk (2, hd), o, post, gu, down

    def to(self, dtype: torch.dtype) -> Weights:
        return Weights(self.emb.to(dtype), self.final.to(dtype),
                       [{k: v.to(dtype) for k, v in lw.items()} for lw in self.layers])

    def nbytes(self) -> int:
        """Bytes of the weights one decode step reads: every layer tensor, the final norm and the
        tied LM head (the embedding matrix); the embedding lookup's B rows are not counted."""
        n = self.emb.numel() * self.emb.element_size() + self.final.numel() * self.final.element_size()
        for lw in self.layers:
            n += sum(v.numel() * v.element_size() for k, v in lw.items() if k not in ("qk",))
        return n


def random_weights(cfg: DecoderConfig, seed: int = 0, dtype: torch.dtype = torch.bfloat16,
                   device: str = "cuda") -> Weights:
    """Random weights at the model's real shapes: N(0, 1/K) matrices (K = input width), norm
    weights 1 + N(0, 0.1²), embedding N(0, 0.02²)."""
    s = cfg.shape
    g = torch.Generator(device=device)
    g.manual_seed(seed)

    def mat(n: int, k: int) -> torch.Tensor:
        return (torch.randn(n, k, device=device, dtype=dtype, generator=g) * (k ** -0.5)).to(dtype)

    def norm(n: int) -> torch.Tensor:
        return (1.0 + 0.1 * torch.randn(n, device=device, dtype=torch.float32, generator=g)).to(dtype)

    sites = s.gemm_sites()
    layers = []
    for _ in range(cfg.layers):
        lw = {"in": norm(s.hidden), "qkv": mat(*sites["qkv"]), "o": mat(*sites["o_proj"]), "post": norm(s.hidden),
              "gu": mat(*sites["gate_up"]), "down": mat(*sites["down"])}
        if cfg.qk_norm:
            lw["qn"], lw["kn"] = norm(s.head_dim), norm(s.head_dim)
            lw["qk"] = torch.stack((lw["qn"], lw["kn"]))
        layers.append(lw)
    emb = (torch.randn(s.vocab, s.hidden, device=device, dtype=dtype, generator=g) * 0.02).to(dtype)
    return Weights(emb, norm(s.hidden), layers)


def kv_caches(cfg: DecoderConfig, batch: int, lmax: int, dtype: torch.dtype, *, fill: bool, seed: int = 1,
              device: str = "cuda") -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per-layer K and V caches (B, kv, lmax, hd); ``fill`` draws N(0, 1) values (a context whose
    keys and values were written earlier), else zeros."""
    s = cfg.shape
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    shape = (batch, s.kv_heads, lmax, s.head_dim)

    def one() -> torch.Tensor:
        if fill:
            return torch.randn(shape, device=device, dtype=dtype, generator=g)
        return torch.zeros(shape, device=device, dtype=dtype)

    return [one() for _ in range(cfg.layers)], [one() for _ in range(cfg.layers)]


def kv_read_bytes(cfg: DecoderConfig, batch: int, context: int, elem: int = 2) -> int:
    """Bytes of K and V one step reads: layers × 2 × B × kv × context × hd × elem."""
    s = cfg.shape
    return cfg.layers * 2 * batch * s.kv_heads * context * s.head_dim * elem


def _rope(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def make_layer_fn(cfg: DecoderConfig, batch: int) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """``layer(x, delta, lw, k_cache, v_cache, cos, sin, pos, length) -> (x, delta)`` (plain torch;
    ``pos`` and ``length`` are Python ints, so a compiled or captured layer is position-specific)."""
    s = cfg.shape
    b, h, kv, hd, d = batch, s.heads, s.kv_heads, s.head_dim, s.hidden
    eps = cfg.eps
    qk_norm = cfg.qk_norm

    def layer(x, delta, lw, kc, vc, cos, sin, pos: int, length: int):
        x = x + delta
        hn = F.rms_norm(x, (d,), lw["in"], eps)
        qkv = F.linear(hn, lw["qkv"])
        q = qkv[:, :h * hd].view(b, h, hd)
        k = qkv[:, h * hd:(h + kv) * hd].view(b, kv, hd)
        v = qkv[:, (h + kv) * hd:].view(b, kv, hd)
        if qk_norm:
            q = F.rms_norm(q, (hd,), lw["qn"], eps)
            k = F.rms_norm(k, (hd,), lw["kn"], eps)
        c = cos[pos].to(x.dtype)
        sn = sin[pos].to(x.dtype)
        q = _rope(q, c, sn)
        k = _rope(k, c, sn)
        kc[:, :, pos] = k
        vc[:, :, pos] = v
        a = F.scaled_dot_product_attention(q.view(b, h, 1, hd), kc[:, :, :length], vc[:, :, :length], enable_gqa=True)
        x = x + F.linear(a.reshape(b, h * hd), lw["o"])
        hn = F.rms_norm(x, (d,), lw["post"], eps)
        gu = F.linear(hn, lw["gu"])
        gg, u = gu.chunk(2, dim=-1)
        return x, F.linear(F.silu(gg) * u, lw["down"])

    return layer


def make_head_fn(cfg: DecoderConfig) -> Callable[..., torch.Tensor]:
    """``head(x, delta, w_final, emb) -> logits`` (B, vocab)."""
    d, eps = cfg.shape.hidden, cfg.eps

    def head(x, delta, wf, emb):
        return F.linear(F.rms_norm(x + delta, (d,), wf, eps), emb)

    return head


class TorchStep:
    """The torch decode step over ``weights`` and per-layer caches: ``__call__(tokens (B,) int64,
    pos, length) -> logits``. ``layer`` / ``head`` default to the plain functions; the
    torch.compile leg passes compiled ones."""

    def __init__(self, cfg: DecoderConfig, weights: Weights, batch: int, caches: tuple[list, list],
                 cos: torch.Tensor, sin: torch.Tensor, layer: Callable | None = None, head: Callable | None = None):
        self.cfg, self.w, self.b = cfg, weights, batch
        self.kc, self.vc = caches
        self.cos, self.sin = cos, sin
        self.layer = layer or make_layer_fn(cfg, batch)
        self.head = head or make_head_fn(cfg)
        self.zero = torch.zeros((batch, cfg.shape.hidden), device=weights.emb.device, dtype=weights.emb.dtype)

    def __call__(self, tokens: torch.Tensor, pos: int, length: int) -> torch.Tensor:
        x = F.embedding(tokens, self.w.emb)
        delta = self.zero
        for i, lw in enumerate(self.w.layers):
            x, delta = self.layer(x, delta, lw, self.kc[i], self.vc[i], self.cos, self.sin, pos, length)
        return self.head(x, delta, self.w.final, self.w.emb)


def unique_entry(fn: Callable[..., Any], tag: str) -> Callable[..., Any]:
    """``fn`` behind a wrapper with its own code object (named after ``tag``): Dynamo keeps its
    compiled graphs per code object, so compiling the wrapper traces and compiles afresh instead of
    reusing a graph compiled earlier in this process for the same function (the wrapper is inlined:
    the graph is ``fn``'s). Used for the fresh compiles of the torch.compile legs."""
    name = "kt_entry_" + "".join(c if c.isalnum() else "_" for c in tag)
    ns: dict[str, Any] = {"_target": fn}
    exec(compile(f"def {name}(*args):\n    return _target(*args)\n", f"<kt-compile-{tag}>", "exec"), ns)  # noqa: S102
    return ns[name]


def compiled_fns(cfg: DecoderConfig, batch: int, mode: str = "max-autotune-no-cudagraphs",
                 tag: str = "layer") -> tuple[Any, Any]:
    """torch.compile (Inductor with its own GEMM autotuning under ``max-autotune``) of one layer
    and of the head, static shapes, each behind :func:`unique_entry` (a fresh Dynamo trace per
    call). Every layer shares the layer's compiled graph (the weights are arguments); the caller
    captures the whole step in one CUDA graph."""
    return (torch.compile(unique_entry(make_layer_fn(cfg, batch), f"{tag}_layer"), mode=mode, dynamic=False,
                          fullgraph=True),
            torch.compile(unique_entry(make_head_fn(cfg), f"{tag}_head"), mode=mode, dynamic=False, fullgraph=True))


def whole_step_compiled(step: TorchStep, tokens: torch.Tensor, pos: int, length: int, tag: str = "whole",
                        mode: str = "max-autotune") -> Callable[[], torch.Tensor]:
    """``torch.compile(mode=mode)`` of the whole decode step (embedding, every layer, head) as one
    function: under ``max-autotune`` Inductor autotunes its GEMMs and runs the step through its
    own CUDA graphs (CUDA-graph trees). The weights, caches, tokens, rotary tables and the zero
    delta are marked static addresses, so the graphs read them in place (no copies per call).
    Returns a function of no arguments giving the logits (B, vocab)."""
    for t in [step.w.emb, step.w.final, tokens, step.cos, step.sin, step.zero, *step.kc, *step.vc,
              *(v for lw in step.w.layers for v in lw.values())]:
        torch._dynamo.mark_static_address(t)
    return torch.compile(unique_entry(lambda: step(tokens, pos, length), tag), mode=mode, dynamic=False)
