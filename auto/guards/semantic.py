"""The host-side semantic novelty guard: a conformal novelty test on a sentence embedding.

:class:`SemanticNovelty` scores an input's text by the cosine distance of a sentence embedding
to the nearest reference witness and turns the score into a split-conformal p-value against
held-out calibration witnesses, with the same formula and α as the in-artifact
``conformal-novelty`` guard (which scores character n-grams instead). The embedding runs on the
host, not inside the artifact, so :class:`HostGuard` wraps the test as a runtime guard that
``auto_runtime.TieredTask`` accepts: in place of the compiled guard's novelty part
(``semantic``) or beside the whole compiled guard (``combined``).

The embedding is WordLlama (``wordllama`` package, the ``semantic`` extra: ``pip install
'auto[semantic]'``): its weights and tokenizer ship inside the wheel and are loaded with
downloads disabled (:func:`load_embedder`).

Typical use::

    embed = load_embedder()
    sem = SemanticNovelty.from_witness_texts(texts, alpha=0.05, embed=embed)
    art.guard = make_host_guard("semantic", art, sem)     # then art.guard.prime(input) per call
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from auto_runtime.guard import Guard, GuardDecision, build_guard

from auto.errors import ArgumentError, AutoError

MODES = ("semantic", "combined")
"""Host guard modes (see :func:`make_host_guard`)."""

SEMANTIC_CALIBRATION_SHARE = 1 / 3
"""Share of distinct witnesses held out (by a digest of the input, so deterministic) as the
semantic novelty test's calibration set; the rest are the reference set distances are taken to."""


class SemanticUnavailable(AutoError):
    """The offline sentence embedding cannot be loaded (``reason`` says why)."""


def load_embedder() -> Callable[[Sequence[str]], np.ndarray]:
    """Load WordLlama (256 dimensions) from the files inside the installed wheel, downloads off.

    Returns:
        ``embed(texts) -> float64 array [len(texts), 256]`` of unit-norm rows (an all-zero row
        for a text with no known token, e.g. the empty string).

    Raises:
        SemanticUnavailable: ``wordllama`` is not installed, or its bundled weights/tokenizer are
            missing (it is never allowed to download).
    """
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError as e:
        raise SemanticUnavailable(f"wordllama is not installed (pip install 'auto[semantic]'): {e}") from None
    finally:
        # wordllama calls logging.basicConfig(level=INFO) on import; undo it (data stays on stdout,
        # progress on stderr, no library INFO lines from every HTTP call)
        for h in list(root.handlers):
            if h not in handlers:
                root.removeHandler(h)
        root.setLevel(level)
    # The wheel ships weights/ and tokenizers/; WordLlama.load finds the tokenizer only through
    # its cache layout (<cache>/tokenizers/...), so the package folder itself is the cache.
    pkg = Path(wordllama.__file__).parent
    try:
        model = WordLlama.load(cache_dir=pkg, disable_download=True)
    except Exception as e:  # noqa: BLE001 - any load failure: the embedding is unavailable
        raise SemanticUnavailable(f"wordllama could not load its bundled weights offline: {type(e).__name__}: {e}") from None

    def embed(texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, 256))
        e = np.asarray(model.embed(list(texts), norm=False), dtype=np.float64)
        norms = np.linalg.norm(e, axis=1, keepdims=True)
        return np.divide(e, norms, out=np.zeros_like(e), where=norms > 0)

    return embed


def _in_calibration(text: str, share: float = SEMANTIC_CALIBRATION_SHARE) -> bool:
    h = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")
    return h / 2.0**64 < share


