"""The ratchet in the product: serve, capture every deopt, compile in the background, swap, restart.

The reference is a deterministic keyword classifier over the shared synthetic ticket corpus, so
the specialist can be certified after a few dozen witnesses; compiles run on a thread here (the
child-process worker has its own tests below).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import auto
from auto.errors import ArgumentError
from auto.ratchet import CompilePolicy, Ratchet
from auto.ratchet.evidence import RiskMonitor, upper_confidence_bound
from auto.ratchet.policy import PolicyState
from auto.ratchet.worker import CompileRequest, run_compile
from auto.store import Store
from auto.verify import Contract, clopper_pearson

from specialist_corpus import TOPICS, tickets

ORDER = sorted(TOPICS)


def classify(ticket: str) -> str:
    """The reference: the topic with the most keyword hits (ties by name)."""
    low = ticket.lower()
    hits = {t: sum(low.count(k.lower()) for k in kws) for t, kws in TOPICS.items()}
    return max(ORDER, key=lambda t: (hits[t], -ORDER.index(t)))


class Counting:
    """The reference with a call counter (and an optional failure switch); tickets that mention a
    parcel are "shipping", a label the synthetic corpus never has."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    def __call__(self, inp: dict) -> str:
        self.calls += 1
        if self.fail:
            raise RuntimeError("the model endpoint is down")
        return "shipping" if "parcel" in inp["ticket"] else classify(inp["ticket"])


def parcels(n: int) -> list[dict]:
    return [{"ticket": f"where is my parcel number {i}, the courier lost it {i * 7}"} for i in range(n)]


def stream(n: int, seed: int = 0) -> list[dict]:
    return [{"ticket": t} for t, _ in tickets(n, seed)]


def make(tmp_path: Path, ref=None, **kw) -> Ratchet:
    kw.setdefault("worker", "thread")
    kw.setdefault("audit_rate", 0.2)
    kw.setdefault("programs", False)
    kw.setdefault("policy", CompilePolicy(first_at=45, min_new=15, growth=0.3))
    return Ratchet(ref or Counting(), tmp_path / "r.sqlite", "triage", **kw)


def drive(r: Ratchet, items: list[dict]) -> list:
    out = []
    for inp in items:
        out.append(r.call_result(inp))
        r.wait_idle(120)
    return out


def test_cold_stream_installs_generations_and_serves_tier1(tmp_path):
    ref = Counting()
    r = make(tmp_path, ref)
    res = drive(r, stream(220))
    tiers = [x.tier for x in res]
    assert tiers[:45] == ["tier-0"] * 45  # nothing to answer with before the first generation
    assert r.generation is not None and r.generation >= 1
    late = tiers[-60:]
    assert late.count("tier-1") >= 45, late.count("tier-1")
    # every answer equals the deterministic reference's
    wrong = [x for x, inp in zip(res, stream(220)) if x.answer != classify(inp["ticket"])]
    assert len(wrong) <= 2
    # every deopt became a witness (audits too); the log holds the attempts and installs
    with Store(tmp_path / "r.sqlite") as st:
        assert len(st.witnesses("triage")) == tiers.count("tier-0") + r.tiered.audit.n
        kinds = [e["kind"] for e in st.ratchet_events("triage")]
        assert "install" in kinds and kinds.count("compile") >= kinds.count("install")
        compiles = [e for e in st.ratchet_events("triage") if e["kind"] == "compile"]
        assert compiles[0]["detail"]["trigger"]["kind"] == "first"
        assert st.installed_generation("triage") == (r.generation, r.status()["artifact_id"])
    r.close()


def test_restart_loads_the_installed_generation(tmp_path):
    r = make(tmp_path)
    drive(r, stream(120))
    gen, aid = r.generation, r.status()["artifact_id"]
    assert gen is not None
    r.close()
    ref = Counting()
    r2 = make(tmp_path, ref)
    assert r2.generation == gen and r2.status()["artifact_id"] == aid
    res = r2.call_result(stream(120)[5])  # a witnessed input: answered from the table, no reference call
    assert res.tier == "tier-1" and ref.calls == 0
    r2.close()


