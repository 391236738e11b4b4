"""A new user's first hour: mistakes get one line that says what to do, refusals read as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from auto.interchange.otlp import import_otlp
from auto.store import Store

FIXTURES = Path(__file__).parent / "dialects"
AUTO = [sys.executable, "-m", "auto.cli"]


def auto(*args: str, code: int) -> subprocess.CompletedProcess:
    p = subprocess.run([*AUTO, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == code, p.stderr
    return p


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The ten ticket calls seen by one instrumentation (each input once), inside a task."""
    path = tmp_path_factory.mktemp("first") / "s.db"
    doc = json.loads((FIXTURES / "otlp-openai-v2.json").read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    agent = {"traceId": spans[0]["traceId"], "spanId": "00000000000000aa", "name": "invoke_agent triage",
             "startTimeUnixNano": spans[0]["startTimeUnixNano"], "endTimeUnixNano": spans[0]["endTimeUnixNano"],
             "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                            {"key": "gen_ai.agent.name", "value": {"stringValue": "triage"}}]}
    f = path.parent / "with-agent.json"
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"] = [agent, *spans]
    f.write_text(json.dumps(doc))
    with Store(path) as st:
        import_otlp(st, f)
    return path


def test_census_of_a_task_typo_names_the_recorded_tasks(store):
    p = auto("census", "--store", str(store), "--task", "triag", code=2)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no task 'triag'" in lines[0] and "tasks recorded: triage" in lines[0]
    assert p.stdout == ""
    auto("census", "--store", str(store), "--task", "triage", code=0)


def test_compile_json_prints_the_refusal_as_json(store):
    census = json.loads(auto("census", "--store", str(store), "--json", code=0).stdout)
    (site,) = [s["site"] for s in census["sites"] if s["site"].startswith("site:")]
    p = auto("compile", "--store", str(store), "--site", site, "--json", "--out", str(store.parent / "x.wasm"),
             code=3)
    out = json.loads(p.stdout)
    assert out["verdict"] == "refuse" and out["task"] == site
    assert "memo refused" in out["reason"] and out["eval_run_id"].startswith("sha256:")
    assert "refused:" in p.stderr and not (store.parent / "x.wasm").exists()
