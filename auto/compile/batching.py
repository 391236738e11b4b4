"""Running a candidate on many inputs within its limits: ``run_batch`` calls of bounded size.

An artifact's ``run_batch`` receives every input of one call in its linear memory next to its
own data (a memo table's entries, a specialist's weights) under the sandbox's memory limit, and
answers ``too_large`` past the ABI's batch cap; a gate that sends 100,000 witnessed inputs in one
call fails for a reason that has nothing to do with the candidate. :func:`chunked` splits a list
of inputs into calls of at most :data:`BATCH_BYTES` of canonical JSON and :data:`BATCH_ITEMS`
inputs, in order, so the number of calls grows linearly with the inputs and each stays far below
the limits.
"""

from __future__ import annotations

from typing import Any, Callable

from auto_runtime.jsonio import canonical_text

BATCH_BYTES = 1 << 20
"""At most this many bytes of canonical JSON input per ``run_batch`` call (1 MiB; the ABI's own
cap is 64 MiB and one input may be up to 1 MiB, so a call never holds more than two inputs'
worth of the cap)."""

BATCH_ITEMS = 4096
"""At most this many inputs per ``run_batch`` call."""


def canonical_size(x: Any) -> int:
    """Bytes of ``x``'s canonical JSON (UTF-8)."""
    return len(canonical_text(x).encode("utf-8"))


def text_size(text: str) -> int:
    """Bytes of an input already given as its JSON text (for ``Artifact.call_batch_texts``)."""
    return len(text.encode("utf-8"))


def chunked(run_batch: Callable[[list[Any]], list[dict[str, Any]]], *, max_bytes: int = BATCH_BYTES,
            max_items: int = BATCH_ITEMS,
            measure: Callable[[Any], int] = canonical_size) -> Callable[[list[Any]], list[dict[str, Any]]]:
    """``run_batch`` over consecutive chunks of its input list (each within ``max_bytes`` of
    canonical JSON as ``measure`` counts an input's bytes — :func:`canonical_size` of an input,
    :func:`text_size` of its text — counting one separator per input, and ``max_items``
    inputs; an input larger than ``max_bytes`` goes alone); the outputs are concatenated in
    order.

    Raises:
        whatever ``run_batch`` raises (a chunk that fails fails the whole call).
    """
    def run(inputs: list[Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        chunk: list[Any] = []
        size = 0
        for x in inputs:
            n = measure(x) + 1
            if chunk and (size + n > max_bytes or len(chunk) >= max_items):
                out.extend(run_batch(chunk))
                chunk, size = [], 0
            chunk.append(x)
            size += n
        if chunk:
            out.extend(run_batch(chunk))
        return out

    return run
