"""How late the event loop runs: how long a message that reached the process may have waited
before the transport handled it.

Without Vertex's ``transparent`` mode a resumption handle is placed in the input by when it
arrived (``gemini.outbox``). The transport only sees it when the event loop gets to it: on a
busy loop (many sessions on one process, a rotation storm) that is later than its arrival by
the loop's lag, and audio written in between would count as held by the handle's snapshot
though the service got it after. :class:`LoopLag` measures the lag, and reports two figures of
it: the lag of the loop turns a message handled now may have waited through
(:meth:`LoopLag.current`), by which a connection moves a handle's arrival back, so a busy loop
makes a move replay a little more (heard twice), never lose input; and the largest of the last
few seconds (:meth:`LoopLag.recent`), how late a handle still to come may be, for which the
outbox keeps what such a handle may lack. A spike of lag that ended before a handle reached
the process did not delay it: placing a handle by the largest lag of the last seconds replayed
a question written a quarter second before its handle on a loaded machine.

The lag is measured on the loop turns the write loops already mark, with no timer of its own:
the first write of a turn hands the loop a callback (``call_soon``), and how long after the
write the loop runs it is the lag. A timer would wake an idle loop 20 times a second in every
call; a turn with writes is when the lag matters, because only writes the lag delayed can be
misplaced against a handle. A loop with nothing to write measures nothing, and its recent lag
decays to 0 as the samples leave the window.

One monitor serves every connection on a loop (:func:`for_loop`). It holds no reference to its
loop, so it does not keep one alive through the weak mapping that keys it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from typing import Final

WINDOW: Final = 2.0
"""Seconds of samples :meth:`LoopLag.recent` looks back over: a lag spike lasts about as long
as the burst of work that caused it."""


class LoopLag:
    """How late one event loop runs the callbacks it is handed; see the module documentation."""

    __slots__ = ("_marked_at", "_peak", "_samples", "_window")

    def __init__(self, window: float = WINDOW) -> None:
        self._window = window
        self._marked_at: float | None = None
        """When the pending probe was handed to the loop; None when none is pending."""
        self._samples: deque[tuple[float, float]] = deque()
        self._peak: float | None = 0.0
        """The largest lag among ``_samples``; None when a pruned sample may have been it.
        :meth:`recent` is asked at every handover (every 20 ms audio chunk of every call) and
        the samples change once a turn: the maximum is kept rather than searched."""

    def mark_turn(self, loop: asyncio.AbstractEventLoop, now: float) -> bool:
        """A write at ``now`` (the loop's clock). True when it begins a loop turn: no probe was
        pending, so one is handed to ``loop`` and runs at the start of its next turn."""
        if self._marked_at is not None:
            return False
        self._marked_at = now
        loop.call_soon(self._probe, loop)
        return True

    def recent(self, now: float) -> float:
        """The largest lag of the last ``window`` seconds before ``now``, the current one
        included (a loop that is busy right now is late for the probe it owes)."""
        self._prune(now)
        peak = self._peak
        if peak is None:
            peak = self._peak = max([lag for _, lag in self._samples], default=0.0)
        owed = now - self._marked_at if self._marked_at is not None else 0.0
        return max(owed, peak, 0.0)

    def current(self, now: float) -> float:
        """The lag that could have kept a message handled at ``now`` waiting: the largest lag
        of the loop turns it may have waited through, the current one included.

        A message waits for the turn in progress when it reaches the process to end, and for
        a turn or two more to be read and handled: at most twice the lag of those turns. So a
        turn counts when it ended within twice the largest lag counted (its own included)
        before ``now``; the newest turn that ended earlier shows the loop on time since, and
        nothing before it counts."""
        lag = now - self._marked_at if self._marked_at is not None else 0.0
        for ran_at, sample in reversed(self._samples):
            if ran_at < now - 2 * max(lag, sample):
                break
            lag = max(lag, sample)
        return max(lag, 0.0)

    def _probe(self, loop: asyncio.AbstractEventLoop) -> None:
        marked_at = self._marked_at
        assert marked_at is not None, "a probe runs only while marked"
        self._marked_at = None
        now = loop.time()
        lag = max(0.0, now - marked_at)
        self._samples.append((now, lag))
        if self._peak is not None:
            self._peak = max(self._peak, lag)
        self._prune(now)

    def _prune(self, now: float) -> None:
        while self._samples and self._samples[0][0] < now - self._window:
            _, lag = self._samples.popleft()
            if lag == self._peak:
                self._peak = None


_MONITORS: Final[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag]] = (
    weakref.WeakKeyDictionary()
)


def for_loop(loop: asyncio.AbstractEventLoop) -> LoopLag:
    """``loop``'s monitor."""
    monitor = _MONITORS.get(loop)
    if monitor is None:
        monitor = _MONITORS[loop] = LoopLag()
    return monitor
