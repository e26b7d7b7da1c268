"""SessionResumption: one test per rule, on fast-forwarded loop time (looptime)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from loguru import logger

from realtime_resumption.handles import HandleRef
from realtime_resumption.redaction import redact
from realtime_resumption.resumption import (
    DEFAULT_GO_AWAY_NOTICE,
    MIN_DEADLINE_MARGIN,
    MoveDecision,
    ResumptionOptions,
    SessionResumption,
)

pytestmark = pytest.mark.looptime

# Long enough that a redacted form never shows them whole.
H1 = "first-handle-secret-0001"
H2 = "second-handle-secret-0002"
H3 = "third-handle-secret-0003"
HANDLES = (H1, H2, H3)

Outcome = Literal["ok", "fail", "hang", "cancel", "raise-sync", "not-awaitable"]


@dataclass(frozen=True)
class Call:
    at: float
    handle: str
    move: MoveDecision | None


class Rig:
    """Plays the driver: answers reconnect calls from a script and records what happened."""

    def __init__(
        self,
        *outcomes: Outcome,
        took: float = 0.0,
        options: ResumptionOptions | None = None,
        failed_callback_raises: bool = False,
        spread_draw: Callable[[], float] | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.t0 = self.loop.time()
        self.outcomes = list(outcomes)
        self.took = took
        self.failed_callback_raises = failed_callback_raises
        self.calls: list[Call] = []
        self.cancelled = 0
        self.raised: list[Exception] = []
        self.failures: list[Exception] = []
        self.helper = SessionResumption(
            self.reconnect, options, self.on_failed, spread_draw=spread_draw or (lambda: 0.5)
        )

    def now(self) -> float:
        return self.loop.time() - self.t0

    async def until(self, t: float) -> None:
        """Lets loop time run to ``t`` seconds after the rig was made."""
        await asyncio.sleep(max(self.t0 + t - self.loop.time(), 0.0))
        await settle()

    def reconnect(self, handle: str) -> Awaitable[None]:
        self.calls.append(Call(self.now(), handle, self.helper.last_move))
        outcome = self.outcomes.pop(0) if self.outcomes else "ok"
        if outcome == "raise-sync":
            error = ConnectionRefusedError(f"refused {handle}")
            self.raised.append(error)
            raise error
        if outcome == "not-awaitable":
            return None  # type: ignore[return-value]
        return self._answer(handle, outcome)

    async def _answer(self, handle: str, outcome: Outcome) -> None:
        try:
            if outcome == "hang":
                await asyncio.Event().wait()
            if self.took:
                await asyncio.sleep(self.took)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if outcome == "fail":
            error = ConnectionError(f"handle {handle} refused")
            self.raised.append(error)
            raise error
        if outcome == "cancel":
            raise asyncio.CancelledError

    def on_failed(self, error: Exception) -> None:
        self.failures.append(error)
        if self.failed_callback_raises:
            raise RuntimeError("the callback broke")

    @property
    def times(self) -> list[float]:
        return [call.at for call in self.calls]


async def settle() -> None:
    """Runs every callback that is ready now, without moving loop time."""
    for _ in range(20):
        await asyncio.sleep(0)


def other_tasks() -> set[asyncio.Task[Any]]:
    return {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}


@pytest.fixture(autouse=True)
def logs() -> Iterator[list[str]]:
    """Every log line of the test; afterwards, no handle may appear whole in any of them."""
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="DEBUG")
    yield lines
    logger.remove(sink)
    for handle in HANDLES:
        assert not [line for line in lines if handle in line]


@pytest.fixture(autouse=True)
async def loop_errors() -> AsyncIterator[None]:
    """Fails a test whose helper let an error reach the event loop's handler."""
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    yield
    assert errors == []


def approx(value: float) -> Any:
    return pytest.approx(value, abs=1e-6)


# Resumable points


async def test_go_away_at_a_resumable_point_moves_at_once() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(30)
    assert rig.helper.reconnecting
    await settle()
    assert rig.calls == [Call(0.0, H1, MoveDecision(H1, "after-turn", "planned", 1))]
    assert not rig.helper.reconnecting
    assert rig.helper.is_idle


async def test_resumable_point_after_a_turn_moves_at_once() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.turn_ended()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(30)
    await settle()
    assert [(c.handle, c.move) for c in rig.calls] == [
        (H1, MoveDecision(H1, "after-turn", "planned", 1))
    ]


async def test_go_away_with_a_handle_issued_during_a_turn_waits() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(54.9)
    assert rig.calls == []
    assert not rig.helper.reconnecting
    assert not rig.helper.is_idle


