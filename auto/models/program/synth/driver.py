"""The driver: :func:`synthesize` checks the witnesses, solves one part per record key (or the
whole scalar answer), validates the chosen program and recomputes its agreements with the
reference interpreter."""

from __future__ import annotations

import time
from typing import Any

from auto.canonical import canonical_json
from auto.errors import AutoError, ArgumentError
from auto.models.program import ast as A
from auto.models.program.interp import run_program
from auto.models.program.regex import compile_regex
from auto.models.program.types import check

from .evaluate import _answer, _same
from .extraction import _number_extraction, _text_extraction
from .lists import _decision_lists, default_evidence, presence_evidence
from .pool import _Budget, _Part
from .proposals import _ask_proposer
from .results import FieldResult, SynthResult
from .selective import selective_part

WRONG_COST = 3.0
"""Default cost of one silent-wrong answer, in deopts (see :mod:`auto.models.program.synth`)."""
MIN_AGREEMENT = 0.9
"""Default training (and held-out) agreement below which no program is returned."""
MAX_RULES = 32
"""Default maximum number of decision-list rules (more is memorization, not a program)."""


def _validate(program: A.Node, field: str) -> str | None:
    """None when the program type-checks and every pattern compiles; else the reason."""
    try:
        check(program, field)
        for n in A.walk(program):
            if type(n) is A.Search:
                compile_regex(n.pattern)
    except AutoError as e:
        return f"{type(e).__name__}: {e}"
    return None


def _synth_part(part: _Part, *, proposer: Any, notes: list[str], min_support: int | None,
                max_rules: int, state: dict[str, Any], selective: float | None = None) -> FieldResult:
    refs = part.refs
    if all(r is None for r in refs):
        part.add(A.Const(None), "const")
    else:
        kinds = {type(r) for r in refs if r is not None}
        if kinds <= {str}:
            _text_extraction(part)
        if kinds <= {int} or kinds <= {float}:
            _number_extraction(part)
        if kinds and all(k in (str, int, float, bool) for k in kinds):
            _decision_lists(part, min_support, max_rules)
    if proposer is not None and not part.budget.over():
        fin = part.finalists()
        if not fin or part.rank(fin)[0].agree < part.n:
            if not _ask_proposer(part, proposer, notes):
                state["proposer_declined"] = True
    fin = part.rank(part.finalists())
    if selective is not None:  # per field: if the best program is wrong somewhere, one that deopts where unsure
        best = next((c for c in fin if _validate(c.program, part.field) is None), None)
        if best is None or best.wrong > 0:
            sel = selective_part(part, selective, lambda p: _validate(p, part.field))
            if sel is not None and sel.score is not None and (best is None or sel.score > best.score):
                return sel
    for c in fin:
        why = _validate(c.program, part.field)
        if why is None:
            h = None if c.h_agree is None else c.h_agree / len(part.h_refs)
            dev = None
            if not part.budget.over():
                if type(c.program) is A.If and type(c.program.default) is A.Const:
                    dev = default_evidence(part, c.program.default.value, max_rules)
                elif c.kind in ("search", "number"):
                    dev = presence_evidence(part, max_rules)
                if dev is not None and _validate(dev, part.field) is not None:
                    dev = None
            return FieldResult(c.program, c.agree / part.n, h, part.count, c.kind, default_evidence=dev)
        notes.append(f"{part.name or 'answer'}: candidate dropped by validation ({why[:160]})")
    kinds = sorted({type(r).__name__ for r in refs})
    return FieldResult(None, None, None, part.count, None,
                       f"no candidate program for answers of type {', '.join(kinds)}")


def _check_witnesses(pairs: Any, field: str, what: str) -> list[tuple[dict, Any]]:
    if not isinstance(pairs, (list, tuple)):
        raise ArgumentError(f"{what} must be a list of (input object, answer) pairs")
    out = []
    for k, p in enumerate(pairs):
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            raise ArgumentError(f"{what}[{k}] is not an (input object, answer) pair")
        inp, ans = p
        if not isinstance(inp, dict):
            raise ArgumentError(f"{what}[{k}]: the input must be a dict, not {type(inp).__name__}")
        if not isinstance(inp.get(field), str):
            raise ArgumentError(f"{what}[{k}]: the input has no string field {field!r}")
        try:
            canonical_json(ans)
        except (TypeError, ValueError) as e:
            raise ArgumentError(f"{what}[{k}]: the answer is not a JSON value ({e})") from None
        out.append((inp, ans))
    return out


