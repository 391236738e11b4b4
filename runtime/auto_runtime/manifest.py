"""The ``auto.manifest`` custom section: encoding, decoding, its digest, structural checks.

The section is a WebAssembly custom section (:func:`auto_runtime.wasm_sections.custom_section`)
named ``auto.manifest``, appended after the code; its payload is the canonical JSON (see
:mod:`auto_runtime.jsonio`) of one object, whose full shape is in docs/architecture.md. The
compiler writes it with :func:`append_manifest` (the payload carries ``manifest_digest``, see
:func:`manifest_digest`); the loader reads it with :func:`manifest_payload` and
:func:`decode_manifest`. The loader needs, and therefore requires:

- ``format``: ``"auto.artifact/1"``;
- ``task``: a non-empty string;
- ``interface``: an object whose ``input`` is a JSON schema (object or boolean);
- ``guard``: present (its *content* is judged by :func:`auto_runtime.guard.build_guard`, which
  turns an unusable entry into an always-deopt guard instead of refusing the artifact);

and, when present: ``generation`` an integer or null; ``capabilities`` a list of
``{"module": str, "name": str}``; ``abi`` an object whose ``exports`` is a list of strings and
whose ``encoding``, if given, is ``"canonical-json"``. A capability artifact's ``tools`` and
``tool_budget`` are checked by :func:`auto_runtime.tools.tool_decls` when it is loaded.

:class:`Manifest` is the typed view of a decoded manifest, for everything outside the runtime
that reads one (the ratchet, the CLI's ``inspect``, serve): the rung it was compiled as, its
interface and labels, its tools, its guard as a typed entry (:mod:`auto_runtime.guard.entries`),
whether it answers inputs never witnessed, its calibration scores, its ``inspect`` lines::

    m = Manifest.read(wasm)            # or Manifest.of(artifact.manifest)
    m.compiled_as, m.labels, m.answers_new_inputs, m.calibration_scores, m.inspect_lines()
    m.to_dict() == read_manifest(wasm)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping

from auto_runtime.digest import digest_bytes
from auto_runtime.errors import ManifestError
from auto_runtime.guard.entries import GuardEntry, guard_entry, r3
from auto_runtime.jsonio import canonical_bytes, strict_loads
from auto_runtime.wasm_sections import WasmModuleInfo, custom_section, parse

MANIFEST_SECTION = "auto.manifest"
FORMAT = "auto.artifact/1"
REQUIRED_KEYS = ("format", "task", "interface", "guard")
ABI_EXPORTS = ("memory", "alloc", "run", "run_batch")
DIGEST_KEY = "manifest_digest"
"""The manifest's own digest: see :func:`manifest_digest`."""


def manifest_digest(manifest: dict[str, Any]) -> str:
    """``sha256:`` of the canonical JSON of ``manifest`` without its ``manifest_digest`` key.

    Stored in the manifest under that key, it lets the loader refuse a manifest whose content
    changed (corruption, an edit) even when no artifact id is given.

    Raises:
        ValueError: NaN or infinity. TypeError: a value JSON cannot represent.
        RecursionError: too deep or circular.
    """
    return digest_bytes(canonical_bytes({k: v for k, v in manifest.items() if k != DIGEST_KEY}))


def encode_manifest(manifest: dict[str, Any]) -> bytes:
    """The section payload for ``manifest``: its canonical JSON with ``manifest_digest`` set to
    :func:`manifest_digest` (a stored value is recomputed, so the result does not depend on it).

    Raises:
        ManifestError: the manifest is not a JSON object, or not canonical-JSON serializable
            (NaN, infinity, a non-JSON value, nesting too deep).
    """
    if not isinstance(manifest, dict):
        raise ManifestError("the manifest must be a JSON object")
    try:
        return canonical_bytes({**manifest, DIGEST_KEY: manifest_digest(manifest)})
    except (TypeError, ValueError, RecursionError) as e:
        raise ManifestError(f"the manifest is not canonical-JSON serializable: {e}") from None


