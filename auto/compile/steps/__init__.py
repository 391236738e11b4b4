"""Compiling a task across its steps: from recorded runs (model calls and tool calls) to a region.

Modules: :mod:`~auto.compile.steps.traces` (runs as step sequences),
:mod:`~auto.compile.steps.build` (which value comes from where; decide first, then act),
:mod:`~auto.compile.steps.template` (templates over known values),
:mod:`~auto.compile.steps.schemas` (the tool schemas a region declares),
:mod:`~auto.compile.steps.gate` (the hermetic gate: tools replayed, never run). The rung that
uses them is :mod:`auto.compile.rungs.region`; the region itself is :mod:`auto.models.region`.
"""
