"""``auto serve``: run by id, list, health, 409 for a declined guard without reference, the same
limits as in process, several workers, trust keys."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
import pytest
import uvicorn

from auto.asgi import uvicorn_config
from auto.serve import ArtifactService, ServeConfig
from auto.signing import generate_keypair, load_private_key
from auto.registry import Registry
from auto.sites import Site

from site_fixtures import compiled_site, label_of, site_words, ticket_call


class Served:
    """An ArtifactService on a background uvicorn thread."""

    def __init__(self, config: ServeConfig) -> None:
        self.service = ArtifactService(config)
        self.server = uvicorn.Server(uvicorn_config(self.service.app, "127.0.0.1", 0))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "Served":
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.service.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve")
    store, sid, out = compiled_site(folder)
    tmpl = Site.from_manifest(out.manifest["site"])
    w = site_words()[0]
    return store, sid, out, tmpl.extract(ticket_call(w, "x")["input"]), label_of(w), tmpl


REFERENCE = '''
def label(ticket, customer):
    return "from-reference"

def broken(ticket, customer):
    raise RuntimeError("the agent is down")

def not_json(ticket, customer):
    return {"labels": {"billing"}}
'''


def test_run_list_health_and_errors(site, tmp_path):
    store, sid, out, inp, label, tmpl = site
    with Served(ServeConfig(artifacts=[str(out.artifact_path)])) as s:
        assert httpx2.get(s.url + "/health").json()["artifacts"] == 1
        (row,) = httpx2.get(s.url + "/v1/artifacts").json()["artifacts"]
        assert row["id"] == out.artifact_id and row["task"] == sid and row["signed_by"] is None
        assert httpx2.get(s.url + f"/v1/artifacts/{out.artifact_id}").json()["manifest"]["site"]["id"] == sid
        r = httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", json=inp)
        assert r.status_code == 200 and r.json()["tier"] == "tier-1" and r.json()["answer"] == label
        by_prefix = httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id[7:23]}/run", json=inp)
        assert by_prefix.json()["answer"] == label
        by_task = httpx2.post(s.url + f"/v1/tasks/{sid}/run", json=inp)
        assert by_task.json()["artifact_id"] == out.artifact_id
        unseen = {**inp, "ticket": "never seen"}
        declined = httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", json=unseen)
        assert declined.status_code == 409
        body = declined.json()
        assert body["error"]["type"] == "declined" and "unseen input" in body["error"]["reason"] and body["tier"] == "declined"
        assert httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", content=b"{no").status_code == 400
        assert httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", json=[1]).status_code == 400
        assert httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", json={"x": 1}).status_code == 422
        assert httpx2.post(s.url + "/v1/artifacts/sha256:" + "0" * 64 + "/run", json=inp).status_code == 404
        assert httpx2.post(s.url + "/v1/tasks/nope/run", json=inp).status_code == 404
        big = httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", content=b"{" + b" " * (1024 * 1024 + 10) + b"}")
        assert big.status_code == 413


def test_reference_answers_declined_calls_and_is_captured(site, tmp_path, monkeypatch):
    store, sid, out, inp, label, _ = site
    (tmp_path / "myref.py").write_text(REFERENCE)
    cfg = ServeConfig(store=str(store), reference="myref:label", cwd=str(tmp_path))
    with Served(cfg) as s:
        r = httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", json={**inp, "ticket": "new one"})
        assert r.status_code == 200 and r.json()["tier"] == "tier-0" and r.json()["answer"] == "from-reference"
    from auto.store import Store

    with Store(store) as st:
        caps = [w for w in st.witnesses(sid) if w.attributes.get("auto.source") == "capture"]
    assert caps and caps[-1].output == "from-reference"
    cfg = ServeConfig(artifacts=[str(out.artifact_path)], reference="myref:broken", cwd=str(tmp_path))
    with Served(cfg) as s:
        r = httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", json={**inp, "ticket": "new one"})
        assert r.status_code == 502 and r.json()["error"]["message"] == "the reference myref:broken raised RuntimeError: the agent is down"
    # an answer that is not JSON is the reference's failure, one line (as `auto run --reference` says it)
    cfg = ServeConfig(artifacts=[str(out.artifact_path)], reference="myref:not_json", cwd=str(tmp_path))
    with Served(cfg) as s:
        r = httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", json={**inp, "ticket": "new one"})
        assert r.status_code == 502 and r.json()["error"]["type"] == "reference_failed"
        assert r.json()["error"]["message"].startswith("the reference myref:not_json returned a value that is not JSON (dict")


def test_same_limits_as_in_process(site):
    store, sid, out, inp, label, _ = site
    with Served(ServeConfig(artifacts=[str(out.artifact_path)], fuel=10)) as s:  # far too little fuel
        r = httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", json=inp)
        assert r.status_code == 409 and r.json()["reason"] == "limit: fuel"


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def test_cli_workers_and_trust(site, tmp_path):
    store, sid, out, inp, label, _ = site
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "auto.cli", "serve", str(out.artifact_path), "--port", str(port),
                             "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        pids = set()
        while time.time() < deadline and len(pids) < 2:
            try:
                with httpx2.Client() as c:  # a new connection each time: the kernel spreads them over workers
                    pids.add(c.get(url + "/health").json()["pid"])
                    assert c.post(url + f"/v1/artifacts/{out.artifact_id}/run", json=inp).json()["answer"] == label
            except httpx2.TransportError:
                time.sleep(0.1)
        assert len(pids) == 2, pids
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(30)
    # a trust key and an unsigned artifact: one line, exit 1, nothing listens
    _, pub, _ = generate_keypair(tmp_path / "k")
    p = subprocess.run([sys.executable, "-m", "auto.cli", "serve", str(out.artifact_path), "--port", str(_free_port()),
                        "--trust-key", str(pub)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "refused: unsigned" in p.stderr and "UntrustedArtifact" not in p.stderr and "Traceback" not in p.stderr
    reg = Registry(tmp_path / "reg")
    reg.add(out.wasm, key=load_private_key(tmp_path / "k.key"))
    with Served(ServeConfig(registry=str(reg.root), trust_keys=[str(pub)])) as s:
        (row,) = httpx2.get(s.url + "/v1/artifacts").json()["artifacts"]
        assert row["signed_by"] is not None
    nothing = subprocess.run([sys.executable, "-m", "auto.cli", "serve"], capture_output=True, text=True, timeout=60)
    assert nothing.returncode == 2 and "nothing to serve" in nothing.stderr


@pytest.mark.parametrize("command", ["serve", "proxy"])
def test_a_busy_port_is_one_line_before_anything_is_announced(command, tmp_path):
    from auto.store import Store

    Store(tmp_path / "s.sqlite").close()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = (["serve", "--store", str(tmp_path / "s.sqlite")] if command == "serve"
                else ["proxy", "--store", str(tmp_path / "s.sqlite"), "--upstream", "http://127.0.0.1:9/v1"])
        p = subprocess.run([sys.executable, "-m", "auto.cli", *args, "--port", str(port)], capture_output=True,
                           text=True, timeout=120)
    assert p.returncode == 1, (p.returncode, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines == [f"error: cannot listen on 127.0.0.1:{port}: Address already in use"], p.stderr


def test_serve_creates_a_store_that_does_not_exist_yet(site, tmp_path):
    """``auto serve ART --store NEW`` creates the store (as record, proxy and receive do) and serves;
    a store that does not exist with nothing else to serve is one usage line and creates nothing;
    a serve that fails before listening leaves no store behind."""
    store, sid, out, inp, label, _ = site
    new = tmp_path / "new" / "deopts.sqlite"
    new.parent.mkdir()
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "auto.cli", "serve", str(out.artifact_path), "--store", str(new),
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        url, deadline, answer = f"http://127.0.0.1:{port}", time.time() + 60, None
        while time.time() < deadline and answer is None:
            try:
                answer = httpx2.post(url + f"/v1/artifacts/{out.artifact_id}/run", json=inp).json()["answer"]
            except httpx2.TransportError:
                time.sleep(0.1)
        assert answer == label and new.is_file()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(30)
    from auto.store import Store

    with Store(new, create=False) as st:  # a real store, not an empty file, holding the tier-1 answer's span
        assert [r["name"] for r in st.spans()] == ["auto.tier1"]
    alone = tmp_path / "alone.sqlite"
    p = subprocess.run([sys.executable, "-m", "auto.cli", "serve", "--store", str(alone), "--port", str(_free_port())],
                       capture_output=True, text=True, timeout=60)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "does not exist yet" in lines[0] and not alone.exists(), p.stderr
    _, pub, _ = generate_keypair(tmp_path / "k2")
    failed = tmp_path / "failed.sqlite"
    p = subprocess.run([sys.executable, "-m", "auto.cli", "serve", str(out.artifact_path), "--store", str(failed),
                        "--port", str(_free_port()), "--trust-key", str(pub)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "refused: unsigned" in p.stderr and not failed.exists(), p.stderr
    assert not list(tmp_path.glob("failed.sqlite*"))


@pytest.mark.parametrize("record", [True, False])
def test_tier1_answers_are_recorded_as_spans_never_as_witnesses(site, tmp_path, record):
    """With a store, every tier-1 answer is one ``auto.tier1`` span (as the proxy records its own);
    a declined call records none; ``record_tier1=False`` (``--no-tier1-spans``) records nothing."""
    from auto.census import census_store
    from auto.store import Store

    _, sid, out, inp, label, _ = site
    fresh = tmp_path / "t1.sqlite"
    Store(fresh).close()
    with Served(ServeConfig(artifacts=[str(out.artifact_path)], store=str(fresh), record_tier1=record)) as s:
        for _ in range(2):
            r = httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", json=inp)
            assert r.status_code == 200 and r.json()["tier"] == "tier-1"
        assert httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run",
                           json={**inp, "ticket": "zq xv unseen words"}).status_code == 409
    with Store(fresh) as st:
        rows = st.spans()
        assert st.witnesses(sid) == []
        census = census_store(st)
    if not record:
        assert rows == []
        return
    assert [(r["name"], r["kind"], r["task"], r["site"]) for r in rows] == [("auto.tier1", "llm", sid, sid)] * 2
    a = rows[0]["attributes"]
    assert a["auto.tier"] == 1 and a["auto.serve"] is True and a["auto.artifact_id"] == out.artifact_id
    assert a["auto.generation"] == out.manifest["generation"] and a["auto.cost_usd_micros"] == 0
    assert rows[0]["input"] == inp and rows[0]["output"] == label
    assert not census.sites  # an artifact's answers are no observation of anything