def append_manifest(code: bytes, manifest: dict[str, Any]) -> bytes:
    """The artifact bytes: ``code`` followed by the ``auto.manifest`` section of ``manifest``.

    Deterministic: the same code and manifest (in any key order) give the same bytes.

    Args:
        code: a binary module without an ``auto.manifest`` section.
        manifest: the manifest object; must be JSON with finite numbers.

    Raises:
        MalformedArtifact: ``code`` is not a well-framed core WebAssembly module.
        ManifestError: ``code`` already has an ``auto.manifest`` section, or the manifest cannot
            be encoded (:func:`encode_manifest`).
    """
    if parse(code).custom(MANIFEST_SECTION):
        raise ManifestError(f"the module already has an {MANIFEST_SECTION} section")
    return bytes(code) + custom_section(MANIFEST_SECTION, encode_manifest(manifest))


def manifest_payload(info: WasmModuleInfo, where: str = "artifact") -> bytes:
    """The payload of the module's one ``auto.manifest`` section.

    Raises:
        ManifestError: no such section, or more than one.
    """
    payloads = info.custom(MANIFEST_SECTION)
    if not payloads:
        raise ManifestError(f"{where}: no {MANIFEST_SECTION} custom section")
    if len(payloads) > 1:
        raise ManifestError(f"{where}: {len(payloads)} {MANIFEST_SECTION} sections (expected one)")
    return payloads[0]


def read_manifest(wasm: bytes, where: str = "artifact") -> dict[str, Any]:
    """The checked manifest of an artifact's bytes (:func:`manifest_payload`, then
    :func:`decode_manifest` and :func:`check_manifest_digest`).

    Raises:
        MalformedArtifact: not a well-framed core WebAssembly module.
        ManifestError: as :func:`manifest_payload`, :func:`decode_manifest` and
            :func:`check_manifest_digest`.
    """
    manifest = decode_manifest(manifest_payload(parse(wasm), where), where)
    check_manifest_digest(manifest, where)
    return manifest


def check_manifest_digest(manifest: dict[str, Any], where: str = "artifact") -> None:
    """Refuse a manifest whose content no longer matches its own ``manifest_digest`` (when it
    has one). Catches corrupted or edited manifests when no artifact id is given; a forger who
    recomputes the digest is caught only by the artifact id.

    Raises:
        ManifestError: the digest does not match.
    """
    expected = manifest.get(DIGEST_KEY)
    if expected is None:
        return
    if manifest_digest(manifest) != expected:
        raise ManifestError(f"{where}: the manifest does not match its manifest_digest (corrupted or edited)")


def decode_manifest(payload: bytes, where: str = "artifact") -> dict[str, Any]:
    """Decode and check the manifest section's bytes.

    Args:
        payload: the custom section's content (after its name).
        where: names the artifact in error messages.

    Returns:
        The manifest object.

    Raises:
        ManifestError: not UTF-8 JSON, not an object, not canonical (key order, whitespace,
            escapes, duplicate keys), or a required key missing or of the wrong type.
    """
    try:
        manifest = strict_loads(payload)
    except ValueError as e:
        raise ManifestError(f"{where}: auto.manifest is not valid JSON: {e}") from None
    if not isinstance(manifest, dict):
        raise ManifestError(
            f"{where}: auto.manifest must be a JSON object, got {type(manifest).__name__}"
        )
    try:
        canonical = canonical_bytes(manifest)
    except (TypeError, ValueError, RecursionError) as e:  # pragma: no cover - JSON always re-encodes
        raise ManifestError(f"{where}: auto.manifest cannot be re-encoded: {e}") from None
    if canonical != payload:
        raise ManifestError(
            f"{where}: auto.manifest is not canonical JSON (sorted keys, no whitespace, UTF-8, "
            "no duplicate keys)"
        )
    check_manifest(manifest, where)
    return manifest


