"""The gate: a candidate artifact is checked *as WebAssembly* against its contract.

A contract (a small TOML file, or defaults derived from the task) states what the gate checks:

* the output property — ``witnessed-label``: every answer is one of the labels the reference
  agent was witnessed giving;
* agreement with the reference agent on every witnessed input and on a held-out split that the
  candidate never trained or calibrated on, with a 95% Clopper–Pearson lower bound
  (Clopper & Pearson, Biometrika 26(4), 1934; computed by ``scipy.stats.binomtest``);
* the acceptance thresholds on the held-out point estimate and on its lower bound;
* agreement of the WebAssembly answers with the compiler's Python reference implementation.

Every gate run is stored as an *eval run* whose id is the digest of its canonical record
(content-addressed); the manifest of an emitted artifact cites it. A refusal raises
:class:`auto.errors.GateRefused` carrying the eval run id and a one-line reason.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from dataclasses import field as dc_field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from scipy.stats import binomtest

from auto.canonical import canonical_json, digest
from auto.errors import ContractError


class Verdict(str, Enum):
    """An eval run's verdict (stored as its value)."""

    PASS = "pass"
    REFUSE = "refuse"


class CheckName(str, Enum):
    """The checks a gate runs (stored as the value; :class:`Check` adds the field of a
    ``field-agreement`` check after a colon)."""

    RUNS_WITHOUT_ERROR = "runs-without-error"
    OUTPUT_IS_WITNESSED_LABEL = "output-is-witnessed-label"
    WASM_MATCHES_PYTHON_REFERENCE = "wasm-matches-python-reference"
    WITNESSED_AGREEMENT = "witnessed-agreement"
    HELDOUT_AGREEMENT = "heldout-agreement"
    OVERALL_AGREEMENT = "overall-agreement"
    GUARD_CERTIFIED = "guard-certified"
    UNWITNESSED_PROBES_MISS = "unwitnessed-probes-miss"
    OUT_OF_FOLD_AGREEMENT = "out-of-fold-agreement"
    GUARD_ANSWERS = "guard-answers"
    GUARD_RISK = "guard-risk"
    UNMATCHED_TOOL_CALLS = "unmatched-tool-calls"
    FIELD_AGREEMENT = "field-agreement"
    # the rungs' refusals before a gate runs (no candidate was built, or it cannot be emitted)
    ONE_TEXT_FIELD = "one-text-field"
    ENOUGH_WITNESSES = "enough-witnesses"
    ENOUGH_RUNS = "enough-runs"
    TWO_OR_MORE_LABELS = "two-or-more-labels"
    TWO_OR_MORE_OUTPUTS = "two-or-more-outputs"
    OUTPUTS_ARE_LABELS = "outputs-are-labels"
    SPLITS_NONEMPTY = "splits-nonempty"
    MEMO_DETERMINISM_EVIDENCE = "memo-determinism-evidence"
    ARTIFACT_SIZE = "artifact-size"
    PROGRAM_SYNTHESIZED = "program-synthesized"
    REGION_BUILT = "region-built"
    # an incremental table refresh (auto.compile.rungs.memo_refresh)
    ADDED_ENTRIES_ARE_NEW = "added-entries-are-new"
    INSTALLED_TABLE_CARRIED = "installed-table-carried"
    # the near-duplicate rung (auto.compile.rungs.neardup): the canonicalization step's certified risk
    NEAR_DUPLICATE_RISK = "near-duplicate-risk"


@dataclass(frozen=True)
class Check:
    """One check of an eval run.

    Attributes:
        name: which check.
        passed: whether it passed (an informational check always passes).
        figures: its measured values (counts, rates, 95% Clopper–Pearson bounds, the contract's
            bars), as stored.
        informational: reported, never a reason to refuse.
        field: the answer field of a ``field-agreement`` check, else None.
        refusal: the eval run's one-line reason when this is its first failed check (not stored).
    """

    name: CheckName
    passed: bool
    figures: Mapping[str, Any] = dc_field(default_factory=dict)
    informational: bool = False
    field: str | None = None
    refusal: str | None = dc_field(default=None, compare=False)

    @property
    def key(self) -> str:
        """The stored name: ``name``, or ``field-agreement:<field>``."""
        return f"{self.name.value}:{self.field}" if self.field is not None else self.name.value

    def __getitem__(self, figure: str) -> Any:
        return self.figures[figure]

    def get(self, figure: str, default: Any = None) -> Any:
        """A figure, or ``default``."""
        return self.figures.get(figure, default)

    def to_dict(self) -> dict[str, Any]:
        """The stored form: ``{"name", <figures>, "passed"[, "informational": true]}``."""
        out = {"name": self.key, **self.figures, "passed": self.passed}
        if self.informational:
            out["informational"] = True
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Check":
        """A stored check read back (a name this version does not know raises ``ValueError``)."""
        name, _, fld = str(d["name"]).partition(":")
        figures = {k: v for k, v in d.items() if k not in ("name", "passed", "informational")}
        return cls(CheckName(name), bool(d["passed"]), figures, bool(d.get("informational")), fld or None)


