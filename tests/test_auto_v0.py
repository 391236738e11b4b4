"""``auto store import --format auto-v0``: the reference system's SDK trace files (JSON Lines,
trace format v0) import, census and compile; a malformed file is one line and writes nothing.

The files are written here line by line as the format's specification describes them (a header
line, span lines written when each span closes — a parent after its children — and a
``task_output`` line; canonical JSON, as that SDK writes), with the same ticket requests the
other site tests record, so the imported site can be compared with the recorded one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from auto.sites import discover, store_sites
from auto.store import Store

from site_fixtures import label_of, site_words, ticket_call, ticket_messages

AUTO = [sys.executable, "-m", "auto.cli"]
TASK = "triage"


def auto(*args: str, code: int = 0) -> subprocess.CompletedProcess:
    p = subprocess.run([*AUTO, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == code, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p


def _line(obj: dict) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def v0_trace(n: int, word: str, *, task_output: bool = True) -> list[str]:
    """One run: header (with the task input), a structural ``step`` span around an ``env_read``
    and a ``model_call`` whose input is the chat request, then the task output."""
    tid = f"{n:032x}"
    t0 = 1_700_000_000_000 + 1000 * n
    head = {"v": 0, "t": "trace", "trace_id": tid, "task": TASK, "started_at_ms": t0, "sdk": "auto-sdk-python/0.1.0",
            "attrs": {}, "task_input": {"ticket": word}}
    body = {"model": "m-1", "messages": ticket_messages(word)}
    common = {"v": 0, "t": "span", "trace_id": tid, "error": None, "attrs": {}}
    env = {**common, "span_id": 2, "parent_span_id": 1, "seq": 2, "kind": "env_read", "name": "REGION", "input": {},
           "output": None, "started_at_ms": t0 + 1, "duration_ms": 0}
    call = {**common, "span_id": 3, "parent_span_id": 1, "seq": 3, "kind": "model_call", "name": "gpt-4o-mini",
            "input": body, "output": label_of(word), "started_at_ms": t0 + 2, "duration_ms": 40,
            "attrs": {"cost_usd_micros": "12", "tokens": "21"}}
    step = {**common, "span_id": 1, "parent_span_id": None, "seq": 1, "kind": "span", "name": "step", "input": {},
            "output": None, "started_at_ms": t0, "duration_ms": 45}
    lines = [_line(head), _line(env), _line(call), _line(step)]
    if task_output:
        lines.append(_line({"v": 0, "t": "task_output", "trace_id": tid, "output": label_of(word),
                            "recorded_at_ms": t0 + 50}))
    return lines


@pytest.fixture()
def v0_files(tmp_path) -> list[Path]:
    """Each word twice, one trace per file (as the SDK writes them), the last run without a task output."""
    files = []
    words = site_words()
    for n, w in enumerate(words + words, 1):
        f = tmp_path / f"run-{n}.jsonl"
        f.write_text("\n".join(v0_trace(n, w, task_output=n != 2 * len(words))) + "\n", encoding="utf-8")
        files.append(f)
    return files


def test_auto_v0_files_import_census_and_compile_to_the_recorded_site(v0_files, tmp_path):
    store = tmp_path / "v0.sqlite"
    res = json.loads(auto("store", "import", "--store", str(store), "--format", "auto-v0", *map(str, v0_files)).stdout)
    words = site_words()
    n = 2 * len(words)
    # per run: the env_read and the model call; a task span for each run with input and output
    assert res["spans"] == 2 * n + (n - 1) and res["skipped"] == n and res["traces"] == n
    # the model-call site is the one the same requests recorded by the recorder give
    recorded = discover([ticket_call(w, label_of(w), task=TASK) for w in words for _ in range(2)])
    with Store(store, create=False) as st:
        sites = store_sites(st)
        assert set(sites) == set(recorded.sites)
        (call,) = [s for s in st.spans(kind="llm")][:1]
        assert call["name"] == "chat.completions" and call["output"]["content"] in ("billing", "bug")
        assert call["attributes"]["auto.cost_usd_micros"] == 12 and call["attributes"]["auto.source"] == "auto-v0"
        assert call["parent_span_id"] is not None  # hangs from the run's task span (the structural step is left out)
        (task_span,) = [s for s in st.spans(kind="task") if s["span_id"] == call["parent_span_id"]]
        assert task_span["task"] == TASK and task_span["input"] == {"ticket": task_span["input"]["ticket"]}
    census = json.loads(auto("census", "--store", str(store), "--json").stdout)
    by_site = {s["site"]: s for s in census["sites"]}
    (sid,) = recorded.sites
    assert by_site[sid]["distinct_inputs"] == len(words) and by_site[sid]["deterministic_input_fraction"] == 1.0
    assert by_site[sid]["spans"] == by_site[sid]["deterministic_spans"] == 2 * len(words)
    # the task: every run with its input and output is one witness (the last run, without output, is none)
    (task_row,) = [s for s in census["sites"] if s["kind"] == "task"]
    assert task_row["task"] == TASK and task_row["spans"] == 2 * len(words) - 1
    out = tmp_path / "site.wasm"
    auto("compile", "--store", str(store), "--site", sid, "--out", str(out), "--no-program")
    w = words[0]
    from auto.sites import Site
    from auto_runtime import Artifact, TieredTask

    art = Artifact.load(out)
    inp = Site.from_manifest(art.manifest["site"]).extract({"model": "m-1", "messages": ticket_messages(w)})
    res1 = TieredTask(art, reference=None)(inp)
    assert res1.tier == "tier-1" and res1.answer == label_of(w)
    # importing the same files again changes nothing
    again = json.loads(auto("store", "import", "--store", str(store), "--format", "auto-v0", *map(str, v0_files)).stdout)
    assert again["spans"] == 0 and again["unchanged"] == res["spans"]


@pytest.mark.parametrize("damage, needle", [
    (lambda ls: ls[1:], "before the trace's header line"),
    (lambda ls: [ls[0].replace('"v":0', '"v":1', 1), *ls[1:]], "expected 0"),
    (lambda ls: [*ls[:2], ls[2].replace('"model_call"', '"oracle"'), *ls[3:]], "unknown span kind 'oracle'"),
    (lambda ls: [*ls[:-1], ls[-1][: len(ls[-1]) // 2]], "not JSON (truncated?)"),
    (lambda ls: [ls[0], ls[1], ls[1], *ls[2:]], "appears twice"),
    (lambda ls: [*ls, ls[-1]], "a second task_output line"),
])
def test_a_malformed_v0_file_is_one_line_and_writes_nothing(tmp_path, damage, needle):
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join(damage(v0_trace(1, "refund 0"))) + "\n", encoding="utf-8")
    store = tmp_path / "none.sqlite"
    p = auto("store", "import", "--store", str(store), "--format", "auto-v0", str(f), code=1)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0] and str(f) in lines[0], p.stderr
    assert not store.exists()


def test_import_options_are_checked(tmp_path):
    f = tmp_path / "a.jsonl"
    f.write_text("\n".join(v0_trace(1, "refund 0")) + "\n")
    for args in ([], ["--format", "auto-v0"], ["--otlp", str(f), "--format", "auto-v0", str(f)]):
        p = auto("store", "import", "--store", str(tmp_path / "s.sqlite"), *args, code=2)
        assert "usage error" in p.stderr or "Usage" in p.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_the_wrong_format_says_which_option_reads_it(tmp_path):
    f = tmp_path / "run.jsonl"
    f.write_text("\n".join(v0_trace(1, "refund 0")) + "\n")
    p = auto("store", "import", "--store", str(tmp_path / "s.sqlite"), "--otlp", str(f), code=1)
    assert "import it with --format auto-v0" in p.stderr and not (tmp_path / "s.sqlite").exists()
    otlp = Path(__file__).parent / "dialects" / "otlp-openai-v2.json"
    p = auto("store", "import", "--store", str(tmp_path / "s.sqlite"), "--format", "auto-v0", str(otlp), code=1)
    assert "import it with --otlp" in p.stderr and not (tmp_path / "s.sqlite").exists()
