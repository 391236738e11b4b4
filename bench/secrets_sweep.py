"""``python -m bench.secrets_sweep [--out DIR]``: plant every secret format the README claims in
every surface Auto records, and search every byte it writes; prints (and writes ``sweep.json``)
the number of survivors.

Formats (:data:`SECRETS`, each made up, none a live credential): the recorder's patterns
(OpenAI/Anthropic ``sk-…``, PEM private keys, JWTs, bearer tokens, GitHub fine-grained
``github_pat_…``, an AWS secret key after its name, unquoted), the ``detect-secrets`` detectors
it uses (AWS key id, Azure storage key, a password in a URL, Discord, GitHub, GitLab, Mailchimp,
npm, OpenAI's marked keys, PyPI, SendGrid, Slack, Square, Stripe), the values of secret-named
environment variables (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ``*_AUTH``,
``*_SK``, ``*_PASS``, ``*_PWD``) and the values of credential headers (``Authorization``,
``X-Auth-Token``, ``X-Access-Token``, ``X-Api-Token``, ``api-key``).

Surfaces, each on its own store (the simulated reference model answers; everything on loopback):

* ``recorder`` — ``@auto.task`` arguments and result, a system prompt and a user prompt, tool
  arguments and results (``@auto.tool``), an error message, request headers and a query string
  of a model call (``openai`` client against the simulator);
* ``proxy`` — the same client through ``auto proxy``: prompts, headers, a key in the request path
  and in the query string, a body that is not JSON, an error message of an unreachable path;
* ``serve`` — ``auto serve --store --reference``: inputs answered by the reference and captured;
* ``tiered`` — ``TieredTask(capture=store.add_witness)``;
* ``otlp`` — an OTLP/JSON file whose span names and attributes hold the secrets, imported.

Secrets without a recognisable format (credential header values, the client's key) are secret
only where Auto sees them as credentials, so they are planted only in the recorder's and the
proxy's surfaces (in the prompts too).

Searched: every file of each store (database, WAL, journal folder), every payload decoded
(payloads are compressed on disk), each store's Parquet and OTLP exports, and every log line
the run wrote (the ``auto`` loggers; the HTTP clients' own logs are not Auto's). A survivor is a ``(secret, surface)``
pair whose secret value occurs anywhere in those bytes (as is, JSON-escaped or percent-encoded).
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

SECRETS: dict[str, str] = {
    "openai-project": "sk-proj-Ab3dEf9hIjKlMnOpQrStUvWxYz0123456789",
    "openai-marked": "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",
    "anthropic": "sk-ant-api03-abcDEF123456789012345678901234567890-xyzAA",
    "aws-key-id": "AKIAIOSFODNN7EXAMPLE",
    "aws-secret-unquoted": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "azure-storage": "Zm9vYmFy" * 11,
    "url-password": "hunter2-Url-Pass-9911",
    "discord": "MTAxMjM0NTY3ODkwMTIzNDU2.GaBcDe.abcdefghijklmnopqrstuvwxyz0",
    "github": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "github-fine-grained": "github_pat_11ABCDEFG0123456789abc_" + "aB1" * 19 + "xy",
    "gitlab": "glpat-abcdefghij0123456789",
    "mailchimp": "0123456789abcdef0123456789abcdef-us12",
    "npm": "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "pypi": "pypi-AgEIcHlwaS5vcmc" + "A1b2C3d4E5" * 7,
    "sendgrid": "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
    "slack": "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
    "square": "sq0csp-" + "aB3dE" * 8 + "xyz",
    "stripe": "sk_live_abcdefghijklmnopqrstuvwx",
    "jwt": ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
            "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAz1x2y3\nq9w8e7r6t5y4\n-----END RSA PRIVATE KEY-----",
    "bearer": "abcdef0123456789ABCDEF0123456789",
    "env-key": "envKEYvalue-0a1b2c3d4e",
    "env-token": "envTOKENvalue-0a1b2c3d",
    "env-secret": "envSECRETvalue-0a1b2c",
    "env-password": "envPASSWORDvalue-0a1b",
    "env-auth": "envAUTHvalue-0a1b2c3d4",
    "env-sk": "envSKvalue-0a1b2c3d4e5f",
    "env-pass": "envPASSvalue-0a1b2c3d",
    "env-pwd": "envPWDvalue-0a1b2c3d4e",
    "header-x-auth-token": "hdrAuthTok-7Q2w9E4r6T",
    "header-x-access-token": "hdrAccessTok-8W3e0R5t",
    "header-x-api-token": "hdrApiTok-9E4r1T6y7U",
    "header-api-key": "hdrApiKey-0R5t2Y7u8I",
    "client-key": "client-own-key-3Fh8Jk2Lq9",
}

ENV = {"SWEEP_API_KEY": "env-key", "SWEEP_TOKEN": "env-token", "SWEEP_SECRET": "env-secret",
       "SWEEP_PASSWORD": "env-password", "SWEEP_AUTH": "env-auth", "PAYMENTS_SK": "env-sk", "DB_PASS": "env-pass",
       "MYSQL_PWD": "env-pwd"}

HEADERS = {"X-Auth-Token": "header-x-auth-token", "X-Access-Token": "header-x-access-token",
           "X-Api-Token": "header-x-api-token", "api-key": "header-api-key"}


BY_CREDENTIAL = frozenset({*HEADERS.values(), "client-key"})
"""Secrets with no recognisable format: secret only where Auto sees them as credentials (a model
call's headers and client key, in the recorder and the proxy); planted only there."""


def planted_text(credentials: bool) -> str:
    """Every secret in context (the AWS secret after its name, the URL password in a URL, the
    bearer token after ``Bearer``, the Azure key after ``AccountKey=``, the npm token in an .npmrc
    line); the :data:`BY_CREDENTIAL` ones only with ``credentials``."""
    s = SECRETS
    parts = [f"{k}: {v}" for k, v in s.items() if k not in ("aws-secret-unquoted", "url-password", "bearer",
                                                            "azure-storage", "npm")
             and (credentials or k not in BY_CREDENTIAL)]
    parts += [f"aws_secret_access_key = {s['aws-secret-unquoted']}", f"db at https://bob:{s['url-password']}@db.example/x",
              f"Authorization: Bearer {s['bearer']}", f"AccountKey={s['azure-storage']}",
              f"//registry.npmjs.org/:_authToken={s['npm']}"]
    return "\n".join(parts)


def _client(base_url: str) -> Any:
    import openai

    return openai.OpenAI(base_url=base_url, api_key=SECRETS["client-key"], max_retries=0,
                         default_headers={h: SECRETS[k] for h, k in HEADERS.items()})


def _model_calls(c: Any, text: str) -> None:
    from bench.triage.agent import SYSTEM_PROMPT

    c.chat.completions.create(model="auto-sim-1", temperature=0.0, messages=[
        {"role": "system", "content": f"{SYSTEM_PROMPT}\nsystem notes: {text}"}, {"role": "user", "content": f"ticket: {text}"}],
        extra_query={"token": SECRETS["github"], "k": SECRETS["stripe"]})


def recorder_surface(folder: Path, base_url: str, text: str) -> list[Path]:
    import auto

    store = folder / "recorder.sqlite"
    c = _client(base_url)

    @auto.tool("lookup")
    def lookup(query: str) -> dict:
        return {"result": f"found {query}"}

    @auto.task("sweep")
    def sweep(ticket: str, key: str) -> dict:
        _model_calls(c, ticket)
        lookup(query=ticket)
        return {"answer": ticket, "key": key}

    @auto.task("sweep-error")
    def fails(note: str) -> None:
        raise ValueError(f"could not use {note}")

    with auto.recording(store):
        sweep(text, SECRETS["client-key"])
        try:
            fails(text)
        except ValueError:
            pass
    return [store]


def proxy_surface(folder: Path, base_url: str, text: str) -> list[Path]:
    import httpx2

    from auto.proxy import ProxyConfig, ProxyServer

    store = folder / "proxy.sqlite"
    with ProxyServer(ProxyConfig(upstream=base_url, store=str(store), port=0, answer=False)) as px:
        _model_calls(_client(px.base_url), text)
        hdrs = {h: SECRETS[k] for h, k in HEADERS.items()} | {"Authorization": f"Bearer {SECRETS['client-key']}"}
        httpx2.get(px.base_url + f"/files/{SECRETS['openai-project']}", params={"key": SECRETS["gitlab"]}, headers=hdrs)
        httpx2.post(px.base_url + "/chat/completions", content=f"not json {text}".encode(), headers=hdrs)
        httpx2.get(px.base_url + f"/nowhere/{SECRETS['sendgrid']}", headers=hdrs)
        px.proxy.recorder.flush()
    return [store]


def _artifact(folder: Path) -> tuple[Path, Path]:
    """A compiled memo artifact of a small task (store, wasm path)."""
    from auto.compile import compile_task
    from auto.store import Store

    store = folder / "serve.sqlite"
    with Store(store) as st:
        for i in range(40):
            for _ in range(2):
                st.add_witness("sweep-serve", {"ticket": f"known ticket {i}"}, "billing" if i % 2 else "bug")
        out = compile_task(st, "sweep-serve", rungs=["memo"], out_path=folder / "serve.wasm")
    return store, Path(out.artifact_path)


def serve_surface(folder: Path, text: str) -> list[Path]:
    import shutil
    import threading
    import time

    import httpx2
    import uvicorn

    from auto.asgi import uvicorn_config
    from auto.serve import ArtifactService, ServeConfig

    store, wasm = _artifact(folder)
    tiered_store = folder / "tiered.sqlite"
    shutil.copy(store, tiered_store)
    (folder / "sweep_ref.py").write_text("def answer(ticket):\n    return 'seen: ' + ticket\n")
    svc = ArtifactService(ServeConfig(store=str(store), reference="sweep_ref:answer", cwd=str(folder)))
    server = uvicorn.Server(uvicorn_config(svc.app, "127.0.0.1", 0))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    while not server.started:
        time.sleep(0.01)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        aid = next(iter(svc.artifacts))
        r = httpx2.post(url + f"/v1/artifacts/{aid}/run", json={"ticket": f"new {text}"})
        assert r.status_code == 200, r.text
    finally:
        server.should_exit = True
        t.join(10)
        svc.close()
    from auto_runtime import Artifact, TieredTask

    from auto.store import Store

    with Store(tiered_store) as st:
        TieredTask(Artifact.load(wasm), reference=lambda inp: f"seen {inp['ticket']}", capture=st.add_witness)(
            {"ticket": f"never seen {text}"})
    return [store, tiered_store]


def otlp_surface(folder: Path, text: str) -> list[Path]:
    from auto.interchange.otlp import import_otlp
    from auto.store import Store

    def attr(k: str, v: str) -> dict:
        return {"key": k, "value": {"stringValue": v}}

    spans = [{"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": f"agent {SECRETS['jwt']}",
              "startTimeUnixNano": "1", "endTimeUnixNano": "2",
              "attributes": [attr("gen_ai.operation.name", "invoke_agent"), attr("gen_ai.agent.name", f"a {SECRETS['slack']}"),
                             attr("note", text)]},
             {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "c7ad6b7169203332", "parentSpanId": "b7ad6b7169203331",
              "name": f"chat {SECRETS['anthropic']}", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
              "attributes": [attr("gen_ai.operation.name", "chat"), attr("gen_ai.request.model", "m"),
                             attr("gen_ai.prompt", text), attr("gen_ai.completion", text), attr("other", text)]}]
    f = folder / "in.otlp.json"
    f.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}]}))
    store = folder / "otlp.sqlite"
    with Store(store) as st:
        import_otlp(st, f)
    f.unlink()  # the input file is the user's, not something Auto wrote
    return [store]


