"""Spans of standard instrumentation become sites: the same site as the proxy, and compiled.

The three ``otlp-*.json`` fixtures are what the real instrumentations wrote for the ``openai``
client's ticket calls against a loopback upstream (``tests/dialects/make_fixtures.py``):
OpenLLMetry (span ``openai.chat``, protobuf ``json_format`` output with base64 ids), the
official ``opentelemetry-instrumentation-openai-v2`` (``chat gpt-4o-mini``, hex ids) and
OpenInference (``ChatCompletion``, ``input.value``). The same calls' request bodies as the client
sent them (``requests.json``, what ``auto proxy`` records) give the reference site. The previous
forms of the conventions (flattened attributes, message events, OpenInference's flattened
messages) have no real sample here: they are written below from the conventions' text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from auto.census import census_store
from auto.compile import compile_task
from auto.interchange.otlp import MODEL_CALL_SPAN, import_otlp, load_otlp
from auto.interchange.parquet import InterchangeError
from auto.sites import discover
from auto.store import Store

from site_fixtures import chat_span

FIXTURES = Path(__file__).parent / "dialects"
INSTRUMENTATIONS = ("openllmetry", "openai-v2", "openinference")


def _proxy_site(scenario: str = "tickets") -> str:
    spans = []
    for b in json.loads((FIXTURES / "requests.json").read_text())["openai"][scenario]:
        s = chat_span(b["messages"], "x")
        s["input"] = b
        spans.append(s)
    (sid,) = discover(spans).sites
    return sid


def _llm_sites(store: Store) -> list[str]:
    return [s.site for s in census_store(store).sites if s.kind == "llm"]


@pytest.mark.parametrize("which", INSTRUMENTATIONS)
def test_real_instrumentation_spans_import_census_to_the_proxy_s_site(which, tmp_path):
    with Store(tmp_path / "s.db") as st:
        res = import_otlp(st, FIXTURES / f"otlp-{which}.json")
        assert res["spans"] == 10 and res["skipped"] == 0
        llm = st.spans(kind="llm")
        assert {s["name"] for s in llm} == {MODEL_CALL_SPAN}
        assert all(s["attributes"]["auto.otlp.span_name"] for s in llm)
        assert sorted(s["output"]["content"] for s in llm) == ["billing"] * 3 + ["bug"] * 7
        assert _llm_sites(st) == [_proxy_site()]


@pytest.mark.parametrize("which", INSTRUMENTATIONS)
def test_real_instrumentation_tool_rounds_give_the_proxy_s_sites(which):
    """The tool-calling rounds (ask for ``lookup``, then answer with its result) as each
    instrumentation recorded them: the assistant's tool calls and the tool's answers come back
    in the history. ``opentelemetry-instrumentation-openai-v2`` 2.4b0 records no tool definitions
    (``gen_ai.tool.definitions`` is not written), so its requests are the proxy's less ``tools``:
    a different shape, hence sites of their own."""
    bodies = json.loads((FIXTURES / "requests.json").read_text())["openai"]["tools"]
    if which == "openai-v2":
        bodies = [{k: v for k, v in b.items() if k != "tools"} for b in bodies]
    ref = []
    for b in bodies:
        s = chat_span(b["messages"], "x")
        s["input"] = b
        ref.append(s)
    want = discover(ref)
    batch = load_otlp(FIXTURES / f"otlp-{which}-tools.json")
    got = discover(batch.spans)
    assert len(want.sites) == 2 and set(got.sites) == set(want.sites)
    asks = [s for s in batch.spans if s["output"]["tool_calls"]]
    assert len(asks) == 10 and all(s["output"]["tool_calls"][0]["function"]["name"] == "lookup" for s in asks)


def test_an_imported_site_compiles_and_answers(tmp_path):
    sid = _proxy_site()
    with Store(tmp_path / "s.db") as st:  # the same ten calls seen by each instrumentation: one site, witnessed 3x
        for which in INSTRUMENTATIONS:
            import_otlp(st, FIXTURES / f"otlp-{which}.json")
        assert _llm_sites(st) == [sid]
        out = compile_task(st, sid, rungs=["memo"], out_path=tmp_path / "site.wasm")
    from auto_runtime import Artifact

    art = Artifact.load(out.wasm)
    body = json.loads((FIXTURES / "requests.json").read_text())["langchain"]["tickets"][0]  # refund, billing
    from auto.sites import Site

    site = Site.from_manifest(out.manifest["site"])
    assert art.call(site.extract(body))["answer"] == "billing"


def test_cli_import_of_json_format_output_and_refusal_of_nothing(tmp_path):
    cli = [sys.executable, "-m", "auto.cli", "store", "import"]
    p = subprocess.run([*cli, "--store", str(tmp_path / "a.db"), "--otlp", str(FIXTURES / "otlp-openllmetry.json")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["spans"] == 10
    http_only = tmp_path / "http.json"
    http_only.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "5b8aa5a2d2c872e8321cf37308d69df2", "spanId": "0b1581bf3cb55c13", "name": "GET /health",
         "startTimeUnixNano": "1000"}]}]}]}))
    p = subprocess.run([*cli, "--store", str(tmp_path / "b.db"), "--otlp", str(http_only)], capture_output=True,
                       text=True)
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "nothing to import" in p.stderr, p.stderr
    assert not (tmp_path / "b.db").exists()  # no empty store left behind
    cut = tmp_path / "cut.json"
    cut.write_text((FIXTURES / "otlp-openai-v2.json").read_text()[:500])
    p = subprocess.run([*cli, "--store", str(tmp_path / "c.db"), "--otlp", str(cut)], capture_output=True, text=True)
    assert p.returncode == 1 and not (tmp_path / "c.db").exists()


# ----------------------------------------------------------------------------- previous forms, from the text


def _doc(spans: list[dict]) -> dict:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}]}


def _kv(attrs: dict) -> list[dict]:
    def val(v):
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        return {"stringValue": v if isinstance(v, str) else json.dumps(v)}
    return [{"key": k, "value": val(v)} for k, v in attrs.items()]


def _span(i: int, name: str, attrs: dict, events: list[dict] | None = None) -> dict:
    sp = {"traceId": f"{i + 1:032x}", "spanId": f"{i + 1:016x}", "name": name, "startTimeUnixNano": str(1000 + i),
          "endTimeUnixNano": str(2000 + i), "attributes": _kv(attrs)}
    if events:
        sp["events"] = [{"name": n, "timeUnixNano": "1", "attributes": _kv(a)} for n, a in events]
    return sp


def _tool_bodies() -> list[dict]:
    return json.loads((FIXTURES / "requests.json").read_text())["openai"]["tools"]


def _answer_of(i: int) -> tuple[str | None, list | None]:
    """What the loopback upstream answered the ``i``-th tools request (a tool call, then a label)."""
    return (None, [{"id": f"call_{i + 1}", "name": "lookup", "arguments": "{}"}]) if i % 2 == 0 else ("bug", None)


def _flattened(bodies: list[dict]) -> list[dict]:
    """Older OpenLLMetry: ``gen_ai.prompt.<i>.*``, ``gen_ai.completion.<i>.*``, ``llm.request.functions.<i>.*``."""
    out = []
    for i, b in enumerate(bodies):
        a: dict = {"gen_ai.system": "openai", "llm.request.type": "chat", "gen_ai.request.model": b["model"],
                   "gen_ai.request.temperature": b["temperature"]}
        for j, m in enumerate(b["messages"]):
            a[f"gen_ai.prompt.{j}.role"] = m["role"]
            if m.get("content") is not None:
                a[f"gen_ai.prompt.{j}.content"] = m["content"]
            for k, c in enumerate(m.get("tool_calls") or []):
                a[f"gen_ai.prompt.{j}.tool_calls.{k}.id"] = c["id"]
                a[f"gen_ai.prompt.{j}.tool_calls.{k}.name"] = c["function"]["name"]
                a[f"gen_ai.prompt.{j}.tool_calls.{k}.arguments"] = c["function"]["arguments"]
            if m.get("tool_call_id"):
                a[f"gen_ai.prompt.{j}.tool_call_id"] = m["tool_call_id"]
        for k, t in enumerate(b.get("tools") or []):
            for f in ("name", "description", "parameters"):
                a[f"llm.request.functions.{k}.{f}"] = t["function"][f]
        content, calls = _answer_of(i)
        a["gen_ai.completion.0.role"] = "assistant"
        if content:
            a["gen_ai.completion.0.content"] = content
        for k, c in enumerate(calls or []):
            for f, v in c.items():
                a[f"gen_ai.completion.0.tool_calls.{k}.{f}"] = v
        out.append(_span(i, "openai.chat", a))
    return out


def _events(bodies: list[dict]) -> list[dict]:
    """Semantic conventions ≤ 1.36: one event per message, ``gen_ai.choice`` for the answer."""
    out = []
    for i, b in enumerate(bodies):
        a = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": b["model"],
             "gen_ai.request.temperature": b["temperature"],
             "gen_ai.tool.definitions": [{"type": "function", **t["function"]} for t in b.get("tools") or []]}
        evs = []
        for m in b["messages"]:
            ea: dict = {}
            if m.get("content") is not None:
                ea["content"] = m["content"]
            if m.get("tool_calls"):
                ea["tool_calls"] = m["tool_calls"]
            if m.get("tool_call_id"):
                ea["id"] = m["tool_call_id"]
            evs.append((f"gen_ai.{m['role']}.message", ea))
        content, calls = _answer_of(i)
        msg = {"content": content} if content else {"tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]}
        evs.append(("gen_ai.choice", {"index": 0, "finish_reason": "stop" if content else "tool_calls", "message": msg}))
        out.append(_span(i, f"chat {b['model']}", a, evs))
    return out


def _openinference_flat(bodies: list[dict]) -> list[dict]:
    """OpenInference without ``input.value``: ``llm.input_messages.<i>.message.*``."""
    out = []
    for i, b in enumerate(bodies):
        a: dict = {"openinference.span.kind": "LLM", "llm.model_name": b["model"],
                   "llm.invocation_parameters": json.dumps({k: v for k, v in b.items() if k != "messages"})}
        for j, m in enumerate(b["messages"]):
            p = f"llm.input_messages.{j}.message"
            a[f"{p}.role"] = m["role"]
            if m.get("content") is not None:
                a[f"{p}.content"] = m["content"]
            if m.get("tool_call_id"):
                a[f"{p}.tool_call_id"] = m["tool_call_id"]
            for k, c in enumerate(m.get("tool_calls") or []):
                a[f"{p}.tool_calls.{k}.tool_call.id"] = c["id"]
                a[f"{p}.tool_calls.{k}.tool_call.function.name"] = c["function"]["name"]
                a[f"{p}.tool_calls.{k}.tool_call.function.arguments"] = c["function"]["arguments"]
        content, _calls = _answer_of(i)
        a["llm.output_messages.0.message.role"] = "assistant"
        if content:
            a["llm.output_messages.0.message.content"] = content
        out.append(_span(i, "ChatCompletion", a))
    return out


def _details_event(bodies: list[dict]) -> list[dict]:
    """The current form, its message attributes on the ``gen_ai.client.inference.operation.details`` event."""
    from auto.interchange.otlp import input_messages

    out = []
    for i, b in enumerate(bodies):
        system, msgs = input_messages(b["messages"])
        content, calls = _answer_of(i)
        parts = [{"type": "text", "content": content}] if content else [{"type": "tool_call", **c} for c in calls]
        a = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": b["model"],
             "gen_ai.request.temperature": b["temperature"]}
        ev = {"gen_ai.system_instructions": system, "gen_ai.input.messages": msgs,
              "gen_ai.output.messages": [{"role": "assistant", "parts": parts}],
              "gen_ai.tool.definitions": [{"type": "function", **t["function"]} for t in b.get("tools") or []]}
        out.append(_span(i, f"chat {b['model']}", a, [("gen_ai.client.inference.operation.details", ev)]))
    return out


@pytest.mark.parametrize("form", [_flattened, _events, _openinference_flat, _details_event])
def test_previous_forms_with_tool_calls_give_the_proxy_s_sites(form, tmp_path):
    bodies = _tool_bodies()
    f = tmp_path / "spans.json"
    f.write_text(json.dumps(_doc(form(bodies))))
    batch = load_otlp(f)
    assert len(batch.spans) == len(bodies)
    ref = []
    for b in bodies:
        s = chat_span(b["messages"], "x")
        s["input"] = b
        ref.append(s)
    want = discover(ref)
    got = discover(batch.spans)
    assert set(got.sites) == set(want.sites) and len(want.sites) == 2  # the tool-asking call and the answering call
    assert [got.inputs[i] for i in range(len(bodies))] == [want.inputs[i] for i in range(len(bodies))]
    if form is not _openinference_flat:  # its flattened output names no tool calls: only the text answers
        calls = [s["output"]["tool_calls"] for s in batch.spans[::2]]
        assert all(c and c[0]["function"]["name"] == "lookup" for c in calls)


def test_nothing_importable_is_refused(tmp_path):
    f = tmp_path / "x.json"
    f.write_text(json.dumps(_doc([_span(0, "GET /v1/models", {"http.method": "GET"})])))
    with pytest.raises(InterchangeError, match="nothing to import"):
        load_otlp(f)


# ----------------------------------------------------------------------------- export


def _export_store(tmp_path: Path) -> Path:
    from auto.store import new_span_id, new_trace_id

    bodies = _tool_bodies()[:2]  # the tool-asking call and the answering call of one customer
    spans = []
    for i, b in enumerate(bodies):
        content, calls = _answer_of(i)
        out = {"content": content, "refusal": None, "finish_reason": "tool_calls" if calls else "stop",
               "tool_calls": [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                              for c in calls] if calls else None}
        s = chat_span(b["messages"], out, model=b["model"])
        s["input"] = b
        s["attributes"] = {"gen_ai.system": "openai", "gen_ai.operation.name": "chat", "gen_ai.request.model": b["model"]}
        spans.append(s)
    spans.append({"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": "opaque",
                  "kind": "llm", "task": None, "site": "opaque/GET /v1/models", "started_ns": 5, "ended_ns": 6,
                  "status": "ok", "input": {"method": "GET", "path": "/v1/models"}, "output": None, "error": None,
                  "attributes": {"auto.opaque": True, "gen_ai.operation.name": "chat"}})
    from auto.proxy.recording import tier1_span  # a tier-1 answer as the proxy records it

    t1, t1_trace, complete = tier1_span(bodies[1], "refund: pro plan", "site:" + "ab" * 8, 3, "sha256:" + "cd" * 32, 7)
    complete()
    spans.append(t1)
    path = tmp_path / "src.db"
    with Store(path) as st:
        st.ingest(spans)
    return path


def _deprecated_attribute_names() -> set[str]:
    """The attribute names the ``opentelemetry-semantic-conventions`` package documents as
    replaced by another (a constant whose docstring begins ``Deprecated: Replaced by``; names
    only moved to the GenAI conventions' own repository are current there)."""
    import re

    import opentelemetry.semconv._incubating.attributes as inc

    names = set()
    for f in Path(list(inc.__path__)[0]).glob("*_attributes.py"):
        names |= set(re.findall(r'^\w+: Final = "([^"]+)"\n"""\s*Deprecated: Replaced by', f.read_text(), flags=re.M))
    return names


def test_export_uses_current_conventions_and_validates_against_opentelemetry_proto(tmp_path):
    import base64

    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from auto.interchange.otlp import export_otlp

    src = _export_store(tmp_path)
    f = tmp_path / "out.jsonl"
    with Store(src) as st:
        export_otlp(st, f)
    spans = []
    for line in f.read_text().splitlines():
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:  # OTLP/JSON ids are hex; protobuf's JSON mapping wants base64
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    for k in ("traceId", "spanId", "parentSpanId"):
                        if k in sp:
                            sp[k] = base64.b64encode(bytes.fromhex(sp[k])).decode()
        msg = json_format.ParseDict(doc, ExportTraceServiceRequest())  # unknown fields or bad types raise
        for rs in msg.resource_spans:
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    assert len(sp.trace_id) == 16 and len(sp.span_id) == 8
                    spans.append((sp.name, {kv.key: json_format.MessageToDict(kv.value) for kv in sp.attributes}))
    by_name = {}
    for name, attrs in spans:
        by_name.setdefault(name, []).append(attrs)
    assert sorted(by_name) == ["chat gpt-4o-mini", "opaque"]
    tier1 = [a for a in by_name["chat gpt-4o-mini"] if "auto.tier" in a]  # the tier-1 answer: a chat span, marked
    assert len(tier1) == 1 and tier1[0]["auto.tier"] == {"intValue": "1"} and tier1[0]["auto.generation"] == {"intValue": "3"}
    assert tier1[0]["auto.artifact_id"] == {"stringValue": "sha256:" + "cd" * 32}
    assert tier1[0]["gen_ai.usage.output_tokens"] == {"intValue": "0"}
    assert json.loads(tier1[0]["gen_ai.output.messages"]["stringValue"])[0]["parts"][0]["content"] == "refund: pro plan"
    by_name["chat gpt-4o-mini"] = [a for a in by_name["chat gpt-4o-mini"] if "auto.tier" not in a]
    opaque = by_name["opaque"][0]
    assert "gen_ai.operation.name" not in opaque  # GET /v1/models is no chat
    deprecated = _deprecated_attribute_names()
    used = {k for _, attrs in spans for k in attrs}
    assert "gen_ai.system" in deprecated and not used & deprecated, sorted(used & deprecated)
    for attrs in by_name["chat gpt-4o-mini"]:
        assert attrs["gen_ai.provider.name"] == {"stringValue": "openai"} and "gen_ai.system" not in attrs
        assert attrs["gen_ai.operation.name"] == {"stringValue": "chat"}
    ask, answer = sorted(by_name["chat gpt-4o-mini"], key=lambda a: len(a["gen_ai.input.messages"]["stringValue"]))
    out = json.loads(ask["gen_ai.output.messages"]["stringValue"])
    assert out[0]["parts"] == [{"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": {}}]
    msgs = json.loads(answer["gen_ai.input.messages"]["stringValue"])
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[1]["parts"][0]["type"] == "tool_call" and msgs[1]["parts"][0]["arguments"] == {"customer": "refund"}
    assert msgs[2]["parts"][0]["type"] == "tool_call_response" and msgs[2]["parts"][0]["response"] == "refund: pro plan"
    assert json.loads(answer["gen_ai.system_instructions"]["stringValue"])[0]["type"] == "text"
    # and back: exactly the same spans (names included)
    with Store(src) as a, Store(tmp_path / "back.db") as b:
        import_otlp(b, f)
        assert b.digest() == a.digest()
        assert discover(b.spans(kind="llm")).sites.keys() == discover(a.spans(kind="llm")).sites.keys()


def test_what_auto_exports_reads_back_as_the_same_sites_through_the_conventions_alone(tmp_path):
    from auto.interchange.otlp import export_otlp

    src = _export_store(tmp_path)
    f = tmp_path / "out.jsonl"
    with Store(src) as st:
        export_otlp(st, f)
        want = set(discover(st.spans(kind="llm")).sites)
    plain = tmp_path / "plain.jsonl"  # as another tool that drops Auto's own attributes would forward it
    lines = []
    for line in f.read_text().splitlines():
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    sp["attributes"] = [kv for kv in sp["attributes"] if not kv["key"].startswith("auto.")]
        lines.append(json.dumps(doc))
    plain.write_text("\n".join(lines) + "\n")
    batch = load_otlp(plain)
    assert batch.skipped == 1  # the opaque span: no convention names it
    assert set(discover(batch.spans).sites) == want
    # the tier-1 answer is still known as one by its system fingerprint: never a witness
    (t1,) = [s for s in batch.spans if s["name"] == "auto.tier1"]
    assert t1["attributes"]["openai.response.system_fingerprint"] == "auto-gen3"
    assert sum(s["name"] == "chat.completions" for s in batch.spans) == 2


def test_parquet_spans_carry_the_census_site_id(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from auto.interchange.parquet import export_parquet

    with Store(tmp_path / "s.db") as st:
        import_otlp(st, FIXTURES / "otlp-openinference.json")
        export_parquet(st, tmp_path / "pq")
    rows = pq.read_table(tmp_path / "pq" / "spans.parquet").to_pylist()
    assert [r["site_id"] for r in rows] == [_proxy_site()] * 10
    # a tier-1 answer the proxy recorded carries the site it answered
    from auto.proxy.recording import tier1_span

    body = _tool_bodies()[0]
    t1, tr, complete = tier1_span(body, "bug", _proxy_site(), 2, "sha256:" + "ef" * 32, 9)
    complete()
    with Store(tmp_path / "s.db") as st:
        st.ingest([t1], [tr])
        export_parquet(st, tmp_path / "pq2")
    rows = pq.read_table(tmp_path / "pq2" / "spans.parquet").to_pylist()
    assert [r["site_id"] for r in rows if r["name"] == "auto.tier1"] == [_proxy_site()]


def test_spans_without_message_content_say_what_to_set(tmp_path):
    """``opentelemetry-instrumentation-openai-v2`` by default records no message content (its
    spans have only the ``gen_ai.request.*`` / usage attributes): no witness can come of them, so
    a file of nothing else imports nothing (exit 1), and the one line says which switch to set.
    Beside spans with content they are counted and left out."""
    doc = json.loads((FIXTURES / "otlp-openai-v2.json").read_text())
    for sp in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        sp["attributes"] = [kv for kv in sp["attributes"] if kv["key"] not in ("gen_ai.input.messages",
                                                                                "gen_ai.output.messages")]
    f = tmp_path / "bare.json"
    f.write_text(json.dumps(doc))
    p = subprocess.run([sys.executable, "-m", "auto.cli", "store", "import", "--store", str(tmp_path / "s.db"),
                        "--otlp", str(f)], capture_output=True, text=True)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "cannot become a witness" in p.stderr
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY" in p.stderr
    full = json.loads((FIXTURES / "otlp-openai-v2.json").read_text())
    doc["resourceSpans"] += full["resourceSpans"]  # beside the same calls with content
    f.write_text(json.dumps(doc))
    p = subprocess.run([sys.executable, "-m", "auto.cli", "store", "import", "--store", str(tmp_path / "s.db"),
                        "--otlp", str(f)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["without_messages"] == 10 and res["spans"] == 10
    assert "cannot become a witness" in p.stderr.splitlines()[-1]
    with Store(tmp_path / "s.db") as st:
        assert st.counts()["spans"] == 10 and _llm_sites(st) == [_proxy_site()]
