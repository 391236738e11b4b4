"""Incremental table refresh: the next generation of an installed exact-match table that only adds
entries, compiled without re-verifying what the installed table's gate already verified.

The installed artifact's table is read back from its bytes by the runtime
(:func:`auto_runtime.table.read_table`: digest, index and hashes checked), the new entries are
merged in their canonical form (no entry is decoded and re-encoded), and the merged table is
lowered and assembled once. The gate then checks what is new and the digest chain, not the
whole table again:

- ``runs-without-error``, ``witnessed-agreement``, ``wasm-matches-python-reference`` and
  ``unwitnessed-probes-miss`` of :func:`auto.gate.run_memo_gate`, on every added entry plus an
  evenly spaced sample of :data:`CARRIED_SAMPLE` carried entries (the code really is the merged
  table's), and on probes made from the added inputs;
- ``installed-table-carried``: the merged table the new code's table segment was laid out from
  holds every entry of the installed table (read back from the installed bytes, digest checked)
  with the same answer bytes (all of them, as dict lookups), and the new manifest names the
  installed table (``model.table.extends``: the installed table's digest and entries, and the
  installed artifact's id) beside its own digest: the chain of digests from the first gated
  table to this one. The runtime checks the new table against its digest when it loads it.

An added input already in the installed table with the same answer is dropped (nothing to add);
with another answer the refresh is refused (a changed answer needs the full memo compile and its
repetition evidence).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

from auto_runtime import Artifact
from auto_runtime.digest import digest_bytes
from auto_runtime.manifest import Interface, Manifest
from auto_runtime.table import TableIndex, read_table
from auto_runtime.wasm_sections import parse

from auto.canonical import canonical_json
from auto.codegen import TableModel, compile_table
from auto.codegen.table import canonical_key
from auto.compile.batching import chunked, text_size
from auto.compile.context import RungContext, next_generation
from auto.compile.generation import CompileOutcome, emit_generation
from auto.compile.manifest import ManifestDraft
from auto.compile.measure import call_latency_us
from auto.compile.rungs.memo import EXACT_MATCH_GUARD, NAME, probes_for
from auto_runtime.schema import json_type_name
from auto.emit import emit
from auto.errors import CompileError, RungRefused
from auto.gate import Contract, eval_record, run_memo_gate

CARRIED_SAMPLE = 64
"""Carried (installed) entries the refresh's gate also runs through the new code, evenly spaced
over the installed table's index order."""


FUEL_LONGEST = 8
"""The refresh measures fuel on this many of the merged table's longest keys ..."""
FUEL_SPREAD = 8
"""... and on this many added and this many carried entries, evenly spaced (each measured call
instantiates the artifact afresh: the measurement's cost grows with their number)."""


def _spread(xs: Sequence[Any], k: int) -> list[Any]:
    n = len(xs)
    if n <= k:
        return list(xs)
    return [xs[round(i * (n - 1) / (k - 1))] for i in range(k)]


