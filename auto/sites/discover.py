"""Finding model-call sites in recorded model-call spans, and reading a site's witnesses.

:func:`discover` groups the recorded chat-completion requests (``llm`` spans named
``chat.completions`` whose input has a ``messages`` list; spans marked ``auto.opaque`` are not
model calls Auto understands) in three steps:

1. by ``(enclosing task, span name, request shape)`` (:func:`auto.record.template.shape_digest`):
   requests that differ in the model, in any output-affecting parameter or in message structure
   are never one site;
2. by the text of their system and developer messages when those take between 2 and
   :data:`SPLIT_MAX` distinct values (a different system prompt is a different call site);
3. within each group, every text leaf is aligned across the requests (:func:`auto.sites.align.align`):
   leaves that never varied are the site's fixed text, the others are cut into slots.

Each group is one :class:`~auto.sites.site.Site`; each of its requests is one observation with
input = its slot values and output = :func:`auto.sites.answer.site_answer` of the response. The
census (:func:`census_view`) and the compiler (:func:`read_site`) see sites this way.

The steps are also offered one by one, for a database that holds the requests: what a request
contributes (:func:`read_request`), the paths that split a group (:func:`split_paths`), a site
from its leaf templates (:func:`build_site`), and :class:`SiteFinder` (the steps over distinct
requests added one at a time; :mod:`auto.interchange.duckdb_sites` runs them in SQL). Two
requests of one site have equal slot values exactly when their :func:`leaves_key` is equal.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from auto.canonical import digest
from auto.record.template import request_leaves, request_skeleton
from auto.sites.align import SLOT, Parts, align
from auto.sites.answer import site_answer
from auto.sites.request import canonical_request
from auto.sites.site import Site, site_id, slot_names
from auto.store import Witness

MODEL_CALL_KIND = "llm"
"""The span kind of model calls."""

MODEL_CALL_SPANS = ("chat.completions",)
"""Span names of the model calls that sites are found for."""

RESOLVE_CHUNK = 20_000
"""Payload ids resolved per call when requests are read back from a store."""

SPLIT_ROLES = ("system", "developer")
"""Roles whose message text, when it takes few values, tells call sites apart."""

SPLIT_MAX = 8
"""A system or developer message with at most this many distinct texts splits its group."""


def span_field(span: Any, key: str, default: Any = None) -> Any:
    """``span[key]`` of a span given as a mapping (a stored row) or an object (a record)."""
    if isinstance(span, Mapping):
        return span.get(key, default)
    return getattr(span, key, default)


def json_value(value: Any) -> Any:
    """A stored JSON column's value: text is parsed when it is JSON, kept as it is otherwise."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def is_model_call(span: Any) -> bool:
    """Whether a span is a recorded chat-completion request that sites are found for."""
    if span_field(span, "kind") != MODEL_CALL_KIND or span_field(span, "name") not in MODEL_CALL_SPANS:
        return False
    body = json_value(span_field(span, "input"))
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return False
    attrs = json_value(span_field(span, "attributes")) or {}
    return not (isinstance(attrs, dict) and attrs.get("auto.opaque"))


@dataclass
class Discovery:
    """What :func:`discover` found.

    Attributes:
        sites: site id → :class:`Site`, ordered by id.
        members: site id → indices (into the spans given) of its requests, in the given order.
        inputs: span index → the slot values of that request.
    """

    sites: dict[str, Site] = field(default_factory=dict)
    members: dict[str, list[int]] = field(default_factory=dict)
    inputs: dict[int, dict[str, str]] = field(default_factory=dict)

    def site_of(self, index: int) -> str | None:
        """The site id of the span at ``index`` (None: not a model call)."""
        for sid, idx in self.members.items():
            if index in idx:
                return sid
        return None


def leaf_role(skeleton: dict, path: str) -> Any:
    """The role of the message a leaf path (``"1.content"``) lies in, or None."""
    head = path.split(".", 1)[0]
    msgs = skeleton.get("messages") or []
    if head.isdigit() and int(head) < len(msgs) and isinstance(msgs[int(head)], dict):
        return msgs[int(head)].get("role")
    return None


@dataclass(frozen=True)
class Request:
    """What discovery reads of one chat-completion request body (:func:`read_request`).

    Attributes:
        shape: the shape digest (:func:`auto.record.template.shape_digest`).
        skeleton: the request skeleton it digests.
        leaves: leaf path → text (:func:`auto.record.template.request_leaves`), in document order.
    """

    shape: str
    skeleton: dict
    leaves: dict[str, str]


