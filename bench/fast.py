"""A fast stream: the triage family served by a reference that answers in a few milliseconds.

``python -m bench.fast [--items 1000] [--latency-ms 3] [--generator shifted|repetitive]
[--seed 0] [--out DIR]``

The stream benchmark (:mod:`bench.stream`) waits for each background compile before the next
item, which makes a compile instant in stream positions; that is close to a deployment whose
reference takes about a second per call. With a reference of a few milliseconds the compiles
(seconds each) land many items late, or after the stream. This driver does not wait: items go
through one :class:`auto.ratchet.Ratchet` back to back, as fast as the reference answers, while
compiles run in child processes. The question it answers: does the ratchet answer at tier-1
before the stream ends, and from what (the table overlay, or an installed generation)?

The reference is the bench's triage simulator called in process (:func:`bench.triage.oracle.respond`
with the agent's prompt and temperature, a seeded generator: the same noise model as the
simulated endpoint), padded with a sleep to ``--latency-ms`` per call. Writes ``fast.json``:
items, wall seconds, reference calls (deopts and audits), tier-1 answers by reason, the first
tier-1 position of each reason, the generations installed during the stream (position, what they
were compiled as, the compile's lane), the compiles logged during the stream (position logged,
verdict, trigger, lane, wall seconds and seconds per rung), and an exact dict's reference calls
on the same items (one per distinct input) for comparison. The overlay answers a witnessed input
ahead of any table (:mod:`auto_runtime.overlay`), so a table generation shows in the installs,
not in ``tier1_by_source``.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def fast_stream(*, items: int = 1000, latency_ms: float = 3.0, kind: str = "shifted", seed: int = 0,
                out_dir: Path | None = None) -> dict[str, Any]:
    """Run the stream (see the module docstring) and return the figures ``fast.json`` holds.

    Raises:
        ValueError: ``items`` < 1, ``latency_ms`` < 0, or an unknown ``kind``.
    """
    from auto.ratchet import Ratchet
    from bench.run import generated_stream
    from bench.triage import agent, corpus, oracle

    if items < 1 or latency_ms < 0:
        raise ValueError("items must be >= 1 and latency_ms >= 0")
    stream, _labels, shifts = generated_stream(corpus.default_corpus(seed), items=items, seed=seed, kind=kind)
    rng = random.Random(seed)
    rng_lock = threading.Lock()
    calls = {"n": 0}
    pad_s = latency_ms / 1000.0

    def reference(inp: dict[str, Any]) -> str:
        t0 = time.perf_counter()
        with rng_lock:  # the request thread and the audit thread share the generator
            calls["n"] += 1
            reply = oracle.respond(agent._messages(inp["ticket"]), agent.TEMPERATURE, rng)
        left = pad_s - (time.perf_counter() - t0)
        if left > 0:
            time.sleep(left)
        return agent.normalize(reply)

    work = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="auto-fast-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / "fast.sqlite"
    for p in work.glob("fast.sqlite*"):
        if p.is_file():
            p.unlink()
    r = Ratchet(reference, store, "triage", load=False)
    by_reason: collections.Counter[str] = collections.Counter()
    first: dict[str, int] = {}
    t_start = time.perf_counter()
    try:
        for pos, inp in enumerate(stream):
            res = r.call_result(inp)
            if res.tier == "tier-1":
                why = "overlay" if res.reason == "overlay" else "generation"
                by_reason[why] += 1
                first.setdefault(why, pos)
        wall = time.perf_counter() - t_start
        calls_in_stream = calls["n"]
        events = r.events
    finally:
        r.close(timeout_s=120)
    installs = [{"position": e["detail"].get("at_call", e.get("calls")), "generation": e["generation"],
                 "compiled_as": e["detail"].get("compiled_as"),
                 "lane": (e["detail"].get("trigger") or {}).get("lane")} for e in events if e["kind"] == "install"]
    compiles = [{"position": e["detail"].get("at_call"), "verdict": e["detail"].get("verdict"),
                 "trigger": (e["detail"].get("trigger") or {}).get("kind"),
                 "lane": (e["detail"].get("trigger") or {}).get("lane"), "seconds": e["detail"].get("seconds"),
                 "rung_seconds": {x["rung"]: x["seconds"] for x in e["detail"].get("rungs") or []}}
                for e in events if e["kind"] == "compile"]
    distinct = len({json.dumps(x, sort_keys=True) for x in stream})
    result = {
        "items": len(stream), "generator": kind, "seed": seed, "shifts": shifts,
        "reference_latency_ms": latency_ms, "wall_s": round(wall, 3),
        "reference_calls": calls_in_stream, "exact_dict_reference_calls": distinct,
        "tier1": sum(by_reason.values()), "tier1_share": sum(by_reason.values()) / len(stream),
        "tier1_by_source": dict(by_reason), "first_tier1_position": first,
        "generations_installed_during_stream": [g for g in installs if g["position"] is not None
                                                and g["position"] <= len(stream)],
        "compile_attempts": len(compiles),
        "compiles_during_stream": compiles,
    }
    (work / "fast.json").write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fast", description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--latency-ms", type=float, default=3.0)
    ap.add_argument("--generator", choices=("shifted", "repetitive"), default="shifted")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    try:
        res = fast_stream(items=a.items, latency_ms=a.latency_ms, kind=a.generator, seed=a.seed, out_dir=a.out)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
