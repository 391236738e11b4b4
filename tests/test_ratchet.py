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
from auto.errors import ArgumentError, StoreError
from auto.ratchet import CompilePolicy, Ratchet
from auto.ratchet.evidence import RiskMonitor, upper_confidence_bound
from auto.ratchet.policy import PolicyState
from auto.ratchet.worker import THREAD_LIMIT_VARS, CompileRequest, child_env, run_compile
from auto.store import Store
from auto.gate import Contract, clopper_pearson

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
        kinds = [e.kind for e in st.ratchet_events("triage")]
        assert "install" in kinds and kinds.count("compile") >= kinds.count("install")
        compiles = [e for e in st.ratchet_events("triage") if e.kind == "compile"]
        assert compiles[0].detail["trigger"]["kind"] == "first"
        # every compile row says which lane it ran in and how long each rung took
        assert all(c.detail["trigger"]["lane"] for c in compiles)
        rungs = compiles[0].detail["rungs"]
        assert rungs and all(isinstance(x["seconds"], float) and x["verdict"] in ("pass", "refuse") for x in rungs)
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

    import auto.ratchet.scheduler as core

    def broken(req, **kw):
        from auto.ratchet.worker import CompileResult
        return CompileResult("error", "CompileError: boom", req.generation)

    monkeypatch.setattr(core, "run_compile", broken)
    drive(r, parcels(12))  # a new label, witnessed 12 times: the policy asks for a compile
    assert r.generation == gen
    with Store(tmp_path / "r.sqlite") as st:
        errs = [e for e in st.ratchet_events("triage") if e.kind == "compile" and e.detail["verdict"] == "error"]
    assert errs and errs[-1].detail["reason"] == "CompileError: boom"
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
        rb = [e for e in st.ratchet_events("triage") if e.kind == "rollback"]
        assert rb and "risk alarm" in rb[-1].detail["reason"]
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
        compiles = [e for e in st.ratchet_events("triage") if e.kind == "compile"]
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
    assert p.trigger(s) is None  # a table alone: a new label is one more entry, the table lane's
    s.installed_generalizes = True
    assert p.trigger(s)["kind"] == "new-label"
    # repeats the overlay answered count as the memo's evidence, and inputs it first served while no
    # installed table held them fire a table refresh
    assert p.trigger(PolicyState(witnesses=5, overlay_answers=6))["kind"] == "first"
    s = PolicyState(installed=1, witnesses=100, witnesses_at_attempt=100, attempts=1, overlay_answers=40,
                    overlay_new_inputs=8, overlay_new_inputs_at_attempt=0)
    assert p.trigger(s)["kind"] == "memo" and p.trigger(s)["evidence"]["overlay_inputs_not_in_table"] == 8
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


def test_a_call_after_close_is_one_store_error_and_calls_nothing(tmp_path):
    calls = []

    def triage(ticket: str) -> str:
        calls.append(ticket)
        return classify(ticket)

    served = auto.ratchet(triage, store=tmp_path / "s.sqlite", worker="thread", audit_rate=0.0)
    assert served("my invoice and refund") == classify("my invoice and refund")
    served.close()
    for call in (lambda: served("crash on start"), lambda: served.call_result({"ticket": "x"}),
                 lambda: served.decide({"ticket": "x"})):
        with pytest.raises(StoreError, match="closed"):
            call()
    assert calls == ["my invoice and refund"]  # the function was not called after close


KILL_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from test_ratchet import make_for_subprocess, stream
    r = make_for_subprocess(sys.argv[1])
    shown = None
    for i, inp in enumerate(stream(400)):
        r.call(inp)
        if i % 60 == 59:  # repeats are answered by the overlay: let the compiles of the witnesses land
            r.wait_idle()  # a condition, not a time: however loaded the machine, the compile finishes first
        if r.generation is not None and r.generation != shown:
            shown = r.generation
            print("gen", shown, flush=True)
    print("done", flush=True)
    sys.stdin.read()  # the stream is over: wait for the kill
