"""``auto.progress.Progress``: a bar on a terminal, plain lines (throttled, and a last one) elsewhere."""

from __future__ import annotations

import io

from auto.progress import BAR_WIDTH, Progress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_are_throttled_and_the_last_is_always_said():
    lines: list[str] = []
    clock = Clock()
    p = Progress("[offline] recorded", 10, lines.append, stream=io.StringIO(), every_s=5.0, clock=clock)
    assert not p.bar  # a pipe or a file: lines, no bar
    for i in range(10):
        clock.t += 2.0  # one item every 2 s: a line every third item at most
        p.advance()
    p.close()
    p.close()  # once
    assert lines == ["[offline] recorded: 3 of 10", "[offline] recorded: 6 of 10", "[offline] recorded: 9 of 10",
                     "[offline] recorded: 10 of 10"]


def test_a_quick_phase_says_only_its_end():
    lines: list[str] = []
    with Progress("x", 3, lines.append) as p:
        for _ in p.iterate(range(3)):
            pass
    assert lines == ["x: 3 of 3"]


def test_a_terminal_gets_one_bar_redrawn_in_place():
    tty, lines = Tty(), []
    clock = Clock()
    p = Progress("[latency] rows", 4, lines.append, stream=tty, clock=clock)
    assert p.bar
    for _ in range(4):
        clock.t += 1.0
        p.advance()
    p.close()
    out = tty.getvalue()
    assert lines == [] and out.endswith(f"[latency] rows [{'#' * BAR_WIDTH}] 4/4\n") and "\n" not in out[:-1]
    assert out.count("\r") == 5 and f"[{'#' * (BAR_WIDTH // 2)}{'.' * (BAR_WIDTH // 2)}] 2/4" in out


def test_cross_fit_reports_each_fold():
    from auto.compile.crossfit import choose_config, cross_fit

    words = ["refund", "invoice", "charge", "crash", "error", "freeze"]
    items = [({"ticket": f"my {w} number {i}"}, "billing" if w in ("refund", "invoice", "charge") else "bug", 1.0)
             for w in words for i in range(4)]
    config, _ = choose_config(items, 0)
    seen: list[tuple[int, int]] = []
    cf = cross_fit(items, config, folds=4, seed=0, progress=lambda done, k: seen.append((done, k)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)] and cf.folds == 4
