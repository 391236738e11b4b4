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
