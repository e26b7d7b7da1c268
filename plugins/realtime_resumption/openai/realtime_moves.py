"""``RealtimeMoves``: how an OpenAI Realtime call moves to a new session, carried out.

When to move is ``realtime_timing``'s (``MoveTiming``: a cap notice, then the next turn
boundary, else the deadline fallback); the move itself is ``MoveMachine``'s (``move_machine``:
dial, settle, switch, retries under ``failures.classify`` and the ``RetryPolicy``, the failure
budget). This part feeds the machine what the call does (a move due, a lost session, a turn
that begins during a move, a request) and carries out its actions: every move rebuilds, as
OpenAI Realtime keeps nothing across sessions, so each attempt dials a session given the
configuration and the conversation (``session_handover``) and the switch gives it what the old
one held uncommitted, the items it never confirmed, an answer it owed, then the input held
during the move.

Opening the call is a move of the same machine with no incumbent (``open``): ``connect``,
``reconnect`` before any session, and a takeover of a stored call dial through the one driver
(``_run``), each failed dial retried as the failure policy says (the options'
``retry_delays``; 401/403 end it at once). A connect is not reported as a move; a takeover is
(its report begun by ``realtime_persistence``). Its dial installs nothing: the caller does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from loguru import logger

from realtime_resumption.failures import CloseMeaning, Stage
from realtime_resumption.move_machine import (
    Abandon,
    Action,
    BackoffOver,
    Begin,
    Dial,
    Dispose,
    Due,
    Failed,
    Gate,
    GiveUp,
    InputGate,
    Lost,
    MoveMachine,
    Retried,
    Served,
    Settle,
    Settled,
    Switch,
    Wait,
)
from realtime_resumption.move_machine import SetupOk as MoveSetupOk
from realtime_resumption.move_machine import TurnStarted as MoveTurnStarted
from realtime_resumption.move_reports import (
    HandleKind,
    MoveInProgress,
    MoveLog,
    MoveOutcome,
    MoveReason,
)
from realtime_resumption.move_timing import (
    Abandoned,
    ConnectionLost,
    MoveNow,
    Requested,
    Switched,
)
from realtime_resumption.openai.call_state import CallState, OpenSession
from realtime_resumption.openai.conversation_state import HeldItem
from realtime_resumption.openai.realtime_connection import RealtimeConnection
from realtime_resumption.openai.realtime_dialling import RealtimeDialler
from realtime_resumption.openai.realtime_sends import RealtimeSends
from realtime_resumption.openai.realtime_timing import RealtimeTiming
from realtime_resumption.openai.session_handover import Handover, plan_handover
from realtime_resumption.transport import (
    ConnectError,
    GenerationClose,
    SessionLostError,
    TransportError,
    TransportErrorEvent,
)

SWITCH_MARGIN: Final = 0.5
"""Seconds before the cap by which a forced move switches, even mid-answer: the old session
may close a little before the transport's count (its clock started first)."""


def _reading(code: int | None) -> CloseMeaning:
    """OpenAI's close codes, read for the failure policy: none refuses a resumption point
    (there is none), so every close is a plain close, retried."""
    return CloseMeaning.CLOSED


@dataclass
class _Opening:
    """The opening under way: what its dials give a session, and how it ended."""

    conversation: Sequence[HeldItem]
    done: asyncio.Future[OpenSession]
    failure: ConnectError | None = None
    """The last dial's failure (what a connect that gives up raises)."""
    dial: asyncio.Task[Any] | None = None
    session: OpenSession | None = None
    """The session a dial set up, until the opening's caller installs it."""


