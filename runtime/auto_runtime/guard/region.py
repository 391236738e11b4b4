"""``region-novelty``: the guard of a region at its commit — a conformal novelty test of the
input against the training inputs that took the same path.

A region artifact commits once per call, before any effectful or paid tool runs, with the record
``{"answer": {..., "@path": <int>, <field>: <input text>}, "deopt": false}``: the path it took
(which branch of every decision) and the text it read. The guard passes iff the record's
``deopt`` is ``false`` and the input's nonconformity ``s`` against the witnesses of its path has a
conformal p-value above ``alpha``::

    s = 1 - max over the path's training inputs w of J(tokens(x), tokens(w))
    p = (1 + #{c_i >= s}) / (n + 1)

``J`` is the Jaccard similarity of the two word sets (:func:`tokens`: lower-cased ``\\w+`` runs,
a run of digits counted as one token ``0``, so amounts and ids do not make an input novel) and
``c_1..c_n`` are the training inputs' jackknife scores (each against the *other* training inputs
of its own path, pooled over the paths). Under exchangeability of a fresh input with the training
inputs, an input is deopted with probability at most about ``alpha`` (the jackknife form of full
conformal prediction; Vovk, Gammerman, Shafer, *Algorithmic Learning in a Random World*, 2005);
an input whose words no witness of its path shares (an empty one included) has ``s = 1``, the
largest score: its p-value is ``(1 + #{c_i = 1}) / (n + 1)``, so it deopts unless more than an
``alpha`` share of the training inputs shared no word with their own path's others.

A path that no training input took (or a record without a path or text) deopts: nothing
witnessed that branch. The guard's false-proceed rate on inputs that are *not* exchangeable with
the witnesses is not bounded by the formula; the compiler states what it measured (held-out
deopt share), and the bench measures out-of-distribution probes. Never raises.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import Any, Sequence

import numpy as np

from auto_runtime.guard.base import Guard, GuardDecision

PATH_KEY = "@path"
"""The commit record's key holding the path index (a name no region value can have)."""

_WORD = re.compile(r"\w+")


def tokens(text: str) -> frozenset[str]:
    """The word set of a text: lower-cased ``\\w+`` runs, every all-digit run as ``"0"``."""
    return frozenset("0" if w.isdigit() else w for w in _WORD.findall(text.lower()))


class PathIndex:
    """The training inputs of one path as word sets, with an inverted index (word -> inputs, as
    numpy arrays: a score is one ``bincount`` over the postings of the input's words)."""

    __slots__ = ("sizes", "postings", "n")

    def __init__(self, witnesses: Sequence[frozenset[str]]) -> None:
        self.n = len(witnesses)
        self.sizes = np.asarray([len(w) for w in witnesses], dtype=np.float64)
        lists: dict[str, list[int]] = {}
        for i, w in enumerate(witnesses):
            for t in w:
                lists.setdefault(t, []).append(i)
        self.postings = {t: np.asarray(ix, dtype=np.int64) for t, ix in lists.items()}

    def score(self, x: frozenset[str], skip: int = -1) -> float:
        """``1 - max J(x, w)`` over the path's inputs (``skip``: an index left out, the jackknife)."""
        hits = [self.postings[t] for t in x if t in self.postings]
        if not hits:
            return 1.0
        inter = np.bincount(np.concatenate(hits) if len(hits) > 1 else hits[0], minlength=self.n).astype(np.float64)
        if skip >= 0:
            inter[skip] = 0.0
        best = float(np.max(inter / (len(x) + self.sizes - inter)))
        return round(1.0 - best, 9)


def jackknife_scores(paths: Sequence[Sequence[frozenset[str]]]) -> list[float]:
    """Each training input's score against the other inputs of its own path (pooled; an input
    alone on its path scores 1.0)."""
    out: list[float] = []
    for ws in paths:
        idx = PathIndex(ws)
        out.extend(idx.score(w, skip=i) for i, w in enumerate(ws))
    return out


class RegionNovelty(Guard):
    """The ``region-novelty`` guard (module docstring).

    Args:
        field: the region's input field (a key of the commit record's ``answer``).
        alpha: deopt iff ``p <= alpha``, in (0, 1).
        paths: per path index, its training inputs' word sets.
        calibration: the pooled jackknife scores (:func:`jackknife_scores`).
        statement: the entry's statement (informational).
    """

    method = "region-novelty"

    def __init__(self, field: str, alpha: float, paths: Sequence[Sequence[frozenset[str]]],
                 calibration: Sequence[float], statement: str | None = None) -> None:
        self.field = field
        self.alpha = float(alpha)
        self.indexes = [PathIndex(ws) for ws in paths]
        self.calibration = sorted(float(c) for c in calibration)
        self.n = len(self.calibration)
        self.statement = statement

    def _score(self, out: Any) -> tuple[float, int] | None:
        """``(score, path)`` of a commit record, or None when it has no path or text."""
        if out.__class__ is not dict or out.get("deopt") is not False:
            return None
        ans = out.get("answer")
        if ans.__class__ is not dict:
            return None
        path, text = ans.get(PATH_KEY), ans.get(self.field)
        if path.__class__ is not int or not 0 <= path < len(self.indexes) or text.__class__ is not str:
            return None
        idx = self.indexes[path]
        if not idx.n:
            return None
        return idx.score(tokens(text)), path

    def p_value(self, score: float) -> float:
        """``(1 + #{c >= score}) / (n + 1)``."""
        return (1 + self.n - bisect_left(self.calibration, score)) / (self.n + 1)

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        try:
            r = self._score(out)
            if r is None:
                return False, None
            p = self.p_value(r[0])
            return p > self.alpha, p
        except Exception:  # noqa: BLE001 - by contract a guard never raises in the request path
            return False, None

    def evaluate_output(self, out: Any) -> GuardDecision:
        return self._decision_of_decide(out)

    def reason_output(self, out: Any, p_value: float | None) -> str:
        try:
            r = self._score(out)
            if r is None:
                if isinstance(out, dict) and out.get("deopt") is True:
                    return "program deopt"
                return "no-path: the record names no witnessed path and input text"
            s, path = r
            return (f"novel input for path {path}: nonconformity {s:.4g} (1 - nearest witness's word overlap), "
                    f"p={self.p_value(s):.4g}<=alpha={self.alpha:.4g}")
        except Exception:  # noqa: BLE001
            return "region-novelty declined"

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        return self._batch_or_deopt(outs)

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True, "field": self.field, "alpha": self.alpha, "n": self.n,
                "paths": [i.n for i in self.indexes]}


__all__ = ["PATH_KEY", "PathIndex", "RegionNovelty", "jackknife_scores", "tokens"]
