"""Which fields of a record-valued task are categorical (a few labels) and which are open-valued
(ids, amounts, dates, free text).

A record compiles per field (:mod:`auto.compile.rungs.program`); the manifest's output interface
then declares, per categorical field, the values the generation was compiled from
(``interface.output.fields``: ``{key: {"enum": [...]}}``), and the ratchet counts a *new label*
(an answer the installed generation cannot give) only for those fields
(:func:`auto.ratchet.policy.unanswerable_labels`): an order id or an amount never seen before is
the normal case for an open-valued field, not a sign that the generation is missing an answer.

:func:`categorical_fields` decides from the witnessed records: a field is categorical when its
values are scalars other than non-integral numbers, there are at most :data:`MAX_LABELS` distinct
ones (the synthesizer's limit for decision lists, :data:`auto.models.program.synth.MAX_LABELS`), and
at most :data:`MAX_SINGLETON_SHARE` of the records that carry a value (not null) carry one
witnessed only once. That share is the Good–Turing estimate of the probability that the next
value is one never witnessed (I. J. Good, *Biometrika* 40, 1953: the missing mass is ``N1 / N``,
``N1`` the values seen once among ``N`` observations); it is taken over the non-null values, so an
id present on a few records and unique on each (a refund's order number on one request in ten)
is open-valued: every record that carries it brings a new one.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from auto.canonical import canonical_json
from auto.models.program.synth import MAX_LABELS

MAX_SINGLETON_SHARE = 0.1
"""A field whose once-witnessed values are on more than this share of the records carrying a value
(its Good–Turing missing mass) is open-valued."""


def _scalar_label(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, int))


def categorical_fields(records: Sequence[Any]) -> dict[str, list[Any]]:
    """Per categorical key of ``records`` (module docstring), its distinct witnessed values in
    canonical-JSON order; ``{}`` unless every record is a JSON object (keys missing from some
    records are left out)."""
    if not records or not all(isinstance(r, dict) for r in records):
        return {}
    keys = set(records[0])
    for r in records[1:]:
        keys &= set(r)
    out: dict[str, list[Any]] = {}
    for k in sorted(keys):
        vals = [r[k] for r in records]
        if not all(_scalar_label(v) for v in vals):
            continue
        counts = Counter(canonical_json(v) for v in vals)
        carried = [c for key, c in counts.items() if key != "null"]
        once = sum(1 for c in carried if c == 1)
        if len(counts) <= MAX_LABELS and once <= MAX_SINGLETON_SHARE * sum(carried):
            out[k] = [v for _key, v in sorted({canonical_json(v): v for v in vals}.items())]
    return out


def declared_fields(interface_output: Any) -> dict[str, set[str]]:
    """The categorical fields a manifest's output interface declares, each as its set of
    canonical-JSON values: ``interface.output.fields``, else, for an ``enum`` of records (a memo
    table's), the :func:`categorical_fields` of those records; ``{}`` for anything else."""
    if not isinstance(interface_output, dict):
        return {}
    fields = interface_output.get("fields")
    if isinstance(fields, dict):
        return {k: {canonical_json(v) for v in (f.get("enum") or [])} for k, f in fields.items()
                if isinstance(f, dict) and isinstance(f.get("enum"), list)}
    enum = interface_output.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(e, dict) for e in enum):
        return {k: {canonical_json(v) for v in vs} for k, vs in categorical_fields(enum).items()}
    return {}


__all__ = ["MAX_SINGLETON_SHARE", "categorical_fields", "declared_fields"]
