"""``auto serve``: artifacts over HTTP (an ASGI app, Starlette, served by uvicorn).

Endpoints (JSON in and out):

* ``GET /health`` — ``{"ok": true, "artifacts": n, "pid": ...}``;
* ``GET /v1/artifacts`` — ``{"artifacts": [{"id", "task", "generation", "compiled_as", "bytes",
  "signed_by", "guard"}]}``;
* ``GET /v1/artifacts/{id}`` — the artifact's description (:meth:`auto_runtime.Artifact.describe`);
* ``POST /v1/artifacts/{id}/run`` — body: one input object; ``POST /v1/tasks/{task}/run`` runs
  the highest generation served for that task.

A run answers ``200`` with ``{"answer", "tier", "reason", "score", "p_value", "latency_us",
"generation", "artifact_id"}`` (what ``auto run`` prints) when the artifact answered (tier-1) or
the configured reference did (tier-0). Failures: ``409`` the guard declined and no reference is
configured (``{"error": {"type": "declined", "reason"}}`` plus the result fields); ``400`` the body
is not JSON, not an object or nested deeper than :data:`MAX_JSON_DEPTH`; ``413`` it is over ``max_input_bytes``; ``422`` it violates the
artifact's input schema (with or without a reference: an input the task cannot take is never sent
to it); ``401`` a token is configured and the request does not carry it; ``404`` no such artifact or task; ``502`` the
reference raised. Every call runs under the same sandbox limits as in process
(:class:`auto_runtime.Limits`: fuel, memory, wall-clock timeout); a call that exhausts one deopts.

Authentication: with a token (:attr:`ServeConfig.token`), every endpoint but ``/health`` needs
``Authorization: Bearer <token>`` (compared in constant time). Listening off loopback without a
token is refused (:func:`check_auth`) unless ``allow_unauthenticated`` says so: with a reference
configured, any caller could otherwise trigger paid reference calls and write witnesses.

Artifact calls run off the event loop on a pool of :data:`CALL_THREADS` threads (wasmtime
releases the interpreter lock while wasm runs), at most :data:`MAX_PENDING_CALLS` per worker in
flight (more wait without holding the loop), so ``/health`` and other requests stay responsive
while calls burn their fuel.

References: one per task. ``reference`` (``module:function``) serves every task when all the
served artifacts are of one task; with several tasks it is refused as ambiguous and
``references`` maps each task to its own (``--reference TASK=module:function``). A task with no
reference answers declined calls with ``409``.

The reference (``module:function``, called with the input's fields as keyword arguments) runs on
a worker thread, so a slow reference does not hold up tier-1 answers; with a store, its answers are
captured there as witnesses (:meth:`auto.store.Store.add_witness`).

Tier-1 answers are recorded: with a store, every answer the artifact gave (tier ``tier-1``) is
written there as one span (:func:`tier1_span`), so an exported store shows the compiled path: kind
``llm``, name :data:`auto.store.TIER1_SPAN` (which the census and site discovery never read: an
artifact's answers are never its own witnesses), task = the artifact's task, attributes
``auto.tier = 1``, ``auto.serve = true``, ``auto.generation``, ``auto.artifact_id``,
``auto.cost_usd_micros = 0``, ``auto.guard.score``, ``auto.guard.p_value``, ``auto.latency_us``;
input the request's input, output the answer. They are queued and written off the request path by
the proxy's recorder (:class:`auto.proxy.recording.QueuedRecorder`: redacted, journaled, a writer
process); ``record_tier1=False`` (``--no-tier1-spans``) records none.

Workers: ``workers > 1`` runs that many processes (uvicorn's multiprocess supervisor); each loads
the artifacts itself from the configuration, which travels in the environment variable
:data:`CONFIG_ENV`. With a trust policy every artifact must carry a trusted signature
(:mod:`auto_runtime.signing`): from its sidecar file, or from the registry it came from.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import importlib
import ipaddress
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import time

from auto_runtime import Artifact, CapabilityError, Limits, TieredTask, TrustPolicy
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from auto.errors import ArgumentError, ReferenceFailed
from auto.jsonlimits import MAX_JSON_DEPTH, json_depth_ok
from auto.reference import load_reference
from auto.registry import Registry
from auto.store import Store, is_dsn

CONFIG_ENV = "AUTO_SERVE_CONFIG"
"""Environment variable carrying the JSON :class:`ServeConfig` to worker processes."""

DEFAULT_PORT = 8787

CALL_THREADS = 8
"""Threads running artifact calls, per worker process (calls of one artifact are serialized by
its sandbox; this bounds how many artifacts run at once)."""

MAX_PENDING_CALLS = 256
"""Artifact calls in flight per worker process (queued or running); more wait on the event loop
without blocking it."""

TOKEN_ENV = "AUTO_SERVE_TOKEN"
"""Environment variable holding the bearer token ``auto serve`` requires (``--token``)."""

DEFAULT_MAX_INPUT_BYTES = 1024 * 1024
"""Largest request body (bytes): an artifact answers ``too_large`` for an input over 1 MiB (the
ABI's input limit, docs/architecture.md), so a larger body could never be answered at tier-1."""


@dataclass
class ServeConfig:
    """What ``auto serve`` is given (plain data: it crosses to worker processes).

    Attributes:
        artifacts: artifact files.
        store: a store whose artifacts are served (every generation) and where deopts are
            captured: an SQLite file (it must exist) or a ``postgresql://`` URI; or None.
        registry: a registry folder whose artifacts are served, or None.
        trust_keys: trusted public-key files (empty: no signature check).
        reference: ``module:function`` answering declined calls, or None.
        tools: ``module:attribute``, the host's tools for capability artifacts (:func:`load_tools`),
            or None.
        fuel, memory_bytes, timeout_ms: the sandbox limits of every call (None: the defaults).
        max_input_bytes: largest request body.
        host, port, workers: where and how to listen.
        cwd: the folder a reference module is imported from.
        references: ``{task: module:function}``, a reference per task (see the module docstring).
        token: the bearer token every endpoint but ``/health`` requires, or None.
        allow_unauthenticated: listen off loopback without a token.
        record_tier1: with a store, record every tier-1 answer as a span (:func:`tier1_span`).
    """

    artifacts: list[str] = field(default_factory=list)
    store: str | None = None
    registry: str | None = None
    trust_keys: list[str] = field(default_factory=list)
    reference: str | None = None
    tools: str | None = None
    fuel: int | None = None
    memory_bytes: int | None = None
    timeout_ms: float | None = None
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    workers: int = 1
    cwd: str | None = None
    references: dict[str, str] = field(default_factory=dict)
    token: str | None = None
    allow_unauthenticated: bool = False
    record_tier1: bool = True

    def __repr__(self) -> str:  # never show the token
        return (f"ServeConfig(artifacts={self.artifacts!r}, store={self.store!r}, host={self.host!r}, port={self.port}, "
                f"reference={self.reference!r}, references={self.references!r}, token={'<set>' if self.token else None})")

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> "ServeConfig":
        """The configuration in :data:`CONFIG_ENV`.

        Raises:
            ArgumentError: the variable is missing or not a configuration.
        """
        raw = os.environ.get(CONFIG_ENV)
        if not raw:
            raise ArgumentError(f"{CONFIG_ENV} is not set")
        try:
            return cls(**json.loads(raw))
        except (ValueError, TypeError) as e:
            raise ArgumentError(f"{CONFIG_ENV} is not a serve configuration: {e}") from None

    def limits(self) -> Limits:
        base = Limits()
        return Limits(fuel=self.fuel if self.fuel is not None else base.fuel,
                      memory_bytes=self.memory_bytes if self.memory_bytes is not None else base.memory_bytes,
                      timeout_ms=self.timeout_ms if self.timeout_ms is not None else base.timeout_ms)


def _import_attribute(spec: str, cwd: str | None, option: str, what: str) -> Any:
    """The attribute a ``module:attribute`` spec names, imported with ``cwd`` on the path.

    Raises:
        ArgumentError: not ``module:attribute``, the module is missing or raises on import, or it
            has no such attribute (one line naming ``option`` / ``what``).
    """
    mod, _, name = spec.partition(":")
    if not mod or not name:
        raise ArgumentError(f"{option} must be module:{'function' if what == 'reference' else 'attribute'}, got {spec!r}")
    where = cwd or os.getcwd()
    if where not in sys.path:
        sys.path.insert(0, where)
    try:
        return getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as e:
        raise ArgumentError(f"cannot load {what} {spec!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the user's module failing on import becomes one clear line
        raise ArgumentError(f"cannot load {what} {spec!r}: importing {mod} raised {type(e).__name__}: {e}") from None


def load_tools(spec: str, cwd: str | None = None) -> dict[str, Callable[..., Any]]:
    """``module:attribute`` as the host's tools for capability artifacts: the attribute is a
    mapping ``{tool name: callable}`` (each called as ``tool(**arguments)``), or a function of no
    arguments returning one.

    Raises:
        ArgumentError: not ``module:attribute``, it cannot be imported, calling it raised, or it is
            not a mapping of names to callables.
    """
    obj = _import_attribute(spec, cwd, "--tools", "tools")
    if callable(obj) and not isinstance(obj, Mapping):
        try:
            obj = obj()
        except Exception as e:  # noqa: BLE001 - the user's factory failing becomes one clear line
            raise ArgumentError(f"tools {spec!r}: calling it raised {type(e).__name__}: {e}") from None
    if not isinstance(obj, Mapping):
        raise ArgumentError(f"tools {spec!r} must be a mapping of tool name -> callable "
                            f"(or a function returning one), got {type(obj).__name__}")
    bad = [repr(k) for k, v in obj.items() if not isinstance(k, str) or not callable(v)]
    if bad:
        raise ArgumentError(f"tools {spec!r}: every key must be a tool name (a string) and every value a callable; "
                            f"not so for {', '.join(bad[:5])}")
    return dict(obj)


def check_no_extra_tools(arts: Sequence[Artifact], tools: Mapping[str, Any] | None) -> None:
    """Refuse host tools that no served artifact declares (a typo, or a tool the compiled
    behaviour never calls: it would never be called, and serving it is a mistake to say).

    Raises:
        ArgumentError: a host tool no artifact of ``arts`` declares.
    """
    if not tools:
        return
    declared = {n for a in arts for n in (a.tools or {})}
    extra = sorted(set(tools) - declared)
    if extra:
        raise ArgumentError(f"the host provides tool(s) {', '.join(extra)}, which no served artifact declares "
                            f"(declared: {', '.join(sorted(declared)) or 'none'})")


def tiered_with_tools(art: Artifact, tools: Mapping[str, Callable[..., Any]] | None, **kw: Any) -> TieredTask:
    """``TieredTask(art, tools=...)`` for a capability artifact (``tools`` for a pure one is
    ignored), with a missing tool named as one line that says how to pass them.

    Raises:
        ArgumentError: the artifact declares a tool ``tools`` does not provide.
    """
    try:
        return TieredTask(art, tools=tools if art.tools else None, **kw)
    except CapabilityError as e:
        raise ArgumentError(f"{e}; pass the host's tools with --tools module:attribute") from None


def load_artifacts(config: ServeConfig) -> list[Artifact]:
    """Every artifact the configuration names, loaded under its limits and trust policy (an
    artifact named twice is loaded once).

    Raises:
        ArtifactError (incl. UntrustedArtifact), StoreError, ArgumentError: one could not be
            loaded; nothing is served then.
    """
    trust = TrustPolicy.from_files(config.trust_keys) if config.trust_keys else None
    limits = config.limits()
    out: dict[str, Artifact] = {}
    reg = Registry(config.registry) if config.registry else None
    for path in config.artifacts:
        art = Artifact.load(path, limits=limits, trust=trust)
        out.setdefault(art.id, art)
    if reg is not None:
        for aid in reg.ids():
            if aid not in out:
                out[aid] = Artifact.load(reg.path(aid), expected_id=aid, limits=limits, trust=trust,
                                         signatures=reg.signatures(aid))
    if config.store:
        if not is_dsn(config.store) and not Path(config.store).is_file():  # serving never creates a store
            raise ArgumentError(f"--store {config.store}: no such store")
        with Store(config.store, create=False) as st:
            for row in st.artifacts():
                if row.id in out:
                    continue
                sigs = reg.signatures(row.id) if reg is not None and reg.path(row.id).exists() else []
                out[row.id] = Artifact.load(row.wasm, expected_id=row.id, limits=limits, trust=trust,
                                            signatures=sigs if trust is not None else None)
    return list(out.values())


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address."""
    if host.strip().lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_auth(config: ServeConfig) -> None:
    """Refuse to serve off loopback without a token (see the module docstring).

    Raises:
        ArgumentError: ``host`` is not loopback, no token, and not ``allow_unauthenticated``.
    """
    if not config.token and not config.allow_unauthenticated and not is_loopback(config.host):
        raise ArgumentError(f"refusing to listen on {config.host} without authentication: give --token (or "
                            f"{TOKEN_ENV}) and send 'Authorization: Bearer <token>', or pass --allow-unauthenticated")


def _result(res: Any) -> dict[str, Any]:
    return {"answer": res.answer, "tier": res.tier, "reason": res.reason, "score": res.score, "p_value": res.p_value,
            "latency_us": res.latency_us, "generation": res.generation, "artifact_id": res.artifact_id}


def tier1_span(task: str, inp: dict[str, Any], res: Any, started_ns: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(span, trace)`` of one tier-1 answer of ``auto serve`` (see the module docstring).

    Args:
        task: the artifact's task; inp: the input it answered; res: the
            :class:`auto_runtime.TierResult` (tier ``tier-1``); started_ns: when the request
            arrived (ns since the epoch; the span ends when it is built).
    """
    from auto.sites.site import is_site_id
    from auto.store import TIER1_SPAN, new_span_id, new_trace_id

    ended = time.time_ns()
    attrs = {"auto.tier": 1, "auto.serve": True, "auto.generation": res.generation, "auto.artifact_id": res.artifact_id,
             "auto.cost_usd_micros": 0, "auto.guard.score": res.score, "auto.guard.p_value": res.p_value,
             "auto.latency_us": res.latency_us}
    span = {"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": TIER1_SPAN,
            "kind": "llm", "task": task, "site": task if is_site_id(task) else None, "started_ns": started_ns, "ended_ns": ended, "status": "ok",
            "input": inp, "output": res.answer, "error": None, "attributes": attrs}
    trace = {"trace_id": span["trace_id"], "name": TIER1_SPAN, "started_ns": started_ns, "ended_ns": ended,
             "status": "ok", "attributes": {"auto.root_kind": "llm", "auto.tier": 1, "auto.serve": True}}
    return span, trace


def _error(status: int, etype: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"type": etype, "message": message}, **extra}, status_code=status)


