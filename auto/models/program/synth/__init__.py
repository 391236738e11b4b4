"""Program synthesis: witnessed ``(input, answer)`` pairs -> a DSL program (:mod:`auto.models.program.ast`).

:func:`synthesize` searches the DSL bottom-up from what the witnesses show, never by blind
enumeration of trees:

- **records** (every answer an object with the same keys): one search per key, joined into a
  :class:`~auto.models.program.ast.Record`;
- **extraction** (text answers that occur in the input, possibly after ASCII lower/upper-casing,
  and ``null`` where nothing should be found): :class:`~auto.models.program.ast.Search` patterns built
  from the answers' character-class shape (literal common prefixes such as ``ORD-``, class runs
  such as ``[A-Z]+-\\d+`` or ``\\d{5}``, a union class) and from the text around them (mined
  literal left/right contexts, ``\\b``, ``$``), optionally wrapped in ``Strip``;
- **numbers**: ``ParseInt`` / ``ParseFloat`` / ``ParseMoney`` of a ``Search`` capture of
  number-shaped text with mined left/right contexts;
- **categorical answers** (a few distinct labels): precedence decision lists
  (:class:`~auto.models.program.ast.If`) learned by sequential covering (CN2: P. Clark and T. Niblett,
  1989; RIPPER: W. Cohen, 1995) over mined predicates: keyword containment on ``Lower(field)``
  (words, bigrams, trigrams), word-bounded regex matches, numeric thresholds over extracted
  numbers (``Compare(ParseMoney(Search(field, p, 1)), op, θ)`` with θ the roundest number in the
  gap between two neighbouring witnessed values), a keyword with a threshold fitted to the
  witnesses it covers, and two keywords (the second possibly negated). The default is fixed
  first — each frequent label in turn, and deopt — and rules are learned only for the other
  labels; the rules of one label become one ``Or`` (an alternation such as
  ``blocked | blacklisted | banned``). A rule needs a minimum support, must pass the
  likelihood-ratio significance test of CN2 and must pay for its description length (see
  Ranking), so keywords that only memorize a few witnesses are not learned.

Ranking. Every candidate is scored on the training witnesses: ``score = agree − c · wrong``
where a deopt is neither (``c`` = ``wrong_cost``, default 3: a silent-wrong answer costs as much
as three deopts, so a majority default survives only where it is right more than 3/4 of the
time), and by the two-part code of minimum description length (J. Rissanen, 1978):
``mdl = score − r · size`` with ``size`` the :func:`description_length` and ``r`` the witnesses
one unit of it is worth (:func:`_mdl_ratio`, about 0.45 for 400 witnesses and 3 labels). The
finalists are the best-scoring candidates and those whose training agreement is within
:data:`SLACK` (3%) of the best — room for a few wrong reference labels — at most
:data:`FINALISTS` of them, best MDL score first. Without held-out witnesses the best MDL score wins;
with them the one-standard-error rule decides (L. Breiman et al., 1984): among the finalists
whose held-out score is within one standard error of the best, the best MDL score wins (so a
larger program must be clearly better on unseen witnesses, not luckier). Remaining ties
go to the training score, the smaller description length and the program's text, so the same
witnesses always give the same program.

Search-time evaluation uses Python's ``re`` with ``re.ASCII`` (the safe subset of
:mod:`auto.models.program.regex` agrees with it; ``$`` is end-of-text only and is translated to
``\\Z``); the chosen program is type-checked (:func:`auto.models.program.types.check`), its patterns are
compiled by :func:`auto.models.program.regex.compile_regex`, and its reported agreements are recomputed
with the reference interpreter (:func:`auto.models.program.interp.run_program`).

Modules: :mod:`.driver` (:func:`synthesize`), :mod:`.results`, :mod:`.pool` (candidates, ranking),
:mod:`.evaluate` (search-time evaluation), :mod:`.patterns` (regex text), :mod:`.mdl`
(description length), :mod:`.extraction` (text and numbers), :mod:`.predicates`,
:mod:`.covering` and :mod:`.lists` (decision lists), :mod:`.proposals`.
"""

from auto.models.program.synth.covering import LRS_MIN, POOL
from auto.models.program.synth.driver import MAX_RULES, MIN_AGREEMENT, WRONG_COST, synthesize
from auto.models.program.synth.lists import MAX_LABELS, PRECEDENCE_DEFAULTS, PRECEDENCE_SUPPORT
from auto.models.program.synth.mdl import description_length
from auto.models.program.synth.patterns import py_pattern
from auto.models.program.synth.pool import FINALISTS, SLACK
from auto.models.program.synth.proposals import PROPOSER_EXAMPLES, PROPOSER_ROUNDS
from auto.models.program.synth.results import FieldResult, SynthResult

# Internal helpers the tests exercise, importable from here as before the package split.
from auto.models.program.synth.covering import _laplace, _lrs  # noqa: F401
from auto.models.program.synth.evaluate import _answer  # noqa: F401
from auto.models.program.synth.extraction import _shape_bodies  # noqa: F401
from auto.models.program.synth.mdl import _mdl_ratio  # noqa: F401
from auto.models.program.synth.pool import _Budget, _Part  # noqa: F401
from auto.models.program.synth.predicates import _roundest  # noqa: F401

__all__ = [
    "FINALISTS", "LRS_MIN", "MAX_LABELS", "MAX_RULES", "MIN_AGREEMENT", "POOL", "PRECEDENCE_DEFAULTS",
    "PRECEDENCE_SUPPORT", "PROPOSER_EXAMPLES", "PROPOSER_ROUNDS", "SLACK", "WRONG_COST",
    "FieldResult", "SynthResult", "description_length", "py_pattern", "synthesize",
]