@dataclass(frozen=True)
class EvalRun:
    """An eval run: what the gate measured on one candidate, and its verdict.

    Attributes:
        task, generation: what was compiled. contract: the contract's id and values.
        candidate: the candidate's description. checks: the checks in the order they ran.
        reason: one line saying why it passed, or which check refused and by how much.
        extra: other keys a rung stored with the record (e.g. the region rung's ``guard``).
    """

    task: str
    generation: int
    contract: Mapping[str, Any]
    candidate: Any
    checks: tuple[Check, ...]
    reason: str
    extra: Mapping[str, Any] = dc_field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        """``REFUSE`` when any check failed, else ``PASS``."""
        return Verdict.REFUSE if any(not c.passed for c in self.checks) else Verdict.PASS

    def check(self, name: CheckName, field: str | None = None) -> Check | None:
        """The check of that name (and field), or None when the gate did not run it."""
        return next((c for c in self.checks if c.name is name and c.field == field), None)

    def field_checks(self) -> dict[str, Check]:
        """The ``field-agreement`` checks by answer field."""
        return {c.field: c for c in self.checks if c.name is CheckName.FIELD_AGREEMENT and c.field is not None}

    def to_record(self) -> dict[str, Any]:
        """The stored record (its id is the digest of its canonical JSON, ``Store.put_eval_run``)."""
        return {**self.extra, "task": self.task, "generation": self.generation, "contract": dict(self.contract),
                "candidate": self.candidate, "checks": [c.to_dict() for c in self.checks],
                "verdict": self.verdict.value, "reason": self.reason}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "EvalRun":
        """A stored record read back."""
        known = ("task", "generation", "contract", "candidate", "checks", "verdict", "reason")
        return cls(record["task"], record["generation"], record["contract"], record["candidate"],
                   tuple(Check.from_dict(c) for c in record["checks"]), record["reason"],
                   {k: v for k, v in record.items() if k not in known})


def first_refusal(checks: Sequence[Check]) -> Check | None:
    """The first check that failed, or None."""
    return next((c for c in checks if not c.passed), None)


