"""Summaries of recorded passes: ``python -m bench.kernel_tuning.report DIR [--json OUT]``.

Prints per pass: record count, status, chosen families, fallback reasons, candidate error kinds;
decode-GEMM table (vendor µs, best Triton µs and ratio, chosen); lm_head % of copy bandwidth;
and the pass1↔pass2 census (exact / tolerant / divergent, self-parity). Pure Python.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from typing import Any

from . import record as R

PASSES = ("pass1", "pass2", "pass3", "rerecord1", "rerecord2", "holdout", "faults", "e2e_deopt")


def load_dir(d: str) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for p in PASSES:
        f = os.path.join(d, f"{p}.jsonl")
        if os.path.exists(f):
            out[p] = R.load_jsonl(f)
    return out


def copy_gbs(d: str) -> float | None:
    f = os.path.join(d, "env.json")
    if not os.path.exists(f):
        return None
    env = json.load(open(f))
    cb = env.get("copy_bandwidth") or {}
    return cb.get("gbs")


def _geo(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return statistics.geometric_mean(xs) if xs else None


def build(d: str) -> dict[str, Any]:
    passes = load_dir(d)
    bw = copy_gbs(d)
    rep: dict[str, Any] = {"dir": d, "copy_gbs": bw, "passes": {}}
    for p, recs in passes.items():
        s = R.summarize(recs, bw)
        bad = {r["attributes"]["kt.workload_key"]: R.validate_record(r) for r in recs}
        s["invalid_records"] = {k: v for k, v in bad.items() if v}
        rows = s["rows"]
        dec = [r for r in rows if r["key"].startswith("gemm") and r["protocol"] == "P2"]
        s["decode_gemm_ratio_geo"] = _geo([r["ratio_best_triton_vs_vendor"] for r in dec])
        s["decode_gemm_triton_wins"] = sum(1 for r in dec if r["chosen"] != "vendor")
        s["decode_gemm_n"] = len(dec)
        pre = [r for r in rows if r["key"].startswith("gemm") and r["protocol"] == "P1"]
        s["prefill_gemm_ratio_geo"] = _geo([r["ratio_best_triton_vs_vendor"] for r in pre])
        s["prefill_gemm_triton_wins"] = sum(1 for r in pre if r["chosen"] != "vendor")
        s["prefill_gemm_n"] = len(pre)
        oth = [r for r in rows if not r["key"].startswith("gemm")]
        s["other_triton_wins"] = sum(1 for r in oth if r["chosen"] != "vendor")
        s["other_n"] = len(oth)
        s["wall_s_total"] = round(sum(r["wall_s"] or 0 for r in rows), 2)
        rep["passes"][p] = s
    if "pass1" in passes and "pass2" in passes:
        rep["census_pass1_pass2"] = R.census_from_records(passes["pass1"], passes["pass2"])
    return rep


def print_report(rep: dict[str, Any]) -> None:
    print(f"copy bandwidth: {rep['copy_gbs']} GB/s")
    for p, s in rep["passes"].items():
        print(f"== {p}: n={s['n']} status={s['status']} invalid={len(s['invalid_records'])} wall={s['wall_s_total']}s")
        print(f"   chosen families: {s['chosen_family']}")
        print(f"   fallback reasons: {s['fallback_reasons']}  candidate errors: {s['cand_errors']}")
        print(f"   decode GEMM: Triton chosen {s['decode_gemm_triton_wins']}/{s['decode_gemm_n']}, geo-mean best-Triton/vendor "
              f"{s['decode_gemm_ratio_geo']}")
        print(f"   prefill GEMM: Triton chosen {s['prefill_gemm_triton_wins']}/{s['prefill_gemm_n']}, geo-mean "
              f"{s['prefill_gemm_ratio_geo']}")
        print(f"   norm/softmax/swiglu: Triton chosen {s['other_triton_wins']}/{s['other_n']}")
        for r in s["rows"]:
            if r["key"].startswith("gemm") and ":m1:" in r["key"]:
                pct = r.get("pct_copy_bw")
                print(f"   {r['key']:30s} {r['model']:13s} {r['site']:8s} vendor={r['vendor_us']} best_triton="
                      f"{r['best_triton_us']} ratio={r['ratio_best_triton_vs_vendor'] and round(r['ratio_best_triton_vs_vendor'], 3)}"
                      f" chosen%copyBW={pct and round(pct, 1)}")
    c = rep.get("census_pass1_pass2")
    if c:
        print(f"== census pass1 vs pass2 (eps={c['eps']}): n={c['n']} {c['counts']} tolerant_sym={c['tolerant_sym']} "
              f"self_parity={c['self_parity']} by_op={c['by_op']}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__)
        return 2
    rep = build(argv[0])
    print_report(rep)
    if len(argv) >= 3 and argv[1] == "--json":
        slim = dict(rep)
        with open(argv[2], "w") as f:
            json.dump(slim, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