async def test_turn_started_ends_the_current_resumable_point() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.turn_started()
    rig.helper.go_away(60)
    await settle()
    assert rig.calls == []


async def test_not_resumable_update_keeps_the_previous_handle_as_fallback() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.resumption_update(H2, False)
    assert rig.helper.latest_handle == H1
    rig.helper.go_away(60)
    await rig.until(54.9)
    assert rig.calls == []
    await rig.until(55)
    assert [(c.at, c.handle, c.move) for c in rig.calls] == [
        (approx(55), H1, MoveDecision(H1, "mid-turn", "deadline", 1))
    ]


async def test_not_resumable_update_without_a_handle_ends_the_resumable_point() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.resumption_update(None, False)
    assert rig.helper.latest_handle == H1
    rig.helper.go_away(60)
    await settle()
    assert rig.calls == []


async def test_omitted_resumable_means_not_resumable() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.resumption_update(H2, None)
    assert rig.helper.latest_handle == H1
    rig.helper.go_away(60)
    await settle()
    assert rig.calls == []


async def test_not_resumable_handle_is_a_last_resort_when_there_is_no_other() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, False)
    assert rig.helper.latest_handle == H1
    rig.helper.go_away(60)
    await settle()
    assert rig.calls == []
    assert rig.helper.connection_lost() is True
    await settle()
    assert [c.move for c in rig.calls] == [MoveDecision(H1, "mid-turn", "lost", 1)]


@pytest.mark.parametrize("empty", [None, ""])
async def test_resumable_update_without_a_handle_changes_nothing(empty: str | None) -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.resumption_update(empty, True)
    assert rig.helper.latest_handle == H1
    rig.helper.go_away(60)
    await settle()
    assert [c.move for c in rig.calls] == [MoveDecision(H1, "after-turn", "planned", 1)]


@pytest.mark.parametrize("empty", [None, ""])
async def test_resumable_update_without_a_handle_is_no_resumable_point(empty: str | None) -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.turn_ended()
    rig.helper.go_away(60)
    rig.helper.resumption_update(empty, True)
    await settle()
    assert rig.calls == []
    await rig.until(55)
    assert [c.move for c in rig.calls] == [MoveDecision(H1, "mid-turn", "deadline", 1)]


@pytest.mark.parametrize("empty", [None, ""])
async def test_an_empty_handle_is_never_used_to_resume(empty: str | None) -> None:
    rig = Rig()
    rig.helper.resumption_update(empty, True)
    rig.helper.resumption_update(empty, False)
    assert rig.helper.latest_handle is None
    rig.helper.go_away(10)
    await rig.until(100)
    assert rig.helper.connection_lost() is False
    await settle()
    assert rig.calls == []
    assert rig.helper.is_idle


async def test_resumable_handle_during_a_turn_is_the_fallback_for_a_lost_connection() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.turn_started()
    rig.helper.resumption_update(H2, True)
    assert rig.helper.latest_handle == H2
    assert rig.helper.connection_lost() is True
    await settle()
    assert [c.move for c in rig.calls] == [MoveDecision(H2, "mid-turn", "lost", 1)]


async def test_turn_ended_then_resumable_handle_moves_in_the_same_loop_tick() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(10)
    rig.helper.turn_ended()
    assert not rig.helper.reconnecting
    rig.helper.resumption_update(H2, True)
    assert rig.helper.reconnecting
    assert rig.helper.last_move == MoveDecision(H2, "after-turn", "planned", 1)
    await asyncio.sleep(0)
    assert [(c.at, c.handle) for c in rig.calls] == [(approx(10), H2)]


async def test_turn_ended_alone_does_not_move() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    rig.helper.turn_ended()
    await rig.until(54.9)
    assert rig.calls == []


async def test_turn_started_again_before_the_handle_keeps_waiting() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    rig.helper.turn_ended()
    rig.helper.turn_started()
    rig.helper.resumption_update(H2, True)
    await rig.until(54.9)
    assert rig.calls == []
    await rig.until(55)
    assert [(c.at, c.move) for c in rig.calls] == [
        (approx(55), MoveDecision(H2, "mid-turn", "deadline", 1))
    ]


async def test_repeated_turn_started_changes_nothing() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.turn_started()
    rig.helper.turn_started()
    rig.helper.turn_ended()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await settle()
    assert [c.move for c in rig.calls] == [MoveDecision(H1, "after-turn", "planned", 1)]


