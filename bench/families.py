"""The registry of AUTO-BENCH families: everything the runner, the reports and the simulator need.

Each :class:`BenchFamily` bundles one family: the task's input field, the recorded agent, the
unrecorded metered call, the seeded corpus, the oracle, the simulated reference model's
responder with the system-prompt marker that selects it, and the name of the published anchor
inputs (a file name only; the caller supplies the directory)::

    fam = get_family("routing")
    corpus = fam.default_corpus(0)                 # {"train": [...], "heldout": [...], "ood": [...]}
    fam.run_agent(fam.text_of(corpus["train"][0])) # recorded while auto.recording(store) is active
    label, resp, headers = fam.ask(text)           # metering: usage and x-auto-sim-latency-ms
    find_family(messages)                          # the family whose marker is in a system message

Registered: ``triage`` (F1, field ``ticket``), ``extraction`` (F3, field ``email``), ``inbox``
(F2, field ``ticket``: several model calls and a tool per run), ``assistant`` (field ``request``:
a function-calling loop), ``routing`` (F4, field ``request``), ``intents`` (field ``utterance``: real HWU64 utterances,
:mod:`bench.intents`). The triage corpus has the slices
``train``/``stream_pool``/``shift`` and its items carry the design ``category``; the others have
``train``/``heldout``/``ood`` (extraction and routing also ``hard``: phrasings the training corpus
never uses, :mod:`bench.extraction.hard`, :mod:`bench.routing.hard`) and carry the oracle's answer
as ``label``. The simulator (:mod:`bench.sim`) answers a request with
the responder of :func:`find_family`, else with its own built-in responders
(:mod:`bench.sim.responders`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from auto.errors import ArgumentError
from bench.chat import system_text
from bench.assistant import agent as assistant_agent
from bench.assistant import corpus as assistant_corpus
from bench.assistant import oracle as assistant_oracle
from bench.extraction import agent as extraction_agent
from bench.extraction import corpus as extraction_corpus
from bench.extraction import hard as extraction_hard
from bench.extraction import oracle as extraction_oracle
from bench.inbox import agent as inbox_agent
from bench.intents import agent as intents_agent
from bench.intents import corpus as intents_corpus
from bench.intents import oracle as intents_oracle
from bench.inbox import corpus as inbox_corpus
from bench.inbox import oracle as inbox_oracle
from bench.jsonl import read_objects
from bench.routing import agent as routing_agent
from bench.routing import corpus as routing_corpus
from bench.routing import hard as routing_hard
from bench.routing import oracle as routing_oracle
from bench.triage import agent as triage_agent
from bench.triage import corpus as triage_corpus
from bench.triage import oracle as triage_oracle

Responder = Callable[..., Any]
"""``respond(messages, temperature, rng, request=body)`` -> the assistant message content
(``str``) or a list of tool calls ``[{"name": str, "arguments": str (JSON text)}, ...]``."""


@dataclass(frozen=True)
class BenchFamily:
    """One AUTO-BENCH family.

    Attributes:
        name: the family name (``auto bench run NAME``).
        field: the task's input field (``ticket`` / ``email`` / ``request``); corpus items have
            an attribute of that name.
        task: the ``@auto.task`` name its traces are recorded under.
        run_agent: the recorded task function, ``text -> answer``.
        ask: one unrecorded reference call, ``text -> (answer, parsed response, headers)``.
        default_corpus: ``seed -> {slice name: [item, ...]}``.
        oracle: the simulator's noise-free answer, ``text -> answer``.
        marker: the system-prompt marker (e.g. ``"[auto-bench:triage]"``) that selects
            ``respond`` in the simulator.
        respond: the simulated reference model's answer to a request (:data:`Responder`).
        anchor_file: the file name of the published anchor inputs (JSONL with ``field``), or None.
    """

    name: str
    field: str
    task: str
    run_agent: Callable[[str], Any]
    ask: Callable[[str], tuple[Any, Any, dict[str, str]]]
    default_corpus: Callable[[int], dict[str, list[Any]]]
    oracle: Callable[[str], Any]
    marker: str
    respond: Responder
    anchor_file: str | None = None

    def text_of(self, item: Any) -> str:
        """The input text of a corpus item (its ``field`` attribute)."""
        return getattr(item, self.field)

    def label_of(self, item: Any) -> Any:
        """A corpus item's expected answer: ``label`` (the oracle's) where the item has one,
        else the triage item's design ``category``; None when it has neither."""
        if hasattr(item, "label"):
            return item.label
        return getattr(item, "category", None)

    def read_anchor(self, directory: str | Path) -> list[dict[str, Any]]:
        """The anchor inputs in ``directory / anchor_file``: one dict per JSONL line.

        Raises:
            ArgumentError: the family has no anchor file, the file is missing, or a line is not a
                JSON object with a string ``field``.
        """
        if self.anchor_file is None:
            raise ArgumentError(f"family {self.name!r} has no anchor inputs")
        path = Path(directory) / self.anchor_file
        if not path.is_file():
            raise ArgumentError(f"{path}: anchor file not found")
        return read_objects(path, self.field)