def _forms(value: str) -> set[bytes]:
    """The byte forms a secret can be written in: as is, JSON-escaped (a PEM block's newlines),
    percent-encoded (a query string)."""
    import urllib.parse

    return {value.encode(), json.dumps(value)[1:-1].encode(), urllib.parse.quote(value, safe="").encode(),
            urllib.parse.quote_plus(value).encode()}


def written_bytes(store: Path, folder: Path) -> dict[str, bytes]:
    """Every byte Auto wrote about ``store``: its files, its decoded payloads, its exports."""
    from auto.interchange.otlp import export_otlp
    from auto.interchange.parquet import export_parquet
    from auto.store import Store

    out: dict[str, bytes] = {}
    with Store(store) as st:
        out["payloads"] = "\n".join(t for batch in st.iter_payloads() for _i, _d, t in batch).encode("utf-8", "surrogatepass")
        out["spans via the API"] = json.dumps(list(st.iter_spans()) + st.traces(), default=str).encode()
        export_parquet(st, folder / f"{store.stem}.parquet")
        export_otlp(st, folder / f"{store.stem}.otlp.jsonl")
    for f in glob.glob(str(store) + "*"):
        p = Path(f)
        for q in ([p] if p.is_file() else sorted(p.rglob("*"))):
            if q.is_file():
                out[q.name] = q.read_bytes()
    for q in sorted((folder / f"{store.stem}.parquet").rglob("*")):
        if q.is_file():
            out[f"export {q.name}"] = q.read_bytes()
    out["export otlp"] = (folder / f"{store.stem}.otlp.jsonl").read_bytes()
    return out


