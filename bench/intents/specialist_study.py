"""The specialist's featurizer chosen on real many-label text: out-of-fold selective risk on HWU64.

For each candidate (:data:`CANDIDATES`: byte n-gram range, buckets, idf weighting, estimator)
and each witness count ``n`` (distinct utterances drawn, seeded, from the in-scope intents; the
witnessed answer is the simulated reference's belief, :func:`bench.intents.oracle.intents_oracle`),
the specialist trainer (:func:`auto.models.specialist.train.distill`) is cross-fitted with
``K = 5`` folds, and the out-of-fold ``(margin, correct)`` pairs are calibrated by the product's
selective-risk certificate (:func:`auto.guards.risk.calibrate_selective_risk`, ε = 0.05,
δ = 0.1). Reported per point: out-of-fold agreement and the certified coverage (the share of
the ``n`` inputs whose out-of-fold margin passes the certified threshold; 0 when none is
certified). ``coverage_curve`` with the default candidate writes the plot ``coverage.png``.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

CANDIDATES: dict[str, dict[str, Any]] = {
    "bytes3-5": {"n_min": 3, "n_max": 5, "buckets": 8192, "idf": False},
    "bytes3-5+idf": {"n_min": 3, "n_max": 5, "buckets": 8192, "idf": True},
    "bytes2-5+idf": {"n_min": 2, "n_max": 5, "buckets": 16384, "idf": True},
    "bytes3-6+idf@16k": {"n_min": 3, "n_max": 6, "buckets": 16384, "idf": True},
    "bytes3-5+words1-2x2": {"n_min": 3, "n_max": 5, "buckets": 8192, "idf": False, "word_max": 2, "word_weight": 2},
}


def witnesses(n: int, seed: int) -> list[tuple[dict, str, float]]:
    """``n`` distinct in-scope utterances (seeded draw) with the reference's belief, weight 1."""
    from bench.intents import corpus, oracle

    pool = [u for u in corpus.load() if u.role == "in-scope"]
    rng = random.Random(f"study|{seed}")
    pick = rng.sample(pool, min(n, len(pool)))
    return [({"utterance": u.utterance}, oracle.intents_oracle(u.utterance), 1.0) for u in pick]


def out_of_fold(items: Sequence[tuple[dict, str, float]], cand: dict[str, Any], model: str, folds: int = 5,
                seed: int = 0) -> tuple[list[float], list[bool]]:
    """Out-of-fold margins and correctness of one candidate (stratified folds, seeded)."""
    from collections import Counter

    from sklearn.model_selection import StratifiedKFold

    from auto.models.specialist.features import FeatureSpec
    from auto.models.specialist.train import distill

    labels = [it[1] for it in items]
    k = max(2, min(folds, max(Counter(labels).values())))
    spec = FeatureSpec("utterance", cand["n_min"], cand["n_max"], cand["buckets"], word_max=cand.get("word_max", 0),
                       word_weight=cand.get("word_weight", 1))
    margins: list[float] = [0.0] * len(items)
    correct: list[bool] = [False] * len(items)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        splits = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(items)), labels))
    for tr, te in splits:
        res = distill([items[i] for i in tr], [spec], heldout=[], seed=seed, models=(model,), idf=cand["idf"])
        for i in te:
            p = res.model.predict(items[i][0])
            margins[i] = float(p.margin)
            correct[i] = p.answer == items[i][1]
    return margins, correct


def certified_coverage(margins: Sequence[float], correct: Sequence[bool], epsilon: float = 0.05,
                       delta: float = 0.1) -> tuple[float, float | None]:
    """``(coverage, threshold)``: the share of pairs at or above the certified threshold (0, None if none)."""
    from auto.guards.risk import calibrate_selective_risk

    g = calibrate_selective_risk(margins, correct, epsilon=epsilon, delta=delta)
    thr = g["threshold"]
    if thr is None:
        return 0.0, None
    return float(np.mean(np.asarray(margins) >= thr)), float(thr)