""")


def make_for_subprocess(path: str) -> Ratchet:
    return Ratchet(Counting(), path, "triage", worker="thread", audit_rate=0.2, programs=False,
                   policy=CompilePolicy(first_at=45, min_new=10, growth=0.1))


def test_kill_minus_nine_mid_stream_restarts_on_a_complete_generation(tmp_path):
    """Killed (SIGKILL) while it streams and compiles, once it has installed two generations (or
    at the end of its stream, with fewer), a ratchet restarts on the last complete one. The child
    reports each install as it happens; the test waits on those reports, never on a time."""
    import queue

    store = tmp_path / "k.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT.format(tests=str(Path(__file__).parent)), str(store)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: ([lines.put(x) for x in proc.stdout], lines.put(None)), daemon=True).start()
    seen = 0
    try:
        while seen < 2:
            line = lines.get(timeout=900)  # a hung child only: every report is a condition reached
            if line is None or line.startswith("done"):
                break
            seen += line.startswith("gen")
    except queue.Empty:
        pytest.fail("the child reported nothing for 900 s")
    finally:
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
    # the repeat is answered by the table overlay: one reference call, one witness
    assert r.task == "triage" and r.store_path == str(tmp_path / "env.sqlite") and len(calls) == 1
    assert r.status()["overlay"]["hits"] == 1
    with Store(tmp_path / "env.sqlite") as st:
        assert len(st.witnesses("triage")) == 1
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
    children: list[int] = []
    while not children and time.monotonic() < deadline:
        children = _compile_children()
        time.sleep(0.01)
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    th.join(120)
    assert box and box[0].verdict == "crashed" and "exit code -9" in box[0].reason


def _compile_children() -> list[int]:
    """Pids of this process's ``python -m auto.ratchet.worker`` children (from /proc)."""
    me = os.getpid()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and b"auto.ratchet.worker" in cmd:
            out.append(int(d.name))
    return out


