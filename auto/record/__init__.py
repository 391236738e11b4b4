"""Recording: ``@auto.task``, ``auto.recording(store)``, OpenAI instrumentation, ``auto record``.

Public API::

    task(name=None, *, input=None)        decorator (sync/async) and context manager → task span
    tool(name=None, *, input=None)        same, kind "tool"
    recording(store, *, task=None)        context manager: record into a store (path or Store)
    start_recording(store, *, task=None) -> Recorder ;  stop_recording(rec=None)
    active_recorder() -> Recorder | None
    getenv(name, default=None)            os.environ.get that records only a digest of the value
    run_recorded(cmd, store, task=None) -> int    run a child process with recording bootstrapped
    pricing.cost_usd_micros(model, input_tokens, output_tokens, cached_input_tokens=0) -> float | None
    LATENCY_HEADER = "x-auto-latency-ms"  response header of an upstream that reports a call's latency
    REFERENCE_MODEL_HEADER = "x-auto-reference-model"  ("simulated": the answer is not a real model's)

Modules, in the order a recorded call meets them:

* :mod:`auto.record.session` — start/stop recording (activates a recorder, instruments ``openai``);
* :mod:`auto.record.core` — the recorder, task/tool span scopes, ``@auto.task``;
* :mod:`auto.record.openai_hook` — what of the ``openai`` client is patched;
* :mod:`auto.record.model_call` — the logical call and its attempts: what each ``llm`` span holds;
* :mod:`auto.record.redact` (secrets), :mod:`auto.record.template` (sites),
  :mod:`auto.record.body` (content decoding, server-sent events), :mod:`auto.record.tee` (stream
  tees), :mod:`auto.record.completion` (message assembly), :mod:`auto.record.latency` (the
  ``x-auto-latency-ms`` reported-latency protocol), :mod:`auto.record.pricing` (the price table);
* :mod:`auto.record.bootstrap` — ``auto record -- cmd``.
"""

from auto.record import pricing
from auto.record.bootstrap import BOOTSTRAP_DIR, run_recorded
from auto.record.core import (
    CURRENT,
    Recorder,
    SpanScope,
    TaskSpec,
    active_recorder,
    getenv,
    task,
    to_jsonable,
    tool,
)
from auto.record.latency import LATENCY_HEADER, REFERENCE_MODEL_HEADER
from auto.record.session import recording, start_recording, stop_recording

__all__ = [
    "BOOTSTRAP_DIR", "CURRENT", "LATENCY_HEADER", "REFERENCE_MODEL_HEADER", "Recorder", "SpanScope", "TaskSpec", "active_recorder", "getenv",
    "pricing", "recording", "run_recorded", "start_recording", "stop_recording", "task",
    "to_jsonable", "tool",
]
