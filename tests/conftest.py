"""Shared fixtures: a recorded triage store and a compiled artifact, built once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


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
    ``AUTO_TEST_POSTGRES`` (a role that may create databases; ``bash .ci/postgres.sh`` starts one).
    Skipped without it, except in CI (``CI`` set), where a missing server fails the test."""
    admin = os.environ.get("AUTO_TEST_POSTGRES")
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
