"""Precedence decision lists of auto.models.program.synth on witness sets generated here: overlapping
keyword cues with a default by elimination, a rare exception before a broad threshold, a keyword
conjoined with a threshold, decoy numbers, the last amount of a text, and the ranking (minimum
description length, the one-standard-error rule, the significance test)."""

from __future__ import annotations

import math
import random

from auto.models.program import ast as A
from auto.models.program.interp import run_program
from auto.models.program.synth import LRS_MIN, _Budget, _laplace, _lrs, _mdl_ratio, _Part, synthesize


def _agreement(program, pairs) -> float:
    ok = 0
    for inp, ref in pairs:
        out = run_program(program, inp)
        ok += (not out["deopt"]) and out["answer"] == ref
    return ok / len(pairs)


# ---------------------------------------------------------------------------------------------
# overlapping cues: close > billing > bug > other (by elimination)
# ---------------------------------------------------------------------------------------------

CUES = {
    "close": ["Please close my account.", "I want to terminate my subscription.", "Shut down my workspace."],
    "billing": ["The invoice looks wrong.", "I was charged twice this month.", "Question about billing."],
    "bug": ["The app crashes on start.", "I get an error message on login.", "The export button is broken."],
}
OTHER = ["Can I change my display name?", "Do you have a student discount?", "How do I add a teammate?",
         "Where can I find the API docs?", "Is there a dark mode?"]
FILLER = ["Thanks.", "Best, Sam.", "Sent from my phone.", "Hope you are well.", ""]
SECOND = {"close": "billing", "billing": "bug", "bug": None}


def tickets(n: int, seed: int) -> list[tuple[dict, str]]:
    """Support tickets: one request sentence per intent, sometimes (30%) followed by a cue of the
    next intent in precedence (a close ticket that also mentions the invoice is still ``close``);
    ``other`` tickets have no cue."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        intent = ["close", "billing", "bug", "other"][k % 4]
        parts = [rng.choice(CUES[intent]) if intent != "other" else rng.choice(OTHER)]
        nxt = SECOND.get(intent)
        if nxt and rng.random() < 0.3:
            parts.append(rng.choice(CUES[nxt]))
        parts.append(rng.choice(FILLER))
        rng.shuffle(parts)
        out.append(({"ticket": " ".join(p for p in parts if p)}, intent))
    return out


def test_precedence_list_over_overlapping_cues_with_a_default_by_elimination():
    data = tickets(475, seed=1)
    res = synthesize(data[:400], field="ticket", heldout=data[400:])
    assert res.program is not None, res.reason
    prog = res.program
    assert type(prog) is A.If and prog.default == A.Const("other")  # no rule for the default label
    labels = [value.value for _cond, value in prog.cases]
    assert sorted(labels) == ["billing", "bug", "close"]  # one case per label: alternations, as Or
    assert labels.index("close") < labels.index("billing") < labels.index("bug")  # the precedence
    assert not any(type(n) is A.Deopt for n in A.walk(prog))
    assert _agreement(prog, tickets(300, seed=99)) == 1.0
    assert res.seconds < 10


# ---------------------------------------------------------------------------------------------
# purchase requests: a rare blocked tier, a tier-and-amount conjunction, decoy numbers
# ---------------------------------------------------------------------------------------------

TIERS = {"gold": ["gold", "platinum"], "plain": ["regular", "standard", "known"],
         "flagged": ["flagged", "suspended", "frozen"]}


def decide(tier: str, amount: float) -> str:
    if tier == "flagged" or amount >= 10_000:
        return "reject"
    if amount < 100 or (tier == "gold" and amount < 2_000):
        return "approve"
    return "review"


def requests(n: int, seed: int) -> list[tuple[dict, str]]:
    """Purchase requests with a tier word (flagged vendors are rare, 6%), an amount (``$1,234``
    or ``$56.70``) and sometimes a decoy number before it (``3 units``, ``a 2D scanner``,
    ``room 12``)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        tier = rng.choices(["gold", "plain", "flagged"], [0.35, 0.59, 0.06])[0]
        amount = round(math.exp(rng.uniform(math.log(10), math.log(40_000))), rng.choice([0, 2]))
        money = f"${amount:,.2f}" if amount != int(amount) else f"${int(amount):,}"
        decoy = rng.choice(["", "3 units of ", "a 2D scanner and ", "room 12 chairs and "])
        text = (f"Request for {decoy}supplies, {money}, from a {rng.choice(TIERS[tier])} vendor "
                f"({rng.choice(['Acme', 'Globex', 'Initech'])}).")
        out.append(({"request": text}, decide(tier, amount)))
    return out


def test_rare_exception_keyword_threshold_conjunction_and_decoy_numbers():
    data = requests(475, seed=2)
    res = synthesize(data[:400], field="request", heldout=data[400:])
    assert res.program is not None, res.reason
    prog = res.program
    assert _agreement(prog, requests(400, seed=77)) == 1.0
    thresholds = {n.value for n in A.walk(prog) if type(n) is A.Compare}
    assert {100, 2000, 10000} <= thresholds  # round thresholds in the witnessed gaps
    # the rare tier's words form one alternation in the reject case
    reject = [cond for cond, value in prog.cases if value == A.Const("reject")]
    assert len(reject) == 1
    words = {n.s for n in A.walk(reject[0]) if type(n) is A.Contains}
    assert {"flagged", "suspended", "frozen"} <= words
    probes = [("flagged", "$50", "reject"), ("gold", "$1,999", "approve"), ("gold", "$2,000", "review"),
              ("plain", "$99.99", "approve"), ("plain", "$9,999", "review"), ("gold", "$10,000", "reject")]
    for tier, money, want in probes:
        text = f"Request for 3 units of supplies, {money}, from a {tier} vendor (Acme)."
        assert run_program(prog, {"request": text})["answer"] == want, (tier, money)


