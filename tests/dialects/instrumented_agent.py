"""An agent instrumented as its owner would, feeding ``auto receive`` through the standard exporter.

Run in an environment with ``openai``, ``opentelemetry-sdk``, ``opentelemetry-exporter-otlp-proto-
http`` and ``opentelemetry-instrumentation-openai-v2`` (not needed by the tests)::

    auto receive --store rx.sqlite --port 4318 &
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python tests/dialects/instrumented_agent.py
    auto census --store rx.sqlite

It makes the ten ticket calls of ``make_fixtures.py`` twice with the ``openai`` client against a
loopback upstream; the official instrumentation records them (semantic conventions ≥ 1.37, message
content on the spans) and the OTLP/HTTP exporter sends them to ``$OTEL_EXPORTER_OTLP_ENDPOINT``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")


def main() -> None:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import make_fixtures

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    up = make_fixtures.Upstream()
    for _ in range(2):
        make_fixtures.with_openai(up.base_url)
    provider.shutdown()  # flushes the exporter
    print(f"{len(up.bodies)} calls made and exported")


if __name__ == "__main__":
    main()
