"""The ratchet's noise probe (:mod:`auto.ratchet.probe`) and the risk monitor's level.

The probe re-asks inputs answered from a single witness only while a refused specialist is near
certification, within its cap, choosing the inputs by a rule that never reads their answers; the
re-asks become re-asked evidence of the store (the excess certificate's noise estimate). The
online risk monitor tests the level the generation's certificate was tested at.
"""

from __future__ import annotations

from pathlib import Path

from auto_runtime.guard.entries import guard_entry

from auto.compile.witnesses import WitnessSet
from auto.gate import Contract
from auto.guards.noise import reference_noise
from auto.ratchet import CompilePolicy, Ratchet
from auto.ratchet.events import Fired, Lane, Trigger
from auto.ratchet.evidence import GenerationEvidence, certified_level, monitored_level
from auto.ratchet.policy import noise_evidence_grew, slow_rungs_could_pass

NEVER = CompilePolicy(first_at=10_000, first_repeats=10_000)
NEAR = {"specialist": {"smallest_certifiable_epsilon": 0.06, "calibration_n": 500, "witnesses": 8, "reasked": 0}}
FAR = {"specialist": {"smallest_certifiable_epsilon": 0.2, "calibration_n": 500, "witnesses": 8, "reasked": 0}}


class Labeller:
    """A deterministic reference: the label is the input number modulo ``k`` (plus a prefix)."""

    def __init__(self, prefix: str = "a", k: int = 3) -> None:
        self.prefix, self.k, self.calls = prefix, k, 0

    def __call__(self, inp: dict) -> str:
        self.calls += 1
        return f"{self.prefix}{inp['n'] % self.k}"


def make(tmp_path: Path, ref, name: str = "p", **contract) -> Ratchet:
    """A ratchet with the probe turned on (150 per task unless ``contract`` says otherwise)."""
    c = Contract(task="probe", **{"noise_probe_max": 150, **contract})
    return Ratchet(ref, tmp_path / f"{name}.sqlite", "probe", contract=c, worker="thread", audit_rate=0.05,
                   programs=False, policy=NEVER)


def serve(r: Ratchet, distinct: int, rounds: int) -> list[int]:
    """Each input once (witnessed), then ``rounds`` rounds of repeats (overlay answers); the probe
    count after every call."""
    after = []
    for n in range(distinct):
        r.call({"n": n})
        after.append(r.noise_probe.probes)
    for _ in range(rounds):
        for n in range(distinct):
            r.call({"n": n})
            r.wait_idle(30)
            after.append(r.noise_probe.probes)
    return after


def test_no_probe_without_a_refused_specialist_near_certification(tmp_path):
    ref = Labeller()
    r = make(tmp_path, ref)
    serve(r, 10, 5)
    d = r.status()["noise_probe"]
    assert d["probes"] == 0 and d["armed"] is None and "no specialist attempt refused" in d["why_not"]
    assert ref.calls == 10  # an exact dict's spend: nothing re-asked
    r.noise_probe.update(FAR)  # refused, but far beyond epsilon + margin: noise cannot turn it
    serve(r, 10, 3)
    assert r.noise_probe.probes == 0 and ref.calls == 10 and "beyond epsilon" in r.status()["noise_probe"]["why_not"]
    r.close()


def test_the_probe_fires_when_near_stays_within_its_cap_and_its_witnesses_are_reasked_evidence(tmp_path):
    ref = Labeller()
    r = make(tmp_path, ref, noise_probe_max=6, noise_probe_share=0.25)
    r.noise_probe.update(NEAR)
    assert r.noise_probe.armed is not None
    after = serve(r, 20, 4)
    calls = range(1, len(after) + 1)
    assert all(p <= min(6, int(0.25 * c)) for p, c in zip(after, calls))  # the cap holds at every call
    assert r.noise_probe.probes == 6 and ref.calls == 20 + 6  # each probe is one paid call
    d = r.status()["noise_probe"]
    assert (d["answered"], d["disagreeing"]) == (6, 0)
    assert r.tiered.audit.stats()["probed"] == 6
    # the store now holds 6 re-asked inputs: the excess certificate's noise evidence
    ws = WitnessSet.read(r.store, "probe")
    noise = reference_noise(ws.groups)
    assert (noise.reasked, noise.disagreeing) == (6, 0)
    assert r.state.reasked == 6 and len(r.capture.reasked) == 6
    r.close()


def test_no_input_is_probed_twice_and_the_contract_can_turn_it_off(tmp_path):
    r = make(tmp_path, Labeller(), noise_probe_max=100, noise_probe_share=1.0)
    r.noise_probe.update(NEAR)
    serve(r, 5, 6)
    assert r.noise_probe.probes == 5  # one probe per single-witness input, then nothing left to probe
    r.close()
    off = make(tmp_path, Labeller(), name="off", noise_probe_max=0)
    off.noise_probe.update(NEAR)
    serve(off, 5, 3)
    assert off.noise_probe.probes == 0 and "turns it off" in off.status()["noise_probe"]["why_not"]
    off.close()


