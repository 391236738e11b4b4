"""Tests for bench.sim: the simulated OpenAI-compatible reference model and the triage family."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import httpx2
import openai
import pytest

from bench.sim import SimModel, SimServer, prompt_tokens
from bench.triage.oracle import (AMBIGUITY_RATIO, LABELS, flip_probability, format_probability, triage_oracle,
                                 triage_ranked)

REPO = Path(__file__).resolve().parents[2]
API_KEY = "sk-test-sim-0000"
SYS = ("[auto-bench:triage] You are a customer-support triage assistant. Classify the ticket into one of: "
       "billing, bug, feature, account, shipping, security. Answer with the label only.")
CLEAR = {
    "billing": "I was charged twice for my subscription and need a refund on the invoice.",
    "bug": "The app crashes on startup and shows a blank white screen since the update.",
    "feature": "Feature request: it would be great to have dark mode and keyboard shortcuts.",
    "account": "I cannot log in, the password reset email never arrives in my inbox.",
    "shipping": "My package has not arrived, the tracking number does not work on the courier site.",
    "security": "Suspicious login alert from another country, I think my account was hacked.",
}
AMBIGUOUS = [
    "The refund button crashes every time I click it.",
    "Hello, I have a question.",
    "My package arrived damaged and I want a refund of $40.",
]


def body(ticket: str, temperature: float) -> dict:
    return {"model": "auto-sim-1", "temperature": temperature,
            "messages": [{"role": "system", "content": SYS}, {"role": "user", "content": ticket}]}


def answer(model: SimModel, ticket: str, temperature: float) -> str:
    r = model.chat(body(ticket, temperature))
    assert r.status == 200
    return r.body["choices"][0]["message"]["content"]


def test_openai_client_against_sim_server():
    with SimServer(seed=1, error_rate=0.0) as sim:
        assert sim.base_url.startswith("http://127.0.0.1:") and sim.base_url.endswith("/v1")
        c = openai.OpenAI(base_url=sim.base_url, api_key=API_KEY, max_retries=0)
        r = c.chat.completions.with_raw_response.create(**body(CLEAR["billing"], 0))
        assert r.headers["x-auto-reference-model"] == "simulated"
        assert float(r.headers["x-auto-latency-ms"]) > 0
        comp = r.parse()
        assert comp.model == "auto-sim-1" and comp.system_fingerprint == "auto-sim"
        assert comp.choices[0].message.content == "billing"
        assert comp.usage.prompt_tokens == prompt_tokens(body(CLEAR["billing"], 0))
        assert comp.usage.total_tokens == comp.usage.prompt_tokens + comp.usage.completion_tokens
        assert [m.id for m in c.models.list()] == ["auto-sim-1"]
        with pytest.raises(openai.BadRequestError):
            c.chat.completions.create(model="auto-sim-1", messages=[])


def test_triage_oracle_on_clear_tickets():
    for label, ticket in CLEAR.items():
        got, ambiguous, scores = triage_oracle(ticket)
        assert got == label, (ticket, scores)
        assert not ambiguous
        assert set(scores) == set(LABELS)


def test_ambiguity_definition():
    for t in AMBIGUOUS:
        top, runner, ambiguous, scores = triage_ranked(t)
        assert ambiguous, (t, scores)
        assert runner != top
        if scores[top] > 0:
            assert scores[runner] >= AMBIGUITY_RATIO * scores[top]
    assert triage_oracle("Hello, I have a question.")[1] is True  # no keyword at all


def test_calibration_functions():
    assert flip_probability(0) == 0 and flip_probability(1) == pytest.approx(0.35) and flip_probability(5) == 0.5
    assert format_probability(0) == 0 and format_probability(1) == pytest.approx(0.05)


def test_no_flips_at_temperature_zero():
    m = SimModel(seed=11, error_rate=0.0)
    for t in AMBIGUOUS + list(CLEAR.values()):
        expected = triage_oracle(t)[0]
        assert {answer(m, t, 0.0) for _ in range(40)} == {expected}


def test_flips_at_temperature_one_on_ambiguous_inputs_only():
    m = SimModel(seed=12, error_rate=0.0)
    t = AMBIGUOUS[0]
    top, runner, _, _ = triage_ranked(t)
    answers = [answer(m, t, 1.0).strip().lower().rstrip(".") for _ in range(400)]
    flips = sum(a == runner for a in answers) / len(answers)
    assert set(answers) <= {top, runner}
    assert 0.25 < flips < 0.45  # p(1) = 0.35
    for label, clear in CLEAR.items():
        assert {answer(m, clear, 1.0).strip().lower().rstrip(".") for _ in range(30)} == {label}


def test_formatting_variants_grow_with_temperature():
    m = SimModel(seed=13, error_rate=0.0)
    raw = [answer(m, CLEAR["bug"], 1.0) for _ in range(600)]
    variants = [a for a in raw if a != "bug"]
    assert set(variants) <= {"Bug", "BUG", "bug."}
    assert 0.01 < len(variants) / len(raw) < 0.12  # q(1) = 0.05
    assert {answer(m, CLEAR["bug"], 0.0) for _ in range(100)} == {"bug"}


def test_determinism_given_seed():
    def run(seed: int) -> list[str]:
        m = SimModel(seed=seed, error_rate=0.0)
        return [answer(m, t, 1.0) for _ in range(30) for t in AMBIGUOUS]

    assert run(7) == run(7)
    assert run(7) != run(8)
    # identical calls can differ at T>0 (the per-body occurrence counter advances)
    assert len(set(run(7)[::3])) > 1


def test_determinism_over_http():
    def run() -> list[str]:
        with SimServer(seed=21, error_rate=0.0) as sim:
            c = openai.OpenAI(base_url=sim.base_url, api_key=API_KEY, max_retries=0)
            return [c.chat.completions.create(**body(AMBIGUOUS[0], 1.0)).choices[0].message.content for _ in range(20)]

    assert run() == run()


def test_stream_usage_only_when_requested():
    with SimServer(seed=2, error_rate=0.0) as sim:
        def chunks(include_usage: bool) -> list[dict]:
            b = dict(body(CLEAR["shipping"], 0), stream=True)
            if include_usage:
                b["stream_options"] = {"include_usage": True}
            r = httpx2.post(sim.base_url + "/chat/completions", json=b, headers={"Authorization": "Bearer " + API_KEY})
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = [ln[len("data: "):] for ln in r.text.split("\n\n") if ln.startswith("data: ")]
            assert lines[-1] == "[DONE]"
            return [json.loads(x) for x in lines[:-1]]

        with_usage, without = chunks(True), chunks(False)
        assert with_usage[-1]["choices"] == [] and with_usage[-1]["usage"]["prompt_tokens"] > 0
        assert all("usage" not in c for c in without)
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in without if c["choices"])
        assert text == "shipping"
        assert without[-1]["choices"][0]["finish_reason"] == "stop"


def test_simulated_errors_and_retries():
    with SimServer(seed=3, error_rate=1.0) as sim:
        c = openai.OpenAI(base_url=sim.base_url, api_key=API_KEY, max_retries=1)
        with pytest.raises(openai.InternalServerError):
            c.chat.completions.create(**body("x", 0))
        assert sim.stats["errors"] == 2
    with SimServer(seed=3, error_rate=0.0) as sim:
        c = openai.OpenAI(base_url=sim.base_url, api_key=API_KEY, max_retries=2)
        r = c.chat.completions.create(**body(CLEAR["feature"], 0), extra_headers={"x-auto-sim-fail-attempts": "2"})
        assert r.choices[0].message.content == "feature"
        assert sim.stats == {"requests": 3, "answered": 1, "errors": 2}


def test_error_rate_is_seeded_per_content_and_attempt():
    m = SimModel(seed=4, error_rate=0.5)
    fails = [m.chat(body(f"ticket {i}", 0), {"x-stainless-retry-count": "0"}).status for i in range(200)]
    rate = fails.count(500) / len(fails)
    assert 0.35 < rate < 0.65
    m2 = SimModel(seed=4, error_rate=0.5)
    assert [m2.chat(body(f"ticket {i}", 0), {"x-stainless-retry-count": "0"}).status for i in range(200)] == fails


def test_latency_lognormal_median():
    m = SimModel(seed=5, error_rate=0.0)
    lat = [m.chat(body(f"t{i}", 0)).latency_ms for i in range(600)]
    assert 600 < statistics.median(lat) < 800
    assert min(lat) > 0 and max(lat) > 1000


def test_tools_family_and_label_tool():
    m = SimModel(seed=6, error_rate=0.0)
    tools = [{"type": "function", "function": {"name": "set_label", "parameters": {
        "type": "object", "properties": {"label": {"type": "string", "enum": list(LABELS)}}}}}]
    r = m.chat(dict(body(CLEAR["account"], 0), tools=tools))
    ch = r.body["choices"][0]
    assert ch["finish_reason"] == "tool_calls"
    assert json.loads(ch["message"]["tool_calls"][0]["function"]["arguments"]) == {"label": "account"}


def test_python_m_auto_sim_serves():
    proc = subprocess.Popen([sys.executable, "-m", "bench.sim", "--port", "0", "--seed", "1"], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "simulated" in line
        url = line.strip().rsplit(" ", 1)[-1]
        assert httpx2.get(url + "/models").json()["data"][0]["id"] == "auto-sim-1"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("system", [None, "You are a helpful assistant."])
def test_a_prompt_it_does_not_model_is_refused_with_what_it_models(system):
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": "What is 2+2?"}]
    m = SimModel(seed=0, error_rate=1.0)  # the refusal comes before any simulated error
    r = m.chat({"model": "auto-sim-1", "messages": msgs})
    assert r.status == 400
    err = r.body["error"]
    assert err["type"] == "invalid_request_error" and err["code"] == "unsupported_prompt" and err["param"] == "messages"
    for marker in ("[auto-bench:triage]", "[auto-bench:extraction]", "[auto-bench:routing]", "[auto-sim:tools]"):
        assert marker in err["message"]
    assert "OPENAI_BASE_URL" in err["message"] and "OPENAI_API_KEY" in err["message"]
    with SimServer(seed=0, error_rate=0.0) as sim:  # through the official client: a BadRequestError, no echo
        c = openai.OpenAI(base_url=sim.base_url, api_key=API_KEY, max_retries=0)
        with pytest.raises(openai.BadRequestError) as info:
            c.chat.completions.create(model="auto-sim-1", messages=msgs)
        assert info.value.code == "unsupported_prompt" and "real OpenAI-compatible endpoint" in info.value.message
        with pytest.raises(openai.BadRequestError):
            for _ in c.chat.completions.create(model="auto-sim-1", messages=msgs, stream=True):
                pass
