"""The ratchet: serve a task through its latest verified generation and compile the next one from
every deopt, in the background, on evidence.

Public API::

    r = auto.ratchet(triage, store="traces.sqlite")    # callable like triage(ticket=...)
    r(ticket="My invoice is wrong")                    # tier-1, or the reference (a new witness)
    r.status()                                         # generation, counters, evidence
    r.close()

Modules: :mod:`~auto.ratchet.core` (the Ratchet: the request path), :mod:`~auto.ratchet.capture`
(witnesses, redaction, counters), :mod:`~auto.ratchet.scheduler` (compile attempts and lanes),
:mod:`~auto.ratchet.installer` (load, compare, install, rollback, restart),
:mod:`~auto.ratchet.monitor` (the shift monitor's thread), :mod:`~auto.ratchet.events` (triggers
and typed log rows), :mod:`~auto.ratchet.policy` (when to compile), :mod:`~auto.ratchet.worker`
(compiles in a child process), :mod:`~auto.ratchet.evidence` (the online, anytime-valid evidence
about the installed generation).
"""

import sys
import types
from typing import Any

from auto.ratchet.core import DEFAULT_AUDIT_RATE, Ratchet, ratchet
from auto.ratchet.policy import CompilePolicy

__all__ = ["DEFAULT_AUDIT_RATE", "CompilePolicy", "Ratchet", "ratchet"]


class _CallableModule(types.ModuleType):
    """``auto.ratchet`` is both this package and the function: ``auto.ratchet(fn, store=...)``
    calls :func:`auto.ratchet.core.ratchet` (importing the package sets the attribute
    ``auto.ratchet`` to the package, so the package itself must be callable)."""

    def __call__(self, fn: Any, store: Any, task: str | None = None, **options: Any) -> Ratchet:
        return ratchet(fn, store, task, **options)


sys.modules[__name__].__class__ = _CallableModule
