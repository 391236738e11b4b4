"""Tests for auto.record: @auto.task, OpenAI request-layer instrumentation, pricing, auto record."""

from __future__ import annotations

import asyncio
import enum
import json
import os
import socket
import sys
import textwrap
from pathlib import Path

import httpx2
import openai
import pydantic
import pytest

import auto
from auto.errors import ArgumentError, RecordError, UsageError
from auto.record import openai_hook, pricing, run_recorded
from auto.record.template import template_messages
from bench.sim import SimServer
from auto.store import Store
from conftest import store_blob

REPO = Path(__file__).resolve().parents[1]
API_KEY = "sk-test-3f9a1c77e2b04d5a9c1e0b8d6f2a4c6e"
SYS = ("[auto-bench:triage] You are a support triage assistant. Labels: billing, bug, feature, "
       "account, shipping, security. Answer with the label only.")
TOOLS = [
    {"type": "function", "function": {"name": "lookup_order", "parameters": {
        "type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {"name": "refund", "parameters": {
        "type": "object", "properties": {"amount": {"type": "number"}, "reason": {"type": "string"}}}}},
]


@pytest.fixture(scope="module")
def sim():
    with SimServer(seed=3, error_rate=0.0) as s:
        yield s


@pytest.fixture
def client(sim):
    c = openai.OpenAI(base_url=sim.base_url, api_key=API_KEY, max_retries=2)
    yield c
    c.close()


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "traces.db"


def msgs(ticket: str, system: str = SYS) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": ticket}]


def llm_spans(st: Store, **kw) -> list[dict]:
    return st.spans(kind="llm", **kw)


# ----------------------------------------------------------------------------- tasks


def test_sync_task_records_task_and_child_llm_span(client, store_path):
    @auto.task("triage")
    def triage(ticket: str, temperature: float = 0.0) -> str:
        r = client.chat.completions.create(model="auto-sim-1", temperature=temperature, messages=msgs(ticket))
        return r.choices[0].message.content

    with auto.recording(store_path):
        assert triage("I was charged twice for my subscription") == "billing"
        assert triage("The app crashes on startup") == "bug"
    with Store(store_path) as st:
        ws = st.witnesses("triage")
        assert [w.input for w in ws] == [
            {"ticket": "I was charged twice for my subscription", "temperature": 0.0},
            {"ticket": "The app crashes on startup", "temperature": 0.0},
        ]
        assert [w.output for w in ws] == ["billing", "bug"]
        llms = llm_spans(st)
        assert len(llms) == 2
        for w, s in zip(ws, llms):
            assert s["parent_span_id"] == w.span_id and s["trace_id"] == w.trace_id
            assert s["task"] == "triage" and s["status"] == "ok"
            assert s["input"]["model"] == "auto-sim-1" and s["input"]["messages"][1]["content"] == w.input["ticket"]
            assert s["output"]["content"] == w.output and s["output"]["finish_reason"] == "stop"
            a = s["attributes"]
            assert a["gen_ai.system"] == "openai" and a["gen_ai.request.model"] == "auto-sim-1"
            assert a["gen_ai.response.model"] == "auto-sim-1" and a["gen_ai.request.temperature"] == 0.0
            assert a["gen_ai.response.finish_reasons"] == ["stop"]
            assert a["auto.attempt"] == 0 and a["auto.reference_model.simulated"] is True
            assert a["auto.latency_source"] == "simulated"
            assert a["auto.latency_ms"] == float(a["auto.response.headers"]["x-auto-latency-ms"])
        # the site is the same for both tickets: the ticket became a {ticket} placeholder
        assert llms[0]["site"] == llms[1]["site"]
        assert llms[0]["site"].startswith("triage/chat.completions/sha256:")
        assert len(st.traces()) == 2 and st.verify().ok


