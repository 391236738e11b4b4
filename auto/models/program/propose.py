"""Counterexample-guided program proposals for :func:`auto.models.program.synth.synthesize`.

When the enumerative search leaves training witnesses unexplained, the synthesizer sends those
counterexamples and its current best program to a :class:`Proposer`; every proposal is
decoded (:func:`auto.models.program.serial.from_json`), type-checked, evaluated on all training
witnesses and kept only if it scores better than the current best (the loop of
counterexample-guided inductive synthesis: A. Solar-Lezama et al., "Combinatorial Sketching for
Finite Programs", ASPLOS 2006).

- :class:`ScriptedProposer` replays fixed answers (tests, offline experiments).
- :class:`LLMProposer` asks an OpenAI-compatible model through the spend-capped
  :class:`auto.frontier.FrontierClient`. With the default cap of 0 µ$ every call is refused
  with :class:`~auto.errors.SpendCapExceeded`; the proposer re-raises it, and ``synthesize``
  stops asking, continues without proposals and records the refusal in ``SynthResult.notes``.
"""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from typing import Any, Protocol, runtime_checkable

from auto.canonical import canonical_json
from auto.errors import ReferenceModelError, SpendCapExceeded, ArgumentError
from auto.models.program import ast as A
from auto.models.program.serial import to_json


@runtime_checkable
class Proposer(Protocol):
    """Something that proposes DSL programs from counterexamples.

    ``propose(field_name, examples_failing, current_program_json)``:

    Args:
        field_name: the input's string field every program must read (``Field(field_name)``).
        examples_failing: up to a dozen ``(input object, expected answer)`` pairs the current
            best program gets wrong (for a record answer: the expected value of the key being
            synthesized).
        current_program_json: the current best program as :func:`auto.models.program.serial.to_json`
            writes it, or None when there is none.

    Returns:
        Zero or more program JSON objects (the ``to_json`` form). Invalid ones are skipped by
        the caller. Raising an :class:`~auto.errors.AutoError` (e.g.
        :class:`~auto.errors.SpendCapExceeded`) tells the caller to stop asking.
    """

    def propose(self, field_name: str, examples_failing: list[tuple[dict, Any]],
                current_program_json: dict | None) -> list[dict]: ...


class ScriptedProposer:
    """Replays a fixed list of answers, one per call (an empty list once they are used up).

    Args:
        answers: one entry per expected call: a list of program JSON objects, or a single
            program JSON object (treated as a one-element list).

    Attributes:
        calls: every call's arguments, ``(field_name, examples_failing, current_program_json)``.

    Raises:
        ArgumentError: ``answers`` is not a list of program JSON objects / lists of them.
    """

    def __init__(self, answers: list[Any]):
        if not isinstance(answers, list):
            raise ArgumentError("ScriptedProposer needs a list of answers")
        self._answers: list[list[dict]] = []
        for k, a in enumerate(answers):
            items = a if isinstance(a, list) else [a]
            if not all(isinstance(x, dict) for x in items):
                raise ArgumentError(f"ScriptedProposer answer {k} is not a program JSON object or a list of them")
            self._answers.append(list(items))
        self.calls: list[tuple[str, list[tuple[dict, Any]], dict | None]] = []

    def propose(self, field_name: str, examples_failing: list[tuple[dict, Any]],
                current_program_json: dict | None) -> list[dict]:
        self.calls.append((field_name, list(examples_failing), current_program_json))
        if len(self.calls) <= len(self._answers):
            return self._answers[len(self.calls) - 1]
        return []


def _grammar() -> str:
    """One line per node kind of the DSL with its fields, read from :mod:`auto.models.program.ast`."""
    lines = []
    for t in A.NODE_TYPES:
        if is_dataclass(t):
            names = ", ".join(f.name for f in fields(t))
            doc = (t.__doc__ or "").strip().split("\n")[0]
            lines.append(f"- {t.__name__}({names}): {doc}")
    return "\n".join(lines)