class SemanticNovelty:
    """Split-conformal novelty test on a sentence embedding, computed on the host.

    Nonconformity of a text: ``1 - max_j cos(e(text), R_j)`` over the reference embeddings
    ``R`` (1.0 for a text whose embedding is zero). Calibration scores ``c_1..c_n`` are the
    nonconformities of the calibration texts (disjoint from the reference texts); the p-value is
    ``p = (1 + #{c_i >= s}) / (n + 1)`` and the test fails iff ``p <= alpha`` — the same formula
    and α as the in-artifact ``conformal-novelty`` guard (docs/architecture.md; Vovk et al. 2005):
    under exchangeability with the calibration texts at most α of fresh inputs fail.

    Args:
        reference_texts: texts distances are measured to (≥ 1).
        calibration_texts: held-out texts for the calibration scores (≥ 1).
        alpha: significance level in (0, 1).
        embed: the embedding function of :func:`load_embedder`.

    Raises:
        ArgumentError: empty reference or calibration set, or ``alpha`` outside (0, 1).
    """

    def __init__(self, reference_texts: Sequence[str], calibration_texts: Sequence[str], alpha: float,
                 embed: Callable[[Sequence[str]], np.ndarray]) -> None:
        if not reference_texts or not calibration_texts:
            raise ArgumentError("semantic novelty needs at least one reference and one calibration text")
        if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
            raise ArgumentError(f"alpha must be in (0, 1), got {alpha!r}")
        self.alpha = float(alpha)
        self._embed = embed
        self._ref = embed(list(reference_texts))
        self.calibration = np.sort(self.scores(calibration_texts))
        self.n = int(self.calibration.size)

    @classmethod
    def from_witness_texts(cls, texts: Sequence[str], alpha: float, embed: Callable[[Sequence[str]], np.ndarray],
                           share: float = SEMANTIC_CALIBRATION_SHARE) -> "SemanticNovelty":
        """Split distinct ``texts`` by a digest of each text: ``share`` calibration, the rest reference.

        Raises:
            ArgumentError: fewer than two distinct texts, or one side of the split is empty.
        """
        distinct = sorted(set(texts))
        cal = [t for t in distinct if _in_calibration(t, share)]
        ref = [t for t in distinct if not _in_calibration(t, share)]
        if not cal or not ref:
            raise ArgumentError(f"{len(distinct)} distinct witnesses cannot be split into reference and calibration sets")
        return cls(ref, cal, alpha, embed)

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """Nonconformity per text (float64 array, values in [0, 2])."""
        e = self._embed(list(texts))
        if e.shape[0] == 0:
            return np.zeros(0)
        sims = e @ self._ref.T
        best = sims.max(axis=1)
        best[~np.any(e != 0, axis=1)] = 0.0  # no embedding: as far from everything as cos allows
        return 1.0 - best

    def p_values(self, texts: Sequence[str]) -> np.ndarray:
        """Conformal p-value per text (see the class docstring)."""
        s = self.scores(texts)
        k = self.n - np.searchsorted(self.calibration, s, side="left")
        return (1 + k) / (self.n + 1)

    def describe(self) -> dict[str, Any]:
        """``{"method", "embedding", "alpha", "n", "reference", "never_deopts"}``."""
        return {"method": "semantic-conformal-novelty", "embedding": "wordllama l2_supercat 256d (host)",
                "alpha": self.alpha, "n": self.n, "reference": int(self._ref.shape[0]),
                "never_deopts": 1.0 / (self.n + 1) > self.alpha}


def _decide(guard: Any, out: Any) -> tuple[bool, float | None]:
    """The runtime guard's decision on one artifact output."""
    if not isinstance(out, dict):
        return False, None
    return guard.decide_output(out)


def without_novelty(entry: Any) -> tuple[Any, str]:
    """The manifest guard entry minus its ``conformal-novelty`` part: ``(runtime guard or None, note)``.

    ``None`` means nothing is left (a plain novelty guard, or a stack of only novelty).
    """
    if not isinstance(entry, dict):
        return build_guard(entry), "unusable guard entry kept as is"
    method = entry.get("method")
    if method == "conformal-novelty":
        return None, "the compiled guard is novelty only: semantic replaces it"
    if method == "stack" and isinstance(entry.get("components"), list):
        rest = [c for c in entry["components"] if not (isinstance(c, dict) and c.get("method") == "conformal-novelty")]
        if not rest and not entry.get("fallback_reason"):
            return None, "stack of novelty only: semantic replaces it"
        names = ", ".join(str(c.get("method")) for c in rest if isinstance(c, dict))
        return build_guard({**entry, "components": rest}), f"kept from the stack: {names or 'fallback'}"
    return build_guard(entry), f"compiled guard '{method}' has no novelty component: kept and combined with semantic"