def test_template_messages_placeholders():
    m = [{"role": "system", "content": "Classify. Customer: Alice Smith"},
         {"role": "user", "content": "Ticket: my card was charged"},
         {"role": "assistant", "content": None, "tool_calls": [{"id": "call_x1", "type": "function",
                                                               "function": {"name": "f", "arguments": "{}"}}]},
         {"role": "tool", "tool_call_id": "call_x1", "content": "ok"}]
    t = template_messages(m, {"ticket": "my card was charged", "customer": {"name": "Alice Smith"}, "n": 3, "x": "ok"})
    assert t[0]["content"] == "Classify. Customer: {customer.name}"
    assert t[1]["content"] == "Ticket: {ticket}"
    assert t[2]["tool_calls"][0]["id"] == "{tool_call_0}" and t[3]["tool_call_id"] == "{tool_call_0}"
    assert t[3]["content"] == "{x}"  # whole-string match; short values only replace whole strings
    assert template_messages([{"role": "user", "content": "token"}], {"x": "ok"})[0]["content"] == "token"


def test_async_task_and_async_client(sim, store_path):
    ac = openai.AsyncOpenAI(base_url=sim.base_url, api_key=API_KEY, max_retries=0)

    @auto.task("atriage")
    async def atriage(ticket: str) -> str:
        r = await ac.chat.completions.create(model="auto-sim-1", temperature=0, messages=msgs(ticket))
        return r.choices[0].message.content

    async def main():
        return await asyncio.gather(atriage("Please add dark mode"), atriage("My package never arrived"))

    with auto.recording(store_path):
        assert asyncio.run(main()) == ["feature", "shipping"]
    with Store(store_path) as st:
        ws = {w.input["ticket"]: w for w in st.witnesses("atriage")}
        assert len(ws) == 2 and len(llm_spans(st)) == 2
        for s in llm_spans(st):
            parent = next(w for w in ws.values() if w.span_id == s["parent_span_id"])
            assert s["input"]["messages"][1]["content"] == parent.input["ticket"]
            assert s["output"]["content"] == parent.output


@pytest.mark.parametrize("include_usage", [True, False])
def test_stream_with_and_without_usage(client, store_path, include_usage):
    kw = {"stream_options": {"include_usage": True}} if include_usage else {}

    @auto.task("st")
    def st_task(ticket: str) -> str:
        stream = client.chat.completions.create(model="auto-sim-1", temperature=0, messages=msgs(ticket), stream=True, **kw)
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    with auto.recording(store_path):
        assert st_task("Suspicious login from another country, was I hacked?") == "security"
    with Store(store_path) as st:
        (s,) = llm_spans(st)
        assert s["status"] == "ok" and s["output"]["content"] == "security"
        a = s["attributes"]
        assert a["auto.stream"] is True and a["auto.stream.complete"] is True
        if include_usage:
            assert a["auto.usage"] == "reported" and a["gen_ai.usage.input_tokens"] > 0
            assert a["gen_ai.usage.output_tokens"] >= 1 and a["auto.cost_usd_micros"] > 0
        else:
            assert a["auto.usage"] == "unknown"
            assert a["gen_ai.usage.input_tokens"] is None and a["gen_ai.usage.output_tokens"] is None
            assert a["auto.cost_usd_micros"] is None
            (w,) = st.witnesses("st")
            assert w.attributes["auto.cost_usd_micros"] is None  # unknown, never 0


def test_stream_closed_early_is_recorded_incomplete(client, store_path):
    with auto.recording(store_path):
        with client.chat.completions.create(model="auto-sim-1", messages=msgs("hello there, how are you"),
                                            stream=True) as stream:
            next(iter(stream))
    with Store(store_path) as st:
        (s,) = llm_spans(st)
        assert s["status"] == "error" and s["error"]["type"] == "stream_incomplete"
        assert s["attributes"]["auto.stream.complete"] is False
        assert s["task"] is None and s["parent_span_id"] is None
        (tr,) = st.traces()
        assert tr["trace_id"] == s["trace_id"] and tr["status"] == "error"


class Label(str, enum.Enum):
    billing = "billing"
    bug = "bug"
    feature = "feature"
    account = "account"
    shipping = "shipping"
    security = "security"