def _checked_witnesses(train: Any, heldout: Any, field: Any) -> tuple[list[tuple[dict, Any]], list[tuple[dict, Any]]]:
    """:func:`synthesize`'s training and held-out witnesses, checked (:func:`_check_witnesses`).

    Raises:
        ArgumentError: ``field`` is not a non-empty string, a witness is malformed, or ``train``
            is empty.
    """
    if not isinstance(field, str) or not field:
        raise ArgumentError("field must be a non-empty string")
    train = _check_witnesses(train, field, "train")
    heldout = _check_witnesses(heldout or [], field, "heldout")
    if not train:
        raise ArgumentError("synthesis needs at least one training witness")
    return train, heldout


def _check_options(time_budget_s: float, min_agreement: float, wrong_cost: float, mdl_scale: float) -> None:
    """Raise :class:`ArgumentError` unless :func:`synthesize`'s numeric options are in range."""
    if not (time_budget_s > 0):
        raise ArgumentError(f"time_budget_s must be positive, got {time_budget_s!r}")
    if not 0.0 <= min_agreement <= 1.0:
        raise ArgumentError(f"min_agreement must be in [0, 1], got {min_agreement!r}")
    if wrong_cost < 0:
        raise ArgumentError(f"wrong_cost must be >= 0, got {wrong_cost!r}")
    if not (isinstance(mdl_scale, (int, float)) and mdl_scale > 0):
        raise ArgumentError(f"mdl_scale must be a positive number, got {mdl_scale!r}")


def _record_keys(train: list[tuple[dict, Any]], heldout: list[tuple[dict, Any]]) -> list[str] | None:
    """The keys of record answers (sorted), or None when some training answer is not a record.

    Raises:
        ArgumentError: the training records have different keys or none, or a held-out answer
            is not a record with the training keys.
    """
    answers = [a for _i, a in train]
    if not all(isinstance(a, dict) for a in answers):
        return None
    keyset = {tuple(sorted(a)) for a in answers}
    if len(keyset) != 1:
        raise ArgumentError("record answers must have the same keys in every witness; saw "
                         + "; ".join(str(list(k)) for k in sorted(keyset)[:3]))
    if heldout and not all(isinstance(a, dict) and tuple(sorted(a)) in keyset for _i, a in heldout):
        raise ArgumentError("held-out record answers must have the training answers' keys")
    keys = list(next(iter(keyset)))
    if not keys:
        raise ArgumentError("record answers have no keys")
    return keys


def _shortfalls(train_ag: float, held_ag: float | None, fields: list[tuple[str, FieldResult]],
                min_agreement: float) -> list[str]:
    """Why a program does not fit: the training, held-out and per-field (``fields``, the record's
    ``(key, result)`` pairs) agreements below ``min_agreement``, one phrase each."""
    short = []
    if train_ag < min_agreement:
        short.append(f"training agreement {train_ag:.3f} < {min_agreement:.2f}")
    if held_ag is not None and held_ag < min_agreement:
        short.append(f"held-out agreement {held_ag:.3f} < {min_agreement:.2f}")
    for k, f in fields:
        if f.train_agreement is not None and f.train_agreement < min_agreement:
            short.append(f"field {k!r} training agreement {f.train_agreement:.3f} < {min_agreement:.2f}")
    return short


