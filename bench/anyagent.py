"""AUTO-BENCH any-agent: the recording proxy, tier-1 answers through it, and ``auto serve``, measured
side by side in one run against the simulator (``auto bench anyagent``).

Every server is its own process on loopback: two simulators (``python -m bench.sim``; one with no
simulated errors for the latency and load measurements, one with the default 2% error rate for
the agents, whose SDK retries them), ``auto proxy`` processes, and the agents
(``examples/triage_agent.py``, ``examples/urllib_agent.py``) as child processes. The simulator
reports its drawn latency instead of sleeping it, so the loopback measurements below are the
proxy's own cost.

Measurements (``results.json``):

1. ``overhead`` — non-streamed calls, each direct to the simulator and through a record-only proxy,
   interleaved (one of each per ticket, distinct tickets, keep-alive connections): p50/p95 of both
   and the p50 of the paired differences (ms), and the proxy process's CPU time per call; beside
   it ``overhead_in_process``, the proxy on a thread of the measuring process (one process hop
   fewer). Target: p50 overhead ≤ 1 ms.
2. ``ttfb`` — streamed calls, the same way: time from sending to the first body bytes (ms).
   Target: within 1 ms of the upstream's.
3. ``concurrency`` — ``clients`` concurrent clients × ``per_client`` calls through a record-only
   proxy (so every call goes upstream and must be recorded): every call answered, every call
   recorded exactly once (distinct tickets), ``Store.verify``.
4. ``zero_code_change`` — the README's agent, without any decorator, recorded twice over
   ``train_tickets`` generated tickets (a) by ``auto record`` and (b) through a record-only
   proxy; each store's model-call site compiled by ``auto compile --site`` under the default
   contract and under epsilon 0.02 (:data:`CONTRACTS`; the proxy's ratchet gates with the same);
   then a proxy on each store answers a fresh stream (300 items: never-recorded tickets of the
   training categories, 10% repeats), sent with
   the agent's exact request (same SDK call and body, read back with the response headers so each
   item's tier is known). Against two fresh reference answers per item (the agent run directly
   on the simulator twice): tier-1 share and excess silent-wrong on the tier-1 items (the
   agent's normalized label; :func:`auto.guards.parity.excess_disagreement`). Targets: ≥ 80%
   tier-1, excess silent-wrong ≤ 1 point.
5. ``tier1_latency`` — tier-1 answers through the proxy, end to end over loopback (ms). Target:
   p50 ≤ 1 ms.
6. ``urllib_agent`` — the stdlib-only agent through the proxy: every call, streamed or not, in
   the store.
7. ``serve`` — the compiled site through ``auto serve`` (one worker): p50/p95 of a tier-1 run (ms).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import aiohttp
import httpx2
import openai

from auto.guards.parity import excess_disagreement
from auto.store import Store
from auto.gate import clopper_pearson
from bench.triage import corpus
from bench.triage.agent import SYSTEM_PROMPT, TEMPERATURE, normalize

REPO = Path(__file__).resolve().parents[1]
TRIAGE_AGENT = REPO / "examples" / "triage_agent.py"
URLLIB_AGENT = REPO / "examples" / "urllib_agent.py"
MODEL = "auto-sim-1"
KEY = "sk-bench-not-a-real-key"


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))], 4)


def _summary(xs: list[float]) -> dict[str, Any]:
    return {"n": len(xs), "p50": _pct(xs, 0.5), "p95": _pct(xs, 0.95), "mean": round(statistics.fmean(xs), 4) if xs else None}


class Process:
    """A child process serving on loopback, stopped with SIGINT (then SIGKILL after 30 s)."""

    def __init__(self, argv: list[str], health: str, env: dict[str, str] | None = None, log: Path | None = None) -> None:
        self.log = open(log, "w") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdout=self.log, stderr=self.log,
                                     start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{argv[:4]} exited with {self.proc.returncode} before serving (see {log})")
            try:
                if httpx2.get(health, timeout=1.0).status_code < 500:
                    return
            except httpx2.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{argv[:4]} did not serve within 60 s")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self.log is not subprocess.DEVNULL:
            self.log.close()


def sim_process(seed: int, error_rate: float, log: Path) -> tuple[Process, str]:
    port = _free_port()
    p = Process([sys.executable, "-m", "bench.sim", "--port", str(port), "--seed", str(seed), "--error-rate", str(error_rate)],
                f"http://127.0.0.1:{port}/health", log=log)
    return p, f"http://127.0.0.1:{port}/v1"


def proxy_process(upstream: str, store: Path, log: Path, *extra: str) -> tuple[Process, str]:
    port = _free_port()
    p = Process([sys.executable, "-m", "auto.cli", "proxy", "--upstream", upstream, "--store", str(store),
                 "--port", str(port), *extra], f"http://127.0.0.1:{port}/auto/health", log=log)
    return p, f"http://127.0.0.1:{port}/v1"


def _body(ticket: str, stream: bool = False) -> dict[str, Any]:
    b = {"model": MODEL, "temperature": TEMPERATURE,
         "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ticket}]}
    if stream:
        b["stream"] = True
    return b


def _tickets(n: int, seed: int) -> list[str]:
    return [t.ticket for t in corpus.generate(n, seed=seed)]


# ----------------------------------------------------------------------------- 1, 2: overhead and TTFB


def _cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of a process so far (Linux ``/proc``), or None."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def measure_overhead(direct: str, proxied: str, tickets: list[str], warmup: int = 50,
                     proxy_pid: int | None = None) -> dict[str, Any]:
    """Non-streamed round trips, direct and through the proxy, interleaved (ms); with the proxy's
    pid, its CPU time per proxied call (ms, from ``/proc``; the store writer process excluded)."""
    d, p = [], []
    cpu0 = None
    with httpx2.Client(timeout=30) as c:
        for i, t in enumerate(tickets):
            if i == warmup:
                cpu0 = _cpu_s(proxy_pid)
            body = json.dumps(_body(f"{t} #{i}")).encode()
            pair = []
            for url in (direct, proxied) if i % 2 == 0 else (proxied, direct):
                t0 = time.perf_counter()
                r = c.post(url + "/chat/completions", content=body, headers={"Content-Type": "application/json",
                                                                             "Authorization": f"Bearer {KEY}"})
                r.read()
                pair.append((url, (time.perf_counter() - t0) * 1000.0))
                assert r.status_code == 200, r.text
            if i >= warmup:
                for url, ms in pair:
                    (d if url == direct else p).append(ms)
    cpu1 = _cpu_s(proxy_pid)
    diffs = [b - a for a, b in zip(d, p)]
    return {"direct_ms": _summary(d), "proxy_ms": _summary(p), "paired_overhead_ms": _summary(diffs),
            "overhead_p50_ms": round((_pct(p, 0.5) or 0) - (_pct(d, 0.5) or 0), 4), "target_p50_ms": 1.0,
            "proxy_cpu_ms_per_call": round((cpu1 - cpu0) * 1000.0 / len(p), 4) if cpu0 is not None and cpu1 is not None and p else None}


def measure_overhead_in_process(direct: str, store: Path, tickets: list[str]) -> dict[str, Any]:
    """The same measurement with the proxy on a thread of this process (one process hop fewer per
    call: what the proxy costs without the operating system's scheduling of a third process)."""
    from auto.proxy import ProxyConfig, ProxyServer

    with ProxyServer(ProxyConfig(upstream=direct, store=str(store), port=0, answer=False)) as px:
        return measure_overhead(direct, px.base_url, tickets)


def measure_ttfb(direct: str, proxied: str, tickets: list[str], warmup: int = 30) -> dict[str, Any]:
    """Streamed calls: time to the first body bytes, direct and through the proxy (ms)."""
    d, p, dt, pt = [], [], [], []
    with httpx2.Client(timeout=30) as c:
        for i, t in enumerate(tickets):
            body = json.dumps(_body(f"{t} ~{i}", stream=True)).encode()
            for url in (direct, proxied) if i % 2 == 0 else (proxied, direct):
                t0 = time.perf_counter()
                with c.stream("POST", url + "/chat/completions", content=body,
                              headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}) as r:
                    it = r.iter_raw()
                    next(it)
                    first = (time.perf_counter() - t0) * 1000.0
                    for _ in it:
                        pass
                total = (time.perf_counter() - t0) * 1000.0
                if i >= warmup:
                    (d if url == direct else p).append(first)
                    (dt if url == direct else pt).append(total)
    return {"direct_first_byte_ms": _summary(d), "proxy_first_byte_ms": _summary(p),
            "first_byte_difference_p50_ms": round((_pct(p, 0.5) or 0) - (_pct(d, 0.5) or 0), 4),
            "direct_total_ms": _summary(dt), "proxy_total_ms": _summary(pt), "target_ms": 1.0}