async def test_repeated_turn_ended_changes_nothing() -> None:
    rig = Rig()
    rig.helper.turn_ended()
    rig.helper.resumption_update(H1, True)
    rig.helper.turn_ended()
    rig.helper.turn_ended()
    rig.helper.go_away(60)
    await settle()
    assert [c.move for c in rig.calls] == [MoveDecision(H1, "after-turn", "planned", 1)]


async def test_repeated_turn_ended_does_not_end_a_turn_started_later() -> None:
    rig = Rig()
    rig.helper.turn_ended()
    rig.helper.turn_ended()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await settle()
    assert rig.calls == []


async def test_first_resumable_handle_after_a_go_away_with_none_moves() -> None:
    rig = Rig()
    rig.helper.go_away(60)
    await rig.until(3)
    rig.helper.resumption_update(H1, True)
    await settle()
    assert [(c.at, c.move) for c in rig.calls] == [
        (approx(3), MoveDecision(H1, "after-turn", "planned", 1))
    ]


# The deadline fallback


@pytest.mark.parametrize(
    ("notice", "margin_option", "fallback_at"),
    [
        (60.0, 5.0, 55.0),  # notice / 3 = 20, clamped to the 5 s margin
        (30.0, 5.0, 25.0),  # 10 -> 5
        (9.0, 5.0, 6.0),  # 3, inside the bounds
        (2.4, 5.0, 1.4),  # 0.8, raised to MIN_DEADLINE_MARGIN
        (30.0, 20.0, 20.0),  # 10, inside a wider margin
        (90.0, 20.0, 70.0),  # 30 -> 20
    ],
)
async def test_deadline_fallback_time(
    notice: float, margin_option: float, fallback_at: float
) -> None:
    rig = Rig(options=ResumptionOptions(deadline_margin=margin_option))
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(notice)
    await rig.until(fallback_at / 2)
    rig.helper.resumption_update(H2, True)  # still mid-turn: the newer fallback
    await rig.until(fallback_at - 0.001)
    assert rig.calls == []
    await rig.until(fallback_at)
    assert [(c.at, c.move) for c in rig.calls] == [
        (approx(fallback_at), MoveDecision(H2, "mid-turn", "deadline", 1))
    ]


def test_min_deadline_margin_is_a_second() -> None:
    assert MIN_DEADLINE_MARGIN == 1.0


@pytest.mark.parametrize("notice", [1.0, 0.9, 0.5, 0.0, -3.0])
async def test_notice_no_longer_than_the_margin_moves_at_once(notice: float) -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(notice)
    assert rig.helper.reconnecting
    await settle()
    assert [(c.at, c.move) for c in rig.calls] == [
        (0.0, MoveDecision(H1, "mid-turn", "deadline", 1))
    ]


async def test_short_notice_at_a_resumable_point_is_a_planned_move() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(0.5)
    await settle()
    assert [c.move for c in rig.calls] == [MoveDecision(H1, "after-turn", "planned", 1)]


@pytest.mark.parametrize("time_left", [None, math.nan, math.inf, -math.inf])
async def test_go_away_without_a_figure_assumes_the_default_notice(time_left: float | None) -> None:
    assert DEFAULT_GO_AWAY_NOTICE == 30.0
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(time_left)
    await rig.until(24.9)
    assert rig.calls == []
    await rig.until(25)
    assert rig.times == [approx(25)]


async def test_deadline_with_no_handle_lets_the_notice_lapse() -> None:
    rig = Rig()
    rig.helper.go_away(10)
    await rig.until(6.67)
    assert rig.helper.is_idle
    rig.helper.resumption_update(H1, True)  # too late for this notice: no move
    await rig.until(20)
    assert rig.calls == []
    assert rig.helper.connection_lost() is True
    await settle()
    assert [c.move for c in rig.calls] == [MoveDecision(H1, "after-turn", "lost", 1)]


# A second notice


async def test_second_go_away_that_lapses_leaves_no_timer_behind() -> None:
    rig = Rig()
    rig.helper.go_away(60)
    rig.helper.go_away(0)  # no handle: this notice lapses at once, and so does the first
    assert rig.helper.is_idle
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    await rig.until(100)
    assert rig.calls == []


async def test_second_go_away_while_waiting_starts_no_second_move() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(10)
    rig.helper.go_away(60)
    await rig.until(200)
    assert rig.times == [approx(55)]


async def test_shorter_second_go_away_brings_the_fallback_forward() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(10)
    rig.helper.go_away(12)  # closes at 22; margin clamp(4, 1, 5) = 4
    await rig.until(200)
    assert rig.times == [approx(18)]


async def test_longer_second_go_away_never_postpones_the_fallback() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(30)
    await rig.until(5)
    rig.helper.go_away(60)
    await rig.until(200)
    assert rig.times == [approx(25)]


