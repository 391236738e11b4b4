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
    # the long phase says what it is doing: which rung is tried, of how many
    import re

    rungs = re.search(r"10 witnesses of " + re.escape(site) + r"; rungs to try: ([a-z, ]+)\n", p.stderr)
    assert rungs, p.stderr
    names = rungs.group(1).split(", ")
    assert names[-1] == "memo" and f"trying the memo rung ({len(names)} of {len(names)})" in p.stderr


# ----------------------------------------------------------------------------- auto record, another Python

AGENT = """
import openai, os
c = openai.OpenAI(base_url=os.environ["UPSTREAM"], api_key="sk-test-not-a-key", max_retries=0)
print(c.chat.completions.create(model="m-1", messages=[{"role": "user", "content": "refund"}]).choices[0].message.content)
"""


def _venv(where: Path, python: str) -> Path:
    subprocess.run([python, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True, timeout=120)
    return where / "bin" / "python"


def test_record_a_child_in_another_virtual_environment(tmp_path):
    from upstreams import ScriptedUpstream

    base = getattr(sys, "_base_executable", sys.executable)
    py = _venv(tmp_path / "venv", base)  # same version, none of Auto's packages
    bare = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    assert subprocess.run([str(py), "-c", "import openai"], capture_output=True, env=bare).returncode != 0
    (tmp_path / "agent.py").write_text(AGENT)
    with ScriptedUpstream("tickets") as up:
        p = subprocess.run([*AUTO, "record", "--store", str(tmp_path / "r.db"), "--", str(py), str(tmp_path / "agent.py")],
                           capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                            "UPSTREAM": up.base_url})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "billing"
    with Store(tmp_path / "r.db") as st:
        assert len(st.spans(kind="llm")) == 1


def test_record_with_a_python_that_cannot_load_the_recorder_is_one_line(tmp_path):
    """A child interpreter whose environment breaks one of the recorder's imports (here a module
    of its own shadows ``sqlite_utils``: the child's packages come first) is refused in one line,
    before the child runs."""
    base = getattr(sys, "_base_executable", sys.executable)
    py = _venv(tmp_path / "venv", base)
    (site,) = (tmp_path / "venv" / "lib").glob("python*/site-packages")
    (site / "sqlite_utils.py").write_text("raise ImportError('this environment has its own sqlite_utils')\n")
    p = subprocess.run([*AUTO, "record", "--store", str(tmp_path / "r.db"), "--", str(py), "-c", "print('ran')"],
                       capture_output=True, text=True, timeout=300)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 1 and len(lines) == 1, p.stderr
    assert "cannot load the recorder (ImportError: this environment has its own sqlite_utils)" in lines[0]
    assert "pip install auto" in lines[0] and "ran" not in p.stdout  # checked before the child ran


def test_record_a_child_of_another_virtual_environment_started_through_a_shell(tmp_path):
    """The other environment's Python need not be the command itself: started by a shell (a
    script, ``make``, a shebang), a Python of this version borrows Auto's packages too."""
    from upstreams import ScriptedUpstream

    base = getattr(sys, "_base_executable", sys.executable)
    py = _venv(tmp_path / "venv", base)
    (tmp_path / "agent.py").write_text(AGENT)
    with ScriptedUpstream("tickets") as up:
        p = subprocess.run([*AUTO, "record", "--store", str(tmp_path / "r.db"), "--", "sh", "-c",
                            f'"{py}" "{tmp_path / "agent.py"}"'],
                           capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                            "UPSTREAM": up.base_url})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "billing" and "Traceback" not in p.stderr
    with Store(tmp_path / "r.db") as st:
        assert len(st.spans(kind="llm")) == 1


def test_census_of_a_task_in_a_store_of_untasked_calls_names_its_sites(tmp_path):
    """Calls recorded outside any task (the proxy's, an import without an agent span) have no
    task to name: the line names the model-call sites instead, which ``--site`` takes."""
    path = tmp_path / "untasked.db"
    with Store(path) as st:
        import_otlp(st, FIXTURES / "otlp-openai-v2.json")
    census = json.loads(auto("census", "--store", str(path), "--json", code=0).stdout)
    (site,) = [s["site"] for s in census["sites"] if s["site"].startswith("site:")]
    p = auto("census", "--store", str(path), "--task", "triage", code=2)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no task 'triage'" in lines[0] and "tasks recorded: none" in lines[0], lines
    assert f"model-call sites: {site}" in lines[0] and "--site" in lines[0]