def make_host_guard(mode: str, artifact: Any, semantic: SemanticNovelty) -> "HostGuard":
    """The host guard of ``mode`` on ``artifact`` (a runtime ``Guard`` that ``TieredTask`` accepts).

    ``semantic``: the compiled guard's ``conformal-novelty`` part is replaced by ``semantic``
    (every other component — selective risk, program deopt, exact match — is kept);
    ``combined``: the compiled guard *and* ``semantic`` must both pass. The guard must be primed
    with each input (:meth:`HostGuard.prime`) before the call.

    Raises:
        ArgumentError: ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise ArgumentError(f"unknown host guard mode {mode!r} (available: {', '.join(MODES)})")
    if mode == "combined":
        return HostGuard(semantic, artifact.guard, "combined")
    entry = artifact.typed_manifest.guard
    # a guard entry that is not an object has no fields: the artifact's own guard is what it builds
    rest = without_novelty(entry.to_dict())[0] if entry.fields else artifact.guard
    return HostGuard(semantic, rest, "semantic")


class HostGuard(Guard):
    """A runtime guard combining the host-side semantic novelty test with (part of) the compiled guard.

    The semantic test needs the input text, which the artifact's output does not carry: the host
    calls :meth:`prime` with each input before the call (one call at a time; not for
    concurrent use). Decision: pass iff the semantic p-value ``> alpha`` and ``rest`` (the
    compiled guard, or its non-novelty components; ``None`` = nothing) passes. The decision's
    p-value is the semantic p-value for ``semantic`` and the compiled guard's for ``combined``
    (so the shift alarm keeps listening to the compiled novelty score there).

    Args:
        semantic: the calibrated :class:`SemanticNovelty` test.
        rest: a runtime guard that must pass as well (``auto_runtime.guard``), or ``None``.
        mode: ``"semantic"`` or ``"combined"`` (which p-value the decision reports, see above).
        field: the input field that holds the text (default ``"ticket"``).
    """

    method = "host-semantic"

    def __init__(self, semantic: SemanticNovelty, rest: Any, mode: str, field: str = "ticket") -> None:
        self.semantic = semantic
        self.rest = rest
        self.mode = mode
        self.field = field
        self._p: float | None = None

    def prime(self, input_obj: Any) -> None:
        """Compute the semantic p-value of ``input_obj[field]`` for the next decision (None: no text)."""
        text = input_obj.get(self.field) if isinstance(input_obj, dict) else None
        self._p = float(self.semantic.p_values([text])[0]) if isinstance(text, str) else None

    def _sem_pass(self) -> bool:
        return self._p is not None and self._p > self.semantic.alpha

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        passed_rest, p_rest = (True, None) if self.rest is None else _decide(self.rest, out)
        if not isinstance(out, dict):
            passed_rest = False
        p = self._p if self.mode == "semantic" else p_rest
        return (self._sem_pass() and passed_rest), p

    def reason_output(self, out: Any, p: float | None) -> str:
        if not self._sem_pass():
            return ("semantic novelty: no text" if self._p is None
                    else f"semantic novelty p={self._p:.4g}<=alpha={self.semantic.alpha:.4g}")
        if self.rest is None:
            return "guard-pass"
        return self.rest.reason_output(out, None if self.mode == "semantic" else p)

    def evaluate_output(self, out: Any) -> GuardDecision:
        passed, p = self.decide_output(out)
        return GuardDecision(passed, p, "guard-pass" if passed else self.reason_output(out, p))

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError("HostGuard is primed one input at a time; use single calls")

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "mode": self.mode, "usable": True, "semantic": self.semantic.describe(),
                "rest": None if self.rest is None else self.rest.describe()}
