"""Moving a Gemini Live session to a new connection: the driver of the move's state machine.

:class:`Rotation` belongs to one :class:`~realtime_resumption.gemini.GeminiLiveTransport`. It
feeds the decider (``move_timing``) what the transport sees (handles, turns, ``goAway``, a
setup change, a request, how its moves ended) so it picks the moment and the handle, runs the
decider's timers, feeds the move's state machine (``move_machine``, which holds every state
and transition of a move) and carries out the actions it returns: dial, settle, wait, switch
(``gemini.switchover``), give up. Every move ends
with one outcome, reported as a :class:`~realtime_resumption.move_reports.MoveReport`:

- *Planned* (``goAway``; a config change; a reconnect the framework asked for): the replacement
  is dialled while the incumbent keeps serving and taking input (make-before-break); once it is
  set up and has settled, sends and the receive side switch to it at once, the input the
  resumed session lacks is replayed, and the incumbent is closed. When the provider refuses a
  resume while the incumbent is open (close 1011 right after the setup), the incumbent is
  closed first and the dial repeated (break-before-make), and every later move of the session
  does the same. A ``goAway`` that reaches a connection before anything was said on it since
  its switch moves at once (the point after the resume is as good as a resumable one), where
  the standalone helper (``SessionResumption``) would wait for the connection's first
  resumable handle or the deadline.
- *Lost* (the connection closed without notice): the session resumes from the fallback handle;
  input is held meanwhile (``OutboxLimits``) and flushed after.
- *Rebuilt*: a refused or expired handle means the server session is gone; a fresh session is
  opened and seeded with the conversation history the transport kept. Without a handle or any
  history the session is lost. With compression off, a ``goAway`` on a resumed connection
  whose deadline is no later than the one its move answered means the server session is
  ending (the 15-minute cap): the next move rebuilds rather than resume into it.

Failures follow one policy (``failures``): retried with the same handle after a
jittered delay, rebuilt, or fatal (401/403 at once). A connection that dies within the
probation after its switch is a failed attempt of its move. The session's budget bounds the
failed attempts in count and in time; when it, or the attempts of a streak (one per
``ResumptionOptions.retry_delays`` entry, each bounded by ``attempt_timeout``), run out, the
session is lost: ``on_move`` (outcome ``lost``), then ``on_error`` (``SessionLostError``), then
``on_close``.

Input across a move: every send goes to the session's outbox (``outbox``), which
replays what the resumed session lacks by the rules its module states (*Exact*, *Arrival*,
*Answered*; silence is not replayed). While a move is under way the incumbent takes only audio
and video: a text turn or a tool result waits for the new connection, so the incumbent starts
no answer the switch would cut.

Tool calls: a planned move waits for a resumable point, which never comes while a call awaits
its result. When a move cuts a turn anyway (the deadline, a loss), its open calls are orphaned:
a resumed session does not continue a cut answer, so their results are refused
(``ToolCallOrphanedError``), ``on_tool_call_cancel`` names them, and their answer ends as
``tool_call_orphaned``; the framework may ask again.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from loguru import logger

from realtime_resumption import move_machine as m
from realtime_resumption import move_timing as t
from realtime_resumption.failures import RetryPolicy, Stage
from realtime_resumption.gemini import preopen
from realtime_resumption.gemini.close_codes import read_close
from realtime_resumption.gemini.endpoints import ENDPOINTS
from realtime_resumption.gemini.preopen import SetupGate
from realtime_resumption.gemini.tasks import cancel_and_wait
from realtime_resumption.gemini.watchdog import ResumeWatchdog
from realtime_resumption.move_reports import (
    HandleKind,
    MoveInProgress,
    MoveLog,
    MoveOutcome,
    MoveReason,
    MoveReport,
    scrub,
)
from realtime_resumption.move_timing import ResumptionOptions
from realtime_resumption.redaction import redact
from realtime_resumption.resumption import MoveTimers
from realtime_resumption.transport import (
    DialAbandonedError,
    MoveStats,
    SessionLostError,
    SetupRefusedError,
    TransportError,
    TransportErrorEvent,
)

if TYPE_CHECKING:
    from realtime_resumption.gemini.connection import LiveConnection
    from realtime_resumption.gemini.dialling import Dialler
    from realtime_resumption.gemini.state import TransportState
    from realtime_resumption.gemini.switchover import Switchover
    from realtime_resumption.handles import HandleRef

DEFAULT_RETRY_BUDGET: Final = 20
"""Failed connection attempts a session may spend in total, over all its moves (see
``RetryPolicy``)."""

CONFIG_MOVE_WAIT: Final = 600.0
"""Seconds a configuration change waits for a resumable point before it moves anyway: a bound
of its own, not a connection's life (which depends on the model, ten minutes to an hour; a
connection that ends sooner moves the session through its goAway or its close)."""

_WAIT_BOUND_SLACK: Final = 5.0


@dataclass(frozen=True)
class Opened:
    """How :meth:`Rotation.open` opened the session."""

    handle: HandleRef | None
    """The handle the session resumed from; None: a fresh session."""
    dials: int
    """Dials made, the successful one included."""
    error: str | None
    """Why the last failed dial failed (secrets redacted); None when none failed."""


@dataclass
class _Opening:
    """The opening under way: what one of its dials calls, and what its dials did."""

    dial: Callable[[HandleRef | None], Awaitable[None]]
    started_with: HandleRef | None
    may_rebuild: bool
    on_retry: Callable[[BaseException], None] | None
    dials: int = 0
    failure: BaseException | None = None
    opened: bool = False
    handle: HandleRef | None = None


class Rotation:
    """The move machinery of one transport; see the module documentation.

    ``replay_turn`` re-sends the user's unanswered turn (the resume watchdog's first remedy);
    False when there is none.
    """

    def __init__(
        self,
        session: TransportState,
        dialler: Dialler,
        switchover: Switchover,
        *,
        options: ResumptionOptions,
        policy: RetryPolicy,
        resume_watchdog: float | None,
        enabled: bool,
        replay_turn: Callable[[], bool],
    ) -> None:
        self._s = session
        self._dialler = dialler
        self._switchover = switchover
        self._options = options
        self._policy = policy
        self._enabled = enabled
        self._replay_turn = replay_turn
        self.log = MoveLog()
        # The decider (``move_timing``) says when and from which handle; the attempts are the
        # move machine's, under the one failure policy (``retry_delays``, ``attempt_timeout``,
        # the budget). Its timers run here.
        self._timers = MoveTimers(self._feed)
        self._watchdog = ResumeWatchdog(resume_watchdog, self._watchdog_expired)
        self._tasks: set[asyncio.Task[None]] = set()
        self._epoch = 0
        """Advances when the machine drops the actions it returned before (abandon, give up,
        close): a callback run by one action can send the event that does so."""
        self._done: list[asyncio.Future[MoveReport]] = []
        self._opening: _Opening | None = None
        """The session is being opened (:meth:`open`): its dials are the opening's."""
        self._forget_session()

    # --- state --------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """The transport moves the session by itself (goAway, losses, config changes)."""
        return self._enabled

    @property
    def phase(self) -> m.Phase:
        """Where the move stands (``move_machine``)."""
        return self._machine.phase

    @property
    def moving(self) -> bool:
        """A move is in progress."""
        return self._machine.moving

    def stats(self) -> MoveStats:
        """The move log, for diagnostics."""
        log = self.log
        return MoveStats(counts=log.counts, in_progress=log.current is not None, recent=log.recent)

    def reset(self) -> None:
        """A new server session starts (``connect``): forget the previous one's handles,
        refusals and budget."""
        self._decide(t.Forget())
        self._forget_session()

    def _new_machine(self, delays: tuple[float, ...] | None = None) -> m.MoveMachine:
        """A move machine with the session's retry delays (or ``delays``), its failure
        policy and Gemini's reading of close codes."""
        return m.MoveMachine(
            self._options.retry_delays if delays is None else delays, self._policy, read_close
        )

    def _forget_session(self) -> None:
        """What one server session accumulates: the decider (handles, the ``goAway`` and its
        deadline, why a move is wanted) and the machine (refusals, the budget spent, the
        break-first mode)."""
        self._timing: t.MoveTiming[HandleRef] = t.MoveTiming(
            self._options, attempts=False, spread_draw=random.random
        )
        self._machine = self._new_machine()
        self._pending: LiveConnection | None = None
        self._cut_by_loss = False
        self._closed = False
        self._last_close: tuple[int | None, str | None] = (None, None)

    def resumed_from(self, handle: HandleRef) -> None:
        """A session was opened by resuming ``handle`` (``connect``, a takeover): it is the
        handle a lost connection resumes from until the session issues one of its own, and no
        resumable point (a planned move waits for the session's first), as after a move."""
        self._decide(t.ResumedFrom(handle))

    def forget_handles(self) -> None:
        """Drop the handles of the current server session (``clear_resumption``): a later
        move rebuilds. A move already running goes on."""
        if self.moving:
            return
        self._decide(t.Forget())

    # --- what the transport reports -------------------------------------------------------------

    def resumption_update(self, handle: HandleRef | None, resumable: bool) -> None:
        """A resumption update from the current connection."""
        if self.moving:
            return  # the session being replaced: its handles are no place to resume
        self._feed(t.Update(handle, resumable))

    @property
    def quiet(self) -> bool:
        """Nothing has been said on the connection the last move installed: the transport
        reports the user's speech (:meth:`user_turn`) while this holds."""
        return self._timing.quiet

    def turn_started(self) -> None:
        """A sign of a turn (user input, a turn the client sent, model output, a tool call)."""
        self._decide(t.TurnStarted())
        self.turn_during_move()

    def turn_during_move(self) -> None:
        """A turn began while a move is under way (user speech, or a sign of the turn that
        arrived after the move chose its handle): more input could end that turn on the
        incumbent and start an answer the switch would cut. Until the switch, input waits
        for the new connection, which gets the whole turn replayed from the handle."""
        self._carry_out(self._machine.send(m.TurnStarted()))

    def turn_ended(self) -> None:
        """The turn ended (turnComplete with no tool call pending or result unsent), or a move
        cut it."""
        self._decide(t.TurnEnded())

    def served(self) -> None:
        """The current connection completed an answered turn (it is no flapping one)."""
        self._machine.send(m.Served())

    def user_turn(self) -> None:
        """A sign of the user's turn (speech, a typed turn, an activity signal): for the resume
        watchdog, and the connection is no longer quiet."""
        self._decide(t.Heard())
        self._watchdog.user_turn()

    @property
    def watching(self) -> bool:
        """The resume watchdog waits for a resumed connection's first answer."""
        return self._watchdog.watching

    def answered(self) -> None:
        """The model produced output on the current connection."""
        self._watchdog.answered()

    def go_away(self, seconds: float | None) -> None:
        """The provider announced the end of the current connection."""
        self.log.go_away(seconds, self._s.now())
        if not self._enabled or self.moving or self._closed:
            return
        self._machine.send(m.Wanted())
        s = self._s
        compression = s.options.context_window_compression
        # Without compression the service ends an audio session at 15 minutes: a goAway that
        # keeps the deadline the last move answered ends the server session, not the
        # connection, and resuming would only lead into a session the service is closing.
        uncapped = compression is not None and compression.sliding_window is not None
        # A goAway on a connection quiet since its switch moves at once: nothing was said
        # since the session was resumed (or rebuilt). A rebuilt session that has issued no
        # handle yet is rebuilt again, from the same history.
        self._feed(
            t.GoAway(
                s.now(),
                seconds,
                rebuild_when_quiet=s.can_rebuild(),
                capped=not uncapped and s.can_rebuild(),
            )
        )

    def config_changed(self) -> None:
        """The setup changed and Gemini cannot apply it live: move to a connection set up
        with it at the next resumable point, or now where none comes before the user's next
        turn (the decider's rule: nothing in progress on a connection that has answered
        nothing)."""
        if not self._enabled or self._closed:
            return
        if not self.moving:
            logger.info(
                "{}: the setup changed; moving to a connection set up with it", self._s.callbacks
            )
            self._machine.send(m.Wanted())
            self._feed(t.ConfigChanged(self._s.now(), CONFIG_MOVE_WAIT))

    def connection_lost(self, code: int | None, reason: str | None, *, turn_cut: bool) -> None:
        """The current connection closed without the transport asking (already detached);
        ``turn_cut``: it cut an answer in progress."""
        self._last_close = (code, reason)
        self._watchdog.stop()
        if self._closed or self._machine.phase is m.Phase.CLOSED:
            return
        if not self._enabled:
            self._s.close(code, reason)
            return
        self._cut_by_loss = turn_cut
        if self.moving:
            # A move is under way: it carries on, and input waits for it.
            self._carry_out(self._machine.send(self._lost_event(code, None, HandleKind.NONE)))
            return
        handle: HandleRef | None = None
        kind = HandleKind.NONE
        decided = self._decide(t.ConnectionLost())
        if decided is not None:
            handle, kind = decided.handle, decided.kind
        elif self._s.can_rebuild():
            logger.info(
                "{}: connection lost with no handle; rebuilding from history", self._s.callbacks
            )
        self._carry_out(self._machine.send(self._lost_event(code, handle, kind)))

    def credential_expired(self) -> None:
        """The current connection's credential expired: move now (a new dial brings a new
        credential)."""
        self.request_soon(MoveReason.REQUESTED)

    # --- moves the transport asks for -----------------------------------------------------------

    def request_soon(self, reason: MoveReason) -> None:
        """Start a move now, with the latest handle (or rebuild when there is none), unless
        one is running."""
        if self._closed or self._machine.phase is m.Phase.CLOSED or self.moving:
            return
        self._feed(t.Requested(reason))

    async def request(self, reason: MoveReason) -> MoveReport:
        """Move now (after any move in progress) and return its report."""
        if self.moving:
            await self._wait_for_report()
        if self._closed or self._machine.phase is m.Phase.CLOSED:
            raise SessionLostError("the session is over")
        waiter = self._report_waiter()
        self.request_soon(reason)
        if not self.moving and not waiter.done():
            waiter.cancel()
            raise TransportError("the move could not start")
        return await self._bounded(waiter)

    # --- opening the session ----------------------------------------------------------------------

    async def open(
        self,
        reason: MoveReason,
        handle: HandleRef | None,
        kind: HandleKind,
        dial: Callable[[HandleRef | None], Awaitable[None]],
        *,
        delays: tuple[float, ...] | None,
        may_rebuild: bool,
        rebuild_when_spent: bool = False,
        on_retry: Callable[[BaseException], None] | None = None,
    ) -> Opened:
        """Open the session (``connect``, or a takeover of a stored call: ``reason``) as a move
        of the machine with no incumbent, carried out by the one driver every move runs on:
        each ``Dial`` is one call of ``dial`` (it dials ``handle``, or opens a fresh session
        for None, and installs the connection it set up, or raises), retried as the failure
        policy says, ``delays`` the pauses before each attempt (one attempt per entry; None:
        the session's ``retry_delays``).

        ``may_rebuild``: a refused ``handle`` (or, with ``rebuild_when_spent``, one whose
        attempts are spent) opens a fresh session; otherwise that ends the opening.
        ``on_retry`` hears each failure that is retried. Returns how the session opened;
        raises the last dial's failure when the machine gives up (401/403 at once), and
        ``DialAbandonedError`` when ``close`` or ``abandon`` overtook it. The machine the
        session's moves use starts afresh once it is open."""
        opening = _Opening(dial, handle, may_rebuild, on_retry)
        self._machine = self._new_machine(delays)
        actions = self._machine.send(
            m.Due(
                self._s.now(),
                reason,
                handle,
                kind,
                incumbent=False,
                can_rebuild=True,
                forced=True,
                rebuild_when_spent=rebuild_when_spent,
            )
        )
        # The opening runs in the caller's task (``connect``); its dials are the dialler's to
        # abandon (``disconnect``, ``abort_incumbent``), its pauses the rotation's to stop.
        epoch = self._epoch
        self._opening = opening
        try:
            await self._drive(actions)
        finally:
            if self._opening is opening:
                self._opening = None
            # The session's moves start with a machine of their own (its delays, no
            # probation for the first connection).
            self._machine = self._new_machine()
        if self._epoch != epoch:
            raise DialAbandonedError("the transport was closed or aborted while it connected")
        if not opening.opened:
            assert opening.failure is not None, "only a failed dial ends an opening unopened"
            raise opening.failure
        error = opening.failure
        return Opened(opening.handle, opening.dials, self._describe(str(error)) if error else None)

    async def _pause(self, seconds: float) -> None:
        """An opening's pause between attempts, as a task of the rotation: ``close`` and
        ``abandon`` end it with the rest."""
        pause = asyncio.get_running_loop().create_task(
            asyncio.sleep(seconds), name="gemini-live-open-pause"
        )
        self._tasks.add(pause)
        pause.add_done_callback(self._tasks.discard)
        try:
            await asyncio.wait({pause})
        finally:
            pause.cancel()

    async def _open_attempt(self, opening: _Opening, handle: HandleRef | None) -> list[m.Action]:
        """One dial of the opening; returns the machine's next actions (none once open)."""
        if handle is None and opening.started_with is not None and not opening.may_rebuild:
            return []  # the handle was refused: this opening does not start a fresh session
        opening.dials += 1
        try:
            await opening.dial(handle)
        except DialAbandonedError:
            raise
        except Exception as error:
            opening.failure = error
            actions = self._machine.send(
                m.Failed(self._s.now(), Stage.DIAL, error, can_rebuild=opening.may_rebuild)
            )
            if opening.on_retry is not None and any(_retries(opening, a) for a in actions):
                opening.on_retry(error)
            return actions
        opening.opened, opening.handle = True, handle
        # ``dial`` installed the connection itself: nothing served meanwhile, so there is no
        # settle and no switch (as after a Break); the machine only hears that it is over.
        self._machine.send(m.SetupOk())
        self._machine.send(m.Settled(self._s.now()))
        return []

    # --- ending ---------------------------------------------------------------------------------

    async def close(self, why: str) -> None:
        """Stop everything (disconnect): the decider and its timers, any move (reported as
        lost with ``why``), the watchdog. Nothing of the rotation runs after it returns."""
        self._closed = True
        self._epoch += 1
        self._watchdog.stop()
        self._decide(t.Dispose())
        self._machine.send(m.Dispose())
        # Called from inside a move (a callback of it), that move unwinds once this returns.
        tasks = [task for task in self._tasks if task is not asyncio.current_task()]
        await cancel_and_wait(tasks, _WAIT_BOUND_SLACK)
        self._drop_pending()
        self._finish_lost(why)

    def abandon(self, why: str) -> list[asyncio.Task[Any]]:
        """Stop at once (``abort_incumbent``): cancel any move (reported as lost), and start
        over with no handle. Returns the cancelled tasks to await."""
        self._epoch += 1
        self._watchdog.stop()
        self._decide(t.Forget())
        tasks: list[asyncio.Task[Any]] = list(self._tasks)
        for task in tasks:
            task.cancel()
        self._drop_pending()
        self._finish_lost(why)
        self._machine = self._new_machine()
        self._s.set_gate(m.InputGate.OPEN)
        return tasks

    # --- deciding -------------------------------------------------------------------------------

    def _feed(self, event: t.Event[HandleRef]) -> None:
        """Tell the decider ``event``, and start the move it decides on, if any."""
        decided = self._decide(event)
        if decided is not None and not self.moving:
            self._due(decided.reason, decided.handle, decided.kind, forced=decided.forced)

    def _decide(self, event: t.Event[HandleRef]) -> t.MoveNow[HandleRef] | None:
        """Tell the decider ``event`` and run its timers; returns the move it decides on."""
        decided: t.MoveNow[HandleRef] | None = None
        for action in self._timing.send(event):
            if isinstance(action, (t.StartTimer, t.CancelTimer)):
                self._timers.carry_out(action)
            elif isinstance(action, t.MoveNow):
                decided = action
            elif isinstance(action, t.SessionEnds):
                logger.info(
                    "{}: the goAway after the resume keeps the deadline before it: the server "
                    "session is ending (compression is off); rebuilding it from its history",
                    self._s.callbacks,
                )
            elif isinstance(action, t.Lapsed):
                logger.warning(
                    "{}: goAway deadline near and no handle to resume from; notice lapses",
                    self._s.callbacks,
                )
        return decided

    def _due(
        self, reason: MoveReason, handle: HandleRef | None, kind: HandleKind, *, forced: bool
    ) -> None:
        self._carry_out(
            self._machine.send(
                m.Due(
                    self._s.now(),
                    reason,
                    self._pinned(handle),
                    kind,
                    incumbent=self._s.current is not None,
                    # A setup change on a session that has said nothing and issued no
                    # handle rebuilds it empty: nothing is there to lose.
                    can_rebuild=self._s.can_rebuild()
                    or (reason is MoveReason.CONFIG and handle is None),
                    forced=forced,
                    break_first=ENDPOINTS.break_first(self._endpoint()),
                )
            )
        )

    def _pinned(self, handle: HandleRef | None) -> HandleRef | None:
        if handle is not None and not self._s.pin(handle):
            logger.warning(
                "{}: handle {} is no longer a resumption point of the input buffer; rebuilding",
                self._s.callbacks,
                redact(self._text(handle)),
            )
            return None
        return handle

    def _lost_event(self, code: int | None, handle: HandleRef | None, kind: HandleKind) -> m.Lost:
        return m.Lost(self._s.now(), code, self._pinned(handle), kind, self._s.can_rebuild())

    # --- carrying out the machine's actions -----------------------------------------------------

    def _carry_out(self, actions: Sequence[m.Action]) -> None:
        """Carry out ``actions``: the immediate ones now, the rest (from the first dial, wait or
        break on) in a move task."""
        epoch = self._epoch
        for index, action in enumerate(actions):
            if self._epoch != epoch:
                return
            if isinstance(action, (m.Dial, m.Wait, m.Break)):
                task = asyncio.get_running_loop().create_task(
                    self._drive(list(actions[index:])),
                    name=f"gemini-live-move-{self.log.current.number if self.log.current else 0}",
                )
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                return
            self._now(action)

    async def _drive(self, actions: list[m.Action]) -> None:
        """A move task: carry out the actions, feeding each outcome back to the machine."""
        epoch = self._epoch
        opening = self._opening
        while actions and self._epoch == epoch:
            action = actions.pop(0)
            if opening is not None:
                if isinstance(action, m.Dial):
                    actions += await self._open_attempt(opening, action.handle)
                elif isinstance(action, m.Wait):
                    await self._pause(action.seconds)
                    if self._epoch == epoch:
                        actions += self._machine.send(m.BackoffOver())
                elif isinstance(action, m.Retried):
                    logger.info(
                        "{}: connecting failed ({}); retrying",
                        self._s.callbacks,
                        self._describe(action.why),
                    )
                # Nothing serves yet: nothing to gate or break, and the opening reports itself
                # (a takeover as a move, a connect not at all). Giving up ends the opening.
                elif isinstance(action, m.GiveUp):
                    return
                continue
            if isinstance(action, m.Dial):
                actions += await self._attempt(action.handle)
            elif isinstance(action, m.Wait):
                await asyncio.sleep(action.seconds)
                actions += self._machine.send(m.BackoffOver())
            elif isinstance(action, m.Break):
                dial = actions.pop(0)
                assert isinstance(dial, m.Dial)
                actions += await self._attempt(dial.handle, breaking=True)
            else:
                self._now(action)

    def _now(self, action: m.Action) -> None:
        """Carry out an immediate action."""
        s = self._s
        if isinstance(action, m.Begin):
            self._begin(action.reason, action.handle, action.kind)
        elif isinstance(action, m.Gate):
            s.set_gate(action.gate)
            move = self.log.current
            if action.gate is m.InputGate.HELD and move is not None:
                move.input_stopped(s.now())
            s.feed()
        elif isinstance(action, m.Switch):
            self._switch(action.handle)
        elif isinstance(action, m.Abandon):
            self._abandon()
        elif isinstance(action, m.RefusedWhileOpen):
            endpoint = self._endpoint()
            ENDPOINTS.refused_while_open(endpoint)
            logger.info(
                "{}: {} refuses a resume while the old connection is open; closing it first "
                "from now on",
                s.callbacks,
                endpoint or "the service",
            )
        elif isinstance(action, m.RollBack):
            self._roll_back(action.why)
        elif isinstance(action, m.Retried):
            logger.warning(
                "{}: attempt failed ({}); retrying", s.callbacks, self._describe(action.why)
            )
        elif isinstance(action, m.GiveUp):
            self._give_up(SessionLostError(action.why))

    async def _attempt(self, handle: HandleRef | None, *, breaking: bool = False) -> list[m.Action]:
        """One attempt: dial with ``handle`` within ``attempt_timeout``, then let the
        connection settle (bounded by the settle itself: a slow setup must not eat into it);
        returns the machine's next actions. ``breaking``: the incumbent closes before the
        setup is sent, once the new socket is open (``gemini.preopen``)."""
        move = self.log.current
        if move is None:
            return []
        move.attempt(
            self._text(handle), self._machine.move.kind if self._machine.move else HandleKind.NONE
        )
        stage = Stage.DIAL
        timeout = self._options.attempt_timeout
        try:
            async with asyncio.timeout(timeout):
                if breaking:
                    conn = await self._dial_after_break(handle, move)
                else:
                    conn = await self._dialler.dial(handle)
            self._pending = conn
            [settle] = self._machine.send(m.SetupOk())
            assert isinstance(settle, m.Settle)
            stage = Stage.SETTLING
            close = await self._switchover.settle(conn, settle.seconds)
        except TimeoutError:
            self._drop_pending()
            error = TimeoutError(f"the setup did not complete within attempt_timeout ({timeout} s)")
            return self._failed(stage, error)
        except asyncio.CancelledError:
            self._drop_pending()
            raise
        except Exception as error:
            self._drop_pending()
            return self._failed(stage, error)
        if close is not None:
            self._pending = None
            return self._failed(Stage.SETTLING, None, close[0])
        return self._machine.send(m.Settled(self._s.now()))

    async def _dial_after_break(
        self, handle: HandleRef | None, move: MoveInProgress
    ) -> LiveConnection:
        """Break-before-make at the cost of the setup alone: the replacement's socket opens
        while the incumbent still serves; the incumbent then closes (input held from here),
        and only then does the setup go out. The incumbent is closed whatever becomes of the
        dial, as the move's machine has taken it for gone."""
        epoch = self._epoch
        if not preopen.install():
            # The SDK offers no way to hold the setup: close first, then dial.
            await self._break(move, epoch)
            return await self._dialler.dial(handle)
        gate = SetupGate()
        dialling = asyncio.create_task(
            self._dialler.dial(handle, gate), name=f"gemini-live-dial-move-{move.number}"
        )
        # Its outcome is awaited below, unless the move is stopped first (the dial is then
        # abandoned with it, and its DialAbandonedError is nobody's business).
        dialling.add_done_callback(_outcome_read)
        opened = False
        try:
            waits: set[asyncio.Future[Any]] = {dialling, gate.socket_open}
            await asyncio.wait(waits, return_when=FIRST_COMPLETED)
            opened = True
        finally:
            await self._break(move, epoch)
            gate.release()
            if not opened:
                dialling.cancel()
                await asyncio.wait({dialling})
        return await dialling

    async def _break(self, move: MoveInProgress, epoch: int) -> None:
        """Hold input and close the incumbent, unless the move was stopped meanwhile."""
        incumbent = self._s.current
        if self._epoch == epoch:
            self._s.set_gate(m.InputGate.HELD)
            if incumbent is not None:
                await self._switchover.break_incumbent(incumbent, move)

    def _failed(
        self, stage: Stage, error: BaseException | None, code: int | None = None
    ) -> list[m.Action]:
        s = self._s
        return self._machine.send(
            m.Failed(
                s.now(),
                stage,
                error,
                code,
                can_rebuild=s.can_rebuild(),
                setup_changed=s.working is not None and s.options != s.working,
            )
        )

    def _roll_back(self, why: str) -> None:
        """The service refused the changed setup: the session goes on with the one that
        worked, and the framework hears of it (not fatal)."""
        s = self._s
        s.roll_back_setup()
        self._decide(t.ConfigDropped())
        text = self._describe(why)
        logger.warning(
            "{}: the service refused the updated setup ({}); going on with the previous one",
            s.callbacks,
            text,
        )
        error = SetupRefusedError(
            f"the service refused the updated setup ({text}); the session goes on with the "
            "previous one"
        )
        s.call(s.callbacks.on_error, TransportErrorEvent(error, recoverable=True))

    def _drop_pending(self) -> None:
        conn, self._pending = self._pending, None
        if conn is not None:
            self._switchover.drop(conn)

    # --- the moves ------------------------------------------------------------------------------

    def _begin(
        self, reason: MoveReason, handle: HandleRef | None, kind: HandleKind
    ) -> MoveInProgress:
        self._watchdog.stop()
        move = self.log.current
        if move is not None:
            # The move a turn on the incumbent postponed goes on, from a newer handle.
            move.reason = reason
            return move
        text = self._text(handle)
        move = self.log.begin(reason, text, kind, self._s.now())
        if self._s.gate is m.InputGate.HELD:
            move.input_stopped(self._s.now())
        if self._cut_by_loss and reason is MoveReason.LOST:
            move.turn_was_cut()
        self._cut_by_loss = False
        logger.info(
            "{}: move {} ({}) from {} handle {}",
            self._s.callbacks,
            move.number,
            reason.value,
            kind.value,
            redact(text),
        )
        self._s.call(self._s.callbacks.on_move_started, reason, kind)
        return move

    def _abandon(self) -> None:
        """A turn began on the incumbent during a planned move: give the replacement up and
        wait for the next resumable point (or the deadline) with the notice left."""
        self._epoch += 1
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._drop_pending()
        logger.info(
            "{}: a turn began on the old connection; the move waits for it to end",
            self._s.callbacks,
        )
        # The abandoned dial spent the goAway's notice: the decider starts over with the
        # incumbent's latest handle (no resumable point: the turn is in progress) and the
        # notice left.
        self._feed(t.Abandoned(self._s.now(), self._s.latest))

    def _switch(self, handle: HandleRef | None) -> None:
        conn, self._pending = self._pending, None
        move = self.log.current
        assert conn is not None and move is not None
        # Nothing is fed to the new connection until what it said while it settled (its
        # first handle, above all) is delivered: a handle recorded after writes it never
        # saw would be taken to hold them.
        self._s.set_gate(m.InputGate.HELD)
        report, replay = self._switchover.switch(conn, move, handle)
        resumed = report.outcome is MoveOutcome.RESUMED
        # Replayed speech is a turn the new connection hears after the switch: it may be
        # answering before it says so.
        self._decide(t.Switched(resumed, replayed_turn=replay.turn_input > 0))
        if resumed:
            self._watchdog.watch()
        self._resolve(report)
        # What the new connection said while it settled (its first handle, above all) is
        # delivered in a step of its own, once this one is over: that handle may begin the next
        # move, which must not start inside this switch. Its messages stay held meanwhile.
        asyncio.get_running_loop().call_soon(self._release, conn)

    def _release(self, conn: LiveConnection) -> None:
        """After a switch: deliver what ``conn`` said while held (now the move is recorded,
        its first handle counts as a resumable point), then open its input."""
        self._switchover.release(conn)
        if self._closed:
            return
        if not self.moving:  # (a delivered handle may have begun the next move, gated)
            self._s.set_gate(m.InputGate.OPEN)
            self._s.feed()
        if self._s.setup_stale:
            self.config_changed()

    # --- giving up ------------------------------------------------------------------------------

    def _give_up(self, error: SessionLostError) -> None:
        """The session cannot be carried on: report the move lost, then the fatal path."""
        if self._closed:
            return
        self._closed = True
        self._epoch += 1
        self._watchdog.stop()
        self._decide(t.Dispose())
        self._machine.send(m.Dispose())
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._drop_pending()
        text = self._describe(str(error))
        logger.error("{}: the session is lost: {}", self._s.callbacks, text)
        move = self.log.current or self._begin(MoveReason.LOST, None, HandleKind.NONE)
        if self._s.current is None:
            move.incumbent_gone()
        report = move.finish(MoveOutcome.LOST, self._s.now(), error=text)
        self._s.call(self._s.callbacks.on_move, report)
        self._resolve(report)
        self._s.set_gate(m.InputGate.OPEN)
        self._s.lost(SessionLostError(text), *self._last_close)

    def _finish_lost(self, why: str) -> None:
        move = self.log.current
        if move is None:
            return
        if self._s.current is None:
            move.incumbent_gone()
        report = move.finish(MoveOutcome.LOST, self._s.now(), error=why)
        self._s.call(self._s.callbacks.on_move, report)
        self._resolve(report)

    # --- the resume watchdog --------------------------------------------------------------------

    def _watchdog_expired(self, first: bool) -> None:
        s = self._s
        if self._closed or self.moving or s.current is None:
            return
        if first and self._replay_turn():
            logger.warning(
                "{}: the resumed session did not answer; re-sending the turn", s.callbacks
            )
            self._watchdog.user_turn()
            return
        logger.warning("{}: the resumed session still does not answer; rebuilding it", s.callbacks)
        self._due(MoveReason.LOST, None, HandleKind.NONE, forced=True)

    # --- helpers --------------------------------------------------------------------------------

    def _endpoint(self) -> str | None:
        """The endpoint the session's connections go to (the incumbent's, or the last one's)."""
        conn = self._s.current or self._pending
        return conn.endpoint if conn is not None else None

    def _report_waiter(self) -> asyncio.Future[MoveReport]:
        waiter: asyncio.Future[MoveReport] = asyncio.get_running_loop().create_future()
        self._done.append(waiter)
        return waiter

    async def _wait_for_report(self) -> MoveReport:
        return await self._bounded(self._report_waiter())

    async def _bounded(self, waiter: asyncio.Future[MoveReport]) -> MoveReport:
        options = self._options
        bound = (
            sum(options.retry_delays) * (1 + self._policy.jitter)
            + len(options.retry_delays) * options.attempt_timeout
            + _WAIT_BOUND_SLACK
        )
        try:
            async with asyncio.timeout(bound):
                return await waiter
        finally:
            with contextlib.suppress(ValueError):
                self._done.remove(waiter)

    def _resolve(self, report: MoveReport) -> None:
        done, self._done = self._done, []
        for waiter in done:
            if not waiter.done():
                waiter.set_result(report)

    def _describe(self, text: str) -> str:
        return scrub(text, self._s.secrets)

    def _text(self, handle: HandleRef | None) -> str | None:
        """``handle``'s text, for the move's report (which shows it redacted)."""
        return self._s.handles.text(handle) if handle is not None else None


def _outcome_read(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _retries(opening: _Opening, action: m.Action) -> bool:
    """``action`` makes another attempt of ``opening``."""
    if isinstance(action, m.Wait):
        return True
    if not isinstance(action, m.Dial):
        return False
    return action.handle is not None or opening.may_rebuild or opening.started_with is None
