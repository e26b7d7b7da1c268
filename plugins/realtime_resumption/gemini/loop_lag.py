"""How late the event loop runs: how long a message that reached the process may have waited
before the transport handled it.

Without Vertex's ``transparent`` mode a resumption handle is placed in the input by when it
arrived (``gemini.outbox``). The transport only sees it when the event loop gets to it: on a
busy loop (many sessions on one process, a rotation storm) that is later than its arrival by
the loop's lag, and audio written in between would count as held by the handle's snapshot
though the service got it after. :class:`LoopLag` samples the lag with a timer and reports the
largest of the last few seconds; a connection moves a handle's arrival back by it, so a busy
loop makes a move replay a little more (heard twice), never lose input.

One monitor serves every transport on a loop. It runs only while a connection uses it: a
timer handle, no task, cancelled when the last user releases it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from typing import Final

INTERVAL: Final = 0.05
"""Seconds between samples."""
WINDOW: Final = 2.0
"""Seconds of samples :meth:`LoopLag.recent` looks back over: a lag spike lasts about as long
as the burst of work that caused it."""


class LoopLag:
    """Samples how late one event loop runs its callbacks; see the module documentation."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, interval: float = INTERVAL, window: float = WINDOW
    ) -> None:
        self._loop = loop
        self._interval = interval
        self._window = window
        self._users = 0
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._samples: deque[tuple[float, float]] = deque()
        self._peak: float | None = 0.0
        """The largest lag among ``_samples``; None when a pruned sample may have been it.
        :meth:`recent` is asked at every handover (every 20 ms audio chunk of every call), the
        samples change every ``interval``: the maximum is kept rather than searched."""

    def acquire(self) -> None:
        """A connection starts using the monitor (sampling starts with the first)."""
        self._users += 1
        if self._timer is None:
            self._schedule()

    def release(self) -> None:
        """A connection stops using it (sampling stops with the last)."""
        self._users = max(0, self._users - 1)
        if self._users == 0 and self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._samples.clear()
            self._peak = 0.0

    def recent(self) -> float:
        """The largest lag of the last ``window`` seconds, the current one included (a loop
        that is busy right now is late for the sample it owes)."""
        if self._timer is None:
            return 0.0
        now = self._loop.time()
        self._prune(now)
        peak = self._peak
        if peak is None:
            peak = self._peak = max([lag for _, lag in self._samples], default=0.0)
        return max(now - self._due, peak, 0.0)

    def _schedule(self) -> None:
        self._due = self._loop.time() + self._interval
        self._timer = self._loop.call_at(self._due, self._sample)

    def _sample(self) -> None:
        now = self._loop.time()
        lag = max(0.0, now - self._due)
        self._samples.append((now, lag))
        if self._peak is not None:
            self._peak = max(self._peak, lag)
        self._prune(now)
        self._schedule()

    def _prune(self, now: float) -> None:
        while self._samples and self._samples[0][0] < now - self._window:
            _, lag = self._samples.popleft()
            if lag == self._peak:
                self._peak = None


_MONITORS: Final[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag]] = (
    weakref.WeakKeyDictionary()
)


def for_running_loop() -> LoopLag:
    """The running loop's monitor."""
    loop = asyncio.get_running_loop()
    monitor = _MONITORS.get(loop)
    if monitor is None:
        monitor = _MONITORS[loop] = LoopLag(loop)
    return monitor
