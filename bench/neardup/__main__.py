"""``python -m bench.neardup [--items N] [--seed S] [--out DIR]``: see :mod:`bench.neardup.run`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from auto.errors import AutoError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.neardup",
                                 description="the hand-written near-duplicate stream through the ratchet, beside its peers")
    ap.add_argument("--items", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise", type=float, default=None, help="the reference's per-call noise (default 0.02)")
    ap.add_argument("--audit-rate", type=float, default=0.05)
    ap.add_argument("--worker", choices=("process", "thread"), default="process")
    ap.add_argument("--out", type=Path, default=Path("out/neardup"))
    ap.add_argument("--no-peers", action="store_true", help="skip the exact dict and the similarity cache")
    a = ap.parse_args(argv)
    from bench.neardup.run import render, run_neardup
    try:
        res = run_neardup(out_dir=a.out, items=a.items, seed=a.seed, noise=a.noise, audit_rate=a.audit_rate, worker=a.worker,
                          peers=not a.no_peers, progress=lambda m: print(m, file=sys.stderr, flush=True))
    except AutoError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(render(res))
    print(f"results: {a.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