class Contract(BaseModel):
    """What the gate checks for one task.

    Attributes:
        task: the task name the contract applies to.
        output: output property; ``witnessed-label`` = answers must be witnessed labels.
        min_agreement: held-out agreement the ``agreement`` gate requires (point estimate, 0–1).
        min_agreement_ci95_low: 95% Clopper–Pearson lower bound the ``agreement`` gate requires.
        memo_min_consistency: the memo rung's bar: the share of repeated inputs that were answered
            consistently (point estimate).
        memo_min_consistency_ci95_low: the memo rung's bar on that share's 95% Clopper–Pearson lower
            bound. A table hit repeats a witnessed reference answer, so its disagreement with a
            fresh reference answer equals the reference's own (zero excess) whatever this share
            is; the bar only asks that the task mostly repeats itself, which a table needs to help
            (a task that answers at random is refused).
        gate: what a specialist must show. ``selective`` (default): its guard certifies selective
            risk <= ``epsilon`` at ``delta`` with some coverage; overall agreement is reported, not
            required. ``agreement``: held-out agreement >= ``min_agreement`` with its lower bound
            >= ``min_agreement_ci95_low`` as well.
        calibration: how the specialist's guard is calibrated. ``cross-fit`` (default): out-of-fold
            predictions over ``folds`` folds, so every witness trains and calibrates
            (cross-conformal strength, see :mod:`auto.compile.crossfit`); ``split``: disjoint
            training / calibration / held-out splits (split-conformal strength).
        folds: K of the cross-fit; None (the default) adapts it to the data: 10 folds below 400
            distinct inputs (each fold model trains on 90%, close to the deployed model where data
            is scarce: measured on the triage stream at 200 witnesses, certified coverage 0.75 with
            10 folds against 0.52 with 5), 5 from 400 on (cheaper; 80% of 400 is plenty).
        heldout_fraction: share of distinct witnessed inputs held out from training (0–0.5).
        calibration_fraction: share held out for model selection and guard calibration (0–0.5).
        alpha: level of the conformal novelty guard (expected deopt rate on exchangeable inputs).
        epsilon: selective-risk level of the guard, in (0, 1): on inputs exchangeable with the
            calibration inputs, P(tier-1 answer != reference answer | tier-1 answers) <= epsilon
            (Learn-then-Test; :mod:`auto.guards.risk`); with ``noise_min_reasked`` re-asked
            inputs, the bound is on the excess over the reference's own disagreement instead.
        noise_min_reasked: the fewest re-asked distinct inputs (witnessed at least twice: repeats
            paid again, audits) from which the specialist's and the near-duplicate rung's
            certificates bound the *excess* over the reference's self-disagreement: risk <=
            ``epsilon`` + a one-sided Clopper–Pearson lower bound of the rate at which the first
            two witnesses of a re-asked input differ (``delta`` split evenly between the two
            bounds; :mod:`auto.guards.noise`). With fewer, or None, epsilon bounds disagreement
            with single witnessed answers (the reference's noise counts as error). 30 (the
            default): the lower bound is then informative at a few percent of noise (3 of 30
            disagreeing give 0.028 at 95%) and the split's cost, ``delta / 2`` for the risk test,
            is small beside what a noise allowance of that size buys.
        delta: in (0, 1): the allowed probability that the calibration draw certifies a
            confidence threshold whose selective risk exceeds ``epsilon``.
        min_witnesses: fewer distinct witnessed inputs than this → refuse without training.
        program_min_witnesses: the program rung needs this many distinct witnessed inputs (it
            cross-validates instead of holding out a split, so a few dozen suffice).
        program_min_agreement: out-of-fold agreement a DSL program needs (deopts count as
            misses; measured on the unguarded answers, before the program's guard deopts anything).
        program_min_agreement_ci95_low: the one-sided Clopper–Pearson lower bound of that agreement
            a program needs (95%, Bonferroni-corrected when the procedure was chosen among several:
            :func:`clopper_pearson_lower`).
        seed: seed of the deterministic split.
        overlay_min_lead: the table overlay's admission rule (``k``, see
            :mod:`auto_runtime.overlay`): a witnessed input is answered at tier-1 before the next
            table is compiled once its modal witnessed answer leads every other answer for it by
            ``k`` witnesses. 1 (the default) answers from the first repeat, as an exact-match dict
            answers every repeat with its first answer; the shadow audit re-asks overlay answers
            at the table-hit rate halved per agreeing witness beyond ``k``
            (:meth:`auto_runtime.overlay.TableOverlay.audit_rate`), and the ratchet's risk
            monitor disables the overlay when those audits reject ``epsilon``. An input whose
            witnesses disagree with no answer leading by ``k`` deopts (``overlay-contested``)
            rather than being answered by an older table.
        repeat_audit_budget: the shadow audit's repeat budget ``b`` (:mod:`auto_runtime.audit`):
            exact-match answers (table hits, overlay answers) are audited only while those audits
            stay within ``b`` per tier-1 answer a generation derived (a nonzero nonconformity
            score). Guarantee: on a stream of repeats that no generation generalizes over, the
            ratchet pays one reference call per distinct input, as an exact-match dict does
            (contested inputs aside); where generations derive answers, the repeats' audits cost
            at most ``b`` calls per derived answer. 0.05 is the default audit rate of derived
            answers.
        noise_probe_max, noise_probe_share: the ratchet's noise probe
            (:mod:`auto.ratchet.probe`): paid re-asks of inputs answered from a single witness
            (table or overlay answers, audited outside ``repeat_audit_budget``), so that the
            re-asked inputs ``noise_min_reasked`` needs exist on a stream the overlay answers
            from first witnesses. At most ``noise_probe_max`` probes per task, and at most
            ``noise_probe_share`` of the calls answered so far (each probe is one reference
            call). 0 (either): no probe, the default: on the 3,000-item intents stream (HWU64
            utterances, 2% per-call noise) the re-asks cost more than the specialist they
            unlocked saved before the stream ended (cap 150: 2.13x; cap 50: 2.16x; an exact dict
            2.20x; measured with ``auto bench run intents --items 3000``), so a probe that runs
            unasked would lose to a dict there. A long-running deployment turns it on, e.g. 150
            and 0.05: at a pair disagreement of 4% (2% per-call noise), 150 re-asked inputs
            give a 95% lower bound near 1.7 points, the size of allowance that separates a near
            miss from a pass; 0.05: at most one paid re-ask per 20 calls, the shadow audit's
            default rate on derived answers (over that run's last 600 items, 3.59x).
        noise_probe_margin: the probe runs only while the last specialist attempt was refused
            with a smallest certifiable epsilon at most ``epsilon + noise_probe_margin`` (a
            noise allowance the probe could plausibly earn: the excess certificate lowers the
            smallest certifiable level by at most the reference's self-disagreement). 0.03: a
            sampling reference's pair disagreement is a few points.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str
    output: Literal["witnessed-label"] = "witnessed-label"
    min_agreement: float = Field(0.90, ge=0.0, le=1.0)
    min_agreement_ci95_low: float = Field(0.80, ge=0.0, le=1.0)
    heldout_fraction: float = Field(0.2, gt=0.0, le=0.5)
    calibration_fraction: float = Field(0.2, gt=0.0, le=0.5)
    alpha: float = Field(0.05, gt=0.0, lt=1.0)
    epsilon: float = Field(0.05, gt=0.0, lt=1.0)
    delta: float = Field(0.1, gt=0.0, lt=1.0)
    min_witnesses: int = Field(40, ge=4)
    memo_min_consistency: float = Field(0.5, ge=0.0, le=1.0)
    memo_min_consistency_ci95_low: float = Field(0.5, ge=0.0, le=1.0)
    gate: Literal["selective", "agreement"] = "selective"
    calibration: Literal["cross-fit", "split"] = "cross-fit"
    folds: int | None = Field(None, ge=2, le=20)
    program_min_witnesses: int = Field(20, ge=4)
    program_min_agreement: float = Field(0.95, ge=0.0, le=1.0)
    program_min_agreement_ci95_low: float = Field(0.75, ge=0.0, le=1.0)
    seed: int = 0
    overlay_min_lead: int = Field(1, ge=1)
    repeat_audit_budget: float = Field(0.05, ge=0.0, le=1.0)
    noise_min_reasked: int | None = Field(30, ge=2)
    noise_probe_max: int = Field(0, ge=0)
    noise_probe_share: float = Field(0.05, ge=0.0, le=1.0)
    noise_probe_margin: float = Field(0.03, ge=0.0, lt=1.0)

    def __init__(self, **data: Any) -> None:
        """Raises:
            ContractError: an unknown key, or a value of the wrong type or out of range (the
                message names each offending key).
        """
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise ContractError("; ".join(f"{'.'.join(map(str, err['loc'])) or 'contract'}: {err['msg']}"
                                          for err in e.errors())) from None

    @model_validator(mode="after")
    def _fractions(self) -> "Contract":
        if self.heldout_fraction + self.calibration_fraction >= 0.8:
            raise ValueError("heldout_fraction + calibration_fraction must leave at least 20% for training")
        return self

    @property
    def id(self) -> str:
        """Content-addressed id: digest of the canonical contract."""
        return digest(self.model_dump())

    @classmethod
    def default_for(cls, task: str) -> "Contract":
        """Defaults derived from the task (classification: witnessed-label property)."""
        return cls(task=task)

    @classmethod
    def load(cls, path: str | Path, task: str | None = None) -> "Contract":
        """Read a contract TOML file (a ``[contract]`` table, or top-level keys).

        Raises:
            ContractError: the file is missing, not TOML, has unknown keys or bad values, or
                names a different task than ``task``.
        """
        p = Path(path)
        body = _read_contract_file(p)
        if task is not None:
            body = {"task": task, **body}
            if body["task"] != task:
                raise ContractError(f"contract {p} is for task {body['task']!r}, not {task!r}")
        try:
            return cls(**body)
        except ContractError as e:
            raise ContractError(f"contract {p}: {e}") from None

    @classmethod
    def load_shared(cls, path: str | Path) -> dict[str, Any]:
        """The fields of a contract file applied to every task (``auto compile --all``): its
        values, checked as :meth:`load` checks them, without ``task`` (a task the file names is
        ignored).

        Raises:
            ContractError: as :meth:`load` (but never for the task).
        """
        p = Path(path)
        body = {k: v for k, v in _read_contract_file(p).items() if k != "task"}
        try:
            fields = cls(**{**body, "task": "*"}).model_dump()
        except ContractError as e:
            raise ContractError(f"contract {p}: {e}") from None
        fields.pop("task")
        return fields


def _read_contract_file(p: Path) -> dict[str, Any]:
    """The contract table of a TOML file (its ``[contract]`` table, else its top-level keys)."""
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ContractError(f"contract file not found: {p}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ContractError(f"contract {p} is not valid TOML: {e}") from None
    return dict(data.get("contract", data))


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Exact (Clopper–Pearson) two-sided interval for a binomial proportion k/n.

    Returns:
        ``(low, high)``; ``(None, None)`` when ``n == 0``.
    """
    if n == 0:
        return None, None
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def clopper_pearson_lower(k: int, n: int, confidence: float = 0.95) -> float | None:
    """Exact (Clopper–Pearson) one-sided lower confidence bound for a binomial proportion k/n:
    the ``p`` with ``P(Binomial(n, p) >= k) = 1 - confidence``, i.e. the ``1 - confidence``
    quantile of Beta(k, n - k + 1), and 0 for ``k = 0`` (Clopper & Pearson, Biometrika 26(4),
    1934; computed by ``scipy.stats.binomtest(k, n, alternative="greater")``). A gate that asks
    "is the agreement at least the bar?" tests one side, so its bound at 95% is this one, not the
    lower end of the two-sided 95% interval (which holds at 97.5%). At 95%: 20/20 -> 0.861,
    19/20 -> 0.784.

    Returns:
        The bound in [0, 1]; None when ``n == 0``.
    """
    if n == 0:
        return None
    return float(binomtest(k, n, alternative="greater").proportion_ci(confidence_level=confidence, method="exact").low)


