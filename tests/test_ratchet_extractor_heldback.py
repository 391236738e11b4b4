"""Records per field, on a 4-field extractor written apart from the invoice bench: shipping
notices → ``{tracking_no, weight_kg, carrier, service}``. ``tracking_no``, ``weight_kg`` and
``carrier`` are regular (a pattern, a number, a named word); ``service`` is read from cue words,
one of which (``priority``) the simulated reference reads either way per call. Through
``auto.ratchet`` from no witnesses (each compile awaited), the claim is that the regular fields
are answered at tier-1 from the first compile, at 20 witnesses, and every tier-1 record has them
right; it is not met (the test is a strict expected failure naming the measured cause).

A record answers at tier-1 only whole: a record with some fields from programs and the rest
from the reference would still pay the reference call, and the reference's own record is the
answer parity asks for. So the record waits for its hardest field; the gate's per-field checks
(second test) say which field that is, and that the regular ones pass on their own."""

from __future__ import annotations

import random
import re

import pytest

import auto

CARRIERS = ("UPS", "DHL", "FedEx", "USPS")
EXPRESS = ("overnight", "next-day", "express")
STANDARD = ("ground", "economy", "standard")
FRAMES = ("Your parcel {t} ({w} kg) left our warehouse with {c}, {s} shipping.",
          "Shipment notice: tracking {t}, carrier {c}, weight {w} kg, service {s}.",
          "{c} picked up {t} today. Weight: {w} kg. Service level: {s}.",
          "Hello! Package {t} is on its way via {c} ({s}); it weighs {w} kg.")


def notice(rng: random.Random) -> str:
    t = "1Z" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(8))
    w = f"{rng.randint(1, 40)}.{rng.randint(0, 9)}"
    s = rng.choice(EXPRESS + STANDARD + ("priority",))
    return rng.choice(FRAMES).format(t=t, w=w, c=rng.choice(CARRIERS), s=s)


def reading(text: str, rng: random.Random | None = None) -> dict:
    """The careful reading; ``priority`` is express or standard at random per call (with ``rng``)."""
    service = "standard"
    if any(w in text for w in EXPRESS):
        service = "express"
    elif "priority" in text:
        service = "express" if rng is not None and rng.random() < 0.5 else "standard"
    return {"tracking_no": re.search(r"1Z[A-Z0-9]{8}", text).group(0),
            "weight_kg": float(re.search(r"(\d+\.\d) kg", text).group(1)),
            "carrier": next(c for c in CARRIERS if c in text), "service": service}


@pytest.mark.xfail(strict=True, reason=(
    "not met (measured): no tier-1 answer in 60 notices. At 20 witnesses each field is judged on its own fold "
    "part: tracking_no and weight_kg 20/20 (one-sided 98.75% Clopper-Pearson bound 0.803, above the gate's "
    "0.75), carrier right on the 15 of 20 it answers (0.747), service 12/20 (0.332): 3 of the 5 folds find no "
    "service program at 16 training witnesses, so the record, answered at tier-1 only whole, agrees on 3/20 "
    "out of fold. At 30 witnesses the record agrees on 18/30; at 50 every field meets the bars on its own "
    "(carrier and service 48/50, bound 0.847) but the record misses on 4 (46/50 < 0.95); the program rung at "
    "40 and 60 is predicted to fail and skipped"))
def test_regular_fields_are_tier1_from_the_first_20_witnesses(tmp_path):
    ref_rng = random.Random(5)
    calls = [0]

    def extract(text: str) -> dict:
        calls[0] += 1
        return reading(text, ref_rng)

    rng = random.Random(11)
    stream = [notice(rng) for _ in range(60)]
    r = auto.ratchet(extract, store=tmp_path / "s.sqlite", worker="thread")
    tiers, answers = [], []
    try:
        for text in stream:
            res = r.call_result({"text": text})
            tiers.append(res.tier)
            answers.append(res.answer)
            r.wait_idle(timeout_s=600)
    finally:
        r.close()
    t1 = [i for i, t in enumerate(tiers) if t == "tier-1"]
    assert t1 and t1[0] <= 21, tiers[:30]  # the first compile runs on the 20th witness
    assert len(t1) >= 25  # most of the 40 notices after it
    regular = ("tracking_no", "weight_kg", "carrier")
    assert all(answers[i][f] == reading(stream[i])[f] for i in t1 for f in regular)


def test_the_gate_judges_each_field_on_its_own_and_names_the_one_holding_the_record_back(tmp_path):
    from auto.compile import compile_task
    from auto.errors import GateRefused
    from auto.gate import CheckName, EvalRun
    from auto.store import Store

    ref_rng, rng = random.Random(5), random.Random(11)
    store = Store(tmp_path / "g.sqlite")
    for _ in range(20):  # the first 20 witnesses of the stream above
        text = notice(rng)
        store.add_witness(task="extract", input={"text": text}, output=reading(text, ref_rng))
    with pytest.raises(GateRefused) as e:
        compile_task(store, "extract", out_path=tmp_path / "g.wasm", rungs=["program"])
    assert "held back by" in e.value.reason and "'service'" in e.value.reason.split("held back by")[1]
    run = EvalRun.from_record(next(r.record for r in store.eval_runs("extract")
                                   if r.record["candidate"].get("kind") == "program"))
    fields = run.field_checks()
    assert set(fields) == {"tracking_no", "weight_kg", "carrier", "service"}
    assert all(c.informational for c in fields.values())
    conf = run.check(CheckName.OUT_OF_FOLD_AGREEMENT)["confidence"]
    for f in ("tracking_no", "weight_kg", "carrier"):  # each field's own fold part: right wherever it answered
        c = fields[f]
        assert c["agree"] == c["n"] > 0, (f, c.figures)
        assert c["ci95_low"] == pytest.approx((1 - conf) ** (1 / c["n"]))  # the one-sided CP bound of n/n
    assert all(fields[f]["n"] == 20 and fields[f]["meets_bar"] for f in ("tracking_no", "weight_kg"))
    assert not fields["service"]["meets_bar"] and fields["service"]["rate"] < 0.95
    store.close()
