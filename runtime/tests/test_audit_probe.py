"""ShadowAudit.probe: audits queued by the host outside the seeded selection and the repeat budget."""

from auto_runtime.audit import ShadowAudit


def _selected(a: ShadowAudit, probes: bool) -> list[int]:
    picked = []
    for i in range(200):
        if a.offer({"i": i}, "x", score=0.5):
            picked.append(i)
        if probes and i % 7 == 0:
            assert a.probe({"p": i}, "x", score=0.0, origin="overlay")
        a.wait(5)
    return picked


def test_a_probe_is_audited_outside_the_budget_and_leaves_the_selection_unchanged():
    seen = []
    a = ShadowAudit(lambda inp: "y" if "p" in inp else "x", seen.append, rate=0.1, hit_rate=1.0, hit_budget=0.0, seed=3)
    assert not a.offer({"r": 0}, "x", score=0.0)  # the budget (0) refuses every repeat's audit
    with_probes = _selected(a, True)
    b = ShadowAudit(lambda inp: "x", None, rate=0.1, hit_rate=1.0, hit_budget=0.0, seed=3)
    assert not b.offer({"r": 0}, "x", score=0.0)
    assert with_probes == _selected(b, False)  # probes take no draw
    st = a.stats()
    assert st["probed"] == 29 and st["hit_selected"] == 0 and st["n"] == 29 + len(with_probes)
    probes = [r for r in seen if r.get("probe")]
    assert len(probes) == 29 and all(r["origin"] == "overlay" and r["agree"] is False for r in probes)
    assert not any(r.get("probe") for r in seen if "i" in r["input"])
    a.close(), b.close()
    assert not a.probe({"p": 1}, "x")  # closed: nothing queued
    assert not ShadowAudit(None).probe({"p": 1}, "x")  # no reference to ask
