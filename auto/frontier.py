"""The spend-capped model client: every paid call Auto itself makes goes through here.

Paid paths (an LLM advisor, LLM-guided synthesis, a judge) call :meth:`FrontierClient.chat`.
Before a call the client bounds its cost from above — input tokens estimated as
``ceil(UTF-8 bytes / 3)`` (tokenizers average ~4 bytes per token on English text, so this
over-estimates) plus ``max_tokens`` output tokens, priced by the pinned table in
:mod:`auto.record.pricing` — and refuses the call when the ledger's spend plus that bound would
exceed the cap. The default cap is **0 µ$: every paid call is refused** until a user sets
``AUTO_SPEND_CAP_USD_MICROS`` (or passes ``cap_usd_micros``). After a call, the cost computed from
the response's usage is appended to an append-only JSONL ledger (fsynced). The check and a
*reservation* of the bound happen together under an exclusive lock on the ledger (``flock``), and
an unfinished reservation counts at its bound, so concurrent threads and processes sharing one
ledger cannot together spend past the cap.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import time
import uuid
from pathlib import Path
from typing import Any

from auto.errors import SpendCapExceeded
from auto.record.pricing import cost_usd_micros, price_for

DEFAULT_LEDGER = Path.home() / ".auto" / "spend-ledger.jsonl"


def default_cap() -> float:
    """The cap in µ$ from ``AUTO_SPEND_CAP_USD_MICROS`` (default 0: refuse every paid call).

    Raises:
        SpendCapExceeded: the variable is set but is not a non-negative number.
    """
    raw = os.environ.get("AUTO_SPEND_CAP_USD_MICROS", "0")
    try:
        cap = float(raw)
    except ValueError:
        raise SpendCapExceeded(f"AUTO_SPEND_CAP_USD_MICROS={raw!r} is not a number") from None
    if not math.isfinite(cap) or cap < 0:
        raise SpendCapExceeded(f"AUTO_SPEND_CAP_USD_MICROS={raw!r} must be a finite number >= 0")
    return cap


class FrontierClient:
    """An OpenAI-compatible chat client with a hard spend cap and a ledger.

    Args:
        model: the model name (must have a pinned price, else every call is refused).
        cap_usd_micros: the cap in µ$ over the whole ledger (default: :func:`default_cap`).
        ledger: path of the append-only JSONL ledger (default ``~/.auto/spend-ledger.jsonl`` or
            ``AUTO_SPEND_LEDGER``).
        client: an ``openai.OpenAI``-like client (default: one built from the environment).
    """

    def __init__(self, model: str, *, cap_usd_micros: float | None = None, ledger: str | Path | None = None,
                 client: Any = None):
        self.model = model
        self.cap = default_cap() if cap_usd_micros is None else float(cap_usd_micros)
        self.ledger = Path(ledger or os.environ.get("AUTO_SPEND_LEDGER") or DEFAULT_LEDGER)
        self._client = client

    def spent(self) -> float:
        """µ$ spent or reserved according to the ledger: a finished call counts its cost, a
        reservation without a finished line (in flight, or its process died) counts its bound."""
        if not self.ledger.exists():
            return 0.0
        reserved: dict[str, float] = {}
        final: dict[str, float] = {}
        with self.ledger.open(encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a torn last line from a killed writer: ignored, the rest still counts
                cid = rec.get("call_id") or f"line{len(reserved) + len(final)}"
                if rec.get("status") == "reserved":
                    reserved[cid] = float(rec.get("bound_usd_micros") or 0.0)
                elif rec.get("status") in ("ok", "error"):
                    final[cid] = float(rec.get("cost_usd_micros") or rec.get("bound_usd_micros") or 0.0)
        return sum(final.values()) + sum(v for k, v in reserved.items() if k not in final)

    @contextlib.contextmanager
    def _locked(self):
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        with open(str(self.ledger) + ".lock", "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def bound(self, messages: list[dict[str, Any]], max_tokens: int) -> float | None:
        """Upper bound of one call's cost in µ$, or None when the model has no pinned price."""
        if price_for(self.model) is None:
            return None
        in_tokens = math.ceil(len(json.dumps(messages, ensure_ascii=False).encode("utf-8")) / 3)
        return cost_usd_micros(self.model, in_tokens, max_tokens)

    def _append(self, rec: dict[str, Any]) -> None:
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        with self.ledger.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def chat(self, messages: list[dict[str, Any]], *, purpose: str, max_tokens: int = 512, **kwargs: Any) -> str:
        """One chat completion within the cap; returns the assistant's text.

        Raises:
            SpendCapExceeded: the call's cost bound would take the spend past the cap, or the
                model has no pinned price (the refusal is written to the ledger).
        """
        bound = self.bound(messages, max_tokens)
        with self._locked():  # check and reserve as one step: concurrent callers cannot overshoot
            spent = self.spent()
            base = {"ts": time.time(), "call_id": uuid.uuid4().hex, "model": self.model, "purpose": purpose,
                    "cap_usd_micros": self.cap, "spent_before_usd_micros": spent, "bound_usd_micros": bound}
            if bound is None or spent + bound > self.cap:
                why = (f"no pinned price for model {self.model!r}, so the spend cannot be bounded" if bound is None else
                       f"a call bounded at {bound:.0f} µ$ would take the spend from {spent:.0f} past the cap of {self.cap:.0f} µ$")
                if self.cap > 0:  # with the default cap of 0 nothing is written: no ledger appears
                    self._append({**base, "status": "refused", "reason": why})
                raise SpendCapExceeded(f"{purpose}: {why} (set AUTO_SPEND_CAP_USD_MICROS to allow paid calls)")
            self._append({**base, "status": "reserved"})
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI()
        try:
            resp = self._client.chat.completions.create(model=self.model, messages=messages, max_tokens=max_tokens, **kwargs)
        except Exception as e:
            # a failed call may still have been billed: charge the bound, never less
            with self._locked():
                self._append({**base, "status": "error", "cost_usd_micros": bound, "error": f"{type(e).__name__}: {e}"[:300]})
            raise
        usage = getattr(resp, "usage", None)
        cost = (cost_usd_micros(self.model, usage.prompt_tokens, usage.completion_tokens)
                if usage is not None else None)
        with self._locked():
            self._append({**base, "status": "ok", "cost_usd_micros": cost if cost is not None else bound,
                          "usage": None if usage is None else {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}})
        return resp.choices[0].message.content or ""
