"""The proxy's model-call sites: which site a request belongs to, and the ratchet that serves it.

The proxy finds sites the way the census does (:func:`auto.sites.store_sites`: discovery over
the store's distinct model-call requests) when it starts and again, on a background thread,
every ``rediscover_s`` seconds in which calls that belong to no known site were recorded (only
those can make a new site; a site's own calls refine it when its ratchet compiles). Each site
outside any task (the proxy's calls have no enclosing task) with at least ``min_requests``
recorded requests gets a :class:`auto.ratchet.Ratchet` keyed by the site id, created on that
thread (never on a request):

* it loads the generation its log says is installed; with none installed, it adopts the site's
  newest generation in the store that loads (one compiled by ``auto compile --site``; under a
  trust policy, the newest one a trusted key signed);
* it serves through :meth:`~auto.ratchet.Ratchet.decide` / :meth:`~auto.ratchet.Ratchet.complete`:
  the proxy answers what the guard admits and forwards the rest upstream itself; the recorded
  upstream call is the witness (``capture_witnesses=False``), and the ratchet compiles the next
  generation from the evidence in the background, as it does in process;
* its shadow audit re-asks the upstream with the request rendered from the slots
  (:meth:`auto.sites.Site.render`) and the operator's audit key (``auto proxy --audit-key``), or
  no credentials at all: never a caller's (a caller's key would be spent, and an audit would let
  one caller's key pay for, and see answers to, another caller's inputs); the audit call is
  recorded like any other (``auto.audit = true``).

Routing (:meth:`SiteService.route`): a request belongs to a site when it fits the site's
template as discovered; its input is then cut with the template of the *installed generation*
(the manifest's ``site`` entry), so an input always has the shape the artifact was compiled for.
A request that fits the site but not the installed generation's template is forwarded and
counted (``outside_template``).

Trust: with a :class:`auto_runtime.TrustPolicy`, a generation is installed only when a trusted
key signed its bytes (signatures looked up in the registry); with a signing key and a registry,
generations compiled by this proxy's ratchets are signed into the registry before they load.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

from auto_runtime import Artifact, TrustPolicy

from auto.errors import AutoError, ReferenceModelError
from auto.proxy.recording import ForwardedRequest, QueuedRecorder, ReadResponse, Url
from auto.proxy.upstream import Upstream
from auto.ratchet import DEFAULT_AUDIT_RATE, Ratchet
from auto.record.model_call import Attempt, LogicalCall
from auto.registry import Registry
from auto.sites import Site, site_answer, store_sites
from auto.store import Store
from auto.gate import Contract

log = logging.getLogger("auto.proxy")

UNANSWERABLE_PARAMS = ("logprobs", "top_logprobs")
"""Requests asking for these are never answered at tier-1 (an artifact has no token
probabilities to give); they are forwarded and recorded."""

CHAT_PATH = "/v1/chat/completions"


@dataclass
class Route:
    """Where a request goes: its site, the site's ratchet, and its input under the installed
    generation's template (None: it does not fit that template)."""

    site_id: str
    ratchet: Ratchet
    input: dict[str, str] | None


