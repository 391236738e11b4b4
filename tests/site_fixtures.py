"""Recorded model calls of one call site, written straight into a store (no model needed), and a
compiled generation of that site: shared by the site, proxy, serve and registry tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from auto.store import Store, new_span_id, new_trace_id

SYSTEM = "You sort tickets. Answer with one label."
WORDS = ["refund", "crash", "login", "invoice", "password", "export", "dark mode", "billing", "api key", "upload",
         "shipping", "coupon"]
BILLING = ("refund", "invoice", "coupon", "billing")


def chat_span(messages: list[dict], output: Any, *, status: str = "ok", task: str | None = None, model: str = "m-1",
              **params: Any) -> dict[str, Any]:
    """One recorded ``chat.completions`` span (the in-process recorder's fields)."""
    body = {"model": model, "messages": messages, **params}
    out = output if isinstance(output, dict) else {"content": output, "tool_calls": None, "refusal": None,
                                                     "finish_reason": "stop"}
    return {"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": "chat.completions",
            "kind": "llm", "task": task, "site": "x", "started_ns": 1, "ended_ns": 2, "status": status,
            "input": body, "output": out if status == "ok" else None, "error": None if status == "ok" else {"type": "x"},
            "attributes": {"gen_ai.request.model": model}}


def ticket_messages(word: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Ticket: {word} is broken\nCustomer: {len(word)}"}]


def ticket_call(word: str, label: str, **params: Any) -> dict[str, Any]:
    return chat_span(ticket_messages(word), label, **params)


def label_of(word: str) -> str:
    return "billing" if word.rsplit(" ", 1)[0] in BILLING else "bug"


def site_words() -> list[str]:
    return [f"{w} {i}" for w in WORDS for i in range(3)]


def compiled_site(folder: Path, *, model: str = "m-1") -> tuple[Path, str, Any]:
    """A store holding the ticket site's calls (each word twice) and its memo generation.

    Returns:
        ``(store path, site id, CompileOutcome)``.
    """
    from auto.compile import compile_task
    from auto.sites import discover

    path = folder / "site.sqlite"
    spans = [ticket_call(w, label_of(w), model=model) for w in site_words() for _ in range(2)]
    with Store(path) as store:
        store.ingest(spans)
        (sid,) = discover(store.spans(kind="llm")).sites
        out = compile_task(store, sid, rungs=["memo"], out_path=folder / "site.wasm")
    return path, sid, out
