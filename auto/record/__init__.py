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

See :mod:`auto.record.core` (spans and scopes), :mod:`auto.record.openai_hook` (what is patched
and what each model-call span holds), :mod:`auto.record.bootstrap` (``auto record -- cmd``).
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
    recording,
    start_recording,
    stop_recording,
    task,
    to_jsonable,
    tool,
)

__all__ = [
    "BOOTSTRAP_DIR", "CURRENT", "Recorder", "SpanScope", "TaskSpec", "active_recorder", "getenv",
    "pricing", "recording", "run_recorded", "start_recording", "stop_recording", "task",
    "to_jsonable", "tool",
]
