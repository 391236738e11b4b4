"""The per-call wall-clock deadline: set from the manifest's measured fuel with a margin and a
floor (never a fixed 100 ms), an explicit deadline kept (a timeout is a deopt: test_tiered)."""

from __future__ import annotations

import pytest

from auto_runtime import Artifact, Limits
from auto_runtime.sandbox import (DEADLINE_FLOOR_MS, DEADLINE_MARGIN, DEADLINE_NS_PER_FUEL, DEFAULT_FUEL,
                                  deadline_ms, manifest_fuel_max)

from .wasm_fixtures import build, echo_wat, manifest


def test_deadline_formula_has_a_floor_and_grows_with_the_measured_fuel():
    assert Limits().timeout_ms is None  # unset: the artifact's manifest decides
    assert deadline_ms(None) == deadline_ms(1_000) == DEADLINE_FLOOR_MS >= 1000.0
    assert deadline_ms(None, fuel_budget=10**10) == 10**10 * DEADLINE_NS_PER_FUEL / 1e6  # the budget burns first
    big = 50 * DEFAULT_FUEL
    assert deadline_ms(big) == big * DEADLINE_MARGIN * DEADLINE_NS_PER_FUEL / 1e6 > DEADLINE_FLOOR_MS
    for bad in ({}, {"fuel_per_call": None}, {"fuel_per_call": {"max": True}}, {"fuel_per_call": {"max": -3}},
                {"fuel_per_call": {"max": 2.5}}):
        assert manifest_fuel_max(bad) is None
    assert manifest_fuel_max({"fuel_per_call": {"p50": 1, "max": 7}}) == 7


@pytest.mark.parametrize("fpc", [None, {"p50": 900, "p95": 1000, "max": 1200, "n": 3, "of": 3},
                                 {"p50": 10**8, "p95": 10**8, "max": 2 * 10**8, "n": 1, "of": 1}])
def test_a_loaded_artifact_takes_its_deadline_from_its_manifest(fpc):
    man = manifest(**({"fuel_per_call": fpc} if fpc is not None else {}))
    art = Artifact.load(build(echo_wat(), man))
    expected = deadline_ms(None if fpc is None else fpc["max"], DEFAULT_FUEL)
    assert art.limits.timeout_ms == expected >= DEADLINE_FLOOR_MS
    assert art.describe()["limits"]["timeout_ms"] == expected
    # an explicit deadline is the caller's and is kept as given
    assert Artifact.load(build(echo_wat(), man), limits=Limits(timeout_ms=7.0)).limits.timeout_ms == 7.0
    # only the deadline is derived: fuel and memory stay as given
    lim = Artifact.load(build(echo_wat(), man), limits=Limits(fuel=123_456, memory_bytes=1 << 20)).limits
    assert (lim.fuel, lim.memory_bytes, lim.timeout_ms) == (123_456, 1 << 20, deadline_ms(manifest_fuel_max(man), 123_456))