def agreement(answers: Sequence[Any], expected: Sequence[Any]) -> dict[str, Any]:
    """Agreement of ``answers`` with ``expected`` (canonical JSON equality).

    Returns:
        ``{"n", "agree", "rate", "ci95_low", "ci95_high"}``; rate and bounds are None when n = 0.
    """
    return agreement_of_texts([canonical_json(a) for a in answers], [canonical_json(e) for e in expected])


def agreement_of_texts(answers: Sequence[str], expected: Sequence[str]) -> dict[str, Any]:
    """:func:`agreement` of answers and expected values given as their canonical JSON texts."""
    n = len(expected)
    agree = sum(1 for a, e in zip(answers, expected) if a == e)
    low, high = clopper_pearson(agree, n)
    return {"n": n, "agree": agree, "rate": (agree / n) if n else None, "ci95_low": low, "ci95_high": high}


def run_gate(
    *,
    contract: Contract,
    run_batch: Callable[[list[dict]], list[dict]],
    reference_predict: Callable[[dict], Any],
    witnessed: Sequence[tuple[dict, Any]],
    heldout: Sequence[tuple[dict, Any]],
    labels: Sequence[Any],
    candidate: dict[str, Any],
    generation: int,
) -> dict[str, Any]:
    """Run every check of the contract and return the eval-run record (not yet stored).

    Args:
        contract: the contract to check.
        run_batch: runs the candidate *as WebAssembly* on a list of task inputs and returns the
            ABI output objects (``{"answer", ...}`` or ``{"error"}``) in order.
        reference_predict: the compiler's Python reference implementation of the candidate
            (returns the answer); the WebAssembly must agree with it on every input.
        witnessed: every (input, modal witnessed output) pair the store holds.
        heldout: the held-out (input, output) pairs (never used to train or calibrate).
        labels: the witnessed labels (the output property's allowed set).
        candidate: a description of the candidate (kind, code digest, sizes) for the record.
        generation: the generation number being compiled.

    Returns:
        The eval-run record: ``{"task", "generation", "contract", "candidate",
        "checks": [...], "verdict": "pass"|"refuse", "reason"}``; its id is the digest of the
        record, assigned when it is stored (``Store.put_eval_run``).
    """
    allowed = {canonical_json(x) for x in labels}
    checks: list[Check] = []

    def outputs(pairs: Sequence[tuple[dict, Any]]) -> list[dict]:
        return run_batch([p[0] for p in pairs]) if pairs else []

    w_out = outputs(witnessed)
    h_out = outputs(heldout)

    def answers(outs: list[dict]) -> list[Any]:
        return [o.get("answer") if "error" not in o else {"__error__": o["error"]} for o in outs]

    n_all = len(w_out) + len(h_out)
    errors = sum(1 for o in w_out + h_out if "error" in o)
    checks.append(Check(CheckName.RUNS_WITHOUT_ERROR, errors == 0, {"errors": errors, "n": n_all},
                        refusal=f"the candidate returned errors on {errors} of {n_all} eval inputs"))

    bad_labels = sum(1 for a in answers(w_out) + answers(h_out) if canonical_json(a) not in allowed)
    checks.append(Check(CheckName.OUTPUT_IS_WITNESSED_LABEL, bad_labels == 0, {"violations": bad_labels},
                        refusal=f"{bad_labels} answers are not witnessed labels"))

    ref_w = [reference_predict(p[0]) for p in witnessed]
    ref_h = [reference_predict(p[0]) for p in heldout]
    mism = sum(1 for a, r in zip(answers(w_out) + answers(h_out), ref_w + ref_h) if canonical_json(a) != canonical_json(r))
    checks.append(Check(CheckName.WASM_MATCHES_PYTHON_REFERENCE, mism == 0, {"mismatches": mism},
                        refusal=f"WebAssembly and the Python reference disagree on {mism} inputs"))

    wa = agreement(answers(w_out), [p[1] for p in witnessed])
    checks.append(Check(CheckName.WITNESSED_AGREEMENT, wa["n"] > 0, wa, informational=True,
                        refusal=f"check {CheckName.WITNESSED_AGREEMENT.value} failed"))

    ha = agreement(answers(h_out), [p[1] for p in heldout])
    ok_point = ha["rate"] is not None and ha["rate"] >= contract.min_agreement
    ok_low = ha["ci95_low"] is not None and ha["ci95_low"] >= contract.min_agreement_ci95_low
    rate = "n/a" if ha["rate"] is None else f"{ha['rate']:.3f}"
    low = "n/a" if ha["ci95_low"] is None else f"{ha['ci95_low']:.3f}"
    checks.append(Check(CheckName.HELDOUT_AGREEMENT, ok_point and ok_low,
                        {**ha, "min_agreement": contract.min_agreement, "min_agreement_ci95_low": contract.min_agreement_ci95_low},
                        refusal=f"held-out agreement {ha['agree']}/{ha['n']} = {rate} (95% CP lower bound {low}) is below "
                                f"the contract's {contract.min_agreement:.2f} (lower bound {contract.min_agreement_ci95_low:.2f})"))

    failed = first_refusal(checks)
    if failed is None:
        reason = (
            f"held-out agreement {ha['agree']}/{ha['n']} = {ha['rate']:.3f} "
            f"(95% CP lower bound {ha['ci95_low']:.3f}) meets {contract.min_agreement:.2f} / {contract.min_agreement_ci95_low:.2f}"
        )
    else:
        reason = failed.refusal
    return eval_record(contract, generation, candidate, checks, reason)


