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
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from scipy.stats import binomtest

from auto.canonical import canonical_json, digest
from auto.errors import ContractError


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
            (Learn-then-Test; :mod:`auto.guards.risk`).
        delta: in (0, 1): the allowed probability that the calibration draw certifies a
            confidence threshold whose selective risk exceeds ``epsilon``.
        min_witnesses: fewer distinct witnessed inputs than this → refuse without training.
        program_min_witnesses: the program rung needs this many distinct witnessed inputs (it
            cross-validates instead of holding out a split, so a few dozen suffice).
        program_min_agreement: out-of-fold agreement a DSL program needs (deopts count as
            misses; measured on the unguarded answers, before the program's guard deopts anything).
        program_min_agreement_ci95_low: the Clopper–Pearson lower bound of that agreement a program
            needs (95%, Bonferroni-corrected when the procedure was chosen among several).
        seed: seed of the deterministic split.
        overlay_min_lead: the table overlay's admission rule (``k``, see
            :mod:`auto_runtime.overlay`): a witnessed input is answered at tier-1 before the next
            table is compiled once its modal witnessed answer leads every other answer for it by
            ``k`` witnesses. 1 (the default) answers from the first repeat, as an exact-match dict
            answers every repeat with its first answer; the shadow audit re-asks overlay answers
            at the table-hit rate and the ratchet's risk monitor disables the overlay when those
            audits reject ``epsilon``.
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
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ContractError(f"contract file not found: {p}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ContractError(f"contract {p} is not valid TOML: {e}") from None
        body = data.get("contract", data)
        if task is not None:
            body = {"task": task, **body}
            if body["task"] != task:
                raise ContractError(f"contract {p} is for task {body['task']!r}, not {task!r}")
        try:
            return cls(**body)
        except ContractError as e:
            raise ContractError(f"contract {p}: {e}") from None


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Exact (Clopper–Pearson) two-sided interval for a binomial proportion k/n.

    Returns:
        ``(low, high)``; ``(None, None)`` when ``n == 0``.
    """
    if n == 0:
        return None, None
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


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
    checks: list[dict[str, Any]] = []

    def outputs(pairs: Sequence[tuple[dict, Any]]) -> list[dict]:
        return run_batch([p[0] for p in pairs]) if pairs else []

    w_out = outputs(witnessed)
    h_out = outputs(heldout)

    def answers(outs: list[dict]) -> list[Any]:
        return [o.get("answer") if "error" not in o else {"__error__": o["error"]} for o in outs]

    errors = sum(1 for o in w_out + h_out if "error" in o)
    checks.append({"name": "runs-without-error", "errors": errors, "n": len(w_out) + len(h_out), "passed": errors == 0})

    bad_labels = sum(1 for a in answers(w_out) + answers(h_out) if canonical_json(a) not in allowed)
    checks.append({"name": "output-is-witnessed-label", "violations": bad_labels, "passed": bad_labels == 0})

    ref_w = [reference_predict(p[0]) for p in witnessed]
    ref_h = [reference_predict(p[0]) for p in heldout]
    mism = sum(1 for a, r in zip(answers(w_out) + answers(h_out), ref_w + ref_h) if canonical_json(a) != canonical_json(r))
    checks.append({"name": "wasm-matches-python-reference", "mismatches": mism, "passed": mism == 0})

    wa = agreement(answers(w_out), [p[1] for p in witnessed])
    checks.append({"name": "witnessed-agreement", **wa, "passed": wa["n"] > 0, "informational": True})

    ha = agreement(answers(h_out), [p[1] for p in heldout])
    ok_point = ha["rate"] is not None and ha["rate"] >= contract.min_agreement
    ok_low = ha["ci95_low"] is not None and ha["ci95_low"] >= contract.min_agreement_ci95_low
    checks.append(
        {
            "name": "heldout-agreement",
            **ha,
            "min_agreement": contract.min_agreement,
            "min_agreement_ci95_low": contract.min_agreement_ci95_low,
            "passed": ok_point and ok_low,
        }
    )

    failed = [c for c in checks if not c["passed"]]
    if not failed:
        reason = (
            f"held-out agreement {ha['agree']}/{ha['n']} = {ha['rate']:.3f} "
            f"(95% CP lower bound {ha['ci95_low']:.3f}) meets {contract.min_agreement:.2f} / {contract.min_agreement_ci95_low:.2f}"
        )
    else:
        c = failed[0]
        if c["name"] == "heldout-agreement":
            rate = "n/a" if c["rate"] is None else f"{c['rate']:.3f}"
            low = "n/a" if c["ci95_low"] is None else f"{c['ci95_low']:.3f}"
            reason = (
                f"held-out agreement {c['agree']}/{c['n']} = {rate} (95% CP lower bound {low}) is below "
                f"the contract's {contract.min_agreement:.2f} (lower bound {contract.min_agreement_ci95_low:.2f})"
            )
        elif c["name"] == "output-is-witnessed-label":
            reason = f"{c['violations']} answers are not witnessed labels"
        elif c["name"] == "wasm-matches-python-reference":
            reason = f"WebAssembly and the Python reference disagree on {c['mismatches']} inputs"
        elif c["name"] == "runs-without-error":
            reason = f"the candidate returned errors on {c['errors']} of {c['n']} eval inputs"
        else:
            reason = f"check {c['name']} failed"
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
    checks: list[dict[str, Any]] = []
    errors = sum(1 for o in outs if "error" in o)
    checks.append({"name": "runs-without-error", "errors": errors, "n": len(outs), "passed": errors == 0})
    bad = sum(1 for a in answers if canonical_json(a) not in allowed)
    checks.append({"name": "output-is-witnessed-label", "violations": bad, "passed": bad == 0})
    mism = sum(1 for a, p in zip(answers, pairs) if canonical_json(a) != canonical_json(reference_predict(p[0])))
    checks.append({"name": "wasm-matches-python-reference", "mismatches": mism, "passed": mism == 0})
    wa = agreement(answers[:len(witnessed)], [p[1] for p in witnessed])
    checks.append({"name": "witnessed-agreement", **wa, "passed": wa["n"] > 0, "informational": True})
    n, k = int(estimate["n"]), int(estimate["agree"])
    low, high = clopper_pearson(k, n)
    est = {"name": "overall-agreement", "method": estimate["method"], "n": n, "agree": k,
           "rate": k / n if n else None, "ci95_low": low, "ci95_high": high}
    if contract.gate == "agreement":
        est.update(min_agreement=contract.min_agreement, min_agreement_ci95_low=contract.min_agreement_ci95_low,
                   passed=est["rate"] is not None and est["rate"] >= contract.min_agreement
                   and low is not None and low >= contract.min_agreement_ci95_low)
    else:
        est.update(passed=True, informational=True)
    checks.append(est)
    risk = next((c for c in guard.get("components") or [] if c.get("method") == "selective-risk"), None)
    cov = (risk or {}).get("calibration_coverage")
    certified = guard.get("fallback_reason") is None and risk is not None and risk.get("threshold") is not None \
        and cov is not None and cov > 0
    checks.append({"name": "guard-certified", "fallback_reason": guard.get("fallback_reason"),
                   "threshold": (risk or {}).get("threshold"), "coverage": cov,
                   "selective_risk": (risk or {}).get("calibration_selective_risk"),
                   "epsilon": contract.epsilon, "delta": contract.delta, "passed": certified,
                   "smallest_certifiable_epsilon": (risk or {}).get("smallest_certifiable_epsilon"),
                   "calibration_n": (risk or {}).get("n")})
    failed = [c for c in checks if not c["passed"]]
    rate = "n/a" if est["rate"] is None else f"{est['rate']:.3f}"
    lows = "n/a" if low is None else f"{low:.3f}"
    overall = f"{est['method']} agreement {k}/{n} = {rate} (95% CP lower bound {lows})"
    if not failed:
        reason = (f"selective risk certified: tier-1 when {risk['confidence_field']} >= {risk['threshold']:.6g}, "
                  f"{cov:.3f} of the {risk['n']} calibration inputs answered at risk {risk['calibration_selective_risk']:.3f} "
                  f"(epsilon {contract.epsilon:g}, delta {contract.delta:g}); overall {overall}")
    else:
        c = failed[0]
        if c["name"] == "guard-certified":
            why = guard.get("fallback_reason") or (risk or {}).get("reason") or "no calibration input proceeds"
            reason = f"the guard would deopt every input outside the table: {why}; overall {overall}"
        elif c["name"] == "overall-agreement":
            reason = (f"{overall} is below the contract's {contract.min_agreement:.2f} (lower bound "
                      f"{contract.min_agreement_ci95_low:.2f})")
        elif c["name"] == "output-is-witnessed-label":
            reason = f"{c['violations']} answers are not witnessed labels"
        elif c["name"] == "wasm-matches-python-reference":
            reason = f"WebAssembly and the Python reference disagree on {c['mismatches']} inputs"
        else:
            reason = f"the candidate returned errors on {c['errors']} of {c['n']} eval inputs"
    return eval_record(contract, generation, candidate, checks, reason)


def eval_record(contract: Contract, generation: int, candidate: Any, checks: list[dict[str, Any]], reason: str) -> dict[str, Any]:
    """The eval-run record of a gate run (its id is the digest, assigned when stored)."""
    return {
        "task": contract.task,
        "generation": generation,
        "contract": {"id": contract.id, **contract.model_dump()},
        "candidate": candidate,
        "checks": checks,
        "verdict": "refuse" if any(not c["passed"] for c in checks) else "pass",
        "reason": reason,
    }


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
    checks: list[dict[str, Any]] = []
    w_out = run_batch([p[0] for p in witnessed]) if witnessed else []
    p_out = run_batch(list(probes)) if probes else []
    errors = sum(1 for o in w_out + p_out if "error" in o)
    checks.append({"name": "runs-without-error", "errors": errors, "n": len(w_out) + len(p_out), "passed": errors == 0})
    got = [canonical_json(o.get("answer")) for o in w_out + p_out]  # each answer encoded once
    wa = agreement_of_texts(got[:len(w_out)], [p[1] for p in witnessed])
    checks.append({"name": "witnessed-agreement", **wa, "passed": wa["n"] > 0 and wa["agree"] == wa["n"]})
    ref = [reference_text(p[0]) for p in witnessed] + [reference_text(p) for p in probes]
    mism = sum(1 for a, r in zip(got, ref) if a != r)
    checks.append({"name": "wasm-matches-python-reference", "mismatches": mism, "passed": mism == 0})
    hits = sum(1 for o in p_out if "error" not in o and o.get("nonconformity") != 1.0)
    checks.append({"name": "unwitnessed-probes-miss", "n": len(p_out), "hits": hits, "passed": hits == 0})
    failed = [c for c in checks if not c["passed"]]
    if failed:
        c = failed[0]
        reason = {"runs-without-error": f"the table returned errors on {c.get('errors')} inputs",
                  "witnessed-agreement": f"the table repeats {c.get('agree')}/{c.get('n')} witnessed outputs (must be all)",
                  "wasm-matches-python-reference": f"WebAssembly and the Python reference disagree on {c.get('mismatches')} inputs",
                  "unwitnessed-probes-miss": f"{c.get('hits')} of {c.get('n')} never-witnessed probes hit the table"}[c["name"]]
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
      (:mod:`auto.compile.program_fit`; a deopt is a miss) must reach
      ``contract.program_min_agreement``, with a Clopper–Pearson lower bound of at least
      ``contract.program_min_agreement_ci95_low`` at confidence ``1 - 0.05 / compared`` (the
      Bonferroni correction for the ``compared`` procedures the choice was made among; 95% with
      one);
    - ``guard-answers``: the program's guard (:mod:`auto.guards.program`) lets some out-of-fold
      witness through (otherwise every call would deopt);
    - ``guard-risk``: with enough calibration points to certify ``contract.epsilon`` at
      ``contract.delta``, the guard's Learn-then-Test threshold must exist; with fewer, nothing is
      required (the out-of-fold bound is the guarantee, and the guard entry says so).

    Args:
        oof: ``{"n", "agree", "compared", "method", "parts"}`` of the out-of-fold predictions.
        guard: the calibrated ``program-evidence`` entry.
        Others: as for :func:`run_gate`.

    Returns:
        The eval-run record (same shape as :func:`run_gate`).
    """
    checks: list[dict[str, Any]] = []
    w_out = run_batch([p[0] for p in witnessed]) if witnessed else []
    errors = sum(1 for o in w_out if "error" in o)
    checks.append({"name": "runs-without-error", "errors": errors, "n": len(w_out), "passed": errors == 0})
    keys = ("answer", "deopt", "evidence")
    mism = sum(1 for o, p in zip(w_out, witnessed)
               if "error" in o or canonical_json({k: o.get(k) for k in keys if k in o})
               != canonical_json(reference_run(p[0])))
    checks.append({"name": "wasm-matches-python-reference", "mismatches": mism, "passed": mism == 0})
    answered = [(o, p) for o, p in zip(w_out, witnessed) if "error" not in o and o.get("deopt") is False]
    wa = agreement([o.get("answer") if "error" not in o and o.get("deopt") is False else {"__deopt__": True}
                    for o in w_out], [p[1] for p in witnessed])
    checks.append({"name": "witnessed-agreement", **wa, "answered": len(answered), "passed": wa["n"] > 0,
                   "informational": True})
    n, k = int(oof["n"]), int(oof["agree"])
    compared = max(1, int(oof.get("compared", 1)))
    conf = 1.0 - 0.05 / compared
    low, high = clopper_pearson(k, n, confidence=conf)
    rate = k / n if n else None
    ok = (rate is not None and rate >= contract.program_min_agreement
          and low is not None and low >= contract.program_min_agreement_ci95_low)
    checks.append({"name": "out-of-fold-agreement", "method": oof.get("method"), "n": n, "agree": k, "rate": rate,
                   "ci95_low": low, "ci95_high": high, "confidence": conf, "compared": compared,
                   "parts": oof.get("parts"), "min_agreement": contract.program_min_agreement,
                   "min_agreement_ci95_low": contract.program_min_agreement_ci95_low, "passed": ok})
    cal = guard.get("calibration") or {}
    t1 = int(cal.get("tier1") or 0)
    lo1, hi1 = clopper_pearson(int(cal.get("tier1_wrong") or 0), t1)
    checks.append({"name": "guard-answers", "tier1": t1, "tier1_wrong": cal.get("tier1_wrong"), "n": cal.get("n"),
                   "coverage": t1 / cal["n"] if cal.get("n") else None, "selective_risk": (cal.get("tier1_wrong") or 0) / t1 if t1 else None,
                   "selective_risk_ci95_high": hi1, "passed": t1 > 0})
    risk = guard.get("risk") or {}
    certified = risk.get("threshold") is not None
    checks.append({"name": "guard-risk", "threshold": risk.get("threshold"), "epsilon": contract.epsilon,
                   "delta": contract.delta, "few_shot": bool(guard.get("few_shot")), "reason": risk.get("reason"),
                   "passed": certified or bool(guard.get("few_shot"))})
    failed = [c for c in checks if not c["passed"]]
    lows = "n/a" if low is None else f"{low:.3f}"
    rates = "n/a" if rate is None else f"{rate:.3f}"
    bound = f"{conf:.1%}" if compared == 1 else f"{conf:.2%}, Bonferroni over {compared} procedures compared"
    oof_txt = f"out-of-fold agreement {k}/{n} = {rates} ({bound} CP lower bound {lows}; deopts count as misses)"
    if not failed:
        reason = (f"program {oof_txt} meets {contract.program_min_agreement:.2f} / "
                  f"{contract.program_min_agreement_ci95_low:.2f}; its guard answers {t1} of {cal.get('n')} out-of-fold "
                  f"witnesses, {cal.get('tier1_wrong')} wrong"
                  + (f" (risk threshold {risk['threshold']:.4g} certified at epsilon {contract.epsilon:g})" if certified
                     else " (too few points for a selective-risk certificate)"))
    else:
        c = failed[0]
        if c["name"] == "out-of-fold-agreement":
            reason = (f"program {oof_txt} does not meet the contract's {contract.program_min_agreement:.2f} with lower bound "
                      f"{contract.program_min_agreement_ci95_low:.2f}"
                      + (" (too few witnesses for that lower bound)" if rate is not None
                         and rate >= contract.program_min_agreement else ""))
            parts = oof.get("parts") or {}
            if len(parts) > 1 or (parts and "" not in parts):
                reason += "; per field " + ", ".join(f"{p}: {v['agree']}/{v['n']}" for p, v in parts.items())
        elif c["name"] == "wasm-matches-python-reference":
            reason = f"WebAssembly and the Python interpreter disagree on {c['mismatches']} inputs"
        elif c["name"] == "guard-answers":
            reason = f"the program's guard would deopt every input ({oof_txt})"
        elif c["name"] == "guard-risk":
            reason = f"the program's guard certifies no selective risk <= {contract.epsilon:g}: {risk.get('reason')}"
        else:
            reason = f"the program returned errors on {c['errors']} of {c['n']} eval inputs"
    return eval_record(contract, generation, candidate, checks, reason)
