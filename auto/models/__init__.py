"""The models the compile rungs fit, one subpackage or module each:

- :mod:`auto.models.program`: the program DSL (syntax tree, types, safe regex, interpreter,
  serial forms) and its synthesis — what the program rung (:mod:`auto.compile.rungs.program`) fits;
- :mod:`auto.models.specialist`: the featurizer (:mod:`~auto.models.specialist.features`) and the
  trainer (:mod:`~auto.models.specialist.train`) of distilled specialists — what the specialist
  rung (:mod:`auto.compile.rungs.specialist`) fits;
- :mod:`auto.models.region`: a task compiled across its steps (binds, tool calls, commit,
  branches, templates) — what the region rung (:mod:`auto.compile.rungs.region`) fits.

Each has a Python reference implementation that :mod:`auto.codegen` lowers to WebAssembly.
"""
