"""The CLI as a user meets it: commands, outputs, exit codes 0/1/2/3, clear errors."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from auto.store import SCHEMA_VERSION

AUTO = [sys.executable, "-m", "auto.cli"]


def auto(*args: str, check_code: int | None = 0, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([*AUTO, *args], capture_output=True, text=True, timeout=300, **kw)
    if check_code is not None:
        assert p.returncode == check_code, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p


def test_help_lists_every_command():
    out = auto("--help").stdout
    for cmd in ("record", "census", "compile", "run", "inspect", "store"):
        assert cmd in out
    for cmd in ("record", "census", "compile", "run", "inspect", "store"):
        assert "Usage" in auto(cmd, "--help").stdout


PLUGIN = '''
import click

from auto.errors import GateRefused, UsageError


@click.command()
@click.option("--fail", type=click.Choice(["usage", "refused"]), default=None)
def hello(fail):
    """Say hello (a test plugin)."""
    if fail == "usage":
        raise UsageError("bad hello")
    if fail == "refused":
        raise GateRefused("no hello today", "sha256:" + "0" * 64)
    click.echo("hello from a plugin")


not_a_command = 42
'''


@pytest.fixture()
def plugin_env(tmp_path):
    """A distribution on PYTHONPATH whose ``auto.commands`` entry points are one good command, one
    that fails to import, one that is not a command and one that takes a built-in name."""
    root = tmp_path / "plugins"
    info = root / "auto_test_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: auto-test-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[auto.commands]\nhello = auto_test_plugin:hello\n"
                                           "broken = auto_test_plugin_missing:cmd\n"
                                           "notcmd = auto_test_plugin:not_a_command\n"
                                           "census = auto_test_plugin:hello\n")
    (root / "auto_test_plugin.py").write_text(PLUGIN)
    return {**os.environ, "PYTHONPATH": str(root)}


def test_plugin_commands_come_from_the_entry_point_group(plugin_env):
    from auto.cli import PLUGIN_GROUP

    assert PLUGIN_GROUP == "auto.commands"
    p = auto("hello", env=plugin_env)
    assert p.stdout.strip() == "hello from a plugin"
    warnings = p.stderr.strip().splitlines()
    assert len(warnings) == 3 and all(w.startswith("warning: plugin command ") for w in warnings), p.stderr
    assert any("'broken'" in w and "failed to load: ModuleNotFoundError" in w for w in warnings)
    assert any("'notcmd'" in w and "not a click command" in w for w in warnings)
    assert any("'census'" in w and "the name is taken" in w for w in warnings)
    assert "Traceback" not in p.stderr
    assert "hello" in auto("--help", env=plugin_env).stdout
    # a built-in command does not load the plugins (no warning), and keeps its own meaning
    p = auto("census", "--help", env=plugin_env)
    assert "determinism census" in p.stdout and p.stderr == ""
    # the product converts the plugin's errors, with the documented exit codes
    p = auto("hello", "--fail", "usage", env=plugin_env, check_code=2)
    assert "usage error: bad hello" in p.stderr
    p = auto("hello", "--fail", "refused", env=plugin_env, check_code=3)
    assert "refused: no hello today" in p.stderr and "eval run: sha256:" in p.stderr
    p = auto("broken", env=plugin_env, check_code=2)
    assert "No such command" in p.stderr and "Traceback" not in p.stderr


def test_without_plugins_an_unknown_command_is_a_usage_error(monkeypatch):
    from click.testing import CliRunner

    import auto.cli as cli

    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    monkeypatch.setattr(cli.main, "_plugins", None)
    res = CliRunner().invoke(cli.main, ["bench", "run", "triage"])
    assert res.exit_code == 2 and "No such command 'bench'" in res.output
    assert "bench" not in CliRunner().invoke(cli.main, ["--help"]).output


def test_usage_errors_exit_2(tmp_path):
    assert auto("compile", check_code=2).returncode == 2          # missing options
    assert auto("nonexistent-command", check_code=2).returncode == 2
    p = auto("census", "--store", str(tmp_path / "missing.sqlite"), check_code=2)
    assert "does not exist" in p.stderr


def test_census_table_and_json(triage_store):
    table = auto("census", "--store", str(triage_store)).stdout
    assert "headline:" in table and "triage/triage" in table
    data = json.loads(auto("census", "--store", str(triage_store), "--json").stdout)
    assert data["spans"] > 0 and 0.5 < data["headline"] <= 1.0
    task_site = next(s for s in data["sites"] if s["kind"] == "task")
    assert task_site["distinct_inputs"] == 400


def test_compile_inspect_run(triage_store, tmp_path):
    out = tmp_path / "t.wasm"
    p = auto("compile", "--store", str(triage_store), "--task", "triage", "--out", str(out), "--json")
    summary = json.loads(p.stdout)
    assert summary["verdict"] == "pass" and out.exists()
    assert summary["artifact_bytes"] == out.stat().st_size
    info = json.loads(auto("inspect", str(out), "--json").stdout)
    assert info["id"] == summary["artifact_id"] and info["imports"] == []
    assert set(info["exports"]) >= {"memory", "alloc", "run", "run_batch"}
    m = info["manifest"]
    assert m["task"] == "triage" and m["guard"]["method"] == "stack"
    assert [c["method"] for c in m["guard"]["components"]] == ["conformal-novelty", "selective-risk"]
    assert m["eval_runs"] == [summary["eval_run_id"]]
    assert m["parity"]["heldout"]["n"] > 0 and m["parity"]["heldout"]["ci95_low"] is not None
    human = auto("inspect", str(out)).stdout
    assert "artifact   sha256:" in human and "guard      stack" in human
    assert "epsilon 0.05  delta 0.1" in human and "smallest certifiable epsilon" in human and "held-out" in human
    r = json.loads(auto("run", str(out), "--input", json.dumps({"ticket": "I was charged twice for my subscription, please refund me."})).stdout)
    assert r["tier"] == "tier-1" and r["answer"] == "billing" and r["latency_us"] > 0
    # garbage far from every witness: the guard declines; with no reference → exit 3
    p = auto("run", str(out), "--input", json.dumps({"ticket": "zzqx 9911 ¤¤¤ qqqq wwww"}), check_code=3)
    assert json.loads(p.stdout)["tier"] == "declined" and "declined" in p.stderr
    # input that violates the manifest's input schema, no reference to deopt to → one usage line, exit 2
    p = auto("run", str(out), "--input", json.dumps({"ticket": 5}), check_code=2)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("usage error: --input does not fit the artifact's input schema: ")
    assert "$.ticket" in p.stderr and "InputSchemaError" not in p.stderr and p.stdout == ""
    auto("run", str(out), "--input", "not json", check_code=2)
    # a recorded id that does not match the bytes
    p = auto("run", str(out), "--input", "{}", "--id", "sha256:" + "0" * 64, check_code=1)
    assert p.stderr.startswith("error: ") and "artifact id is sha256:" in p.stderr
    assert "ArtifactIdMismatch" not in p.stderr  # plain words, no class name


def test_compile_refusal_exits_3_and_stores_eval_run(triage_store, tmp_path):
    contract = tmp_path / "strict.toml"
    contract.write_text('[contract]\ngate = "agreement"\nmin_agreement = 0.985\nmin_agreement_ci95_low = 0.5\n')
    p = auto("compile", "--store", str(triage_store), "--task", "triage", "--contract", str(contract),
             "--out", str(tmp_path / "no.wasm"), "--no-memo", check_code=3)
    assert "refused:" in p.stderr and "eval run: sha256:" in p.stderr
    assert not (tmp_path / "no.wasm").exists()
    # by default a refused specialist falls back to the exact-match memo of the witnessed inputs
    p = auto("compile", "--store", str(triage_store), "--task", "triage", "--contract", str(contract),
             "--out", str(tmp_path / "memo.wasm"), "--json")
    assert json.loads(p.stdout)["compiled_as"] == "memo" and "specialist refused" in p.stderr


def test_a_guard_that_would_deopt_everything_is_a_refusal(triage_store, tmp_path):
    contract = tmp_path / "tiny-eps.toml"
    contract.write_text("[contract]\nepsilon = 0.001\n")
    p = auto("compile", "--store", str(triage_store), "--task", "triage", "--contract", str(contract),
             "--out", str(tmp_path / "no.wasm"), "--no-memo", "--no-program", check_code=3)
    assert "the guard would deopt every input outside the table" in p.stderr
    assert not (tmp_path / "no.wasm").exists()


def test_bad_files_give_clear_errors(tmp_path):
    notdb = tmp_path / "x.sqlite"
    notdb.write_bytes(b"this is not a database at all" * 10)
    p = auto("census", "--store", str(notdb), check_code=1)
    assert "is not an Auto store" in p.stderr and "NotAStore" not in p.stderr  # plain words, no class name
    assert notdb.read_bytes().startswith(b"this is not")  # nothing lost
    bad = tmp_path / "bad.wasm"
    bad.write_bytes(b"\x00asm\x01\x00\x00\x00garbage")
    p = auto("inspect", str(bad), check_code=1)
    assert "malformed WebAssembly" in p.stderr or "manifest" in p.stderr
    newer = tmp_path / "newer.sqlite"
    auto("store", "info", "--store", str(newer), check_code=2)  # does not exist
    from auto.store import Store

    Store(newer).close()
    con = sqlite3.connect(newer)
    con.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    p = auto("store", "info", "--store", str(newer), check_code=1)
    assert "has schema version 999" in p.stderr and "upgrade Auto" in p.stderr


def test_store_verify_detects_tampering(triage_store, tmp_path):
    import shutil

    copy = tmp_path / "copy.sqlite"
    shutil.copy(triage_store, copy)
    auto("store", "verify", "--store", str(copy))
    info = json.loads(auto("store", "info", "--store", str(copy)).stdout)
    assert info["schema_version"] == SCHEMA_VERSION and info["tasks"]["triage"] == 800
    con = sqlite3.connect(copy)
    con.execute("DROP TRIGGER IF EXISTS spans_no_update")
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    con.execute("UPDATE spans SET task = 'tampered' WHERE seq = (SELECT min(seq) FROM spans WHERE kind = 'task')")
    con.commit()
    con.close()
    p = auto("store", "verify", "--store", str(copy), check_code=1)
    assert "do not match" in p.stderr


def test_record_a_child_process_without_code_change(tmp_path, sim_env):
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import openai\n"
        "c = openai.OpenAI()\n"
        "for t in ['refund my double charge', 'the app crashes on start']:\n"
        "    r = c.chat.completions.create(model='auto-sim-1', temperature=0, messages=[\n"
        "        {'role': 'system', 'content': '[auto-bench:triage] Classify the ticket: billing, bug, feature, account, shipping, security.'},\n"
        "        {'role': 'user', 'content': t}])\n"
        "    print(r.choices[0].message.content)\n"
    )
    store = tmp_path / "rec.sqlite"
    p = auto("record", "--store", str(store), "--task", "triage", "--", sys.executable, str(agent))
    assert "billing" in p.stdout and "bug" in p.stdout
    data = json.loads(auto("census", "--store", str(store), "--json").stdout)
    assert data["spans"] >= 2
    raw = store.read_bytes()
    assert b"sk-test-not-a-key" not in raw
    # the child's exit code is passed through
    failing = tmp_path / "fail.py"
    failing.write_text("import sys; sys.exit(7)\n")
    assert auto("record", "--store", str(store), "--", sys.executable, str(failing), check_code=7).returncode == 7
