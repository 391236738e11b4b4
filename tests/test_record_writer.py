"""The recorder's background writer: journaled before queued, batches isolated, read-your-writes;
the redaction fast path still finds every secret."""

from __future__ import annotations

import time

import pytest

from auto.errors import IngestError
from auto.record.redact import REDACTED, Redactor
from auto.record.writer import SpanWriter
from auto.store import Store, local_path, new_span_id, new_trace_id
from auto.store.journal import Journal, journal_dir


def make_span(**over) -> dict:
    s = {"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": "t", "kind": "task",
         "task": "t", "site": None, "started_ns": time.time_ns(), "ended_ns": time.time_ns(), "status": "ok",
         "input": {"x": 1}, "output": "y", "error": None, "attributes": {}}
    s.update(over)
    return s


@pytest.mark.parametrize("secret", ["sk-live-abcdef123456", "tök-ën-ümlaut-秘密-42"])
def test_redactor_fast_path_still_finds_secrets_anywhere(secret):
    r = Redactor([secret])
    clean = make_span(input={"a": [1, 2.5, None, True, {"b": "nothing here"}], "c": "plain"})
    assert r.redact_span(clean) is clean  # nothing to redact: returned as it is, not walked
    dirty = make_span(input={"a": [{"deep": f"Bearer {secret} trailing"}], f"key-{secret}": "v"})
    out = r.redact_span(dirty)
    assert out["input"]["a"][0]["deep"] == f"Bearer {REDACTED} trailing" and f"key-{REDACTED}" in out["input"]
    assert secret not in repr(out) and out["attributes"]["auto.redacted"] == ["input"]
    pem = make_span(output="-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----")
    assert Redactor().redact_span(pem)["output"] == REDACTED  # by pattern, alone in its string
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    tok = make_span(attributes={"x": ["a", {"k": jwt}]})
    assert jwt not in repr(Redactor().redact_span(tok))


def test_writer_isolates_a_bad_batch_and_flushes_before_reads(tmp_path):
    written, failed = [], []
    with Store(tmp_path / "s.db") as st:
        j = Journal(journal_dir(local_path(st.location)))
        w = SpanWriter(st, written.append, lambda n, e: failed.append((n, type(e))), journal=j)
        st.add_read_barrier(w.flush)
        good = [make_span() for _ in range(5)]
        dup = dict(good[0], status="error")  # the same span id with other content
        w.submit(good[:3], [])
        w.submit([dup], [])
        w.submit(good[3:], [])
        # a read through the store waits for what was submitted before it
        assert sorted(s["span_id"] for s in st.spans()) == sorted(s["span_id"] for s in good)
        assert sum(written) == 5 and failed == [(1, IngestError)]
        assert j.bytes == 0  # everything journaled is committed (or reported): the journal is empty
        w.close()
        assert not j.path.exists()


def test_recording_reads_back_what_it_wrote_before_stopping(tmp_path):
    import auto

    @auto.task("step")
    def step(i: int) -> int:
        return i + 1

    with Store(tmp_path / "s.db") as st, auto.recording(st) as rec:
        for i in range(20):
            step(i)
        assert len(st.witnesses("step")) == 20  # read-your-writes while recording
        assert not rec.sync
    assert not any(journal_dir(local_path(str(tmp_path / "s.db"))).glob("*.journal"))


def test_a_database_failure_keeps_the_journal_for_replay(tmp_path):
    from auto.errors import StoreError

    p = tmp_path / "s.db"
    Store(p).close()

    class Down:
        location = str(p)

        def ingest(self, spans, traces):
            raise StoreError("the PostgreSQL store is unreachable (simulated)")

    failed = []
    j = Journal(journal_dir(local_path(str(p))))
    w = SpanWriter(Down(), lambda n: None, lambda n, e: failed.append(n), journal=j)
    spans = [make_span() for _ in range(3)]
    w.submit(spans, [])
    w.flush()
    w.close()
    assert failed == [3] and j.path.exists() and j.path.stat().st_size > 0  # reported, and kept
    with Store(p) as st:  # the next open replays it
        assert st.replayed == 3 and sorted(s["span_id"] for s in st.spans()) == sorted(s["span_id"] for s in spans)


def test_spans_are_completed_and_redacted_before_the_journal_write_and_durable_before_written(tmp_path, monkeypatch):
    from auto.record import writer as writer_mod
    from auto.store.journal import records

    monkeypatch.setattr(writer_mod, "IDLE_S", 60.0)  # nothing is committed before the flush
    secret = "sk-live-abcdef1234567890"
    redactor = Redactor([secret])
    ingested, failed = [], []

    class Slow:
        location = str(tmp_path / "s.db")

        def ingest(self, spans, traces):
            ingested.extend(s["span_id"] for s in spans)

    j = Journal(journal_dir(local_path(str(tmp_path / "s.db"))))
    w = SpanWriter(Slow(), lambda n: None, lambda n, e: failed.append((n, type(e).__name__)), journal=j,
                   prepare=lambda sp, tr: ([redactor.redact_span(s) for s in sp], tr))
    span = make_span(output=None)

    def complete():  # what the agent's thread left for the writer to fill in
        span["output"] = f"the key is {secret}"

    def broken():
        raise RuntimeError("cannot complete")

    w.submit([span], [], complete)
    w.submit([make_span()], [], broken)
    assert w.wait_durable(30) is False  # the broken batch was dropped: not everything submitted is durable
    data = j.path.read_bytes()
    (batch,) = records(data)  # journaled, redacted, not yet written; the broken batch dropped
    assert batch["spans"][0]["output"] == f"the key is {REDACTED}" and secret.encode() not in data
    assert ingested == [] and failed == [(1, "RuntimeError")]
    assert w.flush(30) and ingested == [span["span_id"]] and j.bytes == 0
    w.close()


