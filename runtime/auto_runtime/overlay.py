"""The table overlay: witnessed answers served at tier-1 before the next generation's table exists.

A generation's exact-match table holds the witnesses its compile saw; the witnesses captured
since (deopts and shadow audits) are answered again by the reference until a new table is
compiled and installed. :class:`TableOverlay` closes that lag inside the runtime: the host feeds
it every reference answer it captures (:meth:`TableOverlay.observe`), and
:class:`~auto_runtime.TieredTask` answers an input from it, ahead of the installed artifact,
as soon as the input's witnesses meet the admission rule.

Admission rule (the contract's ``overlay_min_lead``, ``k``; stated in every manifest through its
``contract`` and read by :func:`overlay_rule`): an input is answered with its modal witnessed
answer when that answer's witness count exceeds every other answer's count for the same input
by at least ``k``. With ``k = 1`` an input witnessed once (or always the same way) is answered
from its first repeat, the way an exact-match dict answers every repeat with the first answer it
saw; unlike a dict, an input whose witnesses disagree is answered only while one answer leads by
``k`` (a tie deopts, and the deopt's answer breaks it). Larger ``k`` needs more agreeing
witnesses first. Witnesses are compared as canonical JSON texts (:mod:`auto_runtime.jsonio`).

Contested inputs: an input whose witnesses disagree and whose modal answer does not lead by
``k`` is *contested* (:meth:`TableOverlay.probe`); :class:`~auto_runtime.TieredTask` deopts it
(reason :data:`CONTESTED_REASON`) instead of letting the installed artifact answer, because
that artifact's table may hold the older answer the later witnesses disagree with: a frozen
answer is corrected (the deopt's witness breaks the tie) instead of being served forever.

What an overlay answer is: a witnessed reference answer repeated, like a table hit, so its
disagreement with a fresh reference answer is the reference's own on that input as long as the
reference's behaviour on it does not change. Its nonconformity score is 0 (an exact-match hit);
the shadow audit re-asks overlay answers, marks them ``"origin": "overlay"``, and the audited
answer is fed back as one more witness. Audit decay (:meth:`TableOverlay.audit_rate`): an
answer whose lead is ``k + j`` is audited at the table-hit rate ``r`` times ``2**-j``, so each
agreeing audit halves the entry's rate and a disagreeing one doubles it back. With every audit
agreeing, an entry answered ``h`` times is audited about ``log2(1 + r h)`` times in expectation
(the ``j``-th audit waits ``2**j / r`` answers), against ``r h`` at a flat rate; an entry whose
answer is a noisy one keeps the full rate, since its audits disagree. Every exact-match audit
also stays within the audit's repeat budget (:class:`auto_runtime.audit.ShadowAudit`'s
``hit_budget``): with nothing derived, no repeat is audited. The host's risk monitor
watches those audits; on an alarm it calls :meth:`TableOverlay.disable`, which also forgets the
evidence (a reference whose behaviour changed makes old witnesses stale) until
:meth:`TableOverlay.enable`.

Folding: because the overlay answers a repeat from the first witness, the reference is not asked
again, so most served inputs never get a second witness (only the audited ones do). What the
overlay served is itself the evidence that the task repeats (:meth:`TableOverlay.service`:
answers, distinct inputs, answers of inputs not yet in the table); the host hands it to the next
compile, whose table admits the inputs this same rule admits (every witness agreeing, at least
``k`` of them) and states determinism as measured on the re-asked inputs alone. When a new
generation is installed, the host calls :meth:`TableOverlay.fold` with the inputs whose overlay
answer the new table repeats; they are counted as folded and evicted first when the overlay is
full (:data:`DEFAULT_MAX_ENTRIES`). The overlay keeps answering them (the same answer), so a
generation that is tightened or rolled back does not bring the lag back.

Thread safety: :meth:`observe`, :meth:`fold`, :meth:`disable` and :meth:`enable` take a lock;
:meth:`lookup` and :meth:`probe` read one dict entry (atomic under the interpreter lock) and
never block.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from auto_runtime.jsonio import canonical_text

DEFAULT_MIN_LEAD = 1
"""The admission rule's ``k`` when a manifest states none (see the module docstring)."""

DEFAULT_MAX_ENTRIES = 200_000
"""Distinct inputs the overlay keeps evidence for; beyond it, folded entries are evicted first,
then the oldest (a dict of that many short texts is tens of MB)."""

ORIGIN = "overlay"
"""The ``origin`` the shadow audit's records carry for overlay answers."""

CONTESTED_REASON = "overlay-contested"
"""The deopt reason of an input whose witnesses disagree without a modal answer leading by ``k``."""

