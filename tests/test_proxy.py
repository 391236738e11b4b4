"""``auto proxy``: recording through an OpenAI-compatible proxy, tier-1 answers of compiled sites,
and every bad input the issue names (upstream down, slow, 4xx/5xx, malformed body; a client
that disconnects mid-stream; requests the proxy does not understand; untrusted generations)."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from pathlib import Path

import httpx2
import openai
import pytest

from auto.proxy import ProxyConfig, ProxyServer
from auto.ratchet import CompilePolicy
from auto.registry import Registry
from auto.signing import generate_keypair, load_private_key
from auto.store import Store
from auto_runtime import TrustPolicy
from bench.sim import SimServer
from bench.triage.agent import SYSTEM_PROMPT

from site_fixtures import WORDS, compiled_site, label_of, site_words, ticket_messages
from upstreams import ScriptedUpstream

KEY = "sk-proxy-test-secret-0123456789"


def proxy(upstream: str, store: Path, **kw) -> ProxyServer:
    kw.setdefault("ratchet_options", {"worker": "thread"})
    return ProxyServer(ProxyConfig(upstream=upstream, store=str(store), port=0, rediscover_s=0.2, **kw))


def spans(store: Path, **filters) -> list[dict]:
    with Store(store) as st:
        return st.spans(**filters)


def client(px: ProxyServer, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=px.base_url, api_key=KEY, max_retries=kw.pop("max_retries", 0), **kw)


@pytest.fixture(scope="module")
def sim():
    with SimServer(seed=0, error_rate=0.0) as s:
        yield s


def triage(ticket: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ticket}]


# ----------------------------------------------------------------------------- recording


def test_records_plain_streamed_and_tool_calls_without_credentials(sim, tmp_path):
    store = tmp_path / "p.sqlite"
    with proxy(sim.base_url, store) as px:
        c = client(px)
        r = c.chat.completions.create(model="auto-sim-1", temperature=0.0, messages=triage("I was charged twice"))
        assert r.choices[0].message.content == "billing"
        chunks = list(c.chat.completions.create(model="auto-sim-1", temperature=0.0, messages=triage("App crashes"),
                                                stream=True, stream_options={"include_usage": True}))
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "bug"
        tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object", "properties": {
            "q": {"type": "string"}}}}} for i in range(2)]
        t = c.chat.completions.create(model="auto-sim-1", tools=tools, messages=[
            {"role": "system", "content": "[auto-sim:tools] call tools"}, {"role": "user", "content": "go"}])
        assert [x.function.name for x in t.choices[0].message.tool_calls] == ["f0", "f1"]
        px.proxy.recorder.flush()
    rows = spans(store, kind="llm")
    assert len(rows) == 3 and all(r["attributes"]["auto.proxy"] for r in rows)
    plain, streamed, tool = rows
    assert plain["output"]["content"] == "billing" and plain["attributes"]["gen_ai.usage.input_tokens"] > 0
    assert streamed["attributes"]["auto.stream"] and streamed["output"]["content"] == "bug"
    assert [x["function"]["name"] for x in tool["output"]["tool_calls"]] == ["f0", "f1"]
    assert plain["attributes"]["auto.latency_source"] == "simulated"
    assert "authorization" not in plain["attributes"]["auto.request.headers"]
    with Store(store) as st:
        assert st.verify().ok
    from conftest import store_blob

    raw = store_blob(store)
    assert KEY.encode() not in raw  # forwarded, never stored


def test_a_key_pasted_into_a_prompt_is_redacted(sim, tmp_path):
    store = tmp_path / "k.sqlite"
    with proxy(sim.base_url, store, answer=False) as px:
        client(px).chat.completions.create(model="auto-sim-1", temperature=0.0,
                                           messages=triage(f"my key {KEY} stopped working, refund"))
        px.proxy.recorder.flush()
    (row,) = spans(store, kind="llm")
    assert KEY not in json.dumps(row) and row["attributes"].get("auto.redactions")


def test_credentials_are_forwarded_upstream(tmp_path):
    with ScriptedUpstream("echo-headers") as up, proxy(up.base_url, tmp_path / "s.sqlite", answer=False) as px:
        r = client(px).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    got = {k.lower(): v for k, v in json.loads(r.choices[0].message.content).items()}
    assert got["authorization"] == f"Bearer {KEY}"


def test_urllib_agent_records_every_call_streamed_or_not(sim, tmp_path):
    store = tmp_path / "u.sqlite"
    with proxy(sim.base_url, store) as px:
        for i in range(6):
            body = {"model": "auto-sim-1", "temperature": 0.0, "messages": triage(f"refund {i} please"), "stream": i % 2 == 1}
            req = urllib.request.Request(px.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
            with urllib.request.urlopen(req) as resp:
                data = resp.read()
            assert (b"data: [DONE]" in data) == (i % 2 == 1)
        px.proxy.recorder.flush()
    rows = spans(store, kind="llm")
    assert len(rows) == 6 and sum(bool(r["attributes"]["auto.stream"]) for r in rows) == 3
    assert all(r["status"] == "ok" and r["output"]["content"] == "billing" for r in rows)


def test_responses_api_is_recorded(tmp_path):
    store = tmp_path / "r.sqlite"
    with ScriptedUpstream("responses") as up, proxy(up.base_url, store) as px:
        c = client(px)
        r = c.responses.create(model="scripted-1", input="say hello")
        assert r.output_text == "hello"
        events = list(c.responses.create(model="scripted-1", input="say hello", stream=True))
        assert events[-1].type == "response.completed"
        px.proxy.recorder.flush()
    rows = spans(store, kind="llm")
    assert [r["name"] for r in rows] == ["responses", "responses"]
    assert all(r["status"] == "ok" and r["output"]["content"] == "hello" for r in rows)
    assert rows[0]["attributes"]["gen_ai.usage.input_tokens"] == 7


def test_responses_api_is_recorded_in_process_too(tmp_path):
    import auto

    store = tmp_path / "ip.sqlite"
    with ScriptedUpstream("responses") as up, auto.recording(str(store)):
        c = openai.OpenAI(base_url=up.base_url, api_key=KEY, max_retries=0)
        assert c.responses.create(model="scripted-1", input="say hello").output_text == "hello"
    (row,) = spans(store, kind="llm")
    assert row["name"] == "responses" and row["output"]["content"] == "hello" and row["output"]["finish_reason"] == "completed"


def test_concurrent_clients_lose_and_duplicate_nothing(sim, tmp_path):
    store = tmp_path / "c.sqlite"
    n_clients, per = 16, 8
    with proxy(sim.base_url, store, answer=False) as px:
        errors: list[BaseException] = []

        def worker(k: int) -> None:
            c = client(px)
            try:
                for i in range(per):
                    c.chat.completions.create(model="auto-sim-1", temperature=0.0, messages=triage(f"client {k} call {i} refund"))
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        px.proxy.recorder.flush()
    rows = spans(store, kind="llm")
    assert len(rows) == n_clients * per
    tickets = sorted(r["input"]["messages"][1]["content"] for r in rows)
    assert tickets == sorted(f"client {k} call {i} refund" for k in range(n_clients) for i in range(per))
    with Store(store) as st:
        assert st.verify().ok


# ----------------------------------------------------------------------------- streaming


def test_sse_passes_through_chunk_by_chunk(tmp_path):
    with ScriptedUpstream("drip", delay_s=0.15, chunks=6) as up, proxy(up.base_url, tmp_path / "d.sqlite") as px:
        t0 = time.perf_counter()
        stream = client(px).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
        first = next(iter(stream))
        t_first = time.perf_counter() - t0
        rest = list(stream)
        t_all = time.perf_counter() - t0
    assert first.choices[0].delta.content == "w0 "
    assert t_first < 0.5 * t_all and len(rest) == 6


def test_client_gone_mid_stream_leaves_one_partial_span_and_closes_upstream(tmp_path):
    store = tmp_path / "g.sqlite"
    with ScriptedUpstream("drip", delay_s=0.1, chunks=40) as up, proxy(up.base_url, store) as px:
        with httpx2.Client() as h, h.stream("POST", px.base_url + "/chat/completions", json={
                "model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}) as resp:
            it = resp.iter_bytes()
            got = next(it)
            assert got.startswith(b"data: ")
        assert up.closed_early.wait(10), "the upstream connection stayed open"
        deadline = time.time() + 10
        while time.time() < deadline and not spans(store, kind="llm"):
            px.proxy.recorder.flush()
            time.sleep(0.05)
    (row,) = spans(store, kind="llm")
    assert row["status"] == "error" and row["error"]["type"] == "stream_incomplete"
    assert row["output"]["content"].startswith("w0 ") and row["attributes"]["auto.stream.complete"] is False


# ----------------------------------------------------------------------------- bad input


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_upstream_down_slow_error_status_and_malformed_body(sim, tmp_path):
    store = tmp_path / "b.sqlite"
    msgs = [{"role": "user", "content": "hi"}]
    with proxy(f"http://127.0.0.1:{_free_port()}/v1", store) as px:
        with pytest.raises(openai.InternalServerError) as e:
            client(px).chat.completions.create(model="m", messages=msgs)
        assert e.value.status_code == 502 and "cannot be reached" in str(e.value)
        px.proxy.recorder.flush()
    (row,) = spans(store, kind="llm")
    assert row["status"] == "error" and row["attributes"]["auto.proxy"]

    with ScriptedUpstream("slow", delay_s=1.0) as up, proxy(up.base_url, tmp_path / "slow.sqlite", timeout_s=0.2) as px:
        with pytest.raises(openai.APIStatusError) as e:
            client(px).chat.completions.create(model="m", messages=msgs)
        assert e.value.status_code == 504

    with proxy(sim.base_url, tmp_path / "e.sqlite") as px:
        direct = httpx2.post(sim.base_url + "/chat/completions", json={"messages": msgs})
        via = httpx2.post(px.base_url + "/chat/completions", json={"messages": msgs})
        assert via.status_code == direct.status_code == 400 and via.json() == direct.json()
        with pytest.raises(openai.InternalServerError):
            client(px).chat.completions.create(model="auto-sim-1", messages=triage("x"),
                                               extra_headers={"x-auto-sim-fail-attempts": "1"})
        px.proxy.recorder.flush()
        rows = spans(tmp_path / "e.sqlite", kind="llm")
    assert [r["error"]["status_code"] for r in rows] == [400, 500]

    with ScriptedUpstream("garbage") as up, proxy(up.base_url, tmp_path / "m.sqlite") as px:
        r = httpx2.post(px.base_url + "/chat/completions", json={"model": "m", "messages": msgs})
        assert r.status_code == 200 and r.content == b"<html>not json</html>"
        px.proxy.recorder.flush()
    (row,) = spans(tmp_path / "m.sqlite", kind="llm")
    assert row["status"] == "error" and row["error"]["type"] == "malformed_body"


def test_requests_the_proxy_does_not_understand_are_forwarded_and_recorded_opaque(tmp_path):
    store = tmp_path / "o.sqlite"
    with ScriptedUpstream("garbage") as up, proxy(up.base_url, store, max_body_bytes=4096) as px:
        models = httpx2.get(px.base_url + "/models", headers={"Authorization": f"Bearer {KEY}"})
        assert models.json()["data"][0]["id"] == "scripted-1"
        r = httpx2.post(px.base_url + "/chat/completions", content=b"{not json", headers={"Content-Type": "application/json"})
        assert r.content == b"<html>not json</html>"
        assert up.requests[-1]["body"] == b"{not json"  # forwarded unchanged
        big = httpx2.post(px.base_url + "/embeddings", content=b"x" * 5000)
        assert big.status_code == 413
        px.proxy.recorder.flush()
    rows = spans(store, kind="llm")
    assert [r["name"] for r in rows] == ["opaque", "opaque"]
    assert rows[0]["site"] == "opaque/GET /v1/models" and rows[0]["attributes"]["auto.opaque"]
    assert rows[1]["input"]["body_bytes"] == len(b"{not json") and "body" not in rows[1]["input"]
    from auto.census import census

    assert {s.site for s in census(rows).sites} == {"opaque/GET /v1/models", "opaque/POST /v1/chat/completions"}


def test_a_chat_body_with_a_number_canonical_json_cannot_write_is_forwarded_opaque(tmp_path):
    """``1e999`` reads as infinity and ``NaN`` is not JSON: the proxy answered a bare 500 with a
    traceback; such a body has no canonical form, so it is forwarded unchanged and recorded opaque."""
    store = tmp_path / "n.sqlite"
    with ScriptedUpstream("garbage") as up, proxy(up.base_url, store) as px:
        codes = []
        for number in (b"1e999", b"-1e999", b"NaN", b"Infinity"):
            raw = b'{"model":"m","temperature":' + number + b',"messages":[{"role":"user","content":"hi"}]}'
            r = httpx2.post(px.base_url + "/chat/completions", content=raw, headers={"Content-Type": "application/json"})
            codes.append(r.status_code)
            assert up.requests[-1]["body"] == raw  # forwarded unchanged
        px.proxy.recorder.flush()
    assert 500 not in codes
    assert [r["name"] for r in spans(store, kind="llm")] == ["opaque"] * 4


# ----------------------------------------------------------------------------- tier-1


@pytest.fixture()
def compiled(tmp_path):
    return compiled_site(tmp_path)


def test_compiled_site_answers_at_tier1_and_deopts_go_upstream(compiled, tmp_path):
    store, sid, out = compiled
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, store, audit_rate=0.0, client_keys=(KEY,)) as px:
        c = client(px)
        w = site_words()[0]
        raw = c.chat.completions.with_raw_response.create(model="m-1", messages=ticket_messages(w))
        r = raw.parse()
        assert raw.headers["x-auto-tier"] == "1" and raw.headers["x-auto-generation"] == "1"
        assert raw.headers["x-auto-artifact-id"] == out.artifact_id and raw.headers["x-auto-site"] == sid
        assert r.choices[0].message.content == label_of(w) and r.choices[0].finish_reason == "stop"
        assert r.usage.prompt_tokens == r.usage.completion_tokens == r.usage.total_tokens == 0
        assert r.model == "m-1" and r.object == "chat.completion"
        chunks = list(c.chat.completions.create(model="m-1", messages=ticket_messages(w), stream=True,
                                                stream_options={"include_usage": True}))
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == label_of(w)
        assert chunks[-1].usage.total_tokens == 0
        n_up = len(up.requests)
        assert n_up == 0  # nothing went upstream
        new = c.chat.completions.with_raw_response.create(model="m-1", messages=ticket_messages("refund never seen"))
        assert new.headers["x-auto-tier"] == "0" and new.parse().choices[0].message.content == "billing"
        assert len(up.requests) == 1
        deadline = time.time() + 10  # the capture runs once the answer was sent
        while time.time() < deadline and px.proxy.sites.status()[sid]["ratchet"]["evidence"]["deopts"] < 1:
            time.sleep(0.02)
        px.proxy.recorder.flush()
        st = px.proxy.sites.status()[sid]
        assert st["counters"] == {"tier1": 2, "deopt": 1, "outside_template": 0, "unverified_key": 0}
        assert st["ratchet"]["evidence"]["deopts"] == 1
        health = httpx2.get(px.url + "/auto/health").json()
        assert health["ok"] and health["answering"]
    deopt = [r for r in spans(store, kind="llm") if r["attributes"].get("auto.proxy") and r["name"] == "chat.completions"]
    assert len(deopt) == 1 and deopt[0]["attributes"]["auto.site"] == sid
    assert spans(store, kind="task") == []  # the recorded call is the witness; no task span is added
    assert deopt[0]["attributes"]["auto.deopt.reason"].startswith("unseen input")
    # the two tier-1 answers are recorded too, marked, never witnesses of the site
    tier1 = [r for r in spans(store, kind="llm") if r["name"] == "auto.tier1"]
    assert len(tier1) == 2 and all(r["site"] == sid for r in tier1)
    for r in tier1:
        a = r["attributes"]
        assert a["auto.tier"] == 1 and a["auto.generation"] == 1 and a["auto.artifact_id"] == out.artifact_id
        assert a["auto.cost_usd_micros"] == 0 and a["gen_ai.usage.output_tokens"] == 0
        assert r["output"]["content"] == label_of(w) and r["input"]["messages"] == ticket_messages(w)
    from auto.sites import store_sites

    with Store(store) as st:
        (found,) = store_sites(st).values()  # one site, and its witnesses are the recorded calls only
        assert found.id == sid
        from auto.census import census_store

        (row,) = [x for x in census_store(st).sites if x.site == sid]
        calls = [r for r in st.spans(kind="llm") if r["name"] == "chat.completions"]
        assert row.spans == len(calls)  # the recorded calls only, no tier-1 answer


def test_a_site_answers_every_client_s_rendering_of_its_request(compiled):
    """LangChain writes ``temperature: 0.0``-style floats, ``stream: false`` and its own key order;
    other clients write documented defaults: all are the recorded site's request (tier-1)."""
    store, sid, _ = compiled
    w = site_words()[0]
    msgs = [dict(reversed(list(m.items()))) for m in ticket_messages(w)]
    msgs[1]["role"] = " user"
    body = {"stream": False, "n": 1, "temperature": 1.0, "top_p": 1, "response_format": {"type": "text"},
            "messages": msgs, "model": "m-1", "stop": None}
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, store, audit_rate=0.0, client_keys=(KEY,)) as px:
        r = httpx2.post(px.base_url + "/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"})
        assert r.status_code == 200 and r.headers["x-auto-tier"] == "1" and r.headers["x-auto-site"] == sid
        assert r.json()["choices"][0]["message"]["content"] == label_of(w)
        assert up.requests == []


