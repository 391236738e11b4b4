"""Verify the compiled specialist's choices on the GPU, against the reference agent and the vendor path.

    python -m bench.kernel_tuning.verify --traces traces/kernel-tuning --out DIR \\
        [--limit-s 450] [--ops gemm,rmsnorm] [--precompile-jobs 12] [--copy-bw]

For every seen workload (the 176 keys of pass1 + pass2) three candidates are materialized in ONE
process:

* ``specialist``: the answer of the compiled exact-match table (``specialist.table_entries`` over
  pass1 + pass2: the common choice, or the one with the smaller worst regret);
* ``reference``: the reference agent's pass1 choice;
* ``vendor``: the vendor path (``F.linear`` = cuBLAS, ``F.rms_norm``, ``F.silu(g)*u``,
  ``torch.softmax``).

Equal ids are materialized and timed once and reported under every role they hold. Numerics come
first (fresh random inputs, the output poisoned with NaN, fp32 reference on upcast inputs,
‖out−ref‖/‖ref‖ ≤ ``agent.REL_TOL`` = 1e-2, no NaN/Inf); a candidate that fails them is recorded as
failed and never timed. Then the passing candidates are timed interleaved (round-robin, 3 rounds,
median of the round values) under P1 (``do_bench`` median, L2 flushed) for every workload, and
under P2 (CUDA-graph replay over rotated input copies > 4× L2) where ``agent.p2_applies`` (decode
GEMMs, M ≤ 8) — the same helpers ``agent.decide`` uses.

Output: ``DIR/verify.jsonl``, one canonical-JSON line per workload, flushed (and fsynced) per
workload; workloads already in the file are skipped (a run cut short resumes). ``DIR/verify.log``
has a line per workload; ``DIR/verify_meta.json`` the environment, copy bandwidth, the recorded env
hash and whether it matches (the specialist's guard deopts on a mismatch), wall times and counts.

Order: decode GEMMs (the headline; M = 1 first), then RMSNorm / SwiGLU / softmax, then prefill
GEMMs by ascending M. The driver stops before ``--limit-s`` (predicting each next workload's cost
from similar ones) and exits 0 = all done, 2 = stopped by the limit, 3 = CUDA context lost
(restart: it resumes after the lost workload), 1 = error.

Per line (see :func:`verify_item`): ``key``, ``op``, ``model``, ``site``, ``also``, ``phase``,
``m``, ``m_tokens``, ``n``, ``k``, ``dtype``, ``workload``, ``protocols``, ``deciding_protocol``,
``specialist`` / ``reference`` ({id, family, config, protocol}), ``same_choice``, ``candidates``
(per distinct id: ``id``, ``roles``, ``family``, ``config``, ``rel_err``, ``ok``, ``error``, and per
protocol ``{"times_us": [3], "median_us"}``), ``parity`` (per protocol: ``min_us``, ``best_id``,
``specialist_us``, ``reference_us``, ``vendor_us``, ``specialist_at_parity``,
``reference_at_parity``, ``ratio_specialist_vendor``, ``ratio_reference_vendor``,
``ratio_specialist_reference``), ``recorded`` (pass1/pass2 medians of these ids), ``env``,
``env_hash``, ``seed``, ``rounds``, ``eps``, ``status``, ``error``, ``wall_s``, ``t_s``.

torch and triton are imported only by :class:`GPUBackend`, so planning and the line schema run on
CPU (tests use a fake backend).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from . import advisor as A
from . import record as R
from . import specialist as S
from .agent import REL_TOL, TimingCfg, _err, p2_applies
from .workloads import Workload

EPS = S.EPS
PROTOCOLS = ("P1", "P2")
VENDOR = {"id": "vendor", "family": "vendor", "config": {}}
INDUCTOR = {"id": "inductor", "family": "inductor", "config": {}}
ENV_FIELDS = ("gpu", "sms", "cc", "driver", "cuda", "triton", "torch")
LINE_KEYS = ("key", "op", "model", "site", "also", "phase", "m", "m_tokens", "n", "k", "dtype", "workload",
             "protocols", "deciding_protocol", "specialist", "reference", "same_choice", "candidates", "parity",
             "recorded", "env", "env_hash", "seed", "rounds", "eps", "status", "error", "wall_s", "t_s")


# --------------------------------------------------------------------------- plan


@dataclass
class Item:
    """One seen workload with the specialist's and the reference agent's answers."""

    w: Workload
    specialist: dict[str, Any]
    reference: dict[str, Any] | None
    recorded: dict[str, dict[str, dict[str, float | None]]] = field(default_factory=dict)
    recorded_env_hash: str | None = None
    inductor: bool = False  # also measure torch.compile's kernel (role "inductor")

    @property
    def protocols(self) -> list[str]:
        return ["P1", "P2"] if p2_applies(self.w) else ["P1"]

    def candidates(self) -> list[dict[str, Any]]:
        """Distinct ids in role order specialist, reference, vendor; each with its roles."""
        out: dict[str, dict[str, Any]] = {}
        roles = [("specialist", self.specialist), ("reference", self.reference), ("vendor", VENDOR)]
        if self.inductor:
            roles.append(("inductor", INDUCTOR))
        for role, ans in roles:
            if ans is None:
                continue
            c = out.setdefault(ans["id"], {"id": ans["id"], "family": ans["family"],
                                           "config": dict(ans.get("config") or {}), "roles": []})
            c["roles"].append(role)
        return list(out.values())


def _recorded(recs: dict[str, dict[str, Any]], ids: list[str]) -> dict[str, dict[str, dict[str, float | None]]]:
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for pname, rec in recs.items():
        cs = {c["id"]: c for c in rec["attributes"]["kt.candidates"]}
        out[pname] = {i: {"P1": cs[i].get("median_us_p1"), "P2": cs[i].get("median_us_p2"),
                          "error": cs[i].get("error")} for i in ids if i in cs}
    return out


def verify_order(items: list[Item]) -> list[Item]:
    """Decode GEMMs (by M, then N, K) → RMSNorm / SwiGLU / softmax (by op, M) → prefill GEMMs (by M)."""
    other = {"rmsnorm": 0, "swiglu": 1, "softmax": 2}

    def sk(it: Item) -> tuple:
        w = it.w
        if w.op == "gemm" and w.m <= 8:
            return (0, w.m, 0, w.n, w.k)
        if w.op != "gemm":
            return (1, other.get(w.op, 9), w.m, w.n, w.k)
        return (2, w.m, 0, w.n, w.k)
    return sorted(items, key=sk)


def build_plan(traces: str, ops: list[str] | None = None, passes: tuple[str, ...] = ("pass1", "pass2"),
               keys: list[str] | None = None, generation: int = 1) -> list[Item]:
    """Items for every seen workload key of the recorded passes, in :func:`verify_order`.

    The specialist's answer is ``specialist.table_entries`` over all ``passes``; the reference's is
    the first pass's recorded choice. ``generation`` 2 takes the passes from
    ``specialist.generation_passes`` (re-recorded row ops substituted) and also measures
    torch.compile's kernel on every op it serves."""
    if generation >= 2:
        pa, pb, _ = S.generation_passes(traces, generation)
        recs = [pa, pb]
        passes = ("pass1", "pass2")
    else:
        recs = [R.load_jsonl(os.path.join(traces, f"{p}.jsonl")) for p in passes]
    ref_idx = S.by_key(recs[0])
    idx = [S.by_key(r) for r in recs]
    items = []
    for inp, ans, rs in S.table_entries(recs):
        a0 = rs[0]["attributes"]
        key = a0["kt.workload_key"]
        w = Workload.from_json(a0["kt.workload"])
        if ops and w.op not in ops:
            continue
        if keys and key not in keys:
            continue
        ref = S.answer(ref_idx[key]) if key in ref_idx else None
        it = Item(w=w, specialist=ans, reference=ref, recorded_env_hash=inp["env"],
                  inductor=generation >= 2 and w.op in A.INDUCTOR_OPS)
        ids = [c["id"] for c in it.candidates()]
        it.recorded = _recorded({p: i[key] for p, i in zip(passes, idx) if key in i}, ids)
        items.append(it)
    return verify_order(items)


