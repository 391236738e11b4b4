"""Make the dialect fixtures: what real clients and real OpenTelemetry instrumentations write.

Run in an environment with the client packages (not needed by the tests, which read the files)::

    pip install openai langchain-openai opentelemetry-sdk opentelemetry-exporter-otlp-proto-common \
        opentelemetry-instrumentation-openai opentelemetry-instrumentation-openai-v2 \
        openinference-instrumentation-openai 'opentelemetry-util-genai==1.1b0'
    python tests/dialects/make_fixtures.py            # writes tests/dialects/*.json

(``opentelemetry-instrumentation-openai-v2`` 2.4b0 imports ``opentelemetry.util.genai.instruments``,
which ``opentelemetry-util-genai`` 1.3b0 no longer has: 1.1b0 does; and it imports ``httpx``, which
it does not declare and ``openai`` 3.x no longer installs: ``pip install httpx``.) The same calls
exported live over OTLP/HTTP: ``live_agent.py``. The fixtures were made with
openai 3.57.0, langchain-openai 1.7.4, opentelemetry-instrumentation-openai 0.62.4 (OpenLLMetry),
opentelemetry-instrumentation-openai-v2 2.4b0 and openinference-instrumentation-openai 0.1.66;
the LiteLLM bodies with litellm 1.110.2 (``pip install litellm``).

A stdlib HTTP server on loopback plays the OpenAI API (it labels tickets: ``billing`` or ``bug``;
with tools and no tool result yet it asks for the ``lookup`` tool). The same requests are made:

* ``requests.json`` — the request bodies as the ``openai`` client, LangChain's ``ChatOpenAI`` and
  LiteLLM's ``completion`` sent them (``{"openai": {...}, "langchain": {...}, "litellm": {...}}``,
  each ``{"tickets": [body…], "tools": [body…]}``; ``python tests/dialects/make_fixtures.py
  --clients litellm`` records only the named clients' bodies into it);
* ``otlp-openllmetry.json``, ``otlp-openai-v2.json``, ``otlp-openinference.json`` — the spans of
  the ``openai`` client's ticket calls (and ``otlp-<name>-tools.json``: its tool-calling rounds) under ``opentelemetry-instrumentation-openai``
  (OpenLLMetry), ``opentelemetry-instrumentation-openai-v2`` (the official one) and
  ``openinference-instrumentation-openai``, as OTLP/JSON ``ExportTraceServiceRequest``
  documents: OpenLLMetry's as protobuf ``json_format`` writes it (base64 ids, one object), the
  others with hex ids (as the OpenTelemetry Collector's file exporter writes them) one per line.

Each instrumentation runs in its own process (they patch the client globally).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = "gpt-4o-mini"
SYSTEM = "You sort support tickets. Answer with one label: billing or bug."
WORDS = ["refund", "crash", "login", "invoice", "password", "export", "dark mode", "coupon", "upload", "shipping"]
BILLING = ("refund", "invoice", "coupon")
TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look up a customer's plan.",
    "parameters": {"type": "object", "properties": {"customer": {"type": "string"}}, "required": ["customer"]}}}]


class Upstream:
    """The loopback OpenAI API; keeps every request body."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                outer.bodies.append(body)
                msgs = body.get("messages") or []
                last = msgs[-1].get("content") if msgs else ""
                text = last if isinstance(last, str) else json.dumps(last)
                message: dict = {"role": "assistant", "content": None}
                finish = "stop"
                if body.get("tools") and not any(m.get("role") == "tool" for m in msgs):
                    customer = text.split()[-1]
                    message["tool_calls"] = [{"id": f"call_{len(outer.bodies)}", "type": "function", "function": {
                        "name": "lookup", "arguments": json.dumps({"customer": customer})}}]
                    finish = "tool_calls"
                else:
                    message["content"] = "billing" if any(w in text for w in BILLING) else "bug"
                out = json.dumps({"id": f"chatcmpl-{len(outer.bodies)}", "object": "chat.completion", "created": 0,
                                  "model": MODEL, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                  "usage": {"prompt_tokens": 20, "completion_tokens": 1, "total_tokens": 21}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def ticket(word: str) -> str:
    return f"Ticket: my {word} is broken"


def with_openai(base_url: str) -> None:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-fixture-not-a-key", max_retries=0)
    for w in WORDS:
        client.chat.completions.create(model=MODEL, temperature=0, messages=[
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": ticket(w)}])


def with_openai_tools(base_url: str) -> None:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-fixture-not-a-key", max_retries=0)
    for w in WORDS:
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Which plan has customer {w}"}]
        r = client.chat.completions.create(model=MODEL, temperature=0, messages=msgs, tools=TOOLS)
        call = r.choices[0].message.tool_calls[0]
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.function.name,
                                                              "arguments": call.function.arguments}}]})
        msgs.append({"role": "tool", "tool_call_id": call.id, "content": f"{w}: pro plan"})
        client.chat.completions.create(model=MODEL, temperature=0, messages=msgs, tools=TOOLS)


