"""Errors a new user hits, each one clear line (never a traceback) that loses nothing: a store with
damaged pages, a span whose JSON was changed behind the store's back, a ``--reference`` that fails
on import or answers something that is not JSON, and Ctrl-C (exit 130 everywhere)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
import pytest

from auto.store import Store, new_span_id, new_trace_id

AUTO = [sys.executable, "-m", "auto.cli"]
PAGE = 4096


def auto(*args: str, code: int, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([*AUTO, *args], capture_output=True, text=True, timeout=300, **kw)
    assert p.returncode == code, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p


def _error_classes() -> set[str]:
    """The names of every class in Auto's error tree (:mod:`auto.errors` and its subclasses)."""
    import auto.errors as errors

    out, todo = set(), [errors.AutoError]
    while todo:
        c = todo.pop()
        out.add(c.__name__)
        todo += c.__subclasses__()
    return out


def one_clear_line(p: subprocess.CompletedProcess, *needles: str) -> str:
    """The stderr of ``p`` is one ``error: …`` line (no traceback, no class name of Auto's errors)
    containing every needle."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    named = [c for c in _error_classes() if c in lines[0]]
    assert not named, f"the line names classes {named}: {lines[0]}"
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def sound_store(tmp_path_factory) -> Path:
    """A checkpointed store of 300 task spans (several pages of spans), WAL folded into the file."""
    path = tmp_path_factory.mktemp("sound") / "s.sqlite"
    with Store(path) as st:
        for i in range(300):
            st.ingest([{"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": "triage",
                        "kind": "task", "task": "triage", "site": None, "started_ns": i, "ended_ns": i + 1,
                        "status": "ok", "input": {"ticket": f"ticket number {i} " * 20},
                        "output": "billing" if i % 2 else "bug", "error": None, "attributes": {}}])
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return path


def _damaged(src: Path, dst: Path, how: str) -> Path:
    data = bytearray(src.read_bytes())
    if how == "pages":  # the header page and the schema intact, every page from the fourth scribbled on
        rnd = random.Random(0)
        for off in range(3 * PAGE, len(data), PAGE):
            for j in range(0, PAGE, 7):
                data[off + j] = rnd.randrange(256)
    else:  # truncated mid-file (a copy cut short)
        data = data[: len(data) // 3]
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("how", ["pages", "truncated"])
@pytest.mark.parametrize("command, extra", [(["census"], []), (["store", "info"], []), (["store", "verify"], []),
                                            (["compile"], ["--task", "triage"])])
def test_a_corrupt_store_is_one_line_and_unchanged(sound_store, tmp_path, how, command, extra):
    bad = _damaged(sound_store, tmp_path / "bad.sqlite", how)
    before = bad.read_bytes()
    p = auto(*command, "--store", str(bad), *extra, code=1)
    one_clear_line(p, "is corrupt", "restore it from a copy")
    assert bad.read_bytes() == before


@pytest.mark.parametrize("how", ["pages", "truncated"])
def test_record_refuses_a_corrupt_store_before_starting_the_child(sound_store, tmp_path, how):
    bad = _damaged(sound_store, tmp_path / "bad.sqlite", how)
    before = bad.read_bytes()
    marker = tmp_path / "child-ran"
    p = auto("record", "--store", str(bad), "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')", code=1)
    one_clear_line(p, "is corrupt")
    assert not marker.exists() and bad.read_bytes() == before
    assert "interpreter" not in p.stderr  # not the wrong fix


def test_record_into_a_sound_store_still_runs_the_child(sound_store, tmp_path):
    good = tmp_path / "good.sqlite"
    shutil.copy(sound_store, good)
    marker = tmp_path / "child-ran"
    auto("record", "--store", str(good), "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')", code=0)
    assert marker.exists()


def test_reading_a_span_whose_json_was_changed_is_one_line(sound_store, tmp_path):
    bad = tmp_path / "json.sqlite"
    shutil.copy(sound_store, bad)
    con = sqlite3.connect(bad)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    (sid, pid) = con.execute("SELECT span_id, output_id FROM spans WHERE kind = 'task' "
                             "ORDER BY started_ns LIMIT 1 OFFSET 4").fetchone()
    # the span's output payload, rewritten behind the store's back (shared by every span with that output)
    con.execute("UPDATE payloads SET codec = 0, body = CAST('{not json' AS BLOB) WHERE id = ?", [pid])
    con.commit()
    con.close()
    # the census groups by payload and never parses it; a command that reads the spans names the row
    line = one_clear_line(auto("store", "export", "--store", str(bad), "--otlp", str(tmp_path / "x.jsonl"), code=1),
                          "'output'", "does not match its digest")
    assert "auto store verify" in line
    # verify reports the payload and every span using it among its mismatches instead of stopping at it
    p = auto("store", "verify", "--store", str(bad), code=1)
    report = json.loads(p.stdout)
    assert any(m["table"] == "payloads" and m["id"] == pid for m in report["mismatches"])
    assert any(m["id"] == sid for m in report["mismatches"])


# ----------------------------------------------------------------------------- --reference

DECLINED = json.dumps({"ticket": "zzqx 9911 ¤¤¤ qqqq wwww"})  # far from every witness: the guard deopts


@pytest.mark.parametrize("body, needle", [
    ("raise RuntimeError('no config file')\n", "importing the reference module badref raised RuntimeError: no config file"),
    ("import a_module_that_is_not_installed_xyz\n", "importing the reference module badref failed: ModuleNotFoundError"),
    ("def f(:\n", "importing the reference module badref raised SyntaxError"),
])
def test_a_reference_that_fails_on_import_is_one_line(triage_artifact, tmp_path, body, needle):
    (tmp_path / "badref.py").write_text(body)
    p = auto("run", str(triage_artifact[0]), "--input", DECLINED, "--reference", "badref:f", code=1, cwd=tmp_path)
    one_clear_line(p, needle)


def test_a_missing_reference_module_is_a_usage_error(triage_artifact, tmp_path):
    p = auto("run", str(triage_artifact[0]), "--input", DECLINED, "--reference", "no_such_module_xyz:f", code=2,
             cwd=tmp_path)
    assert "cannot load reference" in p.stderr and "Traceback" not in p.stderr


def test_a_reference_that_answers_something_not_json_is_one_line(triage_artifact, tmp_path):
    (tmp_path / "setref.py").write_text("def f(ticket):\n    return {'labels': {'billing'}}\n")
    p = auto("run", str(triage_artifact[0]), "--input", DECLINED, "--reference", "setref:f", code=1, cwd=tmp_path)
    line = one_clear_line(p, "the reference setref:f returned a value that is not JSON (dict")
    assert line.startswith("error: the reference setref:f ")  # plain words, no class name
    assert p.stdout == ""


# ----------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_in_any_command_exits_130(monkeypatch):
    from click.testing import CliRunner

    import auto.cli as cli

    @click.command()
    def sleepy() -> None:
        raise KeyboardInterrupt

    @click.command()
    def declines() -> None:
        raise click.Abort()  # an abort that is not Ctrl-C keeps exit 1

    monkeypatch.setattr(cli.main, "_plugins", {"sleepy": sleepy, "declines": declines})
    res = CliRunner().invoke(cli.main, ["sleepy"])
    assert res.exit_code == cli.EXIT_INTERRUPTED == 130 and "interrupted" in res.output
    res = CliRunner().invoke(cli.main, ["declines"])
    assert res.exit_code == 1 and "aborted" in res.output


def test_ctrl_c_during_auto_record_exits_130(tmp_path):
    child = "import time; print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen([*AUTO, "record", "--store", str(tmp_path / "s.sqlite"), "--", sys.executable, "-c", child],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    # the child's own KeyboardInterrupt traceback is the child's; auto adds one line
    assert err.strip().splitlines()[-1].endswith("(child exit code 130)")


def test_sigint_to_auto_record_alone_is_forwarded_to_the_child_and_exits_130(tmp_path):
    child = "import time; print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen([*AUTO, "record", "--store", str(tmp_path / "s.sqlite"), "--", sys.executable, "-c", child],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGINT)  # `kill -INT <pid>`: the parent only
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err  # the child ended by the forwarded SIGINT, not killed (137)
    assert err.strip().splitlines()[-1].endswith("(child exit code 130)"), err


def test_a_path_that_cannot_be_written_is_one_line(sound_store, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    p = subprocess.run([*AUTO, "compile", "--store", str(sound_store), "--all", "--workers", "0",
                        "--out-dir", str(blocker / "out")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith(f"error: cannot use {blocker / 'out'}"), p.stderr


def test_an_error_without_a_message_is_said_in_its_class_s_words():
    from auto.cli import _message
    from auto.errors import IngestError, NotAStore

    assert _message(NotAStore("x.sqlite is not an Auto store")) == "x.sqlite is not an Auto store"
    said = _message(IngestError())  # no message: the first line of the class's docstring, no class name
    assert said == "A batch could not be ingested; the transaction was rolled back, nothing was written"
    assert "IngestError" not in said


@pytest.mark.parametrize("case", ["contract", "sign-key without registry", "sign key", "trust key"])
def test_a_proxy_that_cannot_start_writes_no_store(tmp_path, case):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key\n")
    bad_contract = tmp_path / "bad.toml"
    bad_contract.write_text('epsilon = "x"\n')
    (tmp_path / "reg").mkdir()
    extra = {"contract": ["--contract", str(bad_contract)], "sign-key without registry": ["--sign-key", str(junk)],
             "sign key": ["--registry", str(tmp_path / "reg"), "--sign-key", str(junk)],
             "trust key": ["--trust-key", str(junk)]}[case]
    store = tmp_path / "p.sqlite"
    p = subprocess.run([*AUTO, "proxy", "--upstream", "http://127.0.0.1:9/v1", "--store", str(store), "--port", "0",
                        *extra], capture_output=True, text=True, timeout=120)
    assert p.returncode in (1, 2) and "Traceback" not in p.stderr, p.stderr
    assert len([ln for ln in p.stderr.splitlines() if ln.strip()]) == 1, p.stderr
    assert not store.exists() and not list(tmp_path.glob("p.sqlite*")), sorted(tmp_path.iterdir())


def test_record_of_a_command_that_is_not_found_writes_no_store(tmp_path):
    store = tmp_path / "r.sqlite"
    p = auto("record", "--store", str(store), "--", "no-such-command-anywhere", code=2)
    assert "command not found: no-such-command-anywhere" in p.stderr and "Traceback" not in p.stderr
    assert not list(tmp_path.glob("r.sqlite*")), sorted(tmp_path.iterdir())
