"""Auto: a compiler for LLM-agent behavior.

Public API (each name is imported on first use, so ``import auto.canonical`` or the recorder's
bootstrap stays cheap)::

    @auto.task("name")                       # mark a function as a task (the compilation unit)
    @auto.tool("name")                       # mark a tool the agent calls
    with auto.recording("traces.sqlite"):    # record tasks and their model calls into a store
        ...
    auto.Store(path)                         # the trace store (SQLite)
    auto.census(store.spans())               # the determinism census -> Census
    auto.Contract(task=..., ...)             # what the gate checks
    auto.compile_task(store, task, contract=None, ...) -> CompileOutcome   # one generation

Errors are one tree rooted at :class:`auto.errors.AutoError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["CompileOutcome", "Contract", "Store", "census", "compile_task", "recording", "start_recording",
           "stop_recording", "task", "tool"]

if TYPE_CHECKING:  # pragma: no cover
    from auto.analyze import census
    from auto.compile import CompileOutcome, compile_task
    from auto.record import recording, start_recording, stop_recording, task, tool
    from auto.store import Store
    from auto.verify import Contract


def __getattr__(name: str) -> Any:
    if name in ("recording", "start_recording", "stop_recording", "task", "tool"):
        from auto import record as module
    elif name in ("compile_task", "CompileOutcome"):
        from auto import compile as module
    elif name == "census":
        from auto import analyze as module
    elif name == "Store":
        from auto import store as module
    elif name == "Contract":
        from auto import verify as module
    else:
        raise AttributeError(f"module 'auto' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
