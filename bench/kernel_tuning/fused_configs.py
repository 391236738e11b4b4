"""Configs of the fused decode step (``fused_step``): the step-level presets and the per-site GEMV
config rule. No torch / triton import: the e2e driver and the CPU tests read them anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from .legality import cdiv


@dataclass(frozen=True)
class Preset:
    """A step-level config of the fused family: per GEMV site either the specialist's tuned GEMV
    config (``from_answers``, where its answer is a Triton GEMV at batch 1) or the rule of
    :func:`site_config` (target programs ``ctas``, W tile elements ``tile``), with ``warps``,
    ``stages`` (Triton's software pipelining of the loop's loads), and whether PDL chains the
    launches."""
    name: str
    ctas: int
    tile: int
    warps: int
    stages: int
    pdl: bool
    from_answers: bool = False


PRESETS = (Preset("spec", 264, 4096, 4, 3, True, True), Preset("spec_nopdl", 264, 4096, 4, 3, False, True),
           Preset("a", 264, 4096, 4, 3, True), Preset("a_nopdl", 264, 4096, 4, 3, False))


def site_config(n: int, k: int, batch: int, p: Preset, answer: dict | None = None) -> dict[str, int]:
    """``{BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, USE_DOT}`` of one GEMV site
    (N, K) at ``batch``. With ``p.from_answers`` and a Triton GEMV ``answer`` (``gemv_splitn`` /
    ``gemv_splitk``) at batch 1, its BLOCK_N (÷ SPLIT_K: the fused kernel does not split K),
    BLOCK_K, warps and stages; otherwise BLOCK_N is the largest power of two in 4–32 (16–64 with
    ``tl.dot``, B > 1) giving at least ``p.ctas`` programs and BLOCK_K = ``p.tile`` / BLOCK_N
    clamped to 128–512 and halved until it divides K.

    Raises:
        ValueError: K is not a multiple of 16, or batch > 16.
    """
    if k % 16:
        raise ValueError(f"fused GEMV needs K % 16 == 0 (K = {k})")
    if not 1 <= batch <= 16:
        raise ValueError(f"fused GEMV serves 1 ≤ B ≤ 16 (B = {batch})")
    dot = batch > 1
    c = (answer or {}).get("config") or {}
    if p.from_answers and not dot and (answer or {}).get("family") in ("gemv_splitn", "gemv_splitk"):
        bn = max(4, c["BLOCK_N"] // c.get("SPLIT_K", 1))
        bk, warps, stages = c["BLOCK_K"], c["num_warps"], c["num_stages"]
    else:
        lo, hi = (16, 64) if dot else (4, 32)
        bn = hi
        while bn > lo and cdiv(n, bn) < p.ctas:
            bn //= 2
        bk = min(512, max(128, p.tile // bn))
        warps, stages = p.warps, p.stages
    while k % bk:
        bk //= 2
    return {"BLOCK_M": 16 if dot else 1, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps, "num_stages": stages,
            "USE_DOT": int(dot)}
