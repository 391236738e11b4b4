"""The guard of a region at its commit: calibration of the ``region-novelty`` entry.

A region's calls commit once, before any effectful or paid tool, naming the path they took and
the input text (:func:`auto.compile.steps.build.mark_paths`). The entry keeps, per path, the
training inputs that took it, and the pooled jackknife scores of those inputs (each against the
other training inputs of its own path: :func:`auto_runtime.guard.region.jackknife_scores`); the
runtime's :class:`auto_runtime.guard.region.RegionNovelty` deopts a call whose input's
nonconformity against its path's inputs has a conformal p-value at or below ``alpha``. So a
compiled decision that only ever saw inputs of one kind (a branch learned through ``contains("my")``,
or a default branch) does not act on an input none of its witnesses resembles, and the held-out
inputs measure what the guard costs on inputs like the witnesses (the entry's ``heldout``).
"""

from __future__ import annotations

from typing import Any, Sequence

from auto_runtime.guard import build_guard
from auto_runtime.guard.region import PATH_KEY, jackknife_scores, tokens

from auto.errors import ArgumentError

STATEMENT = (
    "tier-1 when every compiled step answers and, at the commit (before any effectful or paid tool runs), the input's "
    "nonconformity (1 - the largest word-set Jaccard similarity to a training input of the path it took) has a "
    "conformal p-value above alpha against the training inputs' jackknife scores; a path no training input took "
    "deopts. On inputs exchangeable with the witnesses about alpha of calls deopt; elsewhere the false-proceed rate "
    "is what the bench's out-of-distribution probes measure. Each field's generalization is what the held-out gate "
    "measured (parity.fields).")


def path_of(record: Any, field: str) -> tuple[int, str] | None:
    """``(path, text)`` of a commit record, or None when it names neither."""
    ans = record.get("answer") if isinstance(record, dict) else None
    if not isinstance(ans, dict):
        return None
    path, text = ans.get(PATH_KEY), ans.get(field)
    if isinstance(path, bool) or not isinstance(path, int) or not isinstance(text, str):
        return None
    return path, text


def region_guard_entry(field: str, n_paths: int, train: Sequence[tuple[int, str]], alpha: float,
                       heldout: Sequence[tuple[int, str]] = ()) -> dict[str, Any]:
    """The manifest's ``region-novelty`` guard entry.

    Args:
        field: the region's input field.
        n_paths: the region's paths (:meth:`auto.models.region.Region.paths`).
        train: ``(path, text)`` of each distinct training input that reached its commit.
        alpha: the novelty level, in (0, 1) (the contract's ``alpha``).
        heldout: ``(path, text)`` of held-out inputs that reached their commit; the share the
            guard deopts is stated in the entry (``heldout``: ``n``, ``deopted``, ``rate``).

    Raises:
        ArgumentError: no training input reached a commit, or a path index out of range.
    """
    if not train:
        raise ArgumentError("no training input reached the region's commit: nothing to calibrate its guard on")
    paths: list[list[str]] = [[] for _ in range(n_paths)]
    for p, text in train:
        if not 0 <= p < n_paths:
            raise ArgumentError(f"path {p} is not one of the region's {n_paths} paths")
        if text not in paths[p]:
            paths[p].append(text)
    cal = jackknife_scores([[tokens(t) for t in ts] for ts in paths])
    entry: dict[str, Any] = {"method": "region-novelty", "field": field, "alpha": alpha, "paths": paths,
                             "calibration_scores": cal, "n": len(cal), "statement": STATEMENT}
    if heldout:
        g = build_guard(entry)
        deopted = sum(not g.decide_output({"answer": {PATH_KEY: p, field: t}, "deopt": False})[0] for p, t in heldout)
        entry["heldout"] = {"n": len(heldout), "deopted": deopted, "rate": round(deopted / len(heldout), 4)}
    return entry


__all__ = ["STATEMENT", "path_of", "region_guard_entry"]