class Triage(pydantic.BaseModel):
    label: Label


def test_parse_is_recorded(client, store_path):
    @auto.task("ptriage")
    def ptriage(ticket: str) -> str:
        r = client.chat.completions.parse(model="auto-sim-1", temperature=0, messages=msgs(ticket), response_format=Triage)
        return r.choices[0].message.parsed.label.value

    with auto.recording(store_path):
        assert ptriage("Refund the duplicate charge on my invoice") == "billing"
    with Store(store_path) as st:
        (s,) = llm_spans(st)
        assert s["input"]["response_format"]["type"] == "json_schema"
        assert json.loads(s["output"]["content"]) == {"label": "billing"}
        assert st.witnesses("ptriage")[0].output == "billing"


@pytest.mark.parametrize("stream", [False, True])
def test_multiple_tool_calls_in_one_message(client, store_path, stream):
    with auto.recording(store_path):
        with auto.task("tools", input={"q": "where is order 42"}) as t:
            r = client.chat.completions.create(model="auto-sim-1", messages=msgs("where is order 42", "[auto-sim:tools]"),
                                               tools=TOOLS, stream=stream)
            if stream:
                for _ in r:
                    pass
            else:
                assert [tc.function.name for tc in r.choices[0].message.tool_calls] == ["lookup_order", "refund"]
            t.output = "done"
    with Store(store_path) as st:
        (s,) = llm_spans(st)
        out = s["output"]
        assert out["finish_reason"] == "tool_calls" and out["content"] is None
        assert [tc["function"]["name"] for tc in out["tool_calls"]] == ["lookup_order", "refund"]
        assert json.loads(out["tool_calls"][0]["function"]["arguments"]) == {"order_id": "where is order 42"}
        assert json.loads(out["tool_calls"][1]["function"]["arguments"]) == {"amount": 1.0, "reason": "where is order 42"}
        assert all(tc["id"].startswith("call_") for tc in out["tool_calls"])
        assert s["input"]["tools"] == TOOLS
        assert st.witnesses("tools")[0].output == "done"


def test_sdk_retries_are_attempts_of_one_logical_call(store_path):
    with SimServer(seed=5, error_rate=0.0, fail_attempts=2) as sim:
        c = openai.OpenAI(base_url=sim.base_url, api_key=API_KEY, max_retries=3)

        @auto.task("retry")
        def retry(ticket: str) -> str:
            return c.chat.completions.create(model="auto-sim-1", temperature=0, messages=msgs(ticket)).choices[0].message.content

        with auto.recording(store_path):
            assert retry("My package never arrived") == "shipping"
        assert sim.stats["errors"] == 2
    with Store(store_path) as st:
        spans = llm_spans(st)
        assert [s["attributes"]["auto.attempt"] for s in spans] == [0, 1, 2]
        assert [s["status"] for s in spans] == ["error", "error", "ok"]
        assert spans[0]["error"]["status_code"] == 500
        assert len({s["attributes"]["auto.logical_call_id"] for s in spans}) == 1
        assert len({s["site"] for s in spans}) == 1
        (w,) = st.witnesses("retry")
        assert w.attributes["auto.llm_calls"] == 1 and w.attributes["auto.llm_attempts"] == 3
        # cost counts the successful attempt only
        assert w.attributes["auto.cost_usd_micros"] == spans[2]["attributes"]["auto.cost_usd_micros"]


def test_retries_outside_a_task_share_one_trace(store_path):
    with SimServer(seed=5, error_rate=0.0, fail_attempts=1) as sim:
        c = openai.OpenAI(base_url=sim.base_url, api_key=API_KEY, max_retries=2)
        with auto.recording(store_path):
            c.chat.completions.create(model="auto-sim-1", messages=msgs("hi"))
    with Store(store_path) as st:
        spans = llm_spans(st)
        assert len(spans) == 2 and len({s["trace_id"] for s in spans}) == 1
        (tr,) = st.traces()
        assert tr["status"] == "ok" and tr["attributes"]["auto.attempts"] == 2


