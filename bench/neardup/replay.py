"""The neardup rung's serving rule replayed without its certificate: the headroom the certificate
leaves on a stream.

Over a stream's rows (the ratchet's ``ratchet.csv``, or :class:`bench.stream.StreamRow` values),
per canonicalization step of :mod:`auto.compile.neardup`: an input answered before (by its exact
text) gets that answer; else an input whose key has exactly one witnessed answer so far gets it
(the per-neighbourhood rule of the rung); else it is a miss, which pays the control leg's call and
adds its answer to the input's neighbourhood. It is served from the first witnessed neighbour,
with no compile and no certificate, so it is an upper reference for the rung, not a figure of the
product. Figures as for the peers (:func:`bench.peers.peer_figures`).

``python -m bench.neardup.replay RATCHET_CSV`` prints one line per step.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from auto.canonical import canonical_json
from auto.compile import neardup as nd
from bench.peers import PeerItem, _figures


def replay(items: Sequence[PeerItem], field_name: str = "ticket") -> list[dict[str, Any]]:
    """Per step of :data:`auto.compile.neardup.STEPS`, the replay's figures (``step`` added);
    ``items``' ``key`` is the input's canonical JSON."""
    out = []
    for step in nd.STEPS:
        key = nd.key_function(step, field_name)
        answers: dict[str, set[str]] = {}
        first: dict[str, Any] = {}
        exact: dict[str, Any] = {}
        hit, served = [], []
        for it in items:
            if it.key in exact:
                hit.append(True)
                served.append(exact[it.key])
                continue
            k = key(json.loads(it.key))
            seen = answers.get(k)
            if seen is not None and len(seen) == 1:
                hit.append(True)
                served.append(first[k])
                continue
            hit.append(False)
            served.append(it.answer)
            exact[it.key] = it.answer
            answers.setdefault(k, set()).add(canonical_json(it.answer))
            first.setdefault(k, it.answer)
        out.append({**_figures(f"neardup-replay[{step}]", items, hit, served), "step": step})
    return out


def items_from_csv(path: Path) -> list[PeerItem]:
    """:class:`~bench.peers.PeerItem` per row of a ``ratchet.csv`` (:func:`bench.report.write_ratchet_csv`)."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [PeerItem(canonical_json(json.loads(r["input"])), "", json.loads(r["reference_answer"]),
                     float(r["control_cost_usd_micros"]), json.loads(r["reference_answer_2"])) for r in rows]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_file():
        print("usage: python -m bench.neardup.replay RATCHET_CSV (a ratchet.csv of python -m bench.neardup)",
              file=sys.stderr)
        return 2
    for f in replay(items_from_csv(Path(args[0]))):
        print(f"{f['peer']:<34} cost ratio {f['cost_ratio']:.2f}x, served {f['served_share']:.3f}, excess "
              f"{f['excess_silent_wrong']:+.4f} (95% upper {f['excess_silent_wrong_ci95_high']:.4f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
