"""F7 kernel-tuning workloads: GEMM/GEMV, RMSNorm, SwiGLU and vocabulary softmax from real decoders.

Pure Python (no torch, no triton). Shapes: the models' ``config.json`` as mirrored on Hugging Face
(huggingface.co/keras/qwen3_1.7b_en, huggingface.co/MultiRL/qwen3_4b_instruct_sft,
huggingface.co/Emm9625/Llama-3.2-1B-chatml — a duplicate of unsloth/Llama-3.2-1B; holdout:
huggingface.co/DeepBrainz/DeepBrainz-R1-0.6B-8K and huggingface.co/thejaminator/qwen-hook-layer-9-step-500,
a copy of Qwen/Qwen3-8B's); Qwen3-1.7B's 3.44 GB of bf16 weights match its safetensors
(huggingface.co/Qwen/Qwen3-1.7B-Base):

* GEMM ``y[M,N] = x[M,K] · W[N,K]ᵀ`` (bf16), sites qkv (fused), o_proj, gate_up (fused), down,
  lm_head of Qwen3-1.7B, Qwen3-4B, Llama-3.2-1B at decode M ∈ {1,2,4,8} and prefill
  M ∈ {128,512,2048,4096}: 120 sites, 112 unique keys (Qwen3-1.7B and Llama share o_proj 2048×2048).
* RMSNorm (bf16 rows × D, weight D): hidden D ∈ {2048 (Qwen3-1.7B = Llama), 2560} with rows = M,
  and Qwen3 QK-norm D = 128 with rows = M·(heads+kv) (24 for Qwen3-1.7B, 40 for Qwen3-4B).
* SwiGLU ``out[M,I] = silu(gu[:, :I]) · gu[:, I:]`` (bf16) with I ∈ {6144, 9728, 8192}.
* Softmax over the vocabulary (fp32 logits rows × C) with C ∈ {151936, 128256}, decode M only.

Each workload is a frozen :class:`Workload`; ``key`` identifies it (op, shape, dtype) and is what
duplicates collapse on (the first model/site that produced a key is kept; the others are listed in
``also``). The holdout (``holdout_workloads``) holds Qwen3-0.6B/Qwen3-8B shapes and unseen
M ∈ {3,16,1024} on seen (N,K): none of its keys is in the seen corpus.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DECODE_M = (1, 2, 4, 8)
PREFILL_M = (128, 512, 2048, 4096)
SEEN_M = DECODE_M + PREFILL_M


@dataclass(frozen=True)
class ModelShape:
    name: str
    hidden: int
    inter: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int

    def gemm_sites(self) -> dict[str, tuple[int, int]]:
        """(N, K) per GEMM site (QKV and gate/up fused)."""
        qkv_n = (self.heads + 2 * self.kv_heads) * self.head_dim
        attn = self.heads * self.head_dim
        return {
            "qkv": (qkv_n, self.hidden),
            "o_proj": (self.hidden, attn),
            "gate_up": (2 * self.inter, self.hidden),
            "down": (self.hidden, self.inter),
            "lm_head": (self.vocab, self.hidden),
        }


MODELS: dict[str, ModelShape] = {
    "Qwen3-1.7B": ModelShape("Qwen3-1.7B", 2048, 6144, 16, 8, 128, 151936),
    "Qwen3-4B": ModelShape("Qwen3-4B", 2560, 9728, 32, 8, 128, 151936),
    "Llama-3.2-1B": ModelShape("Llama-3.2-1B", 2048, 8192, 32, 8, 64, 128256),
}
HOLDOUT_MODELS: dict[str, ModelShape] = {
    "Qwen3-0.6B": ModelShape("Qwen3-0.6B", 1024, 3072, 16, 8, 128, 151936),
    "Qwen3-8B": ModelShape("Qwen3-8B", 4096, 12288, 32, 8, 128, 151936),
}
SITES = ("qkv", "o_proj", "gate_up", "down", "lm_head")
# decoder layers (the same config.json files): per decoded token every layer runs qkv, o_proj, gate_up and
# down once; lm_head runs once.
LAYERS: dict[str, int] = {"Qwen3-1.7B": 28, "Qwen3-4B": 36, "Llama-3.2-1B": 16}
QK_NORM_MODELS = ("Qwen3-1.7B", "Qwen3-4B")  # Llama has no QK-norm


def phase_of(m: int) -> str:
    return "decode" if m <= 8 else "prefill"


@dataclass(frozen=True)
class Workload:
    """One tuning problem. For each op the fields mean:

    * ``gemm``: ``y[m,n] = x[m,k] · W[n,k]ᵀ``.
    * ``rmsnorm``: ``m`` rows of width ``n`` (= D); ``k`` = 0.
    * ``swiglu``: ``m`` rows, ``n`` = I (output width; the input is ``m × 2I``); ``k`` = 0.
    * ``softmax``: ``m`` rows of ``n`` = C logits (fp32 in, fp32 out); ``k`` = 0.
    * ``rmsnorm_residual``: ``m`` rows of width ``n`` = D: ``s = x + d``, ``y = rmsnorm(s)·w``
      (the fused residual add + norm of a decoder block; in no recorded corpus); ``k`` = 0.

    ``m_tokens`` is the token count M the shape came from (rows = M·(heads+kv) for QK-norm).
    """

    op: str
    m: int
    n: int
    k: int
    dtype: str
    model: str
    site: str
    phase: str
    m_tokens: int
    layout: str = ""
    also: tuple[str, ...] = field(default=())

    @property
    def key(self) -> str:
        return workload_key(self.op, self.m, self.n, self.k, self.dtype)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["also"] = list(self.also)
        d["key"] = self.key
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Workload:
        return Workload(
            op=d["op"], m=int(d["m"]), n=int(d["n"]), k=int(d["k"]), dtype=d["dtype"],
            model=d["model"], site=d["site"], phase=d["phase"], m_tokens=int(d["m_tokens"]),
            layout=d.get("layout", ""), also=tuple(d.get("also", ())),
        )


def workload_key(op: str, m: int, n: int, k: int, dtype: str) -> str:
    return f"{op}:{dtype}:m{m}:n{n}:k{k}"


LAYOUTS = {
    "gemm": "x_rowmajor,w_NK",
    "rmsnorm": "x_rowmajor,w_D",
    "swiglu": "gu_rowmajor_[g|u]",
    "softmax": "x_rowmajor",
    "rmsnorm_residual": "x_rowmajor,d_rowmajor,w_D",
}


def _gemm(model: ModelShape, site: str, m: int) -> Workload:
    n, k = model.gemm_sites()[site]
    return Workload("gemm", m, n, k, "bf16", model.name, site, phase_of(m), m, LAYOUTS["gemm"])


def _model_workloads(model: ModelShape, ms: tuple[int, ...], *, extras: bool) -> list[Workload]:
    out: list[Workload] = []
    for site in SITES:
        for m in ms:
            out.append(_gemm(model, site, m))
    if extras:
        for m in ms:
            out.append(Workload("rmsnorm", m, model.hidden, 0, "bf16", model.name, "input_norm",
                                phase_of(m), m, LAYOUTS["rmsnorm"]))
        if model.name in QK_NORM_MODELS:
            rows_per_tok = model.heads + model.kv_heads
            for m in ms:
                out.append(Workload("rmsnorm", m * rows_per_tok, model.head_dim, 0, "bf16",
                                    model.name, "qk_norm", phase_of(m), m, LAYOUTS["rmsnorm"]))
        for m in ms:
            out.append(Workload("swiglu", m, model.inter, 0, "bf16", model.name, "swiglu",
                                phase_of(m), m, LAYOUTS["swiglu"]))
        for m in ms:
            if m <= 8:
                out.append(Workload("softmax", m, model.vocab, 0, "fp32", model.name,
                                    "sampling_softmax", "decode", m, LAYOUTS["softmax"]))
    return out


def dedupe(ws: list[Workload]) -> list[Workload]:
    """Collapse equal keys, keeping the first and listing the others' ``model/site`` in ``also``."""
    first: dict[str, Workload] = {}
    extra: dict[str, list[str]] = {}
    order: list[str] = []
    for w in ws:
        if w.key in first:
            tag = f"{w.model}/{w.site}"
            if tag not in extra[w.key] and tag != f"{first[w.key].model}/{first[w.key].site}":
                extra[w.key].append(tag)
            continue
        first[w.key] = w
        extra[w.key] = []
        order.append(w.key)
    out = []
    for key in order:
        w = first[key]
        out.append(Workload(w.op, w.m, w.n, w.k, w.dtype, w.model, w.site, w.phase, w.m_tokens,
                            w.layout, tuple(extra[key])))
    return out


