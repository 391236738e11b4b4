"""Many labels, few witnesses each: the cross-fit folds fit the data and the table still compiles."""

from __future__ import annotations

import random

import pytest

from auto.compile import compile_task
from auto.compile.crossfit import fold_assignment, fold_splitter
from auto.errors import CompileError
from auto.gate import Contract
from auto.store import Store

WORDS = ("alarm", "weather", "music", "lights", "recipe", "train", "email", "calendar", "news", "joke", "currency")


def many_label_witnesses(seed: int = 0) -> list[tuple[dict, str]]:
    """77 labels with 1-5 distinct inputs each; a third of the inputs are witnessed twice (the
    same answer), so the task visibly repeats itself."""
    rng = random.Random(seed)
    out = []
    for lab in range(77):
        for j in range(rng.randint(1, 5)):
            text = f"please {WORDS[lab % len(WORDS)]} {lab} option {j} " + " ".join(rng.choice(WORDS) for _ in range(3))
            out.append(({"utterance": text}, f"intent_{lab:02d}"))
    return out + [w for w in out if rng.random() < 0.33]


def test_folds_fit_labels_too_small_to_stratify():
    labels = [f"l{i}" for i in range(77) for _ in range(1 + i % 5)]
    k, how = fold_splitter(labels, 10, 0)
    assert (k, how) == (10, "plain")  # no label has 10 items: StratifiedKFold would raise
    folds = fold_assignment(labels, 10, 0)
    assert sorted(set(folds)) == list(range(10)) and len(folds) == len(labels)
    assert fold_splitter(["a"] * 12 + ["b"], 10, 0) == (10, "stratified")
    assert fold_splitter(["a", "b", "c"], 10, 0) == (3, "plain")
    with pytest.raises(CompileError, match="at least 2"):
        fold_splitter(["a"], 10, 0)


def test_a_rung_that_raises_costs_that_rung_only_and_the_table_still_compiles(tmp_path, monkeypatch):
    import importlib

    ladder = importlib.import_module("auto.compile.ladder")  # the package exports a function of that name

    def broken(ws, contract, ctx):
        raise ValueError("n_splits=10 cannot be greater than the number of members in each class")

    monkeypatch.setitem(ladder.RUNGS, "specialist", broken)
    with Store(tmp_path / "s.sqlite") as st:
        for inp, out in many_label_witnesses():
            st.add_witness(task="intents", input=inp, output=out)
        outcome = compile_task(st, "intents", contract=Contract(task="intents"), out_path=tmp_path / "g.wasm",
                               programs=False)
    assert outcome.manifest["compiled_as"] == "memo"
    assert "specialist rung failed: ValueError: n_splits=10" in outcome.reason
    assert [(r["rung"], r["verdict"]) for r in outcome.rungs] == [("specialist", "refuse"), ("neardup", "refuse"),
                                                                          ("memo", "pass")]


@pytest.mark.slow
def test_a_77_label_task_with_1_to_5_witnesses_per_label_compiles(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        for inp, out in many_label_witnesses():
            st.add_witness(task="intents", input=inp, output=out)
        outcome = compile_task(st, "intents", contract=Contract(task="intents", min_witnesses=40),
                               out_path=tmp_path / "g.wasm", programs=False)
    # whatever the specialist rung decided, the generation exists and answers the repeats
    assert outcome.manifest["compiled_as"] in ("memo", "memo-first", "specialist")
    assert outcome.artifact_id
