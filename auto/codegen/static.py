"""An artifact's static data: constants placed at fixed addresses, and the memory they need.

Every artifact keeps ``[0, 16)`` unused (so no buffer ever starts at address 0, and 0 can mean
"none"); the constants follow from address 16, each at most once; the lowerings place their
larger regions (counts, weights, tables) after them; the heap starts 16 bytes past the static
data, 16-aligned. Memory is declared with :data:`HEAP_SLACK` bytes beyond that and grows per
call as needed.
"""

from __future__ import annotations

import numpy as np

from auto.errors import CodegenError

from .wat import data_segment

PAGE = 65536
"""WebAssembly page size in bytes."""
HEAP_SLACK = PAGE
"""Heap bytes declared up front beyond the static data (enough for a typical input)."""
STATIC_LIMIT = 1 << 30
"""Largest static data (constants, weights, tables) in bytes: 1 GiB."""
FIRST = 16
"""The first address a constant may take."""
GAP = 64
"""Zero runs at least this long split a region's data segments (memory starts zeroed)."""


def align(x: int, a: int) -> int:
    """The smallest multiple of ``a`` that is ``>= x``."""
    return (x + a - 1) // a * a


class StaticData:
    """The constants' bytes, placed from address :data:`FIRST`; equal constants with equal
    alignment share one address (constants are read-only)."""

    def __init__(self) -> None:
        self.buf = bytearray(FIRST)
        self._at: dict[tuple[bytes, int], int] = {}

    def put(self, data: bytes, align: int = 1) -> int:
        """Place ``data`` at the next ``align``-aligned address (or where it already is);
        returns that address."""
        key = (bytes(data), align)
        at = self._at.get(key)
        if at is None:
            while len(self.buf) % align:
                self.buf.append(0)
            at = len(self.buf)
            self.buf.extend(data)
            self._at[key] = at
        return at

    def packed(self, data: bytes) -> int:
        """``(address << 32) | len(data)`` of ``data`` placed (address :data:`FIRST` for the
        empty text): a text payload of the program runtime."""
        at = self.put(data) if data else FIRST
        return (at << 32) | len(data)

    @property
    def end(self) -> int:
        """One past the last constant byte."""
        return len(self.buf)

    def segment(self) -> str:
        """The data segment holding every constant (at address 0)."""
        return data_segment(0, bytes(self.buf))


def heap_start(static_end: int) -> int:
    """The heap's first address for static data ending at ``static_end``."""
    return align(static_end, 16) + 16


def check_static(heap: int, what: str) -> None:
    """Raises CodegenError when static data up to ``heap`` bytes exceeds :data:`STATIC_LIMIT`
    (``what`` names the model in the message)."""
    if heap > STATIC_LIMIT:
        raise CodegenError(f"{what} needs {heap} bytes of static memory (limit 1 GiB)")


def pages(heap: int) -> int:
    """Pages the module declares for a heap starting at ``heap`` (plus :data:`HEAP_SLACK`)."""
    return (heap + HEAP_SLACK + PAGE - 1) // PAGE


def segments(base: int, data: bytes) -> list[str]:
    """Data segments for ``data`` at ``base``, skipping zero runs of at least :data:`GAP` bytes."""
    a = np.frombuffer(data, np.uint8)
    nz = np.flatnonzero(a)
    if nz.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(nz) > GAP)
    starts = np.concatenate([[nz[0]], nz[breaks + 1]])
    ends = np.concatenate([nz[breaks], [nz[-1]]]) + 1
    return [data_segment(base + int(s), data[int(s):int(e)]) for s, e in zip(starts, ends)]
