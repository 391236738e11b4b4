"""One client's ticket calls against a base URL, optionally instrumented and exported over OTLP/HTTP.

Run in an environment with the client packages (``tests/test_dialects_live.py`` runs it with the
interpreter named by ``AUTO_DIALECT_PYTHON``; nothing here is a dependency of Auto, and Auto need
not be installed there)::

    python3.11 -m venv V && V/bin/pip install opentelemetry-instrumentation-openai-v2 httpx \
        'opentelemetry-util-genai==1.1b0' opentelemetry-sdk opentelemetry-exporter-otlp-proto-http openai litellm

    python tests/dialects/live_agent.py --client openai --base-url http://127.0.0.1:8788/v1 \
        --otlp http://127.0.0.1:4318 --capture DIR [--no-content] [--rounds 2]

``--client openai`` makes ``make_fixtures.py``'s ten ticket calls with the ``openai`` client;
``--client litellm`` the same calls with LiteLLM's ``completion`` (``openai/`` provider, its
``api_base``). With ``--otlp`` the ``openai`` client is instrumented by
``opentelemetry-instrumentation-openai-v2`` and its spans go through the SDK's
``BatchSpanProcessor`` and ``OTLPSpanExporter`` (OTLP/HTTP, protobuf) to ``ENDPOINT/v1/traces``,
with message content unless ``--no-content`` (``OTEL_SEMCONV_STABILITY_OPT_IN=
gen_ai_latest_experimental``, ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``:
the instrumentation's documented switches). ``--capture DIR`` keeps each export request as the
exporter sent it: ``DIR/NNN.pb`` (the body) and ``DIR/NNN.json`` (``{"content_type", "status"}``),
through a ``requests.Session`` handed to the exporter (its documented ``session`` argument).

Prints one JSON line: ``{"answers": [text…], "tiers": [x-auto-tier header or null…], "versions":
{package: version}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures  # noqa: E402

PACKAGES = ("openai", "litellm", "opentelemetry-api", "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http",
            "opentelemetry-instrumentation-openai-v2", "opentelemetry-util-genai", "opentelemetry-semantic-conventions")


def versions() -> dict:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def instrument(endpoint: str, capture: Path | None, content: bool):
    """The official instrumentation and the OTLP/HTTP exporter; returns the tracer provider."""
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    if content:
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    else:
        os.environ.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
    import requests
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    class Keeping(requests.Session):
        n = 0

        def request(self, method, url, *args, **kwargs):  # type: ignore[override]
            resp = super().request(method, url, *args, **kwargs)
            if capture is not None:
                Keeping.n += 1
                capture.mkdir(parents=True, exist_ok=True)
                (capture / f"{Keeping.n:03d}.pb").write_bytes(kwargs.get("data") or b"")
                (capture / f"{Keeping.n:03d}.json").write_text(json.dumps({
                    "content_type": resp.request.headers.get("Content-Type"),
                    "content_encoding": resp.request.headers.get("Content-Encoding"), "status": resp.status_code}))
            return resp

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces",
                                                                    session=Keeping())))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    return provider


def with_openai(base_url: str) -> tuple[list, list]:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-fixture-not-a-key", max_retries=0)
    answers, tiers = [], []
    for w in make_fixtures.WORDS:
        raw = client.chat.completions.with_raw_response.create(
            model=make_fixtures.MODEL, temperature=0,
            messages=[{"role": "system", "content": make_fixtures.SYSTEM},
                      {"role": "user", "content": make_fixtures.ticket(w)}])
        tiers.append(raw.headers.get("x-auto-tier"))
        answers.append(raw.parse().choices[0].message.content)
    return answers, tiers


def with_litellm(base_url: str) -> tuple[list, list]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price list
    import litellm

    answers, tiers = [], []
    for w in make_fixtures.WORDS:
        r = litellm.completion(model=f"openai/{make_fixtures.MODEL}", api_base=base_url, api_key="sk-fixture-not-a-key",
                               temperature=0, num_retries=0,
                               messages=[{"role": "system", "content": make_fixtures.SYSTEM},
                                         {"role": "user", "content": make_fixtures.ticket(w)}])
        headers = (getattr(r, "_hidden_params", None) or {}).get("additional_headers") or {}
        tiers.append(headers.get("llm_provider-x-auto-tier", headers.get("x-auto-tier")))
        answers.append(r.choices[0].message.content)
    return answers, tiers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", choices=("openai", "litellm"), default="openai")
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--otlp", help="OTLP/HTTP endpoint (the exporter posts to ENDPOINT/v1/traces)")
    ap.add_argument("--capture", type=Path)
    ap.add_argument("--no-content", action="store_true")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    provider = instrument(a.otlp, a.capture, not a.no_content) if a.otlp else None
    answers: list = []
    tiers: list = []
    for _ in range(a.rounds):
        got = (with_openai if a.client == "openai" else with_litellm)(a.base_url)
        answers += got[0]
        tiers += got[1]
    if provider is not None:
        provider.shutdown()  # flushes the exporter
    print(json.dumps({"answers": answers, "tiers": tiers, "versions": versions()}))


if __name__ == "__main__":
    main()
