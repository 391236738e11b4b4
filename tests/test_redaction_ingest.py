"""One redaction choke point at the store's ingest: every writer's secrets are redacted (serve's
and ``TieredTask``'s witness captures, ``add_witness``, raw ``ingest``, the proxy's paths), the
``site`` and ``task`` columns included; and every secret format the redactor claims beyond the
recorder's original list (credential headers, ``github_pat_``, unquoted AWS secret keys, the
short secret-name endings) is caught."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from auto.record.redact import REDACTED, Redactor, is_secret_name, pattern_secrets, sanitize_headers
from auto.store import Store, new_span_id, new_trace_id

from conftest import store_blob
from site_fixtures import compiled_site, site_words, ticket_call

# made up, none a live credential; each a format the README claims
SECRETS = {
    "openai-project": "sk-proj-Ab3dEf9hIjKlMnOpQrStUvWxYz0123456789",
    "anthropic": "sk-ant-api03-abcDEF123456789012345678901234567890-xyzAA",
    "aws-id": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "github-fine-grained": "github_pat_11ABCDEFG0123456789abc_" + "aB1" * 19 + "xy",
    "slack": "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
    "jwt": ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
            "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
    "stripe": "sk_live_abcdefghijklmnopqrstuvwx",
}
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize("text", [f"aws_secret_access_key = {AWS_SECRET}", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
                                  f'"SecretAccessKey": "{AWS_SECRET}"', f"secret_access_key: {AWS_SECRET}\n",
                                  f"export AWS_SECRET_ACCESS_KEY='{AWS_SECRET}'"])
def test_an_aws_secret_key_after_its_name_is_redacted_quoted_or_not(text):
    out, n = Redactor().redact_text(f"creds:\n{text} done")
    assert AWS_SECRET not in out and n == 1 and REDACTED in out


def test_a_fine_grained_github_token_is_redacted_and_near_misses_are_not():
    tok = SECRETS["github-fine-grained"]
    assert pattern_secrets(f"token {tok} here") == {tok}
    assert pattern_secrets("see github_pat_docs for how to make one") == set()


def test_credential_headers_are_dropped_and_rate_limit_headers_kept():
    hdrs = {"X-Auth-Token": "t1-secret-value", "X-Access-Token": "t2-secret-value", "X-Api-Token": "t3-secret-value",
            "X-Amz-Security-Token": "t4", "X-Api-Key": "k", "Proxy-Authorization": "Basic x", "X-Client-Secret": "s",
            "X-Db-Password": "p", "x-ratelimit-remaining-tokens": "9000", "x-request-id": "req_1",
            "Authorization": "Bearer abc", "Cookie": "a=b", "Ocp-Apim-Subscription-Key": "azure-apim-key-1"}
    assert sanitize_headers(hdrs) == {"x-ratelimit-remaining-tokens": "9000", "x-request-id": "req_1"}
    from auto.record.redact import credential_secrets

    assert {"t1-secret-value", "t2-secret-value", "t3-secret-value"} <= set(credential_secrets(hdrs))


def test_short_secret_name_endings():
    assert all(map(is_secret_name, ["GITHUB_AUTH", "STRIPE_SK", "DB_PASS", "MYSQL_PWD", "GH_PAT", "basic_auth"]))
    assert not any(map(is_secret_name, ["PWD", "OLDPWD", "SSH_AUTH_SOCK", "AUTO_TASK", "BYPASS", "AUTH_MODE_X",
                                        "COMPASS", "DESK"]))


def _span(**kw):
    base = {"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": "n", "kind": "task",
            "task": "t", "site": None, "started_ns": 1, "ended_ns": 2, "status": "ok", "input": {}, "output": None,
            "error": None, "attributes": {}}
    return {**base, **kw}


def test_every_ingest_path_redacts_site_and_task_included(tmp_path, monkeypatch):
    monkeypatch.setenv("PAYMENTS_SK", "env-held-secret-0123456789")
    path = tmp_path / "s.sqlite"
    planted = " ".join(SECRETS.values()) + " env-held-secret-0123456789"
    with Store(path) as st:
        st.ingest([_span(input={"ticket": planted}, output=planted, name=f"n {SECRETS['jwt']}",
                         attributes={"note": planted, SECRETS["stripe"]: 1}),
                   _span(kind="llm", task=None, site=f"opaque/GET /v1/files/{SECRETS['openai-project']}"),
                   _span(task=f"task-{SECRETS['github']}")],
                  [{"trace_id": new_trace_id(), "name": f"trace {SECRETS['slack']}", "started_ns": 1, "ended_ns": 2,
                    "status": "ok", "attributes": {"k": planted}}])
        st.add_witness("t", {"ticket": planted}, planted)
        st.add_witness({"task": "t", "input": {"ticket": planted}, "output": "x", "reason": planted})  # a capture dict
        given = _span(input={"k": SECRETS["aws-id"]})
        from auto.store.normalize import normalize_span

        given["digest"] = normalize_span(given)["digest"]  # a digest of the unredacted content
        st.ingest([given])
        rows = st.spans()
        assert st.verify().ok
        assert any(r["site"] == f"opaque/GET /v1/files/{REDACTED}" for r in rows)
        assert any(r["task"] == f"task-{REDACTED}" for r in rows)
        assert all(r["attributes"].get("auto.redactions") for r in rows if r["kind"] == "task" and r["task"] == "t")
    blob = store_blob(path)
    survivors = [k for k, v in SECRETS.items() if v.encode() in blob]
    assert survivors == [] and b"env-held-secret-0123456789" not in blob


def test_serve_with_a_store_captures_witnesses_redacted(tmp_path):
    from auto.serve import ServeConfig
    from auto.sites import Site
    from test_serve import Served

    store, sid, out = compiled_site(tmp_path)
    (tmp_path / "echo_ref.py").write_text("def label(ticket, customer):\n    return 'seen ' + ticket\n")
    tmpl = Site.from_manifest(out.manifest["site"])
    inp = tmpl.extract(ticket_call(site_words()[0], "x")["input"])
    planted = " ".join(SECRETS.values())
    with Served(ServeConfig(store=str(store), reference="echo_ref:label", cwd=str(tmp_path))) as s:
        r = httpx2.post(s.url + f"/v1/artifacts/{out.artifact_id}/run", json={**inp, "ticket": f"new {planted}"})
        assert r.status_code == 200 and r.json()["tier"] == "tier-0"
    with Store(store) as st:
        caps = [w for w in st.witnesses(sid) if w.attributes.get("auto.source") == "capture"]
        assert caps and REDACTED in json.dumps(caps[-1].input)
    blob = store_blob(store)
    assert [k for k, v in SECRETS.items() if v.encode() in blob] == []


def test_tiered_capture_into_add_witness_is_redacted(tmp_path):
    from auto_runtime import Artifact, TieredTask

    store, sid, out = compiled_site(tmp_path)
    planted = " ".join(SECRETS.values())
    with Store(store) as st:
        tt = TieredTask(Artifact.load(out.artifact_path), reference=lambda inp: "billing", capture=st.add_witness)
        res = tt({"ticket": f"never seen {planted}", "customer": "1"})
        assert res.tier == "tier-0"
    blob = store_blob(store)
    assert [k for k, v in SECRETS.items() if v.encode() in blob] == []


def test_a_key_in_a_proxied_path_is_redacted_from_the_site(tmp_path):
    from auto.proxy import ProxyConfig, ProxyServer
    from upstreams import ScriptedUpstream

    path = tmp_path / "p.sqlite"
    key = SECRETS["openai-project"]
    with ScriptedUpstream("tickets") as up, ProxyServer(ProxyConfig(upstream=up.base_url, store=str(path), port=0,
                                                                     answer=False)) as px:
        assert httpx2.get(px.base_url + f"/files/{key}").status_code == 200
        px.proxy.recorder.flush()
    with Store(path) as st:
        (row,) = st.spans()
        assert row["site"] == f"opaque/GET /v1/files/{REDACTED}"
    assert key.encode() not in store_blob(path)