def check_manifest(manifest: dict[str, Any], where: str = "artifact") -> None:
    """Structural checks of a decoded manifest (see the module docstring).

    Raises:
        ManifestError: naming the first key at fault.
    """
    missing = [k for k in REQUIRED_KEYS if k not in manifest]
    if missing:
        raise ManifestError(f"{where}: auto.manifest lacks required key(s): {', '.join(missing)}")
    if manifest["format"] != FORMAT:
        raise ManifestError(
            f"{where}: unsupported manifest format {manifest['format']!r} (expected {FORMAT!r})"
        )
    task = manifest["task"]
    if not isinstance(task, str) or not task:
        raise ManifestError(f"{where}: manifest 'task' must be a non-empty string")
    gen = manifest.get("generation")
    if gen is not None and (isinstance(gen, bool) or not isinstance(gen, int)):
        raise ManifestError(f"{where}: manifest 'generation' must be an integer or null")
    interface = manifest["interface"]
    if not isinstance(interface, dict):
        raise ManifestError(f"{where}: manifest 'interface' must be an object")
    if "input" not in interface:
        raise ManifestError(f"{where}: manifest 'interface' lacks 'input' (the input schema)")
    if not isinstance(interface["input"], (dict, bool)):
        raise ManifestError(f"{where}: manifest 'interface.input' must be a JSON schema")
    caps = manifest.get("capabilities", [])
    if not isinstance(caps, list):
        raise ManifestError(f"{where}: manifest 'capabilities' must be a list")
    for i, c in enumerate(caps):
        if (not isinstance(c, dict) or not isinstance(c.get("module"), str)
                or not isinstance(c.get("name"), str)):
            raise ManifestError(
                f"{where}: capabilities[{i}] must be {{\"module\": str, \"name\": str}}, got {c!r:.100}"
            )
    abi = manifest.get("abi")
    if abi is not None:
        if not isinstance(abi, dict):
            raise ManifestError(f"{where}: manifest 'abi' must be an object")
        exports = abi.get("exports", list(ABI_EXPORTS))
        if not isinstance(exports, list) or not all(isinstance(e, str) for e in exports):
            raise ManifestError(f"{where}: manifest 'abi.exports' must be a list of strings")
        enc = abi.get("encoding", "canonical-json")
        if enc != "canonical-json":
            raise ManifestError(f"{where}: unsupported abi.encoding {enc!r}")