def test_reference_error_propagates_and_nothing_is_captured(tmp_path):
    ref = Counting()
    r = make(tmp_path, ref)
    ref.fail = True
    with pytest.raises(RuntimeError, match="endpoint is down"):
        r.call({"ticket": "my invoice is wrong"})
    with Store(tmp_path / "r.sqlite") as st:
        assert st.witnesses("triage") == []
    r.close()


def test_a_failing_compile_keeps_the_current_generation_and_is_recorded(tmp_path, monkeypatch):
    r = make(tmp_path)
    drive(r, stream(90))
    gen = r.generation
    assert gen is not None

    import auto.ratchet.core as core

    def broken(req, **kw):
        from auto.ratchet.worker import CompileResult
        return CompileResult("error", "CompileError: boom", req.generation)

    monkeypatch.setattr(core, "run_compile", broken)
    drive(r, parcels(12))  # a new label, witnessed 12 times: the policy asks for a compile
    assert r.generation == gen
    with Store(tmp_path / "r.sqlite") as st:
        errs = [e for e in st.ratchet_events("triage") if e["kind"] == "compile" and e["detail"]["verdict"] == "error"]
    assert errs and errs[-1]["detail"]["reason"] == "CompileError: boom"
    r.close()


def test_risk_alarm_rolls_back(tmp_path):
    r = make(tmp_path)
    drive(r, stream(90))
    assert r.generation is not None
    # audits that all disagree: the monitor must reject the certificate and roll back
    for _ in range(40):
        if r.generation is None:
            break
        r._capture({"task": "triage", "input": {"ticket": f"x {_}"}, "output": "bug", "audit": True, "agree": False,
                    "tier1_score": 0.5, "reason": "shadow-audit"})
    assert r.generation is None
    with Store(tmp_path / "r.sqlite") as st:
        rb = [e for e in st.ratchet_events("triage") if e["kind"] == "rollback"]
        assert rb and "risk alarm" in rb[-1]["detail"]["reason"]
        assert st.installed_generation("triage") is None
    r.close()


def test_two_ratchets_on_one_store_lose_no_witness(tmp_path):
    a = make(tmp_path, Counting())
    b = make(tmp_path, Counting())
    items = stream(160)
    errors: list[BaseException] = []

    def run(r: Ratchet, part: list[dict]) -> None:
        try:
            for inp in part:
                r.call(inp)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ta = threading.Thread(target=run, args=(a, items[0::2]))
    tb = threading.Thread(target=run, args=(b, items[1::2]))
    ta.start(); tb.start(); ta.join(); tb.join()
    a.wait_idle(120); b.wait_idle(120)
    assert not errors
    deopts = a.status()["evidence"]["deopts"] + b.status()["evidence"]["deopts"]
    with Store(tmp_path / "r.sqlite") as st:
        ws = st.witnesses("triage")
        compiles = [e for e in st.ratchet_events("triage") if e["kind"] == "compile"]
        assert st.verify().ok
    # each deopt (and each finished audit) is exactly one witness; nothing lost, nothing doubled
    assert len(ws) >= deopts
    assert len({w.span_id for w in ws}) == len(ws)
    assert compiles  # somebody compiled
    a.close(); b.close()


