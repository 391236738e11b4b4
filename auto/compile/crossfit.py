"""Cross-fitting: every witness serves both training and calibration.

A fixed 60/20/20 split spends 40% of a small witness set on evaluation. Cross-fitting instead
assigns the distinct witnessed inputs to ``K`` folds (stratified by answer, seeded:
``sklearn.model_selection.StratifiedKFold``) and, for each fold, trains the chosen candidate on
the other ``K - 1`` folds and predicts the fold's inputs. Every input then has an *out-of-fold*
prediction (answer, margin, nonconformity) from a model that never saw it; the deployed model is
trained on all inputs.

What holds at which strength (stated in every manifest that uses it):

- Each out-of-fold prediction is a genuine out-of-sample prediction of *a fold model*, so the
  out-of-fold agreement estimates the fold models' agreement on fresh inputs (slightly
  pessimistic for the deployed model, which trained on ``K/(K-1)`` times as many inputs).
- Calibrating the guard on out-of-fold scores is cross-conformal calibration (Vovk, "Cross-
  conformal predictors", Annals of Mathematics and Artificial Intelligence 74, 2015): its
  guarantee is weaker than split-conformal's and holds for the deployed model only under a
  stability assumption (refitting on all inputs does not make the admitted answers worse). The
  finite-sample Learn-then-Test statement is exact for the fold models, not for the deployed one.
  The ratchet's online monitor of audited tier-1 answers is valid without that assumption.
"""

from __future__ import annotations

import collections
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from sklearn.model_selection import KFold, StratifiedKFold

from auto.canonical import canonical_json
from auto.errors import CompileError
from auto.models.specialist.train import CompiledModel, DistillResult, default_specs, distill
from auto.models.specialist.features import FeatureSpec

DEFAULT_FOLDS = 5
"""K of the K-fold cross-fit from :data:`MANY_INPUTS` distinct inputs on: 80% train each fold model."""

SMALL_FOLDS = 10
"""K below :data:`MANY_INPUTS`: 90% of the inputs train each fold model."""

MANY_INPUTS = 400
"""Distinct inputs from which :data:`DEFAULT_FOLDS` folds are used."""


def folds_for(n: int, requested: int | None = None) -> int:
    """K for ``n`` distinct inputs: ``requested`` when given, else :data:`SMALL_FOLDS` below
    :data:`MANY_INPUTS` and :data:`DEFAULT_FOLDS` from there on; never more than ``n``."""
    k = requested if requested is not None else (SMALL_FOLDS if n < MANY_INPUTS else DEFAULT_FOLDS)
    return max(2, min(k, n))

SELECTIVE_MODELS = ("logreg", "linsvc")
"""Candidates for a guarded specialist: linear models only. A decision tree's margin is a leaf's
class-fraction gap, 1.0 on every pure leaf, so it cannot rank inputs for a selective-risk
threshold (measured: trees win on agreement on small triage sets and then certify nothing,
"constant confidence on all calibration points")."""


@dataclass(frozen=True)
class Config:
    """One distillation candidate: estimator name and feature spec."""

    model: str
    features: FeatureSpec


@dataclass(frozen=True)
class CrossFit:
    """Out-of-fold predictions for every distinct input, in input order.

    Attributes:
        folds: K.
        config: the candidate every fold model (and the deployed model) uses.
        answers: out-of-fold answers (JSON values).
        margins: out-of-fold margins (top-1 minus top-2 score).
        scores: out-of-fold nonconformity scores.
        correct: whether each out-of-fold answer equals the witnessed (modal) answer.
    """

    folds: int
    config: Config
    answers: tuple[Any, ...]
    margins: tuple[float, ...]
    scores: tuple[float, ...]
    correct: tuple[bool, ...]

    @property
    def agreement(self) -> float | None:
        """Out-of-fold agreement with the witnessed answers (None without inputs)."""
        return sum(self.correct) / len(self.correct) if self.correct else None


def choose_config(items: Sequence[tuple[dict[str, Any], Any, float]], seed: int,
                  selection_fraction: float = 0.25, field: str | None = None) -> tuple[Config, DistillResult]:
    """Select the candidate (linear estimator × feature spec: :data:`SELECTIVE_MODELS` ×
    :func:`auto.models.specialist.train.default_specs`) by the selective coverage, then agreement, on a stratified selection split (:func:`auto.models.specialist.train.distill`); ``field`` names the
    input field to featurize (default: the one string field).

    Raises:
        CompileError: as :func:`auto.models.specialist.train.distill`.
    """
    specs = None if field is None else default_specs(field)
    res = distill(list(items), specs, heldout_fraction=selection_fraction, seed=seed, models=SELECTIVE_MODELS)
    return Config(res.selected.model, res.selected.features), res