# --------------------------------------------------------------------------- one workload


class Backend(Protocol):
    """What :func:`verify_item` needs from the machine (GPU: :class:`GPUBackend`; tests: a fake)."""

    def begin(self, w: Workload) -> None: ...
    def materialize(self, cand: dict[str, Any]) -> Any: ...  # build, poison, run once → result
    def check(self, result: Any) -> tuple[float, bool]: ...  # (rel_err, all finite)
    def p1_us(self, cid: str) -> float: ...
    def p2_begin(self, cids: list[str]) -> dict[str, str]: ...  # capture graphs; {cid: error}
    def p2_us(self, cid: str) -> float: ...
    def end(self) -> None: ...
    def alive(self) -> bool: ...


def _median(xs: list[float]) -> float | None:
    m = R.median(xs)
    return round(m, 4) if m is not None else None


def parity_block(cands: list[dict[str, Any]], protocol: str, spec_id: str, ref_id: str | None,
                 eps: float = EPS) -> dict[str, Any]:
    """Parity flags and ratios of one protocol from the candidates' medians in this run."""
    meds = {c["id"]: c[protocol]["median_us"] for c in cands
            if c["ok"] and c.get(protocol) and c[protocol]["median_us"] is not None}
    mn = min(meds.values()) if meds else None
    best = min(meds, key=lambda i: (meds[i], i)) if meds else None
    s, r, v = meds.get(spec_id), meds.get(ref_id) if ref_id else None, meds.get("vendor")
    ind = meds.get("inductor")

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 5) if a is not None and b else None

    return {
        "min_us": mn, "best_id": best, "specialist_us": s, "reference_us": r, "vendor_us": v,
        "specialist_at_parity": bool(s is not None and mn is not None and s <= (1.0 + eps) * mn),
        "reference_at_parity": bool(r is not None and mn is not None and r <= (1.0 + eps) * mn),
        "ratio_specialist_vendor": ratio(s, v), "ratio_reference_vendor": ratio(r, v),
        "ratio_specialist_reference": ratio(s, r),
        "inductor_us": ind, "ratio_specialist_inductor": ratio(s, ind),
    }