def test_http_error_recorded_and_reraised_unchanged(client, store_path):
    seen = []

    @auto.task("bad")
    def bad(ticket: str):
        try:
            client.chat.completions.create(model="auto-sim-1", messages=[])
        except openai.BadRequestError as exc:
            seen.append(exc)
            raise

    with auto.recording(store_path):
        with pytest.raises(openai.BadRequestError) as info:
            bad("x")
    assert info.value is seen[0]  # the very same exception object
    with Store(store_path) as st:
        (s,) = llm_spans(st)
        assert s["status"] == "error" and s["error"]["status_code"] == 400 and s["output"] is None
        (w,) = st.witnesses("bad", include_errors=True)
        assert w.status == "error" and w.error["type"] == "openai.BadRequestError"
        assert st.witnesses("bad") == []


def test_connection_error_recorded_and_reraised(store_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, max_retries=0)
    with auto.recording(store_path):
        with pytest.raises(openai.APIConnectionError):
            c.chat.completions.create(model="auto-sim-1", messages=msgs("hi"))
    with Store(store_path) as st:
        (s,) = llm_spans(st)
        assert s["status"] == "error" and "Connect" in s["error"]["type"]


def test_task_exception_recorded_and_reraised_unchanged(store_path):
    err = ValueError("boom")

    @auto.task("fails")
    def fails(x: int) -> int:
        raise err

    with auto.recording(store_path):
        with pytest.raises(ValueError) as info:
            fails(1)
    assert info.value is err
    with Store(store_path) as st:
        (w,) = st.witnesses("fails", include_errors=True)
        assert w.error == {"type": "builtins.ValueError", "message": "boom"}


def test_non_json_input_or_output_raises_record_error(store_path):
    @auto.task("in_bad")
    def in_bad(x) -> int:
        return 1

    @auto.task("out_bad")
    def out_bad(x: int):
        return object()

    with auto.recording(store_path):
        with pytest.raises(RecordError, match="argument 'x'"):
            in_bad(object())
        with pytest.raises(RecordError, match="result"):
            out_bad(1)
    with Store(store_path) as st:
        assert st.witnesses("in_bad", include_errors=True) == []  # never started
        (w,) = st.witnesses("out_bad", include_errors=True)
        assert w.status == "error" and "RecordError" in w.error["type"]


def test_not_recording_is_transparent(client, tmp_path):
    @auto.task("plain")
    def plain(x):
        return x

    obj = object()
    assert plain(obj) is obj  # no JSON check, no store
    assert not openai_hook.is_instrumented()


def test_no_api_key_or_authorization_in_store(sim, store_path):
    key = "sk-test-NEVERSTORE-" + os.urandom(8).hex()
    c = openai.OpenAI(base_url=sim.base_url, api_key=key, max_retries=0,
                      default_headers={"api-key": key, "X-Custom": "fine"})
    with auto.recording(store_path):
        with auto.task("k", input={"q": "x"}):
            c.chat.completions.create(model="auto-sim-1", messages=msgs(f"my key is {key}"))
            for _ in c.chat.completions.create(model="auto-sim-1", messages=msgs("stream"), stream=True):
                pass
    blob = store_blob(store_path)  # the files and every decoded payload
    assert key.encode() not in blob
    assert b"NEVERSTORE" not in blob
    with Store(store_path) as st:
        for s in llm_spans(st):
            hdrs = s["attributes"]["auto.request.headers"]
            assert not any("authorization" in h or "api-key" in h for h in hdrs)
            assert hdrs["x-custom"] == "fine"
        assert "[REDACTED]" in llm_spans(st)[0]["input"]["messages"][1]["content"]


