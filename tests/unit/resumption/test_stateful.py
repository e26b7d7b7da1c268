"""SessionResumption driven by random call sequences on fast-forwarded loop time.

Invariants: at most one move in flight; a planned move only resumes from a handle issued
resumable while no turn was in progress (any other handle only when the deadline or a lost
connection forced it), and a move's handle kind matches the resumable point the rules give;
on_reconnect_failed at most once; after dispose nothing is scheduled and nothing runs.

Each example runs a series of sessions: disposing one (and checking nothing of it survives)
starts the next, so a dispose or a give-up does not end the exploration.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Literal, TypeVar

import looptime
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from loguru import logger

from realtime_resumption.resumption import ResumptionOptions, SessionResumption

Outcome = Literal["ok", "fail", "hang"]
T = TypeVar("T")

OPTIONS = ResumptionOptions(deadline_margin=5.0, retry_delays=(0.0, 0.5, 2.0), attempt_timeout=3.0)

# How the driver answers each reconnect call in turn; "ok" at once when the script runs out.
SCRIPTS = st.lists(
    st.tuples(st.sampled_from(["ok", "fail", "hang"]), st.sampled_from([0.0, 0.2, 4.0])),
    max_size=6,
)


class Session:
    """One helper and the driver's view of it: what the rules say it may do."""

    def __init__(self, script: list[tuple[Outcome, float]]) -> None:
        self.helper = SessionResumption(self.reconnect, OPTIONS, self.on_failed)
        self.script = list(script)
        self.issued = 0
        self.any_handle = False
        self.in_turn = False
        # Handles issued resumable while no turn was in progress: the only places to plan a move.
        self.point_handles: set[str] = set()
        # The current resumable point by the rules: such a handle, with no turn, no update
        # marked not resumable and no move since.
        self.point: str | None = None
        self.in_flight = 0
        self.most_in_flight = 0
        self.calls = 0
        self.failures = 0
        self.disposed = False
        self.steps = 0
        self.violations: list[str] = []

    async def reconnect(self, handle: str) -> None:
        move = self.helper.last_move
        self.calls += 1
        if self.disposed:
            self.violations.append("reconnect called after dispose")
        if move is None or move.handle != handle:
            self.violations.append(f"last_move {move!r} does not describe the call")
        elif move.reason == "planned" and move.kind != "after-turn":
            self.violations.append(f"planned move from a fallback handle: {move}")
        elif move.kind == "after-turn" and handle not in self.point_handles:
            self.violations.append(f"handle issued during a turn taken for a point: {move}")
        elif move.attempt == 1 and (move.kind == "after-turn") != (handle == self.point):
            self.violations.append(f"{move} disagrees with the resumable point {self.point!r}")
        if move is not None and move.attempt == 1:
            self.point = None
        outcome, took = self.script.pop(0) if self.script else ("ok", 0.0)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if outcome == "hang":
                await asyncio.Event().wait()
            await asyncio.sleep(took)
            if outcome == "fail":
                raise ConnectionError("refused")
        finally:
            self.in_flight -= 1

    def on_failed(self, error: Exception) -> None:
        self.failures += 1
        if self.disposed:
            self.violations.append("on_reconnect_failed called after dispose")


class ResumptionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = looptime.new_event_loop()
        logger.disable("realtime_resumption")  # thousands of steps: keep the run quick
        self.session = Session([])

    def run(self, action: Callable[[], T]) -> T:
        """Runs ``action`` in the loop, then every callback it made ready (no time passes)."""

        self.session.steps += 1

        async def step() -> T:
            result = action()
            for _ in range(6):
                await asyncio.sleep(0)
            return result

        return self.loop.run_until_complete(step())

    # Rules.

    @initialize(script=SCRIPTS)
    def first_session(self, script: list[tuple[Outcome, float]]) -> None:
        self.session = Session(script)

    @rule(
        with_handle=st.sampled_from(["new", "new", "new", "none", "empty"]),
        resumable=st.sampled_from([True, True, False, None]),
    )
    def resumption_update(self, with_handle: str, resumable: bool | None) -> None:
        s = self.session
        handle: str | None = None
        if with_handle == "new":
            s.issued += 1
            handle = f"handle-{s.issued:04d}-secret"
            s.any_handle = True
            if resumable and not s.in_turn:
                s.point_handles.add(handle)
                if not s.helper.reconnecting:
                    s.point = handle
        elif with_handle == "empty":
            handle = ""
        if not resumable:
            s.point = None
        self.run(lambda: s.helper.resumption_update(handle, resumable))

    @rule()
    def turn_started(self) -> None:
        self.session.in_turn = True
        self.session.point = None
        self.run(self.session.helper.turn_started)

    @rule()
    def turn_ended(self) -> None:
        self.session.in_turn = False
        self.run(self.session.helper.turn_ended)

    @rule(
        time_left=st.none()
        | st.floats(min_value=-5.0, max_value=120.0)
        | st.sampled_from([math.nan, math.inf])
    )
    def go_away(self, time_left: float | None) -> None:
        self.run(lambda: self.session.helper.go_away(time_left))

    @rule()
    def connection_lost(self) -> None:
        helper = self.session.helper
        stopped_before = helper.stopped
        moving_before = helper.reconnecting
        started = self.run(helper.connection_lost)
        if stopped_before or not self.session.any_handle:
            assert started is False
        if moving_before:
            assert started is True

    @rule(seconds=st.floats(min_value=0.0, max_value=40.0))
    def time_passes(self, seconds: float) -> None:
        self.loop.run_until_complete(asyncio.sleep(seconds))
        self.run(lambda: None)

    # Not too early: a session needs some steps to get anywhere worth disposing.
    @precondition(lambda self: self.session.steps >= 12)
    @rule(script=SCRIPTS)
    def dispose_and_start_over(self, script: list[tuple[Outcome, float]]) -> None:
        old = self.session
        self.run(old.helper.dispose)
        old.disposed = True
        calls = old.calls
        assert old.helper.is_idle
        assert not old.helper.reconnecting
        assert asyncio.all_tasks(self.loop) == set()
        old.helper.go_away(0)
        assert old.helper.connection_lost() is False
        self.loop.run_until_complete(asyncio.sleep(1000))
        assert old.calls == calls
        assert old.violations == []
        self.session = Session(script)

    # Invariants.

    @invariant()
    def no_violation(self) -> None:
        assert self.session.violations == []

    @invariant()
    def at_most_one_move_in_flight(self) -> None:
        assert self.session.most_in_flight <= 1

    @invariant()
    def reconnect_failed_at_most_once(self) -> None:
        s = self.session
        assert s.failures <= 1
        if s.failures:
            assert s.helper.stopped
            assert not s.helper.reconnecting

    def teardown(self) -> None:
        self.run(self.session.helper.dispose)
        assert asyncio.all_tasks(self.loop) == set()
        self.loop.close()
        logger.enable("realtime_resumption")


ResumptionMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_resumption_state_machine = ResumptionMachine.TestCase