def synthesize(
    train: list[tuple[dict, Any]],
    *,
    field: str,
    heldout: list[tuple[dict, Any]] | None = None,
    proposer: Any = None,
    time_budget_s: float = 30.0,
    min_agreement: float = MIN_AGREEMENT,
    wrong_cost: float = WRONG_COST,
    min_support: int | None = None,
    max_rules: int = MAX_RULES,
    mdl_scale: float = 1.0,
    per_field: bool = False,
) -> SynthResult:
    """Synthesize a program that maps each training input to its reference answer.

    Args:
        train: witnesses ``(input object, reference answer)``; the answer is a JSON value (text,
            number, bool, null, or an object with the same keys in every witness).
        field: the input's string field the program reads (``Field(field)``).
        heldout: witnesses used only to choose among the finalists (and reported).
        proposer: an optional :class:`auto.models.program.propose.Proposer`, asked (a few rounds) when
            the best enumerated program still fails training witnesses; its proposals are
            type-checked, evaluated and kept only when they score better. A proposer that raises
            an :class:`~auto.errors.AutoError` (e.g. :class:`~auto.errors.SpendCapExceeded`) is
            not asked again; the refusal is recorded in ``notes``.
        time_budget_s: wall-clock budget in seconds for the search of each part (each record key,
            or the whole scalar answer), so a slow part never starves the next; when it runs out the
            best program found so far is kept and ``notes`` says so.
        min_agreement: training agreement (0..1) — and held-out agreement, when given — below
            which no program is returned (``reason`` says which fell short).
        wrong_cost: cost of a silent-wrong answer in deopts (the ranking score, :mod:`auto.models.program.synth`).
        min_support: training witnesses a decision-list rule must cover; default
            ``max(2, round(0.005 · n))`` (:data:`PRECEDENCE_SUPPORT`).
        max_rules: decision lists with more rules are not learned further.
        mdl_scale: multiplies the witnesses one unit of description length is worth (the MDL
            ratio, :func:`auto.models.program.synth.mdl._mdl_ratio`): above 1 prefers smaller programs,
            below 1 larger ones (the complexity parameter cross-validation chooses for few
            witnesses, :mod:`auto.compile.program_fit`).
        per_field: for record answers, a field whose best program is wrong on some training
            witness gets, when it scores better (``agree - wrong_cost * wrong``), the part that
            answers at precision >= ``min_agreement`` and deopts elsewhere
            (:mod:`auto.models.program.synth.selective`); ``min_agreement`` then applies to the
            records the program answers (``answered`` says how many), and a record no field of
            which deopts on any witness is judged as without ``per_field``.

    Returns:
        A :class:`SynthResult`; its agreements come from the reference interpreter.

    Raises:
        ArgumentError: ``train`` is empty or malformed (not pairs, input not a dict, ``field``
            missing or not a string, answer not JSON), record answers have different keys, or
            an argument is out of range.
    """
    t0 = time.perf_counter()
    train, heldout = _checked_witnesses(train, heldout, field)
    _check_options(time_budget_s, min_agreement, wrong_cost, mdl_scale)
    budgets: list[_Budget] = []
    shared: dict[Any, Any] = {}  # what depends only on the texts (lowered texts, keyword predicates)

    def budget() -> _Budget:
        budgets.append(_Budget(time_budget_s))
        return budgets[-1]
    notes: list[str] = []
    state: dict[str, Any] = {"proposer_declined": False}
    keys = _record_keys(train, heldout)
    record = keys is not None
    by_field = bool(per_field)
    per_field: dict[str, FieldResult] = {}  # type: ignore[no-redef]  # the results, per key
    if record:
        for k in keys:
            part = _Part(k, field, [(i, a[k]) for i, a in train], [(i, a[k]) for i, a in heldout], wrong_cost, budget(),
                         mdl_scale, shared)
            per_field[k] = _synth_part(part, proposer=None if state["proposer_declined"] else proposer, notes=notes,
                                       min_support=min_support, max_rules=max_rules, state=state,
                                       selective=min_agreement if by_field else None)
        missing = [k for k in keys if per_field[k].program is None]
        program = None if missing else A.Record(tuple((k, per_field[k].program) for k in keys))
        reason = (None if not missing else
                  "; ".join(f"field {k!r}: {per_field[k].reason}" for k in missing))
    else:
        part = _Part("", field, train, heldout, wrong_cost, budget(), mdl_scale, shared)
        per_field[""] = _synth_part(part, proposer=proposer, notes=notes, min_support=min_support, max_rules=max_rules,
                                    state=state)
        program = per_field[""].program
        reason = per_field[""].reason
    if any(b.exhausted for b in budgets):
        notes.append(f"time budget of {time_budget_s:g} s exhausted; the best program found so far was kept")
    candidates = sum(f.candidates for f in per_field.values())
    if program is None:
        return SynthResult(None, None, None, per_field, candidates, reason, time.perf_counter() - t0, notes)

    selective = record and any(per_field[k].kind == "selective" for k in keys)
    if selective:
        return _selective_result(program, train, heldout, per_field, candidates, min_agreement, t0, notes)
    fields = [(k, per_field[k]) for k in keys] if record else []
    return _judged_result(program, train, heldout, fields, per_field, candidates, min_agreement, t0, notes)