async def test_second_go_away_with_a_smaller_margin_keeps_the_earlier_fallback() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)  # fallback at 55
    await rig.until(50)
    rig.helper.go_away(9)  # closes at 59, its own fallback at 56
    await rig.until(200)
    assert rig.times == [approx(55)]


# A move in flight


async def test_go_away_during_a_move_starts_no_second_attempt() -> None:
    rig = Rig(took=3.0)
    rig.helper.resumption_update(H1, True)
    assert rig.helper.connection_lost() is True
    await rig.until(1)
    rig.helper.go_away(0.1)
    rig.helper.resumption_update(H2, True)
    await rig.until(100)
    assert rig.times == [0.0]


async def test_connection_lost_during_a_move_returns_true_and_starts_no_second_attempt() -> None:
    rig = Rig(took=3.0)
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(1)
    assert rig.helper.reconnecting
    assert rig.helper.connection_lost() is True
    assert rig.helper.connection_lost() is True
    await rig.until(100)
    assert [c.move for c in rig.calls] == [MoveDecision(H1, "after-turn", "planned", 1)]


async def test_connection_lost_while_waiting_moves_at_once_and_drops_the_notice() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(7)
    assert rig.helper.connection_lost() is True
    await rig.until(200)
    assert [(c.at, c.move) for c in rig.calls] == [
        (approx(7), MoveDecision(H1, "mid-turn", "lost", 1))
    ]


# Connection lost


async def test_connection_lost_with_no_handle_returns_false_and_starts_nothing() -> None:
    rig = Rig()
    assert rig.helper.connection_lost() is False
    assert not rig.helper.reconnecting
    assert rig.helper.is_idle
    assert other_tasks() == set()
    await rig.until(100)
    assert rig.calls == []


async def test_connection_lost_with_no_handle_drops_a_pending_notice() -> None:
    rig = Rig()
    rig.helper.go_away(60)
    assert rig.helper.connection_lost() is False
    assert rig.helper.is_idle
    rig.helper.resumption_update(H1, True)  # the notice was for the lost connection
    await rig.until(100)
    assert rig.calls == []


async def test_connection_lost_at_a_resumable_point_resumes_from_it() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    assert rig.helper.connection_lost() is True
    assert rig.helper.reconnecting
    await settle()
    assert [c.move for c in rig.calls] == [MoveDecision(H1, "after-turn", "lost", 1)]


# Retries


async def test_retries_follow_the_delays_and_report_the_last_error_once() -> None:
    rig = Rig("fail", "fail", "fail", "fail", "fail")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(7.4)
    assert rig.times == [0.0, approx(0.5), approx(1.5), approx(3.5)]
    assert rig.failures == []
    assert rig.helper.reconnecting
    await rig.until(7.5)
    assert rig.times == [0.0, approx(0.5), approx(1.5), approx(3.5), approx(7.5)]
    assert [c.move.attempt for c in rig.calls if c.move] == [1, 2, 3, 4, 5]
    assert {c.handle for c in rig.calls} == {H1}
    assert len(rig.failures) == 1
    assert rig.failures[0] is rig.raised[-1]
    assert rig.helper.stopped
    assert not rig.helper.reconnecting
    assert rig.helper.is_idle


async def test_each_attempt_is_cancelled_at_the_attempt_timeout() -> None:
    rig = Rig("hang", "hang", "hang", "hang", "hang")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(57.4)
    assert rig.times == [0.0, approx(10.5), approx(21.5), approx(33.5), approx(47.5)]
    assert rig.cancelled == 4
    assert rig.failures == []
    await rig.until(57.5)
    assert rig.cancelled == 5
    assert len(rig.failures) == 1
    assert isinstance(rig.failures[0], TimeoutError)
    assert other_tasks() == set()


async def test_custom_delays_and_timeout_are_followed_exactly() -> None:
    options = ResumptionOptions(retry_delays=(0.25, 3.0), attempt_timeout=2.0)
    rig = Rig("hang", "hang", options=options)
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(7.2)
    assert rig.times == [approx(0.25), approx(5.25)]
    assert rig.failures == []
    await rig.until(7.25)
    assert len(rig.failures) == 1


async def test_success_on_a_later_attempt_stops_the_rest() -> None:
    rig = Rig("fail", "hang", "ok")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(1000)
    assert rig.times == [0.0, approx(0.5), approx(11.5)]
    assert rig.helper.last_move == MoveDecision(H1, "after-turn", "lost", 3)
    assert rig.failures == []
    assert not rig.helper.stopped
    assert not rig.helper.reconnecting
    assert rig.helper.is_idle


