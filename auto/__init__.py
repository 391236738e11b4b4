"""Auto: a compiler for LLM-agent behavior.

``auto.task`` marks a function as a task (recorded as a unit, compiled as a unit);
``auto.recording(store)`` records tasks and their model calls into a trace store. Both come
from :mod:`auto.record`, imported lazily so ``import auto.canonical`` stays cheap.
"""

from typing import Any

__all__ = ["recording", "start_recording", "stop_recording", "task", "tool"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from auto import record

        return getattr(record, name)
    raise AttributeError(f"module 'auto' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