def declared_capabilities(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """``(module, name)`` of every capability the manifest declares, in order."""
    return [(c["module"], c["name"]) for c in manifest.get("capabilities", [])]


def declared_exports(manifest: dict[str, Any]) -> list[str]:
    """Exports the manifest's ``abi`` promises (the ABI's four when ``abi`` is absent)."""
    abi = manifest.get("abi")
    if isinstance(abi, dict) and isinstance(abi.get("exports"), list):
        return list(abi["exports"])
    return list(ABI_EXPORTS)


# ------------------------------------------------------------------------------ the typed view


@dataclass(frozen=True)
class Interface:
    """The manifest's ``interface``: the input JSON schema and the output schema.

    Attributes:
        input: the input JSON schema (an object or a boolean).
        output: the output schema (``{}`` when the manifest gives none).
    """

    input: Any
    output: Mapping[str, Any]

    @property
    def labels(self) -> tuple[Any, ...]:
        """The answers the artifact can give when its output is an enumeration (``output.enum``),
        in manifest order; ``()`` otherwise."""
        enum = self.output.get("enum") if isinstance(self.output, Mapping) else None
        return tuple(enum) if isinstance(enum, list) else ()

    def to_dict(self) -> dict[str, Any]:
        """The manifest's ``interface`` object, ``{"input": <schema>, "output": {...}}`` (deep
        copies; the compiler writes a section it built as this type with it)."""
        return {"input": copy.deepcopy(self.input), "output": copy.deepcopy(dict(self.output))}


@dataclass(frozen=True)
class Capability:
    """One host function the artifact imports (the manifest's ``capabilities[i]``; the loader
    checks every declaration against the module's imports, :mod:`auto_runtime.loading`).

    Attributes:
        module, name: the import's module and name (``auto`` / ``tool_call`` for a tool import).
    """

    module: Any
    name: Any

    def to_dict(self) -> dict[str, Any]:
        """The manifest's ``{"module": ..., "name": ...}`` object (the compiler writes a
        declaration it built as this type with it)."""
        return {"module": self.module, "name": self.name}


@dataclass(frozen=True)
class Tool:
    """One declared tool of a capability artifact (the manifest's ``tools[i]``; the loader checks
    the declarations strictly, :func:`auto_runtime.tools.tool_decls`).

    Attributes:
        name, kind (``tool`` / ``model``), effects (``read`` / ``effect``).
        cost_usd_micros_per_call: the recorded cost of one call (µ$), or None.
    """

    name: Any
    kind: Any
    effects: Any
    cost_usd_micros_per_call: Any = None


@dataclass(frozen=True)
class Manifest:
    """A typed view of a decoded manifest: what the tools around an artifact read from it.

    Built with :meth:`Manifest.of` from the object :func:`read_manifest` returns (or an artifact's
    ``manifest``); :meth:`to_dict` gives that object back key for key, so nothing is lost. The
    view never raises on content the loader accepted; fields the compiler did not write are None.

    Attributes:
        task, generation, compiled_as (``program`` / ``region`` / ``specialist`` / ``memo-first`` /
        ``memo`` / ...), interface (:class:`Interface`), guard (a typed entry,
        :mod:`auto_runtime.guard.entries`), tools (:class:`Tool`, declared order), eval_runs
        (ids), site (the model-call site entry, or None), fields (the manifest as read),
        capabilities (:class:`Capability`, declared order; ``()`` for a pure artifact).
    """

    task: str
    generation: int | None
    compiled_as: str | None
    interface: Interface
    guard: GuardEntry
    tools: tuple[Tool, ...]
    eval_runs: tuple[str, ...]
    site: Mapping[str, Any] | None
    fields: Mapping[str, Any] = field(repr=False, compare=False)
    capabilities: tuple[Capability, ...] = ()

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> "Manifest":
        """The view of a decoded manifest object."""
        iface = manifest.get("interface") if isinstance(manifest.get("interface"), Mapping) else {}
        out = iface.get("output")
        tools = manifest.get("tools") if isinstance(manifest.get("tools"), list) else []
        caps = manifest.get("capabilities") if isinstance(manifest.get("capabilities"), list) else []
        return cls(task=manifest.get("task"), generation=manifest.get("generation"),
                   compiled_as=manifest.get("compiled_as"),
                   interface=Interface(iface.get("input", True), out if isinstance(out, Mapping) else {}),
                   guard=guard_entry(manifest.get("guard")),
                   tools=tuple(Tool(t.get("name"), t.get("kind"), t.get("effects"), t.get("cost_usd_micros_per_call"))
                               for t in tools if isinstance(t, Mapping)),
                   eval_runs=tuple(manifest.get("eval_runs") or ()),
                   site=manifest.get("site") if isinstance(manifest.get("site"), Mapping) else None,
                   fields=copy.deepcopy(dict(manifest)),
                   capabilities=tuple(Capability(c.get("module"), c.get("name")) for c in caps if isinstance(c, Mapping)))

    @classmethod
    def read(cls, wasm: bytes, where: str = "artifact") -> "Manifest":
        """The view of an artifact's checked manifest (:func:`read_manifest`; raises as it does)."""
        return cls.of(read_manifest(wasm, where))

    def to_dict(self) -> dict[str, Any]:
        """The manifest object as it was read (a deep copy)."""
        return copy.deepcopy(dict(self.fields))

    @property
    def labels(self) -> tuple[Any, ...]:
        """:attr:`Interface.labels`: the enumerated answers, or ``()``."""
        return self.interface.labels

    @property
    def answers_new_inputs(self) -> bool:
        """Whether the artifact may answer inputs that were never witnessed: a program or a
        region, or a specialist (alone or behind a memo table) whose guard certifies a
        selective-risk threshold (a stack without a fallback). A memo table answers only what was
        witnessed."""
        if self.compiled_as in ("program", "region"):
            return True
        return self.compiled_as in ("specialist", "memo-first") and self.guard.certifies_unwitnessed

    @property
    def near_duplicate(self) -> Mapping[str, Any] | None:
        """A near-duplicate table's statement (``model.near_duplicate``: the canonicalization step,
        its calibration and guarantee), or None for any other artifact."""
        model = self.fields.get("model")
        nd = model.get("near_duplicate") if isinstance(model, Mapping) else None
        return nd if isinstance(nd, Mapping) else None

    @property
    def calibration_scores(self) -> list[float] | None:
        """The conformal novelty calibration scores of the guard (its own, or its first novelty
        component's), or None when it has none: what the shift monitor starts from."""
        scores = self.guard.calibration_scores
        return list(scores) if scores is not None else None

    @property
    def model(self) -> Any:
        """The manifest's ``model`` entry (``kind`` and what the rung compiled: a program's text
        and digest, a specialist's estimator and features, a memo table's size), or None."""
        return self.fields.get("model")

    @property
    def parity(self) -> Any:
        """The manifest's ``parity`` entry (agreement with the reference per split, ``witnessed``
        / ``heldout``, with counts and 95% Clopper-Pearson lows), or None."""
        return self.fields.get("parity")

    @property
    def fuel_per_call(self) -> Any:
        """The manifest's ``fuel_per_call`` entry (``p50`` / ``p95`` fuel units per call, measured
        at compile time), or None."""
        return self.fields.get("fuel_per_call")

    @property
    def tool_budget(self) -> Any:
        """A capability artifact's ``tool_budget`` (``calls`` per call and ``wall_ms`` of tool time
        per call), or None."""
        return self.fields.get("tool_budget")

    @property
    def cost_usd_micros_per_call(self) -> Any:
        """The paid work of one tier-1 call (µ$; 0 for a pure artifact), or None."""
        return self.fields.get("cost_usd_micros_per_call")

    def summary_line(self) -> str:
        """``auto inspect``'s line naming the task, generation and rung."""
        return f"task       {self.task}  generation {self.generation}  compiled as {self.compiled_as}"

    def inspect_lines(self) -> list[str]:
        """``auto inspect``'s lines for the model, tools, parity, evidence, guard, measured work,
        provenance and eval runs (the artifact's id, size, site, imports and exports are the
        caller's)."""
        return [*_model_lines(self), *_parity_lines(self.fields), *self.guard.lines(), *_closing_lines(self.fields)]


def _model_lines(m: Manifest) -> list[str]:
    f = m.fields
    model = f.get("model") or {}
    kind = model.get("kind")
    if kind == "memo":
        return [f"model      exact-match table of {model.get('entries')} witnessed inputs (hash {model.get('hash')})"]
    if kind == "program":
        nd = m.near_duplicate
        near = [] if nd is None else [
            f"near-dup   step {nd.get('step')}: {nd.get('exact_entries')} witnessed inputs, {nd.get('neighbourhoods')} "
            f"neighbourhoods; merge error bound <= epsilon {nd.get('epsilon')} at delta {nd.get('delta')}"]
        return [f"model      program over field {model.get('field')!r}, {model.get('size')} nodes "
                f"(digest {model.get('program_digest')})",
                *(f"           {line}" for line in str(model.get("text") or "").splitlines()), *near]
    if kind == "region":
        lines = [f"model      region over field {model.get('field')!r} (digest {model.get('region_digest')})",
                 *(f"           {line}" for line in str(model.get("text") or "").splitlines())]
        for t in m.tools:
            lines.append(f"tool       {t.name}  {t.kind}, effects {t.effects}"
                         + (f", {t.cost_usd_micros_per_call} µ$ per call (recorded)" if t.cost_usd_micros_per_call else ""))
        b = m.tool_budget or {}
        lines.append(f"budget     {b.get('calls')} tool call(s), {b.get('wall_ms')} ms of tool time per call")
        return lines
    fb = model.get("fallback") or model
    feats = fb.get("features") or {}
    return [f"model      {kind}"
            + (f" ({model.get('table_entries')} table entries in front)" if model.get("table_entries") is not None else "")
            + f"  {model.get('estimator') or fb.get('kind')} over {feats.get('n_min')}-{feats.get('n_max')}-grams, "
            f"{feats.get('buckets')} buckets  classes {model.get('classes') or fb.get('classes')}"]


def _parity_lines(f: Mapping[str, Any]) -> list[str]:
    par = f.get("parity") or {}
    lines = []
    for split in ("witnessed", "heldout"):
        p = par.get(split) or {}
        if p:
            label = p.get("method") or split
            lines.append(f"parity     {label:<9} {p.get('agree')}/{p.get('n')} = {r3(p.get('rate'))} "
                         f"(95% CP low {r3(p.get('ci95_low'))})")
    if par.get("probes"):
        lines.append(f"parity     probes    {par['probes'].get('hits')} of {par['probes'].get('n')} never-witnessed probes "
                     "hit the table")
    rep = par.get("repetition")
    if rep:
        lines.append(f"evidence   {rep.get('consistent')} of {rep.get('repeated_inputs')} repeated inputs answered consistently "
                     f"(rate {r3(rep.get('rate'))}, 95% CP low {r3(rep.get('ci95_low'))}); the specialist was refused "
                     f"(eval run {rep.get('specialist_eval_run')})")
    return lines


def _closing_lines(f: Mapping[str, Any]) -> list[str]:
    fuel = f.get("fuel_per_call") or {}
    prov = f.get("provenance") or {}
    return [f"work       {fuel.get('p50')} fuel units per call p50, {fuel.get('p95')} p95 (≈ wasm instructions, measured at compile)",
            f"provenance {prov.get('witnesses')} witnesses, reference model {prov.get('reference_model')}",
            f"eval runs  {', '.join(f.get('eval_runs') or [])}"]
