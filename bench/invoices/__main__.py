"""``python -m bench.invoices``: the invoice extractor through the ratchet, from its first witnesses.

A stream of ``--items`` distinct invoices (seeded, :func:`bench.invoices.reference.invoices`) goes
through ``auto.ratchet`` around :func:`bench.invoices.agent.invoice` (simulated reference; shadow
audits at ``--audit-rate``, default the ratchet's). Compiles are synchronous here: after a call that starts one, the stream waits for it
(``Ratchet.wait_idle``), so the figures say what the evidence allows at each position, not how
fast this machine compiles. Printed (JSON on stdout): the generations (position, trigger, how each
compiled), the first position answered at tier-1, tier-1 answers and reference calls after the
first generation, tier-1 answers equal to the noise-free reading (overall and per field), and the
cost ratio (items per reference call). Everything is simulated (labelled so).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import auto
from auto.ratchet import DEFAULT_AUDIT_RATE
from bench.invoices import agent
from bench.invoices.reference import invoices, read_invoice

FIELDS = ("invoice_no", "total", "currency", "due_date")


def run(items: int, seed: int, store_path: Path, audit_rate: float = DEFAULT_AUDIT_RATE) -> dict:
    """The stream (module docstring); returns the figures."""
    agent.reseed(seed)
    stream = invoices(items, seed)
    r = auto.ratchet(agent.invoice, store=store_path, worker="thread", audit_rate=audit_rate)
    tiers, answers = [], []
    try:
        for inv in stream:
            res = r.call_result({"text": inv.text})
            tiers.append(res.tier)
            answers.append(res.answer)
            r.wait_idle(timeout_s=600)
        events = r.events
        status = r.status()
    finally:
        r.close()
    t1 = [i for i, t in enumerate(tiers) if t == "tier-1"]
    first = t1[0] if t1 else None
    after = range(first, items) if first is not None else range(0)
    right = [i for i in t1 if answers[i] == read_invoice(stream[i].text)]
    per_field = {f: sum(1 for i in t1 if answers[i].get(f) == read_invoice(stream[i].text)[f]) for f in FIELDS}
    calls = agent.calls()
    return {"simulated": True, "items": items, "seed": seed, "audit_rate": audit_rate, "reference_calls": calls,
            "cost_ratio": items / calls if calls else None,  # audits included: each is a reference call
            "tier1_wrong": len(t1) - len(right),
            "first_tier1_position": first, "tier1": len(t1),
            "tier1_share_after_first": (sum(1 for i in after if tiers[i] == "tier-1") / len(after)) if first is not None else None,
            "tier1_equal_to_reading": len(right), "tier1_field_equal_to_reading": per_field,
            "generation": status.get("generation"),
            "events": [_event(e) for e in events]}


def _event(e: dict) -> dict:
    d = e.get("detail") or {}
    trig = d.get("trigger")
    return {"kind": e.get("kind"), "generation": e.get("generation"), "at_call": d.get("at_call"),
            "trigger": trig.get("kind") if isinstance(trig, dict) else trig, "compiled_as": d.get("compiled_as"),
            "reason": str(d.get("reason"))[:300] if d.get("reason") else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.invoices", description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--audit-rate", type=float, default=DEFAULT_AUDIT_RATE)
    ap.add_argument("--store", type=Path, default=None, help="store file (default: a temporary one)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = run(a.items, a.seed, a.store or Path(tmp) / "invoices.sqlite", a.audit_rate)
    json.dump(out, sys.stdout, indent=1, default=str)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