def fit(items: Sequence[tuple[dict[str, Any], Any, float]], config: Config, seed: int) -> DistillResult:
    """Train ``config`` on every item (no held-out).

    Raises:
        CompileError: as :func:`auto.models.specialist.train.distill`.
    """
    return distill(list(items), [config.features], heldout=[], seed=seed, models=(config.model,))


def fold_splitter(labels: Sequence[str], folds: int, seed: int) -> tuple[int, str]:
    """``(K, how)``: the folds that fit the data. ``how`` is ``"stratified"`` when some label has
    at least ``folds`` items (``StratifiedKFold`` needs one; a label with fewer items is spread
    over as many folds as it has items), else ``"plain"`` (``KFold``: every label is too small to
    stratify, e.g. tens of labels with a few witnesses each). K is ``folds``, at most the number
    of items.

    Raises:
        CompileError: fewer than 2 items (no fold can be held out); the reason says so.
    """
    n = len(labels)
    if n < 2:
        raise CompileError(f"cross-fit needs at least 2 distinct inputs to hold one out, got {n}")
    k = max(2, min(folds, n))
    largest = max(collections.Counter(labels).values())
    return k, ("stratified" if largest >= k else "plain")


def fold_assignment(labels: Sequence[str], folds: int, seed: int) -> list[int]:
    """Fold id (0..K-1) per item (K from :func:`fold_splitter`), stratified by label
    (``StratifiedKFold(shuffle=True, random_state=seed)``) when some label has K items, else
    shuffled plain folds (``KFold``). An item whose label has no other item in the training
    folds gets an out-of-fold answer that cannot be right: it counts as a miss, so the guard
    calibrates on it as an error (such inputs are answered by the table, or deopt).

    Raises:
        CompileError: fewer than 2 items.
    """
    k, how = fold_splitter(labels, folds, seed)
    out = [0] * len(labels)
    splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed) if how == "stratified" \
        else KFold(n_splits=k, shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the least populated class has only m members": expected
        for j, (_, test) in enumerate(splitter.split([[0]] * len(labels), list(labels))):
            for i in test:
                out[int(i)] = j
    return out


def cross_fit(items: Sequence[tuple[dict[str, Any], Any, float]], config: Config, *, folds: int = DEFAULT_FOLDS,
              seed: int = 0, progress: Callable[[int, int], None] | None = None) -> CrossFit:
    """Out-of-fold predictions of ``config`` for every item.

    Args:
        items: distinct inputs ``(input, modal answer, share)``; the share is the sample weight.
        config: the candidate to fit in every fold.
        folds: K (2 <= K <= len(items)).
        seed: fold assignment and estimator seed.
        progress: ``progress(folds done, K)`` after each fold is fitted and predicted.

    Raises:
        CompileError: a fold's training set cannot be fitted (e.g. a single label in it), or
            fewer than 2 items (no fold can be held out).
    """
    labels = [canonical_json(it[1]) for it in items]
    folds, _ = fold_splitter(labels, folds, seed)
    fold = fold_assignment(labels, folds, seed)
    preds: list[Any] = [None] * len(items)
    for k in range(folds):
        train = [items[i] for i in range(len(items)) if fold[i] != k]
        test = [i for i in range(len(items)) if fold[i] == k]
        if not test:
            if progress is not None:
                progress(k + 1, folds)
            continue
        model: CompiledModel = fit(train, config, seed).model
        for i in test:
            preds[i] = model.predict(items[i][0])
        if progress is not None:
            progress(k + 1, folds)
    return CrossFit(folds=folds, config=config,
                    answers=tuple(p.answer for p in preds), margins=tuple(float(p.margin) for p in preds),
                    scores=tuple(float(p.nonconformity) for p in preds),
                    correct=tuple(p.label == lab for p, lab in zip(preds, labels)))


__all__ = ["DEFAULT_FOLDS", "MANY_INPUTS", "SMALL_FOLDS", "Config", "CrossFit", "choose_config", "cross_fit", "fit",
           "fold_assignment", "fold_splitter", "folds_for"]
