"""Running an artifact that calls tools from the command line and over HTTP, as a user would:
``auto run --tools module:attribute``, ``auto serve --tools``; each mistake one line.

The agent is a small task of two tools and no model call (a read-only lookup, then an effect),
recorded twice over 60 inputs and compiled as a region in well under a second.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import auto
from auto.cli import main
from auto.compile import compile_task
from auto.errors import GateRefused
from auto.store import Store
from auto.gate import Contract

RELAXED = dict(min_witnesses=20, program_min_agreement=0.8, program_min_agreement_ci95_low=0.6)
TEAMS = {f"topic{i}": ("finance", "identity", "platform")[i % 3] for i in range(60)}
OPENED: list[str] = []

TOOLS_MODULE = '''
import test_cli_tools as T

GOOD = {"lookup_team": T.lookup_team_impl, "open_ticket": T.open_ticket_impl}
TYPO = {"lookup_tem": T.lookup_team_impl, "open_ticket": T.open_ticket_impl}

def _down(topic):
    raise ConnectionError("routing table is down")

RAISES = {"lookup_team": _down, "open_ticket": T.open_ticket_impl}
NOT_A_MAPPING = 42
EXTRA = {**GOOD, "delete_all": lambda: None}
NOT_CALLABLE = {"lookup_team": 1, "open_ticket": T.open_ticket_impl}

def factory():
    return GOOD
'''


def lookup_team_impl(topic: str) -> dict:
    return {"team": TEAMS.get(topic, "support")}


def open_ticket_impl(team: str) -> dict:
    OPENED.append(team)
    return {"opened": True, "team": team}


def _record(path, topics):
    lookup_team = auto.tool("lookup_team", effects="read")(lookup_team_impl)
    open_ticket = auto.tool("open_ticket", effects="effect")(open_ticket_impl)

    @auto.task("route")
    def route(topic: str) -> str:
        t = lookup_team(topic=topic)["team"]
        return f"opened for {open_ticket(team=t)['team']}"

    store = Store(path)
    with auto.recording(store):
        for _ in range(2):
            for topic in topics:
                route(topic=topic)
    return store


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("route")
    store = _record(tmp / "r.sqlite", [f"topic{i}" for i in range(60)])
    out = compile_task(store, "route", contract=Contract(task="route", **RELAXED), out_path=tmp / "route.wasm")
    store.close()
    (tmp / "route_tools.py").write_text(TOOLS_MODULE)
    (tmp / "boom_tools.py").write_text('raise RuntimeError("boom at import")\n')
    return tmp, out


def _run(tmp, monkeypatch, *extra):
    monkeypatch.chdir(tmp)
    return CliRunner().invoke(main, ["run", str(tmp / "route.wasm"), "--input", '{"topic": "topic4"}', *extra])


def test_the_region_compiles(compiled):
    _tmp, out = compiled
    assert out.manifest["compiled_as"] == "region"
    assert {t["name"]: t["effects"] for t in out.manifest["tools"]} == {"lookup_team": "read", "open_ticket": "effect"}


def test_auto_run_with_the_host_tools_answers_at_tier_1(compiled, monkeypatch):
    tmp, _ = compiled
    before = len(OPENED)
    for spec in ("route_tools:GOOD", "route_tools:factory"):
        res = _run(tmp, monkeypatch, "--tools", spec)
        assert res.exit_code == 0, res.output
        out = json.loads(res.output)
        assert out["tier"] == "tier-1" and out["answer"] == "opened for identity"
    assert OPENED[before:] == ["identity", "identity"]  # one effect per call


@pytest.mark.parametrize("extra, line", [
    ((), "declares tool(s) lookup_team, open_ticket, which the host does not provide (no tools were given); "
         "pass the host's tools with --tools module:attribute"),
    (("--tools", "route_tools:TYPO"), "(it provides 'lookup_tem' for 'lookup_team': a typo?)"),
    (("--tools", "route_tools:NOT_A_MAPPING"), "must be a mapping of tool name -> callable"),
    (("--tools", "route_tools:MISSING"), "has no attribute 'MISSING'"),
    (("--tools", "route_tools"), "--tools must be module:attribute"),
    (("--tools", "route_tools:EXTRA"), "the host provides tool(s) delete_all, which no served artifact declares"),
    (("--tools", "route_tools:NOT_CALLABLE"), "not so for 'lookup_team'"),
    (("--tools", "boom_tools:T"), "importing boom_tools raised RuntimeError: boom at import"),
])
def test_each_tools_mistake_is_one_line(compiled, monkeypatch, extra, line):
    tmp, _ = compiled
    before = len(OPENED)
    res = _run(tmp, monkeypatch, *extra)
    assert res.exit_code == 2, res.output
    assert line in res.output and len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert len(OPENED) == before


def test_a_tool_that_raises_declines_with_its_reason_and_no_effect(compiled, monkeypatch):
    tmp, _ = compiled
    before = len(OPENED)
    res = _run(tmp, monkeypatch, "--tools", "route_tools:RAISES")
    assert res.exit_code == 3 and "Traceback" not in res.output
    assert "tool lookup_team raised ConnectionError: routing table is down" in res.output
    assert len(OPENED) == before


def test_auto_serve_with_the_host_tools(compiled):
    from starlette.testclient import TestClient

    from auto.errors import ArgumentError
    from auto.serve import ArtifactService, ServeConfig

    tmp, out = compiled
    svc = ArtifactService(ServeConfig(artifacts=[str(tmp / "route.wasm")], tools="route_tools:GOOD", cwd=str(tmp)))
    with TestClient(svc.app) as client:
        r = client.post("/v1/tasks/route/run", json={"topic": "topic5"})
        assert r.status_code == 200 and r.json()["answer"] == "opened for platform" and r.json()["tier"] == "tier-1"
    svc.close()
    with pytest.raises(ArgumentError, match=r"\(no tools were given\); pass the host's tools with --tools"):
        ArtifactService(ServeConfig(artifacts=[str(tmp / "route.wasm")]))


def test_a_value_outside_a_tools_schema_is_the_same_refusal_in_the_gate(tmp_path):
    # 'login' (team identity) is one input recorded six times; at seed 0 it falls in the held-out
    # split, so open_ticket's recorded enum (training values) does not hold 'identity': the artifact's
    # host refuses the call, and the interpreter must refuse it the same way (not a wasm mismatch)
    TEAMS.update({"billing": "finance", "login": "identity", "crash": "platform"})
    topics = [f"topic{i}" if i % 4 else ("billing", "login", "crash")[i % 3] for i in range(40)]
    saved = dict(TEAMS)
    try:
        for i in range(40):
            TEAMS[f"topic{i}"] = "support" if i % 4 else TEAMS[f"topic{i}"]
        store = _record(tmp_path / "s.sqlite", topics)
        with pytest.raises(GateRefused) as e:
            compile_task(store, "route", contract=Contract(task="route", **RELAXED), out_path=tmp_path / "s.wasm")
        assert "region interpreter disagree" not in str(e.value) and "held-out agreement" in str(e.value)
        runs = store.eval_runs("route")
        checks = {c["name"]: c for c in runs[-1].record["checks"]}
        assert checks["wasm-matches-python-reference"]["mismatches"] == 0
        store.close()
    finally:
        TEAMS.clear()
        TEAMS.update(saved)