async def test_after_giving_up_every_call_is_a_no_op() -> None:
    rig = Rig("fail", "fail", "fail", "fail", "fail")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(100)
    assert len(rig.calls) == 5
    rig.helper.resumption_update(H2, True)
    rig.helper.turn_started()
    rig.helper.turn_ended()
    rig.helper.go_away(10)
    assert rig.helper.connection_lost() is False
    await rig.until(200)
    assert len(rig.calls) == 5
    assert len(rig.failures) == 1
    assert rig.helper.latest_handle == H1
    assert rig.helper.is_idle


# Misbehaving callbacks


@pytest.mark.parametrize("outcome", ["raise-sync", "not-awaitable", "cancel"])
async def test_a_misbehaving_reconnect_is_a_failed_attempt(outcome: Outcome) -> None:
    rig = Rig(outcome, "ok")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(100)
    assert rig.times == [0.0, approx(0.5)]
    assert rig.failures == []
    assert not rig.helper.reconnecting
    assert rig.helper.is_idle


async def test_a_reconnect_that_never_returns_is_cut_and_retried() -> None:
    rig = Rig("hang", "ok")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(100)
    assert rig.times == [0.0, approx(10.5)]
    assert rig.cancelled == 1
    assert not rig.helper.reconnecting


async def test_an_on_reconnect_failed_that_raises_is_logged_and_contained(
    logs: list[str],
) -> None:
    rig = Rig("fail", failed_callback_raises=True, options=ResumptionOptions(retry_delays=(0,)))
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(10)
    assert len(rig.failures) == 1
    assert rig.helper.stopped
    assert rig.helper.is_idle
    assert other_tasks() == set()
    assert any("on_reconnect_failed raised RuntimeError" in line for line in logs)


async def test_dispose_inside_on_reconnect_failed_is_harmless() -> None:
    rig = Rig("fail", options=ResumptionOptions(retry_delays=(0,)))
    rig.helper = SessionResumption(
        rig.reconnect, rig.helper.options, lambda _e: rig.helper.dispose()
    )
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(10)
    assert rig.helper.stopped
    assert rig.helper.is_idle
    assert other_tasks() == set()


async def test_failures_are_logged_with_the_handle_redacted(logs: list[str]) -> None:
    rig = Rig("fail", "ok")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(10)
    failed = [line for line in logs if "attempt 1" in line and "failed" in line]
    assert len(failed) == 1
    assert "ConnectionError" in failed[0]
    assert H1[:4] in failed[0]  # the autouse fixture checks it is never whole


# dispose


async def test_dispose_while_waiting_for_a_resumable_point() -> None:
    rig = Rig()
    rig.helper.turn_started()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    rig.helper.dispose()
    assert rig.helper.is_idle
    rig.helper.turn_ended()
    rig.helper.resumption_update(H2, True)
    await rig.until(1000)
    assert rig.calls == []
    assert other_tasks() == set()


async def test_dispose_during_an_attempt_cancels_it() -> None:
    rig = Rig("hang")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(3)
    assert rig.helper.reconnecting
    rig.helper.dispose()
    assert not rig.helper.reconnecting
    await settle()
    assert rig.cancelled == 1
    assert rig.helper.is_idle
    assert other_tasks() == set()
    await rig.until(1000)
    assert rig.times == [0.0]
    assert rig.failures == []


async def test_dispose_during_a_retry_delay_stops_the_retries() -> None:
    rig = Rig("fail", "fail")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(0.7)
    assert rig.times == [0.0, approx(0.5)]
    rig.helper.dispose()
    await settle()
    assert rig.helper.is_idle
    assert other_tasks() == set()
    await rig.until(1000)
    assert len(rig.calls) == 2
    assert rig.failures == []


async def test_dispose_before_the_move_task_ran() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    rig.helper.dispose()
    await settle()
    assert rig.calls == []
    assert rig.helper.is_idle
    assert other_tasks() == set()


async def test_after_dispose_every_call_is_a_no_op() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.dispose()
    rig.helper.dispose()
    rig.helper.resumption_update(H2, True)
    rig.helper.go_away(5)
    rig.helper.turn_started()
    rig.helper.turn_ended()
    assert rig.helper.connection_lost() is False
    assert not rig.helper.reconnecting
    assert rig.helper.stopped
    await rig.until(100)
    assert rig.calls == []
    assert rig.helper.latest_handle == H1