class SiteService:
    """The sites and ratchets of one proxy (see the module docstring).

    Args:
        store_path: the proxy's store.
        upstream: where audits are sent.
        recorder: records the audit calls.
        trust: refuse generations no trusted key signed (None: no check).
        registry: where signatures are looked up (and written, with ``sign_key``).
        sign_key: an Ed25519 private key (:func:`auto.signing.load_private_key`).
        audit_rate: the ratchets' shadow-audit rate.
        rediscover_s: how often (at most) sites are found again while calls are recorded.
        min_requests: recorded requests a site needs before it gets a ratchet.
        ratchet_options: more :class:`~auto.ratchet.Ratchet` arguments (policy, worker, …).
        contract_path: a contract TOML every site's ratchet gates with (its fields; the task is
            the site id), or None for :meth:`auto.gate.Contract.default_for`.
        say: progress lines (installs, refusals).
        audit_key: the key the shadow audits send (``Authorization: Bearer``), or None.
    """

    def __init__(self, store_path: str, upstream: Upstream, recorder: QueuedRecorder, *,
                 trust: TrustPolicy | None = None, registry: Registry | None = None, sign_key: Any = None,
                 audit_rate: float = DEFAULT_AUDIT_RATE, rediscover_s: float = 5.0, min_requests: int = 2,
                 ratchet_options: dict[str, Any] | None = None, contract_path: str | None = None,
                 say: Callable[[str], None] | None = None, audit_key: str | None = None) -> None:
        self.store_path = store_path
        self.upstream = upstream
        self.recorder = recorder
        self.trust = trust
        self.registry = registry
        self.sign_key = sign_key
        self.audit_rate = audit_rate
        self.rediscover_s = rediscover_s
        self.min_requests = min_requests
        self.ratchet_options = dict(ratchet_options or {})
        self.contract_path = contract_path
        self.say = say or log.info
        self._store = Store(store_path)
        self._by_shape: dict[str, list[Site]] = {}
        self._sites: dict[str, Site] = {}
        self._ratchets: dict[str, Ratchet] = {}
        self._templates: dict[str, Site] = {}
        self._audit_headers = {"authorization": f"Bearer {audit_key}"} if audit_key else {}
        self.counters: dict[str, dict[str, int]] = defaultdict(
            lambda: {"tier1": 0, "deopt": 0, "outside_template": 0, "unverified_key": 0})
        self._lock = threading.Lock()
        self._unrouted = 0
        self._seen_unrouted = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ discovery

    def refresh(self) -> int:
        """Find the sites again and give new ones a ratchet; returns how many sites are routed."""
        self._seen_unrouted = self._unrouted
        self.recorder.flush()
        sites = store_sites(self._store)
        by_shape: dict[str, list[Site]] = defaultdict(list)
        for site in sites.values():
            if site.task is None:
                by_shape[site.shape].append(site)
        with self._lock:
            self._by_shape, self._sites = dict(by_shape), dict(sites)
        for site in sites.values():
            if site.task is None and site.requests >= self.min_requests and site.id not in self._ratchets:
                try:
                    self._ratchets[site.id] = self._make_ratchet(site)
                except AutoError as e:
                    self.say(f"{site.id}: no ratchet: {e}")
        return sum(len(v) for v in by_shape.values())

    def _make_ratchet(self, site: Site) -> Ratchet:
        box: list[Ratchet] = []
        opts = {"audit_rate": self.audit_rate, **self.ratchet_options}
        if self.contract_path is not None:
            opts["contract"] = Contract.load(self.contract_path, task=site.id)
        r = Ratchet(lambda inp: self._audit(site.id, inp), self.store_path, site.id, capture_witnesses=False,
                    loader=lambda wasm, aid: self._load(box, wasm, aid),
                    progress=lambda m: self.say(f"{site.id}: {m.strip()}"), **opts)
        box.append(r)
        if r.generation is None:  # the newest stored generation that loads (under the trust policy)
            for stored in sorted(self._store.artifacts(site.id), key=lambda a: (a.generation, a.created_ns), reverse=True):
                try:
                    r.adopt(stored.wasm, generation=stored.generation)
                    break
                except AutoError as e:
                    self.say(f"{site.id}: generation {stored.generation} not installed: {e}")
        return r

    def _load(self, box: list[Ratchet], wasm: bytes, aid: str) -> Artifact:
        reg = self.registry
        if self.sign_key is not None and reg is not None and box and any(
                e["kind"] == "compile" and e["artifact_id"] == aid for e in box[0].events):
            reg.add(wasm, key=self.sign_key)
        if self.trust is None:
            return Artifact.load(wasm, expected_id=aid)
        sigs = reg.signatures(aid) if reg is not None and reg.path(aid).exists() else []
        return Artifact.load(wasm, expected_id=aid, trust=self.trust, signatures=sigs)

    def start(self) -> None:
        """Find the sites now and keep finding them on a background thread."""
        self.refresh()
        self._thread = threading.Thread(target=self._loop, name="auto-proxy-sites", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.rediscover_s):
            if self._unrouted != self._seen_unrouted:
                try:
                    self.refresh()
                except Exception:  # noqa: BLE001 - the thread must survive; logged
                    log.exception("auto proxy: finding sites failed")

    # ------------------------------------------------------------------ requests

    def route(self, body: dict, shape: str) -> Route | None:
        """The route of a chat request in its canonical form (``body``, ``shape``: what
        :func:`auto.sites.request.request_shape` gives), or None (no site, no ratchet yet, or a
        request a tier-1 answer cannot serve)."""
        if any(body.get(k) for k in UNANSWERABLE_PARAMS):
            return None
        for site in self._by_shape.get(shape, ()):
            if site.extract(body, shape, canonical=True) is None:
                continue
            r = self._ratchets.get(site.id)
            if r is None:
                self._unrouted += 1
                return None
            art = r.tiered.artifact
            tmpl = self._template(art) if art is not None else site
            inp = tmpl.extract(body, shape, canonical=True) if tmpl is not None else None
            if inp is None:
                self.counters[site.id]["outside_template"] += 1
            return Route(site.id, r, inp)
        self._unrouted += 1
        return None

    def _template(self, art: Artifact) -> Site | None:
        t = self._templates.get(art.id)
        if t is None:
            try:
                t = Site.from_manifest(art.typed_manifest.site)
            except ValueError:
                return None
            self._templates[art.id] = t
        return t

    def _audit(self, site_id: str, inp: dict[str, str]) -> Any:
        """The shadow audit's reference: the request rendered from ``inp``, sent upstream, recorded."""
        r = self._ratchets.get(site_id)
        art = r.tiered.artifact if r is not None else None
        tmpl = (self._template(art) if art is not None else None) or self._sites.get(site_id)
        if tmpl is None:
            raise ReferenceModelError(f"{site_id}: no template to render an audit request from")
        body = tmpl.render(inp)
        headers = {"content-type": "application/json", **self._audit_headers}
        url = self.upstream.url_for(CHAT_PATH)
        data = json.dumps(body).encode("utf-8")
        call = LogicalCall(self.recorder, None)
        attempt = Attempt(call, None, ForwardedRequest("POST", Url(url.scheme, url.host or "", url.port, url.path),
                                                       headers, data), "chat.completions")
        attempt.extra_attributes = {"auto.proxy": True, "auto.audit": True, "auto.site": site_id}
        try:
            status, reason, rh, content = self.upstream.post_json_sync(CHAT_PATH, data, headers)
        except OSError as e:
            attempt.fail(e)
            call.request_done(e)
            raise ReferenceModelError(f"{site_id}: audit call failed: {e}") from None
        attempt.got_response(ReadResponse(status, reason, rh, _content=content))
        call.request_done(None)
        rec = attempt.recorded or {}
        if rec.get("status") != "ok":
            raise ReferenceModelError(f"{site_id}: audit call answered {status}")
        return site_answer(rec.get("output"))

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """Per site: the template summary, the proxy's counters, the ratchet's status."""
        out = {}
        for sid, site in sorted(self._sites.items()):
            if site.task is not None:
                continue
            r = self._ratchets.get(sid)
            out[sid] = {"site": site.describe(), "counters": dict(self.counters[sid]),
                        "ratchet": r.status() if r is not None else None}
        return out

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until no ratchet is compiling or auditing (benchmarks and tests)."""
        return all(r.wait_idle(timeout_s) for r in list(self._ratchets.values()))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for r in list(self._ratchets.values()):
            try:
                r.close()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                log.exception("auto proxy: closing a ratchet failed")
        self._store.close()
