"""``python -m fuzz.soak [--minutes 10] [--workers 8] [--out out/soak]``: recorders killed with
``kill -9`` at random, and what that loses.

Eight recorder processes (``--workers``) record into one store at once: each runs tasks with a
tool span and a model call to the simulated reference model on loopback (plain, streamed, or a
stream the caller breaks out of). Every span a worker opens, and every span whose write was
committed or journaled (the recorder's journal is replayed at the next open when its writer
died), is appended to the worker's log (``o <span id>`` / ``w <span id>``, one ``write(2)`` per
line, so the log survives ``kill -9``). The harness kills a random worker every 0.5–3 s
(``SIGKILL``; a worker still importing is waited for until it records) and starts a new one, for
``--minutes`` counted from when the first workers record; at the end every worker is killed.

What must hold (the report's ``ok``):

* no span that a worker saw journaled or committed is missing from the store, and every stored span was
  opened by a worker;
* the spans lost at each kill are exactly the spans open at that kill (opened, not yet
  journaled), less those journaled in the instant between the write and its log line
  (``committed_unlogged``, at most one per kill);
* the store verifies (every digest, the row counters, the triggers).

The report (JSON on stdout and ``report.json`` in ``--out``): kills, spans written (in the
store), spans lost, spans open at the kills, per-kill rows. Not part of ``make test`` (it runs
for minutes); ``tests/test_soak.py`` runs it for a few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = ("[auto-bench:triage] You are a customer-support triage assistant. Classify the support ticket into "
          "exactly one of these labels: billing, bug, feature, account, shipping, security. Answer with the label only.")
TICKETS = ["I was charged twice for my subscription", "The app crashes on startup", "Please add dark mode",
           "I cannot log in to my account", "My package never arrived", "Suspicious login from another country"]


# ----------------------------------------------------------------------------- worker


def worker_main(store: str, log_path: str, base_url: str, seed: int) -> None:
    """Record tasks into ``store`` until killed, logging opened and journaled or committed span ids."""
    import openai

    import auto
    from auto.record.core import SpanScope
    from auto.record.model_call import Attempt
    from auto.store.journal import Journal

    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(tag: str, ids: list[str]) -> None:
        if ids:
            os.write(fd, "".join(f"{tag} {i}\n" for i in ids).encode())

    orig_open = SpanScope.open.__func__

    def logged_open(cls, *a, **kw):  # type: ignore[no-untyped-def]
        scope = orig_open(cls, *a, **kw)
        log("o", [scope.span_id])
        return scope

    SpanScope.open = classmethod(logged_open)  # type: ignore[method-assign]
    orig_init = Attempt.__init__

    def logged_init(self, *a, **kw):  # type: ignore[no-untyped-def]
        orig_init(self, *a, **kw)
        log("o", [self.span_id])

    Attempt.__init__ = logged_init  # type: ignore[method-assign]
    rec = auto.start_recording(store)
    ingest = rec.store.ingest

    def logged_ingest(spans=(), traces=()):  # type: ignore[no-untyped-def]
        spans = list(spans)
        res = ingest(spans, traces)
        log("w", [s["span_id"] for s in spans])
        return res

    rec.store.ingest = logged_ingest  # type: ignore[method-assign]
    orig_append = Journal.append

    def logged_append(self, spans, traces):  # type: ignore[no-untyped-def]
        payload = orig_append(self, spans, traces)  # durable from here: replayed at the next open if the writer dies
        log("w", [s["span_id"] for s in spans])
        return payload

    Journal.append = logged_append  # type: ignore[method-assign]
    client = openai.OpenAI(base_url=base_url, api_key="sk-soak-not-a-key", max_retries=2)
    rng = random.Random(seed)

    @auto.task("triage")
    def triage(ticket: str) -> str:
        with auto.tool("lookup", input={"ticket": ticket}) as t:
            t.output = len(ticket)
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ticket}]
        how = rng.random()
        if how < 0.5:
            r = client.chat.completions.create(model="auto-sim-1", temperature=0, messages=msgs)
            return r.choices[0].message.content or ""
        stream = client.chat.completions.create(model="auto-sim-1", temperature=0, messages=msgs, stream=True)
        text = ""
        for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            if how > 0.85:
                break  # the caller stops reading: the attempt ends here
        return text

    print("ready", flush=True)
    while True:
        triage(f"{rng.choice(TICKETS)} (#{rng.randrange(10**6)})")


# ----------------------------------------------------------------------------- harness


def _read_log(path: Path) -> tuple[set[str], set[str]]:
    opened, written = set(), set()
    for line in path.read_text().splitlines():
        tag, _, sid = line.partition(" ")
        if len(sid) == 16:  # a line cut by the kill is ignored (never happens with one write(2))
            (opened if tag == "o" else written).add(sid)
    return opened, written


READY_TIMEOUT_S = 120.0
"""How long the harness waits for a new worker to start recording before it may kill it anyway."""


class _Worker:
    def __init__(self, n: int, out: Path, store: Path, base_url: str, seed: int) -> None:
        self.n, self.log = n, out / f"worker-{n:04d}.log"
        self.proc = subprocess.Popen([sys.executable, "-m", "fuzz.soak", "--worker", str(store), str(self.log), base_url,
                                      str(seed)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.started = time.monotonic()
        self.ready = False

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Block until the worker printed ``ready`` (its imports done, recording started), at most
        ``timeout_s``: a worker killed while it is still importing would record nothing."""
        if self.ready:
            return
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and self.proc.poll() is None:
            r, _, _ = select.select([self.proc.stdout], [], [], max(0.0, end - time.monotonic()))
            if r and self.proc.stdout.readline().strip() == "ready":
                self.ready = True
                return

    def kill(self) -> dict:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        opened, written = _read_log(self.log) if self.log.exists() else (set(), set())
        return {"worker": self.n, "alive_s": round(time.monotonic() - self.started, 2), "opened": opened,
                "written": written}