def _example_json() -> str:
    ex = A.If(((A.Compare("ge", A.ParseMoney(A.Search(A.Field("text"), "\\$(\\d[\\d,]*(\\.\\d+)?)", 1)), 500),
                A.Const("review")),
               (A.Contains(A.Lower(A.Field("text")), "refund"), A.Const("billing"))),
              A.Deopt())
    return json.dumps(to_json(ex), sort_keys=True)


def extract_json_values(text: str) -> list[Any]:
    """Every top-level JSON object or array embedded in ``text`` (e.g. inside a Markdown code
    fence), in order; text between them is ignored."""
    dec = json.JSONDecoder()
    out, i = [], 0
    while i < len(text):
        j = min([k for k in (text.find("{", i), text.find("[", i)) if k >= 0], default=-1)
        if j < 0:
            break
        try:
            val, end = dec.raw_decode(text, j)
        except ValueError:
            i = j + 1
            continue
        out.append(val)
        i = end
    return out


class LLMProposer:
    """Proposals from an OpenAI-compatible model through the spend-capped client.

    Args:
        client: the :class:`auto.frontier.FrontierClient` (its cap and ledger apply to every call).
        model: the model name; must be the client's model (the ledger prices that one).
        max_tokens: completion budget per call (it also bounds the call's cost before it is made).
        max_examples: counterexamples shown per call.

    Attributes:
        refusals: messages of refused calls (spend cap).

    Raises:
        ArgumentError: ``model`` differs from ``client.model``.
    """

    def __init__(self, client: Any, model: str, *, max_tokens: int = 800, max_examples: int = 8):
        if getattr(client, "model", model) != model:
            raise ArgumentError(f"LLMProposer model {model!r} differs from the client's model {client.model!r}")
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.max_examples = max_examples
        self.refusals: list[str] = []

    def messages(self, field_name: str, examples_failing: list[tuple[dict, Any]],
                 current_program_json: dict | None) -> list[dict[str, str]]:
        """The chat messages of one proposal request (system: the DSL; user: the counterexamples)."""
        system = (
            "You write programs in a small typed DSL. A program is a JSON object in this form:\n"
            f"{_example_json()}\n"
            "Node kinds (field names as in the JSON, 'op' in snake_case):\n"
            f"{_grammar()}\n"
            "Regex patterns use a safe subset: literals, classes, \\d \\w \\s \\b, groups, | and greedy "
            "quantifiers; no lookaround or backreferences; $ is end of text.\n"
            "Answer with a JSON array of at most 3 complete programs and nothing else."
        )
        shown = [{"input": inp.get(field_name), "expected": ans} for inp, ans in examples_failing[: self.max_examples]]
        user = (
            f"Every program reads the input field {field_name!r} (op 'field', name {field_name!r}).\n"
            f"Current best program: {canonical_json(current_program_json) if current_program_json else 'none'}\n"
            f"It is wrong on these examples (input text and expected answer):\n{json.dumps(shown, ensure_ascii=False, indent=1)}\n"
            "Propose programs that are right on these and stay right on the rest."
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def propose(self, field_name: str, examples_failing: list[tuple[dict, Any]],
                current_program_json: dict | None) -> list[dict]:
        """Ask the model once; returns the program JSON objects found in its reply.

        Raises:
            SpendCapExceeded: the client refused the call (default cap 0); recorded in
                :attr:`refusals` and re-raised so the synthesizer stops asking.
            ReferenceModelError: the model call itself failed.
        """
        msgs = self.messages(field_name, examples_failing, current_program_json)
        try:
            text = self.client.chat(msgs, purpose="synthesis-proposal", max_tokens=self.max_tokens, temperature=0)
        except SpendCapExceeded as e:
            self.refusals.append(str(e))
            raise
        except Exception as e:  # the model endpoint failed: report it as the reference-model error
            raise ReferenceModelError(f"proposal call failed: {type(e).__name__}: {e}") from e
        out: list[dict] = []
        for val in extract_json_values(text):
            items = val if isinstance(val, list) else [val]
            for it in items:
                if isinstance(it, dict) and ("program" in it or "op" in it):
                    out.append(it if "program" in it else {"format": "auto.program/1", "program": it})
        return out