def test_policy_triggers():
    p = CompilePolicy(first_at=20, min_new=10, max_new=50, growth=0.15, new_label_support=5, memo_new=8, first_repeats=6)
    assert p.trigger(PolicyState(witnesses=19)) is None
    assert p.trigger(PolicyState(witnesses=20))["kind"] == "first"
    assert p.trigger(PolicyState(witnesses=5, repeats_consistent=6))["kind"] == "first"  # the memo's evidence
    s = PolicyState(installed=1, witnesses=100, witnesses_at_attempt=90, attempts=1)
    assert p.trigger(s) is None  # 10 new but < 15% growth
    s.witnesses = 104
    assert p.trigger(s)["kind"] == "growth"
    s = PolicyState(installed=1, witnesses=1050, witnesses_at_attempt=1000, attempts=1)
    assert p.trigger(s)["kind"] == "growth"  # 50 new witnesses: learn from them whatever the share
    s = PolicyState(installed=1, witnesses=100, witnesses_at_attempt=100, attempts=1, new_labels={"\"x\"": 5})
    assert p.trigger(s)["kind"] == "new-label"
    s = PolicyState(installed=1, witnesses=100, witnesses_at_attempt=100, attempts=1, alarm="shift-alarm",
                    new_since_alarm=1)
    assert p.trigger(s)["kind"] == "shift-alarm"
    s.alarm_streak = 2  # the third alarm compile in a row waits for 4 new witnesses
    assert p.trigger(s) is None
    s.new_since_alarm = 4
    assert p.trigger(s)["kind"] == "shift-alarm"
    # re-verification of the installed generation on what it deopted: it would have been right
    s = PolicyState(installed=1, witnesses=100, witnesses_at_attempt=100, attempts=1, deopts_since_attempt=20,
                    would_be_correct_since_attempt=19)
    assert p.trigger(s)["kind"] == "headroom"
    s.would_be_correct_since_attempt = 15
    assert p.trigger(s) is None
    # a table refresh: the installed table lags inputs that were witnessed and came back
    s = PolicyState(installed=1, witnesses=100, witnesses_at_attempt=100, attempts=1, repeats_consistent=8,
                    known_misses=8)
    assert p.trigger(s)["kind"] == "memo"
    s.known_misses_at_attempt = 1
    assert p.trigger(s) is None
    s = PolicyState(installed=1, witnesses=100, witnesses_at_attempt=100, attempts=1, repeats_consistent=2,
                    known_misses=8)
    assert p.trigger(s) is None  # no evidence yet that the task repeats itself


def test_risk_monitor_false_alarm_rate_and_power():
    import random
    rng = random.Random(1)
    false = sum(_run_monitor(rng, 0.05, 1500) for _ in range(300))
    assert false / 300 <= 0.05 + 3 * (0.05 * 0.95 / 300) ** 0.5  # Ville: at most alpha, with sampling slack
    hits = sum(_run_monitor(rng, 0.2, 300) for _ in range(100))
    assert hits >= 95  # a rate four times epsilon is caught within 300 audits


def _run_monitor(rng, p: float, n: int) -> bool:
    m = RiskMonitor(0.05, 0.05)
    for _ in range(n):
        m.update(rng.random() < p)
    return m.alarm


def test_anytime_upper_bound_covers_and_is_wider_than_fixed_n():
    for k, n in ((0, 50), (2, 100), (10, 400)):
        ucb = upper_confidence_bound(k, n, 0.05)
        assert ucb >= clopper_pearson(k, n)[1] - 0.002
        assert ucb < 1.0
    assert upper_confidence_bound(0, 0) is None


def test_compile_in_a_child_process_and_timeout(tmp_path):
    r = make(tmp_path)
    drive(r, stream(60))
    r.close()
    req = CompileRequest(store_path=str(tmp_path / "r.sqlite"), task="triage",
                         contract=Contract(task="triage").model_dump(), generation=50,
                         out_path=str(tmp_path / "g50.wasm"), programs=False)
    res = run_compile(req, timeout_s=300, mode="process")
    assert res.verdict in ("pass", "refuse"), res.reason
    assert res.generation == 50
    killed = run_compile(req, timeout_s=0.05, mode="process")
    assert killed.verdict == "timeout" and "killed" in killed.reason


def test_auto_ratchet_keeps_the_task_signature(tmp_path):
    def triage(ticket: str, lang: str = "en") -> str:
        return classify(ticket)

    served = auto.ratchet(triage, store=tmp_path / "s.sqlite", worker="thread", audit_rate=0.0)
    assert served("my invoice and refund") == classify("my invoice and refund")
    assert served(ticket="crash on start", lang="de") == "bug"
    with Store(tmp_path / "s.sqlite") as st:
        assert [w.input for w in st.witnesses("triage")][-1] == {"ticket": "crash on start", "lang": "de"}
    with pytest.raises(TypeError):
        served()
    served.close()
    with pytest.raises(ArgumentError):
        auto.ratchet(lambda x: x, store=tmp_path / "t.sqlite")
    with pytest.raises(ArgumentError):
        Ratchet(lambda i: 1, tmp_path / "u.sqlite", "t", audit_rate=2.0)


