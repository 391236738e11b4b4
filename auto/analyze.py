"""The determinism census: for every site and every distinct input, were the answers the same?

Input: recorded spans (task spans and model-call spans). Per site (task + span name +
prompt-template digest) and per distinct input (canonical JSON), the census counts
observations, distinct outputs (canonical JSON) and errors, and classifies the input:

* ``witnessed-deterministic`` — seen ≥ 2 times, never errored, every output canonically equal;
* ``divergent`` — seen ≥ 2 times with ≥ 2 distinct outputs (the modal output and its share are
  reported);
* ``errored`` — at most one distinct output, but at least one observation errored (a call seen
  once that failed included: a failure is evidence, not its absence);
* ``unwitnessed`` — seen once and answered (no evidence either way).

SDK retries are attempts of one logical call: model-call spans sharing the attribute
``auto.logical_call_id`` count as one observation (the last attempt's status and output).

The headline fraction follows the published reference system's definition (spans that are
witnessed-deterministic over all effectful spans, arXiv 2607.04542 §census); the per-input
fraction (deterministic inputs over inputs seen ≥ 2 times) is reported beside it.

Model calls are counted per *model-call site* (:mod:`auto.sites`): the recorded requests of one
call site are aligned, their varying parts become the site's slots, and each call is one
observation with input = its slot values and output = its site answer (content, or tool calls
without their random ids). Other spans (tasks, tools, requests Auto does not understand) are
counted under their recorded site; in :func:`census` their tool-call ids (random per run) are
replaced by their order of appearance before inputs and outputs are compared
(:func:`auto.record.template.strip_call_ids`), while :func:`census_store` compares their stored
values as recorded.

Two ways in, one result:

* :func:`census` — over span records in memory (any iterable of mappings or objects);
* :func:`census_store` — in the database: the store groups its rows by site, input and output
  (:meth:`auto.store.Store.census_rows`, SQL that SQLite, PostgreSQL and DuckDB all run) and this
  module folds the grouped rows (:func:`census_from_rows`), so memory is bounded by the number
  of sites — and, with ``with_inputs``, by the inputs reported — not by the number of spans.
  Inputs are compared as stored values (content digests of their canonical JSON). Model-call
  spans (kind ``llm``) are grouped by distinct request and response instead, their sites found
  over the distinct requests (:func:`census_model_calls`), and the two censuses are joined
  (:func:`join`).

When outputs tie for the modal one, the earliest-recorded wins (then the smaller canonical JSON).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Hashable, Iterable, Mapping

from auto.canonical import canonical_json
from auto.errors import ArgumentError
from auto.record.template import strip_call_ids
from auto.sites import census_view, discover, site_answer
from auto.sites.discover import MODEL_CALL_KIND, json_value, span_field

WITNESSED = "witnessed-deterministic"
DIVERGENT = "divergent"
ERRORED = "errored"
UNWITNESSED = "unwitnessed"
VERDICTS = (WITNESSED, DIVERGENT, ERRORED, UNWITNESSED)


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


def verdict_of(observations: int, errors: int, distinct_outputs: int) -> str:
    """The verdict of one distinct input from its counts (see the module docstring)."""
    if observations < 2:
        return ERRORED if errors else UNWITNESSED
    if distinct_outputs >= 2:
        return DIVERGENT
    if errors:
        return ERRORED
    return WITNESSED


@dataclass
class SiteCensus:
    """Census of one site: per-verdict counts over distinct inputs and over spans.

    Attributes:
        site, task, kind: the site key, its task and span kind (of its first recorded span).
        inputs: one :class:`InputCensus` per distinct input, sorted by canonical input — or None
            when the census was run without collecting them (:func:`census_store`).
        distinct_inputs, spans, deterministic_spans, seen_twice: totals over the site's inputs
            (spans = logical observations; seen_twice = inputs observed ≥ 2 times).
        verdicts: distinct inputs per verdict.
    """

    site: str
    task: str | None
    kind: str
    inputs: list[InputCensus] | None = field(default_factory=list)
    distinct_inputs: int = 0
    spans: int = 0
    deterministic_spans: int = 0
    seen_twice: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: {v: 0 for v in VERDICTS})
    model_call: dict[str, Any] | None = None
    """For a model-call site: :meth:`auto.sites.Site.describe` (model, slots, template)."""

    def add(self, ic: InputCensus, keep: bool = True) -> None:
        """Count one distinct input (and keep it in :attr:`inputs` when ``keep``)."""
        self.distinct_inputs += 1
        self.spans += ic.observations
        self.verdicts[ic.verdict] += 1
        if ic.verdict == WITNESSED:
            self.deterministic_spans += ic.observations
        if ic.observations >= 2:
            self.seen_twice += 1
        if keep and self.inputs is not None:
            self.inputs.append(ic)

    @property
    def counts(self) -> dict[str, int]:
        """Distinct inputs per verdict."""
        return dict(self.verdicts)

    def to_dict(self, with_inputs: bool = False) -> dict[str, Any]:
        """JSON form; ``with_inputs`` adds the per-input rows.

        Raises:
            ArgumentError: ``with_inputs`` on a census that did not collect inputs.
        """
        d: dict[str, Any] = {
            "site": self.site,
            "task": self.task,
            "kind": self.kind,
            "distinct_inputs": self.distinct_inputs,
            "spans": self.spans,
            "deterministic_spans": self.deterministic_spans,
            **self.counts,
        }
        d["deterministic_input_fraction"] = (self.verdicts[WITNESSED] / self.seen_twice) if self.seen_twice else None
        if self.model_call is not None:
            d["model_call"] = self.model_call
        if with_inputs:
            if self.inputs is None:
                raise ArgumentError("this census was run without per-input rows (with_inputs=False)")
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


def site_of(span: Any) -> str:
    """The site key of a span: its recorded ``site``, else ``task/name``."""
    site = span_field(span, "site")
    if site:
        return site
    return f"{span_field(span, 'task') or '-'}/{span_field(span, 'name') or '-'}"


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
        meta.setdefault(site, (span_field(span, "task"), span_field(span, "kind") or "span"))
        attrs = json_value(span_field(span, "attributes")) or {}
        lid = attrs.get("auto.logical_call_id") if isinstance(attrs, Mapping) else None
        key = f"logical:{lid}" if lid else f"span:{span_field(span, 'span_id') or n}"
        prev = logical[site].get(key)
        order = (attrs.get("auto.attempt", 0) if isinstance(attrs, Mapping) else 0, span_field(span, "started_ns") or 0, n)
        if prev is None or order >= prev[0]:
            logical[site][key] = (order, span)

    sites: list[SiteCensus] = []
    for site in sorted(logical):
        per_input: dict[str, list[Any]] = defaultdict(list)
        for _, span in logical[site].values():
            per_input[canonical_json(strip_call_ids(json_value(span_field(span, "input"))))].append(span)
        task, kind = meta[site]
        sc = SiteCensus(site=site, task=task, kind=kind,
                        model_call=found[site].describe() if site in found else None)
        for inp in sorted(per_input):
            obs = per_input[inp]
            errors = sum(1 for s in obs if (span_field(s, "status") or "ok") != "ok")
            outs = Counter(canonical_json(strip_call_ids(json_value(span_field(s, "output")))) for s in obs
                           if (span_field(s, "status") or "ok") == "ok")
            ok = sum(outs.values())
            modal, modal_n = (outs.most_common(1)[0] if outs else (None, 0))
            sc.add(InputCensus(input=inp, observations=len(obs), errors=errors, distinct_outputs=len(outs),
                               modal_output=modal, modal_share=(modal_n / ok) if ok else 0.0,
                               verdict=verdict_of(len(obs), errors, len(outs))))
        sites.append(sc)
    return Census(sites=sites)


CensusRow = tuple
"""One grouped row: ``(site, task, kind, input_id, status, output_id, n, first_ns)`` — ``n``
logical observations of ``input_id`` at ``site`` ending in ``status`` with ``output_id``, the
first of them starting at ``first_ns``; rows ordered by site, then input id (ids are hashable:
payload ids in a store, content digests over Parquet; None is JSON null)."""


def census_from_rows(rows: Iterable[CensusRow],
                     resolve: Callable[[list[Hashable]], dict[Hashable, str]] | None = None,
                     with_inputs: bool = False) -> Census:
    """Fold grouped census rows (:data:`CensusRow`, e.g. :meth:`auto.store.Store.census_rows`)
    into a :class:`Census`, holding one input at a time (and, with ``with_inputs``, one site's
    inputs).

    Args:
        rows: the grouped rows, ordered by site then input id.
        resolve: ``resolve(ids) -> {id: canonical JSON text}``; needed with ``with_inputs``.
        with_inputs: collect :class:`InputCensus` rows (input and modal output as canonical JSON).

    Raises:
        ArgumentError: ``with_inputs`` without ``resolve``.
    """
    if with_inputs and resolve is None:
        raise ArgumentError("census_from_rows(with_inputs=True) needs resolve")
    sites: dict[str, SiteCensus] = {}
    first_of: dict[str, tuple] = {}
    pending: list[tuple] = []  # (input id, InputCensus without texts, output candidates)
    state: dict[str, Any] = {"site": None, "input": None, "rows": []}

    def finish_site(site: str | None) -> None:
        if site is None or not with_inputs or not pending:
            return
        ids = {p[0] for p in pending} | {o for p in pending for o in p[2]}
        texts = resolve(sorted((i for i in ids if i is not None), key=repr)) if resolve else {}

        def text(i: Any) -> str:
            return "null" if i is None else texts[i]

        done = []
        for input_id, ic, cands in pending:
            if cands:  # (-n, first_ns, text): most observations, then earliest, then smaller JSON
                best = min(cands.items(), key=lambda kv: (-kv[1][0], kv[1][1], text(kv[0])))[0]
                ic.modal_output = text(best)
            ic.input = text(input_id)
            done.append(ic)
        sites[site].inputs = sorted(done, key=lambda ic: ic.input)
        pending.clear()

    def finish_input() -> None:
        rs = state["rows"]
        if not rs:
            return
        site, input_id = state["site"], state["input"]
        obs = errors = ok = 0
        outs: dict[Any, list] = {}
        for _site, _task, _kind, _inp, status, output_id, n, first_ns in rs:
            obs += n
            if (status or "ok") != "ok":
                errors += n
                continue
            ok += n
            o = outs.setdefault(output_id, [0, first_ns or 0])
            o[0] += n
            o[1] = min(o[1], first_ns or 0)
        modal_n = max((v[0] for v in outs.values()), default=0)
        ic = InputCensus(input="", observations=obs, errors=errors, distinct_outputs=len(outs), modal_output=None,
                         modal_share=(modal_n / ok) if ok else 0.0, verdict=verdict_of(obs, errors, len(outs)))
        sites[site].add(ic, keep=False)
        if with_inputs:
            pending.append((input_id, ic, {k: (v[0], v[1]) for k, v in outs.items()}))
        state["rows"] = []

    for row in rows:
        site, task, kind, input_id = row[0], row[1], row[2], row[3]
        if site != state["site"] or input_id != state["input"] or not state["rows"]:
            finish_input()
            if site != state["site"]:
                finish_site(state["site"])
                if site not in sites:
                    sites[site] = SiteCensus(site=site, task=task, kind=kind or "span",
                                             inputs=[] if with_inputs else None)
            state["site"], state["input"] = site, input_id
        first = (row[7] if row[7] is not None else 0, task or "", kind or "")
        if site not in first_of or first < first_of[site][0]:
            first_of[site] = (first, task, kind or "span")
        state["rows"].append(row)
    finish_input()
    finish_site(state["site"])
    for site, sc in sites.items():
        sc.task, sc.kind = first_of[site][1], first_of[site][2]
    return Census(sites=[sites[k] for k in sorted(sites)])


def join(a: Census, b: Census) -> Census:
    """One census of two over disjoint spans (their sites side by side, ordered by name).

    Raises:
        ArgumentError: a site is in both.
    """
    names = {s.site for s in a.sites}
    both = sorted(names & {s.site for s in b.sites})
    if both:
        raise ArgumentError(f"site {both[0]!r} is in both censuses")
    return Census(sites=sorted([*a.sites, *b.sites], key=lambda s: s.site))


def census_model_calls(rows: Iterable[tuple], resolve: Callable[[list[Hashable]], dict[Hashable, str]],
                       with_inputs: bool = False) -> Census:
    """The census of model-call spans from the database's rows grouped by distinct request
    (:func:`auto.store.store.model_call_census_sql`): sites are found over the distinct requests
    (:func:`auto.sites.discover` depends only on which requests were recorded, not how often),
    each row's request becomes its slot values and its response its site answer, and the rows
    are folded as :func:`census_from_rows` folds them. Requests that are not model calls
    Auto understands stay under their recorded site with the whole request as input, as in
    :func:`census`. Memory grows with the distinct requests and responses, not with the spans.

    Args:
        rows: ``(site, task, name, input_id, status, output_id, n, first_ns, spans)``.
        resolve: ``resolve(ids) -> {id: canonical JSON text}`` of payload ids.
        with_inputs: collect the per-input rows.

    Raises:
        StoreError, IntegrityError: from ``resolve``.
    """
    rows = list(rows)
    requests = sorted({(r[1] or "", r[2] or "", r[3]) for r in rows}, key=repr)
    ids = sorted({i for _t, _n, i in requests if i is not None} | {r[5] for r in rows if r[5] is not None}, key=repr)
    texts: dict[Hashable, str] = {}
    for k in range(0, len(ids), 20_000):
        texts.update(resolve(ids[k:k + 20_000]))

    def text(i: Any) -> str:
        return "null" if i is None else texts[i]

    found = discover([{"kind": MODEL_CALL_KIND, "task": t or None, "name": n, "input": json.loads(text(i))}
                      for t, n, i in requests])
    index = {req: k for k, req in enumerate(requests)}
    site_of = {k: sid for sid, members in found.members.items() for k in members}
    answers: dict[Any, str] = {}

    def answer(i: Any) -> str:
        if i not in answers:
            answers[i] = canonical_json(site_answer(json.loads(text(i))))
        return answers[i]

    out: list[tuple] = []
    spans_of: dict[str, int] = defaultdict(int)
    for site, task, name, input_id, status, output_id, n, first_ns, spans in rows:
        k = index[(task or "", name or "", input_id)]
        sid = site_of.get(k)
        if sid is None:
            out.append((site, task, MODEL_CALL_KIND, text(input_id), status, text(output_id), n, first_ns))
        else:
            spans_of[sid] += int(spans)
            out.append((sid, task, MODEL_CALL_KIND, canonical_json(found.inputs[k]), status, answer(output_id), n, first_ns))
    out.sort(key=lambda r: (r[0], r[3]))
    c = census_from_rows(out, lambda xs: {x: x for x in xs}, with_inputs)
    for sc in c.sites:
        if sc.site in found.sites:
            sc.model_call = dataclasses.replace(found.sites[sc.site], requests=spans_of[sc.site]).describe()
    return c


def census_store(store: Any, task: str | None = None, with_inputs: bool = False) -> Census:
    """The census of a store (:class:`auto.store.Store`), aggregated in its database: every span
    but the model calls grouped by site, input and output (memory bounded by the sites, and with
    ``with_inputs`` the inputs, reported), the model calls (kind ``llm``) grouped by distinct
    request and response, then counted per model-call site (:func:`census_model_calls`).

    Args:
        store: the store (SQLite or PostgreSQL).
        task: only the spans whose task column is ``task`` (read through the task index).
        with_inputs: collect the per-input rows (memory grows with the inputs reported).

    Raises:
        StoreError: the database failed; IntegrityError: a payload does not decode.
    """
    grouped = census_from_rows(store.census_rows(task, exclude_kind=MODEL_CALL_KIND),
                               store.payload_texts if with_inputs else None, with_inputs)
    calls = census_model_calls(store.model_call_rows(MODEL_CALL_KIND, task), store.payload_texts, with_inputs)
    return join(grouped, calls)


def render_table(c: Census) -> str:
    """A terminal table of the census (one row per site, then the headline)."""
    head = f"{'site':<48} {'inputs':>6} {'det':>5} {'div':>5} {'err':>4} {'once':>5} {'spans':>6} {'det%':>6}"
    lines = [head, "-" * len(head)]
    for s in c.sites:
        k = s.counts
        pct = f"{100 * s.deterministic_spans / s.spans:.1f}" if s.spans else "-"
        name = s.site if len(s.site) <= 48 else s.site[:45] + "..."
        lines.append(
            f"{name:<48} {s.distinct_inputs:>6} {k[WITNESSED]:>5} {k[DIVERGENT]:>5} {k[ERRORED]:>4} "
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