def seen_workloads_raw() -> list[Workload]:
    """All seen workloads before de-duplication (120 GEMM + norms + SwiGLU + softmax)."""
    out: list[Workload] = []
    for model in MODELS.values():
        out.extend(_model_workloads(model, SEEN_M, extras=True))
    return out


def seen_workloads() -> list[Workload]:
    """The seen corpus, unique by key, in measuring order (see :func:`measure_order`)."""
    return measure_order(dedupe(seen_workloads_raw()))


def holdout_workloads() -> list[Workload]:
    """Novel-shape holdout: Qwen3-0.6B / Qwen3-8B GEMM sites × M ∈ {1,8,512,2048} (40), plus
    unseen M ∈ {3,16,1024} on 7 seen (N,K) pairs (21). Keys never collide with the seen corpus."""
    out: list[Workload] = []
    for model in HOLDOUT_MODELS.values():
        for site in SITES:
            for m in (1, 8, 512, 2048):
                out.append(_gemm(model, site, m))
    seen_pairs = [
        (MODELS["Qwen3-1.7B"], "qkv"), (MODELS["Qwen3-1.7B"], "down"),
        (MODELS["Qwen3-4B"], "qkv"), (MODELS["Qwen3-4B"], "gate_up"), (MODELS["Qwen3-4B"], "down"),
        (MODELS["Llama-3.2-1B"], "o_proj"), (MODELS["Llama-3.2-1B"], "lm_head"),
    ]
    for model, site in seen_pairs:
        for m in (3, 16, 1024):
            out.append(_gemm(model, site, m))
    seen = {w.key for w in seen_workloads()}
    ho = [w for w in dedupe(out) if w.key not in seen]
    return measure_order(ho)


