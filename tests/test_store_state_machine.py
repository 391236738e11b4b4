"""The store as a state machine (hypothesis): random sequences of ingests (new, repeated,
conflicting, malformed, mixed batches), witnesses, eval runs, artifacts and reopenings, checked
after every step against a model of what the store must hold."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from auto.canonical import digest
from auto.errors import IngestError
from auto.store import Store, new_span_id, new_trace_id, span_digest

TASKS = ["triage", "route"]
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53), st.text(max_size=12),
                      st.floats(allow_nan=False, allow_infinity=False, width=32))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                             st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                          max_leaves=8)


def _span(trace_id: str, kind: str, task: str | None, started: int, inp, out, status: str = "ok") -> dict:
    return {"trace_id": trace_id, "span_id": new_span_id(), "parent_span_id": None, "name": task or "llm",
            "kind": kind, "task": task, "site": None, "started_ns": started, "ended_ns": started + 1,
            "status": status, "input": inp, "output": out, "error": None if status == "ok" else {"type": "E"},
            "attributes": {}}


class StoreMachine(RuleBasedStateMachine):
    spans = Bundle("spans")

    @initialize()
    def open_store(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "s.sqlite"
        self.store = Store(self.path)
        self.model_spans: dict[str, dict] = {}
        self.model_traces: set[str] = set()
        self.model_evals: set[str] = set()
        self.model_artifacts: set[str] = set()

    def teardown(self) -> None:
        self.store.close()
        self.dir.cleanup()

    # -- rules ---------------------------------------------------------------------------

    @rule(target=spans, kind=st.sampled_from(["task", "llm", "tool"]), task=st.sampled_from(TASKS),
          started=st.integers(0, 10**6), inp=st.dictionaries(st.text(max_size=4), json_value, max_size=2),
          out=json_value, status=st.sampled_from(["ok", "ok", "error"]), with_trace=st.booleans())
    def ingest_new(self, kind, task, started, inp, out, status, with_trace):
        tid = new_trace_id()
        s = _span(tid, kind, task, started, inp, out, status)
        traces = [{"trace_id": tid, "name": task, "started_ns": started, "ended_ns": started + 1, "status": status,
                   "attributes": {}}] if with_trace else []
        res = self.store.ingest([s], traces)
        assert res == {"spans": 1, "traces": len(traces), "unchanged": 0}
        self.model_spans[s["span_id"]] = s
        self.model_traces |= {t["trace_id"] for t in traces}
        return s

    @rule(s=spans)
    def ingest_again_is_a_no_op(self, s):
        assert self.store.ingest([s]) == {"spans": 0, "traces": 0, "unchanged": 1}

    @rule(s=spans, out=json_value, inp=json_value)
    def conflicting_batch_writes_nothing(self, s, out, inp):
        changed = {**s, "output": out if out != s["output"] else [s["output"]]}
        fresh = _span(new_trace_id(), "task", "triage", 5, {"q": 1}, inp)
        with pytest.raises(IngestError, match="already exists with different content"):
            self.store.ingest([fresh, changed])
        assert not self.store.spans(trace_id=fresh["trace_id"])  # the whole batch was refused

    @rule(bad=st.sampled_from([float("nan"), float("inf"), b"bytes", {1: "int key"}, object()]),
          where=st.sampled_from(["input", "output", "attributes"]))
    def malformed_batch_writes_nothing(self, bad, where):
        s = _span(new_trace_id(), "task", "triage", 7, {"q": 2}, "x")
        s[where] = {"v": bad} if where != "input" else {"q": bad}
        with pytest.raises(IngestError):
            self.store.ingest([s])
        assert not self.store.spans(trace_id=s["trace_id"])

    @rule(task=st.sampled_from(TASKS), inp=st.dictionaries(st.text(max_size=4), json_value, max_size=2), out=json_value)
    def add_witness(self, task, inp, out):
        sid = self.store.add_witness(task, inp, out, started_ns=3)
        (s,) = [x for x in self.store.spans(task=task) if x["span_id"] == sid]
        self.model_spans[sid] = s
        self.model_traces.add(s["trace_id"])

    @rule(record=st.dictionaries(st.sampled_from(["task", "verdict", "n", "x"]), json_value, min_size=1, max_size=4))
    def put_eval_run(self, record):
        if not isinstance(record.get("task"), (str, type(None))):
            with pytest.raises(IngestError, match="task"):
                self.store.put_eval_run(record)
            return
        rid = self.store.put_eval_run(record)
        assert rid == digest(record) and self.store.get_eval_run(rid) == record
        assert self.store.put_eval_run(record) == rid  # idempotent
        self.model_evals.add(rid)

    @rule(wasm=st.binary(min_size=1, max_size=64), gen=st.integers(1, 5))
    def put_artifact(self, wasm, gen):
        aid = self.store.put_artifact(wasm, {"format": "x"}, "triage", gen)
        assert self.store.get_artifact(aid).wasm == wasm
        self.model_artifacts.add(aid)

    @rule()
    def reopen(self):
        self.store.close()
        self.store = Store(self.path)

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def verifies_and_matches_the_model(self):
        rep = self.store.verify()
        assert rep.ok, rep.mismatches
        assert rep.spans == len(self.model_spans) and rep.traces == len(self.model_traces)
        assert rep.eval_runs == len(self.model_evals) and rep.artifacts == len(self.model_artifacts)
        order = sorted(self.model_spans.values(), key=lambda s: (s["started_ns"], s["span_id"]))
        assert self.store.digest() == digest([span_digest(s) for s in order])

    @invariant()
    def witnesses_are_the_ok_task_spans(self):
        for task in TASKS:
            want = sorted((s for s in self.model_spans.values() if s["kind"] == "task" and s["task"] == task
                           and s["status"] == "ok"), key=lambda s: (s["started_ns"], s["span_id"]))
            ws, d = self.store.task_witnesses(task)
            assert [w.span_id for w in ws] == [s["span_id"] for s in want]
            assert [w.output for w in ws] == [s["output"] for s in want]
            assert d == self.store.digest(task)


TestStoreStateMachine = StoreMachine.TestCase
TestStoreStateMachine.settings = settings(max_examples=40, stateful_step_count=20, deadline=None)
