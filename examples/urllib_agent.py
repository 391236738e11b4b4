"""An agent with no client library at all: the standard library's ``urllib`` only, no Auto import.

Reads tickets like ``triage_agent.py`` (a file of ``{"ticket": ...}`` lines or plain lines, or
standard input) and labels each with one ``POST {OPENAI_BASE_URL}/chat/completions``; every
other call asks for ``stream: true`` and reads the server-sent events itself. Point
``OPENAI_BASE_URL`` at ``auto proxy`` and every call, streamed or not, is recorded::

    OPENAI_BASE_URL=http://127.0.0.1:8788/v1 python examples/urllib_agent.py tickets.jsonl
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

SYSTEM_PROMPT = (
    "[auto-bench:triage] You are a customer-support triage assistant. Classify the support "
    "ticket into exactly one of these labels: billing, bug, feature, account, shipping, security. "
    "Answer with the label only."
)


def ask(base_url: str, ticket: str, stream: bool) -> str:
    body = {"model": os.environ.get("AUTO_REFERENCE_MODEL", "auto-sim-1"), "temperature": 0.3, "stream": stream,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ticket}]}
    req = urllib.request.Request(base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode("utf-8"),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")})
    with urllib.request.urlopen(req, timeout=120) as resp:
        if not stream:
            return json.loads(resp.read())["choices"][0]["message"]["content"] or ""
        text = []
        for line in resp:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices") or []:
                text.append((choice.get("delta") or {}).get("content") or "")
        return "".join(text)


def ask_retrying(base_url: str, ticket: str, stream: bool, attempts: int = 4) -> str:
    """:func:`ask`, retried on a 5xx answer (what client libraries do for you)."""
    for i in range(attempts):
        try:
            return ask(base_url, ticket, stream)
        except urllib.error.HTTPError as e:
            if e.code < 500 or i == attempts - 1:
                raise
            time.sleep(0.01 * 2 ** i)
    raise AssertionError("unreachable")


def main(argv: list[str]) -> int:
    base_url = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8788/v1")
    src = open(argv[1], encoding="utf-8") if len(argv) > 1 and argv[1] != "-" else sys.stdin
    for i, line in enumerate(x for x in (ln.strip() for ln in src) if x):
        ticket = json.loads(line)["ticket"] if line.startswith("{") else line
        label = ask_retrying(base_url, ticket, stream=i % 2 == 1).strip().lower().rstrip(".")
        print(json.dumps({"ticket": ticket, "label": label}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