# ----------------------------------------------------------------------------- 3: concurrency


async def _load(url: str, clients: int, per_client: int, tag: str) -> tuple[int, list[str], float]:
    errors: list[str] = []
    done = 0

    async def one(k: int, session: aiohttp.ClientSession) -> None:
        nonlocal done
        for i in range(per_client):
            body = _body(f"{tag} client {k} call {i}: I was charged twice for my plan")
            try:
                async with session.post(url + "/chat/completions", json=body,
                                        headers={"Authorization": f"Bearer {KEY}"}) as r:
                    await r.read()
                    if r.status != 200:
                        errors.append(f"status {r.status}")
                    else:
                        done += 1
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                errors.append(f"{type(e).__name__}: {e}")

    t0 = time.perf_counter()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients),
                                     timeout=aiohttp.ClientTimeout(total=600)) as session:
        await asyncio.gather(*(one(k, session) for k in range(clients)))
    return done, errors, time.perf_counter() - t0


def measure_concurrency(proxied: str, store: Path, proxy: Process, clients: int, per_client: int) -> dict[str, Any]:
    tag = f"load-{os.getpid()}"
    done, errors, secs = asyncio.run(_load(proxied, clients, per_client, tag))
    proxy.stop()  # SIGINT: the proxy writes what is queued and closes the store
    with Store(store) as st:
        rows = [s for s in st.spans(kind="llm") if tag in json.dumps(s["input"])]
        report = st.verify()
    texts = [r["input"]["messages"][1]["content"] for r in rows]
    want = {f"{tag} client {k} call {i}: I was charged twice for my plan" for k in range(clients) for i in range(per_client)}
    return {"clients": clients, "per_client": per_client, "calls": clients * per_client, "answered": done,
            "client_errors": len(errors), "errors": sorted(set(errors))[:10], "seconds": round(secs, 3),
            "calls_per_s": round(done / secs, 1) if secs else None, "recorded": len(rows),
            "recorded_distinct": len(set(texts)), "missing": len(want - set(texts)),
            "duplicated": len(texts) - len(set(texts)), "store_verified": report.ok}