def verify_item(it: Item, be: Backend, *, rounds: int = 3, eps: float = EPS, env: dict[str, Any] | None = None,
                seed: int = 0, t_ref: float | None = None) -> tuple[dict[str, Any], bool]:
    """Numerics, then interleaved timing of the item's candidates. Returns (line, lost_gpu)."""
    w = it.w
    t0 = time.time()
    protocols = it.protocols
    cands = it.candidates()
    for c in cands:
        c.update({"rel_err": None, "ok": False, "error": None})
        for p in protocols:
            c[p] = {"times_us": [], "median_us": None}
    lost = False
    err: dict[str, Any] | None = None
    try:
        be.begin(w)
        begun = True
    except Exception as e:
        begun = False
        err = {"type": type(e).__name__, "message": _err("setup", e)}
        for c in cands:
            c["error"] = err["message"]
        lost = not be.alive()
    if begun:
        try:
            # ---- numerics before any timing
            for c in cands:
                try:
                    res = be.materialize(c)
                except Exception as e:
                    c["error"] = _err("compile", e)
                    if not be.alive():
                        lost, c["error"] = True, _err("lost_gpu", e)
                        break
                    continue
                try:
                    re_, finite = be.check(res)
                except Exception as e:
                    c["error"] = _err("numerics", e)
                    if not be.alive():
                        lost, c["error"] = True, _err("lost_gpu", e)
                        break
                    continue
                c["rel_err"] = R.finite_or_none(float(re_))
                if not finite:
                    c["error"] = "numerics: non-finite output (NaN/Inf; unwritten elements stay NaN-poisoned)"
                elif re_ > REL_TOL:
                    c["error"] = f"numerics: rel_err {re_:.3e} > {REL_TOL:g}"
                else:
                    c["ok"] = True
            passing = [c for c in cands if c["ok"]]
            # ---- P1: round-robin over the passing candidates
            for _ in range(rounds if not lost else 0):
                for c in passing:
                    if c["error"]:
                        continue
                    try:
                        c["P1"]["times_us"].append(round(float(be.p1_us(c["id"])), 4))
                    except Exception as e:
                        c["error"], c["ok"] = _err("timing", e), False
                        if not be.alive():
                            lost = True
                            break
                if lost:
                    break
            # ---- P2 where it applies
            if "P2" in protocols and not lost:
                live = [c for c in passing if not c["error"]]
                try:
                    bad = be.p2_begin([c["id"] for c in live])
                    for c in live:
                        if c["id"] in bad:
                            c["error"], c["ok"] = bad[c["id"]], False
                    for _ in range(rounds):
                        for c in live:
                            if c["error"]:
                                continue
                            c["P2"]["times_us"].append(round(float(be.p2_us(c["id"])), 4))
                except Exception as e:
                    err = {"type": type(e).__name__, "message": _err("p2", e)}
                    lost = not be.alive()
        finally:
            try:
                be.end()
            except Exception:
                pass
    for c in cands:
        for p in protocols:
            ts = c[p]["times_us"]
            c[p]["median_us"] = _median(ts) if (c["ok"] and len(ts) == rounds) else None
    spec_id = it.specialist["id"]
    ref_id = it.reference["id"] if it.reference else None
    parity = {p: parity_block(cands, p, spec_id, ref_id, eps) for p in protocols}
    if lost:
        err = err or {"type": "LostGPU", "message": "CUDA context lost during verification"}
    env = env or {}
    line = {
        "key": w.key, "op": w.op, "model": w.model, "site": w.site, "also": list(w.also), "phase": w.phase,
        "m": w.m, "m_tokens": w.m_tokens, "n": w.n, "k": w.k, "dtype": w.dtype, "workload": w.to_json(),
        "protocols": protocols, "deciding_protocol": it.specialist.get("protocol"),
        "specialist": it.specialist, "reference": it.reference,
        "same_choice": bool(it.reference and it.reference["id"] == spec_id),
        "candidates": cands, "parity": parity, "recorded": it.recorded,
        "env": {k: env.get(k) for k in ENV_FIELDS}, "env_hash": R.env_hash(env),
        "seed": seed, "rounds": rounds, "eps": eps,
        "status": "error" if (lost or err) else "ok", "error": err,
        "wall_s": round(time.time() - t0, 4),
        "t_s": round(time.time() - t_ref, 2) if t_ref is not None else None,
    }
    return line, lost