def _triage_label(ticket: str) -> str:
    return triage_oracle.triage_oracle(ticket)[0]


FAMILIES: dict[str, BenchFamily] = {}
"""Registered families by name, in registration order (the order :func:`find_family` tries markers)."""


def register_family(family: BenchFamily) -> BenchFamily:
    """Register (or replace) ``family`` under its name; returns it."""
    FAMILIES[family.name] = family
    return family


register_family(BenchFamily("triage", "ticket", "triage", triage_agent.triage, triage_agent.ask,
                            triage_corpus.default_corpus, _triage_label, triage_oracle.MARKER, triage_oracle.respond,
                            "triage-tickets.jsonl"))
register_family(BenchFamily("extraction", extraction_corpus.FIELD, "extraction", extraction_agent.extract_fields,
                            extraction_agent.ask, extraction_hard.corpus_with_hard, extraction_oracle.extraction_oracle,
                            extraction_oracle.MARKER, extraction_oracle.respond, "extraction-emails.jsonl"))
register_family(BenchFamily("inbox", inbox_corpus.FIELD, "inbox", inbox_agent.inbox, inbox_agent.ask,
                            inbox_corpus.default_corpus, inbox_oracle.inbox_oracle, inbox_oracle.MARKER,
                            inbox_oracle.respond))
register_family(BenchFamily("assistant", assistant_corpus.FIELD, "assistant", assistant_agent.assistant,
                            assistant_agent.ask, assistant_corpus.default_corpus, assistant_oracle.assistant_oracle,
                            assistant_oracle.MARKER, assistant_oracle.respond))
register_family(BenchFamily("routing", routing_corpus.FIELD, "routing", routing_agent.route, routing_agent.ask,
                            routing_hard.corpus_with_hard, routing_oracle.routing_oracle, routing_oracle.MARKER,
                            routing_oracle.respond, "routing-requests.jsonl"))
register_family(BenchFamily("intents", intents_corpus.FIELD, "intents", intents_agent.classify_intent, intents_agent.ask,
                            intents_corpus.default_corpus, intents_oracle.intents_oracle, intents_oracle.MARKER,
                            intents_oracle.respond))


def find_family(messages: list[dict]) -> BenchFamily | None:
    """The first registered family whose marker appears in a system/developer message, or None."""
    system = system_text(messages)
    for fam in FAMILIES.values():
        if fam.marker in system:
            return fam
    return None


def get_family(name: str) -> BenchFamily:
    """The registered family ``name``.

    Raises:
        ArgumentError: unknown family (the message lists the available ones).
    """
    try:
        return FAMILIES[name]
    except KeyError:
        raise ArgumentError(f"unknown bench family {name!r} (available: {', '.join(FAMILIES)})") from None
