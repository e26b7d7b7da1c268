"""``RealtimeTiming``: when an OpenAI Realtime call moves, decided by ``MoveTiming``.

The service sends no notice before its cap closes a session, so the notice is a timer:
``move_margin`` before the cap, counted from the session's ``session.created``, ``MoveTiming``
hears a ``GoAway``. It hears too when the call leaves or reaches a turn boundary (no answer
under way or owed, the user not speaking, nothing of the client's unconfirmed, no function
call open, no input held), a lost session, a switch, a move given up for a turn, a request.
Its timers run on the loop; its ``MoveNow`` goes to the moves (``due``), which carry it out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from realtime_resumption.move_reports import MoveLog
from realtime_resumption.move_timing import (
    CancelTimer,
    GoAway,
    MoveNow,
    MoveTiming,
    ResumptionOptions,
    StartTimer,
    TimerExpired,
    TimerKind,
    TurnEnded,
    TurnStarted,
)
from realtime_resumption.move_timing import Dispose as TimingDispose
from realtime_resumption.move_timing import Event as TimingEvent
from realtime_resumption.openai.call_state import CallState, OpenSession
from realtime_resumption.openai.realtime_sends import RealtimeSends


class RealtimeTiming:
    """When the call moves (see the module documentation). ``cap``: the seconds the service
    gives a session (None: none counted); ``log`` hears of each cap notice; ``due`` gets each
    move ``MoveTiming`` decides on; ``turn_started`` hears when the call leaves a turn
    boundary (a move under way may yield to the turn)."""

    def __init__(
        self,
        state: CallState,
        sends: RealtimeSends,
        *,
        cap: float | None,
        log: MoveLog,
        due: Callable[[MoveNow[str]], None],
        turn_started: Callable[[], None],
    ) -> None:
        self._s = state
        self._sends = sends
        self._cap = cap
        self._log = log
        self._due = due
        self._turn_started = turn_started
        options = state.options
        self._timing: MoveTiming[str] = MoveTiming(
            ResumptionOptions(
                deadline_margin=options.forced_margin,
                retry_delays=options.retry_delays,
                attempt_timeout=options.connect_timeout,
            ),
            attempts=False,
            rebuilds=True,
        )
        self._timers: dict[TimerKind | str, asyncio.TimerHandle] = {}
        self._at_boundary: bool | None = None

    def count_cap(self, session: OpenSession) -> None:
        """Tell the timing of ``session``'s cap ``move_margin`` before it (a notice the
        service never sends: the cap counts from ``session.created``)."""
        cap = self._cap
        if cap is None or session.created_at is None:
            return
        at = session.created_at + cap - self._s.options.move_margin
        closes_at = session.closes_at = session.created_at + cap

        def notice() -> None:
            self._timers.pop("cap", None)
            if self._s.session is session and not self._s.closed:
                now = self._s.now()
                self._log.go_away(closes_at - now, now)
                self.send(GoAway(now, closes_at - now, rebuild_when_quiet=True))

        self._set_timer("cap", at, notice)

    def update_boundary(self) -> None:
        """Tell the timing when the call leaves or reaches a turn boundary (see the module
        documentation); leaving one is told to the moves too."""
        s = self._s
        session = s.session
        if session is None:
            return
        at = (
            session.state.at_turn_boundary
            and not s.response_requested
            and not s.unconfirmed
            and not s.calls
            and not s.tracker.answer_in_progress
            and not self._sends.held
        )
        if at == self._at_boundary:
            return
        self._at_boundary = at
        if at:
            self.send(TurnEnded())
            return
        self.send(TurnStarted())
        self._turn_started()

    def send(self, event: TimingEvent[str], *, new_session: bool = False) -> None:
        """Tell the timing ``event`` and carry out what it answers. ``new_session``: the
        session that serves changed (a loss, a switch): its boundary is told afresh."""
        if new_session:
            self._at_boundary = None
        for action in self._timing.send(event):
            if isinstance(action, StartTimer):
                self._set_timer(action.kind, action.at, self._fired(action.kind))
            elif isinstance(action, CancelTimer):
                timer = self._timers.pop(action.kind, None)
                if timer is not None:
                    timer.cancel()
            elif isinstance(action, MoveNow):
                self._due(action)

    def stop(self) -> None:
        """Nothing is timed any more (the call ended)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._timing.send(TimingDispose())

    def _fired(self, kind: TimerKind) -> Callable[[], None]:
        def fired() -> None:
            self._timers.pop(kind, None)
            self.send(TimerExpired(kind, self._s.now()))

        return fired

    def _set_timer(self, key: TimerKind | str, at: float, fire: Callable[[], None]) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._timers[key] = asyncio.get_running_loop().call_at(at, fire)
