"""The ratchet's capture: every reference answer becomes a witness, evidence and a counter.

The runtime hands the ratchet one record per deopt (on the request thread) and per shadow audit
(on the audit thread). :meth:`Capture.record`:

1. keeps only JSON inputs and answers (anything else cannot be compiled; counted in
   ``capture_errors``, logged once);
2. redacts secrets (:class:`auto.record.redact.Redactor`) and writes the witness to the store as
   a task span (unless the host records witnesses itself: a proxy's upstream call, or a task run
   recorded with its tools); a store that refuses the write loses no answer (counted, logged);
3. feeds the table overlay with the answer, unless something was redacted (a secret is never
   repeated);
4. updates the compile policy's counters (distinct witnesses, consistent repeats, deopts of
   witnessed inputs, outputs the installed generation cannot give) and the installed
   generation's evidence (the deopt's would-be answer against the reference's; an audit's
   agreement, fed to the right risk monitor: the specialist's, a table hit's count, or the
   overlay's).

It returns which alarms the record raised; the host acts on them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from auto_runtime.overlay import ORIGIN as OVERLAY_ORIGIN

from auto.canonical import canonical_json
from auto.compile.witnesses import is_redacted, unit_witnesses
from auto.sites import is_site_id
from auto.errors import AutoError
from auto.ratchet.policy import unanswerable_labels
from auto.record.redact import Redactor

log = logging.getLogger("auto.ratchet")


@dataclass(frozen=True)
class Raised:
    """Alarms one captured record raised: ``risk`` (the specialist's audits reject its
    certificate) and ``overlay`` (the overlay's audits reject epsilon)."""

    risk: bool = False
    overlay: bool = False


NOTHING = Raised()


class Capture:
    """Witnesses, redaction and counters of the host ratchet (see the module docstring).

    Args:
        host: the :class:`~auto.ratchet.core.Ratchet` (store, task, state and lock, evidence,
            overlay).
        write_witnesses: write each record's answer to the store as a witness.
    """

    def __init__(self, host: Any, write_witnesses: bool) -> None:
        self.host = host
        self.write_witnesses = write_witnesses
        self.redactor = Redactor()
        self.errors = 0
        self._warned_json = False
        self.seen: dict[str, str] = {}
        """Canonical input -> canonical first witnessed answer."""
        self.reasked: set[str] = set()
        """Canonical inputs witnessed at least twice (re-asked: the noise bound's evidence)."""
        self.seq_mark = 0
        """The store's span number up to which witnesses were read (:meth:`sync_from_store`)."""
        self.own: set[str] = set()
        """Span ids of the witnesses this ratchet wrote since the last sync (not read back)."""
        self.seed_overlay = True
        self.labels: set[str] = set()
        self.field_labels: dict[str, set[str]] = {}  # record-valued: declared values per categorical field
        """Outputs the installed generation can give (canonical JSON)."""

    def witnessed_answer(self, input_obj: Any) -> str | None:
        """The first witnessed answer to ``input_obj`` (canonical JSON), or None."""
        try:
            return self.seen.get(canonical_json(input_obj))
        except (TypeError, ValueError):
            return None

    def count_witnesses(self, seed_overlay: bool = True) -> None:
        """Read the task's witnesses already in the store (a restart, or another ratchet's); with
        ``seed_overlay`` they also feed the table overlay (a host that trusts only signed
        generations passes False: stored rows are not signed, so only answers this process got
        from the reference itself are repeated)."""
        h = self.host
        self.seed_overlay = seed_overlay
        ws = unit_witnesses(h.store, h.task)
        self._read(ws)
        self.seq_mark = max((w.seq for w in ws if isinstance(w.seq, int)), default=0)

    def _read(self, ws: list[Any]) -> None:
        h = self.host
        for w in ws:
            try:
                key, out = canonical_json(w.input), canonical_json(w.output)
            except (TypeError, ValueError):
                continue
            prev = self.seen.get(key)
            if prev is None:
                self.seen[key] = out
            else:
                self.reasked.add(key)
                if prev == out:
                    h.state.repeats_consistent += 1
                else:
                    h.state.repeats_changed += 1
            if self.seed_overlay and h.overlay is not None and not is_redacted(w):
                h.overlay.observe(w.input, w.output)
        h.state.witnesses = len(self.seen)

    def sync_from_store(self) -> int:
        """Read the task's witnesses other ratchets on the store wrote since the last read (this
        one's own are skipped: they were counted when captured) into the counters and, as at
        the start, the overlay (same admission rule). Returns how many were read. A task that is
        a model-call site, or a host writing no witnesses, reads nothing.

        Raises:
            AutoError: the store failed.
        """
        h = self.host
        if not self.write_witnesses or is_site_id(h.task):
            return 0
        new = h.store.witnesses_after(h.task, self.seq_mark)
        if not new:
            return 0
        self.seq_mark = max(w.seq for w in new if isinstance(w.seq, int))
        own = self.own
        others = [w for w in new if w.span_id not in own]
        for w in new:  # read back now (one written during the read stays, to be skipped next time)
            own.discard(w.span_id)
        with h.state_lock:
            self._read(others)
        return len(others)

    def record(self, rec: dict[str, Any]) -> Raised:
        """Capture one deopt or audit record of the runtime (see the module docstring)."""
        inp, out = rec["input"], rec["output"]
        try:
            key, out_key = canonical_json(inp), canonical_json(out)
        except (TypeError, ValueError) as e:
            self.errors += 1
            if not self._warned_json:
                self._warned_json = True
                log.warning("task %s: an input or reference answer that is not JSON was not kept as a witness "
                            "(%s); answers must be JSON values to be compiled", self.host.task, e)
            return NOTHING
        clean = self._write(rec, inp, out)
        if clean is None:
            return NOTHING
        ov = self.host.overlay
        if clean and ov is not None:  # a redacted witness is never compiled, nor repeated
            ov.observe(inp, out)
        return self._count(rec, key, out_key)

    def _write(self, rec: dict[str, Any], inp: Any, out: Any) -> bool | None:
        """Write the witness (redacted); returns whether nothing was redacted, or None when the
        store refused it."""
        h = self.host
        attrs = {"auto.deopt.reason": rec.get("reason"), "auto.deopt.artifact_id": rec.get("artifact_id"),
                 "auto.deopt.generation": rec.get("generation")}
        if rec.get("audit"):
            attrs["auto.audit"] = True
        if not self.write_witnesses:
            if h.overlay is None:
                return False
            return self.redactor.redact_value(inp)[1] == 0 and self.redactor.redact_value(out)[1] == 0
        # never store a secret: a witness is a span like any other (a compile leaves redacted ones out)
        kept_in, n_in = self.redactor.redact_value(inp)
        kept_out, n_out = self.redactor.redact_value(out)
        if n_in or n_out:
            attrs["auto.redactions"] = n_in + n_out
            attrs["auto.redacted"] = [f for f, n in (("input", n_in), ("output", n_out)) if n]
        try:
            self.own.add(h.store.add_witness(task=h.task, input=kept_in, output=kept_out, attributes=attrs))
        except AutoError as e:
            self.errors += 1
            log.warning("task %s: witness not stored (%s); the answer was returned", h.task, e)
            return None
        return not (n_in or n_out)

    def _count(self, rec: dict[str, Any], key: str, out_key: str) -> Raised:
        h = self.host
        risk = overlay = False
        with h.state_lock:
            st = h.state
            prev = self.seen.get(key)
            if prev is None:
                st.witnesses += 1
                self.seen[key] = out_key
            else:
                self.reasked.add(key)
                if prev == out_key:
                    st.repeats_consistent += 1
                else:
                    st.repeats_changed += 1
                if not rec.get("audit"):
                    st.known_misses += 1
            for label in unanswerable_labels(rec["output"], self.labels, self.field_labels):
                st.new_labels[label] = st.new_labels.get(label, 0) + 1
            if st.alarm is not None:
                st.new_since_alarm += 1
            ev = h.evidence
            if rec.get("audit"):
                disagreed = not rec.get("agree", True)
                if rec.get("origin") == OVERLAY_ORIGIN:
                    overlay = ev.audited_overlay(disagreed)
                else:
                    risk = ev.audited(disagreed, table_hit=rec.get("tier1_score") == 0)
            else:
                ev.deopts += 1
                wb = rec.get("artifact_output")
                if isinstance(wb, dict) and "answer" in wb:
                    right = canonical_json(wb["answer"]) == out_key
                    ev.would_be_answered += 1
                    ev.would_be_correct += int(right)
                    st.deopts_since_attempt += 1
                    st.would_be_correct_since_attempt += int(right)
        return Raised(risk, overlay) if (risk or overlay) else NOTHING