# --------------------------------------------------------------------------- GPU backend


def _wall_median(fn: Callable[[], Any], n: int) -> float:
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]


class GPUBackend:
    """torch/Triton implementation of :class:`Backend`, reusing ``kernels`` and ``agent`` helpers."""

    def __init__(self, *, seed: int = 0, timing: TimingCfg | None = None, hw: dict[str, Any] = A.H200,
                 device: str = "cuda"):
        import torch  # noqa: F401
        import triton.testing  # noqa: F401

        from . import kernels as KN

        self.KN = KN
        self.seed = seed
        self.timing = timing or TimingCfg()
        self.hw = hw
        self.device = device
        self.problem = None
        self.runners: dict[str, Any] = {}
        self.graphs: dict[str, Any] = {}
        self.copies: list | None = None

    def _sync(self) -> None:
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()

    def begin(self, w: Workload) -> None:
        self.w = w
        self.problem = self.KN.Problem(w, device=self.device, seed=self.seed)
        self.runners, self.graphs, self.copies = {}, {}, None

    def materialize(self, cand: dict[str, Any]) -> Any:
        run = self.KN.build(cand["family"], cand["config"], self.w, device=self.device)
        self.problem.poison()
        res = run(self.problem.args, self.problem.out)
        self._sync()
        self.runners[cand["id"]] = run
        return res

    def check(self, result: Any) -> tuple[float, bool]:
        re_, finite = self.KN.rel_err(result, self.problem.ref)
        self._sync()
        return re_, finite

    def p1_us(self, cid: str) -> float:
        import triton.testing

        run, args, out = self.runners[cid], self.problem.args, self.problem.out
        t = self.timing
        if self.device != "cuda":  # dry run (TRITON_INTERPRET=1): wall clock, median of 3
            return 1e6 * _wall_median(lambda: run(args, out), 3)
        return 1e3 * float(triton.testing.do_bench(lambda: run(args, out), warmup=t.p1_warmup_ms, rep=t.p1_rep_ms,
                                                   return_mode="median"))

    def p2_begin(self, cids: list[str]) -> dict[str, str]:
        from .agent import _graph_for

        self.copies = self.KN.make_copies(self.w, self.problem, int(self.hw["l2"]), self.timing.p2_l2_factor,
                                          device=self.device)
        bad = {}
        if self.device != "cuda":  # dry run: no graphs; p2_us walks the copies on the host clock
            self.copies = self.copies[:2]
            return bad
        for cid in cids:
            try:
                self.graphs[cid] = _graph_for(self.runners[cid], self.copies, self.problem.out)
            except Exception as e:
                bad[cid] = _err("p2_capture", e)
                if not self.alive():
                    raise
        return bad

    def p2_us(self, cid: str) -> float:
        from .agent import _replay_us

        if self.device != "cuda":
            run, out, copies = self.runners[cid], self.problem.out, self.copies
            return 1e6 * _wall_median(lambda: [run(a, out) for a in copies], 1) / len(copies)
        return _replay_us(self.graphs[cid], len(self.copies), self.timing.p2_replays)

    def end(self) -> None:
        self.graphs.clear()
        self.copies = None
        self.runners = {}
        self.problem = None

    def alive(self) -> bool:
        from .agent import gpu_alive

        return gpu_alive() if self.device == "cuda" else True


