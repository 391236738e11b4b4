"""Progress of a long phase: items done of a total, as a bar on a terminal, plain lines otherwise.

A :class:`Progress` is told how many items a phase has and, as it goes, how many are done. Where
its ``stream`` is a terminal (``isatty()``) it redraws one bar line in place (``\\r``), at most
every :data:`BAR_EVERY_S` seconds, and ends it with a newline; anywhere else (a pipe, a log file,
a test) it hands ``say`` one plain line ``"<label>: <done> of <total>"`` at most every
``every_s`` seconds and always once at the end, so a log shows the phase is moving without a
line per item. Nothing is printed for a phase that is done before ``every_s`` passed, except the
final line.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

BAR_EVERY_S = 0.1
"""Shortest time between two redraws of a terminal bar (s)."""

LINE_EVERY_S = 5.0
"""Default shortest time between two plain progress lines (s)."""

BAR_WIDTH = 30
"""Characters of the bar itself."""


class Progress:
    """Items done of ``total`` for one phase (see the module docstring).

    Args:
        label: what the phase is, e.g. ``"[offline] recording"``.
        total: the number of items (≥ 0).
        say: where plain lines go (the CLI's stderr printer).
        stream: where a bar goes when it is a terminal (usually ``sys.stderr``); None: lines only.
        every_s: shortest time between two plain lines (s).
        clock: monotonic seconds (for tests).
    """

    def __init__(self, label: str, total: int, say: Callable[[str], None], *, stream: Any = None,
                 every_s: float = LINE_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.say = label, max(0, int(total)), say
        self.every_s, self.clock = every_s, clock
        isatty = getattr(stream, "isatty", None)
        self.stream = stream if callable(isatty) and isatty() else None
        self.done = 0
        self._last = clock()
        self._closed = False

    @property
    def bar(self) -> bool:
        """Whether progress is drawn as a terminal bar."""
        return self.stream is not None

    def _draw(self) -> None:
        filled = BAR_WIDTH * self.done // self.total if self.total else BAR_WIDTH
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{self.total}")
        self.stream.flush()

    def advance(self, n: int = 1) -> None:
        """``n`` more items are done."""
        self.done = min(self.total, self.done + n) if self.total else self.done + n
        now = self.clock()
        if self.bar:
            if now - self._last >= BAR_EVERY_S or self.done >= self.total:
                self._last = now
                self._draw()
        elif now - self._last >= self.every_s and self.done < self.total:
            self._last = now
            self.say(f"{self.label}: {self.done} of {self.total}")

    def close(self) -> None:
        """The phase ended: the bar's last state and a newline, or the final plain line (once)."""
        if self._closed:
            return
        self._closed = True
        if self.bar:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
        else:
            self.say(f"{self.label}: {self.done} of {self.total}")

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def iterate(self, items: Iterable[T]) -> Iterator[T]:
        """``items``, advancing once per item taken (and closing at the end)."""
        try:
            for x in items:
                yield x
                self.advance()
        finally:
            self.close()


__all__ = ["BAR_EVERY_S", "BAR_WIDTH", "LINE_EVERY_S", "Progress"]
