"""The harder held-out sets of the extraction and routing families: phrasings the training corpus
never uses, one kind per item, labelled by the simulator oracle."""

from __future__ import annotations

import collections
import re

import pytest

from bench.extraction import corpus as ex_corpus
from bench.extraction import hard as ex_hard
from bench.extraction.oracle import extraction_oracle
from bench.families import get_family
from bench.routing import corpus as ro_corpus
from bench.routing import hard as ro_hard
from bench.routing.oracle import routing_oracle


@pytest.mark.parametrize("hard,field,oracle", [(ex_hard, "email", extraction_oracle), (ro_hard, "request", routing_oracle)])
def test_hard_sets_are_deterministic_distinct_and_labelled_by_the_oracle(hard, field, oracle):
    a, b = hard.hard_heldout(90, seed=3), hard.hard_heldout(90, seed=3)
    assert a == b and a != hard.hard_heldout(90, seed=4)
    texts = [getattr(i, field) for i in a]
    assert len(set(texts)) == len(texts) == 90
    assert all(i.label == oracle(getattr(i, field)) for i in a)
    counts = collections.Counter(i.kind for i in a)
    assert set(counts) == set(hard.KINDS) and max(counts.values()) - min(counts.values()) <= 1  # round-robin
    with pytest.raises(ValueError):
        hard.hard_heldout(-1)


@pytest.mark.parametrize("name,mod,field", [("extraction", ex_corpus, "email"), ("routing", ro_corpus, "request")])
def test_the_family_corpus_carries_a_disjoint_hard_slice(name, mod, field):
    data = get_family(name).default_corpus(0)
    assert set(data) == {"train", "heldout", "hard", "ood"}
    train = {getattr(i, field) for i in data["train"]}
    hard = [getattr(i, field) for i in data["hard"]]
    assert len(hard) >= 150 and not train & set(hard)
    assert data["train"] == mod.default_corpus(0)["train"]  # the training slice is unchanged


def test_extraction_hard_kinds_depart_from_the_training_phrasings():
    data = get_family("extraction").default_corpus(0)
    train = " ".join(i.email for i in data["train"]).lower()
    by = collections.defaultdict(list)
    for it in data["hard"]:
        by[it.kind].append(it)
    assert all(re.search(r"refunded|cancelled|cancelling|replacing|replaced|exchanged", i.email.lower()) or
               "news on" in i.email.lower() or "tracking" in i.email.lower() or "status" in i.email.lower()
               or "where" in i.email.lower() for i in by["inflection"])
    assert not re.search(r"\brefunded\b", train)  # the training corpus never inflects the cue
    assert all(len(ex_corpus_amounts(i.email)) == 2 for i in by["second_amount"])
    assert {i.label["amount"] for i in by["amount_k"]} <= {1200.0, 3000.0, 300.0, 250.0, 2500.0}
    assert all(i.label["intent"] == "other" or "no" in i.email.lower() or "not" in i.email.lower()
               or "n't" in i.email.lower() for i in by["negation"])


def ex_corpus_amounts(text):
    from bench.extraction.oracle import money_amounts

    return money_amounts(text)


def test_routing_hard_kinds_depart_from_the_training_phrasings():
    data = get_family("routing").default_corpus(0)
    train = " ".join(i.request for i in data["train"]).lower()
    by = collections.defaultdict(list)
    for it in data["hard"]:
        by[it.kind].append(it)
    for word in ("sanctioned", "barred", "trusted", "formerly", "no longer", "proveedor"):
        assert word not in train
    assert any(i.label == "reject" for i in by["new_tier_word"]) and any(i.label != "reject" for i in by["negation"])
    assert all(len(re.findall(r"\$[\d,.]+", i.request)) == 2 for i in by["second_amount"])