def with_langchain(base_url: str) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=MODEL, temperature=0.0, base_url=base_url, api_key="sk-fixture-not-a-key", max_retries=0)
    for w in WORDS:
        llm.invoke([SystemMessage(SYSTEM), HumanMessage(ticket(w))])


def with_langchain_tools(base_url: str) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=MODEL, temperature=0.0, base_url=base_url, api_key="sk-fixture-not-a-key",
                     max_retries=0).bind_tools(TOOLS)
    for w in WORDS:
        msgs = [SystemMessage(SYSTEM), HumanMessage(f"Which plan has customer {w}")]
        ai = llm.invoke(msgs)
        msgs += [ai, ToolMessage(f"{w}: pro plan", tool_call_id=ai.tool_calls[0]["id"])]
        llm.invoke(msgs)


def with_litellm(base_url: str) -> None:
    import litellm

    for w in WORDS:
        litellm.completion(model=f"openai/{MODEL}", api_base=base_url, api_key="sk-fixture-not-a-key", temperature=0,
                           num_retries=0, messages=[{"role": "system", "content": SYSTEM},
                                                    {"role": "user", "content": ticket(w)}])


def with_litellm_tools(base_url: str) -> None:
    import litellm

    for w in WORDS:
        msgs: list = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Which plan has customer {w}"}]
        r = litellm.completion(model=f"openai/{MODEL}", api_base=base_url, api_key="sk-fixture-not-a-key",
                               temperature=0, num_retries=0, messages=msgs, tools=TOOLS)
        msg = r.choices[0].message  # passed back as LiteLLM returns it (its own Message object)
        msgs += [msg, {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": f"{w}: pro plan"}]
        litellm.completion(model=f"openai/{MODEL}", api_base=base_url, api_key="sk-fixture-not-a-key", temperature=0,
                           num_retries=0, messages=msgs, tools=TOOLS)


CLIENTS = {"openai": (with_openai, with_openai_tools), "langchain": (with_langchain, with_langchain_tools),
           "litellm": (with_litellm, with_litellm_tools)}
"""The clients whose request bodies ``requests.json`` keeps."""


def record_clients(names: list[str] | None = None) -> dict:
    out = {}
    for name, (plain, tools) in CLIENTS.items():
        if names is not None and name not in names:
            continue
        up = Upstream()
        plain(up.base_url)
        n = len(up.bodies)
        tools(up.base_url)
        out[name] = {"tickets": up.bodies[:n], "tools": up.bodies[n:]}
        up.server.shutdown()
    return out


def hex_ids(obj: object) -> object:
    """protobuf ``json_format`` output with its base64 ids turned into hex (the Collector's form)."""
    if isinstance(obj, list):
        return [hex_ids(v) for v in obj]
    if isinstance(obj, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                    else hex_ids(v)) for k, v in obj.items()}
    return obj


def instrumented(which: str, scenario: str = "tickets") -> None:
    """Child process: run the ticket calls under one instrumentation, print the OTLP/JSON."""
    from google.protobuf import json_format
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    mem = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(mem))
    trace.set_tracer_provider(provider)
    if which == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    elif which == "openai-v2":
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    up = Upstream()
    (with_openai if scenario == "tickets" else with_openai_tools)(up.base_url)
    provider.force_flush()
    print(json_format.MessageToJson(encode_spans(mem.get_finished_spans())))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        instrumented(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) >= 3 and sys.argv[1] == "--clients":  # only these clients' bodies, into requests.json
        path = HERE / "requests.json"
        kept = json.loads(path.read_text()) if path.exists() else {}
        kept.update(record_clients(sys.argv[2:]))
        path.write_text(json.dumps(kept, indent=1, sort_keys=False) + "\n")
        return
    (HERE / "requests.json").write_text(json.dumps(record_clients(), indent=1, sort_keys=False) + "\n")
    for which in ("openllmetry", "openai-v2", "openinference"):
        for scenario in ("tickets", "tools"):
            text = subprocess.run([sys.executable, __file__, "--child", which, scenario], check=True,
                                  capture_output=True, text=True, env={**os.environ, "OTEL_SDK_DISABLED": "false"}).stdout
            doc = json.loads(text)
            path = HERE / (f"otlp-{which}.json" if scenario == "tickets" else f"otlp-{which}-tools.json")
            if which == "openllmetry":
                path.write_text(json.dumps(doc, indent=1) + "\n")
            else:
                path.write_text(json.dumps(hex_ids(doc), separators=(",", ":")) + "\n")
            n = sum(len(ss.get("spans", [])) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"])
            print(f"{path.name}: {n} spans")


if __name__ == "__main__":
    main()
