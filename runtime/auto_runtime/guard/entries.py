"""The manifest's ``guard`` entry as typed values: one registered type per guard method.

The evaluators (:mod:`auto_runtime.guard.registry`) turn an entry into a :class:`Guard` that
decides calls; the types here answer what the tools around an artifact ask of the entry without
reading its keys: whether it can let through an input no witness had
(:attr:`GuardEntry.certifies_unwitnessed`), its conformal calibration scores
(:attr:`GuardEntry.calibration_scores`), and its lines for ``auto inspect``
(:meth:`GuardEntry.lines`)::

    entry = guard_entry(manifest["guard"])      # a StackEntry, ProgramEvidenceEntry, ...
    entry.method, entry.calibration_scores, entry.lines()
    entry.to_dict() == manifest["guard"]         # the entry as it was read, key for key

An entry of a method no type is registered for (or one whose fields are unusable) is read as a
:class:`GuardEntry` that certifies nothing; reading never raises, as the loader turns such an entry
into an always-deopt guard rather than refusing the artifact. New methods register a type with
:func:`register_entry`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from auto_runtime.guard.program import ProgramEvidence

GUARD_ENTRIES: dict[str, type["GuardEntry"]] = {}
"""Registry: ``guard.method`` -> the entry type that reads it."""

PROGRAM_EVIDENCE_KINDS = ProgramEvidence._KINDS
"""The evidence kind names, by kind number, when a ``program-evidence`` entry carries none."""


def register_entry(method: str) -> Callable[[type["GuardEntry"]], type["GuardEntry"]]:
    """Class decorator registering an entry type for ``method``."""

    def deco(cls: type[GuardEntry]) -> type[GuardEntry]:
        GUARD_ENTRIES[method] = cls
        return cls
    return deco


def r3(x: Any) -> Any:
    """A float rounded to 3 digits for display; anything else as it is."""
    return round(x, 3) if isinstance(x, float) else x


def _finite_list(v: Any) -> tuple[float, ...] | None:
    if not isinstance(v, list) or not all(isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c)
                                          for c in v):
        return None
    return tuple(float(c) for c in v)


@dataclass(frozen=True)
class GuardEntry:
    """A guard entry of a method without a registered type (``none``, ``program``, ...).

    Attributes:
        method: the entry's ``method`` (None when it has none).
        statement: what the guard guarantees, in words (``""`` when the entry says nothing).
        fields: the entry as read (a copy; the typed attributes are views of it).
    """

    method: str | None
    statement: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def read(cls, entry: Mapping[str, Any]) -> "GuardEntry":
        """The typed entry of ``entry`` (this base type: only the method and statement)."""
        return cls(method=_str(entry.get("method")), statement=str(entry.get("statement") or ""), fields=dict(entry))

    @property
    def certifies_unwitnessed(self) -> bool:
        """Whether the guard certifies answers on inputs no witness had (a selective-risk
        threshold). False unless a type says otherwise."""
        return False

    @property
    def calibration_scores(self) -> tuple[float, ...] | None:
        """The conformal novelty calibration scores (ascending as stored), or None."""
        return None

    def lines(self) -> list[str]:
        """The ``auto inspect`` lines of this entry."""
        return [f"guard      {self.method}: {self.statement}"]

    def to_dict(self) -> dict[str, Any]:
        """The entry as it was read."""
        return dict(self.fields)


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


@register_entry("conformal-novelty")
@dataclass(frozen=True)
class ConformalNoveltyEntry(GuardEntry):
    """``conformal-novelty``: deopt iff the conformal p-value ``(1 + #{c >= s}) / (n + 1)`` of the
    input's nonconformity ``s`` is at most ``alpha`` (Vovk, Gammerman, Shafer, *Algorithmic
    Learning in a Random World*, 2005).

    Attributes:
        alpha: the novelty level; n: the calibration size; scores: the calibration scores.
        threshold: the largest passing score; heldout_coverage: the held-out share passed (either
            spelling the compiler writes: ``coverage_heldout`` alone, ``heldout_coverage`` in a stack).
        never_deopts: n is too small for alpha, so no input can be deopted.
    """

    alpha: float | None = None
    n: int | None = None
    scores: tuple[float, ...] | None = None
    threshold: float | None = None
    heldout_coverage: float | None = None
    never_deopts: bool = False

    @classmethod
    def read(cls, entry: Mapping[str, Any]) -> "ConformalNoveltyEntry":
        cov = entry.get("coverage_heldout", entry.get("heldout_coverage"))
        return cls(method="conformal-novelty", statement=str(entry.get("statement") or ""), fields=dict(entry),
                   alpha=entry.get("alpha"), n=entry.get("n"), scores=_finite_list(entry.get("calibration_scores")),
                   threshold=entry.get("threshold"), heldout_coverage=cov, never_deopts=bool(entry.get("never_deopts")))

    @property
    def calibration_scores(self) -> tuple[float, ...] | None:
        return self.scores

    def lines(self) -> list[str]:
        return [f"guard      conformal-novelty  alpha {self.alpha}  calibration n {self.n}  threshold {r3(self.threshold)}"
                f"  held-out coverage {r3(self.fields.get('coverage_heldout'))}"]

    def component_lines(self) -> list[str]:
        """The lines of this entry as a component of a stack."""
        return [f"  novelty  alpha {self.alpha}  n {self.n}  threshold (max passing score) {r3(self.threshold)}"
                f"  held-out coverage {r3(self.fields.get('heldout_coverage'))}"
                + ("  (never deopts: n too small for alpha)" if self.never_deopts else "")]


@register_entry("selective-risk")
@dataclass(frozen=True)
class SelectiveRiskEntry(GuardEntry):
    """``selective-risk``: pass iff the artifact's confidence field is at least ``threshold``, chosen
    by Learn-then-Test so that P(tier-1 answer != reference | tier-1) <= epsilon with probability
    >= 1 - delta on inputs exchangeable with the calibration inputs (Angelopoulos et al., 2021).
    ``threshold`` None: no threshold could be certified (``reason`` says why); always deopts.
    ``risk_level``: the level the test ran at (``epsilon``, or ``epsilon + rho_low`` for a
    certificate on the excess over the reference's self-disagreement), None in older manifests."""

    threshold: float | None = None
    epsilon: float | None = None
    risk_level: float | None = None
    delta: float | None = None
    n: int | None = None
    confidence_field: str | None = None
    reason: str | None = None

    @classmethod
    def read(cls, entry: Mapping[str, Any]) -> "SelectiveRiskEntry":
        return cls(method="selective-risk", statement=str(entry.get("statement") or ""), fields=dict(entry),
                   threshold=entry.get("threshold"), epsilon=entry.get("epsilon"), delta=entry.get("delta"),
                   risk_level=entry.get("risk_level"),
                   n=entry.get("n"), confidence_field=_str(entry.get("confidence_field")), reason=_str(entry.get("reason")))

    @property
    def certifies_unwitnessed(self) -> bool:
        return self.threshold is not None

    def component_lines(self) -> list[str]:
        """The lines of this entry as a component of a stack."""
        f = self.fields
        lines = [f"  risk     {f.get('procedure')}  epsilon {self.epsilon}  delta {self.delta}  n {self.n}  "
                 f"threshold {self.confidence_field} >= {self.threshold}  smallest certifiable epsilon "
                 f"{f.get('smallest_certifiable_epsilon')}",
                 f"           calibration: coverage {r3(f.get('calibration_coverage'))}  selective risk "
                 f"{r3(f.get('calibration_selective_risk'))}"]
        if f.get("heldout_n"):
            lines.append(f"           held-out ({f.get('heldout_n')} inputs, whole stack): coverage {r3(f.get('heldout_coverage'))}  "
                         f"selective risk {r3(f.get('heldout_selective_risk'))} (95% CP high "
                         f"{r3(f.get('heldout_selective_risk_ci95_high'))})")
        if self.reason:
            lines.append(f"           no threshold: {self.reason}")
        for note in f.get("notes") or []:
            lines.append(f"           note: {note}")
        return lines

    def lines(self) -> list[str]:
        return [f"guard      {self.method}: {self.statement}"]


@register_entry("stack")
@dataclass(frozen=True)
class StackEntry(GuardEntry):
    """``stack``: tier-1 iff every component passes; with ``fallback_reason`` it always deopts.

    Attributes:
        components: the typed components, in order.
        fallback_reason: why the stack always deopts, or None.
        epsilon_refers_to: what the risk component's epsilon bounds, in words, or None.
    """

    components: tuple[GuardEntry, ...] = ()
    fallback_reason: str | None = None
    epsilon_refers_to: str | None = None

    @classmethod
    def read(cls, entry: Mapping[str, Any]) -> "StackEntry":
        comps = entry.get("components")
        return cls(method="stack", statement=str(entry.get("statement") or ""), fields=dict(entry),
                   components=tuple(guard_entry(c) for c in comps if isinstance(c, Mapping)) if isinstance(comps, list) else (),
                   fallback_reason=_str(entry.get("fallback_reason")) or None,
                   epsilon_refers_to=_str(entry.get("epsilon_refers_to")) or None)

    @property
    def certifies_unwitnessed(self) -> bool:
        """No fallback, and the last selective-risk component has a threshold."""
        risk = [c for c in self.components if isinstance(c, SelectiveRiskEntry)]
        return self.fallback_reason is None and bool(risk) and risk[-1].certifies_unwitnessed

    @property
    def calibration_scores(self) -> tuple[float, ...] | None:
        """The scores of the first novelty component that has them."""
        return next((c.calibration_scores for c in self.components if c.calibration_scores is not None), None)

    def lines(self) -> list[str]:
        n = len(self.fields.get("components") or []) if isinstance(self.fields.get("components"), list) else 0
        lines = [f"guard      stack of {n} components; "
                 + (f"ALWAYS DEOPTS: {self.fallback_reason}" if self.fallback_reason else "tier-1 iff every component passes")]
        for c in self.components:
            part = getattr(c, "component_lines", None)
            lines.extend(part() if part is not None else [f"  {c.method}"])
        if self.epsilon_refers_to:
            lines.append(f"epsilon    {self.epsilon_refers_to}")
        return lines


@register_entry("program-evidence")
@dataclass(frozen=True)
class ProgramEvidenceEntry(GuardEntry):
    """``program-evidence``: the program did not deopt, no part's evidence is of a kind in
    ``deopt_kinds``, every part's event passes its novelty test, and (with a risk threshold) the
    record's confidence is at least the threshold (:mod:`auto_runtime.guard.program`).

    Attributes:
        kinds: the evidence kind names by number; deopt_kinds: the kinds that always deopt.
        parts: the entry's parts as read (name, shape, alpha, n, rules, events, ...).
        risk_threshold: the confidence threshold, or None (no threshold was certifiable).
    """

    kinds: tuple[str, ...] = PROGRAM_EVIDENCE_KINDS
    deopt_kinds: tuple[int, ...] = ()
    parts: tuple[Mapping[str, Any], ...] = ()
    risk_threshold: float | None = None

    @classmethod
    def read(cls, entry: Mapping[str, Any]) -> "ProgramEvidenceEntry":
        risk = entry.get("risk") if isinstance(entry.get("risk"), Mapping) else {}
        parts = entry.get("parts") if isinstance(entry.get("parts"), list) else []
        return cls(method="program-evidence", statement=str(entry.get("statement") or ""), fields=dict(entry),
                   kinds=tuple(entry.get("kinds") or PROGRAM_EVIDENCE_KINDS),
                   deopt_kinds=tuple(k for k in entry.get("deopt_kinds") or [] if isinstance(k, int)),
                   parts=tuple(p for p in parts if isinstance(p, Mapping)), risk_threshold=risk.get("threshold"))

    def lines(self) -> list[str]:
        kinds = list(self.kinds)
        deopt = [kinds[k] for k in self.deopt_kinds if 0 <= k < len(kinds)]
        lines = [f"guard      program-evidence: tier-1 iff the program does not deopt, no part's evidence is unwitnessed "
                 f"({', '.join(deopt)}), and every part's event passes its novelty test"]
        for p in self.parts:
            name = repr(p.get("name")) if p.get("name") else "answer"
            lines.append(f"  part {name} ({p.get('shape')})  alpha {p.get('alpha'):.4g}  calibration n {p.get('n')}  "
                         f"witnesses {p.get('witnesses')}"
                         + (f"  specific forms tested: {', '.join(p.get('specific_levels') or [])}" if p.get("specific_levels") else ""))
            rules = p.get("rules") or []
            by_rule: dict[int, list[str]] = {}
            for e in p.get("events") or []:
                k = e["kind"]
                by_rule.setdefault(e["rule"], []).append(f"{kinds[k] if 0 <= k < len(kinds) else k} {e['support']} "
                                                         f"(precision {e['precision']:.3f})")
            for r, label in enumerate(rules):
                tag = "else" if r == len(rules) - 1 and p.get("shape") == "rules" else f"rule {r}"
                seen = "; ".join(by_rule.get(r, [])) or "never decided a witness"
                lines.append(f"     {tag} -> {label!r}: {seen}")
        risk = self.fields.get("risk") or {}
        if self.risk_threshold is not None:
            lines.append(f"  risk     confidence >= {self.risk_threshold:.6g}  epsilon {risk.get('epsilon')}  delta {risk.get('delta')}  "
                         f"n {risk.get('n')}  smallest certifiable epsilon {risk.get('smallest_certifiable_epsilon')}")
        else:
            lines.append(f"  risk     no threshold: {risk.get('reason')}")
        cal = self.fields.get("calibration") or {}
        lines.append(f"  calibration {cal.get('method')}: {cal.get('n')} witnesses, {cal.get('unwitnessed')} with unwitnessed "
                     f"evidence ({cal.get('unwitnessed_wrong')} of them wrong), {cal.get('novel')} novel "
                     f"({cal.get('novel_wrong')} wrong), tier-1 {cal.get('tier1')} ({cal.get('tier1_wrong')} wrong)")
        lines.append(f"statement  {self.fields.get('statement')}")
        return lines


@register_entry("region-novelty")
@dataclass(frozen=True)
class RegionNoveltyEntry(GuardEntry):
    """``region-novelty``: a region's commit admitted iff the conformal p-value of the input's
    nonconformity against the training inputs of the path it took is above ``alpha``
    (:mod:`auto_runtime.guard.region`). Its calibration scores are of inputs, not of an output's
    ``nonconformity``, so :attr:`calibration_scores` is None (no shift feed reads them).

    Attributes:
        alpha: the novelty level; n: the calibration size; paths: training inputs per path.
        heldout: ``{"n", "deopted", "rate"}``: the held-out inputs the guard deopted at compile time.
    """

    alpha: float | None = None
    n: int | None = None
    paths: tuple[int, ...] = ()
    heldout: Mapping[str, Any] | None = None

    @classmethod
    def read(cls, entry: Mapping[str, Any]) -> "RegionNoveltyEntry":
        paths = entry.get("paths")
        held = entry.get("heldout")
        return cls(method="region-novelty", statement=str(entry.get("statement") or ""), fields=dict(entry),
                   alpha=entry.get("alpha"), n=entry.get("n"),
                   paths=tuple(len(p) if isinstance(p, list) else 0 for p in paths) if isinstance(paths, list) else (),
                   heldout=dict(held) if isinstance(held, Mapping) else None)

    def lines(self) -> list[str]:
        held = self.heldout or {}
        return [f"guard      region-novelty  alpha {self.alpha}  calibration n {self.n}  training inputs per path "
                f"{list(self.paths)}  held-out deopted {held.get('deopted')}/{held.get('n')}"]


def guard_entry(entry: Any) -> GuardEntry:
    """The typed entry of a manifest's ``guard`` object (or of one stack component).

    Never raises: a non-object, a method without a registered type, or fields the type cannot read
    give a plain :class:`GuardEntry` (which certifies nothing and has no calibration scores).
    """
    if not isinstance(entry, Mapping):
        return GuardEntry(method=None, fields={})
    cls = GUARD_ENTRIES.get(entry.get("method"), GuardEntry) if isinstance(entry.get("method"), str) else GuardEntry
    try:
        return cls.read(entry)
    except (TypeError, ValueError, KeyError, AttributeError):
        return GuardEntry.read(entry)


__all__ = ["GUARD_ENTRIES", "ConformalNoveltyEntry", "GuardEntry", "PROGRAM_EVIDENCE_KINDS", "ProgramEvidenceEntry",
           "RegionNoveltyEntry", "SelectiveRiskEntry", "StackEntry", "guard_entry", "r3", "register_entry"]