class ArtifactService:
    """The artifacts one worker serves, and the app (:attr:`app`).

    Raises:
        see :func:`load_artifacts` and :func:`auto.reference.load_reference`.
    """

    def __init__(self, config: ServeConfig, artifacts: list[Artifact] | None = None) -> None:
        self.config = config
        arts = load_artifacts(config) if artifacts is None else artifacts
        self.references = self._references(config, arts)
        self.reference = next(iter(self.references.values()), None)  # (any; kept for callers that test it)
        self._store = Store(config.store) if (config.store and self.references) else None
        capture = self._store.add_witness if self._store is not None else None
        self._tier1_recorder = None
        if config.store and config.record_tier1:
            from auto.proxy.recording import QueuedRecorder

            self._tier1_recorder = QueuedRecorder(config.store)
        tools = load_tools(config.tools, config.cwd) if config.tools else None
        self.tiered: dict[str, TieredTask] = {a.id: tiered_with_tools(a, tools, reference=None, capture=capture)
                                              for a in arts}
        check_no_extra_tools(arts, tools)
        self._pool = concurrent.futures.ThreadPoolExecutor(CALL_THREADS, thread_name_prefix="auto-serve-call")
        self._pending: asyncio.Semaphore | None = None
        self._token = config.token.encode("utf-8") if config.token else None
        self.artifacts: dict[str, Artifact] = {a.id: a for a in arts}
        self.latest: dict[str, str] = {}
        for a in sorted(arts, key=lambda a: (a.generation or 0, a.id)):
            self.latest[a.task] = a.id
        self.app = Starlette(routes=[
            Route("/health", self.health, methods=["GET"]),
            Route("/v1/artifacts", self.list, methods=["GET"]),
            Route("/v1/artifacts/{aid}", self.describe, methods=["GET"]),
            Route("/v1/artifacts/{aid}/run", self.run_artifact, methods=["POST"]),
            Route("/v1/tasks/{task:path}/run", self.run_task, methods=["POST"]),
        ])

    @staticmethod
    def _references(config: ServeConfig, arts: list[Artifact]) -> dict[str, Callable[[dict[str, Any]], Any]]:
        """``{task: reference}`` (see the module docstring).

        Raises:
            ArgumentError: one ``reference`` for artifacts of several tasks; a mapping entry for a
                task not served.
        """
        tasks = sorted({a.task for a in arts})
        specs = dict(config.references)
        unknown = sorted(set(specs) - set(tasks))
        if unknown:
            raise ArgumentError(f"--reference for task(s) {', '.join(map(repr, unknown))}, which no served artifact is of "
                                f"(served: {', '.join(map(repr, tasks)) or 'none'})")
        if config.reference:
            if len(tasks) > 1 and set(tasks) - set(specs):
                raise ArgumentError(f"one --reference {config.reference} for artifacts of {len(tasks)} tasks "
                                    f"({', '.join(map(repr, tasks[:5]))}) is ambiguous: give one per task as "
                                    f"--reference TASK=module:function")
            for t in tasks:
                specs.setdefault(t, config.reference)
        return {t: load_reference(spec, config.cwd) for t, spec in specs.items()}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._tier1_recorder is not None:
            self._tier1_recorder.close()  # writes what is queued
            self._tier1_recorder = None
        if self._store is not None:
            self._store.close()

    def _authorized(self, request: Request) -> bool:
        if self._token is None:
            return True
        scheme, _, got = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(got.strip().encode("utf-8", "surrogatepass"), self._token)

    def _unauthorized(self) -> JSONResponse:
        return JSONResponse({"error": {"type": "unauthorized", "message": "this server needs 'Authorization: Bearer "
                                       "<token>' (the token auto serve was started with)"}},
                            status_code=401, headers={"WWW-Authenticate": "Bearer"})

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the call pool (see the module docstring)."""
        if self._pending is None:
            self._pending = asyncio.Semaphore(MAX_PENDING_CALLS)
        async with self._pending:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def health(self, request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "artifacts": len(self.artifacts), "pid": os.getpid()})

    async def list(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return self._unauthorized()
        rows = [{"id": a.id, "task": a.task, "generation": a.generation, "compiled_as": a.typed_manifest.compiled_as,
                 "bytes": a.size_bytes, "signed_by": a.signed_by, "guard": a.guard.method}
                for a in sorted(self.artifacts.values(), key=lambda a: (a.task, a.generation or 0, a.id))]
        return JSONResponse({"artifacts": rows})

    def _find(self, aid: str) -> Artifact | None:
        if aid in self.artifacts:
            return self.artifacts[aid]
        hexpart = aid.split(":", 1)[-1].lower()
        hits = [a for i, a in self.artifacts.items() if len(hexpart) >= 12 and i.split(":", 1)[1].startswith(hexpart)]
        return hits[0] if len(hits) == 1 else None

    async def describe(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return self._unauthorized()
        art = self._find(request.path_params["aid"])
        if art is None:
            return _error(404, "not_found", f"no artifact {request.path_params['aid']} is served here")
        return JSONResponse(art.describe())

    async def run_artifact(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return self._unauthorized()
        art = self._find(request.path_params["aid"])
        if art is None:
            return _error(404, "not_found", f"no artifact {request.path_params['aid']} is served here")
        return await self._run(request, art)

    async def run_task(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            return self._unauthorized()
        aid = self.latest.get(request.path_params["task"])
        if aid is None:
            return _error(404, "not_found", f"no artifact of task {request.path_params['task']!r} is served here")
        return await self._run(request, self.artifacts[aid])

    async def _read(self, request: Request) -> tuple[Any, JSONResponse | None]:
        limit = self.config.max_input_bytes
        try:
            if int(request.headers.get("content-length", "0") or 0) > limit:
                return None, _error(413, "too_large", f"the input is over {limit} bytes")
        except ValueError:
            pass
        chunks, size = [], 0
        async for c in request.stream():
            size += len(c)
            if size > limit:
                return None, _error(413, "too_large", f"the input is over {limit} bytes")
            chunks.append(c)
        raw = b"".join(chunks)
        if not json_depth_ok(raw):
            return None, _error(400, "too_deep", f"the body nests arrays/objects deeper than {MAX_JSON_DEPTH} levels")
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as e:
            return None, _error(400, "bad_json", f"the body is not JSON: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        if not isinstance(obj, dict):
            return None, _error(400, "wrong_type", "the body must be a JSON object (the task's named arguments)")
        return obj, None

    async def _run(self, request: Request, art: Artifact) -> JSONResponse:
        obj, err = await self._read(request)
        if err is not None:
            return err
        tt = self.tiered[art.id]
        t0 = time.perf_counter()
        started_ns = time.time_ns()
        res = await self._call(tt.decide, obj)
        if res.tier != "declined":
            if res.tier == "tier-1" and self._tier1_recorder is not None:
                span, trace = tier1_span(art.task, obj, res, started_ns)
                self._tier1_recorder.write([span], [trace])  # queued, never blocks
            return JSONResponse(_result(res))
        if res.reason.startswith("input-schema:"):
            return _error(422, "input_schema", res.reason, **_result(res))
        reference = self.references.get(art.task)
        if reference is None:
            return JSONResponse({"error": {"type": "declined", "reason": res.reason, "message":
                                           f"the guard declined and no reference is configured: {res.reason}"},
                                 **_result(res)}, status_code=409)
        try:
            answer = await run_in_threadpool(reference, obj)
        except ReferenceFailed as e:  # it raised, or answered a value that is not JSON
            return _error(502, "reference_failed", str(e))
        except Exception as e:  # noqa: BLE001 - the user's reference failing is one clear error
            spec = self.config.references.get(art.task) or self.config.reference
            return _error(502, "reference_failed", f"the reference {spec} raised "
                          f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        latency = (time.perf_counter() - t0) * 1e6
        await self._call(tt.capture_deopt, obj, answer, res, latency)
        out = _result(res)
        out.update({"answer": answer, "tier": "tier-0", "latency_us": latency})
        return JSONResponse(out)


def create_app() -> Starlette:
    """The app of one worker, from :data:`CONFIG_ENV` (uvicorn's factory for ``workers > 1``)."""
    return ArtifactService(ServeConfig.from_env()).app

