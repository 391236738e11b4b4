"""Specialist training and model selection: witnesses -> :class:`CompiledModel`.

Candidates are scikit-learn models (linear: LogisticRegression, LinearSVC, RidgeClassifier,
SGDClassifier; DecisionTreeClassifier) trained on :func:`auto.models.specialist.features.featurize_many` vectors for
each candidate :class:`~auto.models.specialist.features.FeatureSpec`. The candidate whose *reference* predictions
(:meth:`CompiledModel.predict`, i.e. what the artifact computes) agree most often with the
held-out witnesses wins. Novelty prototypes come from per-class KMeans on the training vectors.
Everything is deterministic for a fixed ``seed``.

Labels may be any JSON value; internally a class is its canonical JSON text
(:func:`auto.canonical.canonical_json`) and classes are sorted by that text.
"""

from __future__ import annotations

import dataclasses

import hashlib
import json
import warnings
from dataclasses import dataclass, field as dc_field
from typing import Any, NamedTuple, Sequence

import numpy as np
import scipy.sparse as sp

from auto.canonical import canonical_json
from auto.errors import CompileError, InputSchemaError
from auto.models.specialist.features import FeatureSpec, featurize, matrix_of

LINEAR_MODELS = ("logreg", "linsvc", "ridge", "sgd")
MODELS = LINEAR_MODELS + ("tree",)
DEFAULT_MODELS = ("logreg", "linsvc", "tree")
DEFAULT_GRID = ((3, 5), (4, 6), (5, 7))
"""Byte n-gram ranges of the default candidates."""
WORD_CANDIDATES = ((3, 5, 2, 2),)
"""Default candidates with word n-grams, ``(n_min, n_max, word_max, word_weight)``, tried after the byte-only
ones: 3-5-byte grams with words and word pairs at weight 2 (chosen on HWU64 by out-of-fold certified coverage
at selective risk 0.05: 0.571 -> 0.629 at 1,600 distinct utterances; weight 3 was level at 1,200, 0.526
against 0.513, and lower at 800; see :mod:`auto.models.specialist.features`)."""
DEFAULT_BUCKETS = 8192
DEFAULT_PROTOTYPES = 4
"""Prototypes per class: each costs one f64 multiply-add per touched bucket in the artifact."""
DEFAULT_IDF = False
"""Whether linear candidates are trained on idf-weighted vectors by default (:func:`idf_weights`). Off:
measured on HWU64 (800 distinct utterances, 59 intents, 5-fold out-of-fold, LinearSVC over 3-5-byte
n-grams) idf weighting changed agreement 0.689 -> 0.679 and the coverage certified at epsilon = 0.05
0.083 -> 0.078 (`python -m bench.intents.specialist_study`)."""


def idf_weights(X: sp.csr_matrix) -> np.ndarray:
    """Smoothed inverse document frequency per bucket, float64 ``[B]``: ``ln((1 + n) / (1 + df_j)) + 1``
    where ``n`` is the number of rows of ``X`` and ``df_j`` the rows with a nonzero bucket ``j``
    (scikit-learn's ``TfidfTransformer(smooth_idf=True)`` formula; Sparck Jones, "A statistical
    interpretation of term specificity", 1972).

    The weights are baked into a linear model's rows at fit time: the model is trained on
    ``x * idf`` (``x`` the featurizer's L2-normalized counts) and its weights ``w * idf`` are
    stored, so ``w . (x * idf) = (w * idf) . x`` and the artifact computes exactly the featurizer it
    always did (no per-bucket table, no change to the WebAssembly). Rows are not renormalized
    after weighting (the featurizer's norm is of the raw counts).
    """
    n = X.shape[0]
    df = np.bincount(X.indices, minlength=X.shape[1]).astype(np.float64) if X.nnz else np.zeros(X.shape[1])
    return np.log((1.0 + n) / (1.0 + df)) + 1.0


class Prediction(NamedTuple):
    """One reference prediction.

    Attributes:
        label: the class as canonical JSON text (``json.loads(label)`` is the task output).
        margin: top-1 minus top-2 score (binary linear: ``|score|``; tree: leaf class fractions).
        nonconformity: ``1 - max_k P_k . x`` (1.0 for the empty vector), plus the
            unexplained mass of the answer's class when the model has a support bitmap
            (:class:`CompiledModel`).
    """

    label: str
    margin: float
    nonconformity: float

    @property
    def answer(self) -> Any:
        """The task output as a JSON value (the artifact's ``answer``)."""
        return json.loads(self.label)