def test_the_calling_thread_leaves_the_reason_phrase_and_env_digests_to_the_writer(tmp_path, monkeypatch):
    # what a recorded call computes on the agent's thread is only what must be taken there:
    # httpx works out a reason phrase from an enum on each read, so it is read by the writer;
    # the environment is taken as it was at the call (a change right after it is not recorded)
    import threading

    import openai
    from openai._base_client import SyncAPIClient

    import auto
    from auto.canonical import digest

    import sys
    base = sys.modules[SyncAPIClient.__module__]
    httpx = getattr(base, "httpx", None) or base.httpx2  # the httpx the SDK was built on
    readers: list[str] = []
    real = httpx.Response.reason_phrase

    def reason_phrase(self):  # type: ignore[no-untyped-def]
        readers.append(threading.current_thread().name)
        return real.fget(self)

    monkeypatch.setattr(httpx.Response, "reason_phrase", property(reason_phrase))
    body = (b'{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
            b'"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}')
    transport = httpx.MockTransport(lambda req: httpx.Response(200, content=body,
                                                               headers={"content-type": "application/json"}))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("AUTO_RECORD_SYNC", "0")
    client = openai.OpenAI(api_key="sk-test-not-a-key", http_client=httpx.Client(transport=transport))
    main = threading.current_thread().name
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    bare = readers.count(main)  # what the SDK itself reads (its log line)
    readers.clear()
    with auto.recording(tmp_path / "s.db") as rec:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        monkeypatch.setenv("OPENAI_BASE_URL", "http://changed.example/v1")
        on_call = readers.count(main)
        rec.flush()
        spans = [s for s in rec.store.spans() if s["kind"] == "llm"]
    assert on_call == bare and len(readers) > bare, (bare, readers)
    assert spans[0]["attributes"]["auto.env_reads"]["OPENAI_BASE_URL"] == digest("http://127.0.0.1:9/v1")
    assert spans[0]["attributes"]["auto.latency_ms"] >= 0 and spans[0]["status"] == "ok"


def test_a_model_call_is_handed_over_as_one_tuple_and_its_span_made_by_the_writer(tmp_path, monkeypatch):
    # the agent's thread hands over an empty span list for each attempt (filled by the writer's
    # complete), yet a host reading Attempt.recorded on its own thread still gets status and output
    import threading

    import openai

    import auto
    from auto.record.core import Recorder
    from auto.record.model_call import Attempt

    import sys
    from openai._base_client import SyncAPIClient
    httpx = getattr(sys.modules[SyncAPIClient.__module__], "httpx2", None)
    body = (b'{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
            b'"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}')
    transport = httpx.MockTransport(lambda req: httpx.Response(200, content=body,
                                                               headers={"content-type": "application/json"}))
    monkeypatch.setenv("AUTO_RECORD_SYNC", "0")
    handed: list[tuple[str, int]] = []
    write = Recorder.write

    def spy(self, spans, traces=(), complete=None):  # type: ignore[no-untyped-def]
        handed.append((threading.current_thread().name, len(spans)))
        return write(self, spans, traces, complete)

    monkeypatch.setattr(Recorder, "write", spy)
    seen: list[Attempt] = []
    got = Attempt.got_response

    def keep(self, response):  # type: ignore[no-untyped-def]
        seen.append(self)
        return got(self, response)

    monkeypatch.setattr(Attempt, "got_response", keep)
    client = openai.OpenAI(api_key="sk-test-not-a-key", base_url="http://127.0.0.1:9/v1",
                           http_client=httpx.Client(transport=transport))
    main = threading.current_thread().name

    @auto.task("t")
    def t(q: str) -> str:
        return client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}]).choices[0].message.content

    with auto.recording(tmp_path / "s.db") as rec:
        assert t("hi") == "ok"
        early = seen[0].recorded  # read on the agent's thread, before or after the writer took it
        rec.flush()
        spans = {s["kind"]: s for s in rec.store.spans()}
    assert handed[:2] == [(main, 0), (main, 0)]  # the attempt, then the task: both made by the writer
    assert early["status"] == "ok" and early["output"]["content"] == "ok" and early["span_id"] == seen[0].span_id
    llm = spans["llm"]
    assert llm["span_id"] == seen[0].span_id and llm["parent_span_id"] == spans["task"]["span_id"]
    assert llm["status"] == "ok" and llm["output"]["content"] == "ok" and llm["attributes"]["auto.latency_ms"] >= 0
    assert spans["task"]["attributes"]["auto.llm_calls"] == 1
