"""The determinism census: for every site and every distinct input, were the answers the same?

Input: recorded spans (task spans and model-call spans). Per site (task + span name +
prompt-template digest) and per distinct input (canonical JSON), the census counts
observations, distinct outputs (canonical JSON) and errors, and classifies the input:

* ``witnessed-deterministic`` — seen ≥ 2 times, never errored, every output canonically equal;
* ``divergent`` — seen ≥ 2 times with ≥ 2 distinct outputs (the modal output and its share are
  reported);
* ``errored`` — seen ≥ 2 times, one distinct output, but at least one observation errored;
* ``unwitnessed`` — seen once (no evidence either way).

Model calls are counted per *model-call site* (:mod:`auto.sites`): the recorded requests of one
call site are aligned, their varying parts become the site's slots, and each call is one
observation with input = its slot values and output = its site answer (content, or tool calls
without their random ids). Other spans (tasks, tools, requests Auto does not understand) are
counted under their recorded site; their tool-call ids (random per run) are replaced by their
order of appearance before inputs and outputs are compared
(:func:`auto.record.template.strip_call_ids`).

SDK retries are attempts of one logical call: model-call spans sharing the attribute
``auto.logical_call_id`` count as one observation (the last attempt's status and output).

The headline fraction follows the published reference system's definition (spans that are
witnessed-deterministic over all effectful spans, arXiv 2607.04542 §census); the per-input
fraction (deterministic inputs over inputs seen ≥ 2 times) is reported beside it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from auto.canonical import canonical_json
from auto.record.template import strip_call_ids
from auto.sites import census_view

WITNESSED = "witnessed-deterministic"
DIVERGENT = "divergent"
ERRORED = "errored"
UNWITNESSED = "unwitnessed"


@dataclass
class InputCensus:
    """Census of one distinct input at one site.

    Attributes:
        input: canonical JSON of the input.
        observations: logical observations (retried attempts count once).
        errors: observations that ended in an error.
        distinct_outputs: distinct canonical outputs among successful observations.
        modal_output: the most frequent successful output (canonical JSON) or None.
        modal_share: modal count / successful observations (0.0 if none succeeded).
        verdict: one of witnessed-deterministic, divergent, errored, unwitnessed.
    """

    input: str
    observations: int
    errors: int
    distinct_outputs: int
    modal_output: str | None
    modal_share: float
    verdict: str


@dataclass
class SiteCensus:
    """Census of one site: per-verdict counts over distinct inputs and over spans."""

    site: str
    task: str | None
    kind: str
    inputs: list[InputCensus] = field(default_factory=list)
    model_call: dict[str, Any] | None = None
    """For a model-call site: :meth:`auto.sites.Site.describe` (model, slots, template)."""

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(i.verdict for i in self.inputs)
        return {v: c.get(v, 0) for v in (WITNESSED, DIVERGENT, ERRORED, UNWITNESSED)}

    @property
    def spans(self) -> int:
        return sum(i.observations for i in self.inputs)

    @property
    def deterministic_spans(self) -> int:
        return sum(i.observations for i in self.inputs if i.verdict == WITNESSED)

    def to_dict(self, with_inputs: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "site": self.site,
            "task": self.task,
            "kind": self.kind,
            "distinct_inputs": len(self.inputs),
            "spans": self.spans,
            "deterministic_spans": self.deterministic_spans,
            **self.counts,
        }
        seen_twice = sum(1 for i in self.inputs if i.observations >= 2)
        d["deterministic_input_fraction"] = (self.counts[WITNESSED] / seen_twice) if seen_twice else None
        if self.model_call is not None:
            d["model_call"] = self.model_call
        if with_inputs:
            d["inputs"] = [asdict(i) for i in self.inputs]
        return d


@dataclass
class Census:
    """The whole census: sites plus the headline fractions.

    ``headline`` = witnessed-deterministic spans / all spans (None when there are no spans).
    """

    sites: list[SiteCensus]

    @property
    def spans(self) -> int:
        return sum(s.spans for s in self.sites)

    @property
    def deterministic_spans(self) -> int:
        return sum(s.deterministic_spans for s in self.sites)

    @property
    def headline(self) -> float | None:
        return self.deterministic_spans / self.spans if self.spans else None

    def site(self, site: str) -> SiteCensus | None:
        return next((s for s in self.sites if s.site == site), None)

    def to_dict(self, with_inputs: bool = False) -> dict[str, Any]:
        return {
            "spans": self.spans,
            "deterministic_spans": self.deterministic_spans,
            "headline": self.headline,
            "sites": [s.to_dict(with_inputs) for s in self.sites],
        }


def _get(span: Any, key: str, default: Any = None) -> Any:
    if isinstance(span, Mapping):
        return span.get(key, default)
    return getattr(span, key, default)


def _as_obj(value: Any) -> Any:
    """Stored JSON columns may arrive as text; census compares canonical JSON either way."""
    import json

    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def site_of(span: Any) -> str:
    """The site key of a span: its recorded ``site``, else ``task/name``."""
    site = _get(span, "site")
    if site:
        return site
    return f"{_get(span, 'task') or '-'}/{_get(span, 'name') or '-'}"


def census(spans: Iterable[Any], *, model_call_sites: bool = True) -> Census:
    """Run the census over recorded spans.

    Args:
        spans: span rows (mappings or objects) with at least ``kind``, ``status``, ``input``,
            ``output``; optionally ``site``, ``task``, ``name``, ``attributes``,
            ``started_ns``. JSON columns may be text or decoded values.
        model_call_sites: count model calls per model-call site (:func:`auto.sites.census_view`);
            False: under their recorded ``site`` with the whole request as input.

    Returns:
        A :class:`Census` with one :class:`SiteCensus` per site, sites ordered by name.
    """
    found: dict[str, Any] = {}
    if model_call_sites:
        spans, found = census_view(spans)
    # (site) -> (logical key) -> last attempt
    logical: dict[str, dict[str, Any]] = defaultdict(dict)
    meta: dict[str, tuple[str | None, str]] = {}
    for n, span in enumerate(spans):
        site = site_of(span)
        meta.setdefault(site, (_get(span, "task"), _get(span, "kind") or "span"))
        attrs = _as_obj(_get(span, "attributes")) or {}
        lid = attrs.get("auto.logical_call_id") if isinstance(attrs, Mapping) else None
        key = f"logical:{lid}" if lid else f"span:{_get(span, 'span_id') or n}"
        prev = logical[site].get(key)
        order = (attrs.get("auto.attempt", 0) if isinstance(attrs, Mapping) else 0, _get(span, "started_ns") or 0, n)
        if prev is None or order >= prev[0]:
            logical[site][key] = (order, span)

    sites: list[SiteCensus] = []
    for site in sorted(logical):
        per_input: dict[str, list[Any]] = defaultdict(list)
        for _, span in logical[site].values():
            per_input[canonical_json(strip_call_ids(_as_obj(_get(span, "input"))))].append(span)
        task, kind = meta[site]
        sc = SiteCensus(site=site, task=task, kind=kind,
                        model_call=found[site].describe() if site in found else None)
        for inp in sorted(per_input):
            obs = per_input[inp]
            errors = sum(1 for s in obs if (_get(s, "status") or "ok") != "ok")
            outs = Counter(canonical_json(strip_call_ids(_as_obj(_get(s, "output")))) for s in obs
                           if (_get(s, "status") or "ok") == "ok")
            ok = sum(outs.values())
            modal, modal_n = (outs.most_common(1)[0] if outs else (None, 0))
            if len(obs) < 2:
                verdict = UNWITNESSED
            elif len(outs) >= 2:
                verdict = DIVERGENT
            elif errors:
                verdict = ERRORED
            else:
                verdict = WITNESSED
            sc.inputs.append(
                InputCensus(
                    input=inp,
                    observations=len(obs),
                    errors=errors,
                    distinct_outputs=len(outs),
                    modal_output=modal,
                    modal_share=(modal_n / ok) if ok else 0.0,
                    verdict=verdict,
                )
            )
        sites.append(sc)
    return Census(sites=sites)


def render_table(c: Census) -> str:
    """A terminal table of the census (one row per site, then the headline)."""
    head = f"{'site':<48} {'inputs':>6} {'det':>5} {'div':>5} {'err':>4} {'once':>5} {'spans':>6} {'det%':>6}"
    lines = [head, "-" * len(head)]
    for s in c.sites:
        k = s.counts
        pct = f"{100 * s.deterministic_spans / s.spans:.1f}" if s.spans else "-"
        name = s.site if len(s.site) <= 48 else s.site[:45] + "..."
        lines.append(
            f"{name:<48} {len(s.inputs):>6} {k[WITNESSED]:>5} {k[DIVERGENT]:>5} {k[ERRORED]:>4} "
            f"{k[UNWITNESSED]:>5} {s.spans:>6} {pct:>6}"
        )
        if s.model_call is not None:
            mc = s.model_call
            slots = ", ".join(f"{x['name']} ({x['path']})" for x in mc["slots"]) or "none (one fixed request)"
            where = f"task {mc['task']}, " if mc.get("task") else ""
            lines.append(f"  {where}model {mc.get('model')}, slots: {slots}")
    hl = c.headline
    lines.append("-" * len(head))
    lines.append(
        f"headline: {c.deterministic_spans} of {c.spans} spans witnessed-deterministic"
        + (f" ({100 * hl:.1f}%)" if hl is not None else "")
    )
    return "\n".join(lines)
