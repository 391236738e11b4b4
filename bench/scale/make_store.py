"""Generate a large, realistic trace store through the real ingest path (seeded, reproducible).

A fleet of agents: ``--tasks`` tasks, each with its own prompt template; every call is a trace of
one task span and one model-call span (``--retry-rate`` of the calls first fail once and are
retried: an extra errored attempt sharing ``auto.logical_call_id``). Inputs are drawn from
``--distinct`` tickets per task with a Zipf-like skew (so most inputs repeat), outputs are the
ticket's label with ``--noise`` of the model's answers flipped (divergent inputs). Attributes
look like the recorder's (GenAI names, usage, latency, a response id): every span's attributes
differ, its prompt does not. Spans are ingested in batches of ``--batch`` through
:meth:`auto.store.Store.ingest` (digests, payloads, counters as in production) inside
:meth:`auto.store.Store.bulk_load` (a large page cache, fewer WAL checkpoints).

    python -m bench.scale.make_store --out /path/big.sqlite --spans 10000000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from typing import Iterator

LABELS = ("billing", "bug", "feature", "account", "shipping", "security")
WORDS = ("order", "refund", "login", "crash", "password", "invoice", "delivery", "charge", "screen", "update",
         "account", "package", "error", "payment", "feature", "request", "broken", "export", "report", "team")


def ticket(seed: int, task: int, i: int) -> str:
    """Ticket ``i`` of ``task``: 18 words picked by a hash of ``(seed, task, i)``."""
    h = hashlib.blake2b(f"{seed}:{task}:{i}".encode(), digest_size=18).digest()
    words = " ".join(WORDS[b % len(WORDS)] for b in h)
    return f"Ticket {task}-{i}: {words}. Please help as soon as you can, thanks."


def system_prompt(task: int) -> str:
    return (f"[fleet:{task}] You are support assistant number {task}. Classify the ticket into exactly one of: "
            + ", ".join(LABELS) + ". Answer with the label only. Be concise, never explain, never apologize. "
            "If unsure, pick the closest label. Tickets may be long; read all of them before answering.")


def records(spans: int, tasks: int, distinct: int, noise: float, retry_rate: float, seed: int
            ) -> Iterator[tuple[list[dict], dict]]:
    """The generated calls, one at a time: ``(spans of the call's trace, its trace)`` until
    ``spans`` spans were made (seeded: the same arguments give the same contents; ids are fresh)."""
    from auto.record.template import site, template_digest
    from auto.store import new_span_id, new_trace_id

    rnd = random.Random(seed)
    sites = [site(f"task{t:03d}", "chat.completions", template_digest(
        [{"role": "system", "content": system_prompt(t)}, {"role": "user", "content": "{ticket}"}], {"ticket": "{ticket}"}))
        for t in range(tasks)]
    prompts = [system_prompt(t) for t in range(tasks)]
    names = [f"task{t:03d}" for t in range(tasks)]
    tdigests = [s.rsplit("/", 1)[-1] for s in sites]
    now = 1_790_000_000_000_000_000
    made = calls = 0
    while made < spans:
        t = rnd.randrange(tasks)
        i = min(int(rnd.paretovariate(1.2)) - 1, distinct - 1) if rnd.random() < 0.7 else rnd.randrange(distinct)
        text, label = ticket(seed, t, i), LABELS[(i * 7 + t) % len(LABELS)]
        answer = label if rnd.random() >= noise else LABELS[(LABELS.index(label) + 1) % len(LABELS)]
        tid, task_id = new_trace_id(), new_span_id()
        start = now + calls * 1_000_000
        calls += 1
        task_name = names[t]
        req = {"messages": [{"role": "system", "content": prompts[t]}, {"role": "user", "content": text}],
               "model": "auto-sim-1", "temperature": 0.3}
        lid = new_span_id()
        attempts = 2 if rnd.random() < retry_rate else 1
        out: list[dict] = []
        for a in range(attempts):
            failed = a < attempts - 1
            in_tok, out_tok = 60 + len(text) // 4, 2
            out.append({
                "trace_id": tid, "span_id": new_span_id(), "parent_span_id": task_id, "name": "chat.completions",
                "kind": "llm", "task": task_name, "site": sites[t], "started_ns": start + 1000 + a * 300_000,
                "ended_ns": start + 250_000 + a * 300_000, "status": "error" if failed else "ok", "input": req,
                "output": None if failed else {"content": answer, "finish_reason": "stop", "refusal": None, "tool_calls": None},
                "error": {"type": "openai.InternalServerError", "message": "simulated 500", "status_code": 500} if failed else None,
                "attributes": {
                    "auto.attempt": a, "auto.logical_call_id": lid, "auto.cost_usd_micros": 2.5 * in_tok + 10 * out_tok,
                    "auto.latency_ms": round(rnd.uniform(300, 2500), 3), "auto.latency_source": "simulated",
                    "auto.reference_model.simulated": True, "auto.template_digest": tdigests[t],
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "auto-sim-1", "gen_ai.request.temperature": 0.3,
                    "gen_ai.response.id": f"chatcmpl-{rnd.getrandbits(64):016x}", "gen_ai.response.model": "auto-sim-1",
                    "gen_ai.system": "openai", "gen_ai.usage.input_tokens": in_tok, "gen_ai.usage.output_tokens": out_tok,
                    "http.response.status_code": 500 if failed else 200, "server.address": "127.0.0.1", "server.port": 8080}})
        out.append({
            "trace_id": tid, "span_id": task_id, "parent_span_id": None, "name": task_name, "kind": "task",
            "task": task_name, "site": None, "started_ns": start, "ended_ns": start + 300_000, "status": "ok",
            "input": {"ticket": text}, "output": answer, "error": None,
            "attributes": {"auto.cost_usd_micros": 2.5 * (60 + len(text) // 4) + 20, "auto.llm_calls": 1,
                           "auto.llm_attempts": attempts, "auto.latency_ms": round(rnd.uniform(300, 2600), 3)}})
        made += len(out)
        yield out, {"trace_id": tid, "name": task_name, "started_ns": start, "ended_ns": start + 300_000,
                    "status": "ok", "attributes": {"auto.source": "bench.scale"}}


def generate(out: str, spans: int, tasks: int, distinct: int, noise: float, retry_rate: float, batch: int,
             seed: int, progress: bool = True) -> dict:
    """Write the generated store to ``out`` (:func:`records`, ``batch`` spans per
    :meth:`~auto.store.Store.ingest`); returns its counts, size and the ingest rate."""
    from auto.store import Store

    st = Store(out)
    t0 = time.perf_counter()
    made = calls = 0
    report = 500_000
    buf_s: list[dict] = []
    buf_t: list[dict] = []
    with st.bulk_load():
        for call_spans, trace in records(spans, tasks, distinct, noise, retry_rate, seed):
            buf_s.extend(call_spans)
            buf_t.append(trace)
            made += len(call_spans)
            calls += 1
            if len(buf_s) >= batch:
                st.ingest(buf_s, buf_t)
                buf_s, buf_t = [], []
                if progress and made >= report:
                    report += 500_000
                    el = time.perf_counter() - t0
                    print(f"{made} spans, {el:.0f} s, {made / el:.0f} spans/s", file=sys.stderr, flush=True)
        if buf_s:
            st.ingest(buf_s, buf_t)
    el = time.perf_counter() - t0
    counts = st.counts()
    size = st.size_bytes()
    st.close()
    return {"out": out, "spans": counts["spans"], "traces": counts["traces"], "payloads": counts["payloads"],
            "calls": calls, "seconds": round(el, 1), "spans_per_s": round(counts["spans"] / el), "bytes": size,
            "bytes_per_span": round(size / counts["spans"], 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="store to create (an SQLite path or a postgresql:// URI)")
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--distinct", type=int, default=20_000, help="distinct tickets per task")
    ap.add_argument("--noise", type=float, default=0.03, help="share of model answers flipped")
    ap.add_argument("--retry-rate", type=float, default=0.01)
    ap.add_argument("--batch", type=int, default=50_000, help="spans per ingest transaction")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    print(json.dumps(generate(a.out, a.spans, a.tasks, a.distinct, a.noise, a.retry_rate, a.batch, a.seed), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
