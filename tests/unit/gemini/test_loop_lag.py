"""The event loop's lag, measured on the turns the writes mark: the largest recent lateness,
the current one included, and no timer of its own."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable
from typing import Any, cast

import pytest

from realtime_resumption.gemini import loop_lag
from realtime_resumption.gemini.loop_lag import WINDOW, LoopLag


class _Loop:
    """The two loop methods LoopLag uses, on a clock the test moves (a stand-in: a real loop
    cannot be made late on purpose without blocking it)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.ready: list[tuple[Callable[..., None], tuple[Any, ...]]] = []

    def time(self) -> float:
        return self.now

    def call_soon(self, callback: Callable[..., None], *args: Any) -> None:
        self.ready.append((callback, args))

    def next_turn_at(self, now: float) -> None:
        """The loop's next turn starts at ``now`` and runs what it was handed."""
        self.now = now
        ready, self.ready = self.ready, []
        for callback, args in ready:
            callback(*args)


def _turn(monitor: LoopLag, loop: _Loop, write_at: float, next_turn_at: float) -> None:
    """A turn with a write at ``write_at``; the loop gets to its next turn at ``next_turn_at``."""
    loop.now = write_at
    assert monitor.mark_turn(cast(Any, loop), write_at)
    loop.next_turn_at(next_turn_at)


def test_a_late_turn_is_the_recent_lag_until_it_leaves_the_window() -> None:
    monitor, loop = LoopLag(), _Loop()
    assert monitor.recent(0.0) == 0.0
    _turn(monitor, loop, 0.0, 0.25)  # the loop was busy for a quarter second
    assert monitor.recent(0.25) == pytest.approx(0.25)
    # Prompt turns after it leave the spike in the window...
    for i in range(1, 11):
        _turn(monitor, loop, 0.25 + i * 0.02, 0.25 + i * 0.02 + 0.001)
    assert monitor.recent(loop.now) == pytest.approx(0.25)
    # ...until it is older than the window.
    assert monitor.recent(0.25 + WINDOW + 0.01) == pytest.approx(0.001)
    assert monitor.recent(0.25 + 2 * WINDOW) == 0.0


def test_when_the_largest_lag_leaves_the_window_the_next_largest_is_the_recent_one() -> None:
    monitor, loop = LoopLag(), _Loop()
    _turn(monitor, loop, 0.0, 0.3)
    _turn(monitor, loop, 0.5, 0.6)
    _turn(monitor, loop, 0.7, 0.701)
    assert monitor.recent(0.8) == pytest.approx(0.3)
    assert monitor.recent(0.3 + WINDOW + 0.01) == pytest.approx(0.1)


def test_a_loop_busy_right_now_shows_in_the_recent_lag() -> None:
    monitor, loop = LoopLag(), _Loop()
    assert monitor.mark_turn(cast(Any, loop), 1.0)
    # The probe is owed: the loop has not got to its next turn 0.4 s after the write.
    assert monitor.recent(1.4) == pytest.approx(0.4)


def test_a_turn_hands_the_loop_one_probe_whatever_the_number_of_writes() -> None:
    monitor, loop = LoopLag(), _Loop()
    marks = [monitor.mark_turn(cast(Any, loop), 0.0) for _ in range(5)]
    assert marks == [True, False, False, False, False]
    assert len(loop.ready) == 1
    loop.next_turn_at(0.01)
    assert monitor.mark_turn(cast(Any, loop), 0.01)


async def test_on_a_real_loop_a_turn_ends_when_the_loop_runs_its_next_callbacks() -> None:
    loop = asyncio.get_running_loop()
    monitor = LoopLag()
    assert monitor.mark_turn(loop, loop.time())
    assert not monitor.mark_turn(loop, loop.time())
    await asyncio.sleep(0)  # the loop's next turn runs the probe
    assert monitor.mark_turn(loop, loop.time())
    await asyncio.sleep(0)
    assert 0.0 <= monitor.recent(loop.time()) < WINDOW


async def test_one_monitor_per_loop_and_none_keeps_its_loop_alive() -> None:
    loop = asyncio.get_running_loop()
    assert loop_lag.for_loop(loop) is loop_lag.for_loop(loop)
    other = asyncio.new_event_loop()
    monitor = loop_lag.for_loop(other)
    assert monitor is not loop_lag.for_loop(loop)
    other.close()
    gone = weakref.ref(other)
    del other
    gc.collect()
    assert gone() is None


def test_the_current_lag_is_that_of_the_turns_a_message_handled_now_waited_through() -> None:
    monitor, loop = LoopLag(), _Loop()
    _turn(monitor, loop, 0.0, 0.15)  # busy for 150 ms
    # Right after it, a message handled now may have waited through it.
    assert monitor.current(0.15) == pytest.approx(0.15)
    assert monitor.current(0.3) == pytest.approx(0.15)
    # A turn on time since: the loop read what reached it then, so the spike hid nothing
    # handled later; the recent lag still shows it.
    _turn(monitor, loop, 0.32, 0.321)
    assert monitor.current(0.33) == 0.0
    assert monitor.recent(0.33) == pytest.approx(0.15)
    # Later turns, each late, count back as far as twice the largest of them reaches.
    _turn(monitor, loop, 0.5, 0.54)
    _turn(monitor, loop, 0.54, 0.55)
    assert monitor.current(0.56) == pytest.approx(0.04)
    # A turn busy right now counts as far as it is late already.
    assert monitor.mark_turn(cast(Any, loop), 0.6)
    assert monitor.current(0.7) == pytest.approx(0.1)
