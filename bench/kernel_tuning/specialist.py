"""The kernel-tuning specialist's inputs, answers and parity, from recorded decisions (CPU only).

The specialist answers "which candidate for this workload on this machine?" from a compiled
exact-match table (an Auto artifact) keyed on the fields that decide a tuning result: op, dtype,
layout, N, K, M, alignment flags (N % 16, K % 16) and the environment hash (GPU, SMs, driver,
CUDA, Triton, torch). A miss on any field deopts to the full agent. M is exact, not a
``2^ceil(log2 M)`` bucket above M = 8: on the recorded
corpus the bucket merged 4 pairs of distinct seen workloads (QK-norm row counts such as 40 and
48) whose recorded winners differ, so a bucketed key would answer one of them with a choice that
was never measured for it.

Where two recorded passes chose differently, the table keeps the choice with the smaller worst
regret over the passes (regret = its median / the best median in that pass, each pass under its
own protocol) — the choice that needs no re-measurement to be defensible.

Parity: a choice is *at parity* in a pass when it passed numerics there and its median is within
``(1 + eps)`` of that pass's best candidate; ``eps`` = 5% covers the regret of reusing a first
sweep's winner measured on one H200 (four repeated 48-config GEMV sweeps on three shapes: the
argmin changed in all three, reusing the first sweep's winner cost at most 4.1%).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

EPS = 0.05


def specialist_input(rec: dict[str, Any]) -> dict[str, Any]:
    """The specialist's task input (a flat JSON object) for one recorded decision."""
    w = rec["input"]["workload"]
    a = rec["attributes"]
    return {
        "op": w["op"],
        "dtype": w["dtype"],
        "layout": w.get("layout", ""),
        "n": int(w["n"]),
        "k": int(w.get("k") or 0),
        "m": int(w["m"]),
        "n_mod16": int(w["n"]) % 16 == 0,
        "k_mod16": int(w.get("k") or 0) % 16 == 0,
        "env": a["kt.env_hash"],
    }


def input_for(op: str, dtype: str, layout: str, m: int, n: int, k: int, env_hash: str) -> dict[str, Any]:
    """The specialist's task input for a workload asked at run time (same fields as
    :func:`specialist_input` builds from a record)."""
    return {"op": op, "dtype": dtype, "layout": layout, "n": int(n), "k": int(k), "m": int(m),
            "n_mod16": int(n) % 16 == 0, "k_mod16": int(k) % 16 == 0, "env": env_hash}


def answer(rec: dict[str, Any]) -> dict[str, Any]:
    """The decision as the specialist returns it: candidate id, family, config, protocol."""
    o = rec["output"]
    return {"id": o["chosen_id"], "family": o["family"], "config": o.get("config") or {}, "protocol": o.get("protocol")}


def medians(rec: dict[str, Any]) -> dict[str, float]:
    """``{candidate id: median µs}`` of the candidates that passed numerics and were timed."""
    return {c["id"]: float(c["median_us"]) for c in rec["attributes"]["kt.candidates"]
            if c.get("median_us") is not None and not c.get("error")}


def regret(rec: dict[str, Any], cand_id: str) -> float | None:
    """``t(cand) / min_c t(c)`` in this recorded pass; None when ``cand_id`` was not timed there."""
    meds = medians(rec)
    if cand_id not in meds or not meds:
        return None
    return meds[cand_id] / min(meds.values())


def at_parity(rec: dict[str, Any], cand_id: str, eps: float = EPS) -> bool:
    """True when ``cand_id`` passed numerics in ``rec`` and ran within ``1 + eps`` of its best."""
    r = regret(rec, cand_id)
    return r is not None and r <= 1.0 + eps


def by_key(recs: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Records indexed by workload key (later records win)."""
    return {r["attributes"]["kt.workload_key"]: r for r in recs if r.get("status") == "ok"}


def resolve(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The table's answer for one workload from its recorded decisions (one per pass).

    Returns the common choice when all passes agree, else the choice with the smallest worst
    regret across the passes (ties: the earliest pass's choice).
    """
    choices = [answer(r) for r in records]
    if len({c["id"] for c in choices}) == 1:
        return choices[0]

    def worst(c: dict[str, Any]) -> float:
        rs = [regret(r, c["id"]) for r in records]
        return max((x if x is not None else math.inf) for x in rs)

    return min(choices, key=worst)


RERECORDS = ("rerecord1", "rerecord2")


def generation_passes(traces: str, generation: int = 2) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The two passes a specialist generation is compiled from, loaded from ``traces``.

    Generation 1: ``pass1.jsonl`` and ``pass2.jsonl`` (the seen corpus). Generation 2: the same,
    each record of a workload that ``rerecord1.jsonl`` / ``rerecord2.jsonl`` re-recorded (RMSNorm,
    SwiGLU, softmax with torch.compile's kernel among the candidates) replaced by the re-recorded
    one; without both re-record files generation 2 equals generation 1. Returns (pass A, pass B,
    info: which files and how many records each contributed).

    Raises:
        FileNotFoundError: ``pass1.jsonl`` or ``pass2.jsonl`` is missing.
    """
    import os

    from . import record as R

    a = R.load_jsonl(os.path.join(traces, "pass1.jsonl"))
    b = R.load_jsonl(os.path.join(traces, "pass2.jsonl"))
    info: dict[str, Any] = {"generation": 1, "files": ["pass1.jsonl", "pass2.jsonl"], "replaced": 0}
    paths = [os.path.join(traces, f"{n}.jsonl") for n in RERECORDS]
    if generation >= 2 and all(os.path.exists(p) for p in paths):
        ra, rb = (by_key(R.load_jsonl(p)) for p in paths)

        def sub(recs: list[dict[str, Any]], new: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
            return [new.get(r["attributes"]["kt.workload_key"], r) for r in recs]

        a, b = sub(a, ra), sub(b, rb)
        info = {"generation": 2, "files": ["pass1.jsonl", "pass2.jsonl"] + [f"{n}.jsonl" for n in RERECORDS],
                "replaced": len(set(ra) & set(rb)), "rerecord1": len(ra), "rerecord2": len(rb)}
    return a, b, info


def table_entries(passes: list[list[dict[str, Any]]]) -> list[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]]:
    """``(specialist input, answer, records)`` per seen workload key, keys in sorted order."""
    idx = [by_key(p) for p in passes]
    keys = sorted(set().union(*[set(i) for i in idx]))
    out = []
    for k in keys:
        recs = [i[k] for i in idx if k in i]
        out.append((specialist_input(recs[0]), resolve(recs), recs))
    return out
