"""One model-call site: a request template whose slots are the site's typed input.

A :class:`Site` is what :mod:`auto.sites.discover` found by aligning the recorded requests of
one call site: the request's shape (:func:`auto.record.template.request_skeleton`: model,
output-affecting parameters, roles and structure), and for every text leaf of its messages a
leaf template (:mod:`auto.sites.align`): fixed text, or fixed text with slots. The slots, by
name, are the site's input (a JSON object of strings); the site's answer is
:func:`auto.sites.answer.site_answer` of the response.

Identity: ``id = "site:" + the first 16 hex digits of digest({"task", "name", "shape",
"fixed"})`` where ``shape`` is the request's shape digest and ``fixed`` the leaves that never
varied (path → text). How the varying leaves are cut into slots is *not* part of the id, so a site
keeps its id when more recordings refine its slots; each compiled generation carries the exact
template its input was cut with (:meth:`Site.to_manifest`, the manifest key ``site``).

A request fits a site (:meth:`Site.extract`) when its shape is the site's, every fixed leaf has
the site's text, and every other leaf fits its leaf template; its slot values then determine the
request, and :meth:`Site.render` gives it back (with placeholder tool-call ids).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from auto.canonical import digest
from auto.record.template import LEAF, STRUCTURAL_KEYS, request_leaves, request_skeleton
from auto.sites.align import SLOT, Parts, extract, render
from auto.sites.request import canonical_request

SITE_PREFIX = "site:"
"""Model-call site ids start with this (task names in the store never should)."""

MANIFEST_FORMAT = "auto.site/1"
"""``format`` of a site's manifest entry."""

_LABEL = re.compile(r"([A-Za-z][A-Za-z0-9 _-]{0,30}?)\s*[:=]\s*$")


def is_site_id(name: Any) -> bool:
    """Whether ``name`` is a model-call site id (``site:<hex>``)."""
    return isinstance(name, str) and name.startswith(SITE_PREFIX)


def site_id(task: str | None, name: str, shape: str, fixed: dict[str, str]) -> str:
    """The id of a site (see the module docstring)."""
    return SITE_PREFIX + digest({"task": task or "", "name": name, "shape": shape, "fixed": fixed}).split(":", 1)[1][:16]


@dataclass(frozen=True)
class Slot:
    """One slot: its ``name`` (the input field), the leaf ``path`` it is cut from, and its
    ``index`` among that leaf's slots."""

    name: str
    path: str
    index: int