@dataclass(frozen=True, eq=False)
class TreeArrays:
    """A decision tree over ``x`` (node 0 is the root; ``N`` nodes).

    Attributes:
        feature: int32 ``[N]``, bucket tested at an inner node, ``-1`` at a leaf.
        threshold: float64 ``[N]``; go left iff ``float64(float32(x[feature])) <= threshold``
            (scikit-learn's float32 comparison).
        left, right: int32 ``[N]`` child node ids (``-1`` at a leaf).
        leaf_class: int32 ``[N]`` class index at a leaf (0 elsewhere).
        leaf_margin: float64 ``[N]`` top-1 minus top-2 class fraction at a leaf (0 elsewhere).
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf_class: np.ndarray
    leaf_margin: np.ndarray

    def leaf_of(self, x_at) -> int:
        """Walk from the root; ``x_at(bucket) -> float`` gives ``x``. Returns the leaf id."""
        node = 0
        while self.feature[node] >= 0:
            v = float(np.float32(x_at(int(self.feature[node]))))
            node = int(self.left[node] if v <= self.threshold[node] else self.right[node])
        return node


@dataclass(frozen=True, eq=False)
class CompiledModel:
    """A specialist as pure data, plus the Python reference of what its artifact computes.

    Attributes:
        kind: ``"linear"`` or ``"tree"``.
        classes: canonical JSON text of each class, sorted; ``C >= 2``.
        features: the :class:`FeatureSpec` (``B = features.buckets``).
        W: float32 ``[R, B]`` linear weights; ``R = 1`` for a binary model (``score > 0`` means
            ``classes[1]``), ``R = C`` otherwise; ``R = 0`` for a tree.
        b: float32 ``[R]`` intercepts.
        P: float32 ``[K, B]`` unit-norm novelty prototypes, ``K >= 1``.
        tree: the tree for ``kind == "tree"``, else None.
        estimator: name of the scikit-learn estimator it came from (informational).
        weighting: ``"tf"`` (weights learned on the featurizer's vector) or ``"tf-idf"`` (learned on
            the idf-weighted vector, the idf baked into ``W``: :func:`idf_weights`); informational,
            the artifact's arithmetic is the same.
        max_bytes: the longest framed text among the training witnesses (bytes:
            ``len(text.encode()) + 2``, :func:`auto.models.specialist.features.frame`), or None. A
            longer input's nonconformity is :attr:`top_score` whatever its direction: the featurizer's vector is
            L2-normalized, so a ticket buried in filler or one sentence repeated a thousand times
            points where a witness does. Under exchangeability a fresh input is longer than all
            ``n`` training texts with probability at most ``1 / (n + 1)``.
        support: bool ``[C, B]``, ``support[c, j]`` true iff some training witness of class ``c``
            touches bucket ``j``, or None. With it the nonconformity adds the *unexplained mass*
            of the answer's class ``c``: ``u = sum of x_i**2 over the touched buckets i with
            support[c, i] false`` (in first-touch order, f64), the share of the input's squared
            norm (``||x|| = 1``) in n-grams no training input of its answer contains. A word that
            flips the request ("not", "no longer", "nobody") while the topic's words keep the
            direction near the class's prototypes is such mass. ``u`` is in ``[0, 1]``; the
            score ``(1 - max_k P_k . x) + u`` is in ``[0, 3]`` and any fixed score function keeps
            the conformal test valid (Vovk, Gammerman, Shafer 2005, ch. 2).

    Reference arithmetic (the artifact does exactly this): ``x`` from
    :func:`auto.models.specialist.features.featurize` (buckets in first-touch order); each score starts at
    ``float64(b_r)`` (0.0 for prototypes) and adds ``float64(w) * x_i`` bucket by bucket in
    first-touch order, in f64.

    Raises:
        ValueError: inconsistent shapes, dtypes or classes.
    """

    kind: str
    classes: tuple[str, ...]
    features: FeatureSpec
    W: np.ndarray
    b: np.ndarray
    P: np.ndarray
    tree: TreeArrays | None = None
    estimator: str = ""
    weighting: str = "tf"
    max_bytes: int | None = None
    support: np.ndarray | None = None

    def __post_init__(self) -> None:
        B = self.features.buckets
        C = len(self.classes)
        if self.support is not None and (self.support.dtype != np.bool_ or self.support.shape != (C, B)):
            raise ValueError(f"support must be bool [{C}, {B}], got {self.support.dtype} {self.support.shape}")
        if C < 2 or len(set(self.classes)) != C or list(self.classes) != sorted(self.classes):
            raise ValueError("classes must be >= 2 distinct canonical JSON texts, sorted")
        for c in self.classes:
            if canonical_json(json.loads(c)) != c:
                raise ValueError(f"class {c!r} is not canonical JSON")
        if self.W.dtype != np.float32 or self.b.dtype != np.float32 or self.P.dtype != np.float32:
            raise ValueError("W, b and P must be float32")
        if self.P.ndim != 2 or self.P.shape[1] != B or self.P.shape[0] < 1:
            raise ValueError(f"P must be [K>=1, {B}], got {self.P.shape}")
        if self.kind == "linear":
            R = 1 if C == 2 else C
            if self.W.shape != (R, B) or self.b.shape != (R,):
                raise ValueError(f"linear model needs W [{R}, {B}] and b [{R}]")
            if self.tree is not None:
                raise ValueError("a linear model has no tree")
        elif self.kind == "tree":
            if self.tree is None or self.W.shape != (0, B) or self.b.shape != (0,):
                raise ValueError("a tree model needs tree arrays and empty W [0, B], b [0]")
            t = self.tree
            n = t.feature.shape[0]
            if n < 1 or any(a.shape != (n,) for a in (t.threshold, t.left, t.right,
                                                         t.leaf_class, t.leaf_margin)):
                raise ValueError("tree arrays must all have shape [N >= 1]")
            inner = t.feature >= 0
            if (t.feature >= B).any() or (t.leaf_class[~inner] >= C).any() or (
                    t.leaf_class < 0).any():
                raise ValueError("tree feature or leaf class out of range")
            ii = np.flatnonzero(inner)
            for kids in (t.left[ii], t.right[ii]):
                if (kids <= ii).any() or (kids >= n).any():  # later nodes only: no cycles
                    raise ValueError("tree children must be later nodes inside the array")
        else:
            raise ValueError(f"unknown model kind {self.kind!r}")

    # --- shapes -------------------------------------------------------------------------------
    @property
    def n_rows(self) -> int:
        """``R``: number of linear score rows (0 for a tree)."""
        return int(self.W.shape[0])

    @property
    def n_prototypes(self) -> int:
        """``K``: number of novelty prototypes."""
        return int(self.P.shape[0])

    @property
    def answers(self) -> list[Any]:
        """The classes as JSON values (task outputs)."""
        return [json.loads(c) for c in self.classes]

    @property
    def top_score(self) -> float:
        """The largest nonconformity the model gives (prototypes are non-negative and unit-norm, so
        ``1 - max_k P_k . x`` is in ``[0, 1]``): 1.0, or 2.0 with :attr:`support` (``u <= 1``). An
        input longer than ``max_bytes`` gets it."""
        return 2.0 if self.support is not None else 1.0

    def manifest_model(self) -> dict[str, Any]:
        """The manifest's ``model`` object: kind, classes (JSON values), features, prototypes."""
        out = {"kind": self.kind, "classes": self.answers, "features": self.features.to_dict(),
               "prototypes": self.n_prototypes}
        if self.weighting != "tf":
            out["weighting"] = self.weighting
        if self.max_bytes is not None:
            out["max_input_bytes"] = self.max_bytes
        if self.support is not None:
            out["nonconformity"] = "prototype-distance+unexplained-mass"
        return out

    def digest(self) -> str:
        """``sha256:`` over the model's content (arrays by their bytes); equal models, equal digest."""
        h = hashlib.sha256()
        h.update(canonical_json({"m": self.manifest_model(), "e": self.estimator}).encode())
        arrs = [self.W, self.b, self.P] + ([self.support] if self.support is not None else [])
        if self.tree is not None:
            t = self.tree
            arrs += [t.feature, t.threshold, t.left, t.right, t.leaf_class, t.leaf_margin]
        for a in arrs:
            h.update(str(a.shape).encode() + str(a.dtype).encode())
            h.update(np.ascontiguousarray(a).tobytes())
        return "sha256:" + h.hexdigest()

    # --- reference ------------------------------------------------------------------------------
    def scores(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """Raw f64 sums for one text: ``(linear scores [R], prototype dots [K])``.

        Bit-exact with the artifact: sequential f64 sums in first-touch order, f32 weights.
        """
        idx, x = featurize(text, self.features)
        return self._scores_of(idx, x)

    def _scores_of(self, idx: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (_accumulate(self.W, self.b.astype(np.float64), idx, x),
                _accumulate(self.P, np.zeros(self.n_prototypes), idx, x))

    def predict_text(self, text: str) -> Prediction:
        """Reference prediction for the field's text (see :class:`Prediction`)."""
        idx, x = featurize(text, self.features)
        return self._predict_vec(idx, x, len(text.encode("utf-8")) + 2)

    def predict(self, input_dict: dict[str, Any]) -> Prediction:
        """Reference prediction for one task input object.

        Raises:
            InputSchemaError: ``input_dict`` is not a dict, lacks the field, or it is not a string.
        """
        f = self.features.field
        if not isinstance(input_dict, dict) or f not in input_dict:
            raise InputSchemaError(f"input has no field {f!r}")
        if not isinstance(input_dict[f], str):
            raise InputSchemaError(f"input field {f!r} is not a string")
        return self.predict_text(input_dict[f])

    def _predict_vec(self, idx: np.ndarray, x: np.ndarray, n_bytes: int | None = None) -> Prediction:
        s, dots = self._scores_of(idx, x)
        nonconf = 1.0 - _first_max(dots)[1]
        if self.kind == "tree":
            pos = {int(k): float(v) for k, v in zip(idx, x)}
            leaf = self.tree.leaf_of(lambda j: pos.get(j, 0.0))
            arg, margin = int(self.tree.leaf_class[leaf]), float(self.tree.leaf_margin[leaf])
        elif self.n_rows == 1:
            v = float(s[0])
            arg, margin = (1 if v > 0 else 0), abs(v)
        else:
            top1, top2, arg = _top2(s)
            margin = top1 - top2
        if self.support is not None:
            nonconf = nonconf + unexplained_mass(self.support[arg], idx, x)
        if self.max_bytes is not None and n_bytes is not None and n_bytes > self.max_bytes:
            nonconf = self.top_score
        return Prediction(self.classes[arg], margin, nonconf)


def unexplained_mass(support_row: np.ndarray, idx: np.ndarray, x: np.ndarray) -> float:
    """``sum of x_i**2`` over the buckets ``idx_i`` where ``support_row`` is false, summed in the
    order given (first-touch order: the artifact's order, so the f64 result is the same bit for
    bit). ``support_row``: bool ``[B]``; ``idx``/``x``: the :func:`featurize` pair. In ``[0, 1]``
    for a unit-norm ``x``; 0.0 for the empty vector."""
    if idx.size == 0:
        return 0.0
    miss = x[~support_row[idx]]
    if miss.size == 0:
        return 0.0
    return float(np.cumsum(np.concatenate([[0.0], miss * miss]))[-1])  # strictly sequential


def class_support(X: sp.csr_matrix, labels: Sequence[str], classes: Sequence[str]) -> np.ndarray:
    """bool ``[C, B]``: ``out[c, j]`` true iff a row of ``X`` labelled ``classes[c]`` has bucket ``j``
    nonzero (:attr:`CompiledModel.support`)."""
    out = np.zeros((len(classes), X.shape[1]), dtype=bool)
    pos = {c: i for i, c in enumerate(classes)}
    for r, lab in enumerate(labels):
        out[pos[lab], X.indices[X.indptr[r]:X.indptr[r + 1]]] = True
    return out


def _accumulate(rows: np.ndarray, init: np.ndarray, idx: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Sequential f64 sums ``init + sum_i f64(rows[:, idx_i]) * x_i`` (in order), shape [H]."""
    if rows.shape[0] == 0 or idx.size == 0:
        return init.astype(np.float64).copy()
    prods = rows[:, idx].astype(np.float64) * x[None, :]
    acc = np.concatenate([init.astype(np.float64)[:, None], prods], axis=1)
    return np.cumsum(acc, axis=1)[:, -1]  # accumulate is strictly sequential


def _first_max(v: np.ndarray) -> tuple[int, float]:
    arg, best = 0, float(v[0])
    for i in range(1, v.shape[0]):
        if float(v[i]) > best:
            arg, best = i, float(v[i])
    return arg, best


def _top2(v: np.ndarray) -> tuple[float, float, int]:
    """Top-1 value, top-2 value and argmax (first max), as the artifact computes them."""
    top1, top2, arg = float(v[0]), float("-inf"), 0
    for i in range(1, v.shape[0]):
        s = float(v[i])
        if s > top1:
            top2, top1, arg = top1, s, i
        elif s > top2:
            top2 = s
    return top1, top2, arg


# ------------------------------------------------------------------------------------------------
# training


@dataclass(frozen=True)
class Candidate:
    """One (FeatureSpec, estimator) candidate and its agreement rates (fractions in [0, 1]);
    ``heldout_selective_coverage``: :func:`selective_coverage` on the held-out split (None without one)."""

    model: str
    features: FeatureSpec
    train_agreement: float
    heldout_agreement: float | None
    heldout_selective_coverage: float | None = None


SELECT_EPSILON = 0.05
"""The selective-risk level at which candidates are compared (:func:`selective_coverage`): the
contract's default epsilon."""


def selective_coverage(margins: Sequence[float], correct: Sequence[bool], epsilon: float = SELECT_EPSILON) -> float:
    """The largest share of inputs a margin threshold can admit with empirical selective risk <= ``epsilon``.

    Inputs are ranked by margin, highest first (ties broken by position); the answer is
    ``max{k / n : errors among the top k <= epsilon * k}`` (0.0 when no prefix qualifies or ``n == 0``).
    A ranking criterion for model selection (what a risk certificate on these margins could let
    through), not a certificate itself. Measured on HWU64 (800 distinct utterances, 59 intents):
    agreement picked LinearSVC, whose margins certified 8% coverage at epsilon = 0.05 against 35%
    for the logistic regression it beat by one point of agreement (``bench.intents.specialist_study``).
    """
    n = len(margins)
    if n == 0:
        return 0.0
    order = sorted(range(n), key=lambda i: (-float(margins[i]), i))
    errors, best = 0, 0
    for k, i in enumerate(order, start=1):
        errors += 0 if correct[i] else 1
        if errors <= epsilon * k:
            best = k
    return best / n


@dataclass(frozen=True, eq=False)
class DistillResult:
    """What :func:`distill` returns.

    Attributes:
        model: the selected :class:`CompiledModel` (trained on the training split only).
        selected: the winning :class:`Candidate`.
        candidates: every candidate tried, in trial order.
        sklearn_agreement: fraction of all witnesses (train + held-out) on which scikit-learn's own
            ``predict`` equals the reference :meth:`CompiledModel.predict` label.
        train_idx, heldout_idx: witness indices of the split (into train + heldout when the
            caller passed ``heldout``, held-out ones numbered after the training ones).
        estimator: the fitted scikit-learn estimator of the winner (in memory only; used to
            measure the Python model's own predict latency beside the artifact's).
    """

    model: CompiledModel
    selected: Candidate
    candidates: list[Candidate]
    sklearn_agreement: float
    train_idx: tuple[int, ...] = dc_field(default=())
    heldout_idx: tuple[int, ...] = dc_field(default=())
    estimator: Any = None


def _estimator(name: str, seed: int):
    from sklearn.linear_model import LogisticRegression, RidgeClassifier, SGDClassifier
    from sklearn.svm import LinearSVC
    from sklearn.tree import DecisionTreeClassifier
    if name == "logreg":
        # saga: ~60x faster than lbfgs on 8192 sparse features with the same held-out agreement (measured)
        return LogisticRegression(C=10.0, solver="saga", max_iter=300, tol=1e-3, random_state=seed)
    if name == "linsvc":
        return LinearSVC(C=1.0, max_iter=5000, random_state=seed)
    if name == "ridge":
        return RidgeClassifier(alpha=1.0)
    if name == "sgd":
        return SGDClassifier(loss="hinge", alpha=1e-4, max_iter=50, tol=None, random_state=seed)
    if name == "tree":
        return DecisionTreeClassifier(random_state=seed)
    raise CompileError(f"unknown candidate model {name!r}; choose from {', '.join(MODELS)}")


def default_specs(field: str, buckets: int = DEFAULT_BUCKETS) -> list[FeatureSpec]:
    """The default :class:`FeatureSpec` candidates for ``field``: every :data:`DEFAULT_GRID` range
    (bytes only), then every :data:`WORD_CANDIDATES` entry."""
    return ([FeatureSpec(field, a, b, buckets) for a, b in DEFAULT_GRID]
            + [FeatureSpec(field, a, b, buckets, word_max=w, word_weight=k) for a, b, w, k in WORD_CANDIDATES])


def split_witnesses(labels: Sequence[str], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Deterministic stratified split: ``(train_idx, heldout_idx)``, both ascending.

    Per class (classes in sorted order) a seeded permutation sends ``floor(fraction * n_c)`` of its
    ``n_c`` witnesses to held-out; a class with one witness stays in training.
    """
    rng = np.random.default_rng(seed)
    lab = np.asarray(labels, dtype=object)
    held: list[int] = []
    for c in sorted(set(labels)):
        ids = np.flatnonzero(lab == c)
        k = int(fraction * ids.size) if ids.size > 1 else 0
        held += [int(i) for i in rng.permutation(ids)[:k]]
    hs = set(held)
    return [i for i in range(len(labels)) if i not in hs], sorted(held)


def _infer_field(inputs: Sequence[dict]) -> str:
    keys = None
    for d in inputs:
        ks = {k for k, v in d.items() if isinstance(v, str)}
        keys = ks if keys is None else keys & ks
    if not keys or len(keys) != 1:
        raise CompileError(
            "cannot infer which input field to featurize: need exactly one field that is a "
            f"string in every witness, found {sorted(keys or [])}; pass FeatureSpecs")
    return next(iter(keys))


def _texts(inputs: Sequence[dict], fieldname: str) -> list[str]:
    out = []
    for i, d in enumerate(inputs):
        v = d.get(fieldname) if isinstance(d, dict) else None
        if not isinstance(v, str):
            raise CompileError(f"witness {i}: input field {fieldname!r} is missing or not a string")
        out.append(v)
    return out


def _to_model(est, name: str, spec: FeatureSpec, classes: tuple[str, ...],
              P: np.ndarray, idf: np.ndarray | None = None) -> CompiledModel:
    B = spec.buckets
    if list(est.classes_) != list(classes):
        raise CompileError("estimator classes differ from the witness classes")
    if name == "tree":
        t = est.tree_
        leaf = t.children_left < 0
        val = t.value[:, 0, :].astype(np.float64)
        tot = val.sum(axis=1, keepdims=True)
        frac = val / np.where(tot > 0, tot, 1.0)
        srt = -np.sort(-frac, axis=1)
        tree = TreeArrays(
            feature=np.where(leaf, -1, t.feature).astype(np.int32),
            threshold=np.where(leaf, 0.0, t.threshold).astype(np.float64),
            left=t.children_left.astype(np.int32), right=t.children_right.astype(np.int32),
            leaf_class=np.where(leaf, np.argmax(val, axis=1), 0).astype(np.int32),
            leaf_margin=np.where(leaf, srt[:, 0] - srt[:, 1], 0.0).astype(np.float64))
        return CompiledModel("tree", classes, spec, np.zeros((0, B), np.float32),
                             np.zeros(0, np.float32), P, tree, type(est).__name__)
    coef = np.asarray(est.coef_, dtype=np.float64).reshape(-1, B)
    if idf is not None:
        coef = coef * idf[None, :]
    W = coef.astype(np.float32)
    b = np.asarray(est.intercept_, dtype=np.float32).reshape(-1)
    return CompiledModel("linear", classes, spec, np.ascontiguousarray(W), b, P, None,
                         type(est).__name__, "tf" if idf is None else "tf-idf")


KMEANS_INIT_BUDGET = 30
"""k-means restarts per model, shared over the classes: 3 per class up to 10 classes, then fewer (at
least 1). Measured on HWU64 (59 classes, 400 witnesses): 3 restarts per class made the prototypes 62% of
a distillation's time."""


def _distinct_rows(Xc: sp.csr_matrix) -> np.ndarray:
    """The distinct rows of ``Xc`` (dense float64), in first-occurrence order."""
    seen: dict[tuple, int] = {}
    rows = []
    for i in range(Xc.shape[0]):
        key = (tuple(Xc.indices[Xc.indptr[i]:Xc.indptr[i + 1]]), tuple(Xc.data[Xc.indptr[i]:Xc.indptr[i + 1]]))
        if key not in seen:
            seen[key] = i
            rows.append(i)
    return np.asarray(Xc[rows].todense(), dtype=np.float64)


def build_prototypes(X: sp.csr_matrix, labels: Sequence[str], weights: np.ndarray,
                     classes: Sequence[str], per_class: int = DEFAULT_PROTOTYPES,
                     seed: int = 0) -> np.ndarray:
    """Unit-norm novelty prototypes: per-class KMeans centroids, float32 ``[K, B]``.

    For each class in order, ``k = min(per_class, distinct nonzero rows of that class)`` centroids
    from ``KMeans(k, n_init, random_state=seed)`` (single-threaded, so deterministic;
    ``n_init`` from :data:`KMEANS_INIT_BUDGET`) on its rows, each scaled to unit L2 norm; when
    ``k`` equals the distinct rows, the rows themselves (k-means' exact optimum). Raises CompileError when no class has a nonzero row.
    """
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits
    lab = np.asarray(labels, dtype=object)
    n_init = max(1, min(3, KMEANS_INIT_BUDGET // max(1, len(classes))))
    out = []
    for c in classes:
        rows = np.flatnonzero(lab == c)
        Xc = X[rows]
        nz = np.flatnonzero(Xc.getnnz(axis=1) > 0)
        if nz.size == 0:
            continue
        Xc, wc = Xc[nz], weights[rows][nz]
        distinct = len({(tuple(Xc.indices[Xc.indptr[i]:Xc.indptr[i + 1]]),
                         tuple(Xc.data[Xc.indptr[i]:Xc.indptr[i + 1]]))
                        for i in range(Xc.shape[0])})
        k = min(per_class, distinct)
        if k <= 1:
            cents = np.asarray(Xc.multiply(wc[:, None]).sum(axis=0)).reshape(1, -1)
        elif k == distinct:
            # as many clusters as distinct rows: k-means' optimum is the rows themselves (inertia 0)
            cents = _distinct_rows(Xc)
        else:
            with threadpool_limits(1), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                km = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(Xc, sample_weight=wc)
            cents = np.asarray(km.cluster_centers_, dtype=np.float64)
        norms = np.linalg.norm(cents, axis=1)
        out.append(cents[norms > 0] / norms[norms > 0, None])
    if not out:
        raise CompileError("no witness has a nonempty feature vector; cannot build prototypes")
    return np.ascontiguousarray(np.concatenate(out).astype(np.float32))


def distill(witnesses: Sequence[tuple[dict, Any, float]],
            specs: Sequence[FeatureSpec] | None = None, *,
            heldout: Sequence[tuple[dict, Any, float]] | None = None,
            heldout_fraction: float = 0.25, seed: int = 0,
            models: Sequence[str] = DEFAULT_MODELS,
            prototypes_per_class: int = DEFAULT_PROTOTYPES, idf: bool = DEFAULT_IDF,
            select_epsilon: float = SELECT_EPSILON) -> DistillResult:
    """Train candidates, select by held-out agreement, return the winner as a CompiledModel.

    Args:
        witnesses: ``(input_dict, label, weight)`` triples; ``label`` is any JSON value,
            ``weight > 0`` is a sample weight. When ``heldout`` is None they are split
            deterministically (:func:`split_witnesses`, ``heldout_fraction``, ``seed``);
            otherwise they are all training data.
        specs: FeatureSpec candidates; default: :func:`default_specs` of the one string field of
            the inputs.
        heldout: optional caller-provided held-out witnesses (same shape).
        models: candidate estimator names from ``MODELS``.
        prototypes_per_class: at most this many novelty prototypes per class.
        idf: train linear candidates on idf-weighted vectors, the idf computed on the training
            split and baked into the weights (:func:`idf_weights`); trees always use the plain vector.

    Returns:
        DistillResult; its model is trained on the training split only. Selection key: the
        held-out :func:`selective_coverage` at ``select_epsilon`` (how much a margin threshold
        could let through at that risk), then held-out agreement, then training agreement, then
        trial order (specs outer, models inner); without held-out data, training agreement.

    Raises:
        CompileError: no witnesses, a single class, a label that is not JSON, a missing or
            non-string input field, a non-positive weight, an unknown model name, or a bad
            ``prototypes_per_class`` / ``heldout_fraction``.
    """
    _check_options(prototypes_per_class, heldout_fraction)
    witnesses = list(witnesses)
    if heldout is not None:
        allw = witnesses + list(heldout)
        tr_idx, ho_idx = list(range(len(witnesses))), list(range(len(witnesses), len(allw)))
    else:
        allw = witnesses
        tr_idx = ho_idx = []
    if not witnesses:
        raise CompileError("no witnesses to learn from")
    inputs, labels, weights = _read_witnesses(allw)
    if heldout is None:
        tr_idx, ho_idx = split_witnesses(labels, heldout_fraction, seed)
    classes = tuple(sorted({labels[i] for i in tr_idx}))
    if len(classes) < 2:
        raise CompileError(
            f"all training witnesses have the same output {classes[0] if classes else None}; "
            "a classifier needs at least two distinct outputs (the task may be a constant)")
    for m in models:
        _estimator(m, seed)
    if specs is None:
        fld = _infer_field(inputs)
        specs = default_specs(fld)
    if not specs:
        raise CompileError("no FeatureSpec candidates")
    trial = _Trial(inputs, labels, np.asarray(weights), classes, tr_idx, ho_idx, seed, idf, select_epsilon)
    best, cands = trial.select(specs, models)
    return trial.result(best, cands, prototypes_per_class)


def _check_options(prototypes_per_class: int, heldout_fraction: float) -> None:
    """:func:`distill`'s option checks (raises :class:`CompileError`)."""
    if not (isinstance(prototypes_per_class, int) and prototypes_per_class >= 1):
        raise CompileError(f"prototypes_per_class must be an int >= 1, got {prototypes_per_class!r}")
    if not 0.0 <= heldout_fraction < 1.0:
        raise CompileError(f"heldout_fraction must be in [0, 1), got {heldout_fraction!r}")


def _read_witnesses(allw: Sequence[Any]) -> tuple[list[dict], list[str], list[float]]:
    """``(inputs, labels as canonical JSON, weights)`` of ``(input, label, weight)`` triples
    (raises :class:`CompileError` naming the first malformed one)."""
    inputs, labels, weights = [], [], []
    for i, w in enumerate(allw):
        try:
            inp, lab, wt = w
            labels.append(canonical_json(lab))
        except (TypeError, ValueError) as e:
            raise CompileError(f"witness {i} is not (input, JSON label, weight): {e}") from e
        if not isinstance(inp, dict):
            raise CompileError(f"witness {i}: input is not an object")
        if not (isinstance(wt, (int, float)) and np.isfinite(wt) and wt > 0):
            raise CompileError(f"witness {i}: weight must be a finite number > 0, got {wt!r}")
        inputs.append(inp)
        weights.append(float(wt))
    return inputs, labels, weights


@dataclass
class _Best:
    """The leading candidate of a :class:`_Trial`: its selection key, the candidate, the fitted
    estimator, the plain matrix, its predicted labels on every witness, and the matrix it was fit
    on with the idf weights baked into it (None without idf)."""

    key: tuple
    cand: Candidate
    est: Any
    X: sp.csr_matrix
    pred: list[str]
    Xfit: sp.csr_matrix
    w_idf: np.ndarray | None


@dataclass
class _Trial:
    """The witnesses of one :func:`distill` call (every witness: training ones at ``tr_idx``,
    held-out ones at ``ho_idx``), and how candidates are fit and ranked on them."""

    inputs: list[dict]
    labels: list[str]
    wts: np.ndarray
    classes: tuple[str, ...]
    tr_idx: list[int]
    ho_idx: list[int]
    seed: int
    idf: bool
    select_epsilon: float

    def select(self, specs: Sequence[FeatureSpec], models: Sequence[str]) -> tuple[_Best, list[Candidate]]:
        """Fit every (spec, model) pair (specs outer, models inner) and keep the best by
        :func:`distill`'s selection key; returns it with every candidate in trial order."""
        best: _Best | None = None
        cands: list[Candidate] = []
        for spec in specs:
            vecs = [featurize(t, spec) for t in _texts(self.inputs, spec.field)]
            X = matrix_of(vecs, spec.buckets)
            w_idf = idf_weights(X[np.asarray(self.tr_idx, int)]) if self.idf else None
            Xw = X @ sp.diags(w_idf) if w_idf is not None else X
            for name in models:
                b = self._fit(name, spec, vecs, X, Xw, w_idf)
                cands.append(b.cand)
                if best is None or b.key > best.key:
                    best = b
        if best is None:
            raise CompileError("no candidate models")
        return best, cands

    def _fit(self, name: str, spec: FeatureSpec, vecs: list, X: sp.csr_matrix, Xw: sp.csr_matrix,
             w_idf: np.ndarray | None) -> _Best:
        """One candidate fit on the training split (on ``Xw``, the idf-weighted ``X``, for a linear
        model) and scored on every witness."""
        y = np.asarray(self.labels, dtype=object)
        tr, ho = np.asarray(self.tr_idx, int), np.asarray(self.ho_idx, int)
        est = _estimator(name, self.seed)
        lin = name != "tree" and w_idf is not None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit((Xw if lin else X)[tr], y[tr], sample_weight=self.wts[tr])
        P0 = np.zeros((1, spec.buckets), np.float32)
        P0[0, 0] = 1.0
        cm = _to_model(est, name, spec, self.classes, P0, w_idf if lin else None)
        preds = [cm._predict_vec(*vecs[i]) for i in range(len(self.labels))]
        pred = [p.label for p in preds]
        agree = np.asarray([pred[i] == self.labels[i] for i in range(len(self.labels))])
        tr_rate = float(agree[tr].mean())
        ho_rate = float(agree[ho].mean()) if ho.size else None
        sel = (selective_coverage([preds[i].margin for i in ho], agree[ho], self.select_epsilon)
               if ho.size else None)
        key = ((sel, ho_rate, tr_rate) if ho_rate is not None else (0.0, tr_rate, tr_rate))
        fit, fit_idf = (Xw, w_idf) if lin else (X, None)
        return _Best(key, Candidate(name, spec, tr_rate, ho_rate, sel), est, X, pred, fit, fit_idf)

    def result(self, best: _Best, cands: list[Candidate], prototypes_per_class: int) -> DistillResult:
        """The winner as a :class:`CompiledModel` with its novelty prototypes (training split only)
        and its longest training text, and scikit-learn's own agreement with it."""
        tr = np.asarray(self.tr_idx, int)
        cand = best.cand
        P = build_prototypes(best.X[tr], [self.labels[i] for i in tr], self.wts[tr], self.classes,
                             prototypes_per_class, self.seed)
        model = _to_model(best.est, cand.model, cand.features, self.classes, P, best.w_idf)
        tr_texts = _texts([self.inputs[i] for i in self.tr_idx], cand.features.field)
        Xtr = best.X[tr]
        Xtr.eliminate_zeros()
        model = dataclasses.replace(model, max_bytes=max(len(t.encode("utf-8")) + 2 for t in tr_texts),
                                    support=class_support(Xtr, [self.labels[i] for i in tr], self.classes))
        sk = best.est.predict(best.Xfit)
        skl = float(np.mean([str(sk[i]) == best.pred[i] for i in range(len(self.labels))]))
        return DistillResult(model, cand, cands, skl, tuple(self.tr_idx), tuple(self.ho_idx), best.est)