def test_the_compile_child_does_not_rerun_the_users_script(tmp_path):
    """A script without an ``if __name__ == "__main__"`` guard: the compile child must not run it."""
    script = tmp_path / "agent.py"
    marker = tmp_path / "ran.txt"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from pathlib import Path
        with open({str(marker)!r}, "a") as f:
            f.write("x")
        from test_ratchet import Counting, stream
        from auto.ratchet import CompilePolicy, Ratchet
        r = Ratchet(Counting(), {str(tmp_path / "s.sqlite")!r}, "triage", audit_rate=0.0, programs=False,
                    policy=CompilePolicy(first_at=45, min_new=10, growth=0.1))
        for i, inp in enumerate(stream(90)):
            r.call(inp)
            if i % 15 == 14:  # repeats are answered by the overlay: the compiles need distinct witnesses
                r.wait_idle(120)
        r.wait_idle(120)
        print("generation", r.generation)
        r.close()
    """))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "generation 1" in p.stdout or "generation 2" in p.stdout
    assert marker.read_text() == "x"  # the script's top level ran once: in the parent only


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


def test_bad_settings_are_one_clear_error(tmp_path):
    ok = lambda i: "x"  # noqa: E731
    for kw, match in (({"store": None}, "store must be a path"), ({"store": 5}, "store must be a path"),
                      ({"compile_timeout_s": 0}, "compile_timeout_s"), ({"contract": "nope"}, "contract must be"),
                      ({"policy": 3}, "policy must be"), ({"worker": "fork"}, "worker")):
        args = {"store": tmp_path / "s.sqlite", **kw}
        with pytest.raises(ArgumentError, match=match):
            Ratchet(ok, args.pop("store"), "t", **args)
    assert not (tmp_path / "None").exists() and not Path("None").exists()
    with pytest.raises(auto.errors.RecordError, match="True or the store's path"):
        auto.task("t", ratchet=1)


def test_tier0_and_tier1_answers_have_the_same_json_types(tmp_path):
    r = Ratchet(lambda i: ("a", i["n"]), tmp_path / "j.sqlite", "pairs", worker="thread", audit_rate=0.0)
    assert r.call({"n": 1}) == ["a", 1]  # the JSON form, as a tier-1 answer would be
    r2 = Ratchet(lambda i: {1: "x"}, tmp_path / "k.sqlite", "keys", worker="thread", audit_rate=0.0)
    assert r2.call({"n": 1}) == {"1": "x"}
    r3 = Ratchet(lambda i: {1, 2}, tmp_path / "l.sqlite", "sets", worker="thread", audit_rate=0.0)
    assert r3.call({"n": 1}) == {1, 2} and r3.capture_errors == 1  # not JSON: returned, never kept
    for x in (r, r2, r3):
        x.close()


def test_one_odd_input_does_not_block_compiles_and_two_text_fields_compile(tmp_path):
    ref = lambda i: classify(i["ticket"]) if isinstance(i["ticket"], str) else "bug"  # noqa: E731
    r = Ratchet(ref, tmp_path / "o.sqlite", "triage", worker="thread", audit_rate=0.0, programs=False,
                policy=CompilePolicy(first_at=45, min_new=15, growth=0.3))
    r.call({"ticket": None, "lang": "en"})  # recorded once, of another shape
    for inp in stream(120):
        r.call({**inp, "lang": "en"})
        r.wait_idle(120)
    assert r.generation is not None
    man = r._store.get_artifact(r.status()["artifact_id"]).manifest
    assert man["model"]["features"]["field"] == "ticket" and man["model"]["fields_not_read"] == ["lang"]
    assert man["model"]["excluded_inputs"] == 1
    res = r.call_result({"ticket": 7, "lang": "en"})  # an odd shape never witnessed deopts on the schema check
    assert res.tier == "tier-0" and res.reason.startswith("input-schema")
    res = r.call_result({"ticket": None, "lang": "en"})  # the witnessed one is repeated by the overlay
    assert res.tier == "tier-1" and res.reason == "overlay" and res.answer == "bug"
    r.close()


def test_restart_falls_back_to_an_earlier_generation_when_the_installed_one_is_broken(tmp_path):
    import sqlite3

    r = make(tmp_path)
    drive(r, stream(100))
    assert r.compile_now("a second generation") and r.wait_idle(120)
    events = [e for e in r._store.ratchet_events("triage") if e.kind == "install"]
    assert len(events) >= 2, "needs two installed generations"
    last, before = events[-1], events[-2]
    r.close()
    con = sqlite3.connect(tmp_path / "r.sqlite")
    con.execute("UPDATE artifacts SET wasm = ? WHERE id = ?", (b"\x00asm\x01\x00\x00\x00broken", last.artifact_id))
    con.commit()
    con.close()
    r2 = make(tmp_path)
    assert r2.generation == before.generation
    with Store(tmp_path / "r.sqlite") as st:
        assert st.installed_generation("triage") == (before.generation, before.artifact_id)
        assert any(e.kind == "rollback" and "restart" in e.detail["reason"] for e in st.ratchet_events("triage"))
    r2.close()


def test_a_secret_in_a_served_input_is_never_stored(tmp_path):
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    r = Ratchet(lambda i: "account", tmp_path / "sec.sqlite", "triage", worker="thread", audit_rate=0.0)
    assert r.call({"ticket": f"my key {key} stopped working"}) == "account"
    r.close()
    raw = (tmp_path / "sec.sqlite").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("sec.sqlite-*"))
    assert key.encode() not in raw
    with Store(tmp_path / "sec.sqlite") as st:
        (w,) = st.witnesses("triage")
        assert "[REDACTED]" in w.input["ticket"] and w.attributes["auto.redactions"] == 1


def test_compile_child_leaves_a_core_to_serving_and_keeps_the_users_thread_settings():
    env = child_env({"PATH": "/bin", "OMP_NUM_THREADS": "3"}, cpu_count=2)
    assert env["OMP_NUM_THREADS"] == "3"  # the user's choice is kept
    assert all(env[v] == "1" for v in THREAD_LIMIT_VARS if v != "OMP_NUM_THREADS")
    assert env["PATH"] == "/bin"
    assert child_env({}, cpu_count=1)["OPENBLAS_NUM_THREADS"] == "1"  # never zero threads
    assert child_env({}, cpu_count=16)["MKL_NUM_THREADS"] == "15"


def test_a_ratchet_that_cannot_take_the_compile_lock_waits_and_logs_it_once(tmp_path):
    from auto.store.lock import CompileLock

    other = CompileLock(tmp_path / "r.sqlite")  # another process compiling this store
    assert other.acquire()
    r = make(tmp_path)
    drive(r, stream(120))
    skipped = [e for e in r.events if e["kind"] == "compile"]
    assert len(skipped) == 1 and skipped[0]["detail"]["verdict"] == "skipped", skipped
    assert "another process holds the compile lock" in skipped[0]["detail"]["reason"]
    assert r.status()["compile_attempts"] == 0 and r.generation is None
    assert r.compile_now() is False
    other.release()
    assert r.compile_now() is True and r.wait_idle(120)
    assert [e["detail"]["verdict"] for e in r.events if e["kind"] == "compile"][1:] and r.generation is not None
    r.close()


def test_two_offline_compiles_of_one_store_take_different_generations(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        for inp in stream(80):
            st.add_witness(task="triage", input=inp, output=classify(inp["ticket"]))
    cmd = [sys.executable, "-m", "auto.cli", "compile", "--store", str(tmp_path / "s.sqlite"), "--task", "triage",
           "--no-program"]
    procs = [subprocess.Popen(cmd + ["--out", str(tmp_path / f"a{i}.wasm")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    with Store(tmp_path / "s.sqlite") as st:
        gens = sorted(a.generation for a in st.artifacts("triage"))
    assert gens == [1, 2], gens


def test_the_overlay_answers_from_the_first_repeat_before_any_compile(tmp_path):
    ref = Counting()
    r = make(tmp_path, ref, audit_rate=0.0, policy=CompilePolicy(first_at=10_000, first_repeats=10_000))
    items = stream(8)
    assert [r.call_result(x).tier for x in items] == ["tier-0"] * 8
    res = [r.call_result(x) for x in items]  # every repeat: the overlay, not the reference
    assert [x.tier for x in res] == ["tier-1"] * 8 and {x.reason for x in res} == {"overlay"}
    assert [x.answer for x in res] == [classify(x["ticket"]) for x in items] and ref.calls == 8
    assert r.generation is None and r.status()["overlay"]["hits"] == 8
    r.close()


def test_a_stream_of_repeats_costs_what_an_exact_dict_costs(tmp_path):
    # nothing derived (no generation): the repeat budget audits no overlay answer, so the ratchet
    # pays one reference call per distinct input, as a dict does, however high the hit rate
    ref = Counting()
    r = make(tmp_path, ref, audit_rate=0.5, audit_hit_rate=0.5,
             policy=CompilePolicy(first_at=10_000, first_repeats=10_000))
    items = stream(8)
    for _ in range(30):
        for x in items:
            r.call_result(x)
    r.wait_idle(30)
    assert ref.calls == 8 and r.status()["overlay"]["hits"] == 232
    assert r.tiered.audit.stats()["hit_over_budget"] == 232
    r.close()


def test_an_answer_contradicted_by_later_witnesses_deopts_before_any_artifact_answers(tmp_path):
    # the first answer and a later audit's disagree (a tie in the overlay): the input deopts before
    # the artifact runs (whose table would hold the first answer), and the deopt decides
    answers = {"n": 0}

    def ref(inp: dict) -> str:
        answers["n"] += 1
        return "bug" if answers["n"] == 1 else "billing"

    r = make(tmp_path, ref, audit_rate=0.0, policy=CompilePolicy(first_at=10_000, first_repeats=10_000))
    x = {"ticket": "the app crashed and I was charged twice"}
    assert r.call(x) == "bug"
    r._capture({"task": "triage", "input": x, "output": "billing", "audit": True, "agree": False,
                "tier1_score": 0.0, "origin": "overlay", "reason": "shadow-audit"})
    res = r.call_result(x)
    assert res.tier == "tier-0" and res.reason == "overlay-contested" and res.answer == "billing"
    assert r.call_result(x).answer == "billing"  # two witnesses of three: the overlay answers it
    r.close()


def test_overlay_audits_feed_their_own_monitor_which_disables_the_overlay(tmp_path):
    ref = Counting()
    r = make(tmp_path, ref, audit_rate=0.0, policy=CompilePolicy(first_at=10_000, first_repeats=10_000))
    x = stream(1)[0]
    r.call(x)
    assert r.call_result(x).reason == "overlay"
    for i in range(40):  # audited overlay answers that all disagree: the e-process rejects epsilon
        r._capture({"task": "triage", "input": {"ticket": f"audit {i}"}, "output": "bug", "audit": True,
                    "agree": False, "tier1_score": 0.0, "origin": "overlay", "reason": "shadow-audit"})
        if r.status()["overlay"]["disabled"]:
            break
    assert r.status()["overlay"]["disabled"] and r.call_result(x).tier == "tier-0"
    assert r.status()["evidence"]["audits"] == 0  # the specialist's monitor saw none of them
    with Store(tmp_path / "r.sqlite") as st:
        alarms = [e for e in st.ratchet_events("triage") if e.kind == "alarm"]
        assert alarms and alarms[-1].detail["monitor"] == "overlay-risk"
    r.close()


def test_slow_rungs_run_only_when_their_last_certificate_could_pass():
    from auto.ratchet.policy import program_could_pass, slow_rungs_could_pass

    assert slow_rungs_could_pass(None, 100, 110, 0.05)
    cert = {"smallest_certifiable_epsilon": 0.10, "calibration_n": 100}
    assert not slow_rungs_could_pass(cert, 100, 149, 0.05)  # 0.10 * 100 / 149 = 0.067 > 0.05
    assert slow_rungs_could_pass(cert, 100, 150, 0.05)  # grown by half: tried again
    assert not slow_rungs_could_pass({"smallest_certifiable_epsilon": None}, 100, 149, 0.05)
    assert slow_rungs_could_pass({"smallest_certifiable_epsilon": 0.06}, 100, 130, 0.05)
    # refused for too few calibration points (43 < 45): the next witnesses could be enough
    few = {"smallest_certifiable_epsilon": None, "calibration_n": 43}
    assert not slow_rungs_could_pass(few, 45, 45, 0.05, 0.1) and slow_rungs_could_pass(few, 45, 48, 0.05, 0.1)
    # a program refused at 18/40 out-of-fold cannot reach 0.95 before 400 more witnesses (or 1.5x: 60)
    prog = {"program": {"agree": 18, "n": 40, "min_agreement": 0.95}}
    assert not program_could_pass(prog, 59) and program_could_pass(prog, 60) and program_could_pass(None, 41)
    assert program_could_pass({"program": {"agree": 39, "n": 40, "min_agreement": 0.95}}, 41)


def test_the_refusal_certificate_reads_the_typed_checks_of_the_refused_rungs(tmp_path):
    from auto.gate import Check, CheckName, EvalRun
    from auto.ratchet.worker import refusal_certificate

    def run(*checks):
        return EvalRun("triage", 1, {"id": "c"}, None, checks, "refused").to_record()

    with Store(tmp_path / "c.sqlite") as st:
        spec = st.put_eval_run(run(Check(CheckName.GUARD_CERTIFIED, False,
                                         {"smallest_certifiable_epsilon": 0.1, "calibration_n": 80})))
        prog = st.put_eval_run(run(Check(CheckName.OUT_OF_FOLD_AGREEMENT, False,
                                         {"agree": 18, "n": 40, "min_agreement": 0.95})))
        other = st.put_eval_run({"task": "triage", "verdict": "refuse"})  # not a gate's record
        rungs = [{"rung": "specialist", "verdict": "refuse", "eval_run_id": spec},
                 {"rung": "program", "verdict": "refuse", "eval_run_id": prog},
                 {"rung": "memo", "verdict": "refuse", "eval_run_id": other}]
        assert refusal_certificate(st, rungs) == {
            "specialist": {"smallest_certifiable_epsilon": 0.1, "calibration_n": 80},
            "program": {"agree": 18, "n": 40, "min_agreement": 0.95}}
        assert refusal_certificate(st, [{"rung": "program", "verdict": "refuse", "eval_run_id": other}]) is None
        assert refusal_certificate(st, [{"rung": "program", "verdict": "pass", "eval_run_id": prog}]) is None


def test_a_3ms_reference_answers_at_tier1_before_the_stream_ends(tmp_path):
    # a fast reference and no waiting for compiles: the first compile may land after the stream,
    # but every repeat of a witnessed input is answered by the overlay at once
    def fast(inp: dict) -> str:
        time.sleep(0.003)
        return classify(inp["ticket"])

    base = stream(40, seed=3)
    items = [base[(i * 7) % 40] if i >= 40 else base[i] for i in range(200)]
    r = make(tmp_path, fast, audit_rate=0.05)
    res = [r.call_result(x) for x in items]  # no wait_idle: compiles run while the stream goes on
    tiers = [x.tier for x in res]
    distinct = len({json.dumps(x, sort_keys=True) for x in items})
    assert tiers.count("tier-0") <= distinct  # each distinct input paid once at most (no audit disagrees)
    assert tiers[40:].count("tier-1") == 160 and all(x.answer == classify(i["ticket"]) for x, i in zip(res, items))
    r.close()


def test_a_stream_of_pure_repeats_ends_with_a_table_generation_holding_them(tmp_path):
    # the overlay answers every repeat from its first witness, so no input is witnessed twice; what
    # it served is the memo's evidence that the task repeats: a table generation is installed with
    # those entries, its manifest states determinism as unmeasured (nothing re-asked), and the
    # census and the status say what was served instead of "0% deterministic" alone
    from auto.census import census_store, render_table
    from auto_runtime import Artifact, TieredTask

    ref = Counting()
    r = make(tmp_path, ref, audit_rate=0.0, policy=CompilePolicy(first_at=10_000))
    items = stream(8)
    for _ in range(4):
        for x in items:
            r.call_result(x)
        r.wait_idle(120)
    assert ref.calls == 8  # one reference call per distinct input
    assert r.generation is not None
    # the table lane ran ahead of the full ladder (a table never waits behind the slow rungs),
    # each attempt logged with its seconds per rung
    rows = [e["detail"] for e in r.events if e["kind"] == "compile"]
    assert [d["trigger"]["lane"] for d in rows[:2]] == ["table (ahead of a slow compile)", "full"]
    assert rows[0]["verdict"] == "pass" and all(isinstance(x["seconds"], float) for d in rows for x in d["rungs"])
    with Store(tmp_path / "r.sqlite") as st:
        art = st.get_artifact(r.installer.installed_id)
        table = Artifact.load(art.wasm)
        assert table.typed_manifest.compiled_as == "memo"
        alone = TieredTask(table, reference=None)  # the table without the overlay, as a restart loads it
        res = [alone(x) for x in items]
        assert [x.tier for x in res] == ["tier-1"] * 8
        assert [x.answer for x in res] == [classify(x["ticket"]) for x in items]
        rep = table.typed_manifest.fields["parity"]["repetition"]
        assert rep["repeated_inputs"] == 0 and rep["rate"] is None and rep["ci95_low"] is None
        # the first compile fired on the 6th overlay answer (the policy's first_repeats), with all 8 witnessed
        served = rep["served_from_first_witness"]
        assert rep["single_witness_entries"] == 8 and 6 <= served["inputs"] == served["answers"] <= 8
        logged = [e.detail["overlay"] for e in st.ratchet_events("triage") if e.kind == "compile"]
        c = census_store(st, task="triage")
    site = c.sites[0]
    assert site.verdicts["witnessed-deterministic"] == 0 and site.verdicts["unwitnessed"] == 8
    assert logged and site.served["inputs"] == logged[-1]["inputs"] >= 6  # as the last compile row recorded it
    assert "served from the first witness by the table overlay" in render_table(c)
    det = r.status()["determinism"]
    assert det["reasked"] == 0 and det["rate"] is None and det["served_from_first_witness"]["inputs"] == 8
    r.close()


def test_a_second_cold_ratchet_on_the_store_answers_the_first_ones_witnesses(tmp_path):
    # two ratchets start cold on one store (two processes); B's overlay reads what A witnessed
    # since B started (same admission rule), so B pays its first miss, not every input A paid for
    ref_a, ref_b = Counting(), Counting()
    policy = CompilePolicy(first_at=10_000, first_repeats=10_000)
    a = make(tmp_path, ref_a, audit_rate=0.0, policy=policy)
    b = make(tmp_path, ref_b, audit_rate=0.0, policy=policy)
    items = stream(8)
    for x in items:
        a.call_result(x)
    assert ref_a.calls == 8
    res = [b.call_result(x) for x in items]
    assert [x.tier for x in res] == ["tier-0"] + ["tier-1"] * 7 and {x.reason for x in res[1:]} == {"overlay"}
    assert ref_b.calls == 1 and [x.answer for x in res] == [classify(x["ticket"]) for x in items]
    assert b.state.witnesses == 8  # A's 8, B's own witness of the first one not counted twice
    a.close()
    b.close()
