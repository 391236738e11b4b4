"""Summary of a GPU verification run (``verify.jsonl``): pure Python.

    python -m bench.kernel_tuning.verify_report traces/kernel-tuning [--file verify.jsonl] [--json OUT]
        [--repeat verify_rep.jsonl]

Reports:

* counts: workloads verified per protocol, by op group; lines with status error;
* parity: share of workloads where the specialist's choice passed numerics and ran within
  ``(1 + eps)`` of min(specialist, reference, vendor) re-measured in the same run, per protocol, under
  the deciding protocol (the one the choice was tuned under: P2 for decode GEMMs, else P1), and
  per op group; the reference agent's choice beside it;
* ratios: geo-mean of specialist/vendor and reference/vendor per op group and protocol;
* per-token decode sums: per model, the GEMV time per decoded token at M = 1 (P2, and P1) —
  qkv, o_proj, gate_up, down × layers + lm_head once, as in README's 1.147 ms — for the
  specialist, the reference and the vendor, against the HBM floor = those weights' bytes / copy
  bandwidth (``env.json``'s measured copy bandwidth, read+write counted, as in ``report``); the
  plain Σ over the 5 sites is kept as ``*_sites_ms``;
* lm_head (M = 1) bytes / time as % of that copy bandwidth;
* drift: each candidate's median in this run / its recorded pass1 median, per protocol and
  launches per call (1, or 2 for split-K / split softmax), vendor apart;
* with ``--repeat``: a second run's parity and its agreement with the first;
* failures: candidates that failed numerics, compile, capture or timing.

Op groups: ``gemm-decode`` (M ≤ 8), ``gemm-prefill``, ``rmsnorm``, ``swiglu``, ``softmax``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any

from . import advisor as A
from .workloads import LAYERS, MODELS, SITES, Workload, workload_key

GROUPS = ("gemm-decode", "gemm-prefill", "rmsnorm", "swiglu", "softmax")


def load(path: str) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    with open(path, encoding="utf-8") as f:
        for x in f:
            if x.strip():
                d = json.loads(x)
                out[d["key"]] = d  # a resumed run may repeat a key: the later line wins
    return list(out.values())


def copy_gbs(d: str) -> float | None:
    p = os.path.join(d, "env.json")
    if not os.path.exists(p):
        return None
    return (json.load(open(p)).get("copy_bandwidth") or {}).get("gbs")


def group_of(line: dict[str, Any]) -> str:
    if line["op"] == "gemm":
        return "gemm-decode" if line["m"] <= 8 else "gemm-prefill"
    return line["op"]


def geo(xs: list[float | None]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return round(statistics.geometric_mean(xs), 4) if xs else None


def min_bytes(line: dict[str, Any]) -> int:
    return int(A.region(Workload.from_json(line["workload"]))["min_bytes"])


def _rate(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def _parity_counts(lines: list[dict[str, Any]], proto_of) -> dict[str, Any]:
    n = sp = rp = 0
    for ln in lines:
        p = proto_of(ln)
        if p is None or p not in ln["parity"]:
            continue
        n += 1
        sp += bool(ln["parity"][p]["specialist_at_parity"])
        rp += bool(ln["parity"][p]["reference_at_parity"])
    return {"n": n, "specialist_at_parity": sp, "specialist_rate": _rate(sp, n),
            "reference_at_parity": rp, "reference_rate": _rate(rp, n)}


def _deciding(ln: dict[str, Any]) -> str:
    p = ln.get("deciding_protocol") or ("P2" if "P2" in ln["protocols"] else "P1")
    return p if p in ln["parity"] else "P1"


def per_token(by_key: dict[str, dict[str, Any]], bw_gbs: float | None, protocol: str) -> dict[str, Any]:
    """GEMV time per decoded token at M = 1 (ms) of the specialist / reference / vendor choices:
    Σ over the 4 per-layer sites × the model's layers + lm_head once (``*_ms``), against the floor
    = those weights' bytes / copy bandwidth (3.44 / 8.05 / 2.47 GB of bf16 weights for Qwen3-1.7B /
    Qwen3-4B / Llama-3.2-1B: 0.81 / 1.90 / 0.58 ms at 4.24 TB/s). ``*_sites_ms`` is the plain Σ over
    the 5 sites (each once)."""
    out: dict[str, Any] = {}
    for name, model in MODELS.items():
        row: dict[str, Any] = {"sites": 0, "missing": [], "layers": LAYERS[name]}
        sums = {"specialist": 0.0, "reference": 0.0, "vendor": 0.0}
        once = {"specialist": 0.0, "reference": 0.0, "vendor": 0.0}
        nbytes = 0
        for site in SITES:
            n, k = model.gemm_sites()[site]
            key = workload_key("gemm", 1, n, k, "bf16")
            ln = by_key.get(key)
            pb = ln["parity"].get(protocol) if ln else None
            vals = {r: (pb or {}).get(f"{r}_us") for r in sums}
            if ln is None or any(v is None for v in vals.values()):
                row["missing"].append(site)
                continue
            row["sites"] += 1
            reps = 1 if site == "lm_head" else LAYERS[name]
            nbytes += reps * min_bytes(ln)
            for r in sums:
                sums[r] += reps * vals[r]
                once[r] += vals[r]
        row["complete"] = done = row["sites"] == len(SITES)  # partial sums would mislead: None
        for r in sums:
            row[f"{r}_ms"] = round(sums[r] / 1e3, 4) if done else None
            row[f"{r}_sites_ms"] = round(once[r] / 1e3, 4) if done else None
        row["bytes"] = nbytes if done else None
        row["floor_ms"] = round(nbytes / (bw_gbs * 1e9) * 1e3, 4) if bw_gbs and done else None
        if done:
            v = sums["vendor"]
            row["specialist_vs_vendor"] = round(sums["specialist"] / v, 4) if v else None
            row["reference_vs_vendor"] = round(sums["reference"] / v, 4) if v else None
            f = row["floor_ms"]
            row["specialist_vs_floor"] = round(sums["specialist"] / 1e3 / f, 4) if f else None
            row["vendor_vs_floor"] = round(v / 1e3 / f, 4) if f else None
        out[name] = row
    return out


def lm_head(by_key: dict[str, dict[str, Any]], bw_gbs: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, model in MODELS.items():
        n, k = model.gemm_sites()["lm_head"]
        ln = by_key.get(workload_key("gemm", 1, n, k, "bf16"))
        if ln is None:
            continue
        b = min_bytes(ln)
        row: dict[str, Any] = {"key": ln["key"], "bytes": b}
        for p, pb in ln["parity"].items():
            for r in ("specialist", "reference", "vendor"):
                t = pb.get(f"{r}_us")
                row[f"{p}_{r}_us"] = t
                row[f"{p}_{r}_pct_copy_bw"] = (round(100.0 * b / (t * 1e-6) / (bw_gbs * 1e9), 1)
                                               if t and bw_gbs else None)
        out[name] = row
    return out


def launches(c: dict[str, Any]) -> int:
    """Kernel launches per call of a candidate (split-K and split softmax add a second kernel)."""
    cfg = c.get("config") or {}
    return 2 if (cfg.get("SPLIT_K", 1) > 1 or c.get("family") == "softmax_split") else 1


def drift(lines: list[dict[str, Any]], ref_pass: str = "pass1") -> dict[str, Any]:
    """This run's median / the recorded ``ref_pass`` median of the same candidate on the same
    workload, per protocol and launches per call: n, geo-mean, min, max, share within ±5%."""
    acc: dict[str, list[float]] = {}
    for ln in lines:
        rec = (ln.get("recorded") or {}).get(ref_pass) or {}
        for c in ln["candidates"]:
            r = rec.get(c["id"])
            if not c.get("ok") or not r:
                continue
            for p in ln["protocols"]:
                now, then = c[p]["median_us"], r.get(p)
                if now and then:
                    kind = "vendor" if c["id"] == "vendor" else f"triton-{launches(c)}launch"
                    acc.setdefault(f"{p}/{kind}", []).append(now / then)
    out = {}
    for k in sorted(acc):
        xs = acc[k]
        out[k] = {"n": len(xs), "geo": geo(xs), "min": round(min(xs), 4), "max": round(max(xs), 4),
                  "within_5pct": _rate(sum(1 for x in xs if abs(x - 1.0) <= 0.05), len(xs))}
    return out


def agreement(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Two verification runs of the same plan: per protocol, how often the specialist's parity flag
    agrees, and the geo-mean / max of run-B / run-A specialist medians."""
    bb = {ln["key"]: ln for ln in b}
    out: dict[str, Any] = {}
    for p in ("P1", "P2"):
        n = same = both = 0
        ratios = []
        for ln in a:
            o = bb.get(ln["key"])
            if not o or p not in ln["parity"] or p not in o["parity"]:
                continue
            x, y = ln["parity"][p], o["parity"][p]
            n += 1
            same += x["specialist_at_parity"] == y["specialist_at_parity"]
            both += x["specialist_at_parity"] and y["specialist_at_parity"]
            if x["specialist_us"] and y["specialist_us"]:
                ratios.append(y["specialist_us"] / x["specialist_us"])
        if n:
            out[p] = {"n": n, "same_flag": same, "at_parity_in_both": both, "geo_b_over_a": geo(ratios),
                      "max_b_over_a": round(max(ratios), 4) if ratios else None,
                      "min_b_over_a": round(min(ratios), 4) if ratios else None}
    return out


