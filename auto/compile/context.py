"""What every rung of the ladder is given besides the witnesses and the contract.

A :class:`RungContext` names the store (eval runs and artifacts are stored there), the task, the
generation being compiled, where the artifact goes, the provenance label of the reference model,
the progress callback, and the refusals of the rungs tried before (a rung may cite them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from auto.errors import RungRefused
from auto.gate import Contract, eval_record


def next_generation(store: Any, task: str) -> int:
    """The store's latest generation of ``task`` + 1 (1 when none was emitted)."""
    latest = store.latest_artifact(task)
    return latest.generation + 1 if latest else 1


def _quiet(_msg: str) -> None:
    return None


@dataclass
class RungContext:
    """The compile's context, shared by the rungs of one ladder run.

    Attributes:
        store: the :class:`auto.store.Store`.
        task: the task name.
        generation: the generation number being compiled.
        out_path: where the ``.wasm`` is written (None: ``<task>.gen<N>.wasm``).
        reference_model: provenance label (None: read from the recorded model-call spans).
        say: progress callback (human-readable lines).
        memo_first: the specialist answers witnessed inputs from an exact-match table in front.
        proposer: optional LLM-guided program proposer (:mod:`auto.models.program.propose`).
        prior: refusals of the rungs tried before this one, in ladder order.
        site: for a model-call site, its manifest entry (written under the manifest key
            ``site``), else None.
        served: what the host's table overlay served from witnesses it never re-asked
            (:meth:`auto_runtime.overlay.TableOverlay.service`), or None.
    """

    store: Any
    task: str
    generation: int
    out_path: str | Path | None = None
    reference_model: str | None = None
    say: Callable[[str], None] = _quiet
    memo_first: bool = True
    proposer: Any = None
    prior: list[RungRefused] = field(default_factory=list)
    site: dict[str, Any] | None = None
    served: dict[str, Any] | None = None

    def refuse(self, rung: str, contract: Contract, reason: str, checks: list[Any], *,
               citation: str | None = None, final: bool = False) -> RungRefused:
        """Store an eval run recording ``reason`` and return the refusal to raise (``checks``:
        :class:`auto.gate.Check` values or their stored form, :func:`auto.gate.eval_record`)."""
        rid = self.store.put_eval_run(eval_record(contract, self.generation, None, checks, reason))
        return RungRefused(rung, reason, rid, citation=citation, final=final)

    def prior_refusal(self, rung: str) -> RungRefused | None:
        """The refusal of ``rung`` in this ladder run, if it was tried and refused."""
        for r in self.prior:
            if r.rung == rung:
                return r
        return None