def _judged_result(program: A.Node, train: list[tuple[dict, Any]], heldout: list[tuple[dict, Any]],
                   fields: list[tuple[str, FieldResult]], per_field: dict[str, FieldResult], candidates: int,
                   min_agreement: float, t0: float, notes: list[str]) -> SynthResult:
    """A program that answers every witness, judged by the reference interpreter's training and
    held-out agreement (and each record field's, ``fields``) against ``min_agreement``: the
    result keeps the program only when none falls short."""
    train_ag, train_fast = _interp_agreement(program, train, notes, "train")
    held_ag = _interp_agreement(program, heldout, notes, "held-out")[0] if heldout else None
    short = _shortfalls(train_ag, held_ag, fields, min_agreement)
    if short:
        rules = sum(1 for n in A.walk(program) if type(n) is A.If)
        return SynthResult(None, train_ag, held_ag, per_field, candidates,
                           "best program does not fit the witnesses: " + "; ".join(short)
                           + ("" if not rules else " (the answers do not follow rules over the mined predicates)"),
                           time.perf_counter() - t0, notes)
    return SynthResult(program, train_ag, held_ag, per_field, candidates, None, time.perf_counter() - t0, notes)


def _selective_result(program: A.Node, train: list[tuple[dict, Any]], heldout: list[tuple[dict, Any]],
                      per_field: dict[str, FieldResult], candidates: int, min_agreement: float, t0: float,
                      notes: list[str]) -> SynthResult:
    """A per-field record with a field that deopts where unsure: ``min_agreement`` applies to the
    training records it answers (the reference interpreter's figures)."""
    def selective_agreement(pairs: list[tuple[dict, Any]]) -> tuple[int, int]:
        answered = agree = 0
        for inp, ref in pairs:
            out = run_program(program, inp)
            if not out["deopt"]:
                answered += 1
                agree += int(_same(out["answer"], ref))
        return answered, agree

    n_ans, n_agree = selective_agreement(train)
    held = selective_agreement(heldout) if heldout else None
    sel = ", ".join(f"{k!r} answers {f.answered:.0%}" for k, f in per_field.items() if f.kind == "selective")
    notes.append(f"per field: {sel} of the training witnesses and deopts elsewhere")
    short = []
    if n_ans == 0 or n_agree < min_agreement * n_ans - 1e-9:
        short.append(f"training agreement on the {n_ans} records it answers {n_agree}/{n_ans} < {min_agreement:.2f}")
    if held is not None and held[0] and held[1] < min_agreement * held[0] - 1e-9:
        short.append(f"held-out agreement on the {held[0]} records it answers {held[1]}/{held[0]} < {min_agreement:.2f}")
    train_ag = n_agree / len(train)
    held_ag = held[1] / len(heldout) if held is not None else None
    if short:
        return SynthResult(None, train_ag, held_ag, per_field, candidates,
                           "per-field program does not fit the witnesses: " + "; ".join(short), time.perf_counter() - t0,
                           notes, answered=n_ans / len(train))
    return SynthResult(program, train_ag, held_ag, per_field, candidates, None, time.perf_counter() - t0, notes,
                       answered=n_ans / len(train))


def _interp_agreement(program: A.Node, pairs: list[tuple[dict, Any]], notes: list[str], what: str) -> tuple[float, float]:
    """Agreement (0..1) of ``program`` with ``pairs`` under the reference interpreter; a deopt is
    a disagreement. Also returns the search-time evaluator's figure; a difference is noted."""
    agree = fast = 0
    for inp, ref in pairs:
        out = run_program(program, inp)
        if not out["deopt"] and _same(out["answer"], ref):
            agree += 1
        if _same(_answer(program, inp), ref):
            fast += 1
    if agree != fast:
        notes.append(f"{what}: the reference interpreter agrees on {agree} witnesses, the search-time "
                     f"evaluator on {fast}; the interpreter's figure is reported")
    n = max(1, len(pairs))
    return agree / n, fast / n
