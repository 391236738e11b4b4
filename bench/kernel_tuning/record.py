"""Decision records (one JSON line per workload), environment hash, schema check, and the
replay census. Pure Python.

A record is span-shaped (docs/architecture.md, table ``spans``)::

    {"trace_id": 32 hex, "span_id": 16 hex, "parent_span_id": null,
     "name": "kernel_tuning.decide", "kind": "task", "task": "kernel-tuning",
     "site": "bench.kernel_tuning.agent.decide", "started_ns", "ended_ns",
     "status": "ok" | "error",
     "input":  the advisor input JSON (workload + hardware summary + region + space + budget),
     "output": {"chosen_id", "family", "config", "fallback": bool, "reason"},
     "error":  null | {"type", "message"},
     "attributes": {"kt.pass", "kt.workload_key", "kt.advisor", "kt.advisor_output",
                    "kt.schema_validator", "kt.llm", "kt.pruned", "kt.candidates",
                    "kt.vendor_us", "kt.chosen_id", "kt.protocol", "kt.env_hash", "kt.env",
                    "kt.wall_s", "kt.fallback_reason", ...},
     "digest": "sha256:<hex of canonical JSON of the record without 'digest'>"}

Each candidate: ``{"id", "family", "config", "compiled", "error", "rel_err", "times_us" (3, the
deciding protocol), "median_us", "times_us_p1", "median_us_p1", "times_us_p2", "median_us_p2",
"compile_s", "predicted_us"}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from typing import Any, Iterable

NAME = "kernel_tuning.decide"
TASK = "kernel-tuning"
ENV_HASH_FIELDS = ("gpu", "sms", "driver", "cuda", "triton", "torch")


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_digest(obj: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def env_hash(env: dict[str, Any]) -> str:
    """sha256 of canonical JSON of (GPU name, SMs, driver, CUDA, Triton, torch)."""
    return sha256_digest({k: env.get(k) for k in ENV_HASH_FIELDS})


def new_ids() -> tuple[str, str]:
    return os.urandom(16).hex(), os.urandom(8).hex()


def finite_or_none(x: Any) -> Any:
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return None
    return x


def median(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def seal(rec: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in rec.items() if k != "digest"}
    rec["digest"] = sha256_digest(body)
    return rec


def make_record(*, inp: dict[str, Any], output: dict[str, Any], attributes: dict[str, Any], status: str,
                error: dict[str, Any] | None, started_ns: int, ended_ns: int,
                site: str = "bench.kernel_tuning.agent.decide") -> dict[str, Any]:
    """The span-shaped decision record, sealed with its digest."""
    trace_id, span_id = new_ids()
    rec = {
        "trace_id": trace_id, "span_id": span_id, "parent_span_id": None,
        "name": NAME, "kind": "task", "task": TASK, "site": site,
        "started_ns": started_ns, "ended_ns": ended_ns, "status": status,
        "input": inp, "output": output, "error": error, "attributes": attributes,
    }
    return seal(rec)


def dumps_line(rec: dict[str, Any]) -> str:
    return canonical_json(rec) + "\n"


def load_jsonl(path: str) -> list[dict[str, Any]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


# --------------------------------------------------------------------------- schema check

_TOP = {"trace_id": str, "span_id": str, "name": str, "kind": str, "task": str, "site": str,
        "started_ns": int, "ended_ns": int, "status": str, "input": dict, "output": dict,
        "attributes": dict, "digest": str}
_CAND = {"id": str, "family": str, "config": dict, "compiled": bool}
_ATTR = ("kt.pass", "kt.workload_key", "kt.advisor", "kt.advisor_output", "kt.candidates", "kt.vendor_us",
         "kt.chosen_id", "kt.protocol", "kt.env_hash", "kt.wall_s", "kt.pruned")


def validate_record(rec: dict[str, Any]) -> list[str]:
    """Problems with one record (empty list = valid)."""
    p: list[str] = []
    for k, t in _TOP.items():
        if k not in rec:
            p.append(f"missing {k}")
        elif not isinstance(rec[k], t) or (t is int and isinstance(rec[k], bool)):
            p.append(f"{k} is not {t.__name__}")
    if p:
        return p
    if "parent_span_id" not in rec or "error" not in rec:
        p.append("missing parent_span_id/error")
    if rec["name"] != NAME or rec["task"] != TASK:
        p.append("bad name/task")
    if len(rec["trace_id"]) != 32 or len(rec["span_id"]) != 16:
        p.append("bad id length")
    if rec["status"] not in ("ok", "error"):
        p.append("bad status")
    if rec["digest"] != sha256_digest({k: v for k, v in rec.items() if k != "digest"}):
        p.append("digest mismatch")
    inp = rec["input"]
    if inp.get("schema") != "auto.kt.advise.v1" or "workload" not in inp or "hardware" not in inp:
        p.append("input is not an advisor input")
    out = rec["output"]
    for k in ("chosen_id", "family", "config", "fallback", "reason"):
        if k not in out:
            p.append(f"output missing {k}")
    a = rec["attributes"]
    for k in _ATTR:
        if k not in a:
            p.append(f"attributes missing {k}")
    if p:
        return p
    if a["kt.protocol"] not in ("P1", "P2"):
        p.append("bad protocol")
    if not str(a["kt.env_hash"]).startswith("sha256:"):
        p.append("bad env hash")
    ids = set()
    for c in a["kt.candidates"]:
        for k, t in _CAND.items():
            if not isinstance(c.get(k), t):
                p.append(f"candidate {c.get('id')} {k} not {t.__name__}")
        for k in ("error", "rel_err", "times_us", "median_us"):
            if k not in c:
                p.append(f"candidate {c.get('id')} missing {k}")
        ts = c.get("times_us")
        if c.get("median_us") is not None and (not isinstance(ts, list) or len(ts) != 3):
            p.append(f"candidate {c.get('id')} timed without 3 medians")
        ids.add(c.get("id"))
    if a["kt.candidates"] and a["kt.candidates"][0].get("id") != "vendor":
        p.append("candidate 0 is not vendor")
    if rec["status"] == "ok" and out["chosen_id"] not in ids:
        p.append("chosen id not among candidates")
    if a["kt.chosen_id"] != out["chosen_id"]:
        p.append("kt.chosen_id != output.chosen_id")
    return p


# --------------------------------------------------------------------------- census


def _by_key(recs: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in recs:
        out[r["attributes"]["kt.workload_key"]] = r
    return out


def _medians(rec: dict[str, Any]) -> dict[str, float]:
    return {c["id"]: c["median_us"] for c in rec["attributes"]["kt.candidates"]
            if c.get("median_us") is not None}


def classify(rec_a: dict[str, Any], rec_b: dict[str, Any], eps: float = 0.05) -> dict[str, Any]:
    """Classify one workload's pair of decisions.

    * ``exact``: same chosen id.
    * ``tolerant``: not exact, and A's choice is at parity in pass B: measured in B (B's recorded
      medians for both candidates), t_B(choice_A) ≤ (1+eps)·t_B(choice_B), where choice_B is
      the best of B (its pick).
    * ``divergent``: otherwise (incl. A's choice missing/failed in B, or an errored record).

    Also reports the symmetric check (B's choice within eps in A) as ``tolerant_sym``.
    """
    ca = rec_a["output"]["chosen_id"]
    cb = rec_b["output"]["chosen_id"]
    ma, mb = _medians(rec_a), _medians(rec_b)
    res: dict[str, Any] = {"key": rec_a["attributes"]["kt.workload_key"], "chosen_a": ca, "chosen_b": cb}
    ok = rec_a["status"] == "ok" and rec_b["status"] == "ok"
    ratio_b = ma_ratio = None
    if ca in mb and cb in mb and mb[cb] > 0:
        ratio_b = mb[ca] / mb[cb]
    if cb in ma and ca in ma and ma[ca] > 0:
        ma_ratio = ma[cb] / ma[ca]
    res["ratio_in_b"] = ratio_b  # t_B(choice_A)/t_B(choice_B)
    res["ratio_in_a"] = ma_ratio  # t_A(choice_B)/t_A(choice_A)
    if not ok:
        res["class"] = "divergent"
    elif ca == cb:
        res["class"] = "exact"
    elif ratio_b is not None and ratio_b <= 1.0 + eps:
        res["class"] = "tolerant"
    else:
        res["class"] = "divergent"
    res["tolerant_sym"] = bool(
        ok and ca != cb and ratio_b is not None and ma_ratio is not None
        and ratio_b <= 1.0 + eps and ma_ratio <= 1.0 + eps)
    return res


def census_from_records(pass_a: list[dict[str, Any]], pass_b: list[dict[str, Any]], eps: float = 0.05) -> dict[str, Any]:
    """Per-workload exact / tolerant / divergent classes over the keys both passes decided, and
    the reference agent's self-parity = (exact + tolerant) / n."""
    a, b = _by_key(pass_a), _by_key(pass_b)
    keys = sorted(set(a) & set(b))
    rows = [classify(a[k], b[k], eps) for k in keys]
    counts = {"exact": 0, "tolerant": 0, "divergent": 0}
    for r in rows:
        counts[r["class"]] += 1
    n = len(rows)
    by_op: dict[str, dict[str, int]] = {}
    for r in rows:
        op = r["key"].split(":", 1)[0]
        d = by_op.setdefault(op, {"exact": 0, "tolerant": 0, "divergent": 0})
        d[r["class"]] += 1
    return {
        "eps": eps,
        "n": n,
        "only_a": sorted(set(a) - set(b)),
        "only_b": sorted(set(b) - set(a)),
        "counts": counts,
        "tolerant_sym": sum(1 for r in rows if r["tolerant_sym"]),
        "self_parity": (counts["exact"] + counts["tolerant"]) / n if n else None,
        "exact_rate": counts["exact"] / n if n else None,
        "by_op": by_op,
        "rows": rows,
    }


def summarize(recs: list[dict[str, Any]], copy_gbs: float | None = None) -> dict[str, Any]:
    """Headline numbers of one pass: wins vs vendor, fallbacks, failures, % of copy BW."""
    out: dict[str, Any] = {"n": len(recs), "status": {}, "chosen_family": {}, "fallback_reasons": {},
                           "cand_errors": {}, "rows": []}
    for r in recs:
        a = r["attributes"]
        out["status"][r["status"]] = out["status"].get(r["status"], 0) + 1
        fam = r["output"]["family"]
        out["chosen_family"][fam] = out["chosen_family"].get(fam, 0) + 1
        fr = a.get("kt.fallback_reason")
        if fr:
            out["fallback_reasons"][fr.split(":")[0]] = out["fallback_reasons"].get(fr.split(":")[0], 0) + 1
        meds = {c["id"]: c for c in a["kt.candidates"]}
        for c in a["kt.candidates"]:
            if c.get("error"):
                kind = str(c["error"]).split(":")[0]
                out["cand_errors"][kind] = out["cand_errors"].get(kind, 0) + 1
        v = a.get("kt.vendor_us")
        tri = [c for c in a["kt.candidates"] if c["id"] != "vendor" and c.get("median_us") is not None]
        best = min(tri, key=lambda c: c["median_us"]) if tri else None
        w = r["input"]["workload"]
        row = {"key": a["kt.workload_key"], "model": w["model"], "site": w["site"], "protocol": a["kt.protocol"],
               "vendor_us": v, "best_triton_us": best["median_us"] if best else None,
               "best_triton_id": best["id"] if best else None, "chosen": r["output"]["chosen_id"],
               "ratio_best_triton_vs_vendor": (best["median_us"] / v) if (best and v) else None,
               "wall_s": a.get("kt.wall_s")}
        chosen = meds.get(r["output"]["chosen_id"])
        if copy_gbs and chosen and chosen.get("median_us"):
            row["pct_copy_bw"] = 100.0 * r["input"]["region"]["min_bytes"] / (chosen["median_us"] * 1e-6) / (copy_gbs * 1e9)
        out["rows"].append(row)
    return out
