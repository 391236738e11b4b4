"""Shadow audit: re-ask a seeded random fraction of tier-1 answers at tier 0, in the background.

A guard's statistical statement holds only under exchangeability; the shadow audit measures what
actually happens in deployment. :class:`ShadowAudit` is owned by
:class:`~auto_runtime.TieredTask` (``audit_rate``, ``audit_seed``, ``audit_max``): after each
tier-1 answer the task calls :meth:`ShadowAudit.offer`, which decides whether to audit it and,
if so, queues it without waiting. One daemon worker thread calls the reference on queued inputs,
compares the answers and records the outcome; the compiler turns the counts into a silent-wrong
rate with a Clopper–Pearson interval (``auto.guards.audit.audit_summary``).

Selection (deterministic for a given sequence of tier-1 answers): the ``k``-th offered answer
is audited iff the ``k``-th draw of ``random.Random(seed).random()`` is ``< rate`` (its rate:
``rate``, ``hit_rate`` for an exact-match answer, or the offer's own; ``rate`` 1: every draw
is below 1), until ``max_audits`` answers have been selected. Every offer takes its draw, also
one the repeat budget below leaves unaudited, so the budget never shifts which derived answers
are audited.

Repeat budget (``hit_budget``, a share ``b``): exact-match answers (offered with score 0: table
hits and table-overlay answers, which repeat a witnessed reference answer) are selected only
while the exact-match answers selected so far stay within ``b`` times the derived answers
offered so far (tier-1 answers with a nonzero score: what the specialist or program derived,
answers no exact-match lookup could give). On a stream where nothing is derived (repeats only),
no repeat is audited: the host pays what an exact-match dict pays, one reference call per
distinct input. Where answers are derived, the audits of repeats cost at most ``b`` reference
calls per derived answer. ``None``: no budget (repeats audited at ``hit_rate`` alone). A
per-offer ``rate`` (the table overlay's decayed rate, :meth:`auto_runtime.overlay.TableOverlay.audit_rate`)
replaces ``hit_rate`` for that offer.

Probes (:meth:`ShadowAudit.probe`): the host may also queue an answer for audit outside the
seeded selection and outside the repeat budget (no draw is taken, so the selection of offers is
unchanged), counted in ``probed``; its record and capture carry ``"probe": True``. The ratchet's
noise probe uses it to re-ask inputs answered from a single witness (:mod:`auto.ratchet.probe`),
choosing them by a rule that never reads the answer.

Agreement: the two answers agree iff their canonical JSON texts are equal (sorted keys, compact
separators: so ``1`` and ``1.0`` differ, as they do in the artifact's output); when either is not
JSON-encodable, Python ``==`` decides. The tier-1 answer and the input are snapshotted as
canonical JSON when the answer is offered, so a caller mutating them later does not change the
audit.

Capture: an audited reference answer goes to the task's ``capture`` callback like a deopt's,
with the same keys (``task``, ``input``, ``output``, ``reason`` = ``"shadow-audit"``,
``artifact_id``, ``generation``, ``latency_us``) plus ``"audit": True``, ``"tier1_answer"`` and
``"agree"`` and ``"tier1_score"`` (the answer's nonconformity as offered), and ``"origin"`` when
the answer was offered with one (``"overlay"``: the table overlay answered) — deopt records carry no ``"audit"`` key, so ``rec.get("audit")`` tells them apart.
The callback runs on the audit thread. A reference that raises is recorded (``errors``, a record
with ``"error"``) and nothing is captured; a capture failure is logged. Nothing the audit does
raises into the request path.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import queue
import random
import threading
from time import perf_counter_ns
from typing import Any, Callable

from auto_runtime.jsonio import canonical_text

log = logging.getLogger("auto_runtime.audit")

AUDIT_REASON = "shadow-audit"
"""The ``reason`` of capture records written by the audit."""

DEFAULT_AUDIT_QUEUE = 64
"""Audits that may wait for the worker before new selections are skipped."""

_STOP = object()


def _snapshot(obj: Any) -> tuple[str | None, Any]:
    """``(canonical JSON text, obj)``; the text is ``None`` when ``obj`` is not JSON-encodable."""
    try:
        return canonical_text(obj), obj
    except (TypeError, ValueError, RecursionError):
        return None, obj


def _restore(snap: tuple[str | None, Any]) -> Any:
    text, obj = snap
    return obj if text is None else json.loads(text)


def _agree(tier1: tuple[str | None, Any], reference_answer: Any) -> bool:
    ref_text, _ = _snapshot(reference_answer)
    if tier1[0] is not None and ref_text is not None:
        return tier1[0] == ref_text
    try:
        return bool(_restore(tier1) == reference_answer)
    except Exception:  # noqa: BLE001 - an answer whose == raises cannot be shown to agree
        return False


class ShadowAudit:
    """A bounded, seeded background audit of tier-1 answers (see the module docstring).

    Args:
        reference: the tier-0 implementation, ``reference(input_obj) -> answer``; called on the
            audit thread, possibly while the request path calls it too. ``None`` disables the
            audit.
        capture: the capture callback (called on the audit thread), or ``None``.
        rate: fraction of tier-1 answers to audit, in [0, 1].
        hit_rate: fraction of exact-match table hits (answers offered with score 0, the ABI's
            table-hit nonconformity) to audit, in [0, 1]; ``None``: ``rate``. A table hit repeats a
            witnessed reference answer, so auditing it measures the reference's own consistency;
            a deployment may spend less on it than on answers the specialist derived.
        seed: seed of the selection RNG (``random.Random(seed)``).
        max_audits: at most this many answers are selected for audit (``None``: no cap).
        queue_size: audits waiting for the worker at most (>= 1); further selections are
            ``skipped``.
        max_records: at most this many of the latest records are kept in :attr:`records`
            (``None``: all; the counters always count everything). A long-running deployment
            bounds its memory with it.
        hit_budget: the repeat budget's share ``b`` in [0, 1] (see the module docstring), or
            ``None`` (no budget).

    Raises:
        ValueError: ``rate`` not a finite number in [0, 1], ``max_audits`` negative,
            ``queue_size`` < 1. TypeError: ``seed``/``max_audits``/``queue_size`` not integers.

    Counters (read any time; consistent with each other under :meth:`stats`):
        ``selected`` (chosen by the RNG, queued or skipped), ``skipped`` (queue full),
        ``probed`` (queued by :meth:`probe`),
        ``n`` (audits that got a reference answer), ``disagreements`` (of those, answers that
        differ), ``errors`` (the reference raised), ``pending`` (queued or running),
        ``derived`` (offers with a nonzero score), ``hit_selected`` (exact-match answers
        selected), ``hit_over_budget`` (exact-match answers the repeat budget left unaudited).
    """

    def __init__(self, reference: Callable[[Any], Any] | None,
                 capture: Callable[[dict[str, Any]], None] | None = None, *,
                 rate: float = 0.0, seed: int = 0, max_audits: int | None = None,
                 hit_rate: float | None = None,
                 queue_size: int = DEFAULT_AUDIT_QUEUE, max_records: int | None = None,
                 hit_budget: float | None = None) -> None:
        for r in (rate, 0.0 if hit_rate is None else hit_rate, 0.0 if hit_budget is None else hit_budget):
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not (
                    math.isfinite(r) and 0.0 <= r <= 1.0):
                raise ValueError(f"audit rate must be a number in [0, 1], got {r!r}")
        for name, v in (("audit seed", seed), ("queue_size", queue_size)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} must be an integer, got {v!r}")
        if max_audits is not None:
            if isinstance(max_audits, bool) or not isinstance(max_audits, int):
                raise TypeError(f"audit_max must be an integer or None, got {max_audits!r}")
            if max_audits < 0:
                raise ValueError(f"audit_max must be >= 0, got {max_audits}")
        if queue_size < 1:
            raise ValueError(f"queue_size must be >= 1, got {queue_size}")
        self.rate = float(rate)
        self.hit_rate = self.rate if hit_rate is None else float(hit_rate)
        self.hit_budget = None if hit_budget is None else float(hit_budget)
        self.derived = 0
        self.probed = 0
        self.hit_selected = 0
        self.hit_over_budget = 0
        self.seed = seed
        self.max_audits = max_audits
        self._reference = reference
        self._capture = capture
        self._rng = random.Random(seed)
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closed = False
        self.selected = 0
        self.skipped = 0
        self.n = 0
        self.disagreements = 0
        self.errors = 0
        self.pending = 0
        self._records: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_records)
        self.active = reference is not None and max(self.rate, self.hit_rate) > 0.0 and max_audits != 0
        """Whether offers may still be selected (the request path checks only this)."""

    # ------------------------------------------------------------------ request path

    def offer(self, input_obj: Any, answer: Any, *, task: str | None = None,
              artifact_id: str | None = None, generation: int | None = None,
              score: Any = None, origin: str | None = None, rate: float | None = None) -> bool:
        """Consider one tier-1 answer for audit; never blocks on the reference, never raises.

        ``score`` (the answer's nonconformity, e.g. 0 for an exact-match table hit) is passed
        through to the record and the capture as ``tier1_score``; ``origin`` (what answered, e.g.
        ``"overlay"``), when given, as ``origin``. ``rate`` (in [0, 1]) replaces the rate of this
        offer (``hit_rate`` for an exact-match answer, else ``rate``); the repeat budget still
        applies.

        Returns:
            ``True`` when the answer was queued for audit.
        """
        if not self.active:
            return False
        try:
            exact = score == 0 and not isinstance(score, bool)
            if rate is None:
                rate = self.hit_rate if exact else self.rate
            # The draw needs no lock: Random.random() is one atomic C call under the GIL.
            drawn = rate >= 1.0 or self._rng.random() < rate
            if not exact:
                with self._lock:
                    self.derived += 1
            elif self.hit_budget is not None and self.hit_selected + 1 > self.hit_budget * self.derived:
                with self._lock:
                    self.hit_over_budget += 1
                return False
            if not drawn:
                return False
            with self._lock:
                if not self.active:
                    return False
                self.selected += 1
                if exact:
                    self.hit_selected += 1
                if self.max_audits is not None and self.selected >= self.max_audits:
                    self.active = False
                item = (_snapshot(input_obj), _snapshot(answer), task, artifact_id, generation, score, origin)
                try:
                    self._queue.put_nowait(item)
                except queue.Full:
                    self.selected -= 1  # not audited: does not use up audit_max
                    if exact:
                        self.hit_selected -= 1
                    if self.max_audits is not None and not self._closed:
                        self.active = True
                    self.skipped += 1
                    return False
                self.pending += 1
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, name="auto-shadow-audit",
                                                    daemon=True)
                    self._thread.start()
            return True
        except Exception:  # noqa: BLE001 - the audit never breaks a request
            log.exception("shadow audit offer failed (request unaffected)")
            return False

    def probe(self, input_obj: Any, answer: Any, *, task: str | None = None, artifact_id: str | None = None,
              generation: int | None = None, score: Any = None, origin: str | None = None) -> bool:
        """Queue one tier-1 answer for audit outside the seeded selection, ``audit_max`` and the
        repeat budget (the caller bounds how many); never blocks, never raises. The record and the
        capture carry ``"probe": True``.

        Returns:
            ``True`` when queued; ``False`` without a reference, after :meth:`close`, or with the
            queue full (counted in ``skipped``).
        """
        if self._reference is None or self._closed:
            return False
        try:
            with self._lock:
                item = (_snapshot(input_obj), _snapshot(answer), task, artifact_id, generation, score, origin, True)
                try:
                    self._queue.put_nowait(item)
                except queue.Full:
                    self.skipped += 1
                    return False
                self.probed += 1
                self.pending += 1
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, name="auto-shadow-audit", daemon=True)
                    self._thread.start()
            return True
        except Exception:  # noqa: BLE001 - the audit never breaks a request
            log.exception("shadow audit probe failed (request unaffected)")
            return False

    # ------------------------------------------------------------------ worker

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            try:
                self._audit_one(*item)
            except Exception:  # noqa: BLE001 - keep the worker alive
                log.exception("shadow audit failed unexpectedly")
            finally:
                with self._done:
                    self.pending -= 1
                    self._done.notify_all()

    def _audit_one(self, inp_snap: tuple[str | None, Any], ans_snap: tuple[str | None, Any],
                   task: str | None, artifact_id: str | None, generation: int | None,
                   score: Any = None, origin: str | None = None, probe: bool = False) -> None:
        input_obj = _restore(inp_snap)
        tier1 = _restore(ans_snap)
        ref = self._reference
        assert ref is not None  # active implies a reference
        t0 = perf_counter_ns()
        try:
            answer = ref(input_obj)
        except Exception as e:  # noqa: BLE001 - recorded, never raised
            latency = (perf_counter_ns() - t0) / 1000.0
            with self._lock:
                self.errors += 1
                self._records.append({
                    "input": input_obj, "tier1_answer": tier1, "reference_answer": None,
                    "agree": None, "error": f"{type(e).__name__}: {e}", "latency_us": latency,
                    "task": task, "artifact_id": artifact_id, "generation": generation,
                    "tier1_score": score})
            log.warning("shadow audit: the reference raised %s: %s", type(e).__name__, e)
            return
        latency = (perf_counter_ns() - t0) / 1000.0
        agree = _agree(ans_snap, answer)
        with self._lock:
            self.n += 1
            if not agree:
                self.disagreements += 1
            self._records.append({
                "input": input_obj, "tier1_answer": tier1, "reference_answer": answer,
                "agree": agree, "error": None, "latency_us": latency, "task": task,
                "artifact_id": artifact_id, "generation": generation, "tier1_score": score, "probe": probe})
        cap = self._capture
        if cap is not None:
            rec = {"task": task, "input": input_obj, "output": answer, "reason": AUDIT_REASON,
                   "artifact_id": artifact_id, "generation": generation, "latency_us": latency,
                   "audit": True, "tier1_answer": tier1, "agree": agree, "tier1_score": score}
            if origin is not None:
                rec["origin"] = origin
            if probe:
                rec["probe"] = True
            try:
                cap(rec)
            except Exception:  # noqa: BLE001 - a capture failure must not lose the record
                log.exception("capture hook failed for a shadow audit of task %s", task)

    # ------------------------------------------------------------------ reading

    @property
    def records(self) -> list[dict[str, Any]]:
        """A copy of the audit records, in completion order: dicts with ``input``,
        ``tier1_answer``, ``reference_answer`` (``None`` on error), ``agree`` (``None`` on
        error), ``error`` (``"Type: message"`` or ``None``), ``latency_us`` (reference wall time,
        µs), ``task``, ``artifact_id``, ``generation``, ``tier1_score``. The latest
        ``max_records`` are kept (all when it is ``None``)."""
        with self._lock:
            return list(self._records)

    def stats(self) -> dict[str, Any]:
        """The counters as one consistent JSON-able dict (plus ``rate``, ``seed``,
        ``max_audits``)."""
        with self._lock:
            return {"rate": self.rate, "hit_rate": self.hit_rate, "seed": self.seed, "max_audits": self.max_audits,
                    "selected": self.selected, "skipped": self.skipped, "n": self.n,
                    "disagreements": self.disagreements, "errors": self.errors,
                    "pending": self.pending, "hit_budget": self.hit_budget, "derived": self.derived,
                    "hit_selected": self.hit_selected, "hit_over_budget": self.hit_over_budget,
                    "probed": self.probed}

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until every queued audit has finished, at most ``timeout_s`` seconds
        (``None``: no limit).

        Returns:
            ``True`` when nothing is pending, ``False`` on timeout.
        """
        with self._done:
            return self._done.wait_for(lambda: self.pending == 0, timeout_s)

    def close(self, timeout_s: float | None = 5.0) -> bool:
        """Stop selecting, let the queued audits finish and stop the worker thread.

        Returns:
            ``True`` when the worker has stopped within ``timeout_s`` seconds (or never started).
        """
        with self._lock:
            self.active = False
            self._closed = True
            thread = self._thread
        if thread is None:
            return True
        try:  # after the queued audits: they finish first
            self._queue.put(_STOP, timeout=timeout_s)
        except queue.Full:
            return False
        thread.join(timeout_s)
        return not thread.is_alive()

    def __repr__(self) -> str:
        s = self.stats()
        return (f"ShadowAudit(rate={s['rate']}, n={s['n']}, disagreements={s['disagreements']}, "
                f"errors={s['errors']}, skipped={s['skipped']}, pending={s['pending']})")
