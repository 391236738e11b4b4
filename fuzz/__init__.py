"""Fuzzing Auto's boundaries: coverage-guided (atheris, libFuzzer) targets and their runner.

Targets (:data:`fuzz.targets.TARGETS`), each fed bytes by the fuzzer and checking what must hold
for any input (a violated check or an unexpected exception is a *crash*):

* ``wasm_sections`` — the runtime's WebAssembly container parser, on mutated real artifacts;
* ``artifact_load`` — ``auto_runtime.Artifact.load`` (manifest, capabilities, exports, code
  digest) and one call, on mutated real artifacts;
* ``manifest`` — hostile manifests with valid digests (values replaced, deleted, added at any
  depth) through the loader and the tiered runtime, whose guard must deopt, never raise;
* ``json_abi`` — arbitrary input bytes to the ``run``/``run_batch`` exports of real artifacts
  (a program, an exact-match table, a specialist, a memo-first table), checked against the
  Python reference of each (:func:`auto.codegen.reference_run`, the program interpreter);
* ``regex`` — the program DSL's regex compiler and Pike VM, against Python's ``re``;
* ``store_ingest`` — ``Store.ingest`` of arbitrary span/trace records into one store, which
  must stay verifiable;
* ``sse`` — what a provider streams: the recorder's server-sent-event parser and completion
  assembly, whose result must be storable.

Run (from the repository root, with the ``.venv`` that ``make install`` creates)::

    python -m fuzz.run                      # every target, 60 s each (the long run: --seconds N)
    python -m fuzz.run regex json_abi --seconds 600
    python -m fuzz.run --runs 300 --seed 1  # a short, repeatable run (the tests run this)

Corpora and crashes go under ``out/fuzz/`` (``corpus/<target>/``, ``crashes/<target>/`` with each
crashing input and its traceback); the runner prints a JSON report: executions and distinct
crashes per target. Store state machines (hypothesis) are in ``tests/test_store_state_machine.py``;
the recorder soak test is :mod:`fuzz.soak` (``python -m fuzz.soak``).
"""