def test_record_only_never_answers(compiled):
    store, sid, _ = compiled
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, store, answer=False) as px:
        raw = client(px).chat.completions.with_raw_response.create(model="m-1", messages=ticket_messages(site_words()[0]))
        assert "x-auto-tier" not in raw.headers and len(up.requests) == 1


def test_untrusted_generations_are_not_installed(compiled, tmp_path):
    store, sid, out = compiled
    _, pub, _ = generate_keypair(tmp_path / "k")
    trust = TrustPolicy.from_files([pub])
    w = site_words()[0]
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, store, trust=trust) as px:
        raw = client(px).chat.completions.with_raw_response.create(model="m-1", messages=ticket_messages(w))
        assert raw.headers["x-auto-tier"] == "0"  # unsigned: refused, served upstream
        assert px.proxy.sites.status()[sid]["ratchet"]["generation"] is None
    reg = Registry(tmp_path / "reg")
    reg.add(out.wasm, key=load_private_key(tmp_path / "k.key"))
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, store, trust=trust, registry=reg, client_keys=(KEY,)) as px:
        raw = client(px).chat.completions.with_raw_response.create(model="m-1", messages=ticket_messages(w))
        assert raw.headers["x-auto-tier"] == "1"


def test_the_proxy_compiles_a_site_from_what_it_recorded(tmp_path):
    """Zero code change: calls recorded through the proxy become a site; its ratchet compiles a
    generation in the background; later calls are answered at tier-1."""
    store = tmp_path / "z.sqlite"
    policy = CompilePolicy(first_at=20)
    # the overlay answers an input once it leads by 2 witnesses, so the second pass is witnessed
    # (with k = 1 it answers that pass from the first witness whenever the capture landed first,
    # and the memo sees no repeat: a race with the recorder, not a property of the proxy)
    contract = tmp_path / "contract.toml"
    contract.write_text("overlay_min_lead = 2\n")
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, store, audit_rate=0.0, contract_path=str(contract),
                                                   ratchet_options={"worker": "thread", "policy": policy}) as px:
        c = client(px)
        words = site_words()
        for _ in range(2):
            for w in words:
                c.chat.completions.create(model="m-1", messages=ticket_messages(w))
        deadline = time.time() + 120
        tier = None
        while time.time() < deadline:
            raw = c.chat.completions.with_raw_response.create(model="m-1", messages=ticket_messages(words[0]))
            tier = raw.headers.get("x-auto-tier")
            if tier == "1":
                break
            px.proxy.sites.wait_idle(30)
            time.sleep(0.3)
        assert tier == "1", px.proxy.sites.status()
        px.proxy.sites.wait_idle(120)  # the repeats are answered by the overlay before the generation lands
        (status,) = px.proxy.sites.status().values()
        assert status["ratchet"]["generation"] is not None and status["ratchet"]["generation"] >= 1, status


