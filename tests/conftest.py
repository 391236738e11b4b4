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
