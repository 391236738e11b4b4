"""Many inputs at once (:meth:`auto_runtime.tiered.TieredTask.batch`): valid inputs run through
the artifact's ``run_batch`` in chunks, the guard decides per chunk (vectorized), and the items
it declines deopt one at a time, in input order.
"""

from __future__ import annotations

import logging
import math
from itertools import repeat
from operator import itemgetter
from time import perf_counter_ns
from typing import Any, Iterable

import numpy as np

from auto_runtime.artifact import Artifact
from auto_runtime.call_result import TIER_1, CallResult, Generation, failure_reason
from auto_runtime.deopt import Deopts
from auto_runtime.errors import AutoError, InputSchemaError
from auto_runtime.guard.base import all_pass

log = logging.getLogger("auto_runtime.tiered")

_SCORE = itemgetter("nonconformity")
_ANSWER = itemgetter("answer")

DEFAULT_BATCH_CHUNK = 64
"""Inputs per ``run_batch`` call in :meth:`TieredTask.batch`. Large enough to amortize the call
overhead (~1/64 per item), small enough that one runaway input burns at most 64 inputs' fuel."""



class BatchCalls(Deopts):
    """The batch path of a :class:`~auto_runtime.tiered.TieredTask`."""

    batch_chunk: int
    _audit: Any
    __call__: Any  # TieredTask's: one call (a capability artifact's batch runs item by item)

    def batch(self, inputs: Iterable[Any]) -> list[CallResult]:
        """Answer many inputs; results are in input order.

        Valid inputs run through ``run_batch`` in chunks of ``batch_chunk``; if a chunk fails as
        a whole (limit, trap, bad output), its items are retried one by one so only the items
        that fail deopt. The guard is evaluated vectorized (numpy) per chunk. Deopted items call
        the reference one at a time, in input order.

        Raises:
            InputSchemaError: an input violates the schema and there is no reference.
            Exception: whatever the reference raises.
        """
        items = inputs if isinstance(inputs, list) else list(inputs)
        n = len(items)
        if n == 0:
            return []
        g = self._gen
        if g.artifact is not None and g.artifact.tools:  # tool sessions are per call
            return [self(x) for x in items]
        t0 = perf_counter_ns()
        art = g.artifact
        results: list[CallResult | None] = [None] * n
        # (index, reason, score, p) for items to deopt after the artifact work
        deopts: list[tuple[int, str, Any, float | None, Any]] = []
        if art is None:
            deopts = [(i, "no-artifact", None, None, None) for i in range(n)]
        else:
            validate = g.validate
            # table hits whose schema check is known to pass (Artifact.table_answer), answered here;
            # the rest are validated and run through run_batch, chunk by chunk
            many = g.table_many
            outs_all, keys = many(items) if many is not None else ([None] * n, None)
            ok: list[int] | range = range(n)
            miss = [i for i, o in enumerate(outs_all) if o is None] if None in outs_all else []
            run: list[int] = []
            if miss:
                for i in miss:
                    try:
                        validate(items[i])
                    except InputSchemaError as e:
                        if self._reference is None:
                            raise
                        deopts.append((i, f"input-schema: {e}", None, None, None))
                    else:
                        run.append(i)
                if deopts:
                    bad = {d[0] for d in deopts}
                    ok = [i for i in range(n) if i not in bad]
            chunk = self.batch_chunk
            if not miss:  # every item a table hit: guard per chunk, then one pass to the results
                done = self._table_hits(g, items, outs_all, t0)
                if done is not None:
                    return done
            for start in range(0, len(run), chunk):
                idx = run[start:start + chunk]
                texts = None
                if keys is not None:
                    ks = [keys[i] for i in idx]
                    texts = None if None in ks else ks
                for i, o in zip(idx, self._run_chunk(art, [items[i] for i in idx], texts)):
                    outs_all[i] = o
            gen, aid = g.generation, g.artifact_id
            for start in range(0, len(ok), chunk):
                idx = ok[start:start + chunk]
                outs = outs_all[start:start + chunk] if ok.__class__ is range else [outs_all[i] for i in idx]
                passed, pvals, failed = self._decide_chunk(g, outs)
                for i, o, ok_j, p in zip(idx, outs, passed, pvals):
                    if ok_j and o.__class__ is dict and "answer" in o:  # a guard passes only dict outputs
                        results[i] = CallResult(o["answer"], TIER_1, "guard-pass", o.get("nonconformity"),
                                                None if p != p else p, 0.0, gen, aid, o)
                        continue
                    if o.__class__ is not dict:  # the AutoError of a per-item retry
                        if isinstance(o, InputSchemaError) and self._reference is None:
                            raise o
                        deopts.append((i, failure_reason(o), None, None, None))
                    elif "answer" not in o:
                        deopts.append((i, f"artifact-error: {o.get('error')}", None, None, None))
                    else:
                        p = None if p != p else p
                        deopts.append((i, failed or self._reason(g, o, p), o.get("nonconformity"), p, o))
            audit = self._audit
            if audit.active:
                for i, r in enumerate(results):
                    if r is not None and audit.active:
                        audit.offer(items[i], r.answer, task=g.task, artifact_id=aid,
                                    generation=gen, score=r.score)
        per_item = (perf_counter_ns() - t0) / 1000.0 / n
        for r in results:
            if r is not None:
                r.latency_us = per_item
        deopts.sort(key=lambda d: d[0])
        for i, reason, score, p, o in deopts:
            results[i] = self._deopt(items[i], g, reason, score, p, perf_counter_ns(), per_item, o)
        return results  # type: ignore[return-value]

    def _table_hits(self, g: Generation, items: list[Any], outs: list[Any], t0: int) -> list[CallResult] | None:
        """The results of a batch whose every item is a table hit (``outs``: their hit outputs),
        when the guard passes every one, else None (the general path decides again, where a
        refusal or a raising guard is reported as always). The guard decides per chunk of
        ``batch_chunk`` as on every batch, each answer is offered to the shadow audit, and the
        results are built in one pass, each carrying the batch's time so far per item (as a
        single call's result carries its time up to its construction)."""
        chunk = self.batch_chunk
        n = len(outs)
        evaluate = g.guard.evaluate_batch_outputs
        pvals: list[Any] = []
        no_p = True  # no item has a p-value
        try:
            for s in range(0, n, chunk):
                part = outs[s:s + chunk]
                passed, p = evaluate(part)
                ones, nans = all_pass(len(part))
                if passed is ones and p is nans:  # the shared "every item passes" arrays: no array work
                    pvals += [None] * len(part)
                    continue
                if len(passed) != len(part) or len(p) != len(part) or not passed.all():
                    return None
                if np.isnan(p).all():
                    pvals += [None] * len(part)
                else:
                    no_p = False
                    pvals += [None if v != v else v for v in p.tolist()]
        except Exception:  # noqa: BLE001 - the general path decides again and reports the failure
            return None
        gen, aid = g.generation, g.artifact_id
        audit = self._audit
        if audit.active:
            task, offer = g.task, audit.offer
            for x, o in zip(items, outs):
                if audit.active:
                    offer(x, o["answer"], task=task, artifact_id=aid, generation=gen, score=o["nonconformity"])
        per_item = (perf_counter_ns() - t0) / 1000.0 / n
        if no_p:  # one pass over the outputs
            return [CallResult(o["answer"], TIER_1, "guard-pass", o["nonconformity"], None, per_item, gen, aid, o)
                    for o in outs]
        return list(map(CallResult, map(_ANSWER, outs), repeat(TIER_1), repeat("guard-pass"), map(_SCORE, outs), pvals,
                        repeat(per_item), repeat(gen), repeat(aid), outs))

    def _decide_chunk(self, g: Generation, outs: list[Any]) -> tuple[list[bool], list[float], str | None]:
        """``(passed, p-values (nan = none), failure reason or None)`` of the guard's batch
        decision on one chunk; a guard that raises (or answers for another number of items)
        deopts the whole chunk."""
        try:
            passed, pvals = g.guard.evaluate_batch_outputs(outs)
            passed, pvals = passed.tolist(), pvals.tolist()
            if len(passed) != len(outs) or len(pvals) != len(outs):
                raise ValueError(f"the batch decision has {len(passed)} verdicts and {len(pvals)} "
                                 f"p-values for {len(outs)} outputs")
            return passed, pvals, None
        except Exception as e:  # noqa: BLE001 - a broken guard deopts, never raises
            return [False] * len(outs), [math.nan] * len(outs), self._guard_failed(g, e)

    def _reason(self, g: Generation, out: Any, p: float | None) -> str:
        """The guard's deopt reason for ``out``, or the failure reason if asking for it raises."""
        try:
            return g.guard.reason_output(out, p)
        except Exception as e:  # noqa: BLE001 - a broken guard deopts, never raises
            return self._guard_failed(g, e)

    @staticmethod
    def _run_chunk(art: Artifact, chunk: list[Any], keys: list[bytes] | None = None) -> list[Any]:
        """Outputs for ``chunk`` (``keys``: their canonical bytes, when known): dicts, or the
        :class:`AutoError` an item failed with."""
        try:
            if keys is not None:
                return art.call_batch_encoded(keys)
            return art.call_batch(chunk)
        except AutoError as e:
            if len(chunk) == 1:
                return [e]
            log.warning("run_batch of %d items failed (%s); retrying item by item", len(chunk), e)
        outs: list[Any] = []
        for i, x in enumerate(chunk):
            try:
                outs.append(art.call(x) if keys is None else art.call_encoded(keys[i], x))
            except AutoError as e:
                outs.append(e)
        return outs
