"""The guard registry: manifest ``guard.method`` -> factory, and :func:`build_guard`.

``build_guard`` never raises: an entry that cannot be used (not an object, unknown method, missing
or invalid fields, empty calibration) becomes an :class:`~auto_runtime.guard.base.AlwaysDeopt`
guard whose ``reason`` says why (logged as a warning), so a bad guard costs answers from the
reference, never an exception in the request path. Method ``none``, a null ``selective-risk``
threshold and a stack ``fallback_reason`` are *declared* always-deopt guards (not logged).

Stack entries: a component that is not an object, has an unknown method (or ``stack``: no
nesting) or is unusable makes the whole stack always deopt naming the component; a component
that declares always-deopt makes the stack always deopt with that component's reason.
"""

from __future__ import annotations

from typing import Any, Callable

from auto_runtime.guard.base import AlwaysDeopt, Guard, GuardConfigError, finite_float, log
from auto_runtime.guard.exact import ExactMatch
from auto_runtime.guard.novelty import ConformalNovelty
from auto_runtime.guard.program import ProgramEvidence, ProgramGuard
from auto_runtime.guard.region import RegionNovelty, tokens
from auto_runtime.guard.risk import SelectiveRisk
from auto_runtime.guard.stack import GuardStack


def finite_number(x: Any) -> bool:
    """A finite real number (``bool`` excluded; an int too large for a float is not finite)."""
    return finite_float(x) is not None


GuardFactory = Callable[[dict], Guard]
GUARD_METHODS: dict[str, GuardFactory] = {}
"""Registry: manifest ``guard.method`` -> factory(entry) -> :class:`Guard`."""


def register_guard(method: str) -> Callable[[GuardFactory], GuardFactory]:
    """Decorator registering a guard factory under ``method``.

    The factory receives the manifest's ``guard`` object and returns a :class:`Guard`; it raises
    :class:`GuardConfigError` (or any ``ValueError`` / ``TypeError`` / ``KeyError``) when the
    entry is unusable, which :func:`build_guard` turns into :class:`AlwaysDeopt`.
    """

    def deco(factory: GuardFactory) -> GuardFactory:
        GUARD_METHODS[method] = factory
        return factory
    return deco


def _alpha(entry: dict) -> float:
    """The entry's ``alpha``, a number in (0, 1) (raises :class:`GuardConfigError`)."""
    alpha = entry.get("alpha")
    if not finite_number(alpha) or not 0.0 < alpha < 1.0:
        raise GuardConfigError(f"alpha must be a number in (0, 1), got {alpha!r}")
    return float(alpha)


@register_guard("conformal-novelty")
def _conformal_novelty(entry: dict) -> Guard:
    alpha = _alpha(entry)
    cal = entry.get("calibration_scores")
    if not isinstance(cal, list) or not cal:
        raise GuardConfigError("calibration_scores must be a non-empty list")
    for i, c in enumerate(cal):
        if not finite_number(c):
            raise GuardConfigError(f"calibration_scores[{i}] is not a finite number: {c!r}")
    n = entry.get("n", len(cal))
    if isinstance(n, bool) or not isinstance(n, int) or n != len(cal):
        raise GuardConfigError(f"n={n!r} but there are {len(cal)} calibration scores")
    return ConformalNovelty(alpha, cal, _by_label(entry.get("calibration_scores_by_label")))


def _by_label(groups: Any) -> dict[str, list[float]] | None:
    """``calibration_scores_by_label`` (``[{"label", "calibration_scores"}, ...]``, optional) as
    ``{canonical label text: scores}`` (raises :class:`GuardConfigError` when malformed)."""
    from auto_runtime.jsonio import canonical_text

    if groups is None:
        return None
    if not isinstance(groups, list):
        raise GuardConfigError("calibration_scores_by_label must be a list")
    out: dict[str, list[float]] = {}
    for i, g in enumerate(groups):
        scores = g.get("calibration_scores") if isinstance(g, dict) else None
        if not isinstance(scores, list) or not scores or not all(finite_number(c) for c in scores) or "label" not in g:
            raise GuardConfigError(f"calibration_scores_by_label[{i}] needs a label and a non-empty list of finite scores")
        try:
            key = canonical_text(g["label"])
        except (TypeError, ValueError, RecursionError) as e:
            raise GuardConfigError(f"calibration_scores_by_label[{i}]: the label is not JSON: {e}") from None
        if key in out:
            raise GuardConfigError(f"calibration_scores_by_label names the label {key} twice")
        out[key] = scores
    return out