def run_selective_gate(
    *,
    contract: Contract,
    run_batch: Callable[[list[dict]], list[dict]],
    reference_predict: Callable[[dict], Any],
    witnessed: Sequence[tuple[dict, Any]],
    labels: Sequence[Any],
    guard: dict[str, Any],
    estimate: dict[str, Any],
    candidate: dict[str, Any],
    generation: int,
    heldout: Sequence[tuple[dict, Any]] = (),
) -> dict[str, Any]:
    """The gate of a guarded specialist: what its guard lets answer must be certified.

    Checks (the first three as in :func:`run_gate`, over the witnessed and held-out inputs):
    ``runs-without-error``, ``output-is-witnessed-label``, ``wasm-matches-python-reference``;
    ``witnessed-agreement`` and ``overall-agreement`` (the out-of-fold or held-out agreement of
    the specialist with the witnessed answers, with its 95% Clopper–Pearson interval) are
    informational; ``guard-certified`` passes when the guard stack has no fallback reason and its
    selective-risk component certified a threshold that lets a positive share of the
    calibration inputs through. With ``contract.gate == "agreement"`` the held-out agreement
    thresholds of :func:`run_gate` apply as well (``overall-agreement`` then counts).

    Args:
        witnessed: every (input, modal witnessed output) pair.
        heldout: held-out pairs (the ``split`` calibration), else empty.
        guard: the calibrated guard stack entry (:func:`auto.guards.stack.calibrate_stack`).
        estimate: ``{"method", "n", "agree"}`` of the specialist's out-of-sample agreement.
        Others: as for :func:`run_gate`.

    Returns:
        The eval-run record (same shape as :func:`run_gate`).
    """
    allowed = {canonical_json(x) for x in labels}
    pairs = list(witnessed) + list(heldout)
    outs = run_batch([p[0] for p in pairs]) if pairs else []
    answers = [o.get("answer") if "error" not in o else {"__error__": o["error"]} for o in outs]
    errors = sum(1 for o in outs if "error" in o)
    checks = [Check(CheckName.RUNS_WITHOUT_ERROR, errors == 0, {"errors": errors, "n": len(outs)},
                    refusal=f"the candidate returned errors on {errors} of {len(outs)} eval inputs")]
    bad = sum(1 for a in answers if canonical_json(a) not in allowed)
    checks.append(Check(CheckName.OUTPUT_IS_WITNESSED_LABEL, bad == 0, {"violations": bad},
                        refusal=f"{bad} answers are not witnessed labels"))
    mism = sum(1 for a, p in zip(answers, pairs) if canonical_json(a) != canonical_json(reference_predict(p[0])))
    checks.append(Check(CheckName.WASM_MATCHES_PYTHON_REFERENCE, mism == 0, {"mismatches": mism},
                        refusal=f"WebAssembly and the Python reference disagree on {mism} inputs"))
    wa = agreement(answers[:len(witnessed)], [p[1] for p in witnessed])
    checks.append(Check(CheckName.WITNESSED_AGREEMENT, wa["n"] > 0, wa, informational=True,
                        refusal="no witnessed input to check the candidate on"))
    n, k = int(estimate["n"]), int(estimate["agree"])
    low, high = clopper_pearson(k, n)
    est = {"method": estimate["method"], "n": n, "agree": k, "rate": k / n if n else None, "ci95_low": low, "ci95_high": high}
    rate = "n/a" if est["rate"] is None else f"{est['rate']:.3f}"
    lows = "n/a" if low is None else f"{low:.3f}"
    overall = f"{est['method']} agreement {k}/{n} = {rate} (95% CP lower bound {lows})"
    below = f"{overall} is below the contract's {contract.min_agreement:.2f} (lower bound {contract.min_agreement_ci95_low:.2f})"
    if contract.gate == "agreement":
        checks.append(Check(CheckName.OVERALL_AGREEMENT,
                            est["rate"] is not None and est["rate"] >= contract.min_agreement
                            and low is not None and low >= contract.min_agreement_ci95_low,
                            {**est, "min_agreement": contract.min_agreement,
                             "min_agreement_ci95_low": contract.min_agreement_ci95_low}, refusal=below))
    else:
        checks.append(Check(CheckName.OVERALL_AGREEMENT, True, est, informational=True))
    risk = next((c for c in guard.get("components") or [] if c.get("method") == "selective-risk"), None)
    cov = (risk or {}).get("calibration_coverage")
    certified = guard.get("fallback_reason") is None and risk is not None and risk.get("threshold") is not None \
        and cov is not None and cov > 0
    why = guard.get("fallback_reason") or (risk or {}).get("reason") or "no calibration input proceeds"
    checks.append(Check(CheckName.GUARD_CERTIFIED, certified,
                        {"fallback_reason": guard.get("fallback_reason"), "threshold": (risk or {}).get("threshold"),
                         "coverage": cov, "selective_risk": (risk or {}).get("calibration_selective_risk"),
                         "epsilon": contract.epsilon, "delta": contract.delta,
                         "smallest_certifiable_epsilon": (risk or {}).get("smallest_certifiable_epsilon"),
                         "calibration_n": (risk or {}).get("n")},
                        refusal=f"the guard would deopt every input outside the table: {why}; overall {overall}"))
    failed = first_refusal(checks)
    if failed is None:
        reason = (f"selective risk certified: tier-1 when {risk['confidence_field']} >= {risk['threshold']:.6g}, "
                  f"{cov:.3f} of the {risk['n']} calibration inputs answered at risk {risk['calibration_selective_risk']:.3f} "
                  f"(epsilon {contract.epsilon:g}, delta {contract.delta:g}); overall {overall}")
    else:
        reason = failed.refusal
    return eval_record(contract, generation, candidate, checks, reason)


