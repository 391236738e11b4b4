"""The ratchet's shift feed: specialist scores to the exchangeability monitor, off the request path.

Every specialist nonconformity score of a call (a table hit's 0 is no specialist score) is handed
to :class:`auto.guards.shift.ShiftMonitor` on a thread of its own: deopts at once, tier-1 answers
in batches of :data:`SCORE_BATCH`. The thread feeds :data:`MONITOR_SLICE` scores between two
yields of the interpreter lock, so a request never waits behind a whole batch. When the monitor's
martingale reaches ``1/alpha`` the installed generation is tightened (every call deopts until the
next install), a ``shift`` alarm is logged and the policy's ``shift-alarm`` trigger is armed.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from auto.guards.shift import ShiftMonitor
from auto.ratchet.events import AlarmRow, Trigger

SCORE_BATCH = 32
"""Nonconformity scores of tier-1 answers are handed to the shift monitor's thread in batches of
this many (or at the next deopt)."""

MONITOR_SLICE = 4
"""The monitor thread feeds this many scores (about 10 µs each, measured) between two yields of
the interpreter lock, so a request never waits behind a whole batch."""

POLL_INTERVAL_S = 1.0
"""The monitor thread wakes at least this often to notice a close."""


class ShiftFeed:
    """The host's shift monitor and its thread (None ``alpha``: no monitor, nothing fed).

    Args:
        host: the :class:`~auto.ratchet.core.Ratchet` (state and lock, tiered task, installer,
            log writer).
        alpha: the monitor's level, or None.
        seed: the monitor's seed.
    """

    def __init__(self, host: Any, alpha: float | None, seed: int) -> None:
        self.host = host
        self.alpha = alpha
        self.monitor = ShiftMonitor(alpha=alpha, method="step-jumper", jump_size=0.02, seed=seed) \
            if alpha is not None else None
        self.pending: collections.deque[float] = collections.deque()
        self.ready = threading.Event()
        self.busy = False
        self.thread: threading.Thread | None = None
        self.closed = False

    def offer(self, score: float, deopted: bool) -> None:
        """One specialist score of a call (request path: an append, a wake-up per batch)."""
        if self.monitor is None:
            return
        self.pending.append(score)
        if deopted or len(self.pending) >= SCORE_BATCH:
            self._wake()

    def reset(self, calibration_scores: list[float] | None) -> None:
        """A new generation: the monitor restarts on its calibration scores (call with the
        state lock held)."""
        if self.monitor is not None:
            self.monitor.reset(calibration_scores)
            self.pending.clear()

    def idle(self) -> bool:
        """Whether every score handed over has been fed."""
        return self.thread is None or not (self.ready.is_set() or self.busy)

    def close(self, timeout_s: float | None) -> None:
        """Stop the thread."""
        self.closed = True
        self.ready.set()
        if self.thread is not None:
            self.thread.join(timeout_s)

    def describe(self) -> dict[str, Any] | None:
        """The monitor's state, or None without one."""
        return self.monitor.describe() if self.monitor is not None else None

    def _wake(self) -> None:
        if self.thread is None:
            with self.host.state_lock:
                if self.thread is None:
                    self.thread = threading.Thread(target=self._loop, name=f"auto-ratchet-monitor-{self.host.task}",
                                                   daemon=True)
                    self.thread.start()
        self.ready.set()

    def _loop(self) -> None:
        while not self.closed:
            self.ready.wait(POLL_INTERVAL_S)
            self.busy = True
            self.ready.clear()
            try:
                while self.pending and not self.closed:
                    self._feed(MONITOR_SLICE)
                    time.sleep(0)  # yield the interpreter lock to the requests
            finally:
                self.busy = False

    def _feed(self, at_most: int) -> None:
        mon, h, pending = self.monitor, self.host, self.pending
        assert mon is not None and self.alpha is not None
        with h.state_lock:
            scores = [pending.popleft() for _ in range(min(at_most, len(pending)))]
            if h.tiered.tightened is not None or h.installer.installed_id is None:
                return
            for s in scores:
                if mon.update_score(s):
                    why = f"exchangeability martingale {mon.statistic:.3g} >= 1/alpha = {1.0 / self.alpha:.3g}"
                    h.tiered.tighten(why)
                    h.state.alarm, h.state.new_since_alarm = Trigger.SHIFT_ALARM.value, 0
                    h.log(AlarmRow(h.state.installed, monitor="shift", reason=why))
                    h.say(f"  shift alarm ({why}): every call deopts until the next generation")
                    pending.clear()
                    break