def test_cost_from_usage(client, store_path):
    with auto.recording(store_path):
        with auto.task("c", input={}) as t:
            client.chat.completions.create(model="auto-sim-1", messages=msgs("refund my invoice"))
            client.chat.completions.create(model="auto-sim-1", messages=msgs("app crashes"))
            t.output = 1
    with Store(store_path) as st:
        total = 0.0
        assert len(llm_spans(st)) == 2
        for s in llm_spans(st):
            a = s["attributes"]
            expect = a["gen_ai.usage.input_tokens"] * 2.5 + a["gen_ai.usage.output_tokens"] * 10.0
            assert a["auto.cost_usd_micros"] == pytest.approx(expect)
            total += expect
        assert st.witnesses("c")[0].attributes["auto.cost_usd_micros"] == pytest.approx(total)


def test_pricing_table():
    assert pricing.cost_usd_micros("auto-sim-1", 1000, 100) == pytest.approx(1000 * 2.5 + 100 * 10)
    assert pricing.cost_usd_micros("gpt-4o-2024-11-20", 1000, 100) == pytest.approx(3500.0)
    assert pricing.cost_usd_micros("gpt-4o-mini-2024-07-18", 1_000_000, 0) == pytest.approx(150_000.0)
    assert pricing.cost_usd_micros("gpt-4o", 1000, 0, cached_input_tokens=400) == pytest.approx(600 * 2.5 + 400 * 1.25)
    assert pricing.cost_usd_micros("my-local-model", 10, 10) is None
    assert pricing.cost_usd_micros("gpt-4o-realtime-preview", 10, 10) is None
    assert pricing.cost_usd_micros("gpt-4o", None, 10) is None
    assert pricing.cost_from_usage("gpt-4o", None) is None


def test_measured_latency_without_sim_header(store_path):
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}
    transport = httpx2.MockTransport(lambda req: httpx2.Response(200, json=body))
    c = openai.OpenAI(base_url="http://mock.invalid/v1", api_key=API_KEY, http_client=httpx2.Client(transport=transport))
    with auto.recording(store_path):
        c.chat.completions.create(model="gpt-4o", messages=msgs("hi"))
    with Store(store_path) as st:
        (s,) = llm_spans(st)
        a = s["attributes"]
        assert a["auto.latency_source"] == "measured" and a["auto.latency_ms"] >= 0
        assert "auto.reference_model.simulated" not in a
        assert a["auto.cost_usd_micros"] == pytest.approx(10 * 2.5 + 2 * 10.0)


def _mock_client(headers: dict[str, str]) -> openai.OpenAI:
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}
    transport = httpx2.MockTransport(lambda req: httpx2.Response(200, json=body, headers=headers))
    return openai.OpenAI(base_url="http://mock.invalid/v1", api_key=API_KEY, max_retries=0,
                         http_client=httpx2.Client(transport=transport))


@pytest.mark.parametrize("headers, source, latency, simulated", [
    ({"x-auto-latency-ms": "12345.5"}, "reported", 12345.5, False),        # a replay: not simulated
    ({"x-auto-latency-ms": "25000", "x-auto-reference-model": "simulated"}, "simulated", 25000.0, True),
    ({"x-auto-reference-model": "simulated"}, "measured", None, True),      # no latency reported
    ({"x-auto-latency-ms": "soon"}, "measured", None, False),               # not a number: ignored
    ({"x-auto-latency-ms": "-5"}, "measured", None, False),                 # negative: ignored
    ({"x-auto-latency-ms": "nan"}, "measured", None, False),                # not finite: ignored
])
def test_reported_latency_protocol(store_path, headers, source, latency, simulated):
    c = _mock_client(headers)

    @auto.task("lat")
    def lat(q: str) -> str:
        return c.chat.completions.create(model="gpt-4o", messages=msgs(q)).choices[0].message.content

    with auto.recording(store_path):
        assert lat("q1") == "hi"
    with Store(store_path) as st:
        (s,) = llm_spans(st)
        a = s["attributes"]
        assert a["auto.latency_source"] == source
        assert ("auto.reference_model.simulated" in a) is simulated
        (w,) = st.witnesses("lat")
        t = w.attributes
        assert t["auto.latency_source"] == ("simulated" if simulated else source)
        if latency is None:
            assert "auto.latency_measured_ms" not in a and 0 <= a["auto.latency_ms"] < 60_000
        else:
            assert a["auto.latency_ms"] == latency
            assert 0 <= a["auto.latency_measured_ms"] < latency  # the wall time, kept beside it
            # the task span: its own wall time plus (reported - measured) of its model call
            adjust = a["auto.latency_ms"] - a["auto.latency_measured_ms"]
            assert adjust - 0.001 <= t["auto.latency_ms"] < latency + 60_000