def merge_input_schema(schema: dict[str, Any], added: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The input schema :func:`auto.compile.witnesses.input_schema` gives for the installed
    inputs plus ``added``, from the installed manifest's schema (the keys every input has, their
    types) and the added inputs alone.

    Raises:
        CompileError: ``schema`` is not such a schema.
    """
    props = schema.get("properties") if isinstance(schema, dict) else None
    required = schema.get("required") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or not isinstance(required, list):
        raise CompileError("the installed table's input schema is not the memo rung's (properties, required)")
    keys = set(required)
    for d in added:
        keys &= set(d)
    out: dict[str, Any] = {}
    for k in sorted(keys):
        t = props[k]["type"]
        types = set(t if isinstance(t, list) else [t]) | {json_type_name(d[k]) for d in added}
        s = sorted(types)
        out[k] = {"type": s[0] if len(s) == 1 else s}
    return {"type": "object", "properties": out, "required": sorted(keys), "additionalProperties": False}


def refresh_table(store: Any, task: str, installed: bytes | Artifact, added: Sequence[tuple[dict[str, Any], Any]], *,
                  witnesses: Sequence[Any] = (), probes: Sequence[dict[str, Any]] | None = None,
                  contract: Contract | None = None, generation: int | None = None,
                  out_path: str | Path | None = None, reference_model: str | None = None,
                  store_digest: str | None = None) -> CompileOutcome:
    """Compile the next generation of the installed table-only memo with ``added`` entries.

    Args:
        store: the :class:`auto.store.Store` (the eval run and the artifact are stored there).
        task: the task name (the installed artifact's).
        installed: the installed artifact (``compiled_as: memo``, declaring ``model.table``):
            its bytes, or the :class:`auto_runtime.Artifact` serving it (loaded with the table
            fast path: its verified table is used as it is, not read again).
        added: ``(input object, answer)`` pairs witnessed since, one answer per input (the
            caller vouches for their consistency, as for :func:`auto.compile.rungs.memo.compile_memo`).
        witnesses: the witnesses of ``added`` (provenance: the manifest cites their set's digest;
            the installed generation's are cited through ``model.table.extends``).
        probes: never-witnessed inputs that must miss (default: :func:`~auto.compile.rungs.memo.probes_for`
            the added inputs).
        contract: default :meth:`Contract.default_for`; generation: default the store's latest + 1.
        out_path, reference_model: as for :func:`auto.compile.compile_task`.
        store_digest: the task's store digest read with ``witnesses`` (None: read it now).

    Returns:
        The emitted generation (:class:`~auto.compile.generation.CompileOutcome`; ``timings_s``
        has ``read``, ``codegen``, ``gate`` and ``emit`` in seconds).

    Raises:
        CompileError: the installed artifact is not a table-only memo declaring its table, or
            nothing is added (every added entry is already in the table).
        ManifestError: the installed table does not match its bytes (:func:`auto_runtime.table.read_table`).
        RungRefused: an added input is in the installed table with another answer, or a gate
            check failed (eval run stored; nothing emitted).
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    contract = contract or Contract.default_for(task)
    man, old, installed_id = _installed_table(installed, task)
    merged, new_pairs, conflicts = _merge(old, added)
    ctx = RungContext(store=store, task=task, generation=generation or next_generation(store, task),
                      out_path=out_path, reference_model=reference_model)
    if conflicts:
        reason = (f"table refresh refused: {len(conflicts)} added input(s) are in the installed table with another "
                  f"answer (first {conflicts[0]}); a changed answer needs the full memo compile")
        r = ctx.refuse(NAME, contract, reason, [{"name": "added-entries-are-new", "conflicts": len(conflicts),
                                                 "passed": False}])
        raise RungRefused(NAME, reason, r.eval_run_id)
    if not new_pairs:
        raise CompileError("nothing to add: every added entry is already in the installed table")
    timings["read"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    table = TableModel.from_texts(merged)
    code, decl = compile_table(table)
    assert decl is not None  # a merged table has entries
    decl = {**decl, "extends": {"artifact_id": installed_id, "digest": old.digest, "entries": old.entries,
                                "generation": man.generation}}
    added_inputs = [p[0] for p in new_pairs]
    answers = sorted(set(table.answers))
    draft = ManifestDraft(
        task=task, generation=ctx.generation, compiled_as="memo",
        interface=Interface(input=merge_input_schema(man.interface.input, added_inputs),
                            output={"enum": [json.loads(a) for a in answers]}),
        model={**table.manifest_model(), "table": decl, "code_digest": digest_bytes(code)})
    # the gate runs the code, never the runtime's table fast path
    art = Artifact.load(emit(code, draft.provisional()), table_fast_path=False)
    timings["codegen"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    carried = [(k.decode("utf-8"), a.decode("utf-8")) for k, a in _spread(list(old.items()), CARRIED_SAMPLE)]
    checked = [(p[1], p[2]) for p in new_pairs] + carried
    seen = {p[1] for p in new_pairs}
    probe_objs = list(probes) if probes is not None else probes_for(added_inputs, seen)
    probe_texts = [t for t in (canonical_json(p) for p in probe_objs) if t.encode("utf-8") not in merged]
    record = run_memo_gate(contract=contract, run_batch=chunked(art.call_batch_texts, measure=text_size),
                           reference_text=lambda t: table.lookup(t.encode("utf-8")) or "null",
                           witnessed=checked, probes=probe_texts, candidate=draft.model,
                           generation=ctx.generation,
                           note=f"table refresh: {len(new_pairs)} entries added to the {old.entries} of generation "
                                f"{man.generation}; checked the added ones and {len(carried)} carried")
    chain = _carried_check(old, table, decl, len(new_pairs))
    record = eval_record(contract, ctx.generation, draft.model, [*record["checks"], chain],
                         record["reason"] if chain["passed"] else
                         f"table refresh refused: the new table lost {chain['missing']} and changed "
                         f"{chain['changed']} of the {old.entries} installed entries")
    record["guard"] = EXACT_MATCH_GUARD
    lat = call_latency_us(art, added_inputs)
    eval_id = store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    if record["verdict"] != "pass":
        raise RungRefused(NAME, record["reason"], eval_id)
    parity = _parity(record, man, old, installed_id)
    fuel_inputs = _fuel_inputs(table, added_inputs, carried)
    prior_runs = [r for r in man.eval_runs if isinstance(r, str)]
    return emit_generation(ctx, contract, draft, code, art, guard=EXACT_MATCH_GUARD, parity=parity,
                           eval_runs=[*prior_runs[-1:], eval_id], reason=record["reason"], witnesses=list(witnesses),
                           store_digest=store_digest, distinct_inputs=len(table), fuel_inputs=fuel_inputs,
                           latency=lat, timings=timings, model=table)


def _installed_table(installed: bytes | Artifact, task: str) -> tuple[Manifest, TableIndex, str]:
    """``(manifest, table, artifact id)`` of the installed table-only memo (an Artifact's table as
    verified at its load; from bytes, read and verified here).

    Raises:
        CompileError: not a table-only memo of ``task``, or it declares no table.
        ManifestError: the table does not match its bytes.
    """
    old: TableIndex | None
    if isinstance(installed, Artifact):  # loaded already (the table read and verified at its load)
        man, old, installed_id = installed.typed_manifest, installed.table, installed.id
    else:
        man = Manifest.read(installed)
        old, installed_id = None, digest_bytes(installed)
    if man.task != task or man.compiled_as != "memo":
        raise CompileError(f"the installed artifact is not a table-only memo of task {task!r} "
                           f"(task {man.task!r}, compiled as {man.compiled_as!r})")
    if old is None and not isinstance(installed, Artifact):
        old = read_table(installed, parse(installed), man.to_dict(), "installed artifact")
    if old is None:
        raise CompileError("the installed memo declares no model.table (or was loaded without the table fast path); "
                           "refresh it with a full memo compile")
    return man, old, installed_id


def _merge(old: TableIndex, added: Sequence[tuple[dict[str, Any], Any]]
           ) -> tuple[dict[bytes, str], list[tuple[dict[str, Any], str, str]], list[str]]:
    """``(merged table {key: answer text}, new (input, key text, answer text), conflicts)``: the
    installed entries with the added ones that are new; an added input already there with another
    answer is a conflict (its key text, cut at 80 characters)."""
    merged: dict[bytes, str] = {k: a.decode("utf-8") for k, a in old.items()}
    new_pairs: list[tuple[dict[str, Any], str, str]] = []
    conflicts: list[str] = []
    for inp, ans in added:
        key = canonical_key(inp)
        a = canonical_json(ans)
        have = merged.get(key)
        if have is None:
            merged[key] = a
            new_pairs.append((inp, key.decode("utf-8"), a))
        elif have != a:
            conflicts.append(key.decode("utf-8")[:80])
    return merged, new_pairs, conflicts


def _carried_check(old: TableIndex, table: TableModel, decl: dict[str, Any], added: int) -> dict[str, Any]:
    """The ``installed-table-carried`` check (stored form): every installed entry is in the merged
    table with its answer, whose bytes (the code's last data segment, digest in ``model.table``)
    were laid out from it by ``compile_table``, and the table grew by exactly ``added``."""
    missing = changed = 0
    lookup = table.lookup
    for k, a in old.items():
        b = lookup(k)
        if b is None:
            missing += 1
        elif b.encode("utf-8") != a:
            changed += 1
    return {"name": "installed-table-carried", "extends": decl["extends"], "n": old.entries, "missing": missing,
            "changed": changed, "digest": decl["digest"], "entries": len(table),
            "passed": missing == 0 and changed == 0 and len(table) == old.entries + added}


def _parity(record: dict[str, Any], man: Manifest, old: TableIndex, installed_id: str) -> dict[str, Any]:
    """The new generation's ``parity``: the gate's witnessed agreement and probe misses, the
    installed generation's repetition figures, and what was carried from it."""
    checks = {c["name"]: c for c in record["checks"]}
    wa = checks["witnessed-agreement"]
    installed = man.fields.get("parity")
    return {"witnessed": {k: wa[k] for k in ("n", "agree", "rate", "ci95_low")}, "heldout": None,
            "probes": {"n": checks["unwitnessed-probes-miss"]["n"], "hits": checks["unwitnessed-probes-miss"]["hits"]},
            "repetition": installed.get("repetition") if isinstance(installed, dict) else None,
            "carried": {"n": old.entries, "from": installed_id}}


def _fuel_inputs(table: TableModel, added_inputs: list[dict[str, Any]], carried: list[tuple[str, str]]) -> list[Any]:
    """The inputs fuel is measured on. Fuel of a lookup grows with the key's length (hashed and
    compared byte by byte; the search depth is log2 of the entries): the longest keys of the
    merged table, and a spread of the added and the carried entries."""
    longest = sorted(table.keys, key=len)[-FUEL_LONGEST:]
    return ([json.loads(k) for k in longest] + _spread(added_inputs, FUEL_SPREAD)
            + [json.loads(k) for k, _ in _spread(carried, FUEL_SPREAD)])


__all__ = ["CARRIED_SAMPLE", "merge_input_schema", "refresh_table"]