async def test_dispose_from_inside_reconnect_abandons_the_attempt() -> None:
    rig = Rig()

    async def reconnect(handle: str) -> None:
        helper.dispose()
        await asyncio.sleep(1)

    helper = SessionResumption(reconnect, None, rig.on_failed)
    helper.resumption_update(H1, True)
    helper.connection_lost()
    await rig.until(100)
    assert helper.is_idle
    assert rig.failures == []
    assert other_tasks() == set()


# After a successful move


async def test_after_a_move_old_resumable_points_no_longer_count() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(1)
    assert len(rig.calls) == 1
    assert rig.helper.latest_handle == H1
    rig.helper.go_away(60)  # the new connection's notice, before its first update
    await rig.until(2)
    assert len(rig.calls) == 1
    rig.helper.resumption_update(H2, True)
    await settle()
    assert [(c.at, c.move) for c in rig.calls][1:] == [
        (approx(2), MoveDecision(H2, "after-turn", "planned", 1))
    ]


async def test_after_a_move_the_deadline_fallback_works_on_the_new_connection() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(1)
    rig.helper.turn_started()
    rig.helper.resumption_update(H2, True)
    rig.helper.go_away(30)
    await rig.until(100)
    assert [(c.at, c.move) for c in rig.calls] == [
        (0.0, MoveDecision(H1, "after-turn", "planned", 1)),
        (approx(26), MoveDecision(H2, "mid-turn", "deadline", 1)),
    ]


async def test_updates_during_a_move_are_fallbacks_not_resumable_points() -> None:
    rig = Rig(took=2.0)
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(1)
    rig.helper.resumption_update(H2, True)
    assert rig.helper.latest_handle == H2
    await rig.until(3)
    assert not rig.helper.reconnecting
    rig.helper.go_away(60)
    await settle()
    assert len(rig.calls) == 1
    assert rig.helper.connection_lost() is True
    await settle()
    assert [c.move for c in rig.calls][1:] == [MoveDecision(H2, "mid-turn", "lost", 1)]


async def test_a_new_move_after_a_lost_connection_move() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    assert rig.helper.connection_lost() is True
    await rig.until(1)
    rig.helper.resumption_update(H2, True)
    assert rig.helper.connection_lost() is True
    await settle()
    assert [c.handle for c in rig.calls] == [H1, H2]


# Values


def test_move_decision_repr_redacts_the_handle() -> None:
    text = repr(MoveDecision(H1, "after-turn", "planned", 2))
    assert H1 not in text
    assert f"handle={redact(H1)}" in text
    assert "kind='after-turn'" in text
    assert "reason='planned'" in text
    assert "attempt=2" in text


def test_options_defaults() -> None:
    options = ResumptionOptions()
    assert options.deadline_margin == 5.0
    assert options.retry_delays == (0.0, 0.5, 1.0, 2.0, 4.0)
    assert options.attempt_timeout == 10.0

    async def reconnect(handle: str) -> None:
        raise AssertionError("never called")

    assert SessionResumption(reconnect).options == options


def test_options_are_frozen_and_store_a_tuple() -> None:
    options = ResumptionOptions(retry_delays=[0, 1])  # type: ignore[arg-type]
    assert options.retry_delays == (0, 1)
    assert hash(options) == hash(ResumptionOptions(retry_delays=(0, 1)))
    with pytest.raises(AttributeError):
        options.attempt_timeout = 3  # type: ignore[misc]


# Each message names its field as a word (the docstring's promise); the wording is free.
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"deadline_margin": -1.0}, "deadline_margin"),
        ({"deadline_margin": math.nan}, "deadline_margin"),
        ({"deadline_margin": math.inf}, "deadline_margin"),
        ({"deadline_margin": 0.5}, "deadline_margin"),
        ({"retry_delays": ()}, "retry_delays"),
        ({"retry_delays": (0.0, -0.5)}, r"retry_delays\[1\]"),
        ({"retry_delays": (math.nan,)}, r"retry_delays\[0\]"),
        ({"retry_delays": (math.inf,)}, r"retry_delays\[0\]"),
        ({"attempt_timeout": 0.0}, "attempt_timeout"),
        ({"attempt_timeout": -2.0}, "attempt_timeout"),
        ({"attempt_timeout": math.nan}, "attempt_timeout"),
        ({"attempt_timeout": math.inf}, "attempt_timeout"),
        ({"storm_spread": -0.5}, "storm_spread"),
        ({"storm_spread": math.nan}, "storm_spread"),
        ({"storm_spread": math.inf}, "storm_spread"),
    ],
)
def test_invalid_options_raise_value_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=rf"(?<!\w){field}(?!\w)"):
        ResumptionOptions(**kwargs)


