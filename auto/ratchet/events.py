"""The ratchet's vocabulary: why it compiles (:class:`Trigger`) and what it logs (typed rows).

Every attempt, install, rollback and alarm is one row of the store's ratchet log
(:meth:`auto.store.Store.add_ratchet_event`: ``kind``, ``generation``, ``artifact_id`` and a JSON
``detail``). The ratchet builds each row as one of the dataclasses below and writes
:meth:`LogRow.row`, so the stored format stays ``{"kind", "generation", "artifact_id", "detail"}``
with the detail keys every earlier release wrote (``trigger`` is ``{"kind", "evidence", ...}``,
``at_call`` the calls served before it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar


class Trigger(str, enum.Enum):
    """Why a compile or an install happened (the ``trigger.kind`` of a log row; a ``str`` so it
    serializes as its value). The compile policy's triggers are documented in
    :mod:`auto.ratchet.policy`."""

    FIRST = "first"
    RISK_ALARM = "risk-alarm"
    SHIFT_ALARM = "shift-alarm"
    NEW_LABEL = "new-label"
    HEADROOM = "headroom"
    GROWTH = "growth"
    MEMO = "memo"
    MANUAL = "manual"
    ADOPTED = "adopted"
    ROLLBACK = "rollback"
    RESTART_FALLBACK = "restart fallback"
    INSTALLED_ELSEWHERE = "installed elsewhere"

    @property
    def is_alarm(self) -> bool:
        """A compile after a monitor's alarm."""
        return self in (Trigger.RISK_ALARM, Trigger.SHIFT_ALARM)


class Lane(str, enum.Enum):
    """Which rungs a compile runs (see :meth:`auto.ratchet.scheduler.Scheduler.lane`)."""

    FULL = "full"
    TABLE = "table"
    TABLE_PREDICTED = "table (slow rungs predicted to refuse)"
    PARTIAL = "partial (a slow rung predicted to refuse is left out)"
    TABLE_AHEAD = "table (ahead of a slow compile)"


@dataclass
class Fired:
    """A trigger with the evidence that fired it (and, once scheduled, its lane and the candidate
    comparison that let it install)."""

    kind: Trigger
    evidence: dict[str, Any] = field(default_factory=dict)
    lane: Lane | None = None
    comparison: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``trigger`` detail of a log row."""
        out: dict[str, Any] = {"kind": self.kind.value, "evidence": self.evidence}
        if self.lane is not None:
            out["lane"] = self.lane.value
        if self.comparison is not None:
            out["comparison"] = self.comparison
        return out

    def __getitem__(self, key: str) -> Any:
        """``fired["kind"]`` etc.: the stored row's view, for callers that read it as a dict."""
        return self.to_dict()[key]


@dataclass
class LogRow:
    """One row of the ratchet log (subclasses name the kind and the detail)."""

    kind: ClassVar[str] = ""
    generation: int | None = None
    artifact_id: str | None = None

    def detail(self) -> dict[str, Any]:
        """The row's ``detail`` (without ``at_call``, which the writer adds)."""
        return {}

    def row(self, at_call: int) -> dict[str, Any]:
        """The stored form: ``{"kind", "generation", "artifact_id", "detail", "calls"}``."""
        return {"kind": self.kind, "generation": self.generation, "artifact_id": self.artifact_id,
                "detail": {**self.detail(), "at_call": at_call}, "calls": at_call}


def _trigger(t: Fired | None) -> dict[str, Any] | None:
    return t.to_dict() if t is not None else None


@dataclass
class CompileRow(LogRow):
    """A compile attempt's outcome (``verdict`` pass / refuse / error / timeout / crashed /
    skipped), its seconds, per-rung seconds, the installed generation's evidence and what the
    table overlay had served (``overlay``: :meth:`auto_runtime.overlay.TableOverlay.service`, the
    repeats answered from witnesses never re-asked; None without an overlay)."""

    kind: ClassVar[str] = "compile"
    verdict: str = ""
    reason: str | None = None
    trigger: Fired | None = None
    seconds: float | None = None
    compiled_as: str | None = None
    eval_run_id: str | None = None
    rungs: list[dict[str, Any]] | None = None
    evidence: dict[str, Any] | None = None
    overlay: dict[str, Any] | None = None

    def detail(self) -> dict[str, Any]:
        d: dict[str, Any] = {"verdict": self.verdict, "reason": self.reason, "trigger": _trigger(self.trigger)}
        if self.verdict not in ("skipped", "error") or self.seconds is not None:
            d.update(seconds=self.seconds, compiled_as=self.compiled_as, eval_run_id=self.eval_run_id,
                     rungs=self.rungs, evidence=self.evidence)
        if self.overlay is not None:
            d["overlay"] = self.overlay
        return d


@dataclass
class InstallRow(LogRow):
    """A generation swapped in (its parent, trigger, what it was compiled as, overlay entries it
    folded)."""

    kind: ClassVar[str] = "install"
    parent: int | None = None
    trigger: Fired | None = None
    compiled_as: str | None = None
    overlay_folded: int | None = None

    def detail(self) -> dict[str, Any]:
        return {"parent": self.parent, "trigger": _trigger(self.trigger), "compiled_as": self.compiled_as,
                "overlay_folded": self.overlay_folded}


@dataclass
class NotInstalledRow(LogRow):
    """A generation that passed its gate but was not installed: ``install-skipped`` (weaker than
    the installed one on recent inputs) or ``install-failed`` (it could not be loaded)."""

    failed: bool = False
    reason: str = ""
    comparison: dict[str, Any] | None = None

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "install-failed" if self.failed else "install-skipped"

    def detail(self) -> dict[str, Any]:
        return {"reason": self.reason} if self.failed else {"reason": self.reason, "comparison": self.comparison}


@dataclass
class RollbackRow(LogRow):
    """A generation rolled back (``to``: the generation restored, None for none)."""

    kind: ClassVar[str] = "rollback"
    reason: str = ""
    to: int | None = None
    evidence: dict[str, Any] | None = None

    def detail(self) -> dict[str, Any]:
        d: dict[str, Any] = {"reason": self.reason, "to": self.to}
        if self.evidence is not None:
            d["evidence"] = self.evidence
        return d


@dataclass
class AlarmRow(LogRow):
    """A monitor's alarm (``shift``: the installed generation is tightened; ``overlay-risk``: the
    table overlay is disabled)."""

    kind: ClassVar[str] = "alarm"
    monitor: str = ""
    reason: str = ""

    def detail(self) -> dict[str, Any]:
        return {"monitor": self.monitor, "reason": self.reason}


__all__ = ["AlarmRow", "CompileRow", "Fired", "InstallRow", "Lane", "LogRow", "NotInstalledRow", "RollbackRow",
           "Trigger"]
