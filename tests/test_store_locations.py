"""A ``postgresql://`` URI wherever a store is accepted: ``auto proxy`` (its writer process and
ratchets), ``auto serve`` (artifacts and captured deopts), ``auto compile --site`` (its sites found
from the distinct requests, the same artifact as before) and the compile lock, shared by every
host of a PostgreSQL store; a typo'd scheme and a server that cannot be reached are one line each."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from auto.errors import ArgumentError, NotAStore
from auto.sites import discover, store_sites
from auto.store import Store
from auto.store.lock import PgCompileLock, compile_lock

from site_fixtures import label_of, site_words, ticket_call, ticket_messages
from upstreams import ScriptedUpstream

AUTO = [sys.executable, "-m", "auto.cli"]
DEAD = "postgresql://auto:hunter2pw@127.0.0.1:1/auto"
"""A PostgreSQL URI nothing listens on (port 1), with a password that must never be shown."""


def site_spans() -> list[dict]:
    """The ticket site's calls (each word twice), a retried call (an errored attempt, then the
    answer) and one call of a second site (another system prompt)."""
    spans = [ticket_call(w, label_of(w)) for w in site_words() for _ in range(2)]
    retry = {"auto.logical_call_id": "L1", "gen_ai.request.model": "m-1"}
    spans.append({**ticket_call("late 0", "bug", status="error"), "attributes": {**retry, "auto.attempt": 0}})
    spans.append({**ticket_call("late 0", "bug"), "attributes": {**retry, "auto.attempt": 1}})
    other = ticket_call("refund 0", "billing")
    other["input"]["messages"][0]["content"] = "You route tickets."
    return spans + [other]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    """A fresh store location of each kind."""
    if request.param == "sqlite":
        return str(tmp_path / "s.sqlite")
    return request.getfixturevalue("pg_dsn")


# ------------------------------------------------------------------------- compile --site


def test_store_sites_are_the_sites_of_every_span(location, triage_store):
    """Sites found from the distinct requests are those found over every span: ids, templates
    and request counts (retried attempts included), on the ticket store and the recorded triage
    store (model calls inside a task), SQLite and PostgreSQL."""
    with Store(location) as st:
        st.ingest(site_spans())
        by_span = discover(st.spans(kind="llm")).sites
        assert len(by_span) == 2 and store_sites(st) == by_span
        assert sum(s.requests for s in by_span.values()) == len(site_spans())
    with Store(triage_store) as st:
        by_span = discover(st.spans(kind="llm")).sites
        assert by_span and store_sites(st) == by_span and store_sites(st, task="triage") == by_span
        assert store_sites(st, task="nope") == {}


def test_compile_site_gives_the_artifact_the_span_path_gave(location, tmp_path):
    """``auto compile --site PREFIX`` on a store (SQLite or PostgreSQL) emits byte for byte the
    artifact that compiling the site found over every span of an SQLite store emits."""
    from auto.compile import compile_task

    spans = site_spans()  # the same spans (ids included) in both stores
    with Store(location) as st:
        st.ingest(spans)
    with Store(tmp_path / "ref.sqlite") as ref:
        ref.ingest(spans)
        sid = next(s.id for s in discover(ref.spans(kind="llm")).sites.values() if s.requests > 3)
        want = compile_task(ref, sid, out_path=tmp_path / "ref.wasm")
    out = tmp_path / "cli.wasm"
    p = subprocess.run([*AUTO, "compile", "--store", location, "--site", sid[5:13], "--out", str(out), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout)
    assert got["task"] == sid and got["artifact_id"] == want.artifact_id
    assert out.read_bytes() == want.artifact_path.read_bytes()
    none = subprocess.run([*AUTO, "compile", "--store", location, "--site", "ffffffff"], capture_output=True,
                          text=True, timeout=120)
    assert none.returncode == 2 and none.stderr.count("\n") == 1 and sid in none.stderr
    both = subprocess.run([*AUTO, "compile", "--store", location, "--site", "site:"], capture_output=True,
                          text=True, timeout=120)
    assert both.returncode == 2 and "names 2 sites" in both.stderr and both.stderr.count("\n") == 1


# ------------------------------------------------------------------------- the compile lock


def _hold_lock(dsn: str, ready) -> None:
    lock = compile_lock(dsn)
    assert lock.acquire()
    ready.set()
    time.sleep(600)


def test_the_compile_lock_of_a_postgresql_store_is_the_database_s(pg_dsn, tmp_path):
    """One holder at a time across processes (and so hosts); a holder that dies gives it back;
    ``auto compile`` on another host waits for it."""
    import multiprocessing

    a, b = compile_lock(pg_dsn), compile_lock(pg_dsn)
    assert isinstance(a, PgCompileLock) and a.acquire() and a.held and a.acquire()
    assert not b.acquire() and not b.held
    a.release()
    assert b.acquire()
    b.release()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(pg_dsn, ready))
    holder.start()
    try:
        assert ready.wait(60) and not a.acquire()
    finally:
        holder.kill()
        holder.join(30)
    deadline = time.time() + 30  # the server ends the dead holder's session
    while not a.acquire() and time.time() < deadline:
        time.sleep(0.1)
    assert a.held
    with Store(pg_dsn) as st:
        st.ingest([ticket_call(w, label_of(w)) for w in site_words() for _ in range(2)])
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "other-host")}  # another host's local files
    out = tmp_path / "x.wasm"
    proc = subprocess.Popen([*AUTO, "compile", "--store", pg_dsn, "--site", "site:", "--out", str(out)],
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stderr.readline()
        assert "waiting for another compile of this store" in first, first + proc.stderr.read()
        time.sleep(0.5)
        assert proc.poll() is None and not out.exists()  # still waiting
    finally:
        a.release()
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and out.exists(), err[-2000:]  # it went on once the lock was free


# ------------------------------------------------------------------------- auto proxy


class Running:
    """A CLI server (``auto proxy`` / ``auto serve``) started and stopped with Ctrl-C."""

    def __init__(self, *args: str, port: int, announce: str, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen([*AUTO, *args, "--port", str(port)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=cwd)
        self.lines: list[str] = []
        line = ""
        deadline = time.time() + 120
        while announce not in line and time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                break
            self.lines.append(line)
        assert announce in line, "".join(self.lines)
        threading.Thread(target=self._drain, daemon=True).start()
        while time.time() < deadline:  # announced just before it listens
            with socket.socket() as c:
                if c.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise AssertionError(f"nothing listens on port {port}: {''.join(self.lines)}")

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    def stop(self) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(60)


def post(url: str, body: dict) -> tuple[dict, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json",
                                                                              "Authorization": "Bearer sk-x"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return json.loads(e.read()), dict(e.headers)


def test_auto_proxy_records_into_a_postgresql_store(pg_dsn, tmp_path):
    """Every call the proxy forwards lands in the PostgreSQL store (its writer process opens the
    URI, not a file), and neither its announcement nor /auto/health shows the password."""
    port = free_port()
    with ScriptedUpstream("tickets") as up:
        px = Running("proxy", "--store", pg_dsn, "--upstream", up.base_url, "--record-only", port=port,
                     announce="auto proxy on", cwd=tmp_path)
        try:
            for w in site_words()[:3]:
                body, _ = post(f"http://127.0.0.1:{port}/v1/chat/completions", {"model": "m-1", "messages": ticket_messages(w)})
                assert body["choices"][0]["message"]["content"] == label_of(w)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/auto/health", timeout=30) as r:
                health = json.loads(r.read())
        finally:
            assert px.stop() in (0, 130)
    user, password = urlsplit(pg_dsn).username, urlsplit(pg_dsn).password
    assert health["store"].startswith(f"postgresql://{user}@") and f"recording into {health['store']}" in "".join(px.lines)
    if password:
        assert f":{password}@" not in health["store"] + "".join(px.lines)
    with Store(pg_dsn) as st:
        rows = st.spans(kind="llm")
    assert [r["output"]["content"] for r in rows] == [label_of(w) for w in site_words()[:3]]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no SQLite file was made of the URI


def test_the_proxy_compiles_a_site_and_answers_it_on_a_postgresql_store(pg_dsn):
    """The proxy's sites and ratchets on a PostgreSQL store: calls recorded there become a site,
    its ratchet compiles a generation (under the database's compile lock), later calls are
    answered at tier-1."""
    from auto.proxy import ProxyConfig, ProxyServer
    from auto.ratchet import CompilePolicy

    opts = {"worker": "thread", "policy": CompilePolicy(first_at=20)}
    with ScriptedUpstream("tickets") as up, ProxyServer(ProxyConfig(upstream=up.base_url, store=pg_dsn, port=0,
                                                                    rediscover_s=0.2, audit_rate=0.0,
                                                                    ratchet_options=opts)) as px:
        url = px.base_url + "/chat/completions"
        words = site_words()
        for _ in range(2):
            for w in words:
                post(url, {"model": "m-1", "messages": ticket_messages(w)})
        deadline = time.time() + 120
        tier = None
        while time.time() < deadline:
            _, headers = post(url, {"model": "m-1", "messages": ticket_messages(words[0])})
            tier = headers.get("x-auto-tier")
            if tier == "1":
                break
            px.proxy.sites.wait_idle(30)
            time.sleep(0.3)
        assert tier == "1", px.proxy.sites.status()
        (sid,) = px.proxy.sites.status()
        with urllib.request.urlopen(px.url + "/auto/status", timeout=30) as r:
            status = r.read().decode()
    password = urlsplit(pg_dsn).password
    assert sid in status and not (password and f":{password}@" in status)
    with Store(pg_dsn) as st:
        assert st.latest_artifact(sid) is not None and st.verify().ok


# ------------------------------------------------------------------------- auto serve

REFERENCE = "def label(ticket, customer):\n    return 'from-reference'\n"


def test_auto_serve_serves_a_postgresql_store_and_captures_deopts_there(pg_dsn, tmp_path):
    from auto.compile import compile_task
    from auto.sites import Site

    with Store(pg_dsn) as st:
        st.ingest([ticket_call(w, label_of(w)) for w in site_words() for _ in range(2)])
        (sid,) = store_sites(st)
        out = compile_task(st, sid, rungs=["memo"], out_path=tmp_path / "site.wasm")
    inp = Site.from_manifest(out.manifest["site"]).extract(ticket_call(site_words()[0], "x")["input"])
    (tmp_path / "myref.py").write_text(REFERENCE)
    port = free_port()
    srv = Running("serve", "--store", pg_dsn, "--reference", "myref:label", port=port,
                  announce="auto serve on", cwd=tmp_path)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/artifacts", timeout=30) as r:
            (row,) = json.loads(r.read())["artifacts"]
        assert row["id"] == out.artifact_id
        hit, _ = post(f"http://127.0.0.1:{port}/v1/artifacts/{out.artifact_id}/run", inp)
        assert hit["tier"] == "tier-1" and hit["answer"] == label_of(site_words()[0])
        new, _ = post(f"http://127.0.0.1:{port}/v1/tasks/{sid}/run", {**inp, "ticket": "never seen"})
        assert new["tier"] == "tier-0" and new["answer"] == "from-reference"
    finally:
        assert srv.stop() in (0, 130)
    with Store(pg_dsn) as st:
        caps = [w for w in st.witnesses(sid) if w.attributes.get("auto.source") == "capture"]
    assert [w.output for w in caps] == ["from-reference"]


# ------------------------------------------------------------------------- bad locations

COMMANDS = {
    "record": lambda s: ["record", "--store", s, "--", sys.executable, "-c", "pass"],
    "census": lambda s: ["census", "--store", s],
    "compile": lambda s: ["compile", "--store", s, "--site", "abc"],
    "store info": lambda s: ["store", "info", "--store", s],
    "store import": lambda s: ["store", "import", "--store", s, "--otlp",
                               str(Path(__file__).parent / "dialects" / "otlp-openai-v2.json")],
    "proxy": lambda s: ["proxy", "--store", s, "--upstream", "http://127.0.0.1:9/v1", "--port", "0"],
    "serve": lambda s: ["serve", "--store", s, "--port", "0"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_typo_d_scheme_is_one_usage_line_and_creates_nothing(command, tmp_path):
    bad = "postgresq://auto:hunter2pw@127.0.0.1:5432/auto"
    p = subprocess.run([*AUTO, *COMMANDS[command](bad)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "unknown scheme 'postgresq://'" in lines[0] and "hunter2pw" not in lines[0]
    assert list(tmp_path.iterdir()) == []  # no SQLite file named after the URI


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_server_that_cannot_be_reached_is_one_line(command, tmp_path):
    p = subprocess.run([*AUTO, *COMMANDS[command](DEAD)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 1 and len(lines) == 1, p.stderr
    assert lines[0].startswith("error: cannot connect to the PostgreSQL store postgresql://auto@127.0.0.1:1/")
    assert "hunter2pw" not in p.stderr and "Traceback" not in p.stderr


def test_the_library_refuses_a_typo_d_scheme_before_creating_anything(tmp_path, monkeypatch):
    import auto

    monkeypatch.chdir(tmp_path)
    for bad in ("postgresql+psycopg://a:pw@h/db", "sqlite:///x.db", "postgresql:/h/db"):
        with pytest.raises(ArgumentError, match="is not a store") as e:
            Store(bad)
        assert "pw@" not in str(e.value)
        with pytest.raises(ArgumentError):
            auto.recording(bad).__enter__()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["census", "store info", "compile", "serve"])
def test_a_reading_command_leaves_no_store_in_an_empty_database(command, pg_dsn, tmp_path):
    """An empty database is to a reading command what a missing file is: one line, and nothing
    is created in it (an SQLite path that does not exist is refused the same way)."""
    import psycopg

    args = {"census": ["census"], "store info": ["store", "info"], "compile": ["compile", "--task", "t"],
            "serve": ["serve", "--port", "0"]}[command]
    p = subprocess.run([*AUTO, *args, "--store", pg_dsn], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 1 and len(lines) == 1 and "holds no Auto store" in lines[0], p.stderr
    with psycopg.connect(pg_dsn) as c:
        assert c.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
                         ).fetchone()[0] == 0
    with pytest.raises(NotAStore, match="no such store"):
        Store(tmp_path / "missing.sqlite", create=False)
    assert not (tmp_path / "missing.sqlite").exists()