_OP_ORDER = {"gemm": 0, "softmax": 1, "rmsnorm": 2, "swiglu": 3, "rmsnorm_residual": 4}


def measure_order(ws: list[Workload]) -> list[Workload]:
    """Order for measuring: decode first (GEMV, then softmax/norm/SwiGLU), prefill after, by
    ascending M, so that a pass cut short loses the largest prefill shapes last-in. Within a
    group, workloads sharing compiled kernels (same op and M bucket) sit together."""
    def sk(w: Workload) -> tuple:
        return (0 if w.phase == "decode" else 1, w.m_tokens if w.phase == "prefill" else 0,
                _OP_ORDER.get(w.op, 9), w.m_tokens, w.n, w.k, w.m)
    return sorted(ws, key=sk)


def select(ws: list[Workload], ops: list[str] | None = None, max_m: int | None = None) -> list[Workload]:
    out = ws
    if ops:
        out = [w for w in out if w.op in ops]
    if max_m is not None:
        out = [w for w in out if w.m_tokens <= max_m]
    return out


ROW_OPS = ("rmsnorm", "swiglu", "softmax")


def rerecord_workloads() -> list[Workload]:
    """The seen workloads whose candidate space grew with torch.compile's kernel (every
    RMSNorm, SwiGLU and softmax workload: 64), in measuring order."""
    return [w for w in seen_workloads() if w.op in ROW_OPS]


def corpus(name: str) -> list[Workload]:
    if name in ("seen", "pass1", "pass2", "pass3"):
        return seen_workloads()
    if name.startswith("rerecord"):
        return rerecord_workloads()
    if name == "holdout":
        return holdout_workloads()
    raise KeyError(name)