def test_getenv_records_only_a_digest(store_path, monkeypatch):
    monkeypatch.setenv("AUTO_TEST_SECRET_SETTING", "hunter2-value")
    with auto.recording(store_path):
        with auto.task("env", input={}):
            assert auto.record.getenv("AUTO_TEST_SECRET_SETTING") == "hunter2-value"
    with Store(store_path) as st:
        (w,) = st.witnesses("env")
        assert w.attributes["auto.env_reads"]["AUTO_TEST_SECRET_SETTING"].startswith("sha256:")
    blob = store_blob(store_path)  # the files and every decoded payload
    assert b"hunter2-value" not in blob


# ----------------------------------------------------------------------------- auto record


CHILD = textwrap.dedent("""
    import os, sys, openai
    c = openai.OpenAI(base_url=os.environ["SIM_URL"], api_key="sk-test-child-key-123456", max_retries=0)
    r = c.chat.completions.create(model="auto-sim-1", temperature=0, messages=[
        {"role": "system", "content": "[auto-bench:triage] labels: billing, bug"},
        {"role": "user", "content": "refund my invoice please"}])
    print(r.choices[0].message.content)
    sys.exit(int(os.environ.get("CHILD_EXIT", "0")))
""")


def test_run_recorded_groups_untasked_calls_under_task(sim, tmp_path, monkeypatch, capfd):
    script = tmp_path / "agent.py"
    script.write_text(CHILD)
    marker_dir = tmp_path / "site"
    marker_dir.mkdir()
    (marker_dir / "sitecustomize.py").write_text(
        "import os\nopen(os.environ['MARKER_FILE'], 'w').write('ran')\n")
    monkeypatch.setenv("SIM_URL", sim.base_url)
    monkeypatch.setenv("CHILD_EXIT", "3")
    monkeypatch.setenv("MARKER_FILE", str(tmp_path / "marker"))
    monkeypatch.setenv("PYTHONPATH", str(marker_dir))
    store = tmp_path / "rec.db"
    rc = run_recorded([sys.executable, str(script)], str(store), task="agent")
    assert rc == 3
    assert capfd.readouterr().out.strip() == "billing"
    assert (tmp_path / "marker").read_text() == "ran"  # the existing sitecustomize still ran
    with Store(store) as st:
        (w,) = st.witnesses("agent")
        assert w.input["argv"][-1] == str(script)
        (s,) = st.spans(kind="llm")
        assert s["parent_span_id"] == w.span_id and s["task"] == "agent"
        assert s["output"]["content"] == "billing"
        assert w.attributes["auto.llm_calls"] == 1


def test_run_recorded_without_task_records_top_level_spans(sim, tmp_path, monkeypatch):
    script = tmp_path / "agent.py"
    script.write_text(CHILD)
    monkeypatch.setenv("SIM_URL", sim.base_url)
    monkeypatch.delenv("CHILD_EXIT", raising=False)
    store = tmp_path / "rec.db"
    assert run_recorded([sys.executable, str(script)], str(store)) == 0
    with Store(store) as st:
        assert st.spans(kind="task") == []
        (s,) = st.spans(kind="llm")
        assert s["parent_span_id"] is None and s["task"] is None
        assert [t["trace_id"] for t in st.traces()] == [s["trace_id"]]


def test_run_recorded_bad_command(tmp_path):
    with pytest.raises(ArgumentError):
        run_recorded(["definitely-not-a-command-xyz"], str(tmp_path / "s.db"))
    with pytest.raises(ArgumentError):
        run_recorded([], str(tmp_path / "s.db"))