def read_request(body: Any) -> Request | None:
    """The :class:`Request` of a request body, read in its canonical form
    (:func:`auto.sites.request.canonical_request`: however a client wrote it), or None when it is
    no chat-completion request (not an object with a non-empty ``messages`` list)."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return None
    body = canonical_request(body)
    sk = request_skeleton(body)
    return Request(digest(sk), sk, dict(request_leaves(body["messages"])))


def split_paths(skeleton: dict, paths: Iterable[str], distinct: Callable[[str], int]) -> list[str]:
    """The leaf paths that split a group of requests into call sites (step 2 of the module
    docstring): system and developer messages whose text takes between 2 and :data:`SPLIT_MAX`
    distinct values (``distinct(path)``) over the group, in ``paths`` order."""
    return [p for p in paths if leaf_role(skeleton, p) in SPLIT_ROLES and 2 <= distinct(p) <= SPLIT_MAX]


def build_site(task: str | None, name: str, shape: str, skeleton: dict, leaves: dict[str, Parts],
               requests: int) -> Site:
    """The :class:`Site` of one part of a group, from its leaf templates (path → parts, in
    document order; :func:`auto.sites.align.align` or :func:`~auto.sites.align.leaf_template`)."""
    fixed = {p: t[0] for p, t in leaves.items() if len(t) == 1 and t[0] is not SLOT}
    sid = site_id(task or None, name, shape, fixed)
    return Site(id=sid, task=task or None, name=name, shape=shape, skeleton=skeleton, leaves=leaves,
                slots=slot_names(skeleton, leaves), requests=requests, fixed=fixed)


def discover(spans: Iterable[Any]) -> Discovery:
    """Find the model-call sites of ``spans`` (see the module docstring).

    Args:
        spans: span rows (mappings or objects with ``kind``, ``name``, ``task``, ``input``;
            JSON columns may be text). Other spans are ignored.

    Returns:
        A :class:`Discovery` (deterministic: the same spans in any order give the same sites).
    """
    groups: dict[tuple[str, str, str], list[tuple[int, dict, dict[str, str]]]] = defaultdict(list)
    skeletons: dict[str, dict] = {}
    for i, span in enumerate(spans):
        if not is_model_call(span):
            continue
        body = json_value(span_field(span, "input"))
        req = read_request(body)
        assert req is not None  # is_model_call checked the body
        skeletons.setdefault(req.shape, req.skeleton)
        groups[(span_field(span, "task") or "", span_field(span, "name"), req.shape)].append((i, body, req.leaves))
    out = Discovery()
    found: list[tuple[str, Site, list[int], dict[int, dict[str, str]]]] = []
    for (task, name, shape), members in sorted(groups.items()):
        skeleton = skeletons[shape]
        paths = list(members[0][2])
        split = split_paths(skeleton, paths, lambda p: len({m[2].get(p) for m in members}))
        parts: dict[tuple, list] = defaultdict(list)
        for m in members:
            parts[tuple(m[2].get(p) for p in split)].append(m)
        for _key, part in sorted(parts.items(), key=lambda kv: json.dumps(kv[0])):
            site = build_site(task, name, shape, skeleton, {p: align([m[2][p] for m in part]) for p in paths},
                              len(part))
            inputs = {}
            for idx, body, _leaves in part:
                got = site.extract(body, shape=shape)
                if got is None:  # pragma: no cover - align checks every value fits
                    raise AssertionError(f"site {site.id}: a recorded request does not fit its own template")
                inputs[idx] = got
            found.append((site.id, site, [m[0] for m in part], inputs))
    for sid, site, idx, inputs in sorted(found, key=lambda f: f[0]):
        out.sites[sid] = site
        out.members[sid] = idx
        out.inputs.update(inputs)
    return out


def leaves_key(leaves: Mapping[str, str]) -> str:
    """A key of a request's text leaves (path → text): equal for two requests of one site exactly
    when their slot values are equal (a site's leaf templates turn leaf texts into slot values and
    back, :mod:`auto.sites.align`)."""
    return digest(dict(leaves))


class _Part:
    """Requests of one group that share the texts of their system and developer leaves."""

    __slots__ = ("group", "cand", "values", "site")

    def __init__(self, group: tuple, cand: tuple, paths: list[str]) -> None:
        self.group = group
        self.cand = cand
        self.values: dict[str, set[str]] = {p: set() for p in paths}
        self.site: str | None = None


class SiteFinder:
    """:func:`discover` over distinct requests added one at a time (a store's grouped rows):
    the same sites, holding only each part's distinct leaf values, not the requests.

    Use: :meth:`add` each distinct ``(task, name, request)`` (a token comes back), then
    :meth:`finish` (the sites by id), then :meth:`site_of` a token.
    """

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str, str], tuple[dict, list[str], list[str], dict[tuple, _Part]]] = {}

    def add(self, task: str | None, name: str, req: Request) -> _Part:
        """Count one distinct request (:func:`read_request`) of span name ``name`` inside
        ``task``; returns the token :meth:`site_of` reads after :meth:`finish` (requests of one
        shape have the same leaf paths: the shape fixes them)."""
        key = (task or "", name, req.shape)
        g = self._groups.get(key)
        if g is None:
            paths = list(req.leaves)
            g = (req.skeleton, paths, [p for p in paths if leaf_role(req.skeleton, p) in SPLIT_ROLES], {})
            self._groups[key] = g
        cand = tuple(req.leaves.get(p) for p in g[2])
        part = g[3].get(cand)
        if part is None:
            part = g[3][cand] = _Part(key, cand, g[1])
        for p, t in req.leaves.items():
            part.values[p].add(t)
        return part

    def finish(self) -> dict[str, Site]:
        """The sites by id, ordered (``requests`` is 0: the caller counts them)."""
        found: dict[str, Site] = {}
        for (task, name, shape), (skeleton, paths, cands, parts) in sorted(self._groups.items()):
            index = {p: i for i, p in enumerate(cands)}
            split = split_paths(skeleton, paths, lambda p: len({c[index[p]] for c in parts}))
            merged: dict[tuple, list[_Part]] = defaultdict(list)
            for cand, part in parts.items():
                merged[tuple(cand[index[p]] for p in split)].append(part)
            for members in merged.values():
                values = {p: set().union(*(m.values[p] for m in members)) for p in paths}
                site = build_site(task, name, shape, skeleton, {p: align(values[p]) for p in paths}, 0)
                for m in members:
                    m.site = site.id
                found[site.id] = site
        return dict(sorted(found.items()))

    @staticmethod
    def site_of(token: _Part) -> str | None:
        """The site id of an added request (after :meth:`finish`)."""
        return token.site


def store_sites(store: Any, task: str | None = None) -> dict[str, Site]:
    """The model-call sites of a store: what ``discover(store.spans(kind="llm")).sites`` gives
    (the same ids, templates and request counts, ordered by id), found from the database's rows
    grouped by distinct request (:meth:`auto.store.Store.model_call_rows`, the census's grouped
    path) instead of from every span, so memory grows with the distinct requests, not with the
    spans. (:func:`discover` depends only on which requests were recorded; a site's ``requests``
    is the sum of its requests' recorded spans, retried attempts included, as over the spans.)

    Args:
        store: a :class:`auto.store.Store` (SQLite or PostgreSQL).
        task: only the model calls whose task column is ``task``.

    Raises:
        StoreError: the database failed; IntegrityError: a payload does not decode.
    """
    spans_of: dict[tuple[str, str, Any], int] = defaultdict(int)
    for row in store.model_call_rows(MODEL_CALL_KIND, task):  # (site, task, name, input_id, ..., spans)
        spans_of[(row[1] or "", row[2] or "", row[3])] += int(row[8])
    requests = sorted(spans_of, key=repr)
    ids = sorted({i for _t, _n, i in requests if i is not None}, key=repr)
    texts: dict[Any, str] = {}
    for k in range(0, len(ids), RESOLVE_CHUNK):
        texts.update(store.payload_texts(ids[k:k + RESOLVE_CHUNK]))
    found = discover({"kind": MODEL_CALL_KIND, "task": t or None, "name": n,
                      "input": None if i is None else json.loads(texts[i])} for t, n, i in requests)
    return {sid: dataclasses.replace(site, requests=sum(spans_of[requests[k]] for k in found.members[sid]))
            for sid, site in found.sites.items()}


def census_view(spans: Iterable[Any]) -> tuple[list[Any], dict[str, Site]]:
    """``spans`` as the census sees them: every model call re-keyed to its site (``site`` = the
    site id, ``input`` = its slot values, ``output`` = its site answer); other spans unchanged.

    Returns:
        ``(spans, sites by id)``.
    """
    rows = list(spans)
    d = discover(rows)
    site_of = {i: sid for sid, idx in d.members.items() for i in idx}
    out = []
    for i, span in enumerate(rows):
        sid = site_of.get(i)
        if sid is None:
            out.append(span)
            continue
        row = dict(span) if isinstance(span, Mapping) else {k: span_field(span, k) for k in (
            "span_id", "trace_id", "name", "kind", "task", "status", "started_ns", "attributes")}
        row["site"] = sid
        row["input"] = d.inputs[i]
        row["output"] = site_answer(json_value(span_field(span, "output")))
        out.append(row)
    return out, d.sites


@dataclass(frozen=True)
class SiteWitnesses:
    """A site as the compiler reads it from a store.

    Attributes:
        site: the :class:`Site`.
        witnesses: :class:`auto.store.Witness` records of its successful model calls (input = slot
            values, output = site answer), ordered by start time.
        digest: the digest of all of the site's span digests (failed calls included), ordered by
            ``(started_ns, span_id)`` as :meth:`auto.store.Store.digest` orders a task's.
        reference_model: the model its recorded responses name (``simulated: <name>`` when the
            recorder marked it simulated), or None.
    """

    site: Site
    witnesses: list[Witness]
    digest: str
    reference_model: str | None


MODEL_CALL_CACHE_SPANS = 20_000
"""A store's model-call spans are kept for the next :func:`read_site` of this process (with
the sites found in them) when there are at most this many: compiling every site of a store
(``auto compile --all``) reads and aligns them once per worker instead of once per site."""

_CACHE: dict[str, tuple[tuple[int, int], bool, list[dict], Discovery]] = {}
_CACHE_LOCK = threading.Lock()


def _model_calls(store: Any, verify: bool) -> tuple[list[dict], Discovery]:
    """The store's ``llm`` spans and the sites found in them, from this process's cache when
    the spans' watermark (:meth:`auto.store.Store.span_watermark`: count and largest ``seq`` of
    insert-only rows) is the one they were read at, else read (and, with ``verify``, checked:
    :meth:`auto.store.Store.verified_spans`). The watermark is read before the spans, so a
    cached read never misses a row the watermark counts. A cache hit under ``verify`` still runs
    the incremental check (only the rows past its watermark are read: none when nothing new
    was recorded), so a dropped trigger or a deleted row is still found."""
    key = store.location
    mark = store.span_watermark("llm")
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None and hit[0] == mark and (hit[1] or not verify):
        if verify:
            store.verify(kind="llm", incremental=True).raise_for_mismatch()
        return hit[2], hit[3]
    spans = store.verified_spans("llm") if verify else store.spans(kind="llm")
    d = discover(spans)
    with _CACHE_LOCK:
        _CACHE.clear()  # one store state at a time
        if len(spans) <= MODEL_CALL_CACHE_SPANS:
            _CACHE[key] = (mark, verify, spans, d)
    return spans, d


def read_site(store: Any, sid: str, *, verify: bool = False) -> SiteWitnesses | None:
    """The site ``sid`` of a store with its witnesses (:class:`SiteWitnesses`), or None when the
    store holds no such site.

    When the site's latest stored generation was compiled with a template that still fits every
    recorded request of the site, that template is kept (so the next generation has the same
    input fields and the ratchet can compare the two on the same live inputs); otherwise the
    freshly aligned one is used.

    The store's model-call spans are read, and the sites found in them, once per store state and
    process (:data:`MODEL_CALL_CACHE_SPANS`). ``verify=True``: those spans recorded since the
    last incremental check of kind ``llm`` are re-derived in the snapshot they are read from
    (:meth:`auto.store.Store.verified_spans`).

    Raises:
        IntegrityError: (``verify``) a stored digest does not match its content.
    """
    spans, d = _model_calls(store, verify)
    site = d.sites.get(sid)
    if site is None:
        return None
    members = [spans[i] for i in d.members[sid]]
    inputs = {i: d.inputs[i] for i in d.members[sid]}
    latest = store.latest_artifact(sid)
    entry = latest.typed_manifest.site if latest is not None else None
    if isinstance(entry, dict):
        try:
            prev = Site.from_manifest(entry)
        except ValueError:
            prev = None
        if prev is not None and prev.id == sid and prev.slots != site.slots:
            kept = [prev.extract(json_value(s.get("input"))) for s in members]
            if all(k is not None for k in kept):
                site = Site(id=sid, task=site.task, name=site.name, shape=site.shape, skeleton=site.skeleton,
                            leaves=prev.leaves, slots=prev.slots, requests=site.requests, fixed=site.fixed)
                inputs.update(zip(d.members[sid], kept))
    witnesses = []
    model = None
    for i in d.members[sid]:
        s = spans[i]
        a = s.get("attributes") or {}
        name = a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
        if model is None and name:
            model = f"simulated: {name}" if a.get("auto.reference_model.simulated") else str(name)
        if s.get("status") != "ok":
            continue
        witnesses.append(Witness(input=inputs[i], output=site_answer(s.get("output")), status="ok", error=None,
                                 trace_id=s["trace_id"], span_id=s["span_id"], started_ns=s["started_ns"],
                                 digest=s.get("digest") or "", attributes=a))
    ordered = sorted(members, key=lambda s: (s.get("started_ns") or 0, s.get("span_id") or ""))
    return SiteWitnesses(site, witnesses, digest([s.get("digest") for s in ordered]), model)