ABSENT, ADMITTED, PENDING, CONTESTED = "absent", "admitted", "pending", "contested"
""":meth:`TableOverlay.probe`'s states: no witness of the input; answered; witnessed the same way
fewer than ``k`` times; witnessed with disagreeing answers, none leading by ``k``."""


def overlay_rule(manifest: dict[str, Any] | None) -> int | None:
    """The admission rule's ``k`` a manifest states (its ``contract.overlay_min_lead``), or None
    when it states none (an artifact compiled before the overlay existed)."""
    contract = (manifest or {}).get("contract")
    k = contract.get("overlay_min_lead") if isinstance(contract, dict) else None
    return k if isinstance(k, int) and not isinstance(k, bool) and k >= 1 else None


class _Entry:
    __slots__ = ("counts", "answer", "text", "folded", "served")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.answer: Any = None  # the admitted answer (decoded), or None
        self.text: str | None = None  # its canonical text, None while not admitted
        self.folded = False
        self.served = 0  # answers the overlay gave for this input


class TableOverlay:
    """Witnessed answers of inputs not yet in the installed table, answered at tier-1.

    Args:
        min_lead: the admission rule's ``k`` (>= 1; see the module docstring).
        max_entries: distinct inputs kept (>= 1).

    Raises:
        ValueError: a bad ``min_lead`` or ``max_entries``.
    """

    def __init__(self, min_lead: int = DEFAULT_MIN_LEAD, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        for name, v in (("min_lead", min_lead), ("max_entries", max_entries)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        self._min_lead = min_lead
        self.max_entries = max_entries
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self.disabled: str | None = None
        self.hits = 0
        self.unfolded_hits = 0
        self.inputs_first_served = 0
        self.folded = 0
        self.evicted = 0

    @property
    def min_lead(self) -> int:
        """The admission rule's ``k``."""
        return self._min_lead

    def set_min_lead(self, k: int) -> None:
        """Change ``k`` (e.g. to the one an installed manifest states) and re-judge every entry.

        Raises:
            ValueError: ``k`` is not an integer >= 1.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"min_lead must be an integer >= 1, got {k!r}")
        with self._lock:
            if k == self._min_lead:
                return
            self._min_lead = k
            for e in self._entries.values():
                self._judge(e)

    def __len__(self) -> int:
        return len(self._entries)

    def admitted(self) -> int:
        """Inputs the overlay answers now."""
        return sum(1 for e in list(self._entries.values()) if e.text is not None)

    def lookup(self, input_obj: Any) -> tuple[bool, Any]:
        """``(True, answer)`` when the overlay answers ``input_obj``, else ``(False, None)``; never
        raises (an input that is not JSON is never answered)."""
        if self.disabled is not None or not self._entries:
            return False, None
        try:
            key = canonical_text(input_obj)
        except (TypeError, ValueError, RecursionError):
            return False, None
        e = self._entries.get(key)
        if e is None or e.text is None:
            return False, None
        self._served(e)
        return True, json.loads(e.text)

    def probe(self, input_obj: Any) -> tuple[str, Any, int]:
        """``(state, answer, lead)`` of ``input_obj``: state :data:`ADMITTED` (counted as a hit;
        ``answer`` decoded, ``lead`` = its witness count minus the runner-up's), or
        :data:`ABSENT` / :data:`PENDING` / :data:`CONTESTED` with ``(None, 0)``; never raises
        (an input that is not JSON is absent). A disabled overlay reports every input absent."""
        if self.disabled is not None or not self._entries:
            return ABSENT, None, 0
        try:
            key = canonical_text(input_obj)
        except (TypeError, ValueError, RecursionError):
            return ABSENT, None, 0
        e = self._entries.get(key)
        if e is None:
            return ABSENT, None, 0
        text = e.text
        if text is None:
            return (CONTESTED if len(e.counts) > 1 else PENDING), None, 0
        self._served(e)
        counts = e.counts
        top = counts.get(text, 0)
        other = max((v for t, v in list(counts.items()) if t != text), default=0)
        return ADMITTED, json.loads(text), top - other

    def _served(self, e: _Entry) -> None:
        # counters only (a lost increment under a race undercounts evidence, never invents it)
        self.hits += 1
        e.served += 1
        if not e.folded:
            self.unfolded_hits += 1
            if e.served == 1:
                self.inputs_first_served += 1

    def served_inputs(self) -> int:
        """Distinct inputs the overlay has answered at least once (since its evidence was last
        forgotten by :meth:`disable`)."""
        return sum(1 for e in list(self._entries.values()) if e.served)

    def service(self) -> dict[str, Any]:
        """What the overlay served from witnesses it was never asked to re-check: ``answers``
        (every overlay answer), ``inputs`` (distinct inputs answered), ``unfolded_answers``
        (answers of inputs the installed table did not hold yet), ``inputs_first_served``
        (inputs first answered while no installed table held them: a count that only grows) and
        ``min_lead`` (the rule).
        A compile reads it as the evidence that the task repeats itself (see the module
        docstring's Folding)."""
        return {"answers": self.hits, "inputs": self.served_inputs(), "unfolded_answers": self.unfolded_hits,
                "inputs_first_served": self.inputs_first_served, "min_lead": self._min_lead}

    def audit_rate(self, base_rate: float, lead: int) -> float:
        """The audit rate of an answer whose lead is ``lead`` (see the module docstring):
        ``base_rate * 2**-(lead - k)`` (``base_rate`` at admission)."""
        return base_rate * 2.0 ** -max(0, lead - self._min_lead)

    def observe(self, input_obj: Any, answer: Any) -> bool:
        """Add one witness (a reference answer to ``input_obj``); returns whether the input is
        admitted afterwards. Inputs or answers that are not JSON are ignored (False)."""
        try:
            key, text = canonical_text(input_obj), canonical_text(answer)
        except (TypeError, ValueError, RecursionError):
            return False
        with self._lock:
            if self.disabled is not None:
                return False
            e = self._entries.get(key)
            if e is None:
                if len(self._entries) >= self.max_entries:
                    self._evict()
                e = self._entries[key] = _Entry()
            e.counts[text] = e.counts.get(text, 0) + 1
            self._judge(e)
            return e.text is not None

    def _judge(self, e: _Entry) -> None:
        ranked = sorted(e.counts.items(), key=lambda kv: -kv[1])
        lead = ranked[0][1] - (ranked[1][1] if len(ranked) > 1 else 0)
        if lead >= self._min_lead:
            e.text = ranked[0][0]
        else:
            e.text = None
            e.folded = False

    def _evict(self) -> None:
        victim = next((k for k, e in self._entries.items() if e.folded), None)
        if victim is None:
            victim = next(iter(self._entries))
        del self._entries[victim]
        self.evicted += 1

    def answer_of(self, input_obj: Any) -> tuple[bool, Any]:
        """Like :meth:`lookup` without counting a hit (for a host comparing the overlay with a
        new table)."""
        try:
            e = self._entries.get(canonical_text(input_obj))
        except (TypeError, ValueError, RecursionError):
            return False, None
        if e is None or e.text is None:
            return False, None
        return True, json.loads(e.text)

    def unfolded_inputs(self, limit: int) -> list[Any]:
        """Up to ``limit`` admitted, not yet folded inputs (decoded), oldest first."""
        out = []
        for key, e in list(self._entries.items()):
            if e.text is not None and not e.folded:
                out.append(json.loads(key))
                if len(out) >= limit:
                    break
        return out

    def fold(self, inputs: list[Any]) -> int:
        """Mark ``inputs`` (whose admitted answer the newly installed table repeats) as folded
        into the table; returns how many were newly marked."""
        n = 0
        with self._lock:
            for x in inputs:
                try:
                    e = self._entries.get(canonical_text(x))
                except (TypeError, ValueError, RecursionError):
                    continue
                if e is not None and e.text is not None and not e.folded:
                    e.folded = True
                    n += 1
            self.folded += n
        return n

    def disable(self, reason: str) -> None:
        """Stop answering and forget the evidence (see the module docstring) until :meth:`enable`."""
        with self._lock:
            self.disabled = reason or "disabled"
            self._entries.clear()

    def enable(self) -> None:
        """Answer again, from the witnesses observed from now on."""
        with self._lock:
            self.disabled = None

    def describe(self) -> dict[str, Any]:
        """JSON-able state: the rule, entries, admitted, hits (and of them on inputs not yet
        folded), distinct inputs served, folded, evicted, disabled reason."""
        return {"rule": f"modal witnessed answer leading every other answer by >= {self._min_lead} witness(es)",
                "min_lead": self._min_lead, "entries": len(self._entries), "admitted": self.admitted(),
                "hits": self.hits, "unfolded_hits": self.unfolded_hits, "served_inputs": self.served_inputs(),
                "folded": self.folded, "evicted": self.evicted, "disabled": self.disabled}


__all__ = ["ABSENT", "ADMITTED", "CONTESTED", "CONTESTED_REASON", "DEFAULT_MAX_ENTRIES", "DEFAULT_MIN_LEAD", "ORIGIN",
           "PENDING", "TableOverlay", "overlay_rule"]