# --------------------------------------------------------------------------- driver


def precompile_items_for(items: list[Item]) -> list[tuple[Workload, str, dict]]:
    """The distinct Triton variants to compile: per (id, op), on the smallest workload (as
    ``run.precompile`` does)."""
    rep: dict[tuple[str, str], tuple[int, Workload, str, dict]] = {}
    for it in items:
        w = it.w
        size = w.m * max(w.n, 1) + max(w.n, 1) * max(w.k, 1)
        for c in it.candidates():
            if c["id"] == "vendor":
                continue
            key = (c["id"], w.op) if c["family"] != "inductor" else (c["id"], w.key)  # Inductor compiles per shape
            if key not in rep or size < rep[key][0]:
                rep[key] = (size, w, c["family"], c["config"])
    vals = sorted(rep.values(), key=lambda t: (t[2], json.dumps(t[3], sort_keys=True), t[1].key))
    return [(w, fam, cfg) for _, w, fam, cfg in vals]


def _guess_cost(cost: dict[tuple, float], w: Workload) -> float:
    group = (w.op, w.phase, w.m_tokens)
    if group in cost:
        return cost[group]
    similar = [v for k, v in cost.items() if k[0] == w.op and k[1] == w.phase]
    if similar:
        return max(similar) * (2.0 if w.phase == "prefill" else 1.2)
    return 6.0 if w.phase == "prefill" else 3.0


def _probe_env(copy_bw: bool) -> dict[str, Any]:
    from . import kernels as KN

    env = KN.env_probe()
    if copy_bw:
        env["copy_bandwidth"] = KN.copy_bandwidth()
    env["env_hash"] = R.env_hash(env)
    return env