def eval_record(contract: Contract, generation: int, candidate: Any, checks: Sequence[Check | Mapping[str, Any]],
                reason: str) -> dict[str, Any]:
    """The stored record of a gate run (:meth:`EvalRun.to_record`; its id is the digest,
    assigned when stored): ``{"task", "generation", "contract", "candidate", "checks": [...],
    "verdict": "pass"|"refuse", "reason"}``. A check given in its stored form (a rung's refusal
    before any gate ran) is read with :meth:`Check.from_dict`.

    Raises:
        ValueError: a stored-form check whose name is not a :class:`CheckName`.
    """
    typed = tuple(c if isinstance(c, Check) else Check.from_dict(c) for c in checks)
    return EvalRun(contract.task, generation, {"id": contract.id, **contract.model_dump()}, candidate, typed,
                   reason).to_record()


def run_memo_gate(
    *,
    contract: Contract,
    run_batch: Callable[[list[str]], list[dict]],
    reference_text: Callable[[str], str],
    witnessed: Sequence[tuple[str, str]],
    probes: Sequence[str],
    candidate: dict[str, Any],
    generation: int,
    note: str | None = None,
) -> dict[str, Any]:
    """The gate for an exact-match table (memo): it may only repeat what was witnessed.

    Checks: no errors; every witnessed input is answered with exactly its witnessed (modal)
    output (agreement must be 1.0 — a table generalizes nothing, so anything less is a defect);
    the WebAssembly equals the Python reference; every probe (an input that was never witnessed)
    misses the table (nonconformity 1.0), so the exact-match guard deopts it.

    Inputs and answers are canonical JSON texts (each input encoded once by the caller: a table
    of 100,000 entries is not re-encoded per check).

    Args:
        run_batch: the artifact's batched call on input texts (every witnessed input and every
            probe goes through it), e.g. ``chunked(artifact.call_batch_texts, measure=text_size)``.
        reference_text: the Python reference's answer to an input text, as canonical JSON text.
        witnessed: ``(input text, witnessed output text)`` pairs.
        probes: never-witnessed input texts.

    Returns:
        The eval-run record (same shape as :func:`run_gate`).
    """
    w_out = run_batch([p[0] for p in witnessed]) if witnessed else []
    p_out = run_batch(list(probes)) if probes else []
    errors = sum(1 for o in w_out + p_out if "error" in o)
    checks = [Check(CheckName.RUNS_WITHOUT_ERROR, errors == 0, {"errors": errors, "n": len(w_out) + len(p_out)},
                    refusal=f"the table returned errors on {errors} inputs")]
    got = [canonical_json(o.get("answer")) for o in w_out + p_out]  # each answer encoded once
    wa = agreement_of_texts(got[:len(w_out)], [p[1] for p in witnessed])
    checks.append(Check(CheckName.WITNESSED_AGREEMENT, wa["n"] > 0 and wa["agree"] == wa["n"], wa,
                        refusal=f"the table repeats {wa['agree']}/{wa['n']} witnessed outputs (must be all)"))
    ref = [reference_text(p[0]) for p in witnessed] + [reference_text(p) for p in probes]
    mism = sum(1 for a, r in zip(got, ref) if a != r)
    checks.append(Check(CheckName.WASM_MATCHES_PYTHON_REFERENCE, mism == 0, {"mismatches": mism},
                        refusal=f"WebAssembly and the Python reference disagree on {mism} inputs"))
    hits = sum(1 for o in p_out if "error" not in o and o.get("nonconformity") != 1.0)
    checks.append(Check(CheckName.UNWITNESSED_PROBES_MISS, hits == 0, {"n": len(p_out), "hits": hits},
                        refusal=f"{hits} of {len(p_out)} never-witnessed probes hit the table"))
    failed = first_refusal(checks)
    if failed is not None:
        reason = failed.refusal
    else:
        reason = f"exact-match table repeats all {wa['n']} witnessed outputs; {len(p_out)} unwitnessed probes all miss"
    if note:
        reason = f"{note}; {reason}"
    return eval_record(contract, generation, candidate, checks, reason)


