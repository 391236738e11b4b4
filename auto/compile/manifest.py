"""The one manifest builder: every rung describes its candidate here, on the runtime's constants.

A manifest is canonical JSON in the artifact's ``auto.manifest`` section; the runtime
(:mod:`auto_runtime.manifest`) owns its format string, the ABI's exports and the checks the loader
applies. The compiler writes it in two steps:

1. :class:`ManifestDraft` — what the rung knows before the gate: task, generation, what it was
   compiled as, the interface and the model. :meth:`ManifestDraft.provisional` is the manifest of
   the *candidate* artifact the gate runs (guard ``none``, ``provisional: true``: it is never
   written to disk or stored).
2. :meth:`ManifestDraft.final` — after the gate: the contract, the eval runs it cites,
   provenance, parity, the guard calibration and the deterministic cost of a call. Every number
   in it is measured or ``null`` (wall-clock latency is ``null``: it depends on the machine, and
   the same witnesses must give the same bytes; ``fuel_per_call`` is the machine-independent
   measure of the compiled path's work).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from auto_runtime.manifest import ABI_EXPORTS, FORMAT, Capability, Interface


@dataclass(frozen=True)
class ManifestDraft:
    """A manifest before the gate.

    Attributes:
        task: the task name.
        generation: the generation number (1, 2, …).
        compiled_as: ``"program"``, ``"specialist"``, ``"memo-first"`` or ``"memo"``.
        interface: the runtime's typed :class:`auto_runtime.manifest.Interface`, written as the
            object ``{"input": <JSON schema>, "output": {...}}`` by its ``to_dict``.
        model: what was compiled (kind, sizes, digests; always ``code_digest``).
        capabilities: host functions the artifact imports, as the runtime's typed
            :class:`auto_runtime.manifest.Capability` (written with its ``to_dict``); none for a
            pure artifact.
        extra: further top-level keys of a capability artifact (``tools``, ``tool_budget``), and
            ``abi`` when its exports differ from the ABI's four.
    """

    task: str
    generation: int
    compiled_as: str
    interface: Interface
    model: dict[str, Any]
    capabilities: tuple[Capability, ...] = field(default_factory=tuple)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Raises: TypeError: ``interface`` is not an :class:`auto_runtime.manifest.Interface`, or a
        capability not an :class:`auto_runtime.manifest.Capability`."""
        if not isinstance(self.interface, Interface):
            raise TypeError(f"ManifestDraft.interface must be an auto_runtime.manifest.Interface, "
                            f"not {type(self.interface).__name__}")
        for c in self.capabilities:
            if not isinstance(c, Capability):
                raise TypeError(f"ManifestDraft.capabilities must hold auto_runtime.manifest.Capability, "
                                f"not {type(c).__name__}")

    def with_model(self, compiled_as: str | None = None, **model: Any) -> "ManifestDraft":
        """A copy whose ``model`` is updated with ``model`` (and ``compiled_as`` replaced)."""
        return replace(self, compiled_as=compiled_as or self.compiled_as, model={**self.model, **model})

    def base(self) -> dict[str, Any]:
        """The manifest keys known before the gate."""
        return {
            "format": FORMAT,
            "task": self.task,
            "generation": self.generation,
            "compiled_as": self.compiled_as,
            "interface": self.interface.to_dict(),
            "abi": {"exports": list(ABI_EXPORTS), "encoding": "canonical-json"},
            "capabilities": [c.to_dict() for c in self.capabilities],
            "model": self.model,
            **self.extra,
        }

    def provisional(self) -> dict[str, Any]:
        """The manifest of the candidate the gate runs (no guard; marked provisional)."""
        return {**self.base(), "guard": {"method": "none"}, "provisional": True}

    def final(self, *, contract: Any, eval_runs: list[str], provenance: dict[str, Any], parity: dict[str, Any],
              guard: dict[str, Any], fuel_per_call: dict[str, Any] | None,
              cost_usd_micros_per_call: float | None = 0) -> dict[str, Any]:
        """The manifest that is emitted.

        Args:
            contract: the :class:`auto.gate.Contract` the gate checked (id and fields recorded).
            eval_runs: the eval run ids the manifest cites (the gate's last).
            provenance: ``{"witness_set": {"digest", "n"}, "store_digest", "witnesses",
                "distinct_inputs", "reference_model"}`` (the set's members stay in the store:
                :meth:`auto.store.Store.witness_set`).
            parity: agreement figures per split, from the eval run.
            guard: the guard entry the runtime builds the guard from.
            fuel_per_call: :func:`auto.compile.measure.fuel_per_call`'s summary, or None.
            cost_usd_micros_per_call: the paid work of a tier-1 call in µ$ (0 for a pure artifact;
                a region's kept model calls at their recorded mean cost; None when unknown).
        """
        return {
            **self.base(),
            "contract": {"id": contract.id, **contract.model_dump()},
            "eval_runs": list(eval_runs),
            "provenance": provenance,
            "parity": parity,
            "guard": guard,
            "latency_us": None,
            "fuel_per_call": fuel_per_call,
            "cost_usd_micros_per_call": cost_usd_micros_per_call,
        }