def test_which_inputs_are_probed_does_not_depend_on_their_answers(tmp_path):
    chosen = []
    for i, ref in enumerate((Labeller("a", 3), Labeller("z", 7))):
        r = make(tmp_path, ref, name=f"s{i}", noise_probe_max=8, noise_probe_share=0.1)
        r.noise_probe.update(NEAR)
        serve(r, 30, 3)
        chosen.append(sorted(r.noise_probe._keys))
        r.close()
    assert chosen[0] == chosen[1] and len(chosen[0]) == 8


def test_a_noisy_reference_shows_in_what_the_probes_found(tmp_path):
    state = {"calls": 0}

    def flaky(inp: dict) -> str:  # the 14th call (the second probe) answers the runner-up
        state["calls"] += 1
        return "b" if state["calls"] == 14 else "a"

    r = make(tmp_path, flaky, noise_probe_max=4, noise_probe_share=1.0)
    r.noise_probe.update(NEAR)
    serve(r, 12, 1)
    d = r.status()["noise_probe"]
    noise = reference_noise(WitnessSet.read(r.store, "probe").groups)
    assert (d["probes"], d["answered"], d["disagreeing"]) == (4, 4, 1)
    assert (noise.reasked, noise.disagreeing) == (4, 1)
    r.close()


def test_noise_evidence_lets_a_near_specialist_into_the_lane(tmp_path):
    assert not noise_evidence_grew(0, 29, 30) and noise_evidence_grew(0, 30, 30)
    assert not noise_evidence_grew(30, 40, 30) and noise_evidence_grew(30, 45, 30)
    assert not noise_evidence_grew(0, 500, None)
    spec = NEAR["specialist"]
    assert not slow_rungs_could_pass(spec, 100, 110, 0.05)
    assert slow_rungs_could_pass(spec, 100, 110, 0.05, noise_allowance=0.03)
    r = make(tmp_path, Labeller())
    r.state.refusal = {"specialist": {**spec, "witnesses": 100, "reasked": 0}}
    r.state.witnesses = 110
    lane, rungs = r.scheduler.lane(Fired(Trigger.GROWTH))
    assert lane is Lane.TABLE_PREDICTED and "specialist" not in rungs
    r.state.repeats_consistent = 30  # thirty re-asked inputs since the refusal
    lane, rungs = r.scheduler.lane(Fired(Trigger.GROWTH))
    assert lane is Lane.FULL or "specialist" in rungs
    r.close()


def test_the_risk_monitor_tests_the_certificates_risk_level():
    stack = guard_entry({"method": "stack", "components": [
        {"method": "selective-risk", "threshold": 0.7, "epsilon": 0.05, "delta": 0.05, "risk_level": 0.08}]})
    assert certified_level(stack) == 0.08
    uncertified = guard_entry({"method": "stack", "components": [
        {"method": "selective-risk", "threshold": None, "epsilon": 0.05, "risk_level": 0.08}]})
    assert certified_level(uncertified) is None
    assert monitored_level(0.08, 0.05) == 0.08 and monitored_level(None, 0.05) == 0.05
    assert monitored_level(0.01, 0.05) == 0.05  # never below the contract's epsilon
    ev = GenerationEvidence(3, 0.05, 0.05, 0.12)
    plain = GenerationEvidence(3, 0.05, 0.05)
    assert ev.monitor.epsilon == 0.12 and plain.monitor.epsilon == 0.05 and ev.overlay_monitor.epsilon == 0.05
    # audits disagreeing at 10%: a certificate on the excess tested at 0.12 holds; at 0.05 it is rejected
    alarms = {"excess": None, "plain": None}
    for i in range(600):
        bad = i % 10 == 0
        if ev.audited(bad, table_hit=False) and alarms["excess"] is None:
            alarms["excess"] = i
        if plain.audited(bad, table_hit=False) and alarms["plain"] is None:
            alarms["plain"] = i
    assert alarms["excess"] is None and alarms["plain"] is not None


def test_an_installed_specialist_is_monitored_at_its_manifests_risk_level(tmp_path):
    from auto_runtime import Artifact

    from test_ratchet import drive, make as make_triage, stream

    r = make_triage(tmp_path)
    drive(r, stream(90))
    assert r.generation is not None
    stored = r.store.get_artifact(r.installer.installed_id)
    level = certified_level(Artifact.load(stored.wasm).typed_manifest.guard)
    assert level is not None  # the triage specialist certifies a threshold here
    assert r.evidence.risk_level == level and r.evidence.monitor.epsilon == monitored_level(level, r.contract.epsilon)
    r.close()


def test_the_default_contract_pays_for_no_probe(tmp_path):
    """Off unless a contract turns it on: on the measured 3,000-item stream it cost more than it saved."""
    assert Contract(task="probe").noise_probe_max == 0
    ref = Labeller()
    c = Contract(task="probe")
    r = Ratchet(ref, tmp_path / "d.sqlite", "probe", contract=c, worker="thread", audit_rate=0.05,
                programs=False, policy=NEVER)
    r.noise_probe.update(NEAR)  # a near miss would arm a probe that is turned on
    serve(r, 10, 5)
    assert r.noise_probe.probes == 0 and ref.calls == 10
    r.close()
