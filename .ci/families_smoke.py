"""Every AUTO-BENCH family, end to end through what is installed (run from the wheel-install step).

``python .ci/families_smoke.py OUT_DIR`` records each registered family's agent twice on the first
``N`` inputs of its seeded training corpus against the embedded simulated reference model,
through the product's recorder, into a store of its own, and runs the census on it. It prints one
JSON line per family (spans, witnessed-deterministic spans, seconds) and fails (exit 1) on the first family that cannot be imported, recorded or censused, or
that recorded fewer spans than runs or no witnessed-deterministic span.
``auto`` and ``bench`` must come from an installed distribution, not a checkout: the script
refuses to run otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

N = 6
"""Inputs recorded per family: enough for several spans per site, cheap (seconds per family)."""


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python .ci/families_smoke.py OUT_DIR", file=sys.stderr)
        return 2
    import auto
    import bench
    from auto.census import census
    from auto.store import Store
    from bench.families import FAMILIES
    from bench.run import reference_endpoint

    for mod in (auto, bench):
        if "site-packages" not in Path(mod.__file__).parts:
            print(f"{mod.__name__} is imported from {mod.__file__}, not from an installed wheel", file=sys.stderr)
            return 1
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    with reference_endpoint(0):
        for name, fam in sorted(FAMILIES.items()):
            t0 = time.perf_counter()
            texts = [fam.text_of(item) for item in fam.default_corpus(0)["train"][:N]]
            store = Store(out / f"{name}.sqlite")
            with auto.recording(store):
                for t in texts + texts:
                    fam.run_agent(t)
            cen = census(store.spans())
            store.close()
            row = {"family": name, "inputs": len(texts), "spans": cen.spans,
                   "deterministic_spans": cen.deterministic_spans, "s": round(time.perf_counter() - t0, 2)}
            print(json.dumps(row, sort_keys=True))
            if cen.spans < 2 * len(texts) or cen.deterministic_spans == 0:
                print(f"{name}: {cen.spans} spans ({cen.deterministic_spans} witnessed-deterministic) for "
                      f"{2 * len(texts)} runs", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