# ----------------------------------------------------------------------------- 4, 5: zero code change


def _write_jsonl(path: Path, tickets: list[str]) -> Path:
    path.write_text("".join(json.dumps({"ticket": t}) + "\n" for t in tickets), encoding="utf-8")
    return path


def _run_agent(script: Path, tickets_file: Path, base_url: str, *, record_store: Path | None = None,
               log: Path | None = None) -> list[dict]:
    env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": KEY, "AUTO_REFERENCE_MODEL": MODEL}
    argv = [sys.executable, str(script), str(tickets_file)]
    if record_store is not None:
        argv = [sys.executable, "-m", "auto.cli", "record", "--store", str(record_store), "--", *argv]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    if log is not None:
        log.write_text(p.stderr)
    if p.returncode != 0:
        raise RuntimeError(f"{script.name} failed ({p.returncode}): {p.stderr[-800:]}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def _compile_site(store: Path, out: Path, log: Path, contract: Path | None = None) -> dict[str, Any]:
    census = subprocess.run([sys.executable, "-m", "auto.cli", "census", "--store", str(store), "--json"],
                            capture_output=True, text=True, timeout=600)
    c = json.loads(census.stdout)
    sites = [s for s in c["sites"] if s.get("model_call")]
    site = max(sites, key=lambda s: s["spans"])
    p = subprocess.run([sys.executable, "-m", "auto.cli", "compile", "--store", str(store), "--site", site["site"],
                        "--out", str(out), "--json", *(["--contract", str(contract)] if contract else [])],
                       capture_output=True, text=True, timeout=1800)
    log.write_text(p.stderr)
    outcome = json.loads(p.stdout) if p.returncode == 0 else {"verdict": "refused", "reason": p.stderr.strip()[-500:]}
    return {"census": {"sites": len(c["sites"]), "spans": c["spans"], "headline": c["headline"],
                       "site": {k: site[k] for k in ("site", "distinct_inputs", "spans", "deterministic_spans",
                                                    "witnessed-deterministic", "divergent", "deterministic_input_fraction")},
                       "slots": site["model_call"]["slots"]},
            "compile": {k: outcome.get(k) for k in ("verdict", "compiled_as", "generation", "artifact_id", "artifact_bytes",
                                                     "reason", "parity")}}


def _stream_through(proxy_url: str, tickets: list[str]) -> list[tuple[str | None, str]]:
    """``(x-auto-tier, normalized label)`` per item, sent as the agent sends it."""
    c = openai.OpenAI(base_url=proxy_url, api_key=KEY, max_retries=3)
    out = []
    for t in tickets:
        raw = c.chat.completions.with_raw_response.create(model=MODEL, temperature=TEMPERATURE, messages=[
            {"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": t}])
        out.append((raw.headers.get("x-auto-tier"), normalize(raw.parse().choices[0].message.content)))
    return out


def _tier1_latency(proxy_url: str, tickets: list[str], n: int = 400, warmup: int = 50) -> dict[str, Any]:
    xs: list[float] = []
    tiers: list[str | None] = []
    with httpx2.Client(timeout=30) as c:
        for i in range(n + warmup):
            body = json.dumps(_body(tickets[i % len(tickets)])).encode()
            t0 = time.perf_counter()
            r = c.post(proxy_url + "/chat/completions", content=body, headers={"Content-Type": "application/json"})
            r.read()
            ms = (time.perf_counter() - t0) * 1000.0
            if i >= warmup:
                tiers.append(r.headers.get("x-auto-tier"))
                if r.headers.get("x-auto-tier") == "1":
                    xs.append(ms)
    return {**_summary(xs), "tier1_share_of_calls": round(tiers.count("1") / len(tiers), 4) if tiers else None,
            "target_p50_ms": 1.0}


def _copy_store(src: Path, dst: Path) -> Path:
    import sqlite3

    for p in dst.parent.glob(dst.name + "*"):
        p.unlink()
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    return dst


CONTRACTS = {"default": None, "epsilon_0.02": "epsilon = 0.02\n"}
"""The contracts each leg's site is compiled (and its ratchet gated) with: the default
(epsilon 0.05) and a tighter selective-risk level."""


def zero_code_change(work: Path, sim_url: str, seed: int, stream_items: int, train_tickets: int,
                     say: Callable[[str], None]) -> dict[str, Any]:
    base = corpus.generate(train_tickets + stream_items, seed=seed)
    cor = {"train": base[:train_tickets], "stream_pool": base[train_tickets:], "shift": []}
    train = [t.ticket for t in cor["train"]]
    stream = [t.ticket for t in corpus.shifted_stream(cor, items=stream_items, shift_share=0.0, seed=seed)]
    train2 = _write_jsonl(work / "train_twice.jsonl", train + train)
    stream_file = _write_jsonl(work / "stream.jsonl", stream)
    seen = set(train)
    out: dict[str, Any] = {"training_tickets": len(train), "recorded_passes": 2, "stream_items": len(stream),
                           "stream_distinct": len(set(stream)), "stream_never_recorded": sum(1 for t in stream if t not in seen)}
    say("  control: the agent directly on the simulator, twice over the stream")
    ref1 = [r["label"] for r in _run_agent(TRIAGE_AGENT, stream_file, sim_url)]
    ref2 = [r["label"] for r in _run_agent(TRIAGE_AGENT, stream_file, sim_url)]
    recorded = {"auto_record": work / "recorded.sqlite", "proxy": work / "proxied.sqlite"}
    say(f"  recording with auto record (no code change): {len(train)} tickets twice")
    t0 = time.perf_counter()
    _run_agent(TRIAGE_AGENT, train2, sim_url, record_store=recorded["auto_record"], log=work / "record.log")
    seconds = {"auto_record": time.perf_counter() - t0}
    say("  recording through auto proxy --record-only")
    px, px_url = proxy_process(sim_url, recorded["proxy"], work / "proxy_record.log", "--record-only")
    t0 = time.perf_counter()
    try:
        _run_agent(TRIAGE_AGENT, train2, px_url)
    finally:
        px.stop()
    seconds["proxy"] = time.perf_counter() - t0
    legs: dict[str, Any] = {}
    for leg, rec_store in recorded.items():
        for cname, ctext in CONTRACTS.items():
            name = f"{leg}/{cname}"
            store = _copy_store(rec_store, work / f"{leg}_{cname}.sqlite")
            cpath = None
            if ctext is not None:
                cpath = work / f"{cname}.toml"
                cpath.write_text(ctext)
            say(f"  {name}: census + auto compile --site")
            info = _compile_site(store, work / f"{leg}_{cname}.wasm", work / f"compile_{leg}_{cname}.log", cpath)
            info["recording_seconds"] = round(seconds[leg], 2)
            say(f"  {name}: {info['compile']['verdict']} {info['compile'].get('compiled_as')}; the fresh stream through auto proxy")
            px, px_url = proxy_process(sim_url, store, work / f"proxy_{leg}_{cname}.log",
                                       *(["--contract", str(cpath)] if cpath else []))
            try:
                got = _stream_through(px_url, stream)
                tier1_items = [i for i, (tier, _) in enumerate(got) if tier == "1"]
                ex = excess_disagreement([got[i][1] for i in tier1_items], [ref1[i] for i in tier1_items],
                                         [ref2[i] for i in tier1_items])
                k = ex["tier1_disagreements"]
                info["stream"] = {"tier1": len(tier1_items), "items": len(got),
                                  "tier1_share": round(len(tier1_items) / len(got), 4),
                                  "tier1_share_ci95": [round(x, 4) if x is not None else None
                                                       for x in clopper_pearson(len(tier1_items), len(got))],
                                  "tier1_on_never_recorded": sum(1 for i in tier1_items if stream[i] not in seen),
                                  "excess_silent_wrong": ex,
                                  "tier1_disagreement_ci95_high": clopper_pearson(k, len(tier1_items))[1] if tier1_items else None,
                                  "parity_all_items": round(sum(1 for i, (_, a) in enumerate(got) if a == ref1[i]) / len(got), 4),
                                  "reference_self_agreement_all_items": round(sum(1 for a, b in zip(ref1, ref2) if a == b) / len(got), 4),
                                  "targets": {"tier1_share": 0.80, "excess_silent_wrong_points": 1.0}}
                answered = [stream[i] for i in tier1_items]
                if answered and cname == "default":
                    say(f"  {name}: tier-1 latency through the proxy")
                    info["tier1_latency_ms"] = _tier1_latency(px_url, answered)
                status = httpx2.get(px_url.rsplit("/v1", 1)[0] + "/auto/status").json()
                info["proxy_status"] = {sid: {"counters": v["counters"], "generation": (v["ratchet"] or {}).get("generation")}
                                        for sid, v in status["sites"].items()}
            finally:
                px.stop()
            legs[name] = info
    out["legs"] = legs
    return out


# ----------------------------------------------------------------------------- 6, 7


def urllib_agent(work: Path, sim_url: str, n: int = 40) -> dict[str, Any]:
    store = work / "urllib.sqlite"
    tickets = _write_jsonl(work / "urllib.jsonl", _tickets(n, seed=99))
    px, px_url = proxy_process(sim_url, store, work / "proxy_urllib.log", "--record-only")
    try:
        rows = _run_agent(URLLIB_AGENT, tickets, px_url)
    finally:
        px.stop()
    with Store(store) as st:
        spans = st.spans(kind="llm")
    logical = {s["attributes"].get("auto.logical_call_id") for s in spans if s["status"] == "ok"}
    return {"calls": len(rows), "streamed_calls": sum(1 for i in range(len(rows)) if i % 2 == 1),
            "spans": len(spans), "ok_spans": sum(1 for s in spans if s["status"] == "ok"),
            "streamed_spans": sum(1 for s in spans if s["attributes"].get("auto.stream") and s["status"] == "ok"),
            "logical_calls_answered": len(logical), "every_call_recorded": len(logical) == len(rows)}


def serve_latency(artifact: Path, inputs: list[dict], work: Path, n: int = 400, warmup: int = 50) -> dict[str, Any]:
    port = _free_port()
    p = Process([sys.executable, "-m", "auto.cli", "serve", str(artifact), "--port", str(port)],
                f"http://127.0.0.1:{port}/health", log=work / "serve.log")
    xs = []
    tiers = []
    try:
        aid = httpx2.get(f"http://127.0.0.1:{port}/v1/artifacts").json()["artifacts"][0]["id"]
        with httpx2.Client(timeout=30) as c:
            for i in range(n + warmup):
                t0 = time.perf_counter()
                r = c.post(f"http://127.0.0.1:{port}/v1/artifacts/{aid}/run", json=inputs[i % len(inputs)])
                r.read()
                ms = (time.perf_counter() - t0) * 1000.0
                if i >= warmup:
                    tiers.append(r.status_code)
                    if r.status_code == 200:
                        xs.append(ms)
    finally:
        p.stop()
    return {**_summary(xs), "answered_200": tiers.count(200), "declined_409": tiers.count(409)}


# ----------------------------------------------------------------------------- the run


def run_anyagent(out_dir: Path, *, seed: int = 0, calls: int = 500, clients: int = 100, per_client: int = 50,
                 stream_items: int = 300, train_tickets: int = 1000,
                 progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every measurement (see the module docstring); writes ``results.json`` in ``out_dir``."""
    say = progress or (lambda _m: None)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = out_dir / "work"
    work.mkdir(exist_ok=True)
    for p in work.glob("*.sqlite*"):
        p.unlink()
    results: dict[str, Any] = {"reference_model": "simulated: auto-sim-1", "seed": seed,
                               "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                                           "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}}
    clean, clean_url = sim_process(seed, 0.0, work / "sim_clean.log")
    noisy, noisy_url = sim_process(seed, 0.02, work / "sim.log")
    try:
        say("overhead and time to first byte (record-only proxy, interleaved with direct calls)")
        px, px_url = proxy_process(clean_url, work / "overhead.sqlite", work / "proxy_overhead.log", "--record-only")
        try:
            tickets = _tickets(max(calls, 200) + 60, seed=seed + 50)
            results["overhead"] = measure_overhead(clean_url, px_url, tickets[:calls + 50], proxy_pid=px.proc.pid)
            results["ttfb"] = measure_ttfb(clean_url, px_url, tickets[:200 + 30])
        finally:
            px.stop()
        results["overhead_in_process"] = measure_overhead_in_process(clean_url, work / "overhead_ip.sqlite",
                                                                     [t + " (in process)" for t in tickets[:calls + 50]])
        say(f"{clients} concurrent clients x {per_client} calls through the proxy")
        px, px_url = proxy_process(clean_url, work / "load.sqlite", work / "proxy_load.log", "--record-only")
        results["concurrency"] = measure_concurrency(px_url, work / "load.sqlite", px, clients, per_client)
        say("the README's agent, no code change: auto record and auto proxy")
        results["zero_code_change"] = zero_code_change(work, noisy_url, seed, stream_items, train_tickets, say)
        say("the urllib-only agent through the proxy")
        results["urllib_agent"] = urllib_agent(work, clean_url)  # the simulator re-rolls an error only on an SDK retry header
        art = work / "auto_record_default.wasm"
        if art.exists():
            say("auto serve: tier-1 runs of the compiled site")
            from auto.sites import Site
            from auto_runtime import Artifact

            a = Artifact.load(art)
            site = Site.from_manifest(a.typed_manifest.site)
            inputs = [site.extract(_body(t.ticket)) for t in corpus.generate(200, seed=seed)]
            results["serve"] = serve_latency(art, [x for x in inputs if x is not None], work)
    finally:
        clean.stop()
        noisy.stop()
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return results


def render(results: dict[str, Any]) -> str:
    """A short text summary of :func:`run_anyagent`'s results."""
    o, t, c = results.get("overhead", {}), results.get("ttfb", {}), results.get("concurrency", {})
    oi = results.get("overhead_in_process", {})
    lines = [
        f"load average {results.get('machine', {}).get('load_average_at_start')} at start, "
        f"{results.get('machine', {}).get('load_average_at_end')} at end ({results.get('machine', {}).get('cpus')} cpus)",
        f"overhead p50: direct {o.get('direct_ms', {}).get('p50')} ms, proxy {o.get('proxy_ms', {}).get('p50')} ms, "
        f"difference {o.get('overhead_p50_ms')} ms (paired p50 {o.get('paired_overhead_ms', {}).get('p50')} ms; target <= 1 ms); "
        f"proxy CPU {o.get('proxy_cpu_ms_per_call')} ms per call",
        f"overhead p50, proxy on a thread of the client's process: {oi.get('overhead_p50_ms')} ms",
        f"first byte p50: direct {t.get('direct_first_byte_ms', {}).get('p50')} ms, proxy "
        f"{t.get('proxy_first_byte_ms', {}).get('p50')} ms (difference {t.get('first_byte_difference_p50_ms')} ms; target <= 1 ms)",
        f"load: {c.get('clients')} clients x {c.get('per_client')}: answered {c.get('answered')}, recorded {c.get('recorded')}, "
        f"missing {c.get('missing')}, duplicated {c.get('duplicated')}, store verified {c.get('store_verified')}, "
        f"{c.get('calls_per_s')} calls/s",
    ]
    for leg, info in (results.get("zero_code_change", {}).get("legs") or {}).items():
        s = info.get("stream") or {}
        ex = s.get("excess_silent_wrong") or {}
        lat = info.get("tier1_latency_ms") or {}
        lines.append(f"{leg}: compiled {info['compile'].get('compiled_as')}; tier-1 {s.get('tier1')}/{s.get('items')} "
                     f"({s.get('tier1_share')}); excess silent-wrong {ex.get('excess')} (tier-1 disagreement "
                     f"{ex.get('tier1_disagreement')}, reference self-disagreement {ex.get('reference_disagreement')}); "
                     f"tier-1 p50 {lat.get('p50')} ms")
    u = results.get("urllib_agent") or {}
    lines.append(f"urllib agent: {u.get('calls')} calls, {u.get('logical_calls_answered')} recorded answered "
                 f"({u.get('streamed_spans')} streamed)")
    sv = results.get("serve") or {}
    lines.append(f"auto serve tier-1 run p50 {sv.get('p50')} ms, p95 {sv.get('p95')} ms")
    return "\n".join(lines)