def test_deadline_margin_of_exactly_the_minimum_is_accepted() -> None:
    assert ResumptionOptions(deadline_margin=MIN_DEADLINE_MARGIN).deadline_margin == 1.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"deadline_margin": "5"}, "deadline_margin"),
        ({"attempt_timeout": None}, "attempt_timeout"),
        ({"retry_delays": (True,)}, r"retry_delays\[0\]"),
        ({"storm_spread": "3"}, "storm_spread"),
    ],
)
def test_non_numeric_options_raise_type_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(TypeError, match=rf"(?<!\w){field}(?!\w)"):
        ResumptionOptions(**kwargs)


# One helper for the whole session: forget


async def test_forget_after_giving_up_serves_the_next_server_session() -> None:
    rig = Rig("fail", "fail", "fail", "fail", "fail")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(100)
    assert rig.helper.stopped
    rig.helper.forget()
    assert not rig.helper.stopped
    assert rig.helper.latest_handle is None
    assert rig.helper.last_move is None
    assert rig.helper.connection_lost() is False  # the old session's handle is gone
    rig.helper.resumption_update(H2, True)
    rig.helper.go_away(10)
    await settle()
    assert [call.handle for call in rig.calls[5:]] == [H2]


async def test_forget_abandons_a_move_in_flight_and_a_pending_notice() -> None:
    rig = Rig("hang")
    rig.helper.resumption_update(H1, True)
    rig.helper.turn_started()
    rig.helper.go_away(30)
    rig.helper.connection_lost()
    await rig.until(3)
    assert rig.helper.reconnecting
    rig.helper.forget()
    assert not rig.helper.reconnecting
    await settle()
    assert rig.cancelled == 1
    assert rig.helper.is_idle
    assert other_tasks() == set()
    # No turn is carried over: the new session's first resumable handle is a point.
    rig.helper.resumption_update(H2, True)
    await rig.until(1000)
    assert rig.times == [0.0]
    rig.helper.go_away(10)
    await settle()
    assert [call.handle for call in rig.calls] == [H1, H2]
    assert rig.failures == []


async def test_forget_at_a_resumable_point_leaves_no_point_behind() -> None:
    rig = Rig()
    rig.helper.resumption_update(H1, True)
    rig.helper.forget()
    rig.helper.go_away(10)  # the forgotten point is no place to move from
    await rig.until(100)
    assert rig.calls == []
    assert not rig.helper.reconnecting
    assert rig.helper.is_idle


async def test_a_move_abandoned_by_forget_never_drops_the_next_move() -> None:
    rig = Rig("hang", "hang")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await settle()
    rig.helper.forget()
    rig.helper.resumption_update(H2, True)
    assert rig.helper.connection_lost()
    await settle()  # the abandoned move unwinds here
    assert rig.cancelled == 1
    assert rig.helper.reconnecting
    assert rig.helper.connection_lost()  # the new move is still the one in flight
    await settle()
    assert [call.handle for call in rig.calls] == [H1, H2]
    rig.helper.dispose()
    await settle()
    assert other_tasks() == set()


# State a fresh or reset helper reports


async def test_a_new_helper_reports_no_move_and_no_stop() -> None:
    rig = Rig()
    assert rig.helper.last_move is None
    assert rig.helper.stopped is False
    assert rig.helper.reconnecting is False
    rig.helper.dispose()
    rig.helper.forget()
    assert rig.helper.stopped is False


async def test_move_tasks_are_named_for_the_helper_and_numbered() -> None:
    rig = Rig("ok", "hang")
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await settle()
    rig.helper.connection_lost()
    await settle()
    assert [task.get_name() for task in other_tasks()] == ["realtime-resumption-move-2"]
    rig.helper.dispose()
    await settle()


# Failures: secrets and handle references


async def test_an_on_reconnect_failed_error_quoting_the_handle_is_logged_redacted(
    logs: list[str],
) -> None:
    def on_failed(error: Exception) -> None:
        raise RuntimeError(f"could not report {H1}")

    rig = Rig("fail", options=ResumptionOptions(retry_delays=(0,)))
    rig.helper = SessionResumption(rig.reconnect, rig.helper.options, on_failed)
    rig.helper.resumption_update(H1, True)
    rig.helper.connection_lost()
    await rig.until(10)
    raised = [line for line in logs if "on_reconnect_failed raised" in line]
    assert len(raised) == 1
    assert redact(H1) in raised[0]  # the autouse fixture checks H1 is never whole