@register_guard("exact-match")
def _exact_match(entry: dict) -> Guard:
    return ExactMatch()


def _unit_interval(entry: dict, key: str) -> float | None:
    v = entry.get(key)
    if v is None:
        return None
    if not finite_number(v) or not 0.0 < v < 1.0:
        raise GuardConfigError(f"{key} must be a number in (0, 1) or null, got {v!r}")
    return float(v)


@register_guard("selective-risk")
def _selective_risk(entry: dict) -> Guard:
    field = entry.get("confidence_field", "margin")
    if not isinstance(field, str) or not field:
        raise GuardConfigError(f"confidence_field must be a non-empty string, got {field!r}")
    if "threshold" not in entry:
        raise GuardConfigError("selective-risk entry has no 'threshold' (null means: always deopt)")
    threshold = entry["threshold"]
    if threshold is None:
        why = entry.get("reason")
        if not isinstance(why, str) or not why.strip():
            why = "no confidence threshold controls the selective risk (threshold null)"
        return AlwaysDeopt(f"selective-risk: {why}", declared=True)
    if not finite_number(threshold):
        raise GuardConfigError(f"threshold must be a finite number or null, got {threshold!r}")
    epsilon = _unit_interval(entry, "epsilon")
    delta = _unit_interval(entry, "delta")
    n = entry.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise GuardConfigError(f"n must be a non-negative integer or null, got {n!r}")
    return SelectiveRisk(float(threshold), confidence_field=field, epsilon=epsilon, delta=delta,
                         n=n)


@register_guard("program")
def _program(entry: dict) -> Guard:
    return ProgramGuard()


def _int(entry: dict, key: str, low: int = 0) -> int:
    v = entry.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise GuardConfigError(f"{key} must be an integer >= {low}, got {v!r}")
    return v


@register_guard("program-evidence")
def _program_evidence(entry: dict) -> Guard:
    parts = entry.get("parts")
    if not isinstance(parts, list) or not parts:
        raise GuardConfigError("program-evidence parts must be a non-empty list")
    built = []
    for i, p in enumerate(parts):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise GuardConfigError(f"part {i} must be an object with a string name")
        alpha = p.get("alpha")
        if not finite_number(alpha) or not 0.0 < alpha < 1.0:
            raise GuardConfigError(f"part {i}: alpha must be a number in (0, 1), got {alpha!r}")
        n_w = _int(p, "witnesses", 1)
        cal = p.get("calibration_scores")
        if not isinstance(cal, list) or not all(finite_number(c) for c in cal):
            raise GuardConfigError(f"part {i}: calibration_scores must be a list of finite numbers")
        events = {}
        for j, e in enumerate(p.get("events") or []):
            if not isinstance(e, dict):
                raise GuardConfigError(f"part {i} event {j} must be an object")
            prec = e.get("precision")
            if not finite_number(prec) or not 0.0 <= prec <= 1.0:
                raise GuardConfigError(f"part {i} event {j}: precision must be in [0, 1], got {prec!r}")
            events[(_int(e, "rule"), _int(e, "kind"))] = (_int(e, "support"), float(prec))
        labels = p.get("rules") if isinstance(p.get("rules"), list) else []
        built.append((p["name"], float(alpha), n_w, cal, events, labels))
    risk = entry.get("risk") or {}
    if not isinstance(risk, dict):
        raise GuardConfigError("risk must be an object")
    thr = risk.get("threshold")
    if thr is not None and not finite_number(thr):
        raise GuardConfigError(f"risk threshold must be a finite number or null, got {thr!r}")
    dk = entry.get("deopt_kinds") or []
    if not isinstance(dk, list) or not all(isinstance(k, int) and not isinstance(k, bool) for k in dk):
        raise GuardConfigError(f"deopt_kinds must be a list of integers, got {dk!r}")
    names = entry.get("kinds")
    names = names if isinstance(names, list) and all(isinstance(x, str) for x in names) else None
    statement = entry.get("statement")
    return ProgramEvidence(built, None if thr is None else float(thr), deopt_kinds=dk, kinds=names,
                           epsilon=_unit_interval(risk, "epsilon"),
                           delta=_unit_interval(risk, "delta"), statement=statement if isinstance(statement, str) else None)


