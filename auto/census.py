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

Repeats a ratchet's table overlay answered from an input's first witness were never re-asked, so
they are neither spans nor evidence of determinism; :func:`census_store` reports them per task
beside the verdicts (``served_from_first_witness``, from the store's ratchet log), so a store
whose repeats the overlay served reads "N repeats served from the first witness", not "0%
deterministic" alone.

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
* :func:`census_store` — in the database: the store counts its spans per site, input and output
  in SQL that SQLite, PostgreSQL and DuckDB all run, down to a few rows per site
  (:meth:`auto.store.Store.census_site_rows`, folded by :func:`census_from_site_rows`); with
  ``with_inputs``, one row per site, input and output (:meth:`auto.store.Store.census_rows`,
  folded by :func:`census_from_rows`), so memory is bounded by the number of sites — and the
  inputs reported — not by the number of spans. Inputs are compared as stored values (content
  digests of their canonical JSON). Model-call spans (kind ``llm``) are grouped by distinct
  request and response instead, their sites found over the distinct requests
  (:func:`census_model_calls`), and the two censuses are joined (:func:`join`). Over a Parquet
  export, DuckDB finds the model-call sites in SQL as well
  (:func:`auto.interchange.parquet.census_parquet`).

When outputs tie for the modal one, the earliest-recorded wins (then the smaller canonical JSON).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import types
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Hashable, Iterable, Mapping

from auto.canonical import canonical_json
from auto.errors import ArgumentError
from auto.record.template import strip_call_ids
from auto.sites import census_view, site_answer
from auto.sites.discover import (MODEL_CALL_KIND, MODEL_CALL_SPANS, RESOLVE_CHUNK, SiteFinder, json_value, leaves_key,
                                 read_request, span_field)

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
    served: dict[str, Any] | None = None
    """Repeats a ratchet's table overlay answered from their first witness, never re-asked, as
    its log last recorded them (:func:`served_from_log`): ``answers``, ``inputs``, ``at_call``.
    They are no spans (nothing was recorded), so they are reported beside the verdicts and never
    counted as witnessed-deterministic; None when the store's log has none for the task."""

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

    def add_inputs(self, verdict: str, inputs: int, observations: int) -> None:
        """Count ``inputs`` distinct inputs that each had ``observations`` observations and
        the verdict ``verdict`` (what :meth:`add` counts, for many inputs at once)."""
        self.distinct_inputs += inputs
        self.spans += inputs * observations
        self.verdicts[verdict] += inputs
        if verdict == WITNESSED:
            self.deterministic_spans += inputs * observations
        if observations >= 2:
            self.seen_twice += inputs

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
        d["served_from_first_witness"] = self.served
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


SiteRow = tuple
"""One row of the census aggregated per site (:func:`auto.store.census_sql.site_aggregate_sql`):
``(site, obs, errors, outs, inputs, None, None, None)`` — ``inputs`` distinct inputs of ``site``
with ``obs`` observations, ``errors`` of them failed, ``outs`` distinct successful outputs — or
``(site, None, None, None, None, task, kind, first_ns)``: the earliest observation of ``site``
under ``task`` and ``kind``."""


def census_from_site_rows(rows: Iterable[SiteRow]) -> Census:
    """Fold the census aggregated per site (:data:`SiteRow`, any order) into a :class:`Census`
    without per-input rows: the counts :func:`census_from_rows` finds, from a few rows per site.

    A site's task and kind are those of its earliest observation (ties: the smaller task, then
    kind), as in :func:`census_from_rows`.
    """
    sites: dict[str, SiteCensus] = {}
    first: dict[str, tuple] = {}
    for site, obs, errors, outs, inputs, task, kind, first_ns in rows:
        if inputs is None:
            key = (int(first_ns) if first_ns is not None else 0, task or "", kind or "")
            if site not in first or key < first[site][0]:
                first[site] = (key, task, kind or "span")
            continue
        sc = sites.get(site)
        if sc is None:
            sc = sites[site] = SiteCensus(site=site, task=None, kind="span", inputs=None)
        sc.add_inputs(verdict_of(int(obs), int(errors), int(outs)), int(inputs), int(obs))
    for site, sc in sites.items():
        if site in first:
            sc.task, sc.kind = first[site][1], first[site][2]
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


_NO_OUTPUT = object()


def _in_order(ids: Iterable[Hashable]) -> list[Hashable]:
    """Payload ids sorted (by value when they compare, as integers or digests do; else by repr)."""
    ids = list(ids)
    try:
        return sorted(ids)
    except TypeError:
        return sorted(ids, key=repr)


def census_model_calls(rows: Iterable[tuple], resolve: Callable[[list[Hashable]], dict[Hashable, str]],
                       with_inputs: bool = False) -> Census:
    """The census of model-call spans from the database's rows grouped by distinct request
    (:func:`auto.store.census_sql.model_call_census_sql`): sites are found over the distinct requests
    (:class:`auto.sites.discover.SiteFinder`: :func:`auto.sites.discover` depends only on which
    requests were recorded, not how often), each row's request becomes its slot values and its
    response its site answer, and the rows are folded as :func:`census_from_rows` folds them.
    Requests that are not model calls Auto understands stay under their recorded site with the
    whole request as input, as in :func:`census`.

    Memory: the grouped rows, one key per distinct request, and the distinct leaf texts of the
    sites (the request and response texts are read in id order, in chunks of
    :data:`auto.sites.discover.RESOLVE_CHUNK`, and let go); ``with_inputs`` also keeps every
    input's texts.

    Args:
        rows: ``(site, task, name, input_id, status, output_id, n, first_ns, spans)``.
        resolve: ``resolve(ids) -> {id: canonical JSON text}`` of payload ids.
        with_inputs: collect the per-input rows.

    Raises:
        StoreError, IntegrityError: from ``resolve``.
    """
    pool: dict[Any, Any] = {}
    table = [(pool.setdefault(r[0], r[0]), pool.setdefault(r[1], r[1]), pool.setdefault(r[2], r[2]), r[3],
              pool.setdefault(r[4], r[4]), r[5], int(r[6]), r[7], int(r[8])) for r in rows]
    pool.clear()
    finder = SiteFinder()
    tokens: dict[tuple, tuple] = {}  # (task or "", name, input id) -> (finder token, leaves key)
    leaves_of: dict[Hashable, dict[str, str]] = {}  # with_inputs: input id -> leaves

    uses: dict[Hashable, list[tuple[str, str]]] = {}  # request id -> its (task or "", span name)
    for r in table:
        if r[2] in MODEL_CALL_SPANS and r[3] is not None:
            tn = (r[1] or "", r[2])
            got = uses.get(r[3])
            if got is None:
                uses[r[3]] = [tn]
            elif tn not in got:
                got.append(tn)
    ids = _in_order(uses)
    for k in range(0, len(ids), RESOLVE_CHUNK):  # in id order: the store reads its payloads in one sweep
        chunk = ids[k:k + RESOLVE_CHUNK]
        texts = resolve(chunk)
        for i in chunk:
            req = read_request(json.loads(texts[i]))
            combos = uses.pop(i)
            if req is None:
                continue
            key = leaves_key(req.leaves)
            if with_inputs:
                leaves_of[i] = req.leaves
            for t, n in combos:
                tokens[(t, n, i)] = (finder.add(t or None, n, req), key)
    del ids
    sites = finder.finish()
    del finder

    def site_of(r: tuple) -> tuple[str, str] | None:
        if r[2] not in MODEL_CALL_SPANS or r[3] is None:
            return None
        tok = tokens.get((r[1] or "", r[2], r[3]))
        return None if tok is None else (SiteFinder.site_of(tok[0]), tok[1])

    # the site answers of the responses at sites: their canonical JSON (with_inputs) or its digest
    answers: dict[Hashable, Any] = {}
    want = _in_order({r[5] for r in table if r[5] is not None and (r[4] or "ok") == "ok" and site_of(r) is not None})
    for k in range(0, len(want), RESOLVE_CHUNK):
        chunk = want[k:k + RESOLVE_CHUNK]
        texts = resolve(chunk)
        for o in chunk:
            a = canonical_json(site_answer(json.loads(texts[o])))
            answers[o] = a if with_inputs else hashlib.sha256(a.encode("utf-8")).digest()
    null_answer = canonical_json(site_answer(None))
    answers[None] = null_answer if with_inputs else hashlib.sha256(null_answer.encode("utf-8")).digest()

    spans_of: dict[str, int] = defaultdict(int)
    if with_inputs:
        c = _model_call_rows_with_inputs(table, site_of, sites, answers, leaves_of, resolve, spans_of)
    else:
        c = _model_call_counts(table, site_of, answers, spans_of)
    for sc in c.sites:
        if sc.site in sites:
            sc.model_call = dataclasses.replace(sites[sc.site], requests=spans_of[sc.site]).describe()
    return c


def _model_call_counts(table: list[tuple], site_of: Callable[[tuple], tuple[str, str] | None],
                       answers: dict[Hashable, Any], spans_of: dict[str, int]) -> Census:
    """The model-call census without per-input rows: one small record per distinct input."""
    stats: dict[tuple, list] = {}  # (site, input key) -> [observations, errors, first output, several]
    first: dict[str, tuple] = {}
    for r in table:
        site, task, _name, input_id, status, output_id, n, first_ns, spans = r
        ok = (status or "ok") == "ok"
        mapped = site_of(r)
        if mapped is not None:
            site, key = mapped
            spans_of[site] += spans
            out = answers[output_id] if ok else None
        else:
            key, out = input_id, output_id
        st = stats.get((site, key))
        if st is None:
            st = stats[(site, key)] = [0, 0, _NO_OUTPUT, False]
        st[0] += n
        if not ok:
            st[1] += n
        elif st[2] is _NO_OUTPUT:
            st[2] = out
        elif st[2] != out:
            st[3] = True
        f = (first_ns if first_ns is not None else 0, task or "", MODEL_CALL_KIND)
        if site not in first or f < first[site][0]:
            first[site] = (f, task)
    sites: dict[str, SiteCensus] = {}
    for (site, _key), (obs, errors, out, several) in stats.items():
        sc = sites.get(site)
        if sc is None:
            sc = sites[site] = SiteCensus(site=site, task=first[site][1], kind=MODEL_CALL_KIND, inputs=None)
        outs = 0 if out is _NO_OUTPUT else (2 if several else 1)
        sc.add_inputs(verdict_of(obs, errors, outs), 1, obs)
    return Census(sites=[sites[k] for k in sorted(sites)])


def _model_call_rows_with_inputs(table: list[tuple], site_of: Callable[[tuple], tuple[str, str] | None],
                                 sites: dict[str, Any], answers: dict[Hashable, Any],
                                 leaves_of: dict[Hashable, dict[str, str]],
                                 resolve: Callable[[list[Hashable]], dict[Hashable, str]],
                                 spans_of: dict[str, int]) -> Census:
    """The model-call census with per-input rows (inputs as slot values, outputs as site answers;
    requests Auto does not understand with their whole texts)."""
    raw = sorted({i for r in table if site_of(r) is None for i in (r[3], r[5]) if i is not None}, key=repr)
    texts: dict[Hashable, str] = {}
    for k in range(0, len(raw), RESOLVE_CHUNK):
        texts.update(resolve(raw[k:k + RESOLVE_CHUNK]))

    def text(i: Any) -> str:
        return "null" if i is None else texts[i]

    slots: dict[tuple, str] = {}
    out: list[tuple] = []
    for r in table:
        site, task, _name, input_id, status, output_id, n, first_ns, spans = r
        mapped = site_of(r)
        if mapped is None:
            out.append((site, task, MODEL_CALL_KIND, text(input_id), status, text(output_id), n, first_ns))
            continue
        sid = mapped[0]
        spans_of[sid] += spans
        if (sid, input_id) not in slots:
            values = sites[sid].slot_values(leaves_of[input_id].items())
            if values is None:  # pragma: no cover - the site's templates fit every request found
                raise AssertionError(f"site {sid}: a recorded request does not fit its own template")
            slots[(sid, input_id)] = canonical_json(values)
        ok = (status or "ok") == "ok"
        out.append((sid, task, MODEL_CALL_KIND, slots[(sid, input_id)], status,
                    answers[output_id] if ok else text(None), n, first_ns))
    out.sort(key=lambda r: (r[0], r[3]))
    return census_from_rows(out, lambda xs: {x: x for x in xs}, True)


def census_store(store: Any, task: str | None = None, with_inputs: bool = False) -> Census:
    """The census of a store (:class:`auto.store.Store`), aggregated in its database: every span
    but the model calls counted per site in SQL (:meth:`auto.store.Store.census_site_rows`: a
    few rows per site leave the database; with ``with_inputs``, one row per input and output,
    :meth:`~auto.store.Store.census_rows`), the model calls (kind ``llm``) grouped by distinct
    request and response, then counted per model-call site (:func:`census_model_calls`).

    Args:
        store: the store (SQLite or PostgreSQL).
        task: only the spans whose task column is ``task`` (read through the task index).
        with_inputs: collect the per-input rows (memory grows with the inputs reported).

    Raises:
        StoreError: the database failed; IntegrityError: a payload does not decode.
    """
    if with_inputs:
        grouped = census_from_rows(store.census_rows(task, exclude_kind=MODEL_CALL_KIND), store.payload_texts, True)
    else:
        grouped = census_from_site_rows(store.census_site_rows(task, exclude_kind=MODEL_CALL_KIND))
    calls = census_model_calls(store.model_call_rows(MODEL_CALL_KIND, task), store.payload_texts, with_inputs)
    out = join(grouped, calls)
    logged: dict[str, dict[str, Any] | None] = {}
    for s in out.sites:
        if s.task and s.model_call is None:
            if s.task not in logged:
                logged[s.task] = served_from_log(store, s.task)
            s.served = logged[s.task]
    return out


def served_from_log(store: Any, task: str) -> dict[str, Any] | None:
    """``{"answers", "inputs", "at_call"}``: what the task's table overlay had answered from
    witnesses it never re-asked, as the last compile row of the store's ratchet log that records
    it says (:class:`auto.ratchet.events.CompileRow`'s ``overlay``: the figures of the one ratchet
    that wrote the row, since its start; several processes on one store are not summed), or None
    (no such row)."""
    events = getattr(store, "ratchet_events", None)
    for e in reversed(events(task) if events is not None else []):
        ov = e.detail.get("overlay") if isinstance(e.detail, dict) else None
        if isinstance(ov, dict) and isinstance(ov.get("answers"), int) and isinstance(ov.get("inputs"), int):
            return {"answers": ov["answers"], "inputs": ov["inputs"], "at_call": e.detail.get("at_call")}
    return None


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
        if s.served is not None and s.served["answers"]:
            lines.append(f"  served from the first witness by the table overlay: {s.served['answers']} repeats of "
                         f"{s.served['inputs']} inputs (never re-asked, so no evidence either way; as logged at call "
                         f"{s.served['at_call']})")
    hl = c.headline
    lines.append("-" * len(head))
    lines.append(
        f"headline: {c.deterministic_spans} of {c.spans} spans witnessed-deterministic"
        + (f" ({100 * hl:.1f}%)" if hl is not None else "")
    )
    return "\n".join(lines)


class _CallableModule(types.ModuleType):
    """``auto.census`` is both this module and the function: ``auto.census(spans)`` calls
    :func:`census` (importing the module sets the attribute ``auto.census`` to the module, so the
    module itself must be callable, as :mod:`auto.ratchet` is)."""

    def __call__(self, spans: Iterable[Any], *, model_call_sites: bool = True) -> Census:
        return census(spans, model_call_sites=model_call_sites)


sys.modules[__name__].__class__ = _CallableModule
