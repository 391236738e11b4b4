"""Parquet export and the DuckDB census over it; OTLP/JSON import and export; bad files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from auto.census import census_store
from auto.errors import IngestError
from auto.interchange.otlp import export_otlp, import_otlp
from auto.interchange.parquet import FORMAT, InterchangeError, census_parquet, check_layout, export_parquet
from auto.store import Store


def auto(*args, code=0):
    p = subprocess.run([sys.executable, "-m", "auto.cli", *args], capture_output=True, text=True)
    assert p.returncode == code, p.stderr
    return p


@pytest.fixture(scope="module")
def export_dir(triage_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("pq")
    with Store(triage_store) as st:
        res = export_parquet(st, out)
        assert res["spans"] == len(st.spans()) and res["traces"] == 800 and res["payloads"] == st.counts()["payloads"]
    return out


def test_parquet_census_equals_the_store_census(triage_store, export_dir):
    with Store(triage_store) as st:
        assert census_parquet(export_dir, with_inputs=True).to_dict(True) == census_store(st, with_inputs=True).to_dict(True)
        assert census_parquet(export_dir, task="triage").to_dict() == census_store(st, task="triage").to_dict()
    import pyarrow.parquet as pq

    t = pq.read_table(export_dir / "spans.parquet")
    assert t.schema.metadata[b"auto.format"] == FORMAT.encode()
    row = t.slice(0, 1).to_pylist()[0]
    payloads = dict(zip(*pq.read_table(export_dir / "payloads.parquet").to_pydict().values()))
    assert json.loads(payloads[row["input_digest"]]) is not None and row["digest"].startswith("sha256:")


def test_truncated_or_foreign_parquet_is_one_line_naming_the_file(export_dir, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(export_dir, bad)
    data = (bad / "spans.parquet").read_bytes()
    (bad / "spans.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(InterchangeError, match=r"spans\.parquet: not a readable Parquet file"):
        census_parquet(bad)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"span_id": ["a"]}), bad / "spans.parquet")
    with pytest.raises(InterchangeError, match=r"spans\.parquet: layout 'unknown'"):
        check_layout(bad)
    (bad / "payloads.parquet").unlink()
    p = auto("census", "--parquet", str(bad), code=1)
    assert p.stderr.count("\n") == 1 and "error: " in p.stderr and "InterchangeError" not in p.stderr and "Traceback" not in p.stderr


def test_otlp_round_trip_keeps_every_digest(triage_store, tmp_path):
    f = tmp_path / "spans.otlp.jsonl"
    with Store(triage_store) as src, Store(tmp_path / "back.db") as dst:
        res = export_otlp(src, f)
        assert res["spans"] == len(src.spans())
        got = import_otlp(dst, f)
        assert got["spans"] == res["spans"] and got["skipped"] == 0
        assert import_otlp(dst, f)["unchanged"] == res["spans"]  # importing twice changes nothing
        assert dst.digest() == src.digest() and dst.verify().ok
        assert census_store(dst).to_dict() == census_store(src).to_dict()
    line = json.loads(f.read_text().splitlines()[0])
    attrs = {a["key"] for a in line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]}
    assert {"gen_ai.operation.name", "auto.input", "auto.span_digest"} <= attrs


def _genai_doc(n_calls=3):
    spans = [{"traceId": "5b8aa5a2d2c872e8321cf37308d69df2", "spanId": "0a1581bf3cb55c13", "name": "invoke_agent triage",
              "startTimeUnixNano": "1000", "endTimeUnixNano": "9000",
              "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                             {"key": "gen_ai.agent.name", "value": {"stringValue": "triage"}}]},
             {"traceId": "5b8aa5a2d2c872e8321cf37308d69df2", "spanId": "0b1581bf3cb55c13", "name": "GET /health",
              "startTimeUnixNano": "1000", "endTimeUnixNano": "2000"}]
    for i in range(n_calls):
        spans.append({
            "traceId": "5b8aa5a2d2c872e8321cf37308d69df2", "spanId": f"1{i}1581bf3cb55c13", "parentSpanId": "0a1581bf3cb55c13",
            "name": "chat gpt-4o", "kind": 3, "startTimeUnixNano": str(2000 + i), "endTimeUnixNano": str(3000 + i),
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
                {"key": "gen_ai.request.temperature", "value": {"doubleValue": 0.0}},
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
                {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "refund please"}]}])}},
                {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "billing"}], "finish_reason": "stop"}])}}]})
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "other-sdk"}, "spans": spans}]}]}


def test_genai_spans_from_other_instrumentation_become_witnesses(tmp_path):
    f = tmp_path / "other.json"
    f.write_text(json.dumps(_genai_doc(3)))
    with Store(tmp_path / "s.db") as st:
        res = import_otlp(st, f)
        assert res == {"spans": 4, "traces": 1, "unchanged": 0, "skipped": 1, "without_messages": 0}
        llm = st.spans(kind="llm")
        assert [s["input"] for s in llm] == [{"messages": [{"content": "refund please", "role": "user"}],
                                              "model": "gpt-4o", "temperature": 0.0}] * 3
        assert llm[0]["output"]["content"] == "billing" and llm[0]["task"] == "triage"
        assert llm[0]["attributes"]["gen_ai.usage.input_tokens"] == 12 and llm[0]["attributes"]["auto.source"] == "otlp"
        (site,) = [s for s in census_store(st).sites if s.kind == "llm"]
        assert site.spans == 3 and site.deterministic_spans == 3  # three identical calls: witnessed-deterministic
        assert st.tasks() == {"triage": 1}


def test_secrets_in_imported_spans_are_redacted_before_they_are_stored(tmp_path):
    key = "sk-abcdefghij0123456789klmnopqrstuvwxyzABCD"
    doc = _genai_doc(1)
    call = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][2]
    call["attributes"][4]["value"]["stringValue"] = json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": f"My key {key}, refund please"}]}])
    f = tmp_path / "other.json"
    f.write_text(json.dumps(doc))
    with Store(tmp_path / "s.db") as st:
        import_otlp(st, f)
        (llm,) = st.spans(kind="llm")
        assert llm["input"]["messages"][0]["content"] == "My key [REDACTED], refund please"
        assert llm["attributes"]["auto.redactions"] >= 1 and key not in json.dumps(list(st.iter_spans()))
        assert st.verify().ok


def test_bad_otlp_files_fail_whole_naming_the_record(tmp_path):
    doc = _genai_doc(2)
    text = json.dumps(doc)
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    bad_id = json.loads(text)
    bad_id["resourceSpans"][0]["scopeSpans"][0]["spans"][2]["spanId"] = "xyz"
    (tmp_path / "badid.json").write_text(json.dumps(bad_id))
    no_rs = tmp_path / "norecords.json"
    no_rs.write_text(json.dumps({"spans": []}))
    with Store(tmp_path / "s.db") as st:
        with pytest.raises(InterchangeError, match=r"cut\.json line 1: not JSON \(truncated\?\)"):
            import_otlp(st, tmp_path / "cut.json")
        with pytest.raises(InterchangeError, match=r"spans\[2\] \(span xyz\): spanId must be 16 hex digits"):
            import_otlp(st, tmp_path / "badid.json")
        with pytest.raises(InterchangeError, match="no resourceSpans"):
            import_otlp(st, no_rs)
        assert st.spans() == []  # nothing half-imported
    p = auto("store", "import", "--store", str(tmp_path / "c.db"), "--otlp", str(tmp_path / "badid.json"), code=1)
    assert p.stderr.count("\n") == 1 and "spanId" in p.stderr


@pytest.mark.parametrize("where, value", [
    (("resourceSpans", 0), "x"), (("resourceSpans", 0), 5), (("resourceSpans", 0, "scopeSpans"), 5),
    (("resourceSpans", 0, "scopeSpans"), "ab"), (("resourceSpans", 0, "scopeSpans", 0), [1]),
    (("resourceSpans", 0, "scopeSpans", 0, "spans"), True), (("resourceSpans", 0, "scopeSpans", 0, "spans", 2, "status"), "ok"),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 2, "events"), 7), (("resourceSpans", 0, "scopeSpans", 0, "spans", 2, "events"), {}),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 2, "attributes", 0, "value"), {"arrayValue": 5}),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 2, "attributes", 0, "value"), {"arrayValue": {"values": 5}}),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 2, "attributes", 0, "value"), {"kvlistValue": 5}),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 2, "attributes", 0, "value"), {"doubleValue": [1]})])
def test_a_malformed_otlp_structure_is_one_named_line(tmp_path, where, value):
    doc = _genai_doc(2)
    node = doc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    f = tmp_path / "shape.json"
    f.write_text(json.dumps(doc))
    with Store(tmp_path / "s.db") as st:
        with pytest.raises(InterchangeError, match=r"shape\.json: resourceSpans\[0\]"):
            import_otlp(st, f)
        assert st.spans() == []
    p = auto("store", "import", "--store", str(tmp_path / "c.db"), "--otlp", str(f), code=1)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr and not (tmp_path / "c.db").exists()


@pytest.mark.parametrize("key, text", [("gen_ai.input.messages", '[{"role": "user", "parts": 5}]'),
                                       ("gen_ai.system_instructions", "5")])
def test_message_attributes_of_an_odd_shape_import_without_their_text(tmp_path, key, text):
    doc = _genai_doc(1)
    attrs = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][2]["attributes"]
    attrs[:] = [a for a in attrs if a["key"] != key] + [{"key": key, "value": {"stringValue": text}}]
    f = tmp_path / "odd.json"
    f.write_text(json.dumps(doc))
    with Store(tmp_path / "s.db") as st:
        import_otlp(st, f)
        (llm,) = st.spans(kind="llm")
        assert llm["output"]["content"] == "billing"  # the answer is kept; the odd message has no text


def test_an_exported_span_whose_content_changed_is_refused(triage_store, tmp_path):
    f = tmp_path / "x.jsonl"
    with Store(triage_store) as src:
        export_otlp(src, f)
    doc = json.loads(f.read_text().splitlines()[0])
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for a in span["attributes"]:
        if a["key"] == "auto.output":
            a["value"]["stringValue"] = json.dumps("forged")
    f.write_text(json.dumps(doc) + "\n")
    with Store(tmp_path / "s.db") as st:
        with pytest.raises(IngestError, match="does not match its content"):
            import_otlp(st, f)
        assert st.spans() == []


def test_cli_export_and_census_over_parquet(triage_store, tmp_path):
    out = tmp_path / "pq"
    auto("store", "export", "--store", str(triage_store), "--format", "parquet", "--out", str(out))
    a = json.loads(auto("census", "--store", str(triage_store), "--json").stdout)
    b = json.loads(auto("census", "--parquet", str(out), "--json").stdout)
    assert a == b
    auto("store", "export", "--store", str(triage_store), code=2)
    res = json.loads(auto("store", "export", "--store", str(triage_store), "--otlp", str(tmp_path / "o.jsonl")).stdout)
    with Store(triage_store) as st:
        assert res["spans"] == st.counts()["spans"] and res["lines"] >= 1


def test_an_overlay_answer_s_fingerprint_marks_a_tier1_span():
    """A tool that dropped the ``auto.*`` attributes keeps the fingerprint: an overlay answer's
    ``auto-overlay`` is a tier-1 answer as ``auto-gen<N>`` is, never a witness."""
    from auto.interchange.genai import is_tier1

    for fp in ("auto-gen3", "auto-overlay", "auto-genNone"):
        assert is_tier1({"openai.response.system_fingerprint": fp})
    assert not is_tier1({"openai.response.system_fingerprint": "fp_44709d6fcb"})


def test_a_streamed_tier1_answer_s_span_is_known_by_its_response_id():
    """An instrumentation's span of a streamed tier-1 answer has the proxy's response id and no
    system fingerprint: it is a tier-1 answer, never a witness (it became one before)."""
    from auto.interchange.genai import is_tier1
    from auto.proxy.answer import completion_body

    body = completion_body({"model": "m", "messages": []}, "billing", 2)
    assert is_tier1({"gen_ai.response.id": body["id"], "gen_ai.request.model": "m"})
    assert not is_tier1({"gen_ai.response.id": "chatcmpl-9xYz0123456789abcdefABCD", "gen_ai.request.model": "m"})
    assert not is_tier1({"gen_ai.response.id": "chatcmpl-auto-nothex"})


def test_an_otlp_export_that_fails_leaves_nothing_and_names_the_given_path(triage_store, tmp_path, monkeypatch):
    import auto.interchange.otlp as otlp

    p = auto("store", "export", "--store", str(triage_store), "--otlp", str(tmp_path / "missing" / "o.jsonl"), code=1)
    assert p.stderr.strip() == f"error: cannot use {tmp_path / 'missing' / 'o.jsonl'}: No such file or directory"
    calls = []

    def failing(span):
        calls.append(span)
        if len(calls) > 3:
            raise RuntimeError("stop")
        return otlp_span(span)

    otlp_span = otlp.otlp_span
    monkeypatch.setattr(otlp, "otlp_span", failing)
    with Store(triage_store) as st, pytest.raises(RuntimeError):
        otlp.export_otlp(st, tmp_path / "o.jsonl", batch=2)
    assert list(tmp_path.iterdir()) == []