@dataclass(frozen=True)
class Site:
    """A model-call site (see the module docstring).

    Attributes:
        id: ``site:<16 hex>``.
        task: the enclosing task of the recorded calls (None outside any task).
        name: the model-call span name (``chat.completions``).
        shape: the shape digest; skeleton: the request skeleton it digests.
        leaves: leaf path → leaf template, in document order (a fixed leaf is ``(text,)``).
        slots: the slots, in document order (their names are the input's fields).
        requests: how many recorded requests the site was found from (0 when read from a manifest).
    """

    id: str
    task: str | None
    name: str
    shape: str
    skeleton: dict
    leaves: dict[str, Parts]
    slots: tuple[Slot, ...]
    requests: int = 0
    fixed: dict[str, str] = field(default_factory=dict)

    # -- the input ----------------------------------------------------------------------

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the site's input: an object of the slot names, each a string."""
        names = [s.name for s in self.slots]
        return {"type": "object", "properties": {n: {"type": "string"} for n in names}, "required": names,
                "additionalProperties": False}

    def extract(self, body: Any, shape: str | None = None, *, canonical: bool = False) -> dict[str, str] | None:
        """The slot values of a request body (``{slot name: text}``), or None when the request
        does not fit the site. The body is read in its canonical form
        (:func:`auto.sites.request.canonical_request`), so every client's rendering of one request
        fits alike; ``shape``: the canonical body's shape digest when already computed and
        ``canonical=True`` when ``body`` is already canonical
        (:func:`auto.sites.request.request_shape` gives both)."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return None
        if not canonical:
            body = canonical_request(body)
        if (shape or digest(request_skeleton(body))) != self.shape:
            return None
        return self.slot_values(request_leaves(body["messages"]))

    def slot_values(self, leaves: Iterable[tuple[str, str]]) -> dict[str, str] | None:
        """The slot values of a request of the site's shape given its text leaves (``(path,
        text)``, :func:`auto.record.template.request_leaves`), or None when a leaf does not fit."""
        leaves = list(leaves)
        if len(leaves) != len(self.leaves):
            return None
        values: dict[str, list[str]] = {}
        for path, text in leaves:
            parts = self.leaves.get(path)
            if parts is None:
                return None
            got = extract(parts, text)
            if got is None:
                return None
            values[path] = got
        if len(values) != len(self.leaves):
            return None
        return {s.name: values[s.path][s.index] for s in self.slots}

    def render(self, slots: dict[str, str]) -> dict:
        """The request body of the slot values ``slots`` (no ``stream``; tool-call ids are the
        skeleton's placeholders).

        Raises:
            KeyError: a slot is missing from ``slots``.
        """
        per_leaf: dict[str, list[str]] = {}
        for s in self.slots:
            per_leaf.setdefault(s.path, []).append(str(slots[s.name]))

        def fill(obj: Any, path: str) -> Any:
            if obj == LEAF:
                return render(self.leaves[path], per_leaf.get(path, []))
            if isinstance(obj, list):
                return [fill(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(obj)]
            if isinstance(obj, dict):
                return {k: (v if k in STRUCTURAL_KEYS else fill(v, f"{path}.{k}" if path else str(k)))
                        for k, v in obj.items()}
            return obj

        body = dict(self.skeleton)
        body["messages"] = fill(self.skeleton["messages"], "")
        return body

    # -- description and manifest -------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """JSON-able summary: id, task, name, model, requests, slots (name, path) and each leaf's
        template text (slots shown as ``{name}``)."""
        names: dict[tuple[str, int], str] = {(s.path, s.index): s.name for s in self.slots}
        text = {}
        for path, parts in self.leaves.items():
            k = 0
            out = []
            for p in parts:
                if p is SLOT:
                    out.append("{" + names[(path, k)] + "}")
                    k += 1
                else:
                    out.append(p)
            text[path] = "".join(out)
        return {"id": self.id, "task": self.task, "name": self.name, "model": self.skeleton.get("model"),
                "requests": self.requests, "slots": [{"name": s.name, "path": s.path} for s in self.slots],
                "template": text}

    def to_manifest(self) -> dict[str, Any]:
        """The manifest entry (``site``) of a generation compiled for this site: enough to cut a
        request into the generation's input and to render one back."""
        return {"format": MANIFEST_FORMAT, "id": self.id, "task": self.task, "name": self.name,
                "shape": self.shape, "skeleton": self.skeleton,
                "leaves": [[path, list(parts)] for path, parts in self.leaves.items()],
                "slots": [{"name": s.name, "path": s.path, "index": s.index} for s in self.slots]}

    @classmethod
    def from_manifest(cls, entry: Any) -> "Site":
        """The site of a manifest's ``site`` entry.

        Raises:
            ValueError: the entry is not an ``auto.site/1`` entry.
        """
        if not isinstance(entry, dict) or entry.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"not a {MANIFEST_FORMAT} manifest entry")
        try:
            leaves = {str(p): tuple(parts) for p, parts in entry["leaves"]}
            slots = tuple(Slot(str(s["name"]), str(s["path"]), int(s["index"])) for s in entry["slots"])
            fixed = {p: parts[0] for p, parts in leaves.items() if len(parts) == 1 and parts[0] is not SLOT}
            return cls(id=str(entry["id"]), task=entry.get("task"), name=str(entry["name"]), shape=str(entry["shape"]),
                       skeleton=dict(entry["skeleton"]), leaves=leaves, slots=slots, fixed=fixed)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed {MANIFEST_FORMAT} entry: {e}") from None


def slot_names(skeleton: dict, leaves: dict[str, Parts]) -> tuple[Slot, ...]:
    """Name every slot of ``leaves``: the label just before it (``"Ticket: {ticket}"`` →
    ``ticket``), else the role of its message (``user``, ``system``, ``tool``; ``…_arguments`` for
    tool-call arguments); repeated names get ``_2``, ``_3``, …"""
    msgs = skeleton.get("messages") or []
    out: list[Slot] = []
    used: dict[str, int] = {}
    taken: set[str] = set()
    for path, parts in leaves.items():
        k = 0
        for i, p in enumerate(parts):
            if p is not SLOT:
                continue
            base = None
            if i > 0 and isinstance(parts[i - 1], str):
                m = _LABEL.search(parts[i - 1])
                if m:
                    base = re.sub(r"[^a-z0-9]+", "_", m.group(1).strip().lower()).strip("_") or None
            if base is None:
                head = path.split(".", 1)[0]
                role = msgs[int(head)].get("role") if head.isdigit() and int(head) < len(msgs) and isinstance(msgs[int(head)], dict) else None
                base = re.sub(r"[^a-z0-9]+", "_", str(role or "text").lower()).strip("_") or "text"
                if ".arguments" in path:
                    base += "_arguments"
            if not base[0].isalpha():
                base = "s_" + base
            name, n = base, used.get(base, 0) + 1
            if n > 1:
                name = f"{base}_{n}"
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            used[base] = n
            taken.add(name)
            out.append(Slot(name, path, k))
            k += 1
    return tuple(out)