def summarize(lines: list[dict[str, Any]], bw_gbs: float | None = None) -> dict[str, Any]:
    by_key = {ln["key"]: ln for ln in lines}
    s: dict[str, Any] = {"n": len(lines), "copy_gbs": bw_gbs,
                         "status": {}, "per_protocol": {}, "groups": {}}
    for ln in lines:
        s["status"][ln["status"]] = s["status"].get(ln["status"], 0) + 1
    for p in ("P1", "P2"):
        lp = [ln for ln in lines if p in ln["parity"]]
        s["per_protocol"][p] = dict(_parity_counts(lp, lambda ln, p=p: p),
                                    verified=sum(1 for ln in lp if ln["parity"][p]["specialist_us"] is not None))
    s["deciding"] = _parity_counts(lines, _deciding)
    # a workload whose specialist, reference, vendor (and torch.compile) answers are one candidate
    # is at parity by construction; "with choice" keeps those with >= 2 distinct candidates
    s["with_choice"] = _parity_counts([ln for ln in lines if len(ln["candidates"]) >= 2], _deciding)
    s["same_choice"] = sum(1 for ln in lines if ln["same_choice"])
    for g in GROUPS:
        lg = [ln for ln in lines if group_of(ln) == g]
        if not lg:
            continue
        gd: dict[str, Any] = {"n": len(lg), "same_choice": sum(1 for ln in lg if ln["same_choice"]),
                              "deciding": _parity_counts(lg, _deciding)}
        for p in ("P1", "P2"):
            lp = [ln for ln in lg if p in ln["parity"]]
            if not lp:
                continue
            gd[p] = dict(_parity_counts(lp, lambda ln, p=p: p),
                         geo_specialist_vs_vendor=geo([ln["parity"][p]["ratio_specialist_vendor"] for ln in lp]),
                         geo_reference_vs_vendor=geo([ln["parity"][p]["ratio_reference_vendor"] for ln in lp]),
                         geo_specialist_vs_torch_compile=geo([ln["parity"][p].get("ratio_specialist_inductor")
                                                              for ln in lp]),
                         specialist_beats_vendor=sum(1 for ln in lp if (ln["parity"][p]["ratio_specialist_vendor"]
                                                                          or 9) < 1.0))
        s["groups"][g] = gd
    s["per_token"] = {p: per_token(by_key, bw_gbs, p) for p in ("P2", "P1")}
    s["lm_head"] = lm_head(by_key, bw_gbs)
    fails = []
    for ln in lines:
        for c in ln["candidates"]:
            if c.get("error") or not c.get("ok"):
                fails.append({"key": ln["key"], "id": c["id"], "roles": c["roles"], "rel_err": c.get("rel_err"),
                              "error": c.get("error")})
        if ln.get("error"):
            fails.append({"key": ln["key"], "id": None, "roles": [], "error": ln["error"]})
    s["failures"] = fails
    s["not_at_parity"] = [
        {"key": ln["key"], "protocol": _deciding(ln), "specialist": ln["specialist"]["id"],
         "best": ln["parity"][_deciding(ln)]["best_id"],
         "specialist_over_min": (round(ln["parity"][_deciding(ln)]["specialist_us"] / ln["parity"][_deciding(ln)]["min_us"], 4)
                                 if ln["parity"][_deciding(ln)]["specialist_us"] and ln["parity"][_deciding(ln)]["min_us"]
                                 else None)}
        for ln in lines if not ln["parity"][_deciding(ln)]["specialist_at_parity"]]
    s["drift_vs_pass1"] = drift(lines)
    walls = [ln.get("wall_s") or 0.0 for ln in lines]
    s["wall_s_sum"] = round(sum(walls), 2)
    envs = {json.dumps(ln.get("env"), sort_keys=True) for ln in lines}
    s["env"] = [json.loads(e) for e in sorted(envs)]
    return s


