"""Shared fixtures: a recorded triage store and a compiled artifact, built once per session.

Hypothesis: with ``CI`` set (``.ci/run`` sets ``CI=1``) the ``ci`` profile is loaded: examples are
derandomized (a fixed seed per test) and no example database is read or written, so a CI run on a
clean checkout is the same every time. Locally the default profile draws fresh examples and
replays the failures it saved.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def sim_env():
    """The embedded simulator on loopback, with the openai client environment pointed at it."""
    from bench.sim import SimServer
    from bench.triage import agent

    saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    with SimServer(seed=0) as sim:
        os.environ["OPENAI_BASE_URL"] = sim.base_url
        os.environ["OPENAI_API_KEY"] = "sk-test-not-a-key"
        agent.reset_client()
        yield sim
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    agent.reset_client()


@pytest.fixture(scope="session")
def triage_store(tmp_path_factory, sim_env) -> Path:
    """A store with the triage agent recorded twice over the 400 generated training tickets."""
    import auto
    from auto.store import Store
    from bench.triage import agent, corpus

    path = tmp_path_factory.mktemp("store") / "triage.sqlite"
    tickets = corpus.default_corpus(seed=0)["train"]
    with Store(path) as st, auto.recording(st):
        for _ in range(2):
            for t in tickets:
                agent.triage(t.ticket)
    return path


@pytest.fixture(scope="session")
def triage_artifact(tmp_path_factory, triage_store) -> tuple[Path, object]:
    """(path, CompileOutcome) of one compiled generation from :func:`triage_store`."""
    from auto.compile import compile_task
    from auto.store import Store

    out = tmp_path_factory.mktemp("art") / "triage.wasm"
    with Store(triage_store) as st:
        outcome = compile_task(st, "triage", out_path=out)
    return out, outcome


@pytest.fixture
def pg_dsn():
    """A fresh PostgreSQL database for one test (dropped after), on the server named by
    ``AUTO_TEST_POSTGRES`` (a role that may create databases; ``bash .ci/postgres.sh`` starts one,
    and ``make test`` runs it). Skipped with ``AUTO_TEST_POSTGRES=none``, and without it except in
    CI (``CI`` set), where a missing server fails the test."""
    admin = os.environ.get("AUTO_TEST_POSTGRES")
    if admin == "none":
        pytest.skip("AUTO_TEST_POSTGRES=none: the PostgreSQL store's tests are skipped")
    if not admin:
        if os.environ.get("CI"):
            pytest.fail("CI runs the PostgreSQL tests: AUTO_TEST_POSTGRES is not set (.ci/run starts a server)")
        pytest.skip("no PostgreSQL server for the tests: set AUTO_TEST_POSTGRES (bash .ci/postgres.sh starts one)")
    import psycopg
    from urllib.parse import urlsplit, urlunsplit

    name = "auto_test_" + os.urandom(6).hex()
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(admin)
    yield urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def store_blob(path) -> bytes:
    """Every byte a store keeps about its content: its files (the database, WAL, journal folder)
    and, since payloads are compressed, the decoded text of every payload — what a test that a
    secret never reaches the disk must search."""
    import glob

    from auto.store import Store

    files = [Path(f) for f in glob.glob(str(path) + "*")]
    files = [q for f in files for q in ([f] if f.is_file() else f.rglob("*")) if q.is_file()]
    blob = b"".join(f.read_bytes() for f in files)
    with Store(path) as st:
        texts = [t for batch in st.iter_payloads() for _i, _d, t in batch]
    return blob + "\n".join(texts).encode("utf-8")
