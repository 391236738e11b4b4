"""The spend-capped client: default cap 0 refuses, the ledger is append-only and enforces the cap."""

from __future__ import annotations

import json

import openai
import pytest

from auto.errors import SpendCapExceeded
from auto.frontier import FrontierClient

MSG = [{"role": "system", "content": "[auto-bench:triage] Classify: billing, bug, feature, account, shipping, security."},
       {"role": "user", "content": "I was charged twice, refund me"}]


class _NeverCalled:
    class chat:  # noqa: N801
        class completions:  # noqa: N801
            @staticmethod
            def create(**_kw):
                raise AssertionError("a refused call must never reach the model")


def test_default_cap_is_zero_and_refuses(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTO_SPEND_CAP_USD_MICROS", raising=False)
    fc = FrontierClient("auto-sim-1", ledger=tmp_path / "l.jsonl", client=_NeverCalled())
    assert fc.cap == 0
    with pytest.raises(SpendCapExceeded, match="past the cap of 0"):
        fc.chat(MSG, purpose="test")
    assert not (tmp_path / "l.jsonl").exists() and fc.spent() == 0.0  # nothing spent, nothing written


def test_unpriced_model_is_refused(tmp_path):
    fc = FrontierClient("some-unknown-model", cap_usd_micros=1e9, ledger=tmp_path / "l.jsonl", client=_NeverCalled())
    with pytest.raises(SpendCapExceeded, match="no pinned price"):
        fc.chat(MSG, purpose="test")


def test_calls_within_the_cap_are_ledgered_until_it_is_reached(tmp_path, sim_env):
    client = openai.OpenAI(max_retries=3)
    fc = FrontierClient("auto-sim-1", cap_usd_micros=8000, ledger=tmp_path / "l.jsonl", client=client)
    bound = fc.bound(MSG, 16)
    assert bound > 0
    n_ok = 0
    with pytest.raises(SpendCapExceeded):
        for _ in range(1000):
            assert fc.chat(MSG, purpose="test", max_tokens=16, temperature=0).strip().lower().rstrip(".") == "billing"
            n_ok += 1
    lines = [json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert [x["status"] for x in lines] == ["reserved", "ok"] * n_ok + ["refused"]
    assert n_ok >= 1 and fc.spent() <= 8000
    assert all(x["cost_usd_micros"] <= x["bound_usd_micros"] for x in lines if x["status"] == "ok")
    # a second client on the same ledger sees the same spend: one cap across processes
    assert FrontierClient("auto-sim-1", cap_usd_micros=8000, ledger=tmp_path / "l.jsonl").spent() == fc.spent()


def test_concurrent_callers_cannot_overshoot_the_cap(tmp_path):
    import threading
    import time
    from types import SimpleNamespace

    class Slow:
        class chat:  # noqa: N801
            class completions:  # noqa: N801
                @staticmethod
                def create(**_kw):
                    time.sleep(0.3)
                    return SimpleNamespace(usage=SimpleNamespace(prompt_tokens=10, completion_tokens=16),
                                           choices=[SimpleNamespace(message=SimpleNamespace(content="ok"))])

    probe = FrontierClient("auto-sim-1", cap_usd_micros=1, ledger=tmp_path / "x.jsonl")
    cap = 1.5 * probe.bound(MSG, 16)
    results = []

    def call():
        fc = FrontierClient("auto-sim-1", cap_usd_micros=cap, ledger=tmp_path / "l.jsonl", client=Slow())
        try:
            fc.chat(MSG, purpose="race", max_tokens=16)
            results.append("ok")
        except SpendCapExceeded:
            results.append("refused")

    threads = [threading.Thread(target=call) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("ok") == 1 and results.count("refused") == 4
    assert FrontierClient("auto-sim-1", cap_usd_micros=cap, ledger=tmp_path / "l.jsonl").spent() <= cap
