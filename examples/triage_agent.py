"""A support-triage agent as its author writes it: no Auto import, no decorator.

Reads tickets (one JSON object ``{"ticket": "..."}`` or one plain line each) from the file named
on the command line (``-`` or nothing: standard input), asks the model for one label per ticket
through the official ``openai`` client, and prints ``{"ticket": ..., "label": ...}`` per line.

The model endpoint is the client's usual configuration (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``;
``AUTO_REFERENCE_MODEL`` names the model, default ``auto-sim-1``, the bundled simulator, which
models this prompt). Run it recorded, with no change to its code::

    auto record --store traces.sqlite -- python examples/triage_agent.py tickets.jsonl
    OPENAI_BASE_URL=http://127.0.0.1:8788/v1 python examples/triage_agent.py tickets.jsonl   # via auto proxy
"""

from __future__ import annotations

import json
import os
import sys

import openai

LABELS = ("billing", "bug", "feature", "account", "shipping", "security")
SYSTEM_PROMPT = (
    "[auto-bench:triage] You are a customer-support triage assistant. Classify the support "
    "ticket into exactly one of these labels: " + ", ".join(LABELS) + ". "
    "Answer with the label only."
)


def classify(client: openai.OpenAI, ticket: str) -> str:
    """One model call: the ticket → a label (case, whitespace and a trailing period normalized)."""
    resp = client.chat.completions.create(
        model=os.environ.get("AUTO_REFERENCE_MODEL", "auto-sim-1"),
        temperature=0.3,
        messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ticket}],
    )
    return (resp.choices[0].message.content or "").strip().lower().rstrip(".").strip()


def main(argv: list[str]) -> int:
    src = open(argv[1], encoding="utf-8") if len(argv) > 1 and argv[1] != "-" else sys.stdin
    client = openai.OpenAI(max_retries=3)
    for line in src:
        line = line.strip()
        if not line:
            continue
        ticket = json.loads(line)["ticket"] if line.startswith("{") else line
        print(json.dumps({"ticket": ticket, "label": classify(client, ticket)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