def main(argv: list[str] | None = None, *, backend_factory: Callable[..., Backend] | None = None,
         env: dict[str, Any] | None = None) -> int:
    from .run import log, precompile_items

    ap = argparse.ArgumentParser(prog="python -m bench.kernel_tuning.verify")
    ap.add_argument("--traces", default="traces/kernel-tuning")
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit-s", type=float, default=450.0)
    ap.add_argument("--ops", default=None, help="comma list of ops to keep")
    ap.add_argument("--keys", default=None, help="comma list of workload keys to keep")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--eps", type=float, default=EPS)
    ap.add_argument("--seed", type=int, default=7007, help="inputs seed (differs from the passes' 488/577)")
    ap.add_argument("--precompile-jobs", type=int, default=0)
    ap.add_argument("--precompile-budget-s", type=float, default=90.0)
    ap.add_argument("--copy-bw", action="store_true", help="measure copy bandwidth into verify_meta.json")
    ap.add_argument("--file", default="verify.jsonl")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run under TRITON_INTERPRET=1")
    ap.add_argument("--generation", type=int, default=1,
                    help="1: pass1/pass2; 2: with rerecord1/rerecord2 substituted, torch.compile's kernel measured too")
    args = ap.parse_args(argv)
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, os.path.splitext(args.file)[0] + ".log"), "a")
    items = build_plan(args.traces, args.ops.split(",") if args.ops else None,
                       keys=args.keys.split(",") if args.keys else None, generation=args.generation)
    path = os.path.join(args.out, args.file)
    done: set[str] = set()
    if os.path.exists(path):
        done = {json.loads(x)["key"] for x in open(path) if x.strip()}
    todo = [it for it in items if it.w.key not in done]
    if env is None and args.device == "cpu":
        import triton

        env = {"gpu": "cpu (TRITON_INTERPRET dry run)", "sms": 0, "driver": None, "cuda": None,
               "triton": triton.__version__, "torch": __import__("torch").__version__}
    elif env is None:
        env = _probe_env(args.copy_bw)
    rec_hash = items[0].recorded_env_hash if items else None
    meta_path = os.path.join(args.out, os.path.splitext(args.file)[0] + "_meta.json")
    meta: dict[str, Any] = {
        "argv": sys.argv[1:] if argv is None else list(argv), "env": env, "env_hash": R.env_hash(env),
        "recorded_env_hash": rec_hash, "env_matches_recorded": R.env_hash(env) == rec_hash,
        "started_unix": int(t_start), "workloads": len(items), "already_done": len(done), "todo": len(todo),
        "rel_tol": REL_TOL, "eps": args.eps, "rounds": args.rounds, "seed": args.seed,
    }
    if os.path.exists(meta_path):  # a resumed run: keep the earlier process's meta
        try:
            old = json.load(open(meta_path))
            meta["previous"] = old.pop("previous", []) + [old]
        except Exception:
            pass

    def write_meta() -> None:
        with open(meta_path, "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)

    write_meta()
    log(logf, f"verify: workloads={len(items)} done={len(done)} todo={len(todo)} limit_s={args.limit_s} "
              f"env_hash={meta['env_hash'][:20]}… matches_recorded={meta['env_matches_recorded']}")
    if args.precompile_jobs > 0 and todo and backend_factory is None:
        pre_items = precompile_items_for(todo)
        meta["precompile"] = precompile_items(pre_items, args.precompile_jobs,
                                              min(args.precompile_budget_s, max(10.0, args.limit_s * 0.3)), logf,
                                              args.device)
        write_meta()
    timing = TimingCfg(rounds=args.rounds)
    be = backend_factory() if backend_factory else GPUBackend(seed=args.seed, timing=timing, device=args.device)
    cost: dict[tuple, float] = {}
    rc, n_done = 0, 0
    with open(path, "a") as fo:
        for it in todo:
            w = it.w
            elapsed = time.time() - t_start
            guess = _guess_cost(cost, w)
            if elapsed + guess * 1.3 > args.limit_s:
                log(logf, f"time limit: stopping before {w.key} (elapsed {elapsed:.1f}s, next ~{guess:.1f}s)")
                rc = 2
                break
            line, lost = verify_item(it, be, rounds=args.rounds, eps=args.eps, env=env, seed=args.seed, t_ref=t_start)
            fo.write(R.canonical_json(line) + "\n")
            fo.flush()
            os.fsync(fo.fileno())
            n_done += 1
            group = (w.op, w.phase, w.m_tokens)
            cost[group] = max(cost.get(group, 0.0), line["wall_s"])
            msg = []
            for p in line["protocols"]:
                pb = line["parity"][p]
                msg.append(f"{p} spec={pb['specialist_us']} ref={pb['reference_us']} vendor={pb['vendor_us']} "
                           f"par={'Y' if pb['specialist_at_parity'] else 'N'}")
            fails = [f"{c['id'][:40]}: {c['error'][:60]}" for c in line["candidates"] if c["error"]]
            log(logf, f"{w.key:30s} {w.model:12s} {w.site:16s} {'same' if line['same_choice'] else 'diff'} "
                      + " | ".join(msg) + f" wall={line['wall_s']:.2f}s" + (f" FAIL {fails}" if fails else ""))
            if lost:
                log(logf, "lost GPU: exiting with 3 so the wrapper restarts the process")
                rc = 3
                break
    meta.update({"wrote": n_done, "left": len(todo) - n_done, "rc": rc, "wall_s": round(time.time() - t_start, 2)})
    write_meta()
    log(logf, f"verify: wrote {n_done}, {len(todo) - n_done} left, rc={rc}, wall {meta['wall_s']} s")
    logf.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