def run_program_gate(
    *,
    contract: Contract,
    run_batch: Callable[[list[dict]], list[dict]],
    reference_run: Callable[[dict], dict],
    witnessed: Sequence[tuple[dict, Any]],
    oof: dict[str, Any],
    guard: dict[str, Any],
    candidate: dict[str, Any],
    generation: int,
) -> dict[str, Any]:
    """The gate for a DSL program artifact (``compiled_as: program``), on out-of-fold evidence.

    Checks:

    - ``runs-without-error``: no ABI error on any witnessed input;
    - ``wasm-matches-python-reference``: the artifact's output (``answer``, ``deopt`` and
      ``evidence``) equals the Python interpreter's (:func:`auto.models.program.interp.run_program`) on
      every witnessed input, byte for byte in canonical JSON;
    - ``witnessed-agreement`` (informational): the deployed program on the witnesses it was
      synthesized from (a deopt counts as a disagreement);
    - ``out-of-fold-agreement``: every witness predicted by the procedure run without it
      (:mod:`auto.compile.program_fit`; a deopt is a miss; for a record compiled per field,
      ``oof["selective"]``, the witnesses it answers: a field deopts where it is unsure and the
      reference answers that record, so a deopt is never wrong) must reach
      ``contract.program_min_agreement``, with a one-sided Clopper–Pearson lower bound
      (:func:`clopper_pearson_lower`) of at least ``contract.program_min_agreement_ci95_low`` at
      confidence ``1 - 0.05 / compared`` (the Bonferroni correction for the ``compared``
      procedures the choice was made among; 95% with one); the refusal names the record fields
      whose own bound falls short;
    - ``field-agreement:<field>`` (informational, records): each field's own fold part on the
      out-of-fold witnesses it answers, with the same one-sided bound and whether it meets the
      same bars (a record answered at tier-1 is wrong when any field is, so the record's bound is
      the guarantee; these say which field holds it back);
    - ``guard-answers``: the program's guard (:mod:`auto.guards.program`) lets some out-of-fold
      witness through (otherwise every call would deopt);
    - ``guard-risk``: with enough calibration points to certify ``contract.epsilon`` at
      ``contract.delta``, the guard's Learn-then-Test threshold must exist; with fewer, nothing is
      required (the out-of-fold bound is the guarantee, and the guard entry says so).

    Args:
        oof: ``{"n", "agree", "compared", "method", "parts"}`` of the out-of-fold predictions; per
            field also ``"selective": True``, ``"answered"`` (witnesses answered) and ``"fields"``;
            for a record, ``"field_oof"``: ``{field: {"witnesses", "answered", "agree"}}``
            (:meth:`auto.compile.program_fit.ProgramFit.field_agreement`).
        guard: the calibrated ``program-evidence`` entry.
        Others: as for :func:`run_gate`.

    Returns:
        The eval-run record (same shape as :func:`run_gate`).
    """
    w_out = run_batch([p[0] for p in witnessed]) if witnessed else []
    errors = sum(1 for o in w_out if "error" in o)
    checks = [Check(CheckName.RUNS_WITHOUT_ERROR, errors == 0, {"errors": errors, "n": len(w_out)},
                    refusal=f"the program returned errors on {errors} of {len(w_out)} eval inputs")]
    keys = ("answer", "deopt", "evidence")
    mism = sum(1 for o, p in zip(w_out, witnessed)
               if "error" in o or canonical_json({k: o.get(k) for k in keys if k in o})
               != canonical_json(reference_run(p[0])))
    checks.append(Check(CheckName.WASM_MATCHES_PYTHON_REFERENCE, mism == 0, {"mismatches": mism},
                        refusal=f"WebAssembly and the Python interpreter disagree on {mism} inputs"))
    answered = [(o, p) for o, p in zip(w_out, witnessed) if "error" not in o and o.get("deopt") is False]
    wa = agreement([o.get("answer") if "error" not in o and o.get("deopt") is False else {"__deopt__": True}
                    for o in w_out], [p[1] for p in witnessed])
    checks.append(Check(CheckName.WITNESSED_AGREEMENT, wa["n"] > 0, {**wa, "answered": len(answered)}, informational=True,
                        refusal="no witnessed input to check the program on"))
    oof_check, oof_txt = _out_of_fold_check(contract, oof)
    checks.append(oof_check)
    checks.extend(_field_checks(contract, oof, oof_check["confidence"]))
    cal = guard.get("calibration") or {}
    t1 = int(cal.get("tier1") or 0)
    lo1, hi1 = clopper_pearson(int(cal.get("tier1_wrong") or 0), t1)
    checks.append(Check(CheckName.GUARD_ANSWERS, t1 > 0,
                        {"tier1": t1, "tier1_wrong": cal.get("tier1_wrong"), "n": cal.get("n"),
                         "coverage": t1 / cal["n"] if cal.get("n") else None,
                         "selective_risk": (cal.get("tier1_wrong") or 0) / t1 if t1 else None,
                         "selective_risk_ci95_high": hi1},
                        refusal=f"the program's guard would deopt every input ({oof_txt})"))
    risk = guard.get("risk") or {}
    certified = risk.get("threshold") is not None
    checks.append(Check(CheckName.GUARD_RISK, certified or bool(guard.get("few_shot")),
                        {"threshold": risk.get("threshold"), "epsilon": contract.epsilon, "delta": contract.delta,
                         "few_shot": bool(guard.get("few_shot")), "reason": risk.get("reason")},
                        refusal=f"the program's guard certifies no selective risk <= {contract.epsilon:g}: {risk.get('reason')}"))
    failed = first_refusal(checks)
    if failed is None:
        reason = (f"program {oof_txt} meets {contract.program_min_agreement:.2f} / "
                  f"{contract.program_min_agreement_ci95_low:.2f}; its guard answers {t1} of {cal.get('n')} out-of-fold "
                  f"witnesses, {cal.get('tier1_wrong')} wrong"
                  + (f" (risk threshold {risk['threshold']:.4g} certified at epsilon {contract.epsilon:g})" if certified
                     else " (too few points for a selective-risk certificate)"))
    else:
        reason = failed.refusal
    return eval_record(contract, generation, candidate, checks, reason)