def _pct(x: float | None) -> str:
    return f"{100 * x:.1f}%" if x is not None else "—"


def render(s: dict[str, Any]) -> str:
    out = [f"verify: {s['n']} workloads, status {s['status']}, same specialist/reference choice on "
           f"{s['same_choice']}; copy BW {s['copy_gbs']} GB/s"]
    d = s["deciding"]
    out.append(f"parity (eps 5%, deciding protocol): specialist {d['specialist_at_parity']}/{d['n']} = "
               f"{_pct(d['specialist_rate'])}; reference {d['reference_at_parity']}/{d['n']} = {_pct(d['reference_rate'])}")
    for p, pp in s["per_protocol"].items():
        out.append(f"  {p}: verified {pp['verified']}/{pp['n']}, specialist at parity {pp['specialist_at_parity']} "
                   f"({_pct(pp['specialist_rate'])}), reference {pp['reference_at_parity']} ({_pct(pp['reference_rate'])})")
    out.append("group         proto   n  spec-par  ref-par  geo spec/vendor  geo ref/vendor  spec<vendor")
    for g, gd in s["groups"].items():
        for p in ("P1", "P2"):
            if p in gd:
                x = gd[p]
                out.append(f"{g:13s} {p:5s} {x['n']:3d}  {_pct(x['specialist_rate']):>8s} {_pct(x['reference_rate']):>8s}  "
                           f"{x['geo_specialist_vs_vendor']!s:>15s} {x['geo_reference_vs_vendor']!s:>15s}  "
                           f"{x['specialist_beats_vendor']:3d}")
    for p, pt in s["per_token"].items():
        out.append(f"GEMV time per token at M=1 ({p}; 4 sites × layers + lm_head), ms:")
        for name, r in pt.items():
            out.append(f"  {name:13s} specialist {r['specialist_ms']}  reference {r['reference_ms']}  vendor {r['vendor_ms']}"
                       f"  floor {r['floor_ms']}  spec/vendor {r.get('specialist_vs_vendor')}  "
                       f"spec/floor {r.get('specialist_vs_floor')}" + ("" if r["complete"] else f"  missing {r['missing']}"))
    out.append("lm_head M=1, % of copy bandwidth (bytes/t):")
    for name, r in s["lm_head"].items():
        out.append(f"  {name:13s} " + "  ".join(
            f"{p} {role} {r.get(f'{p}_{role}_us')} us = {r.get(f'{p}_{role}_pct_copy_bw')}%"
            for p in ("P2", "P1") for role in ("specialist", "vendor") if f"{p}_{role}_us" in r))
    out.append("drift: this run's median / pass1's recorded median of the same candidate:")
    for k, d in s["drift_vs_pass1"].items():
        out.append(f"  {k:22s} n={d['n']:3d} geo={d['geo']} min={d['min']} max={d['max']} within±5%={_pct(d['within_5pct'])}")
    if s.get("repeat"):
        out.append(f"repeat run ({s['repeat']['file']}, {s['repeat']['n']} workloads): parity "
                   f"{s['repeat']['deciding']['specialist_at_parity']}/{s['repeat']['deciding']['n']} (deciding protocol)")
        for p, g in s["repeat"]["agreement"].items():
            out.append(f"  {p}: parity flag same on {g['same_flag']}/{g['n']}, at parity in both {g['at_parity_in_both']}, "
                       f"specialist median B/A geo {g['geo_b_over_a']} (min {g['min_b_over_a']}, max {g['max_b_over_a']})")
    out.append(f"failures: {len(s['failures'])}")
    for f in s["failures"][:20]:
        out.append(f"  {f['key']} {f['id']} {f['roles']} {f['error']}")
    out.append(f"not at parity (deciding protocol): {len(s['not_at_parity'])}")
    for r in s["not_at_parity"][:40]:
        out.append(f"  {r['key']:30s} {r['protocol']} x{r['specialist_over_min']} spec={r['specialist'][:60]} best={(r['best'] or '')[:60]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.kernel_tuning.verify_report")
    ap.add_argument("dir")
    ap.add_argument("--file", default="verify.jsonl")
    ap.add_argument("--json", default=None)
    ap.add_argument("--repeat", default=None, help="a second run's file in DIR (e.g. verify_rep.jsonl)")
    args = ap.parse_args(argv)
    lines = load(os.path.join(args.dir, args.file))
    s = summarize(lines, copy_gbs(args.dir))
    if args.repeat:
        rep = load(os.path.join(args.dir, args.repeat))
        s["repeat"] = {"file": args.repeat, "n": len(rep), "deciding": _parity_counts(rep, _deciding),
                       "agreement": agreement(lines, rep)}
    print(render(s))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(s, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
