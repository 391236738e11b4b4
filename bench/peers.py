"""Peers of the ratchet on the same stream: an exact dict and a GPTCache-style similarity cache.

Both are replayed from a stream's per-item rows (:class:`PeerItem`, built from
:class:`bench.stream.StreamRow` by :func:`items_from_rows`), so they see the same items in the
same order with the same reference as the ratchet:

* a **miss** pays one reference call, and that call *is* the control leg's call on the item
  (its answer and its µ$), so a peer spends exactly what the reference charged the control leg;
  the answer is then stored;
* a **hit** serves the stored answer without a paid call.

Served answers are judged as the ratchet's tier-1 answers are (:func:`bench.report.stream_figures`):
on the hit items, the share whose served answer differs from the control leg's answer, minus the
share whose second reference answer differs from it (the reference's disagreement with itself),
with its 95% upper bound (:func:`auto.guards.parity.excess_disagreement`).

* ``exact-dict``: a hit when the same input (canonical JSON) was seen before.
* ``similarity-cache@τ``: the similarity-threshold cache of GPTCache (``gptcache`` package:
  embed the query, search the nearest cached query, serve its answer when the similarity passes
  the threshold; a miss adds the query and its answer). This is a re-implementation of that
  policy, not the package (whose default embedding downloads an ONNX model at run time): the
  similarity is the cosine of WordLlama sentence embeddings (``wordllama``, weights inside its
  wheel, :func:`auto.guards.semantic.load_embedder`), top-1 neighbour, at each threshold of
  :data:`THRESHOLDS`. Without ``wordllama`` installed the similarity peers are reported as
  unavailable, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from auto.canonical import canonical_json
from auto.guards.parity import excess_disagreement

THRESHOLDS = (0.7, 0.8, 0.9, 0.95)
"""Cosine thresholds of the similarity cache (GPTCache's ``similarity_threshold``; its default is 0.8)."""


@dataclass(frozen=True)
class PeerItem:
    """One stream item as the peers see it.

    Attributes:
        key: the input's identity (canonical JSON of the task input).
        text: the text the similarity cache embeds.
        answer: the control leg's reference answer on the item (what a miss pays for).
        cost_usd_micros: that call's cost (µ$).
        second: a second, independent reference answer on the item (the self-disagreement base).
    """

    key: str
    text: str
    answer: Any
    cost_usd_micros: float
    second: Any


def items_from_rows(rows: Sequence[Any], text_of: Callable[[Any], str]) -> list[PeerItem]:
    """:class:`PeerItem` per stream row (``row.input``, ``reference_answer``,
    ``control_cost_usd_micros``, ``reference_answer_2``); ``text_of(input) -> str``."""
    return [PeerItem(canonical_json(r.input), text_of(r.input), r.reference_answer, float(r.control_cost_usd_micros),
                     r.reference_answer_2) for r in rows]


def items_from_csv(path: Any, text_of: Callable[[Any], str]) -> list[PeerItem]:
    """:class:`PeerItem` per row of a stream's ``ratchet.csv`` (:func:`bench.report.write_ratchet_csv`:
    its ``input``, ``reference_answer`` and ``reference_answer_2`` columns are canonical JSON,
    ``control_cost_usd_micros`` is µ$), so the peers can be replayed on a finished run's items.

    Raises:
        ValueError: a row has no ``input`` (the CSV was written without inputs).
    """
    import csv
    import json

    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if not row.get("input"):
                raise ValueError(f"{path}: row {row.get('position')} has no input column value; the peers need inputs")
            inp = json.loads(row["input"])
            out.append(PeerItem(canonical_json(inp), text_of(inp), json.loads(row["reference_answer"]),
                                float(row["control_cost_usd_micros"]), json.loads(row["reference_answer_2"])))
    return out


def _figures(name: str, items: Sequence[PeerItem], hit: Sequence[bool], served: Sequence[Any]) -> dict[str, Any]:
    control = sum(it.cost_usd_micros for it in items)
    spend = sum(it.cost_usd_micros for it, h in zip(items, hit) if not h)
    idx = [i for i, h in enumerate(hit) if h]
    ex = excess_disagreement([served[i] for i in idx], [items[i].answer for i in idx], [items[i].second for i in idx])
    return {"peer": name, "items": len(items), "served_without_paid_call": len(idx),
            "served_share": len(idx) / len(items) if items else None,
            "cost_usd_micros": round(spend, 3), "control_cost_usd_micros": round(control, 3),
            "cost_ratio": control / spend if spend > 0 else None,
            "excess_silent_wrong": ex["excess"], "excess_silent_wrong_ci95_high": ex["excess_ci95_high"],
            "served_disagreement_with_control": ex["tier1_disagreement"]}


def exact_dict(items: Sequence[PeerItem]) -> dict[str, Any]:
    """The exact dict's figures on ``items`` (see the module docstring)."""
    table: dict[str, Any] = {}
    hit, served = [], []
    for it in items:
        if it.key in table:
            hit.append(True)
            served.append(table[it.key])
        else:
            table[it.key] = it.answer
            hit.append(False)
            served.append(it.answer)
    return _figures("exact-dict", items, hit, served)


def similarity_cache(items: Sequence[PeerItem], embed: Callable[[Sequence[str]], np.ndarray],
                     thresholds: Sequence[float] = THRESHOLDS) -> list[dict[str, Any]]:
    """The similarity cache's figures at each threshold (one dict each, ``threshold`` added).

    ``embed(texts) -> [n, d]`` unit-norm rows; texts are embedded once. The nearest cached query
    (largest cosine; the first cached on a tie) is a hit when its cosine is ``>= threshold``.
    """
    E = np.asarray(embed([it.text for it in items]), dtype=np.float64)
    out = []
    for tau in thresholds:
        cached: list[int] = []
        hit, served = [], []
        for i, it in enumerate(items):
            if cached:
                sims = E[cached] @ E[i]
                j = int(np.argmax(sims))
                if sims[j] >= tau:
                    hit.append(True)
                    served.append(items[cached[j]].answer)
                    continue
            cached.append(i)
            hit.append(False)
            served.append(it.answer)
        out.append({**_figures(f"similarity-cache@{tau:g}", items, hit, served), "threshold": tau})
    return out


def peer_figures(items: Sequence[PeerItem], embed: Callable[[Sequence[str]], np.ndarray] | None = None,
                 thresholds: Sequence[float] = THRESHOLDS) -> dict[str, Any]:
    """``results.json``'s ``peers``: the memo-only ceiling, the exact dict and the similarity cache.

    ``memo_ceiling`` is items / distinct inputs, the cost ratio of a memo that answers every
    repeat and nothing else (at equal cost per call). ``embed`` defaults to WordLlama
    (:func:`auto.guards.semantic.load_embedder`); when it cannot be loaded, ``similarity_cache``
    is None and ``similarity_cache_unavailable`` says why.
    """
    distinct = len({it.key for it in items})
    res: dict[str, Any] = {"items": len(items), "distinct_inputs": distinct,
                           "memo_ceiling": len(items) / distinct if distinct else None,
                           "exact_dict": exact_dict(items)}
    if embed is None:
        try:
            from auto.guards.semantic import SemanticUnavailable, load_embedder

            embed = load_embedder()
        except (ImportError, SemanticUnavailable) as e:  # the semantic extra is optional
            res["similarity_cache"] = None
            res["similarity_cache_unavailable"] = f"{type(e).__name__}: {e}"
            return res
    res["similarity_cache"] = similarity_cache(items, embed, thresholds)
    res["similarity_cache_note"] = ("GPTCache's similarity-threshold policy re-implemented (top-1 cosine of WordLlama "
                                    "embeddings; a miss adds the query), not the gptcache package")
    return res


def peer_lines(peers: dict[str, Any]) -> list[str]:
    """Human summary lines of :func:`peer_figures`' result: the memo ceiling, then each peer's cost
    ratio, served share and excess silent-wrong (95% upper bound)."""
    def f(v: Any, fmt: str = ".3f") -> str:
        return "n/a" if v is None else format(v, fmt)

    lines = [f"  memo-only ceiling (items/distinct): {f(peers['memo_ceiling'], '.2f')}x"]
    for q in [peers["exact_dict"]] + list(peers.get("similarity_cache") or []):
        lines.append(f"  {q['peer']:<24} cost ratio {f(q['cost_ratio'], '.2f')}x, served {f(q['served_share'])}, "
                     f"excess {f(q['excess_silent_wrong'], '+.4f')} (95% upper {f(q['excess_silent_wrong_ci95_high'], '.4f')})")
    if peers.get("similarity_cache_unavailable"):
        lines.append(f"  similarity cache unavailable: {peers['similarity_cache_unavailable']}")
    return lines


def ahead_of_similarity_cache(ratchet: dict[str, Any], peers: dict[str, Any], max_excess: float = 0.01
                              ) -> list[dict[str, Any]]:
    """Per similarity-cache threshold whose excess silent-wrong is ``<= max_excess``: whether the
    ratchet's audited cost ratio (its ``results.json``'s ``cost_ratio``) is ahead of it."""
    out = []
    mine = ratchet.get("cost_ratio")
    for p in peers.get("similarity_cache") or []:
        ex = p["excess_silent_wrong"]
        if ex is None or ex > max_excess:
            continue
        out.append({"threshold": p["threshold"], "peer_cost_ratio": p["cost_ratio"], "peer_excess": ex,
                    "ratchet_cost_ratio": mine, "ahead": (mine is not None and p["cost_ratio"] is not None
                                                          and mine > p["cost_ratio"])})
    return out


if __name__ == "__main__":  # python -m bench.peers RATCHET_CSV [FIELD]: the peers of a finished run, as JSON
    import json
    import sys

    fld = sys.argv[2] if len(sys.argv) > 2 else "utterance"
    print(json.dumps(peer_figures(items_from_csv(sys.argv[1], lambda inp: inp[fld])), indent=2, sort_keys=True))