# ----------------------------------------------------------------------------- the example agents

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _tickets_file(tmp_path: Path, n: int) -> Path:
    from bench.triage import corpus

    p = tmp_path / "tickets.jsonl"
    p.write_text("".join(json.dumps({"ticket": t.ticket}) + "\n" for t in corpus.generate(n, seed=3)))
    return p


def test_urllib_agent_through_the_proxy_records_every_call(sim, tmp_path):
    import os
    import subprocess
    import sys

    store = tmp_path / "ua.sqlite"
    tickets = _tickets_file(tmp_path, 12)
    with proxy(sim.base_url, store, answer=False) as px:
        p = subprocess.run([sys.executable, str(EXAMPLES / "urllib_agent.py"), str(tickets)], capture_output=True,
                           text=True, timeout=120, env={**os.environ, "OPENAI_BASE_URL": px.base_url, "OPENAI_API_KEY": KEY})
        assert p.returncode == 0, p.stderr[-800:]
        px.proxy.recorder.flush()
    rows = spans(store, kind="llm")
    assert len(p.stdout.splitlines()) == 12 and len(rows) == 12
    assert sum(1 for r in rows if r["attributes"]["auto.stream"]) == 6 and all(r["status"] == "ok" for r in rows)


def test_the_readme_agent_recorded_with_no_code_change_is_one_site_with_a_slot(sim, tmp_path):
    """`auto record -- python examples/triage_agent.py` on an agent without @auto.task: one
    model-call site whose slot is the ticket, not one site per distinct prompt."""
    import os
    import subprocess
    import sys

    from auto.census import census

    store = tmp_path / "rec.sqlite"
    tickets = _tickets_file(tmp_path, 15)
    both = tmp_path / "twice.jsonl"
    both.write_text(tickets.read_text() * 2)
    env = {**os.environ, "OPENAI_BASE_URL": sim.base_url, "OPENAI_API_KEY": KEY}
    p = subprocess.run([sys.executable, "-m", "auto.cli", "record", "--store", str(store), "--", sys.executable,
                        str(EXAMPLES / "triage_agent.py"), str(both)], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-800:]
    (site,) = census(spans(store)).sites
    assert site.model_call is not None and [s["name"] for s in site.model_call["slots"]] == ["user"]
    assert len(site.inputs) == 15 and site.spans == 30