def study(ns: Sequence[int] = (100, 200, 400, 800), names: Sequence[str] = tuple(CANDIDATES),
          models: Sequence[str] = ("logreg", "linsvc"), seed: int = 0) -> list[dict[str, Any]]:
    """One row per (candidate, model, n): agreement, certified coverage at ε = 0.05, seconds."""
    rows = []
    for n in ns:
        items = witnesses(n, seed)
        for name in names:
            for model in models:
                t0 = time.perf_counter()
                m, c = out_of_fold(items, CANDIDATES[name], model, seed=seed)
                cov, thr = certified_coverage(m, c)
                rows.append({"n": n, "candidate": name, "model": model, "agreement": float(np.mean(c)),
                             "certified_coverage": cov, "threshold": thr, "seconds": round(time.perf_counter() - t0, 2)})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def plot_coverage(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """``coverage.png``: certified coverage at ε = 0.05 (and out-of-fold agreement) against witnesses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=110)
    for key in sorted({(r["candidate"], r["model"]) for r in rows}):
        rs = sorted((r for r in rows if (r["candidate"], r["model"]) == key), key=lambda r: r["n"])
        name = " ".join(k for k in key if k)
        line, = ax.plot([r["n"] for r in rs], [r["certified_coverage"] for r in rs], marker="o", label=f"{name}: certified coverage")
        ax.plot([r["n"] for r in rs], [r["agreement"] for r in rs], ls=":", marker=".", color=line.get_color(),
                label=f"{name}: out-of-fold agreement")
    ax.set_xscale("log")
    ax.set_xlabel("distinct witnessed utterances (HWU64, in-scope intents)")
    ax.set_ylabel("share of inputs")
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def dense_study(ns: Sequence[int] = (400, 800), seed: int = 0) -> list[dict[str, Any]]:
    """Dense features beside the byte n-grams, measured the same way (5 stratified folds, logistic
    regression ``C=10``, out-of-fold margins certified at ε = 0.05, δ = 0.1): ``bytes3-5`` (the
    featurizer's 3-5-byte grams, 8192 buckets), ``wordllama`` (the 256-dimension WordLlama sentence
    embedding, :func:`auto.guards.semantic.load_embedder`) and both concatenated. Needs ``wordllama``."""
    import warnings

    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    from auto.guards.semantic import load_embedder
    from auto.models.specialist.features import FeatureSpec, featurize_many

    embed = load_embedder()
    rows = []
    for n in ns:
        items = witnesses(n, seed)
        texts = [it[0]["utterance"] for it in items]
        y = np.asarray([it[1] for it in items], dtype=object)
        G = featurize_many(texts, FeatureSpec("utterance", 3, 5, 8192))
        E = sp.csr_matrix(np.asarray(embed(texts), dtype=np.float64))
        for name, X in (("bytes3-5", G), ("wordllama", E), ("bytes3-5+wordllama", sp.hstack([G, E]).tocsr())):
            t0 = time.perf_counter()
            margins, correct = np.zeros(n), np.zeros(n, bool)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for tr, te in StratifiedKFold(5, shuffle=True, random_state=seed).split(np.zeros(n), y):
                    m = LogisticRegression(C=10.0, solver="saga", max_iter=300, tol=1e-3, random_state=seed).fit(X[tr], y[tr])
                    d = m.decision_function(X[te])
                    top = np.sort(d, axis=1)
                    margins[te] = top[:, -1] - top[:, -2]
                    correct[te] = m.classes_[d.argmax(axis=1)] == y[te]
            cov, thr = certified_coverage(list(margins), list(correct))
            rows.append({"n": n, "candidate": name, "model": "logreg", "agreement": float(correct.mean()),
                         "certified_coverage": cov, "threshold": thr, "seconds": round(time.perf_counter() - t0, 2)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def coverage_point(n: int, seed: int = 0, epsilon: float = 0.05, delta: float = 0.1, alpha: float = 0.05) -> dict[str, Any]:
    """The specialist rung's own path at ``n`` distinct witnesses: candidate selection
    (:func:`auto.compile.crossfit.choose_config`), cross-fit with as many folds as the largest label
    allows (at most :func:`auto.compile.crossfit.folds_for`), then the guard stack
    (:func:`auto.guards.stack.calibrate_stack`) on the out-of-fold pairs. ``certified_coverage`` is the
    share of the ``n`` inputs that pass both novelty (leave-one-out) and the certified margin
    threshold (0 when none is certified)."""
    from collections import Counter

    from auto.compile.crossfit import choose_config, cross_fit, folds_for
    from auto.guards.novelty import leave_one_out_pass
    from auto.guards.stack import calibrate_stack

    items = witnesses(n, seed)
    t0 = time.perf_counter()
    config, _sel = choose_config(items, seed, field="utterance")
    k = min(folds_for(len(items)), max(Counter(it[1] for it in items).values()))
    cf = cross_fit(items, config, folds=k, seed=seed)
    g = calibrate_stack(list(cf.scores), list(cf.margins), list(cf.correct), [], [], [], alpha=alpha, epsilon=epsilon,
                        delta=delta)
    risk = g["components"][-1] if g.get("components") else {}
    thr = risk.get("threshold")
    keep = leave_one_out_pass([float(x) for x in cf.scores], alpha)
    cov = 0.0 if thr is None else float(np.mean([kp and m >= thr for kp, m in zip(keep, cf.margins)]))
    words = f" + word 1-{config.features.word_max}-grams x{config.features.word_weight}" if config.features.word_max else ""
    return {"n": n, "candidate": f"{config.model} {config.features.n_min}-{config.features.n_max}-byte grams{words}",
            "model": "rung", "folds": k, "agreement": cf.agreement, "certified_coverage": cov, "threshold": thr,
            "smallest_certifiable_epsilon": risk.get("smallest_certifiable_epsilon"),
            "seconds": round(time.perf_counter() - t0, 2)}


def excess_point(n: int, reasked: int, seed: int = 0, epsilon: float = 0.05, delta: float = 0.1,
                 alpha: float = 0.05) -> dict[str, Any]:
    """The specialist rung's certificate at ``n`` distinct witnesses labelled by *single noisy
    calls* of the simulated reference (belief, or its runner-up at :data:`bench.intents.oracle.NOISE`
    per call), ``reasked`` of them (the first drawn) asked a second time: the certified coverage
    on single witnessed answers (the plain certificate) beside the certificate on the excess over
    the reference's self-disagreement (:mod:`auto.guards.noise`, the contract's default
    ``noise_min_reasked``), both through the rung's own path (witness grouping, cross-fit, guard
    stack)."""
    from collections import Counter
    from types import SimpleNamespace

    from auto.compile.crossfit import choose_config, cross_fit, folds_for
    from auto.compile.rungs.specialist import noise_evidence, witness_groups
    from auto.compile.witnesses import WitnessSet
    from auto.gate import Contract
    from auto.guards.novelty import leave_one_out_pass
    from auto.guards.stack import calibrate_stack
    from bench.intents import oracle

    rng = random.Random(f"excess|{seed}")
    m = oracle._model()

    def call(text: str) -> str:
        belief, runner = m.belief_of(text)
        return runner if rng.random() < oracle.NOISE else belief

    drawn = witnesses(n, seed)
    texts = [it[0]["utterance"] for it in drawn]
    calls = [(t, call(t)) for t in texts] + [(t, call(t)) for t in texts[:reasked]]
    ws = WitnessSet.of("study", [SimpleNamespace(input={"utterance": t}, output=y) for t, y in calls])
    items = list(ws.items)
    t0 = time.perf_counter()
    config, _sel = choose_config(items, seed, field="utterance")
    k = min(folds_for(len(items)), max(Counter(it[1] for it in items).values()))
    cf = cross_fit(items, config, folds=k, seed=seed)
    noise, single = noise_evidence(witness_groups(ws), items, cf.answers)
    keep = leave_one_out_pass([float(x) for x in cf.scores], alpha)
    row: dict[str, Any] = {"n": n, "reasked": reasked, "noise": noise.to_dict(), "folds": k, "agreement": cf.agreement}
    for name, least in (("plain", None), ("excess", Contract(task="study").noise_min_reasked)):
        g = calibrate_stack(list(cf.scores), list(cf.margins), list(cf.correct), [], [], [], alpha=alpha,
                            epsilon=epsilon, delta=delta, noise=noise, noise_min_reasked=least, cal_correct_single=single)
        risk = g["components"][-1] if g.get("components") else {}
        thr = risk.get("threshold")
        row[name] = {"certified_coverage": 0.0 if thr is None else float(np.mean([kp and mg >= thr for kp, mg in zip(keep, cf.margins)])),
                     "threshold": thr, "smallest_certifiable_epsilon": risk.get("smallest_certifiable_epsilon"),
                     "risk_level": risk.get("risk_level"),
                     "noise_lower_bound": (risk.get("reference_noise") or {}).get("lower_bound")}
    # the truth the simulator knows: disagreement of admitted answers with a fresh call, minus two calls'
    thr = row["excess"]["threshold"]
    adm = [i for i, (kp, mg) in enumerate(zip(keep, cf.margins)) if thr is not None and kp and mg >= thr]
    if adm:
        fresh = [call(items[i][0]["utterance"]) for i in adm]
        second = [call(items[i][0]["utterance"]) for i in adm]
        firsts = [call(items[i][0]["utterance"]) for i in adm]
        dis = float(np.mean([str(cf.answers[i]) != f for i, f in zip(adm, fresh)]))
        self_dis = float(np.mean([a != b for a, b in zip(firsts, second)]))
        row["excess"]["admitted_disagreement_with_a_fresh_call"] = dis
        row["excess"]["reference_self_disagreement_on_admitted"] = self_dis
        row["excess"]["excess_on_admitted"] = dis - self_dis
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def coverage_curve(out: Path, ns: Sequence[int] = (50, 100, 200, 400, 800), seed: int = 0) -> list[dict[str, Any]]:
    """:func:`coverage_point` at each ``n``; writes ``coverage.json`` and ``coverage.png`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in ns:
        rows.append(coverage_point(n, seed))
        print(json.dumps(rows[-1]), flush=True)
    for r in rows:
        r["candidate"], r["model"] = "specialist rung (byte + word n-grams)", ""
    (out / "coverage.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    plot_coverage(rows, out / "coverage.png", "HWU64: coverage certified at epsilon=0.05 (delta=0.1) vs witnesses")
    return rows


if __name__ == "__main__":  # python -m bench.intents.specialist_study {coverage|excess|dense|candidates} OUT_DIR [n ...]
    import sys

    what = sys.argv[1] if len(sys.argv) > 1 else "coverage"
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "out/intents-study")
    ns = [int(x) for x in sys.argv[3:]] if what != "plot" else []
    if what == "coverage":
        coverage_curve(out, ns or (50, 100, 200, 400, 800))
    elif what == "plot":  # merge coverage.json / dense.json rows of earlier runs into one coverage.png
        merged = [r for f in sys.argv[3:] for r in json.loads(Path(f).read_text(encoding="utf-8"))]
        out.mkdir(parents=True, exist_ok=True)
        plot_coverage(merged, out / "coverage.png", "HWU64: coverage certified at epsilon=0.05 (delta=0.1) vs witnesses")
    elif what == "excess":  # OUT n reasked [n reasked ...]
        out.mkdir(parents=True, exist_ok=True)
        rows = []
        for n, r in zip(ns[::2], ns[1::2]):
            rows.append(excess_point(n, r))
            print(json.dumps(rows[-1]), flush=True)
        (out / "excess.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    elif what == "dense":
        out.mkdir(parents=True, exist_ok=True)
        rows = dense_study(ns or (400, 800))
        (out / "dense.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    else:
        out.mkdir(parents=True, exist_ok=True)
        rows = study(ns or [100, 200, 400, 800])
        (out / "study.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
