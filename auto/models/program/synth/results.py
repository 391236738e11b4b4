"""What synthesis returns: :class:`SynthResult` for the whole answer, :class:`FieldResult` per part."""

from __future__ import annotations

from dataclasses import dataclass, field as dc_field

from auto.models.program import ast as A


@dataclass
class FieldResult:
    """Synthesis of one part of the answer (one record key, or the whole scalar answer).

    Attributes:
        program: the chosen program for this part, or None.
        train_agreement: share of training witnesses (0..1) whose part it reproduces (search-time
            evaluator).
        heldout_agreement: the same on the held-out witnesses, None without them.
        candidates: how many candidate programs were evaluated for this part.
        kind: which family produced it (``"const"``, ``"search"``, ``"number"``, ``"rules"``,
            ``"proposed"``), None without a program.
        reason: why there is no program, None when there is one.
        default_evidence: for a decision list with a constant default, the condition under which
            the default label has positive evidence (:func:`auto.models.program.synth.lists.default_evidence`);
            for an extractor that is null on some witnesses, the condition under which a value is
            present (:func:`auto.models.program.synth.lists.presence_evidence`); else None.
        answered: for a part chosen per field to deopt where unsure (kind ``"selective"``,
            :mod:`auto.models.program.synth.selective`), the share of training witnesses it
            answers; None otherwise (the part answers every witness it does not deopt on).
        score: for such a part, the synthesizer's ranking score on the training witnesses
            (``agree - wrong_cost * wrong``); None otherwise.
    """

    program: A.Node | None
    train_agreement: float | None
    heldout_agreement: float | None
    candidates: int
    kind: str | None = None
    reason: str | None = None
    default_evidence: A.Node | None = None
    answered: float | None = None
    score: float | None = None


@dataclass
class SynthResult:
    """What :func:`synthesize` found.

    Attributes:
        program: the program (a :mod:`auto.models.program.ast` node), or None.
        train_agreement: share of training witnesses (0..1) the program reproduces exactly
            (canonical JSON equality; a deopt counts as a disagreement), computed with the
            reference interpreter; for no program, the best candidate's share (or None).
        heldout_agreement: the same on ``heldout``; None without held-out witnesses.
        per_field: for record answers, each key's :class:`FieldResult`; for a scalar answer one
            entry under the key ``""``.
        candidates: candidate programs evaluated (all parts together).
        reason: why there is no program (None when there is one).
        seconds: wall time of the search, in seconds.
        notes: things worth knowing (proposer refusals, budget exhaustion, interpreter
            disagreements).
        answered: with ``per_field``, the share of training witnesses the record answers (every
            field answers); ``train_agreement`` is then the share it answers right. None otherwise.
    """

    program: A.Node | None
    train_agreement: float | None
    heldout_agreement: float | None
    per_field: dict[str, FieldResult]
    candidates: int
    reason: str | None
    seconds: float
    notes: list[str] = dc_field(default_factory=list)
    answered: float | None = None
