"""The event loop's lag, sampled by a timer: the largest recent lateness, the current one
included, and nothing scheduled while no connection uses it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest

from realtime_resumption.gemini import loop_lag
from realtime_resumption.gemini.loop_lag import INTERVAL, WINDOW, LoopLag


class _Timer:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when, self.callback, self.cancelled = when, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class _Clock:
    """The two loop methods LoopLag uses, on a clock the test moves (a stand-in: a real
    loop cannot be made late on purpose without blocking it)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[_Timer] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(when, callback)
        self.timers.append(timer)
        return timer

    def run_due_timer_at(self, now: float) -> None:
        """The loop gets to its pending timer at ``now`` (late if ``now`` is past its time)."""
        (timer,) = [t for t in self.timers if not t.cancelled]
        self.timers.remove(timer)
        self.now = now
        timer.callback()


def _monitor() -> tuple[LoopLag, _Clock]:
    clock = _Clock()
    return LoopLag(cast(Any, clock)), clock


def test_a_late_sample_is_the_recent_lag_until_it_leaves_the_window() -> None:
    monitor, clock = _monitor()
    monitor.acquire()
    assert monitor.recent() == 0.0
    clock.run_due_timer_at(INTERVAL + 0.25)  # the loop was busy for a quarter second
    assert monitor.recent() == pytest.approx(0.25)
    # On-time samples after it leave the spike in the window...
    for _ in range(10):
        (timer,) = clock.timers
        clock.run_due_timer_at(timer.when)
    assert monitor.recent() == pytest.approx(0.25)
    # ...until it is older than the window.
    while clock.now < INTERVAL + 0.25 + WINDOW + INTERVAL:
        (timer,) = clock.timers
        clock.run_due_timer_at(timer.when)
    assert monitor.recent() == pytest.approx(0.0)


def test_when_the_largest_lag_leaves_the_window_the_next_largest_is_the_recent_one() -> None:
    monitor, clock = _monitor()
    monitor.acquire()
    clock.run_due_timer_at(INTERVAL + 0.3)
    for _ in range(3):
        (timer,) = clock.timers
        clock.run_due_timer_at(timer.when)
    (timer,) = clock.timers
    clock.run_due_timer_at(timer.when + 0.1)
    assert monitor.recent() == pytest.approx(0.3)
    # On-time samples until the 0.3 s spike is past the window: the 0.1 s one is still in it.
    while clock.now < INTERVAL + 0.3 + WINDOW + INTERVAL:
        (timer,) = clock.timers
        clock.run_due_timer_at(timer.when)
    assert monitor.recent() == pytest.approx(0.1)


def test_a_loop_busy_right_now_shows_in_the_recent_lag() -> None:
    monitor, clock = _monitor()
    monitor.acquire()
    clock.now = INTERVAL + 0.4  # the sample is due, the loop has not got to it
    assert monitor.recent() == pytest.approx(0.4)


def test_sampling_runs_only_while_someone_uses_it() -> None:
    monitor, clock = _monitor()
    monitor.acquire()
    monitor.acquire()
    monitor.release()
    assert [t for t in clock.timers if not t.cancelled]
    monitor.release()
    assert not [t for t in clock.timers if not t.cancelled]
    assert monitor.recent() == 0.0
    monitor.release()  # a stray release changes nothing
    monitor.acquire()
    assert len([t for t in clock.timers if not t.cancelled]) == 1


async def test_one_monitor_per_running_loop() -> None:
    assert loop_lag.for_running_loop() is loop_lag.for_running_loop()
    assert isinstance(loop_lag.for_running_loop(), LoopLag)