def run_soak(minutes: float, workers: int, out: Path, seed: int = 0, progress=lambda m: None) -> dict:
    """Run the soak (see the module docstring); returns the report."""
    from auto.store import Store
    from bench.sim import SimServer

    out.mkdir(parents=True, exist_ok=True)
    for f in out.glob("worker-*.log"):
        f.unlink()
    store = out / "soak.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    Store(store).close()
    rng = random.Random(seed)
    kills: list[dict] = []
    with SimServer(seed=seed, error_rate=0.01) as sim:
        n = 0
        live = []
        for _ in range(workers):
            live.append(_Worker(n, out, store, sim.base_url, seed * 100_000 + n))
            n += 1
        for w in live:  # the clock starts when every first worker records
            w.wait_ready()
        deadline = time.monotonic() + minutes * 60
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.5, 3.0))
            victim = live.pop(rng.randrange(len(live)))
            victim.wait_ready()  # never kill a worker before it records (a loaded host imports slowly)
            kills.append(victim.kill())
            live.append(_Worker(n, out, store, sim.base_url, seed * 100_000 + n))
            n += 1
            if len(kills) % 20 == 0:
                progress(f"[soak] {len(kills)} kills, {round(deadline - time.monotonic())} s left")
        for w in live:  # the end: every worker is killed too
            kills.append(w.kill())
    with Store(store) as st:
        rep = st.verify()
        stored = {s["span_id"] for s in st.spans()}
        kinds = {}
        for s in st.spans():
            kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
    rows, all_opened = [], set()
    for k in kills:
        opened, written = k["opened"], k["written"]
        all_opened |= opened
        open_at_kill = opened - written
        lost = opened - stored
        rows.append({"worker": k["worker"], "alive_s": k["alive_s"], "opened": len(opened), "written": len(written),
                     "open_at_kill": len(open_at_kill), "lost": len(lost),
                     "committed_unlogged": len(open_at_kill & stored),
                     "acknowledged_but_missing": len(written - stored), "lost_not_open": len(lost - open_at_kill)})
    phantom = stored - all_opened
    total = {k: sum(r[k] for r in rows) for k in ("opened", "open_at_kill", "lost", "committed_unlogged",
                                                  "acknowledged_but_missing", "lost_not_open")}
    ok = (rep.ok and not phantom and total["acknowledged_but_missing"] == 0 and total["lost_not_open"] == 0
          and all(r["committed_unlogged"] <= 1 for r in rows)
          and total["lost"] == total["open_at_kill"] - total["committed_unlogged"])
    report = {"ok": ok, "minutes": minutes, "workers": workers, "kills": len(kills), "spans_written": len(stored),
              "spans_by_kind": kinds, "spans_lost": total["lost"], "spans_open_at_kills": total["open_at_kill"],
              "committed_unlogged": total["committed_unlogged"], "acknowledged_but_missing": total["acknowledged_but_missing"],
              "lost_not_open": total["lost_not_open"], "stored_never_opened": len(phantom), "store_verified": rep.ok,
              "store_mismatches": rep.mismatches[:5], "per_kill": rows}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        worker_main(argv[1], argv[2], argv[3], int(argv[4]))
        return 0
    ap = argparse.ArgumentParser(prog="python -m fuzz.soak", description="Recorders killed with kill -9 at random.")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "soak")
    args = ap.parse_args(argv)
    report = run_soak(args.minutes, args.workers, args.out, args.seed, progress=lambda m: print(m, file=sys.stderr, flush=True))
    summary = {k: v for k, v in report.items() if k != "per_kill"}
    print(json.dumps(summary, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
