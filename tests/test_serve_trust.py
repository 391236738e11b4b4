"""``auto serve`` trust boundaries: a token off loopback, one reference per task, artifact calls
off the event loop, 422 for inputs outside the schema even with a reference, deep nesting 400."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import httpx2
import pytest

from auto.errors import ArgumentError
from auto.serve import ArtifactService, ServeConfig
from auto.serve.app import MAX_JSON_DEPTH, check_auth, is_loopback, json_depth_ok
from auto.sites import Site

from site_fixtures import compiled_site, label_of, site_words, ticket_call
from test_serve import Served

TOKEN = "serve-token-0123456789abcdef"

REFERENCE = '''
def label(ticket, customer):
    return "from-label"

def other(ticket, customer):
    return "from-other"
'''


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """Two compiled sites (two tasks), their inputs, and a reference module."""
    folder = tmp_path_factory.mktemp("serve-trust")
    (folder / "a").mkdir()
    (folder / "b").mkdir()
    a = compiled_site(folder / "a")
    b = compiled_site(folder / "b", model="m-2")
    (folder / "trustref.py").write_text(REFERENCE)
    w = site_words()[0]
    inp = Site.from_manifest(a[2].manifest["site"]).extract(ticket_call(w, "x")["input"])
    return folder, a, b, inp, label_of(w)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_off_loopback_needs_a_token_or_an_explicit_flag(two):
    folder, a, *_ = two
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.8.0.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5") and not is_loopback("example.org")
    check_auth(ServeConfig(host="127.0.0.1"))
    with pytest.raises(ArgumentError, match="without authentication"):
        check_auth(ServeConfig(host="0.0.0.0"))
    check_auth(ServeConfig(host="0.0.0.0", token=TOKEN))
    check_auth(ServeConfig(host="0.0.0.0", allow_unauthenticated=True))
    assert TOKEN not in repr(ServeConfig(token=TOKEN))
    p = subprocess.run([sys.executable, "-m", "auto.cli", "serve", str(a[2].artifact_path), "--host", "0.0.0.0",
                        "--port", str(_free_port())], capture_output=True, text=True, timeout=120)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "without authentication" in lines[0] and "--token" in lines[0], p.stderr


def test_a_token_is_required_on_every_endpoint_but_health(two):
    folder, a, b, inp, label = two
    aid = a[2].artifact_id
    with Served(ServeConfig(artifacts=[str(a[2].artifact_path)], token=TOKEN)) as s:
        assert httpx2.get(s.url + "/health").status_code == 200
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": TOKEN}):
            assert httpx2.post(s.url + f"/v1/artifacts/{aid}/run", json=inp, headers=headers).status_code == 401
            assert httpx2.get(s.url + "/v1/artifacts", headers=headers).status_code == 401
            assert httpx2.post(s.url + f"/v1/tasks/{a[1]}/run", json=inp, headers=headers).status_code == 401
        ok = {"Authorization": f"Bearer {TOKEN}"}
        r = httpx2.post(s.url + f"/v1/artifacts/{aid}/run", json=inp, headers=ok)
        assert r.status_code == 200 and r.json()["answer"] == label
        assert httpx2.get(s.url + "/v1/artifacts", headers=ok).status_code == 200


def test_one_reference_for_several_tasks_is_refused_a_mapping_is_used(two):
    folder, a, b, inp, label = two
    arts = [str(a[2].artifact_path), str(b[2].artifact_path)]
    with pytest.raises(ArgumentError, match="ambiguous"):
        ArtifactService(ServeConfig(artifacts=arts, reference="trustref:label", cwd=str(folder)))
    with pytest.raises(ArgumentError, match="no served artifact"):
        ArtifactService(ServeConfig(artifacts=arts, references={"site:nope": "trustref:label"}, cwd=str(folder)))
    cfg = ServeConfig(artifacts=arts, references={a[1]: "trustref:label", b[1]: "trustref:other"}, cwd=str(folder))
    unseen = {**inp, "ticket": "never seen before"}
    with Served(cfg) as s:
        ra = httpx2.post(s.url + f"/v1/artifacts/{a[2].artifact_id}/run", json=unseen).json()
        rb = httpx2.post(s.url + f"/v1/artifacts/{b[2].artifact_id}/run", json=unseen).json()
        assert (ra["tier"], ra["answer"]) == ("tier-0", "from-label")
        assert (rb["tier"], rb["answer"]) == ("tier-0", "from-other")
    cfg = ServeConfig(artifacts=arts, references={a[1]: "trustref:label"}, cwd=str(folder))
    with Served(cfg) as s:  # a task without a reference answers 409, never another task's reference
        assert httpx2.post(s.url + f"/v1/artifacts/{b[2].artifact_id}/run", json=unseen).status_code == 409
    p = subprocess.run([sys.executable, "-m", "auto.cli", "serve", *arts, "--reference", "trustref:label",
                        "--port", str(_free_port())], capture_output=True, text=True, timeout=120, cwd=folder)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "ambiguous" in lines[0] and "TASK=module:function" in lines[0], p.stderr


def test_input_outside_the_schema_is_422_with_a_reference(two):
    folder, a, b, inp, label = two
    cfg = ServeConfig(artifacts=[str(a[2].artifact_path)], reference="trustref:label", cwd=str(folder))
    with Served(cfg) as s:
        r = httpx2.post(s.url + f"/v1/artifacts/{a[2].artifact_id}/run", json={"x": 1})
        assert r.status_code == 422 and r.json()["error"]["type"] == "input_schema"


def test_deeply_nested_json_is_400_in_one_line(two):
    folder, a, b, inp, label = two
    assert json_depth_ok(b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}')
    assert not json_depth_ok(b"[" * (MAX_JSON_DEPTH + 1)) and json_depth_ok(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH)
    with Served(ServeConfig(artifacts=[str(a[2].artifact_path)])) as s:
        for body in (b"[" * 200_000, b'{"ticket": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b'{"a":' * 50_000):
            r = httpx2.post(s.url + f"/v1/artifacts/{a[2].artifact_id}/run", content=body)
            assert r.status_code == 400, (r.status_code, r.text[:200])
            assert len(r.json()["error"]["message"].splitlines()) == 1


def test_health_answers_while_an_artifact_call_runs(two):
    folder, a, b, inp, label = two
    aid = a[2].artifact_id
    with Served(ServeConfig(artifacts=[str(a[2].artifact_path)])) as s:
        tt = s.service.tiered[aid]
        entered, release = threading.Event(), threading.Event()
        real = tt.decide

        def slow(obj):  # a call still burning its fuel
            entered.set()
            release.wait(60)
            return real(obj)

        tt.decide = slow
        out: dict = {}
        t = threading.Thread(target=lambda: out.update(r=httpx2.post(s.url + f"/v1/artifacts/{aid}/run", json=inp,
                                                                       timeout=60)))
        t.start()
        try:
            assert entered.wait(30)
            h = httpx2.get(s.url + "/health", timeout=20)  # the event loop is free while the call runs
            assert h.status_code == 200 and not out
        finally:
            release.set()
            t.join(60)
        assert out["r"].status_code == 200 and out["r"].json()["answer"] == label