async def test_failed_moves_with_handle_references_are_reported() -> None:
    ref = HandleRef(1)
    seen: list[HandleRef] = []
    failures: list[Exception] = []

    async def reconnect(handle: HandleRef) -> None:
        seen.append(handle)
        raise ConnectionError("refused")

    helper = SessionResumption(reconnect, ResumptionOptions(retry_delays=(0, 1)), failures.append)
    helper.resumption_update(ref, True)
    assert helper.connection_lost()
    await asyncio.sleep(5)
    assert seen == [ref, ref]
    assert [type(error) for error in failures] == [ConnectionError]
    assert helper.stopped


# Storm spread (README: a random share of up to storm_spread, never more than a quarter of
# the time before the deadline fallback; off by default)


async def test_storm_spread_off_moves_at_once_and_draws_nothing() -> None:
    draws: list[float] = []

    def draw() -> float:
        draws.append(0.5)
        return 0.5

    rig = Rig(spread_draw=draw)
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    assert rig.helper.reconnecting
    await settle()
    assert rig.times == [0.0]
    assert draws == []


@pytest.mark.parametrize(("spread", "draw", "wait"), [(4.0, 0.5, 2.0), (1.0, 0.5, 0.5)])
async def test_storm_spread_waits_its_drawn_share(spread: float, draw: float, wait: float) -> None:
    rig = Rig(options=ResumptionOptions(storm_spread=spread), spread_draw=lambda: draw)
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    assert not rig.helper.reconnecting
    await rig.until(wait - 0.01)
    assert rig.calls == []
    await rig.until(wait)
    assert [(c.at, c.move) for c in rig.calls] == [
        (approx(wait), MoveDecision(H1, "after-turn", "planned", 1))
    ]
    await rig.until(100)
    assert len(rig.calls) == 1
    assert rig.helper.is_idle


async def test_storm_spread_is_capped_at_a_quarter_of_the_time_before_the_fallback() -> None:
    rig = Rig(options=ResumptionOptions(storm_spread=100.0), spread_draw=lambda: 0.5)
    await rig.until(50)
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(20)  # fallback 15 s ahead: the spread is at most 3.75 s
    await rig.until(50 + 1.875 - 0.01)
    assert rig.calls == []
    await rig.until(50 + 1.875)
    assert [(c.at, c.move) for c in rig.calls] == [
        (approx(51.875), MoveDecision(H1, "after-turn", "planned", 1))
    ]


async def test_storm_spread_with_a_zero_draw_moves_at_once() -> None:
    rig = Rig(options=ResumptionOptions(storm_spread=3.0), spread_draw=lambda: 0.0)
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    assert rig.helper.reconnecting
    await settle()
    assert rig.times == [0.0]


@pytest.mark.parametrize("draw", [1.0, 1.5, -0.1, math.nan, math.inf])
async def test_a_spread_draw_outside_zero_to_one_is_refused(draw: float) -> None:
    rig = Rig(options=ResumptionOptions(storm_spread=3.0), spread_draw=lambda: draw)
    rig.helper.resumption_update(H1, True)
    with pytest.raises(ValueError, match="spread_draw"):
        rig.helper.go_away(60)
    rig.helper.dispose()


async def test_a_turn_started_during_the_spread_waits_for_the_next_point() -> None:
    rig = Rig(options=ResumptionOptions(storm_spread=4.0), spread_draw=lambda: 0.5)
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(1)
    rig.helper.turn_started()
    await rig.until(10)
    assert rig.calls == []  # the spread ended mid-turn: no move
    rig.helper.turn_ended()
    rig.helper.resumption_update(H2, True)
    await settle()
    assert [(c.at, c.move) for c in rig.calls] == [
        (approx(10), MoveDecision(H2, "after-turn", "planned", 1))
    ]


async def test_a_lost_connection_during_the_spread_moves_once_and_clears_it() -> None:
    rig = Rig(options=ResumptionOptions(storm_spread=4.0), spread_draw=lambda: 0.5)
    rig.helper.resumption_update(H1, True)
    rig.helper.go_away(60)
    await rig.until(1)
    assert rig.helper.connection_lost()
    await rig.until(100)
    assert [(c.at, c.move) for c in rig.calls] == [
        (approx(1), MoveDecision(H1, "after-turn", "lost", 1))
    ]
    assert rig.helper.is_idle
    # The next notice at the new connection's point is spread again.
    rig.helper.resumption_update(H2, True)
    rig.helper.go_away(60)
    await rig.until(102)
    assert [(c.at, c.handle, c.move) for c in rig.calls[1:]] == [
        (approx(102), H2, MoveDecision(H2, "after-turn", "planned", 1))
    ]