KILL_SCRIPT = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {tests!r})
    from test_ratchet import make_for_subprocess, stream
    r = make_for_subprocess(sys.argv[1])
    for i, inp in enumerate(stream(400)):
        r.call(inp)
        time.sleep(0.03)  # a reference call takes time: compiles finish while the stream goes on
        if r.generation is not None and i % 7 == 0:
            print("gen", r.generation, flush=True)
""")


def make_for_subprocess(path: str) -> Ratchet:
    return Ratchet(Counting(), path, "triage", worker="thread", audit_rate=0.2, programs=False,
                   policy=CompilePolicy(first_at=45, min_new=10, growth=0.1))


def test_kill_minus_nine_mid_stream_restarts_on_a_complete_generation(tmp_path):
    store = tmp_path / "k.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT.format(tests=str(Path(__file__).parent)), str(store)],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seen = 0
    deadline = time.monotonic() + 240
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("gen"):
            seen += 1
            if seen >= 3:
                break
        if time.monotonic() > deadline:
            break
    proc.kill()
    proc.wait(30)
    assert seen >= 1, "the child never installed a generation"
    with Store(store) as st:
        assert st.verify().ok
        cur = st.installed_generation("triage")
        assert cur is not None
    r = make_for_subprocess(str(store))
    assert r.generation == cur[0]
    assert r.call(stream(400)[0]) == classify(stream(400)[0]["ticket"])
    r.close()


def test_task_decorator_with_ratchet(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTO_STORE", str(tmp_path / "env.sqlite"))
    calls = []

    @auto.task("triage", ratchet=True)
    def triage(ticket: str) -> str:
        calls.append(ticket)
        return classify(ticket)

    assert triage(ticket="my invoice was charged twice") == "billing"
    assert triage("my invoice was charged twice") == "billing"  # positional, same signature
    r = triage.ratchet()
    assert r.task == "triage" and r.store_path == str(tmp_path / "env.sqlite") and len(calls) == 2
    with Store(tmp_path / "env.sqlite") as st:
        assert len(st.witnesses("triage")) == 2
    r.close()

    @auto.task("other", ratchet=tmp_path / "p.sqlite")
    def other(x: str) -> str:
        return x.upper()

    assert other("a") == "A" and other.ratchet().store_path == str(tmp_path / "p.sqlite")
    other.ratchet().close()
    with pytest.raises(auto.errors.RecordError, match="synchronous"):
        @auto.task("bad", ratchet=True)
        async def bad(x: str) -> str:
            return x


def test_a_killed_compile_process_is_recorded_as_crashed(tmp_path):
    import multiprocessing
    import signal

    r = make(tmp_path)
    drive(r, stream(60))
    r.close()
    req = CompileRequest(store_path=str(tmp_path / "r.sqlite"), task="triage",
                         contract=Contract(task="triage").model_dump(), generation=60,
                         out_path=str(tmp_path / "g60.wasm"), programs=False)
    box: list = []
    th = threading.Thread(target=lambda: box.append(run_compile(req, timeout_s=120, mode="process")))
    th.start()
    deadline = time.monotonic() + 60
    while not multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.01)
    for child in multiprocessing.active_children():
        os.kill(child.pid, signal.SIGKILL)
    th.join(120)
    assert box and box[0].verdict == "crashed" and "exit code -9" in box[0].reason


@pytest.mark.parametrize("message", ["database is locked", "database or disk is full"])
def test_a_store_that_refuses_the_witness_loses_no_answer(tmp_path, monkeypatch, message):
    from auto.errors import StoreError

    ref = Counting()
    r = make(tmp_path, ref)

    def refuse(*a, **k):
        raise StoreError(f"r.sqlite: {message}")

    monkeypatch.setattr(r._store, "add_witness", refuse)
    assert r.call({"ticket": "my invoice was charged twice"}) == "billing"  # the reference's answer comes back
    assert r.capture_errors == 1 and r.status()["capture_errors"] == 1 and r.status()["witnesses"] == 0
    monkeypatch.undo()
    assert r.call({"ticket": "my invoice was charged twice"}) == "billing"
    assert r.status()["witnesses"] == 1  # the store works again: the next deopt is kept
    r.close()
