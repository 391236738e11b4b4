"""The witnesses a compile reads: grouped by distinct input, split, and described by a schema.

A *witness* is one recorded observation ``input → output`` of a task (:class:`auto.store.Witness`).
Every rung of the ladder sees the same :class:`WitnessSet`: the task's witnesses grouped by
distinct input (canonical JSON), each distinct input with its modal output and that output's
share. Ties between outputs go to the smaller canonical JSON, so the modal output does not depend
on witness order.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from auto_runtime.schema import json_type_name

from auto.canonical import canonical_json
from auto.distill import split_witnesses

MAX_STRATA = 20
"""Answers with at most this many distinct values are split stratified by answer (a program's
record or open-ended answers, e.g. an order id unique per input, are split uniformly)."""

Item = tuple[dict[str, Any], Any, float]
"""One distinct input: ``(input, modal output, share of the modal output among its witnesses)``."""


@dataclass(frozen=True)
class Repetition:
    """The evidence that the task repeats itself: inputs witnessed ≥ 2 times, and how many of them
    were always answered the same way (the census's witnessed-deterministic inputs).

    Attributes:
        repeated: distinct inputs seen at least twice.
        consistent: of those, inputs whose outputs were all canonically equal.
    """

    repeated: int
    consistent: int

    @property
    def rate(self) -> float | None:
        """``consistent / repeated``, or None when nothing was seen twice."""
        return self.consistent / self.repeated if self.repeated else None


@dataclass(frozen=True)
class WitnessSet:
    """A task's witnesses as every rung reads them.

    Attributes:
        task: the task name.
        witnesses: every witness, in store order (provenance: trace ids, counts).
        groups: canonical input text → canonical output texts, in witness order.
        inputs: canonical input text → the input object.
        items: the distinct inputs (:data:`Item`), sorted by canonical input.
        store_digest: the store digest of the task as read together with the witnesses
            (provenance), or None.
    """

    task: str
    witnesses: tuple[Any, ...]
    groups: dict[str, list[str]]
    inputs: dict[str, dict[str, Any]]
    items: tuple[Item, ...]
    store_digest: str | None = None

    @classmethod
    def read(cls, store: Any, task: str) -> "WitnessSet":
        """The task's witnesses and the store digest, from one snapshot of ``store``."""
        ws, d = store.task_witnesses(task)
        return cls.of(task, ws, store_digest=d)

    @classmethod
    def of(cls, task: str, witnesses: Sequence[Any], store_digest: str | None = None) -> "WitnessSet":
        """Group ``witnesses`` (objects with ``.input`` and ``.output``, and optionally their
        canonical texts ``.input_text`` / ``.output_text`` as a store hands them out) by
        distinct input."""
        groups: dict[str, list[str]] = defaultdict(list)
        inputs: dict[str, dict[str, Any]] = {}
        for w in witnesses:
            key = getattr(w, "input_text", None) or canonical_json(w.input)
            groups[key].append(getattr(w, "output_text", None) or canonical_json(w.output))
            inputs[key] = w.input
        items: list[Item] = []
        for key in sorted(groups):
            outs = Counter(groups[key])
            modal, n_modal = sorted(outs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            items.append((inputs[key], json.loads(modal), n_modal / len(groups[key])))
        return cls(task=task, witnesses=tuple(witnesses), groups=dict(groups), inputs=inputs, items=tuple(items),
                   store_digest=store_digest)

    @property
    def n(self) -> int:
        """Number of distinct inputs."""
        return len(self.items)

    def repetition(self) -> Repetition:
        """The repetition evidence over the inputs witnessed more than once."""
        repeated = [k for k, outs in self.groups.items() if len(outs) >= 2]
        return Repetition(repeated=len(repeated), consistent=sum(1 for k in repeated if len(set(self.groups[k])) == 1))

    def consistent_entries(self) -> list[tuple[dict[str, Any], Any]]:
        """``(input, output)`` of every distinct input whose outputs were all equal, sorted by
        canonical input (divergent inputs are left out)."""
        return [(self.inputs[k], json.loads(self.groups[k][0])) for k in sorted(self.groups)
                if len(set(self.groups[k])) == 1]


def input_schema(inputs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The input JSON schema implied by the witnesses: the keys every witness has, their types.

    Raises:
        IndexError: ``inputs`` is empty.
    """
    keys = set(inputs[0])
    for d in inputs[1:]:
        keys &= set(d)
    props: dict[str, Any] = {}
    for k in sorted(keys):
        types = sorted({json_type_name(d[k]) for d in inputs})
        props[k] = {"type": types[0] if len(types) == 1 else types}
    return {"type": "object", "properties": props, "required": sorted(keys), "additionalProperties": False}


def split_three(answers: Sequence[Any], heldout_fraction: float, second_fraction: float, seed: int, *,
                max_strata: int | None = MAX_STRATA) -> tuple[list[int], list[int], list[int]]:
    """Deterministic train / second / held-out index split (each ascending).

    Held-out takes ``heldout_fraction`` of the items; the second split (the specialist's
    calibration split, the program rung's selection split) takes ``second_fraction`` of all
    items, from the rest. Both draws are stratified by answer (:func:`auto.distill.split_witnesses`,
    seeds ``seed`` and ``seed + 1``) when there are at most ``max_strata`` distinct answers
    (``None``: always), otherwise uniform.
    """
    keys = [canonical_json(a) for a in answers]
    strata = keys if max_strata is None or len(set(keys)) <= max_strata else ["*"] * len(keys)
    rest, held = split_witnesses(strata, heldout_fraction, seed)
    frac = second_fraction / (1.0 - heldout_fraction)
    tr_local, second_local = split_witnesses([strata[i] for i in rest], frac, seed + 1)
    return [rest[i] for i in tr_local], [rest[i] for i in second_local], held


def text_fields(inputs: Sequence[dict[str, Any]]) -> list[str]:
    """The input fields that are strings in every witness, sorted."""
    keys: set[str] | None = None
    for d in inputs:
        ks = {k for k, v in d.items() if isinstance(v, str)}
        keys = ks if keys is None else keys & ks
    return sorted(keys or [])
