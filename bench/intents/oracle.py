"""The INTENTS family of the simulated reference model: an LLM's error structure on real utterances.

**Confusability.** Every utterance of the data is scored against every listed intent by the
cosine of its TF-IDF vector (word 1–2-grams, sublinear tf; scikit-learn's ``TfidfVectorizer``)
with the intent's centroid (the normalized mean of that intent's vectors). An in-scope
utterance's *margin* is its own intent's cosine minus the best other listed intent's; its
*confusable label* is that other intent. An out-of-scope utterance's margin is minus its best
listed intent's cosine, its confusable label that intent.

**Belief (consistent per distinct input).** The :data:`WRONG_SHARE` of utterances with the
smallest margins (the most ambiguous ones) are believed to be their confusable label; every
other utterance is believed to be its annotated label (:attr:`bench.intents.corpus.Utterance.label`).
A text that is not in the data (a near-duplicate) takes the belief of its nearest utterance when
their cosine is at least :data:`NEAREST_MIN_COSINE`, else the best centroid's intent (or
:data:`~bench.intents.corpus.OUT_OF_SCOPE` when no centroid reaches :data:`NEAREST_MIN_COSINE`).

**Per-call noise.** At temperature ``T > 0`` a call answers the runner-up label (the best listed
label other than the belief) with probability :data:`NOISE` (independently per call, from the
simulator's per-request ``rng``); at ``T = 0`` it always answers the belief.

This is a model of an LLM's behaviour chosen for testing Auto, not a measurement of any model.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Any

import numpy as np

from bench.chat import last_user_text
from bench.intents import corpus

MARKER = "[auto-bench:intents]"
WRONG_SHARE = 0.06
"""Share of the data's utterances (the most ambiguous) the reference is consistently wrong on."""
NOISE = 0.02
"""Per-call probability (T > 0) of answering the runner-up label."""
NEAREST_MIN_COSINE = 0.5


class _Model:
    def __init__(self) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        data = corpus.load()
        self.labels = corpus.labels()[:-1]  # listed intents (without out_of_scope)
        self.index = {u.utterance: i for i, u in enumerate(data)}
        self.vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, lowercase=True)
        X = self.vec.fit_transform([u.utterance for u in data])
        self.X = X
        lab = np.asarray([u.intent for u in data], dtype=object)
        C = np.vstack([np.asarray(X[lab == k].mean(axis=0)).ravel() for k in self.labels])
        self.C = C / np.linalg.norm(C, axis=1, keepdims=True)
        S = np.asarray(X @ self.C.T)
        pos = {k: j for j, k in enumerate(self.labels)}
        n = len(data)
        margin = np.empty(n)
        confusable = []
        for i, u in enumerate(data):
            s = S[i].copy()
            if u.role == "out-of-scope":
                j = int(np.argmax(s))
                margin[i] = -s[j]
            else:
                own = pos[u.intent]
                mine = s[own]
                s[own] = -np.inf
                j = int(np.argmax(s))
                margin[i] = mine - s[j]
            confusable.append(self.labels[j])
        k = int(round(WRONG_SHARE * n))
        wrong = set(np.argsort(margin, kind="stable")[:k].tolist())
        self.belief = [confusable[i] if i in wrong else u.label for i, u in enumerate(data)]
        self.wrong = wrong
        self.S = S

    def _scores(self, text: str) -> np.ndarray:
        return np.asarray(self.vec.transform([text]) @ self.C.T).ravel()

    def belief_of(self, text: str) -> tuple[str, str]:
        """``(belief, runner-up)`` for any text."""
        i = self.index.get(text)
        if i is None:
            x = self.vec.transform([text])
            sims = np.asarray((self.X @ x.T).todense()).ravel()
            j = int(np.argmax(sims)) if sims.size else -1
            s = self._scores(text)
            if j >= 0 and sims[j] >= NEAREST_MIN_COSINE:
                belief = self.belief[j]
            else:
                b = int(np.argmax(s))
                belief = self.labels[b] if s[b] >= NEAREST_MIN_COSINE else corpus.OUT_OF_SCOPE
        else:
            belief, s = self.belief[i], self.S[i]
        order = np.argsort(-s, kind="stable")
        runner = next(self.labels[j] for j in order if self.labels[j] != belief)
        return belief, runner


@lru_cache(maxsize=1)
def _model() -> _Model:
    return _Model()


def intents_oracle(text: str) -> str:
    """The reference's consistent belief for ``text`` (its T = 0 answer)."""
    return _model().belief_of(text)[0]


def is_believed_wrong(text: str) -> bool:
    """Whether the reference's belief for a data utterance differs from its annotation."""
    m = _model()
    i = m.index.get(text)
    return i is not None and i in m.wrong


def respond(messages: list[dict], temperature: float, rng: random.Random, request: dict | None = None) -> Any:
    """Answer an intents request: the label text (see the module docstring)."""
    belief, runner = _model().belief_of(last_user_text(messages).strip())
    u = rng.random()
    return runner if temperature > 0 and u < NOISE else belief