def _out_of_fold_check(contract: Contract, oof: Mapping[str, Any]) -> tuple[Check, str]:
    """The program gate's ``out-of-fold-agreement`` check (:func:`run_program_gate`) and its
    one-line description: the agreement with its one-sided Clopper–Pearson lower bound
    (:func:`clopper_pearson_lower`) at ``1 - 0.05 / compared``."""
    selective = bool(oof.get("selective"))
    n, k = (int(oof["answered"]), int(oof["agree"])) if selective else (int(oof["n"]), int(oof["agree"]))
    compared = max(1, int(oof.get("compared", 1)))
    conf = 1.0 - 0.05 / compared
    low = clopper_pearson_lower(k, n, confidence=conf)
    rate = k / n if n else None
    ok = (rate is not None and rate >= contract.program_min_agreement
          and low is not None and low >= contract.program_min_agreement_ci95_low)
    lows = "n/a" if low is None else f"{low:.3f}"
    rates = "n/a" if rate is None else f"{rate:.3f}"
    bound = f"{conf:.1%}" if compared == 1 else f"{conf:.2%}, Bonferroni over {compared} procedures compared"
    oof_txt = (f"out-of-fold agreement {k}/{n} = {rates} ({bound} one-sided CP lower bound {lows}; deopts count as "
               "misses)" if not selective else
               f"out-of-fold agreement on the {n} of {oof['n']} witnesses it answers {k}/{n} = {rates} ({bound} one-sided "
               f"CP lower bound {lows}; per field: a field deopts where it is unsure, and the reference answers that record)")
    short = (f"program {oof_txt} does not meet the contract's {contract.program_min_agreement:.2f} with lower bound "
             f"{contract.program_min_agreement_ci95_low:.2f}"
             + (" (too few witnesses for that lower bound)" if rate is not None and rate >= contract.program_min_agreement else ""))
    parts = oof.get("parts") or {}
    if len(parts) > 1 or (parts and "" not in parts):
        short += "; per field " + ", ".join(f"{p}: {v['agree']}/{v['n']}" for p, v in parts.items())
    held = [f for f, c in _field_bounds(contract, oof, conf).items() if not c["passed"]]
    if held:
        short += "; held back by " + ", ".join(repr(f) for f in held)
    check = Check(CheckName.OUT_OF_FOLD_AGREEMENT, ok,
                  {"method": oof.get("method"), "n": n, "agree": k, "rate": rate, "ci95_low": low,
                   "bound": "one-sided Clopper-Pearson", "confidence": conf, "compared": compared,
                   "parts": oof.get("parts"), "min_agreement": contract.program_min_agreement,
                   "min_agreement_ci95_low": contract.program_min_agreement_ci95_low}
                  | ({"of": "answered", "witnesses": int(oof["n"]), "fields": oof.get("fields")} if selective else {}),
                  refusal=short)
    return check, oof_txt


def _field_bounds(contract: Contract, oof: Mapping[str, Any], conf: float) -> dict[str, dict[str, Any]]:
    """Per record field (``oof["field_oof"]``: ``{field: {"witnesses", "answered", "agree"}}``, each
    field's own fold part on the out-of-fold witnesses), its agreement on the witnesses it answers
    with the one-sided Clopper–Pearson lower bound at ``conf``, and whether both reach the
    contract's program bars."""
    out = {}
    for f, c in sorted((oof.get("field_oof") or {}).items()):
        n, k = int(c["answered"]), int(c["agree"])
        low = clopper_pearson_lower(k, n, confidence=conf)
        rate = k / n if n else None
        out[f] = {"witnesses": int(c["witnesses"]), "n": n, "agree": k, "rate": rate, "ci95_low": low,
                  "confidence": conf, "passed": (rate is not None and rate >= contract.program_min_agreement
                                                 and low is not None and low >= contract.program_min_agreement_ci95_low)}
    return out


def _field_checks(contract: Contract, oof: Mapping[str, Any], conf: float) -> list[Check]:
    """The program gate's ``field-agreement:<field>`` checks, informational: a record answered at
    tier-1 is wrong when any of its fields is, so the record's out-of-fold bound is the gate's
    guarantee; each field's bound (:func:`_field_bounds`) says which fields hold the record back
    (they are named in the refusal)."""
    return [Check(CheckName.FIELD_AGREEMENT, True, {k: v for k, v in c.items() if k != "passed"} | {"meets_bar": c["passed"]},
                  informational=True, field=f)
            for f, c in _field_bounds(contract, oof, conf).items()]
