"""The bulk phases of a compile: hundreds of thousands of objects built without the cyclic
garbage collector traversing them again and again.

A compile reads one object per witness (204,800 for a 102,400-entry memo table witnessed twice),
and a memo builds one table entry per input. CPython's cyclic collector is triggered by
allocation counts: while such a phase builds its objects, every full collection traverses all of
them again and finds no garbage (about a tenth of that memo compile, ``bench.scale.memo``).
:func:`cyclic_gc_paused` is used around those phases only; elsewhere (synthesis, distillation)
cyclic garbage is collected as usual.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (reference counting still frees every
    acyclic object at once), then restore its previous state; also usable as a decorator."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