@register_guard("region-novelty")
def _region_novelty(entry: dict) -> Guard:
    field = entry.get("field")
    if not isinstance(field, str) or not field:
        raise GuardConfigError(f"field must be a non-empty string, got {field!r}")
    alpha = _alpha(entry)
    paths = entry.get("paths")
    if not isinstance(paths, list) or not paths:
        raise GuardConfigError("paths must be a non-empty list (per path, its training inputs' texts)")
    built = []
    for i, texts in enumerate(paths):
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise GuardConfigError(f"paths[{i}] must be a list of texts")
        built.append([tokens(t) for t in texts])
    cal = entry.get("calibration_scores")
    if not isinstance(cal, list) or not cal or not all(finite_number(c) for c in cal):
        raise GuardConfigError("calibration_scores must be a non-empty list of finite numbers")
    statement = entry.get("statement")
    return RegionNovelty(field, float(alpha), built, cal, statement if isinstance(statement, str) else None)


@register_guard("stack")
def _stack(entry: dict) -> Guard:
    fallback = entry.get("fallback_reason")
    if fallback is not None:
        if not isinstance(fallback, str) or not fallback.strip():
            raise GuardConfigError(
                f"fallback_reason must be a non-empty string or null, got {fallback!r}")
        return AlwaysDeopt(fallback, declared=True)
    comps = entry.get("components")
    if not isinstance(comps, list) or not comps:
        raise GuardConfigError("stack components must be a non-empty list")
    built: list[Guard] = []
    for i, ce in enumerate(comps):
        if not isinstance(ce, dict):
            raise GuardConfigError(
                f"stack component {i} must be an object, got {type(ce).__name__}")
        method = ce.get("method")
        factory = GUARD_METHODS.get(method) if isinstance(method, str) else None
        if factory is None or method == "stack":
            raise GuardConfigError(f"stack component {i}: unknown component method {method!r}")
        try:
            g = factory(ce)
        except (GuardConfigError, ValueError, TypeError, KeyError) as e:
            raise GuardConfigError(f"stack component {i} ({method}): {e}") from None
        if not isinstance(g, Guard):
            raise GuardConfigError(f"stack component {i} ({method}): factory returned "
                                   f"{type(g).__name__}")
        if isinstance(g, AlwaysDeopt):
            if g.declared:
                return AlwaysDeopt(g.why, declared=True)
            raise GuardConfigError(f"stack component {i} ({method}): {g.why}")
        built.append(g)
    statement = entry.get("statement")
    return GuardStack(built, statement if isinstance(statement, str) else None)


@register_guard("none")
def _no_guard(entry: dict) -> Guard:
    # A manifest that declares no guard (e.g. the compiler's provisional candidate) never answers
    # at tier 1 through TieredTask; that is a declared choice, not a fault, so it is not logged.
    return AlwaysDeopt("the manifest declares no guard (method 'none')", declared=True)


def build_guard(entry: Any) -> Guard:
    """Build the guard a manifest's ``guard`` entry describes. Never raises.

    Returns:
        The configured guard, or :class:`AlwaysDeopt` with the reason the entry is unusable.
    """
    try:
        if not isinstance(entry, dict):
            raise GuardConfigError(f"guard entry must be an object, got {type(entry).__name__}")
        method = entry.get("method")
        factory = GUARD_METHODS.get(method) if isinstance(method, str) else None
        if factory is None:
            raise GuardConfigError(f"unknown guard method {method!r}")
        guard = factory(entry)
        if not isinstance(guard, Guard):
            raise GuardConfigError(f"guard factory for {method!r} returned {type(guard).__name__}")
        return guard
    except Exception as e:  # noqa: BLE001 - by contract a bad guard never raises
        why = str(e) if isinstance(e, GuardConfigError) else f"{type(e).__name__}: {e}"
        log.warning("guard unusable, every call will deopt: %s", why)
        return AlwaysDeopt(why)