def run(out_dir: Path) -> dict[str, Any]:
    """Plant, search, report (see the module docstring)."""
    from bench.sim import SimServer

    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / "sweep.log"
    handler = logging.FileHandler(log_path)
    logging.getLogger("auto").addHandler(handler)  # Auto's loggers ("auto", "auto.proxy", …), not the clients'
    logging.getLogger("auto").setLevel(logging.DEBUG)
    for name, key in ENV.items():
        os.environ[name] = SECRETS[key]
    text, plain = planted_text(True), planted_text(False)
    folder = Path(tempfile.mkdtemp(prefix="auto-sweep-", dir=out_dir))
    surfaces: dict[str, list[Path]] = {}
    with SimServer(seed=0, error_rate=0.0) as sim:
        surfaces["recorder"] = recorder_surface(folder, sim.base_url, text)
        surfaces["proxy"] = proxy_surface(folder, sim.base_url, text)
    surfaces["serve+tiered"] = serve_surface(folder, plain)
    surfaces["otlp"] = otlp_surface(folder, plain)
    handler.flush()
    logs = log_path.read_bytes()
    survivors: list[dict[str, str]] = []
    spans = 0
    for surface, stores in surfaces.items():
        for store in stores:
            blobs = written_bytes(store, folder)
            blobs["logs"] = logs
            from auto.store import Store

            with Store(store) as st:
                spans += st.counts().get("spans", 0)
            for name, value in SECRETS.items():
                if name in BY_CREDENTIAL and surface not in ("recorder", "proxy"):
                    continue
                forms = _forms(value)
                for where, blob in blobs.items():
                    if any(f in blob for f in forms):
                        survivors.append({"secret": name, "surface": surface, "store": store.name, "where": where})
    report = {"formats": len(SECRETS), "surfaces": sorted(surfaces), "stores": sum(len(v) for v in surfaces.values()),
              "spans_written": spans, "survivors": len({(s["secret"], s["surface"]) for s in survivors}),
              "survivor_places": survivors}
    (out_dir / "sweep.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/secrets-sweep", help="Where sweep.json, the log and the stores go.")
    args = ap.parse_args(argv)
    report = run(Path(args.out))
    print(json.dumps({k: v for k, v in report.items() if k != "survivor_places"}))
    for s in report["survivor_places"]:
        print(f"survivor: {s['secret']} in {s['surface']} ({s['store']}: {s['where']})", file=sys.stderr)
    return 0 if report["survivors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