class RealtimeMoves:
    """The call's moves (see the module documentation). ``cap``: the seconds the service
    gives a session (None: none counted). ``on_end`` runs when the call ends
    here on its own (every attempt failed, or the call cannot go on in this process): the
    store's record is ended."""

    def __init__(
        self,
        state: CallState,
        dialler: RealtimeDialler,
        sends: RealtimeSends,
        *,
        cap: float | None,
        on_end: Callable[[], None],
    ) -> None:
        self._s = state
        self._dialler = dialler
        self._sends = sends
        self._on_end = on_end
        self._machine = self._new_machine()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        """The moves' own timers: the pause between attempts, a deferred switch."""
        self._log = MoveLog()
        self._timing = RealtimeTiming(
            state,
            sends,
            cap=cap,
            log=self._log,
            due=self._move_now,
            turn_started=self._turn_started,
        )
        self._move: MoveInProgress | None = None
        self._opening: _Opening | None = None
        self._candidate: OpenSession | None = None
        """The session a move set up, until the switch to it."""
        self._source: OpenSession | None = None
        """The session whose conversation the move in progress carries (the incumbent, or
        the session that was lost)."""
        self._seeded: Handover | None = None
        """What the candidate was given at its dial."""
        self._move_done: asyncio.Future[None] | None = None
        """Resolved when the move in progress switched or the session was lost
        (``reconnect`` waits on it)."""
        self._cut_by_loss = False
        """The loss that starts the next move cut an answer."""
        self._switch_deferred = False
        """A forced move's switch waits for the answer the old session is giving."""

    def _new_machine(self, delays: tuple[float, ...] | None = None) -> MoveMachine:
        options = self._s.options
        return MoveMachine(delays or options.retry_delays, options.retry_policy, _reading)

    # --- what the others read ---------------------------------------------------------------

    @property
    def log(self) -> MoveLog:
        """The session's moves: counts per outcome and the latest reports."""
        return self._log

    @property
    def timing(self) -> RealtimeTiming:
        """When the call moves: what the others tell of turn boundaries goes there."""
        return self._timing

    @property
    def source(self) -> OpenSession | None:
        """The session whose conversation the move in progress carries, if one runs."""
        return self._source

    @property
    def candidate(self) -> OpenSession | None:
        """The session a move set up, until the switch to it."""
        return self._candidate

    @property
    def opened(self) -> OpenSession | None:
        """The session an opening set up, until its caller installs it (its events feed its
        state meanwhile, as a session's being dialled do)."""
        return self._opening.session if self._opening is not None else None

    def serving(self) -> bool:
        """A session serves the call, or a move brings the next one up."""
        return self._s.session is not None or self._source is not None

    # --- opening the call -------------------------------------------------------------------

    async def open(
        self,
        reason: MoveReason,
        conversation: Sequence[HeldItem] = (),
        *,
        delays: tuple[float, ...] | None = None,
    ) -> OpenSession:
        """Open the call's first session (``connect``, ``reconnect`` before any session, a
        takeover: ``reason``) as a move of the machine with no incumbent, carried out by the
        driver every move runs on: each ``Dial`` is one dial of a session whose state starts
        with ``conversation``, retried as the failure policy says (``delays`` the pauses
        before each attempt, one attempt per entry; None: the options' ``retry_delays``).
        Returns the session, for the caller to install; raises the last dial's
        ``ConnectError`` when the machine gives up (a refusal of the credentials at once),
        ``TransportError`` when ``disconnect`` overtook it. The session's moves start with a
        machine of their own once it is open."""
        if self._opening is not None:
            raise TransportError("connect is already under way")
        opening = self._opening = _Opening(conversation, asyncio.get_running_loop().create_future())
        self._machine = self._new_machine(delays)
        due = Due(
            self._s.now(),
            reason,
            None,
            HandleKind.NONE,
            incumbent=False,
            can_rebuild=True,
            forced=True,
        )
        try:
            self._run(self._machine.send(due))
            session = await opening.done
            if self._s.closed:
                raise TransportError("the transport was disconnected while it connected")
        except BaseException:
            if opening.session is not None:
                # The dial served, but the connect ended (cancelled, or disconnected): its
                # session is closed, not leaked.
                self._s.own(opening.session.conn.close(), "close")
            raise
        finally:
            self._opening = None
            # Cancelled (the caller's bound): no dial or pause of it goes on.
            if opening.dial is not None:
                opening.dial.cancel()
            self._cancel_timer("backoff")
            if not self._s.closed:
                # No probation for the first session, and a budget of its own for its moves.
                self._machine = self._new_machine()
        return session

    async def _open_attempt(self, opening: _Opening) -> None:
        """One dial of the opening: its session is the opening's, or the failure goes back
        to the machine."""
        try:
            session = await self._dialler.open(opening.conversation)
        except ConnectError as exc:
            opening.failure = exc
            if self._opening is opening:
                self._run(self._machine.send(Failed(self._s.now(), Stage.DIAL, error=exc)))
            return
        except Exception as exc:
            # Not a dial's failure (no policy retries it): the connect raises it.
            if not opening.done.done():
                opening.done.set_exception(exc)
            return
        if self._opening is not opening or opening.done.done():
            await session.conn.close()  # the opening ended meanwhile
            return
        # Nothing served meanwhile: no settle and no switch; the machine only hears that the
        # move is over.
        self._machine.send(MoveSetupOk())
        self._machine.send(Settled(self._s.now()))
        opening.session = session
        opening.done.set_result(session)

    def _end_opening(self, opening: _Opening, why: str) -> None:
        """The machine gave the opening up: the connect raises the last dial's failure."""
        if not opening.done.done():
            error = opening.failure or SessionLostError(why)
            opening.done.set_exception(error)

    # --- the serving session ----------------------------------------------------------------

    def install(self, session: OpenSession) -> None:
        """``session`` serves the call from now on: input goes to it, and its cap counts."""
        self._s.session = session
        self._timing.count_cap(session)
        self._timing.update_boundary()

    def connection_closed(
        self, conn: RealtimeConnection, code: int | None, reason: str | None
    ) -> None:
        """A connection ended: the serving session's end starts a move (``lost``)."""
        session = self._s.session
        if session is None or session.conn is not conn:
            return  # a candidate's close reaches its settle; an old session's means nothing
        if self._switch_deferred:
            # The old session closed before its answer ended: switch to the candidate now.
            self._deferred_switch()
            return
        s = self._s
        s.session = None
        self.closed_event(session, code, reason)
        if s.closed:
            return
        now = s.now()
        if s.tracker.answer_in_progress:
            # The end cut the answer: reported as interrupted; the new session answers again.
            s.apply(s.tracker.interrupted(now))
            self._cut_by_loss = True
        self._source = self._source or session
        self._timing.send(ConnectionLost(), new_session=True)
        lost = Lost(now, code, None, HandleKind.NONE, can_rebuild=True)
        self._run(self._machine.send(lost))

    def closed_event(self, session: OpenSession, code: int | None, reason: str | None) -> None:
        """Report the end of ``session`` (``on_connection_lifecycle``)."""
        self._s.emit(
            "on_connection_lifecycle",
            GenerationClose(
                session.attempt, self._dialler.transport_generation, code, (reason or "")[:200]
            ),
        )

    def served(self) -> None:
        """The serving session finished an answer: it outlived its probation."""
        self._run(self._machine.send(Served()))

    def answer_finished(self) -> None:
        """The answer a deferred switch waits for is over: switch now."""
        if self._switch_deferred:
            self._deferred_switch()

    def request(self) -> asyncio.Future[None]:
        """``reconnect``: a move to a new session, now; the future resolves once it serves
        (or fails with ``SessionLostError``). A move already under way is the one asked for."""
        if self._move_done is None:
            self._move_done = asyncio.get_running_loop().create_future()
            if not self._machine.moving:
                self._timing.send(Requested(MoveReason.REQUESTED))
        return self._move_done

    # --- what the timing decides ---------------------------------------------------------

    def _move_now(self, action: MoveNow[str]) -> None:
        due = Due(
            self._s.now(),
            action.reason,
            None,
            HandleKind.NONE,
            incumbent=self._s.session is not None,
            can_rebuild=True,
            forced=action.forced,
        )
        self._run(self._machine.send(due))

    def _turn_started(self) -> None:
        if self._machine.moving:
            self._run(self._machine.send(MoveTurnStarted()))

    # --- carrying out the machine's actions -------------------------------------------------

    def _run(self, actions: list[Action]) -> None:
        """Carry out the move machine's actions, in order (an opening's too: see ``open``)."""
        opening = self._opening
        for action in actions:
            if isinstance(action, Gate):
                if opening is None:
                    self._gate(action.gate)
            elif isinstance(action, Begin):
                # An opening reports itself (a takeover as a move, a connect not at all).
                if opening is None:
                    self._begin(action.reason)
            elif isinstance(action, Dial):
                if self._move is not None:
                    self._move.attempt(None, HandleKind.NONE)
                if opening is not None:
                    opening.dial = self._s.own(self._open_attempt(opening), "open")
                else:
                    self._s.own(self._attempt(), "dial")
            elif isinstance(action, Settle):
                self._s.own(self._settle(action.seconds), "settle")
            elif isinstance(action, Switch):
                self._switch_when_answered()
            elif isinstance(action, Wait):
                self._set_timer(
                    "backoff",
                    self._s.now() + action.seconds,
                    lambda: self._run(self._machine.send(BackoffOver())),
                )
            elif isinstance(action, Abandon):
                self._abandon()
            elif isinstance(action, Retried):
                error: Exception = TransportError(f"a move's attempt failed: {action.why}")
                if opening is not None and opening.failure is not None:
                    error = opening.failure  # a connect's retried dial, as Gemini's reports it
                self._s.emit("on_error", TransportErrorEvent(error, recoverable=True))
            elif isinstance(action, GiveUp):
                if opening is not None:
                    self._end_opening(opening, action.why)
                else:
                    self._lose(action.why)
            else:
                # Break, RefusedWhileOpen, RollBack: the reading above never asks for them.
                logger.debug("{}: no use for {!r}", self._s.callbacks, action)

    def _gate(self, gate: InputGate) -> None:
        self._sends.set_gate(gate)
        if gate is InputGate.HELD and self._move is not None:
            self._move.input_stopped(self._s.now())

    def _begin(self, reason: MoveReason) -> None:
        now = self._s.now()
        self._source = self._source or self._s.session
        self._move = self._log.begin(reason, None, HandleKind.NONE, now)
        if self._s.session is None:
            self._move.incumbent_gone()
            self._move.input_stopped(now)
        if self._cut_by_loss:
            self._move.turn_was_cut()
            self._cut_by_loss = False
        logger.info("{}: moving to a new session ({})", self._s.callbacks, reason)
        self._s.emit("on_move_started", reason, HandleKind.NONE)

    async def _attempt(self) -> None:
        """One attempt of the move: a new session, given the configuration and the
        conversation of the session the move carries."""
        source = self._source
        assert source is not None
        plan = self._plan(source)
        try:
            candidate = await self._dialler.open(plan.seed.items)
        except ConnectError as exc:
            self._run(self._machine.send(Failed(self._s.now(), Stage.DIAL, error=exc)))
            return
        if self._s.closed or self._machine.move is None:
            await candidate.conn.close()  # abandoned or disposed meanwhile
            return
        for event in plan.seed.events:
            candidate.conn.post(event)
        self._candidate, self._seeded = candidate, plan
        self._run(self._machine.send(MoveSetupOk()))

    async def _settle(self, seconds: float) -> None:
        """Until the candidate says something, closes, or ``seconds`` pass."""
        candidate = self._candidate
        assert candidate is not None
        try:
            await candidate.conn.wait_for(lambda _: True, seconds)
        except TimeoutError:
            pass
        except ConnectError:
            self._candidate = None
            failed = Failed(self._s.now(), Stage.SETTLING, code=candidate.conn.close_code)
            self._run(self._machine.send(failed))
            return
        if self._candidate is candidate:
            self._run(self._machine.send(Settled(self._s.now())))

    def _plan(self, source: OpenSession) -> Handover:
        s = self._s
        return plan_handover(
            source.state,
            unconfirmed=list(s.unconfirmed.values()),
            response_requested=s.response_requested,
            budget_tokens=s.options.seed_budget_tokens,
            input_format=s.config.input_format,
            flavour=s.flavour,
        )

    # --- the switch -------------------------------------------------------------------------

    def _switch_when_answered(self) -> None:
        """A move forced by the cap's deadline waits for the answer the old session is giving,
        as long as the cap allows (``SWITCH_MARGIN`` before it); any other switches now."""
        old = self._s.session
        move = self._move
        if (
            old is not None
            and old.closes_at is not None
            and move is not None
            and move.reason is MoveReason.DEADLINE
            and old.state.response_in_progress is not None
            and self._s.now() < old.closes_at - SWITCH_MARGIN
        ):
            self._switch_deferred = True
            self._set_timer("switch", old.closes_at - SWITCH_MARGIN, self._deferred_switch)
            return
        self._switch()

    def _deferred_switch(self) -> None:
        self._cancel_timer("switch")
        if self._switch_deferred and self._candidate is not None and not self._s.closed:
            self._switch_deferred = False
            self._switch()

    def _switch(self) -> None:
        """The candidate serves the call from now on: the old session stops taking input at
        once and closes; the candidate gets what the old one held uncommitted, the items it
        never confirmed, an answer it owed, then the input held during the move."""
        s, sends = self._s, self._sends
        candidate, seeded, source = self._candidate, self._seeded, self._source
        assert candidate is not None and seeded is not None and source is not None
        self._candidate = self._seeded = self._source = None
        old, s.session = s.session, None
        if old is not None:
            self.closed_event(old, 1000, "moved")
            s.own(old.conn.close(), "close")
        if s.tracker.answer_in_progress:
            # A forced move cut an answer the old session was giving.
            s.apply(s.tracker.interrupted(s.now()))
            if self._move is not None:
                self._move.turn_was_cut()
        plan = self._plan(source)
        s.session = candidate
        seeded_ids = {item.id for item in seeded.seed.items}
        for event in plan.seed.events:
            # What the conversation gained since the dial (a forced move's incumbent).
            if event["item"]["id"] not in seeded_ids:
                sends.post(candidate, event, None)
        appends = sends.replay_audio(candidate, plan.audio, {"type": "input_audio_buffer.append"})
        for event in plan.resend:
            sends.post(candidate, event, None)
        s.response_requested = False
        if plan.answer:
            sends.post(candidate, {"type": "response.create"}, None)
        self._orphan_calls(plan)
        sends.set_gate(InputGate.OPEN)
        held = sends.take_held()
        for event, audio in held:
            sends.post(candidate, event, audio)
        per_ms = s.bytes_per_ms
        self.finish_report(
            MoveOutcome.REBUILT,
            messages_buffered=len(held),
            messages_replayed=len(plan.resend) + appends,
            audio_seconds_held=sum(len(a) for _, a in held if a is not None) / per_ms / 1000,
            audio_seconds_replayed=len(plan.audio) / per_ms / 1000,
        )
        replayed_turn = plan.answer or bool(held)
        self._timing.send(Switched(resumed=False, replayed_turn=replayed_turn), new_session=True)
        self.install(candidate)
        self._finish_move(None)
        if not candidate.conn.open:
            # It closed after it settled (a deferred switch waited): a loss like any other,
            # on probation, so it counts as a failed attempt of this move.
            self.connection_closed(candidate.conn, candidate.conn.close_code, None)

    def _orphan_calls(self, plan: Handover) -> None:
        """Open function calls the seed left out: their output would be refused."""
        calls = self._s.calls
        carried = {item.call_id for item in plan.seed.items if item.call_id is not None}
        lost = [call_id for call_id in calls if call_id not in carried]
        for call_id in lost:
            del calls[call_id]
            self._s.orphaned.add(call_id)
        if lost:
            self._s.emit("on_tool_call_cancel", lost)

    def _abandon(self) -> None:
        """A turn began on the incumbent during a planned move: the candidate is given up,
        and the timing waits for the next boundary (or the deadline)."""
        candidate, self._candidate = self._candidate, None
        self._seeded = None
        self._source = None
        if candidate is not None:
            self._s.own(candidate.conn.close(), "close")
        self._timing.send(Abandoned(self._s.now(), None))

    # --- reports ----------------------------------------------------------------------------

    def report_takeover(self, input_stopped_at: float) -> MoveInProgress:
        """Begin the report of a takeover (``realtime_persistence``): no incumbent, the input
        stopped when the record was last written."""
        move = self._move = self._log.begin(
            MoveReason.TAKEOVER, None, HandleKind.NONE, self._s.now()
        )
        move.incumbent_gone()
        move.input_stopped(input_stopped_at)
        self._s.emit("on_move_started", MoveReason.TAKEOVER, HandleKind.NONE)
        return move

    def drop_report(self) -> None:
        """Forget the move in progress unreported (its opening was cancelled)."""
        self._move = None

    def finish_report(self, outcome: MoveOutcome, **figures: Any) -> None:
        """Finish the report of the move in progress with ``outcome`` (``on_move``)."""
        move, self._move = self._move, None
        if move is not None:
            self._s.emit("on_move", move.finish(outcome, self._s.now(), **figures))

    def _finish_move(self, error: BaseException | None) -> None:
        done, self._move_done = self._move_done, None
        if done is not None and not done.done():
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

    # --- ending -----------------------------------------------------------------------------

    def _lose(self, why: str) -> None:
        """Every attempt failed: the call is over."""
        s = self._s
        error = SessionLostError(why)
        self._finish_move(error)
        self.finish_report(MoveOutcome.LOST, error=why)
        self.stop()
        candidate, self._candidate = self._candidate, None
        if candidate is not None:
            s.own(candidate.conn.close(), "close")
        self._on_end()
        s.emit("on_error", TransportErrorEvent(error, recoverable=False))
        s.emit("on_close", None, why)
        if s.telemetry is not None:
            s.telemetry.close()

    def end_here(self, error: Exception, code: int, why: str) -> None:
        """The call cannot go on in this process (the service refuses this client, or another
        process drives the call now): the session closes, nothing moves, ``on_error`` (not
        recoverable) then ``on_close`` say why."""
        s = self._s
        if s.closed:
            return
        if self._move is not None:
            self.finish_report(MoveOutcome.LOST, error=why)
        self.stop()
        for session in (s.session, self._candidate):
            if session is not None:
                s.own(session.conn.close(), "close")
        if s.session is not None:
            self.closed_event(s.session, code, why)
        s.session = self._candidate = self._source = None
        self._on_end()
        s.emit("on_error", TransportErrorEvent(error, recoverable=False))
        s.emit("on_close", code, why)
        if s.telemetry is not None:
            s.telemetry.close()

    def stop(self) -> None:
        """Nothing moves or ticks any more (disconnect, or the session was lost)."""
        self._s.stop()
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._machine.send(Dispose())
        self._timing.stop()
        self._sends.clear_held()
        self._finish_move(SessionLostError("the transport was disconnected"))
        opening = self._opening
        if opening is not None and not opening.done.done():
            opening.done.set_exception(
                TransportError("the transport was disconnected while it connected")
            )

    def take_candidate(self) -> OpenSession | None:
        """The session a move set up, given up (``disconnect`` closes it)."""
        candidate, self._candidate = self._candidate, None
        return candidate

    # --- timers -----------------------------------------------------------------------------

    def _set_timer(self, key: str, at: float, fire: Callable[[], None]) -> None:
        self._cancel_timer(key)
        self._timers[key] = asyncio.get_running_loop().call_at(at, fire)

    def _cancel_timer(self, key: str) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
