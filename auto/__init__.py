"""Auto: a compiler for LLM-agent behavior.

Public API (each name is imported on first use, so ``import auto.canonical`` or the recorder's
bootstrap stays cheap)::

    @auto.task("name")                       # mark a function as a task (the compilation unit)
    @auto.tool("name")                       # mark a tool the agent calls
    with auto.recording("traces.sqlite"):    # record tasks and their model calls into a store
        ...
    auto.Store(path or "postgresql://...")   # the trace store (SQLite file or PostgreSQL)
    auto.census_store(store)                 # the determinism census, in the database -> Census
    auto.census(store.spans())               # the same over span records in memory
    auto.Contract(task=..., ...)             # what the gate checks
    auto.compile_task(store, task, contract=None, ...) -> CompileOutcome   # one generation
    served = auto.ratchet(triage, store="traces.sqlite")   # serve + learn from every deopt

Errors are one tree rooted at :class:`auto.errors.AutoError`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

__all__ = ["CompileOutcome", "Contract", "Ratchet", "Store", "census", "census_store", "compile_task", "ratchet", "recording",
           "start_recording", "stop_recording", "task", "tool"]

if TYPE_CHECKING:  # pragma: no cover
    from auto.census import census, census_store
    from auto.compile import CompileOutcome, compile_task
    from auto.ratchet import Ratchet, ratchet
    from auto.record import recording, start_recording, stop_recording, tool
    from auto.tasks import task
    from auto.store import Store
    from auto.gate import Contract


def __getattr__(name: str) -> Any:
    if name in ("recording", "start_recording", "stop_recording", "tool"):
        from auto import record as module
    elif name == "task":
        from auto import tasks as module
    elif name in ("compile_task", "CompileOutcome"):
        from auto import compile as module
    elif name in ("ratchet", "Ratchet"):
        # the package is callable, so auto.ratchet(fn, store=...) works whether this attribute
        # is the package (set by importing it) or looked up here
        import auto.ratchet.core  # noqa: F401

        module = sys.modules["auto.ratchet"]
        if name == "ratchet":
            globals()[name] = module
            return module
    elif name in ("census", "census_store"):
        import auto.census  # noqa: F401  (the module is callable: auto.census(spans))

        module = sys.modules["auto.census"]
        if name == "census":
            globals()[name] = module
            return module
    elif name == "Store":
        from auto import store as module
    elif name == "Contract":
        from auto import gate as module
    else:
        raise AttributeError(f"module 'auto' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