def payments(n: int, seed: int) -> list[tuple[dict, str]]:
    """Two amounts; the answer depends only on the last one (``due`` when it is at least $1,000)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        first, last = rng.randint(5, 5000), rng.randint(5, 5000)
        joiner = rng.choice(["then", "and later", "plus", "followed by"])
        text = f"Paid ${first:,} {joiner} ${last:,} on the account."
        out.append(({"note": text}, "due" if last >= 1000 else "ok"))
    return out


def test_a_threshold_on_the_last_amount_of_a_text():
    data = payments(375, seed=3)
    res = synthesize(data[:300], field="note", heldout=data[300:])
    assert res.program is not None, res.reason
    searches = [n for n in A.walk(res.program) if type(n) is A.Search]
    assert searches and all(s.pattern.startswith("(?:.|\\n)*") for s in searches)
    assert 1000 in {n.value for n in A.walk(res.program) if type(n) is A.Compare}
    assert _agreement(res.program, payments(300, seed=33)) == 1.0


# ---------------------------------------------------------------------------------------------
# ranking: description length, one standard error, significance
# ---------------------------------------------------------------------------------------------

def _kw(word: str) -> A.Node:
    return A.Contains(A.Lower(A.Field("t")), word)


def test_one_standard_error_rule_prefers_the_smaller_program_unless_clearly_worse():
    rng = random.Random(5)

    def item(lab: str, extra: str = "") -> tuple[dict, str]:
        return ({"t": f"{'key' if lab == 'a' else 'nope'} {rng.randint(0, 999)} {extra}".strip()}, lab)

    train = [item(rng.choice("ab")) for _ in range(100)]
    simple = A.If(((_kw("key"), A.Const("a")),), A.Const("b"))
    bigger = A.If(((A.Or((_kw("key"), _kw("zz"))), A.Const("a")),), A.Const("b"))
    for k, want in ((1, simple), (6, bigger)):
        # k held-out witnesses labelled "a" that only the bigger program explains, and one that
        # neither does
        held = [item(rng.choice("ab")) for _ in range(74 - k)] + [({"t": "zz only"}, "a")] * k
        held.append(({"t": "nope"}, "a"))
        part = _Part("", "t", train, held, 3.0, _Budget(10))
        small_c, big_c = part.add(simple, "rules"), part.add(bigger, "rules")
        assert small_c.agree == big_c.agree == 100 and small_c.mdl > big_c.mdl  # same fit, smaller
        ranked = part.rank(part.finalists())
        assert big_c.h_agree == small_c.h_agree + k
        assert ranked[0].program == want, k


def test_mdl_ratio_and_rule_statistics():
    r = _mdl_ratio(400, 3)
    assert math.isclose(r, math.log2(len(A.NODE_TYPES)) / (math.log2(400) + math.log2(3)))
    assert _mdl_ratio(4000, 3) < r < _mdl_ratio(40, 3)  # more witnesses: each is worth less
    # Laplace precision: a pure rule over few witnesses scores below a pure rule over many
    assert _laplace(3, 3) < _laplace(30, 30) < 1.0
    assert _laplace(160, 161) > _laplace(30, 30)
    # a rule for a rare label is evidence; one for the label most witnesses have anyway is not
    assert _lrs(3, 3, 4 / 350) >= LRS_MIN
    assert _lrs(4, 4, 0.73) < LRS_MIN
    assert _lrs(0, 10, 0.5) > 0 and _lrs(5, 10, 0.5) == 0.0


def test_keywords_that_only_memorize_label_noise_are_not_learned():
    """Labels follow a threshold; 3% are flipped; filler words are random. A keyword that covers
    a couple of flipped witnesses must not enter the program."""
    rng = random.Random(6)
    vocab = [f"w{k}" for k in range(60)]

    def note() -> tuple[dict, str]:
        amount = rng.randint(10, 900)
        words = " ".join(rng.sample(vocab, 3))
        return ({"t": f"{words} total ${amount} {rng.choice(vocab)}"}, "high" if amount >= 300 else "low")

    train = [note() for _ in range(400)]
    for i in rng.sample(range(400), 12):
        inp, lab = train[i]
        train[i] = (inp, "low" if lab == "high" else "high")
    held = [note() for _ in range(75)]
    res = synthesize(train, field="t", heldout=held)
    assert res.program is not None, res.reason
    assert not any(type(n) in (A.Contains, A.Not, A.IsNull) for n in A.walk(res.program))  # no keyword
    assert 300 in {n.value for n in A.walk(res.program) if type(n) is A.Compare}
    assert _agreement(res.program, [note() for _ in range(300)]) == 1.0