def test_tier1_spans_can_be_left_out(compiled, tmp_path):
    """``record_tier1=False`` (``auto proxy --no-tier1-spans``): tier-1 answers as before, none recorded."""
    store, sid, out = compiled
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, store, audit_rate=0.0, client_keys=(KEY,),
                                                  record_tier1=False) as px:
        raw = client(px).chat.completions.with_raw_response.create(model="m-1", messages=ticket_messages(site_words()[0]))
        assert raw.headers["x-auto-tier"] == "1" and len(up.requests) == 0
        px.proxy.recorder.flush()
    assert not [r for r in spans(store, kind="llm") if r["name"] == "auto.tier1"]


def test_a_call_on_a_site_not_compiled_yet_is_marked_tier_0(tmp_path):
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, tmp_path / "fresh.sqlite", client_keys=(KEY,)) as px:
        raw = client(px).chat.completions.with_raw_response.create(model="m-1", messages=ticket_messages(site_words()[0]))
        assert raw.headers["x-auto-tier"] == "0" and len(up.requests) == 1


def test_an_overlay_answer_before_any_generation_names_no_generation(tmp_path):
    """Before any generation is installed, a repeat is answered by the table overlay: the answer,
    its headers and its tier-1 span say so, and never render the missing generation as text."""
    store = tmp_path / "o.sqlite"
    never = CompilePolicy(first_at=10**6, first_repeats=10**6)
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, store, audit_rate=0.0, client_keys=(KEY,),
                                                   ratchet_options={"worker": "thread", "policy": never}) as px:
        c = client(px)
        word = site_words()[0]
        deadline = time.time() + 60
        raw = None
        while time.time() < deadline:
            raw = c.chat.completions.with_raw_response.create(model="m-1", messages=ticket_messages(word))
            if raw.headers.get("x-auto-tier") == "1":
                break
            time.sleep(0.3)
        assert raw is not None and raw.headers.get("x-auto-tier") == "1", px.proxy.sites.status()
        body = raw.parse()
        assert "None" not in (body.system_fingerprint or "") and body.system_fingerprint == "auto-overlay"
        assert "x-auto-generation" not in raw.headers and "x-auto-artifact-id" not in raw.headers
        assert raw.headers["x-auto-origin"] == "overlay"
        px.proxy.recorder.flush()
    (t1,) = [r for r in spans(store, kind="llm") if r["name"] == "auto.tier1"][:1]
    a = t1["attributes"]
    assert a["auto.origin"] == "overlay" and a["auto.generation"] is None
    assert a["gen_ai.openai.response.system_fingerprint"] == "auto-overlay"
