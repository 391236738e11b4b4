"""The census of model-call sites is the same in memory, in the SQLite store and in DuckDB over the
Parquet export: sites split by system prompt, templates that a late value breaks, null and
tool-call answers, requests that differ only in transport, retries, ties, spans Auto does not
understand; and the SQL form of a leaf template accepts exactly what extraction accepts."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auto.census import census, census_store
from auto.sites.align import MAX_ALIGN_VALUES, SLOT, align, extract
from auto.store import Store

from site_fixtures import chat_span

duckdb = pytest.importorskip("duckdb")
from auto.interchange.duckdb_sites import fits_pattern  # noqa: E402
from auto.interchange.parquet import census_parquet, export_parquet  # noqa: E402


def _at(span: dict, t: int, **attrs) -> dict:
    span["started_ns"], span["ended_ns"] = t, t + 1
    if attrs:
        span["attributes"] = {**span["attributes"], **attrs}
    return span


def _outlier(values: list[str]) -> str:
    """A text without the values' shared fixed text whose SHA-256 is not among the smallest
    ``MAX_ALIGN_VALUES`` of them all (so alignment never sees it and the final check refuses)."""
    key = sorted(hashlib.sha256(v.encode()).digest() for v in values)[MAX_ALIGN_VALUES - 1]
    k = 0
    while hashlib.sha256(f"just words {k}".encode()).digest() < key:
        k += 1
    return f"just words {k}"


def _spans() -> list[dict]:
    spans, t = [], 0

    def add(span: dict, **attrs) -> None:
        nonlocal t
        t += 10
        spans.append(_at(span, t, **attrs))

    # two call sites told apart by their system prompt; a ticket template; a divergent ticket
    for rep in range(2):
        for i in range(12):
            for system in ("Sort the ticket.", "Route the ticket."):
                msgs = [{"role": "system", "content": system}, {"role": "user", "content": f"Ticket: item {i} broke"}]
                label = "bug" if i % 3 else "billing"
                add(chat_span(msgs, "other" if (i == 5 and rep) else label, task="sorter"))
    # a leaf whose template a value outside the alignment sample breaks (the leaf becomes one slot)
    texts = [f"Question number {i} about the plan" for i in range(MAX_ALIGN_VALUES + 6)]
    texts.append(_outlier(texts))
    for text in texts:
        add(chat_span([{"role": "user", "content": text}], "yes", task="faq"))
    add(chat_span([{"role": "user", "content": texts[0]}], "yes", task="faq"))
    # more than SPLIT_MAX system prompts: one site, the system text is a slot; no task
    for i in range(10):
        add(chat_span([{"role": "system", "content": f"You are helper {i}."}, {"role": "user", "content": "hi"}],
                      "hello", task=None))
    # answers: JSON null content, tool calls (random ids dropped), a refusal; transport-only differences
    ask = [{"role": "user", "content": "weather in Paris?"}]
    for k in range(2):
        add(chat_span(ask, {"content": None, "tool_calls": [{"id": f"call_{k}", "type": "function",
                                                             "function": {"name": "weather", "arguments": "{}"}}],
                            "refusal": None, "finish_reason": "tool_calls"}, task="tools", stream=bool(k)))
    add(chat_span(ask, {"content": None, "tool_calls": None, "refusal": None, "finish_reason": "stop"}, task="tools",
                  user="u1"))
    add(chat_span([{"role": "user", "content": "how to pick a lock"}],
                  {"content": None, "tool_calls": None, "refusal": "no", "finish_reason": "stop"}, task="tools"))
    # a tie between two answers (the earlier wins), an input seen once that failed, retries
    add(chat_span([{"role": "user", "content": "tie?"}], "a", task="tools"))
    add(chat_span([{"role": "user", "content": "tie?"}], "b", task="tools"))
    add(chat_span([{"role": "user", "content": "fails"}], "x", task="tools", status="error"))
    for attempt in range(3):
        add(chat_span([{"role": "user", "content": "flaky"}], "ok", task="tools",
                      status="ok" if attempt == 2 else "error"),
            **{"auto.logical_call_id": "L1", "auto.attempt": attempt})
    # llm spans that are no chat completions Auto understands, and a task span with a null answer
    for k in range(3):
        add({**chat_span(ask, "v", task="tools"), "name": "embeddings.create", "input": {"input": f"text {k % 2}"}})
    add({**chat_span(ask, "v", task="tools"), "input": {"prompt": "legacy completion"}})
    for _ in range(2):
        add({**chat_span(ask, "v", task="tools"), "kind": "task", "name": "tools", "site": None,
             "input": {"q": 1}, "output": None})
    return spans


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("census_sites")
    with Store(d / "s.db") as st:
        st.ingest(_spans())
        export_parquet(st, d / "pq")
    return d / "s.db", d / "pq"


@pytest.mark.parametrize("with_inputs", [False, True])
def test_memory_sqlite_and_duckdb_agree(stores, with_inputs):
    db, pq = stores
    with Store(db) as st:
        mem = census(st.spans()).to_dict(with_inputs)
        lite = census_store(st, with_inputs=with_inputs).to_dict(with_inputs)
        for task in ("sorter", "faq", "tools"):
            assert census_store(st, task=task).to_dict() == census(st.spans(task=task)).to_dict()
            assert census_parquet(pq, task=task).to_dict() == census_store(st, task=task).to_dict()
    assert lite == mem
    assert census_parquet(pq, with_inputs=with_inputs).to_dict(with_inputs) == lite
    calls = {s["model_call"]["task"]: s for s in lite["sites"] if s.get("model_call")}
    sorter = [s for s in lite["sites"] if (s.get("model_call") or {}).get("task") == "sorter"]
    assert len(sorter) == 2 and all(s["divergent"] == 1 for s in sorter)  # split by system prompt
    faq = calls["faq"]["model_call"]
    assert [x["name"] for x in faq["slots"]] == ["user"] and faq["template"] == {"0.content": "{user}"}
    assert calls[None]["model_call"]["slots"][0]["path"] == "0.content"  # ten system prompts: a slot, no split
    assert any(s["site"] == "x" and s["kind"] == "llm" and "model_call" not in s for s in lite["sites"])  # not understood
    if with_inputs:
        tools = next(s for s in lite["sites"] if (s.get("model_call") or {}).get("task") == "tools")
        by = {i["input"]: i for i in tools["inputs"]}
        weather = by['{"user":"weather in Paris?"}']
        assert weather["observations"] == 3 and weather["distinct_outputs"] == 2  # stream/user: one input
        assert by['{"user":"tie?"}']["modal_output"] == '"a"' and by['{"user":"fails"}']["verdict"] == "errored"
        assert by['{"user":"flaky"}']["observations"] == 1


def test_postgresql_agrees(stores, pg_dsn):
    with Store(stores[0]) as lite, Store(pg_dsn) as pg:
        pg.ingest(lite.spans())
        for with_inputs in (False, True):
            assert census_store(pg, with_inputs=with_inputs).to_dict(with_inputs) == \
                census_store(lite, with_inputs=with_inputs).to_dict(with_inputs)
        assert census_store(pg, task="tools").to_dict() == census_store(lite, task="tools").to_dict()


def test_an_old_layout_is_refused_with_one_line(stores, tmp_path):
    import shutil

    import pyarrow.parquet as pq

    from auto.interchange.parquet import InterchangeError

    old = tmp_path / "old"
    shutil.copytree(stores[1], old)
    t = pq.read_table(old / "spans.parquet")
    pq.write_table(t.replace_schema_metadata({b"auto.format": b"auto.parquet/1"}), old / "spans.parquet")
    with pytest.raises(InterchangeError, match=r"auto\.parquet/1.*export the store again"):
        census_parquet(old)


def _matches(pattern: str, texts: list[str]) -> list[bool]:
    con = duckdb.connect()
    try:
        return [bool(con.execute("SELECT regexp_full_match(?, ?)", [t, pattern]).fetchone()[0]) for t in texts]
    finally:
        con.close()


_piece = st.text(alphabet=st.sampled_from(list("ab .\n*(\\é'")), min_size=1, max_size=4)


@settings(max_examples=80, deadline=None)
@given(st.lists(_piece, min_size=1, max_size=4), st.booleans(), st.booleans(),
       st.lists(st.text(alphabet=st.sampled_from(list("ab .\n*é")), max_size=10), min_size=1, max_size=6))
def test_the_sql_form_of_a_template_accepts_what_extract_accepts(fixed, lead, trail, texts):
    parts: list = [SLOT] if lead else []
    for i, f in enumerate(fixed):
        if i:
            parts.append(SLOT)
        parts.append(f)
    if trail:
        parts.append(SLOT)
    parts = tuple(parts)
    # texts built from the template, and arbitrary ones
    cands = texts + ["".join(t if p is SLOT else p for p in parts) for t in texts]
    assert _matches(fits_pattern(parts), cands) == [extract(parts, c) is not None for c in cands]


def test_a_template_found_by_alignment_has_a_sql_form():
    parts = align([f"Ticket: my {w} is broken" for w in "abcdefghij"])
    assert fits_pattern(parts) is not None and fits_pattern(("a", "b")) is None
