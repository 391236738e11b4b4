"""The witnesses a compile reads: grouped by distinct input, split, and described by a schema.

A *witness* is one recorded observation ``input → output`` of a task (:class:`auto.store.Witness`).
Every rung of the ladder sees the same :class:`WitnessSet`: the task's witnesses grouped by
distinct input (canonical JSON), each distinct input with its modal output and that output's
share. Ties between outputs of one input go to the output that is more frequent over all the
witnesses (the more likely mode when a reference sometimes varies its answer, e.g. its
formatting), then to the smaller canonical JSON, so the modal output does not depend on witness
order. A witness whose input or output the recorder redacted (:func:`is_redacted`) is left out:
the placeholder is not what the task saw or answered.

A compile unit is a task (its task spans are the witnesses) or a model-call site (a name
``site:<hex>``, :mod:`auto.sites`: its model calls are the witnesses, input = slot values, output
= the site answer); :meth:`WitnessSet.read` reads either.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from auto_runtime.schema import json_type_name

from auto.canonical import canonical_json
from auto.models.specialist.train import split_witnesses
from auto.errors import CompileError
from auto.sites import is_site_id, read_site

MAX_STRATA = 20
"""Answers with at most this many distinct values are split stratified by answer (a program's
record or open-ended answers, e.g. an order id unique per input, are split uniformly)."""

_UNSET = object()

Item = tuple[dict[str, Any], Any, float]
"""One distinct input: ``(input, modal output, share of the modal output among its witnesses)``."""


def is_redacted(witness: Any) -> bool:
    """Whether the recorder replaced a secret in the witness's input or output (span attribute
    ``auto.redacted``, :mod:`auto.record.redact`)."""
    attrs = getattr(witness, "attributes", None)
    if not attrs:
        return False
    fields = attrs.get("auto.redacted") or ()
    return "input" in fields or "output" in fields


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
        witnesses: every witness read, in store order (provenance: trace ids, counts), less the
            redacted ones (:func:`is_redacted`).
        redacted: how many witnesses were left out because they were redacted.
        groups: canonical input text → canonical output texts, in witness order.
        inputs: canonical input text → the input object.
        items: the distinct inputs (:data:`Item`), sorted by canonical input.
        store_digest: the store digest of the task as read together with the witnesses
            (provenance), or None.
        site: for a model-call site, its manifest entry (:meth:`auto.sites.Site.to_manifest`:
            the template the inputs were cut with), else None.
        reference_model: for a model-call site, the model its responses name, else None.
    """

    task: str
    witnesses: tuple[Any, ...]
    groups: dict[str, list[str]]
    inputs: dict[str, dict[str, Any]]
    items: tuple[Item, ...]
    store_digest: str | None = None
    redacted: int = 0
    site: dict[str, Any] | None = None
    reference_model: str | None = None

    @classmethod
    def read(cls, store: Any, task: str, *, verify: bool = False) -> "WitnessSet":
        """The task's witnesses and the store digest, from one snapshot of ``store``; for a
        model-call site id, the site's (:func:`auto.sites.read_site`).

        ``verify=True``: the task's rows added since its last incremental check are re-derived in
        the same snapshot before they are handed out (:meth:`auto.store.Store.task_witnesses`);
        for a site id, the model-call spans added since the last check of kind ``llm``
        (:func:`auto.sites.read_site`).

        Raises:
            CompileError: ``task`` is a site id the store holds no model calls of.
            IntegrityError: (``verify``) a stored digest does not match its content.
        """
        if is_site_id(task):
            sw = read_site(store, task, verify=verify)
            if sw is None:
                raise CompileError(f"no model-call site {task} in the store (auto census lists the sites)")
            return cls.of(task, sw.witnesses, store_digest=sw.digest, site=sw.site.to_manifest(),
                          reference_model=sw.reference_model)
        ws, d = store.task_witnesses(task, verify=True) if verify else store.task_witnesses(task)
        return cls.of(task, ws, store_digest=d)

    @classmethod
    def of(cls, task: str, witnesses: Sequence[Any], store_digest: str | None = None, *,
           site: dict[str, Any] | None = None, reference_model: str | None = None) -> "WitnessSet":
        """Group ``witnesses`` (objects with ``.input`` and ``.output``, and optionally their
        canonical texts ``.input_text`` / ``.output_text`` as a store hands them out) by
        distinct input, leaving out the redacted ones (:func:`is_redacted`)."""
        kept = [w for w in witnesses if not is_redacted(w)]
        redacted, witnesses = len(witnesses) - len(kept), kept
        groups: dict[str, list[str]] = defaultdict(list)
        inputs: dict[str, dict[str, Any]] = {}
        for w in witnesses:
            key = getattr(w, "input_text", None) or canonical_json(w.input)
            groups[key].append(getattr(w, "output_text", None) or canonical_json(w.output))
            inputs[key] = w.input
        items: list[Item] = []
        overall: Counter[str] = Counter()
        for outs in groups.values():
            overall.update(outs)
        scalars: dict[str, Any] = {}  # parsed modal outputs that are not objects or lists (labels)
        for key in sorted(groups):
            outs = groups[key]
            if outs.count(outs[0]) == len(outs):  # one output (the common case): it is the mode
                modal, share = outs[0], 1.0
            else:
                counted = Counter(outs)
                modal, n_modal = sorted(counted.items(), key=lambda kv: (-kv[1], -overall[kv[0]], kv[0]))[0]
                share = n_modal / len(outs)
            value = scalars.get(modal, _UNSET)
            if value is _UNSET:
                value = json.loads(modal)
                if not isinstance(value, (dict, list)):
                    scalars[modal] = value
            items.append((inputs[key], value, share))
        return cls(task=task, witnesses=tuple(witnesses), groups=dict(groups), inputs=inputs, items=tuple(items),
                   store_digest=store_digest, redacted=redacted, site=site, reference_model=reference_model)

    @property
    def n(self) -> int:
        """Number of distinct inputs."""
        return len(self.items)

    def repetition(self) -> Repetition:
        """The repetition evidence over the inputs witnessed more than once."""
        repeated = [outs for outs in self.groups.values() if len(outs) >= 2]
        return Repetition(repeated=len(repeated), consistent=sum(1 for outs in repeated if outs.count(outs[0]) == len(outs)))

    def redacted_note(self) -> str:
        """``""``, or a clause for a refusal saying how many witnesses were left out because a
        secret was redacted from them (so a user sees why fewer inputs count than were recorded)."""
        if not self.redacted:
            return ""
        return (f"; {self.redacted} witnesses left out because a secret was redacted from their "
                f"input or output")

    def dominant(self) -> tuple[list[Item], int]:
        """The distinct inputs whose shape (field names and JSON types) is the most common one,
        and how many other inputs were left out.

        A model or a program reads typed fields: an input whose ``text`` is null or a number,
        recorded once among thousands of strings, must not stop every later compile. The
        artifact's input schema is built from the kept inputs, so an input of another shape
        deopts (schema check) instead of being answered.
        """
        def shape(inp: dict[str, Any]) -> tuple[tuple[str, str], ...]:
            return tuple(sorted((k, json_type_name(v)) for k, v in inp.items()))

        counts = Counter(shape(it[0]) for it in self.items)
        if not counts:
            return [], 0
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        kept = [it for it in self.items if shape(it[0]) == top]
        return kept, len(self.items) - len(kept)

    def consistent_entries(self) -> list[tuple[dict[str, Any], Any]]:
        """``(input, output)`` of every distinct input whose outputs were all equal, sorted by
        canonical input (divergent inputs are left out)."""
        return [(inp, out) for inp, out, share in self.items if share == 1.0]


def unit_witnesses(store: Any, task: str) -> list[Any]:
    """The successful witnesses of a task or model-call site (``[]`` for a site the store does
    not hold yet), for counting: :meth:`auto.store.Store.witnesses` or the site's."""
    if is_site_id(task):
        sw = read_site(store, task)
        return list(sw.witnesses) if sw is not None else []
    return store.witnesses(task)


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
    items, from the rest. Both draws are stratified by answer (:func:`auto.models.specialist.train.split_witnesses`,
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


def main_text_field(inputs: Sequence[dict[str, Any]]) -> str | None:
    """The string field a single-field model or program reads: of the fields that are strings in
    every input, the one with the most distinct values (then the longest on average, then the
    first by name); None when no field is a string in every input. The others (a language code,
    a channel name) are not read; what ignoring them costs is in the gate's measured agreement."""
    fields = text_fields(inputs)
    if not fields:
        return None
    def key(f: str) -> tuple[int, float, str]:
        vals = [d[f] for d in inputs]
        return (-len(set(vals)), -sum(map(len, vals)) / max(1, len(vals)), f)
    return sorted(fields, key=key)[0]
