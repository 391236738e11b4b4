"""The census classifies inputs exactly as the definitions say."""

from auto.census import DIVERGENT, ERRORED, UNWITNESSED, WITNESSED, census, render_table


def span(inp, out, status="ok", site="triage/task", kind="task", **attrs):
    return {"site": site, "task": "triage", "kind": kind, "input": inp, "output": out, "status": status,
            "attributes": attrs}


def test_verdicts_per_input():
    spans = [
        span({"t": "a"}, "billing"), span({"t": "a"}, "billing"),            # deterministic
        span({"t": "b"}, "bug"), span({"t": "b"}, "feature"), span({"t": "b"}, "bug"),  # divergent 2/3
        span({"t": "c"}, "bug"),                                             # seen once
        span({"t": "d"}, "bug"), span({"t": "d"}, None, status="error"),     # errored
    ]
    c = census(spans)
    (site,) = c.sites
    by = {i.input: i for i in site.inputs}
    assert by['{"t":"a"}'].verdict == WITNESSED
    b = by['{"t":"b"}']
    assert b.verdict == DIVERGENT and b.modal_output == '"bug"' and abs(b.modal_share - 2 / 3) < 1e-12
    assert by['{"t":"c"}'].verdict == UNWITNESSED
    assert by['{"t":"d"}'].verdict == ERRORED
    assert site.counts == {WITNESSED: 1, DIVERGENT: 1, ERRORED: 1, UNWITNESSED: 1}
    assert c.spans == 8 and c.deterministic_spans == 2
    assert c.headline == 2 / 8
    assert "headline: 2 of 8" in render_table(c)


def test_outputs_compare_canonically_and_json_text_is_accepted():
    spans = [span('{"t": "x"}', '{"b": 1, "a": 2}'), span({"t": "x"}, {"a": 2, "b": 1})]
    (site,) = census(spans).sites
    assert site.inputs[0].verdict == WITNESSED


def test_retries_count_as_one_logical_observation():
    s1 = span({"m": 1}, None, status="error", site="triage/chat/abc", kind="llm",
              **{"auto.logical_call_id": "L1", "auto.attempt": 0})
    s2 = span({"m": 1}, "ok-answer", site="triage/chat/abc", kind="llm", **{"auto.logical_call_id": "L1", "auto.attempt": 1})
    s3 = span({"m": 1}, "ok-answer", site="triage/chat/abc", kind="llm", **{"auto.logical_call_id": "L2", "auto.attempt": 0})
    (site,) = census([s1, s2, s3]).sites
    (inp,) = site.inputs
    assert inp.observations == 2 and inp.errors == 0 and inp.verdict == WITNESSED


def test_sites_are_separate_and_empty_census_has_no_headline():
    c = census([span({"t": 1}, "a", site="s1"), span({"t": 1}, "b", site="s2")])
    assert [s.site for s in c.sites] == ["s1", "s2"]
    assert all(s.inputs[0].verdict == UNWITNESSED for s in c.sites)
    assert census([]).headline is None


def test_a_call_seen_once_that_failed_is_errored_in_memory_and_in_the_store(tmp_path):
    from auto.census import census_store
    from auto.store import Store
    from test_store_scale import make_span

    spans = [make_span(inp={"t": "e"}, out=None, status="error", started_ns=1, error={"type": "E", "message": "m"}),
             make_span(inp={"t": "f"}, out="bug", started_ns=2)]
    (site,) = census(spans).sites
    assert {i.input: i.verdict for i in site.inputs} == {'{"t":"e"}': ERRORED, '{"t":"f"}': UNWITNESSED}
    with Store(tmp_path / "s.sqlite") as st:
        st.ingest(spans)
        (db_site,) = census_store(st).sites
    assert db_site.counts == site.counts == {WITNESSED: 0, DIVERGENT: 0, ERRORED: 1, UNWITNESSED: 1}
