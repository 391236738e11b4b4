"""Finding a store's model-call sites (``auto compile --site``, the proxy): over every model-call
span vs over the distinct requests (:func:`auto.sites.store_sites`).

Each way runs in a fresh process of its own (wall time and peak RSS of the whole process,
interpreter included), the two one after the other on the same store; the sites found (ids,
templates, request counts) must be equal.

    python -m bench.scale.make_store --out s100k.sqlite --spans 100000
    python -m bench.scale.sites --store s100k.sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile


def found(store: str, how: str) -> dict:
    """The sites of ``store`` found one way (``spans`` or ``grouped``), as comparable JSON."""
    from auto.sites import discover, store_sites
    from auto.store import Store

    with Store(store, create=False) as st:
        sites = discover(st.spans(kind="llm")).sites if how == "spans" else store_sites(st)
    return {sid: {"requests": s.requests, "site": s.to_manifest()} for sid, s in sites.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="an SQLite path or a postgresql:// URI")
    ap.add_argument("--how", choices=["spans", "grouped"], default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.how:  # one measured run
        json.dump(found(a.store, a.how), sys.stdout, sort_keys=True)
        return 0
    from bench.scale._proc import measured

    res: dict = {"store": a.store.split("@")[-1]}
    with tempfile.TemporaryDirectory() as tmp:
        outs = {}
        for how in ("spans", "grouped"):
            outs[how] = os.path.join(tmp, f"{how}.json")
            res[how] = measured([sys.executable, "-m", "bench.scale.sites", "--store", a.store, "--how", how], outs[how])
        got = {how: json.load(open(p, encoding="utf-8")) for how, p in outs.items()}
    res["sites"] = len(got["grouped"])
    res["requests"] = sum(s["requests"] for s in got["grouped"].values())
    res["same_sites"] = got["spans"] == got["grouped"]
    print(json.dumps(res, indent=1))
    return 0 if res["same_sites"] else 1


if __name__ == "__main__":
    sys.exit(main())
