"""Recording overhead per call, beside bare calls in the same run.

The triage agent calls the simulator (a separate process on loopback, so its work is not in the
measured process) through the official ``openai`` client. Calls alternate in blocks of 20
between bare (no recorder active) and recorded (inside one recording session per block, whose
first, untimed call starts the writer), on the same tickets, so drift and load affect both
alike. Reports p50/p95 of each and the difference of the medians (µs), for the default
(background) writer and the synchronous one — as wall time, as the calling thread's CPU time
(``thread_time``: the work added on the call path, less sensitive to other load on the machine)
and as the process's CPU time per call with the writer's deferred work included
(``process_time`` over each block, flushed at its end) — plus, for the background writer, how
long after its end a span was journaled (p50/p99 ms: what a process killed outright can lose
beyond its open spans; measured around :meth:`auto.store.journal.Journal.append`) and where a
recorded call's time goes on the calling thread (cProfile of recorded calls, auto's own
functions); and what the redaction costs alone (:func:`redaction`: the pattern scan of an 8 KB
prompt, one model-call span clean and holding secrets, µs; ``--redaction-only`` prints just these).
``--in-process`` prints :func:`in_process` only: the client answered in process, and the p50 of
each recorder step on the calling thread.

    python -m bench.scale.recording --calls 2000
    python -m bench.scale.recording --calls 1000 --in-process
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1)


def _start_sim() -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "bench.sim", "--port", "0", "--error-rate", "0"],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    return p, line.rsplit(" ", 1)[-1]


def measure(calls: int, sync: bool, tickets: list[str]) -> dict:
    import auto
    from auto.record.session import start_recording, stop_recording
    from auto.store import Store
    from bench.triage import agent

    from auto.store.journal import Journal

    d = tempfile.mkdtemp()
    st = Store(os.path.join(d, "rec.sqlite"))
    os.environ["AUTO_RECORD_SYNC"] = "1" if sync else "0"
    lag_ms: list[float] = []
    append = Journal.append

    def timed_append(self, spans, traces):  # type: ignore[no-untyped-def]
        payload = append(self, spans, traces)
        now = time.time_ns()
        lag_ms.extend((now - s["ended_ns"]) / 1e6 for s in spans)
        return payload

    Journal.append = timed_append  # type: ignore[method-assign]
    bare, rec, bare_cpu, rec_cpu = [], [], [], []
    block_cpu_bare = block_cpu_rec = 0
    block = 20
    cpu, tcpu = time.process_time_ns, time.thread_time_ns
    for b in range(max(1, calls // block)):
        c0 = cpu()
        for i in range(block):
            t = tickets[(b * block + i) % len(tickets)]
            t0, u0 = time.perf_counter_ns(), tcpu()
            agent.triage(t)
            bare.append((time.perf_counter_ns() - t0) / 1000)
            bare_cpu.append((tcpu() - u0) / 1000)
        block_cpu_bare += cpu() - c0
        r = start_recording(st)
        agent.triage(tickets[b % len(tickets)])  # not timed: the session's first call starts its writer
        c0 = cpu()
        for i in range(block):
            t = tickets[(b * block + i) % len(tickets)]
            t0, u0 = time.perf_counter_ns(), tcpu()
            agent.triage(t)
            rec.append((time.perf_counter_ns() - t0) / 1000)
            rec_cpu.append((tcpu() - u0) / 1000)
        r.flush()  # the background writer's work on these calls counts too
        block_cpu_rec += cpu() - c0
        stop_recording(r)
    Journal.append = append  # type: ignore[method-assign]
    nb = max(1, calls // block) * block
    n = st.counts()["spans"]
    st.close()
    del auto
    return {"writer": "sync" if sync else "journal+background", "calls": calls, "spans_written": n,
            "bare_p50_us": _pct(bare, 0.5), "bare_p95_us": _pct(bare, 0.95),
            "recorded_p50_us": _pct(rec, 0.5), "recorded_p95_us": _pct(rec, 0.95),
            "overhead_p50_us": round(statistics.median(rec) - statistics.median(bare), 1),
            "thread_cpu_bare_p50_us": _pct(bare_cpu, 0.5), "thread_cpu_recorded_p50_us": _pct(rec_cpu, 0.5),
            "thread_cpu_overhead_p50_us": round(statistics.median(rec_cpu) - statistics.median(bare_cpu), 1),
            "cpu_overhead_mean_us_with_writer": round((block_cpu_rec - block_cpu_bare) / nb / 1000, 1),
            "journaled_after_end_p50_ms": _pct(lag_ms, 0.5) if lag_ms else None,
            "journaled_after_end_p99_ms": _pct(lag_ms, 0.99) if lag_ms else None}


def profile(calls: int, tickets: list[str]) -> list[dict]:
    import auto
    from auto.store import Store
    from bench.triage import agent

    d = tempfile.mkdtemp()
    os.environ["AUTO_RECORD_SYNC"] = "0"
    pr = cProfile.Profile()
    with Store(os.path.join(d, "p.sqlite")) as st, auto.recording(st):
        pr.enable()
        for i in range(calls):
            agent.triage(tickets[i % len(tickets)])
        pr.disable()
    stats = pstats.Stats(pr).stats  # type: ignore[attr-defined]
    rows = []
    for (file, line, fn), (_cc, _nc, tt, ct, _callers) in stats.items():
        if "/auto/" in file and "/bench/" not in file:
            rows.append({"function": f"{file.split('/auto/')[-1]}:{line}:{fn}", "cum_us_per_call": round(ct / calls * 1e6, 1),
                         "own_us_per_call": round(tt / calls * 1e6, 1)})
    rows.sort(key=lambda r: -r["own_us_per_call"])
    return rows[:15]


_COMPLETION = (b'{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"auto-sim-1","choices":[{"index":0,'
               b'"message":{"role":"assistant","content":"billing"},"finish_reason":"stop"}],'
               b'"usage":{"prompt_tokens":40,"completion_tokens":1,"total_tokens":41}}')


def _steps() -> list[tuple[object, str, str]]:
    """``(owner, attribute, step)`` of the recorder's steps on the calling thread, as they exist
    in this tree (a step a tree lacks is left out)."""
    from auto.record import core, model_call, openai_hook, writer

    steps = [(core, "_bind_input", "task: bind the arguments"), (core.SpanScope, "__init__", "task: open the scope"),
             (core.SpanScope, "_finish", "task: end the scope (its hand-over included)"),
             (model_call.LogicalCall, "__init__", "logical call"), (model_call.Attempt, "__init__", "attempt: start"),
             (model_call.Attempt, "got_response", "attempt: end (its hand-over included)"),
             (writer.SpanWriter, "submit", "hand-over to the writer (each)")]
    return [(o, n, label) for o, n, label in steps if n in vars(o)] + \
        [(openai_hook, n, "attempt layer: entry") for n in ("_start_attempt",) if hasattr(openai_hook, n)]


def in_process(calls: int, tickets: list[str]) -> dict:
    """The same alternation as :func:`measure` with the client's HTTP answered in process
    (``httpx`` ``MockTransport``, one fixed completion: no socket, no simulator), so the
    difference is the recorder's alone; and the p50 wall time (µs) of each recorder step on the
    calling thread (timed around it: each figure carries ~0.1 µs of timing)."""
    import collections

    from openai._base_client import SyncAPIClient

    import openai
    from auto.record.session import start_recording, stop_recording
    from auto.store import Store
    from bench.triage import agent

    httpx = sys.modules[SyncAPIClient.__module__].httpx2  # type: ignore[attr-defined]
    agent._client = openai.OpenAI(api_key="sk-bench-not-a-key", base_url="http://127.0.0.1:9/v1", http_client=httpx.Client(
        transport=httpx.MockTransport(lambda req: httpx.Response(200, content=_COMPLETION, headers={
            "content-type": "application/json", "x-request-id": "req_1"}))))
    os.environ["AUTO_RECORD_SYNC"] = "0"
    st = Store(os.path.join(tempfile.mkdtemp(), "m.sqlite"))
    for t in tickets[:100]:
        agent.triage(t)
    tcpu = time.thread_time_ns
    bare: list[int] = []
    rec: list[int] = []
    block = 20
    for b in range(max(1, calls // block)):
        for i in range(block):
            u = tcpu()
            agent.triage(tickets[(b * block + i) % len(tickets)])
            bare.append(tcpu() - u)
        r = start_recording(st)
        agent.triage(tickets[b % len(tickets)])
        for i in range(block):
            u = tcpu()
            agent.triage(tickets[(b * block + i) % len(tickets)])
            rec.append(tcpu() - u)
        r.flush()
        stop_recording(r)
    took: dict[str, list[int]] = collections.defaultdict(list)
    clock = time.perf_counter_ns
    saved = []
    for owner, attr, label in _steps():
        fn = vars(owner)[attr]
        saved.append((owner, attr, fn))

        def timed(*a, _fn=fn, _label=label, **k):  # type: ignore[no-untyped-def]
            t0 = clock()
            try:
                return _fn(*a, **k)
            finally:
                took[_label].append(clock() - t0)

        setattr(owner, attr, timed)
    try:
        r = start_recording(st)
        for i in range(min(calls, 500)):
            agent.triage(tickets[i % len(tickets)])
        stop_recording(r)
    finally:
        for owner, attr, fn in saved:
            setattr(owner, attr, fn)
        agent.reset_client()
    st.close()
    return {"calls": calls, "thread_cpu_bare_p50_us": round(statistics.median(bare) / 1000, 1),
            "thread_cpu_recorded_p50_us": round(statistics.median(rec) / 1000, 1),
            "thread_cpu_overhead_p50_us": round((statistics.median(rec) - statistics.median(bare)) / 1000, 1),
            "step_wall_p50_us": {k: round(statistics.median(v) / 1000, 2) for k, v in took.items()}}


SYSTEM_8KB = " ".join(["[auto-bench:triage] You are a customer-support triage assistant. Classify the support "
                       "ticket into exactly one of these labels: billing, bug, feature, account, shipping, "
                       "security. Answer with the label only."] * 40)
"""An 8 KB prompt without any secret (the triage system prompt, 40 times)."""


def redaction(n: int = 200) -> dict:
    """µs per call of the redaction's pattern scan and of redacting one model-call span (each
    string new: the clean-string memory cleared before each timed call)."""
    import random

    from auto.record import redact as rd

    rd.pattern_secrets("warm up the patterns")
    rng = random.Random(0)

    def span(i: int, secret: str = "") -> dict:
        return {"trace_id": f"{rng.getrandbits(128):032x}", "span_id": f"{rng.getrandbits(64):016x}",
                "name": "chat.completions", "kind": "llm", "task": "triage",
                "site": f"triage/chat.completions/sha256:{rng.getrandbits(256):064x}",
                "input": {"model": "auto-sim-1", "messages": [
                    {"role": "system", "content": SYSTEM_8KB[:220]},
                    {"role": "user", "content": f"My invoice #{i} was charged twice {secret} order {rng.getrandbits(30)}"}]},
                "output": {"content": "billing", "finish_reason": "stop"}, "error": None,
                "attributes": {"url.full": "http://127.0.0.1:43211/v1/chat/completions",
                               "gen_ai.response.id": f"chatcmpl-{rng.getrandbits(96):024x}",
                               "auto.response.headers": {"date": "Wed, 02 Dec 2026 06:00:00 GMT", "server": "uvicorn",
                                                         "x-request-id": f"req_{rng.getrandbits(96):024x}"}}}

    def per_call(fn: Callable[[int], object]) -> float:
        t = 0
        for i in range(n):
            rd._CLEAN.strings.clear()
            rd._CLEAN.chars = 0
            t0 = time.perf_counter_ns()
            fn(i)
            t += time.perf_counter_ns() - t0
        return round(t / n / 1000, 1)

    r = rd.Redactor(["sk-bench-not-a-key"])
    values = r.values()
    key = "sk-proj-Ab3dEf9hIjKlMnOpQrStUvWxYz0123456789 and AKIAIOSFODNN7EXAMPLE"
    return {"pattern_secrets_8kb_us": per_call(lambda i: rd.pattern_secrets(SYSTEM_8KB + str(i))),
            "clean_span_us": per_call(lambda i: r.redact_span(span(i), values)),
            "span_with_secrets_us": per_call(lambda i: r.redact_span(span(i, key), values))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--redaction-only", action="store_true", help="only the redaction figures (no simulator)")
    ap.add_argument("--in-process", action="store_true",
                    help="only the in-process figures (the client answered by a mock transport) and the recorder's steps")
    args = ap.parse_args(argv)
    if args.redaction_only:
        print(json.dumps({"load": os.getloadavg()[0], "redaction": redaction()}, indent=2))
        return 0
    from bench.triage import agent, corpus

    if args.in_process:
        tickets = [t.ticket for t in corpus.default_corpus(seed=0)["train"]]
        print(json.dumps({"load_before": os.getloadavg()[0], "in_process": in_process(args.calls, tickets),
                          "load_after": os.getloadavg()[0]}, indent=2))
        return 0

    sim, url = _start_sim()
    try:
        os.environ["OPENAI_BASE_URL"] = url
        os.environ["OPENAI_API_KEY"] = "sk-bench-not-a-key"
        agent.reset_client()
        tickets = [t.ticket for t in corpus.default_corpus(seed=0)["train"]]
        for t in tickets[:100]:
            agent.triage(t)  # warm the client and the server
        out = {"load_before": os.getloadavg()[0],
               "default": measure(args.calls, False, tickets),
               "sync": measure(args.calls // 2, True, tickets),
               "profile_recorded": profile(min(500, args.calls), tickets),
               "redaction": redaction(),
               "load_after": os.getloadavg()[0]}
    finally:
        sim.terminate()
        sim.wait(10)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
