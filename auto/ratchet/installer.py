"""The ratchet's installer: load a generation, compare it with the installed one, swap it in, roll
back, restart.

A generation that passed its gate is loaded from the store (its id checked, or the host's
``loader``: e.g. a signature check), given the host's guard when a ``guard_factory`` is set,
compared with the installed generation on the recent live inputs (:meth:`Installer.weaker`),
and swapped into the :class:`auto_runtime.TieredTask` atomically. Installing a generation also
resets the installed generation's evidence and the shift monitor (on the new calibration scores),
adopts the manifest's table-overlay rule and folds the overlay entries its table repeats. A
rollback restores the parent generation (or none); a restart loads what the store's log says is
installed, falling back to the generations installed before it when its artifact cannot be
loaded. Everything that happens is a typed row of the ratchet log (:mod:`auto.ratchet.events`).

What the installer reads of a manifest (which output labels it can give, whether it answers
inputs never witnessed, its calibration scores, its overlay rule) is in :func:`manifest_facts`,
the one place that reads manifest keys.
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from auto_runtime import Artifact, TieredTask
from auto_runtime.manifest import Manifest
from auto_runtime.overlay import overlay_rule
from auto_runtime.tiered import TIER_1

from auto.canonical import canonical_json
from auto.compile.fields import declared_fields
from auto.errors import AutoError
from auto.ratchet.events import Fired, InstallRow, NotInstalledRow, RollbackRow, Trigger
from auto.ratchet.evidence import GenerationEvidence, certified_level
from auto.store.records import EventKind

log = logging.getLogger("auto.ratchet")

POLL_INTERVAL_S = 1.0
"""How often (at most) a ratchet looks in the store for a generation another ratchet installed."""

RECENT_INPUTS = 256
"""Recent call inputs kept (references, not copies) to compare a candidate with the installed
generation before a swap."""

SHARE_TOLERANCE = 0.02
"""A candidate answering at most this much less of the recent inputs than the installed
generation still replaces it (fresher witnesses, a newer table)."""

MIN_KNOWN = 10
"""Witnessed recent inputs a candidate must answer before its disagreement with them is judged."""

FOLD_CHECK = 4096
"""At most this many overlay entries are run through a newly installed table to mark the ones it
repeats as folded (off the request path)."""


@dataclass(frozen=True)
class ManifestFacts:
    """What the ratchet needs to know of a generation's manifest.

    Attributes:
        compiled_as: ``program``, ``region``, ``specialist``, ``memo-first`` or ``memo``.
        labels: the canonical JSON of every output it can give (empty: not an enumerated output).
        answers_new_inputs: it may answer inputs never witnessed (a program or a region, or a
            specialist whose guard certified a threshold, not a fallback that always deopts).
        calibration_scores: its novelty guard's calibration scores (the shift monitor's
            reference), or None.
        overlay_min_lead: the table overlay's admission rule it states, or None.
        fields: per categorical field of a record-valued generation, the canonical JSON of its
            declared values (:func:`auto.compile.fields.declared_fields`; empty otherwise).
        near_duplicate: a near-duplicate table (:mod:`auto.compile.rungs.neardup`): it answers
            new inputs only through witnessed neighbourhoods, so the table lane rebuilds it.
        risk_level: the level its specialist's certificate was tested at (None: no certified
            selective-risk component; :func:`auto.ratchet.evidence.certified_level`).
    """

    compiled_as: str | None
    labels: frozenset[str]
    answers_new_inputs: bool
    calibration_scores: list[float] | None
    overlay_min_lead: int | None
    fields: dict[str, set[str]]
    near_duplicate: bool = False
    risk_level: float | None = None


def manifest_facts(manifest: dict[str, Any]) -> ManifestFacts:
    """The :class:`ManifestFacts` of a manifest, read through the runtime's typed view
    (:class:`auto_runtime.manifest.Manifest`; the overlay's rule through
    :func:`auto_runtime.overlay.overlay_rule`)."""
    m = Manifest.of(manifest)
    return ManifestFacts(m.compiled_as, frozenset(canonical_json(a) for a in m.labels), m.answers_new_inputs,
                         m.calibration_scores, overlay_rule(manifest), declared_fields(m.interface.output),
                         m.near_duplicate is not None, certified_level(m.guard))


_DEOPT = object()


def tier1_answers(wasm: bytes, artifact_id: str, inputs: list[Any], guard_factory: Any, store: Any) -> list[Any]:
    """Per input, the canonical JSON of a (fresh instance of the) artifact's tier-1 answer, or
    ``_DEOPT`` where it would deopt."""
    art = Artifact.load(wasm, expected_id=artifact_id)
    if guard_factory is not None:
        art.guard = guard_factory(art, store)
    tt = TieredTask(art, reference=None)
    prime = getattr(art.guard, "prime", None)
    out: list[Any] = []
    for x in inputs:
        if prime is not None:
            prime(x)
        try:
            r = tt(x)
            out.append(canonical_json(r.answer) if r.tier == TIER_1 else _DEOPT)
        except (AutoError, TypeError, ValueError):
            out.append(_DEOPT)
    return out


def _disagreement(answers: list[Any], known: list[str | None]) -> tuple[int, int]:
    """``(disagreements, n)`` of the tier-1 answers with the known (witnessed) answers."""
    pairs = [(a, k) for a, k in zip(answers, known) if a is not _DEOPT and k is not None]
    return sum(1 for a, k in pairs if a != k), len(pairs)


class Installer:
    """Loads, compares, installs and rolls back the host ratchet's generations.

    Args:
        host: the :class:`~auto.ratchet.core.Ratchet` (its store, task, contract, state and lock,
            tiered task, overlay, shift feed, log writer).
        guard_factory: see :class:`~auto.ratchet.core.Ratchet`.
        loader: ``(wasm, artifact_id) -> Artifact``.
    """

    def __init__(self, host: Any, guard_factory: Callable[[Artifact, Any], Any] | None,
                 loader: Callable[[bytes, str], Artifact] | None) -> None:
        self.host = host
        self.guard_factory = guard_factory
        self.loader = loader or (lambda wasm, aid: Artifact.load(wasm, expected_id=aid))
        self.installed_id: str | None = None
        self.facts: ManifestFacts | None = None
        self.prime: Callable[[Any], Any] | None = None
        self.parent: dict[int, int | None] = {}
        self.recent: collections.deque[Any] = collections.deque(maxlen=RECENT_INPUTS)
        self._last_poll = 0.0

    @property
    def answers_new_inputs(self) -> bool:
        """Whether the installed generation may answer inputs never witnessed."""
        f = self.facts
        return f is not None and f.answers_new_inputs

    @property
    def table_lane_rebuilds(self) -> bool:
        """Whether a table-lane compile can rebuild what is installed: nothing, a table, or a
        near-duplicate table (the lane's neardup rung rebuilds it)."""
        f = self.facts
        return f is None or not f.answers_new_inputs or f.near_duplicate

    # ------------------------------------------------------------------ after a compile

    def consider(self, generation: int, artifact_id: str, trigger: Fired) -> None:
        """A generation that passed its gate: install it unless it is weaker than the installed
        one on the recent inputs (logged ``install-skipped``) or cannot be loaded (logged
        ``install-failed``)."""
        h = self.host
        weaker, comparison = self.weaker(artifact_id)
        if weaker is not None:
            h.log(NotInstalledRow(generation, artifact_id, reason=weaker, comparison=comparison))
            h.say(f"  generation {generation} not installed: {weaker}")
            return
        trigger.comparison = comparison
        try:
            self.install(artifact_id, generation, parent=h.state.installed, trigger=trigger)
        except AutoError as e:
            h.log(NotInstalledRow(generation, artifact_id, failed=True, reason=f"{type(e).__name__}: {e}"))
            h.say(f"  generation {generation} could not be installed: {e}")

    def weaker(self, candidate_id: str) -> tuple[str | None, dict[str, Any] | None]:
        """Why the candidate would answer less, or worse, than the installed generation (or
        None), and the comparison's figures.

        Both are run on the same recent live inputs (the last :data:`RECENT_INPUTS` calls, tier-1
        ones included), off the request path, with their own guards:

        - **less**: the candidate would answer at tier-1 on fewer of them than the installed
          generation, by more than :data:`SHARE_TOLERANCE`;
        - **worse**: on the recent inputs that were witnessed (the reference's answer is known),
          the candidate's tier-1 answers disagree with the witnessed answers more often than
          the contract's epsilon and than the installed generation's by more than
          :data:`SHARE_TOLERANCE` (e.g. a program that contradicts frequent witnessed inputs).

        Certified coverages on witnesses are not comparable between generations (witnesses
        over-represent the inputs earlier generations declined), so live inputs are used.
        """
        h = self.host
        cur = self.installed_id
        recent = list(self.recent)
        if cur is None or not recent:
            return None, None
        cand, old = h.store.get_artifact(candidate_id), h.store.get_artifact(cur)
        if cand is None or old is None:
            return None, None
        known = [h.capture.witnessed_answer(x) for x in recent]
        new = tier1_answers(cand.wasm, candidate_id, recent, self.guard_factory, h.store)
        was = tier1_answers(old.wasm, cur, recent, self.guard_factory, h.store)
        new_share = sum(a is not _DEOPT for a in new) / len(recent)
        old_share = sum(a is not _DEOPT for a in was) / len(recent)
        nd, nn = _disagreement(new, known)
        od, on = _disagreement(was, known)
        comparison = {"recent_inputs": len(recent), "candidate_tier1_share": new_share,
                      "installed_tier1_share": old_share, "candidate_disagreements": [nd, nn],
                      "installed_disagreements": [od, on]}
        if new_share + SHARE_TOLERANCE < old_share:
            return (f"on the last {len(recent)} inputs it would answer {new_share:.1%} at tier-1, the installed "
                    f"generation {h.state.installed} answers {old_share:.1%}"), comparison
        if nn >= MIN_KNOWN and nd / nn > max(h.contract.epsilon, (od / on if on else 0.0) + SHARE_TOLERANCE):
            return (f"on the last {len(recent)} inputs its tier-1 answers contradict the witnessed answer on {nd} of "
                    f"{nn}, the installed generation {h.state.installed}'s on {od} of {on}"), comparison
        return None, comparison

    # ------------------------------------------------------------------ install, rollback

    def install(self, artifact_id: str, generation: int, *, parent: int | None, trigger: Fired | None,
                record: bool = True) -> None:
        """Load ``artifact_id`` from the store and swap it in as ``generation``.

        Raises:
            AutoError: the artifact is not in the store, or it fails to load (its id, its
                signature with a trust key's loader, a tool it declares that the host lacks).
        """
        h = self.host
        stored = h.store.get_artifact(artifact_id)
        if stored is None:
            raise AutoError(f"artifact {artifact_id} is not in the store")
        art = self.loader(stored.wasm, artifact_id)
        if self.guard_factory is not None:
            art.guard = self.guard_factory(art, h.store)
        facts = manifest_facts(art.manifest)
        folded = self.fold_overlay(art, facts)
        with h.state_lock:
            h.tiered.swap(art)
            self.prime = getattr(art.guard, "prime", None)
            self.installed_id, self.facts = artifact_id, facts
            self.parent.setdefault(generation, parent)
            h.state.installed = generation
            h.state.installed_generalizes = facts.answers_new_inputs
            h.capture.labels = set(facts.labels)
            h.capture.field_labels = facts.fields
            h.evidence = GenerationEvidence(generation, h.contract.epsilon, h.risk_alpha, facts.risk_level)
            h.shift_feed.reset(facts.calibration_scores)
            if record:
                h.log(InstallRow(generation, artifact_id, parent=parent, trigger=trigger,
                                 compiled_as=facts.compiled_as, overlay_folded=folded))
        h.say(f"  generation {generation} installed, compiled as {facts.compiled_as}"
              + (f" (trigger: {trigger.kind.value})" if trigger else ""))

    def fold_overlay(self, art: Artifact, facts: ManifestFacts) -> int | None:
        """Before ``art`` is installed: adopt its manifest's overlay rule, re-enable a disabled
        overlay (fresh evidence), and mark the overlay entries the new table repeats as folded
        (at most :data:`FOLD_CHECK` of them are run through it). Returns how many were folded."""
        ov = self.host.overlay
        if ov is None:
            return None
        if facts.overlay_min_lead is not None:
            ov.set_min_lead(facts.overlay_min_lead)
        if ov.disabled is not None:
            ov.enable()
        inputs = ov.unfolded_inputs(FOLD_CHECK) if not art.tools else []
        if not inputs:
            return 0
        tt = TieredTask(art, reference=None)
        same = []
        for x in inputs:
            try:
                r = tt(x)
            except (AutoError, TypeError, ValueError):
                continue
            if r.tier == TIER_1 and r.score == 0 and ov.answer_of(x) == (True, r.answer):
                same.append(x)
        return ov.fold(same)

    def rollback(self, reason: str) -> None:
        """Roll the installed generation back to its parent (or to none), logged with the
        evidence that rejected it; the policy then compiles on the ``risk-alarm`` trigger."""
        h = self.host
        with h.state_lock:
            gen = h.state.installed
            parent = self.parent.get(gen) if gen is not None else None
            target = None
            if parent is not None:
                row = next((e for e in reversed(h.store.ratchet_events(h.task))
                            if e.kind == EventKind.INSTALL and e.generation == parent), None)
                target = row.artifact_id if row else None
            h.log(RollbackRow(gen, reason=reason, to=parent if target else None, evidence=h.evidence.describe()))
            h.state.alarm, h.state.new_since_alarm = Trigger.RISK_ALARM.value, 0
        if target is not None and parent is not None:
            self.install(target, parent, parent=self.parent.get(parent), trigger=Fired(Trigger.ROLLBACK), record=True)
        else:
            with h.state_lock:
                h.tiered.swap(None)
                self.prime = None
                self.installed_id, self.facts = None, None
                h.state.installed = None
                h.state.installed_generalizes = False
                h.evidence = GenerationEvidence(None, h.contract.epsilon, h.risk_alpha)
        h.say(f"  generation {gen} rolled back: {reason}")

    # ------------------------------------------------------------------ restart, other processes

    def load_installed(self) -> None:
        """Load the generation the log says is installed; when its artifact is missing or fails
        its checks (a tampered or corrupt row), the generations installed before it, newest
        first, and log why."""
        h = self.host
        cur = h.store.installed_generation(h.task)
        if cur is None:
            return
        candidates = [cur] + [(int(e.generation), e.artifact_id) for e in reversed(h.store.ratchet_events(h.task))
                              if e.kind == EventKind.INSTALL and e.artifact_id and e.artifact_id != cur[1]]
        tried: set[str] = set()
        for gen, aid in candidates:
            if aid in tried:
                continue
            tried.add(aid)
            if aid != cur[1]:
                h.log(RollbackRow(cur[0], reason="its artifact could not be loaded at restart", to=gen))
            try:
                self.install(aid, gen, parent=None, trigger=Fired(Trigger.RESTART_FALLBACK) if aid != cur[1] else None,
                             record=aid != cur[1])
                h.state.witnesses_at_attempt = h.state.witnesses
                return
            except AutoError as e:
                h.say(f"  generation {gen} could not be loaded ({type(e).__name__}: {e})")
        h.say("  no installed generation could be loaded; starting with none")

    def poll_store(self, compiling: bool) -> None:
        """Read the witnesses other ratchets on the same store wrote since the last look
        (:meth:`~auto.ratchet.capture.Capture.sync_from_store`: counters and table overlay), and
        install a newer generation another ratchet installed (at most every
        :data:`POLL_INTERVAL_S`; the install not while this ratchet compiles)."""
        now = time.monotonic()
        if now - self._last_poll < POLL_INTERVAL_S:
            return
        self._last_poll = now
        h = self.host
        try:
            h.capture.sync_from_store()
        except AutoError as e:
            log.warning("task %s: witnesses of other ratchets not read: %s", h.task, e)
        if compiling:
            return
        cur = h.store.installed_generation(h.task)
        if cur is not None and cur[1] != self.installed_id and (h.state.installed or 0) < cur[0]:
            try:
                self.install(cur[1], cur[0], parent=h.state.installed, trigger=Fired(Trigger.INSTALLED_ELSEWHERE),
                             record=False)
            except AutoError as e:
                log.warning("task %s: generation %s installed by another ratchet could not be loaded: %s",
                            h.task, cur[0], e)
