"""Schema 3: payloads stored once by digest, the migration from schema 2, task-scoped and
incremental verification, witness sets, and the census computed in the database."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
import sqlite_utils
from hypothesis import given, settings
from hypothesis import strategies as st

from auto.census import DIVERGENT, ERRORED, UNWITNESSED, WITNESSED, census, census_store
from auto.canonical import canonical_json, digest
from auto.errors import IntegrityError
from auto.store import SCHEMA_VERSION, Store, new_span_id, new_trace_id, span_digest
from auto.store.normalize import ROW_COLUMNS, json_texts, span_text, span_text_of_values
from auto.store.payloads import DEFLATE, DEFLATE_DICT, RAW, decode, encode
from auto.store.schema import MIGRATIONS


def make_span(task="triage", inp=None, out="billing", **over) -> dict:
    s = {"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": task, "kind": "task",
         "task": task, "site": None, "started_ns": time.time_ns(), "ended_ns": time.time_ns(), "status": "ok",
         "input": inp if inp is not None else {"ticket": "refund please"}, "output": out, "error": None,
         "attributes": {}}
    s.update(over)
    return s


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(inp=json_values, out=json_values, attrs=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
       name=st.text(min_size=1, max_size=12), site=st.none() | st.text(max_size=12))
def test_assembled_span_text_is_the_canonical_json_of_the_span(inp, out, attrs, name, site):
    s = make_span(inp=inp, out=out, attributes=attrs, name=name, site=site)
    assert span_text(s, json_texts(s)) == canonical_json({f: s[f] for f in s})


@settings(max_examples=150, deadline=None)
@given(inp=json_values, out=json_values, attrs=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
       name=st.text(min_size=1, max_size=12), site=st.none() | st.text(max_size=12),
       parent=st.none() | st.just("00000000000000ab"), error=st.none() | json_values)
def test_span_text_of_a_stored_row_is_the_canonical_json_of_the_span(inp, out, attrs, name, site, parent, error):
    s = make_span(inp=inp, out=out, attributes=attrs, name=name, site=site, parent_span_id=parent, error=error)
    texts = json_texts(s)
    ids = {f: None if texts[f] is None else k for k, f in enumerate(("input", "output", "error", "attributes"))}
    row = (7, *(s[c] for c in ROW_COLUMNS[1:11]), *(ids[f] for f in ("input", "output", "error", "attributes")), "d")
    by_id = {ids[f]: texts[f] for f in ids if ids[f] is not None}
    assert span_text_of_values(row, by_id) == canonical_json({f: s[f] for f in s})


def test_payload_codecs_roundtrip_and_only_compress_when_it_pays():
    short = b'"billing"'
    assert encode(short) == (RAW, short)
    text = json.dumps({"messages": [{"role": "system", "content": "classify " * 40}]}).encode()
    codec, body = encode(text)
    assert codec == DEFLATE and len(body) < len(text) and decode(codec, body) == text
    other = text.replace(b"classify", b"categorize", 1)
    codec, body = encode(other, zdict=text)
    assert codec == DEFLATE_DICT and len(body) < 60 and decode(codec, body, text) == other
    with pytest.raises(ValueError):
        decode(DEFLATE_DICT, body)  # no dictionary
    with pytest.raises(ValueError):
        decode(DEFLATE, body[:-3])


def test_identical_values_are_stored_once_and_shared_prompts_compress(tmp_path):
    system = "You are a support triage assistant. Classify the ticket into one label. " * 6
    with Store(tmp_path / "s.db") as st:
        spans = []
        for i in range(50):
            req = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": f"ticket {i}"}]}
            spans.append(make_span(inp={"ticket": f"ticket {i}"}, out="bug"))
            spans.append(make_span(kind="llm", name="chat", site="triage/chat/x", inp=req, out={"content": "bug"}))
        st.ingest(spans)
        con = sqlite3.connect(tmp_path / "s.db")
        n_payloads, stored, size = con.execute("SELECT count(*), sum(length(body)), sum(size) FROM payloads").fetchone()
        # 50 task inputs + 50 requests + 2 outputs + 1 empty attributes object
        assert n_payloads == 103
        assert stored < size / 4  # the shared system prompt is not stored again per request
        assert [s["input"] for s in st.spans(kind="llm")][:3] == [s["input"] for s in spans if s["kind"] == "llm"][:3]
        assert st.verify().ok


def _v2_store(path, spans):
    """A store as schema 2 wrote it (the v1 and v2 steps, JSON columns as canonical text)."""
    db = sqlite_utils.Database(str(path))
    for version, step in MIGRATIONS[:2]:
        step(db)
        db["meta"].upsert({"key": "schema_version", "value": str(version)}, pk="key")
    db["meta"].upsert({"key": "format", "value": "auto.store"}, pk="key")
    for s in spans:
        row = {**s, "digest": span_digest(s)}
        for f in ("input", "output", "error", "attributes"):
            row[f] = None if s[f] is None else canonical_json(s[f])
        db["spans"].insert(row)
    db["meta"].upsert({"key": "span_count", "value": str(len(spans))}, pk="key")
    db.conn.commit()
    db.conn.close()


def test_schema_2_store_migrates_with_digests_unchanged(tmp_path):
    p = tmp_path / "old.db"
    spans = [make_span(inp={"ticket": f"t{i % 3}"}, out=["bug", "billing"][i % 2], started_ns=1000 + i,
                       attributes={"auto.logical_call_id": "L1", "auto.attempt": i} if i < 2 else {})
             for i in range(6)]
    spans.append(make_span(status="error", out=None, error={"type": "X", "message": "m"}, started_ns=2000))
    _v2_store(p, spans)
    with Store(p) as st:
        assert st.schema_version == SCHEMA_VERSION
        got = st.spans()
        assert [(s["span_id"], s["digest"]) for s in got] == [(s["span_id"], span_digest(s)) for s in spans]
        assert [s["input"] for s in got] == [s["input"] for s in spans]
        rep = st.verify()
        assert rep.ok, rep.mismatches
        con = sqlite3.connect(p)
        assert con.execute("SELECT logical_call_id, attempt FROM spans ORDER BY seq LIMIT 2").fetchall() == \
            [("L1", 0), ("L1", 1)]
        assert census_store(st, with_inputs=True).to_dict(True) == census(got).to_dict(True)


def test_verify_catches_a_tampered_payload_and_a_missing_one(tmp_path):
    p = tmp_path / "s.db"
    with Store(p) as st:
        st.ingest([make_span(inp={"ticket": f"t{i}"}) for i in range(3)])
        assert st.verify().ok
    con = sqlite3.connect(p)
    con.execute("DROP TRIGGER payloads_no_update")
    con.execute("UPDATE payloads SET body = CAST('{\"ticket\":\"forged\"}' AS BLOB), codec = 0 "
                "WHERE id = (SELECT input_id FROM spans ORDER BY seq LIMIT 1)")
    con.commit()
    con.close()
    with Store(p) as st:
        rep = st.verify()
        tables = sorted({m["table"] for m in rep.mismatches})
        assert not rep.ok and tables == ["payloads", "spans"]  # the payload, the span using it, the trigger
        assert any("payloads_no_update" in m["stored"] for m in rep.mismatches)


def test_incremental_verify_checks_only_new_rows_of_the_task(tmp_path):
    p = tmp_path / "s.db"
    with Store(p) as st:
        st.ingest([make_span(inp={"ticket": f"t{i}"}) for i in range(5)] + [make_span(task="other")])
        first = st.verify(task="triage", incremental=True)
        assert first.ok and first.spans == 5 and first.since_seq == 0 and first.scope == "task:triage"
        again = st.verify(task="triage", incremental=True)
        assert again.ok and again.spans == 0 and again.since_seq > 0
        st.ingest([make_span(inp={"ticket": "new"})])
        assert st.verify(task="triage", incremental=True).spans == 1
        new = make_span(inp={"ticket": "newer"})
        st.ingest([new])
    con = sqlite3.connect(p)
    con.execute("DROP TRIGGER spans_no_update")
    con.execute("UPDATE spans SET status = 'error' WHERE span_id = ?", [new["span_id"]])
    con.commit()
    con.close()
    with Store(p) as st:
        rep = st.verify(task="triage", incremental=True)
        assert not rep.ok and {m["id"] for m in rep.mismatches} == {new["span_id"], "*"}
        with pytest.raises(IntegrityError):
            rep.raise_for_mismatch()
        # a failed check does not move the watermark: the next one sees the bad row again
        assert not st.verify(task="triage", incremental=True).ok


def test_kind_scoped_verify_and_verified_spans(tmp_path):
    from auto.errors import ArgumentError

    p = tmp_path / "s.db"
    with Store(p) as st:
        st.ingest([make_span(inp={"ticket": f"t{i}"}) for i in range(3)]
                  + [make_span(kind="llm", name="chat", inp={"m": i}, out={"r": i}) for i in range(4)])
        assert st.span_watermark("llm")[0] == 4 and st.span_watermark("tool") == (0, 0)
        rep = st.verify(kind="llm", incremental=True)
        assert rep.ok and rep.spans == 4 and rep.scope == "kind:llm" and rep.store_digest == digest(
            [s["digest"] for s in st.spans(kind="llm")])
        assert st.verify(kind="llm", incremental=True).spans == 0
        assert st.verify(task="triage", incremental=True).spans == 7  # another scope (task spans and model calls)
        with pytest.raises(ArgumentError):
            st.verify(task="triage", kind="llm")
        assert st.verified_spans("llm") == st.spans(kind="llm")
        extra = make_span(kind="llm", name="chat", inp={"m": 9}, out={"r": 9})
        st.ingest([extra])
        assert st.verified_spans("llm") == st.spans(kind="llm")
        assert st.verify(kind="llm", incremental=True).spans == 0  # verified_spans moved the watermark
    con = sqlite3.connect(p)
    con.execute("DROP TRIGGER spans_no_update")
    con.commit()
    con.close()
    with Store(p) as st:
        with pytest.raises(IntegrityError):
            st.verified_spans("llm")


def test_verified_witness_read_checks_the_rows_it_hands_out(tmp_path):
    p = tmp_path / "s.db"
    with Store(p) as st:
        st.ingest([make_span(inp={"ticket": f"t{i}"}, started_ns=100 + i) for i in range(5)]
                  + [make_span(task="other"), make_span(kind="llm", name="chat", inp={"m": 1}, out={"r": 2})])
        plain = st.task_witnesses("triage")
        checked = st.task_witnesses("triage", verify=True)
        assert [w.span_id for w in checked[0]] == [w.span_id for w in plain[0]] and checked[1] == plain[1]
        assert [(w.input, w.output, w.input_text, w.output_text) for w in checked[0]] == \
            [(w.input, w.output, w.input_text, w.output_text) for w in plain[0]]
        # the check moved the task's watermark: an incremental verify has nothing new to read
        assert st.verify(task="triage", incremental=True).spans == 0
        new = make_span(inp={"ticket": "new"}, started_ns=200)
        st.ingest([new])
    con = sqlite3.connect(p)
    con.execute("DROP TRIGGER spans_no_update")
    con.execute("UPDATE spans SET name = 'forged' WHERE span_id = ?", [new["span_id"]])
    con.commit()
    con.close()
    with Store(p) as st:
        assert len(st.task_witnesses("triage")[0]) == 6  # no check: the changed row is read as it is
        with pytest.raises(IntegrityError, match="do not match"):
            st.task_witnesses("triage", verify=True)
        with pytest.raises(IntegrityError):  # a failed check does not move the watermark
            st.task_witnesses("triage", verify=True)


def test_witness_set_names_the_witnesses_a_compile_read(tmp_path):
    with Store(tmp_path / "s.db") as st:
        st.ingest([make_span(inp={"ticket": f"t{i}"}, started_ns=100 + i) for i in range(4)])
        ws, _ = st.task_witnesses("triage")
        d = st.put_witness_set("triage", ws)
        assert d == digest([w.digest for w in ws]) and st.put_witness_set("triage", ws) == d
        st.ingest([make_span(inp={"ticket": "later"}, started_ns=50)])  # later rows are not in the set
        back = st.witness_set(d)
        assert [w.span_id for w in back] == [w.span_id for w in ws]
        assert st.witness_set("sha256:" + "0" * 64) is None


def _census_spans():
    t = 0

    def sp(inp, out, status="ok", site="triage/chat/s", kind="llm", **attrs):
        nonlocal t
        t += 1
        return make_span(inp=inp, out=out, status=status, site=site, kind=kind, name="chat", started_ns=t,
                         error={"type": "E", "message": "m"} if status == "error" else None,
                         attributes=attrs)

    return [
        sp({"m": 1}, "a"), sp({"m": 1}, "a"),                                   # deterministic
        sp({"m": 2}, "a"), sp({"m": 2}, "b"),                                   # divergent, a tie
        sp({"m": 3}, "a"), sp({"m": 3}, None, status="error"),                 # errored
        sp({"m": 4}, "a"),                                                      # once
        sp({"m": 5}, None, status="error", **{"auto.logical_call_id": "L", "auto.attempt": 0}),
        sp({"m": 5}, "c", **{"auto.logical_call_id": "L", "auto.attempt": 1}),  # a retry: one observation
        sp({"m": 5}, "c", **{"auto.logical_call_id": "M", "auto.attempt": 0}),
        make_span(inp={"t": 1}, out="x", started_ns=100), make_span(inp={"t": 1}, out="x", started_ns=101),
    ]


def test_census_in_the_database_equals_the_census_in_memory(tmp_path):
    spans = _census_spans()
    with Store(tmp_path / "s.db") as st:
        st.ingest(spans)
        mem = census(st.spans())
        db = census_store(st, with_inputs=True)
        assert db.to_dict(True) == mem.to_dict(True)
        llm = db.site("triage/chat/s")
        by = {i.input: i for i in llm.inputs}
        assert by['{"m":1}'].verdict == WITNESSED and by['{"m":2}'].verdict == DIVERGENT
        assert by['{"m":2}'].modal_output == '"a"'  # the tie goes to the earliest-recorded output
        assert by['{"m":3}'].verdict == ERRORED and by['{"m":4}'].verdict == UNWITNESSED
        assert by['{"m":5}'].observations == 2 and by['{"m":5}'].verdict == WITNESSED
        lean = census_store(st)  # without inputs: the same counts, no per-input rows kept
        assert lean.to_dict() == mem.to_dict() and lean.sites[0].inputs is None
        assert census_store(st, task="triage").to_dict() == census(st.spans(task="triage")).to_dict()


def test_census_of_the_recorded_triage_store_is_unchanged(triage_store):
    with Store(triage_store) as st:
        assert census_store(st, with_inputs=True).to_dict(True) == census(st.spans()).to_dict(True)


def test_journaled_batches_of_a_dead_writer_are_replayed_at_open(tmp_path):
    import os

    from auto.store import local_path
    from auto.store.journal import Journal, journal_dir

    p = tmp_path / "s.db"
    Store(p).close()
    j = Journal(journal_dir(local_path(str(p))))
    batch = [make_span(inp={"ticket": f"j{i}"}) for i in range(3)]
    j.append(batch[:2], [])
    j.append(batch[2:], [])
    with open(j.path, "ab") as f:
        f.write(b"AJ1\xff\x00\x00\x00{torn")  # the kill cut the last record short
    with Store(p) as st:  # the writer still holds its lock: nothing is replayed
        assert st.replayed == 0 and st.spans() == []
    os.close(j._fd)  # the writer dies without removing its journal
    with Store(p) as st:
        assert st.replayed == 3 and sorted(s["span_id"] for s in st.spans()) == sorted(s["span_id"] for s in batch)
        assert st.verify().ok
    assert not any(journal_dir(local_path(str(p))).iterdir())


def _site_spans() -> list[dict]:
    """Model calls of two call sites (two system prompts) with repeats, a divergent and a failed
    input, SDK retries of one call, and an llm span that is no chat completion."""
    from site_fixtures import WORDS, chat_span, label_of, ticket_messages

    spans, t = [], 0
    for rep in range(2):
        for w in WORDS:
            for system in ("You sort tickets. Answer with one label.", "You route tickets. Answer with one team."):
                msgs = [{"role": "system", "content": system}, ticket_messages(w)[1]]
                out = label_of(w) if not (w == "crash" and rep) else "other"
                s = chat_span(msgs, out, task="sorter", status="error" if (w == "login" and rep) else "ok")
                t += 10
                s["started_ns"], s["ended_ns"] = t, t + 1
                spans.append(s)
    lid = "call-1"
    for attempt in range(3):
        s = chat_span(ticket_messages("upload"), "bug", task="sorter", status="ok" if attempt == 2 else "error")
        t += 10
        s["started_ns"], s["ended_ns"] = t, t + 1
        s["attributes"] = {**s["attributes"], "auto.logical_call_id": lid, "auto.attempt": attempt}
        spans.append(s)
    for k in range(3):
        t += 10
        spans.append({**chat_span(ticket_messages("x"), "y", task="sorter"), "name": "embeddings.create",
                      "input": {"input": f"text {k % 2}"}, "started_ns": t, "ended_ns": t + 1})
    return spans


def test_the_database_census_of_model_call_sites_equals_the_census_of_records(tmp_path):
    spans = _site_spans()
    with Store(tmp_path / "s.db") as st:
        st.ingest(spans)
        got = census_store(st, with_inputs=True).to_dict(True)
        want = census(st.spans()).to_dict(True)
        assert census_store(st, task="sorter").to_dict() == census(st.spans(task="sorter")).to_dict()
    assert got == want
    sites = {s["site"]: s for s in got["sites"]}
    assert sum(1 for s in sites if s.startswith("site:")) == 2  # the system prompts split the call site
    assert any(s["model_call"]["requests"] == 27 for s in got["sites"] if s.get("model_call"))  # retries counted
    assert "sorter/embeddings.create" in sites or any(s["kind"] == "llm" and not s.get("model_call") for s in got["sites"])


def test_a_witness_built_from_a_row_equals_one_built_by_its_constructor():
    from auto.store import Witness

    fields = dict(input={"t": 1}, output="x", status="ok", error=None, trace_id="t" * 32, span_id="s" * 16,
                  started_ns=5, digest="sha256:0", attributes={"k": 1}, seq=3, input_text='{"t":1}', output_text='"x"')
    a, b = Witness(**fields), Witness.of_row(**fields)
    assert a == b and repr(a) == repr(b) and b.input_text == '{"t":1}' and b.seq == 3
    with pytest.raises(AttributeError):
        b.status = "error"  # still frozen


def test_bulk_load_writes_the_same_store_and_restores_the_connection(tmp_path):
    spans = [make_span(inp={"ticket": f"t{i % 7}"}, attributes={"n": i}) for i in range(300)]
    with Store(tmp_path / "bulk.db") as bulk, Store(tmp_path / "plain.db") as plain:
        conn = bulk._conn._database().conn
        before = [conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("cache_size", "wal_autocheckpoint")]
        with bulk.bulk_load(cache_mib=8, checkpoint_mib=1) as st:
            assert conn.execute("PRAGMA cache_size").fetchone()[0] == -8 * 1024
            for k in range(0, 300, 100):
                st.ingest(spans[k:k + 100])
        assert [conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("cache_size", "wal_autocheckpoint")] == before
        assert (tmp_path / "bulk.db-wal").stat().st_size == 0  # checkpointed and truncated at the end
        plain.ingest(spans)
        assert bulk.digest() == plain.digest() and bulk.counts() == plain.counts() and bulk.verify().ok
        # payload ids numbered by the SQLite writer: shared values stored once, each id resolves
        assert bulk.counts()["payloads"] == 7 + 300 + 1
        assert [s["input"] for s in bulk.spans()] == [s["input"] for s in plain.spans()]


def test_fresh_trace_ids_start_with_the_time():
    a = new_trace_id()
    time.sleep(0.003)
    b = new_trace_id()
    assert len(a) == 32 and int(a, 16) >= 0 and a < b
    assert abs(int(a[:12], 16) - time.time_ns() // 1_000_000) < 60_000  # ms since the epoch, then random
    assert len({new_trace_id()[12:] for _ in range(100)}) == 100
