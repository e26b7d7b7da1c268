"""Moving a Gemini Live session to a new connection: when (the resumption helper) and how.

:class:`Rotation` belongs to one :class:`~realtime_resumption.gemini.GeminiLiveTransport`. It
feeds :class:`~realtime_resumption.resumption.SessionResumption` what the transport sees
(handles, turns, ``goAway``, losses), supplies its ``reconnect``, and runs every move to one
outcome, reported as a :class:`~realtime_resumption.moves.MoveReport`:

- *Planned* (``goAway``; a config change; a reconnect the framework asked for): the replacement
  is dialled while the incumbent keeps serving and taking input (make-before-break); once it is
  set up and has settled, sends and the receive side switch to it at once, the input the
  resumed session lacks is replayed, and the incumbent is closed. When the provider refuses a
  resume while the incumbent is open (close 1011 right after the setup), the incumbent is
  closed first and the dial repeated (break-before-make), and every later move of the session
  does the same.
- *Lost* (the connection closed without notice): the helper resumes from its fallback handle;
  input is held meanwhile (``OutboxLimits``) and flushed after.
- *Rebuilt*: a refused or expired handle (a close 1007 or 1008 at or right after the setup, or
  1011 twice in a row) means the server session is gone; a fresh session is opened and seeded
  with the conversation history the transport kept. Without a handle or any history the session
  is lost.

Input across a move: every send goes to the session's outbox (``gemini.outbox``), which
replays what the resumed session lacks — with Vertex ``transparent`` mode exactly the messages
after the handle's ``lastConsumedClientMessageIndex``; otherwise what was written after the
handle arrived, plus audio written within ``OutboxLimits.handle_margin`` before it (a text or
tool response written less than a round trip before a handle arrives is the rule's blind spot).
While a move is under way the incumbent takes only audio and video: a text turn or a tool
result waits for the new connection, so the incumbent starts no answer the switch would cut.

Tool calls: a planned move waits for a resumable point, which never comes while a call awaits
its result. When a move cuts a turn anyway (the deadline, a loss), its open calls are orphaned:
a resumed session does not continue a cut answer, so their results are refused
(``ToolCallOrphanedError``), ``on_tool_call_cancel`` names them, and their answer ends as
``tool_call_orphaned``; the framework may ask again.

Every failed dial counts against a session-wide ``retry_budget`` on top of the helper's per-move
retries; when either runs out the session is lost: ``on_move`` (outcome ``lost``), then
``on_error`` (``SessionLostError``), then ``on_close``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Final

from loguru import logger

from realtime_resumption.gemini.watchdog import ResumeWatchdog
from realtime_resumption.moves import (
    HandleKind,
    MoveInProgress,
    MoveLog,
    MoveOutcome,
    MoveReason,
    MoveReport,
    scrub,
)
from realtime_resumption.redaction import redact
from realtime_resumption.resumption import ResumptionOptions, SessionResumption
from realtime_resumption.transport import (
    ConnectError,
    ConnectFailure,
    MoveStats,
    SessionLostError,
    TransportError,
)

if TYPE_CHECKING:
    from realtime_resumption.gemini.connection import _Connection
    from realtime_resumption.gemini.transport import GeminiLiveTransport

DEFAULT_RETRY_BUDGET: Final = 20
"""Failed connection attempts a session may spend in total, over all its moves. The helper
retries each move up to five times; twenty lets a session ride out a few bad moves, yet a
session whose every move fails ends within minutes rather than retrying forever."""

RESUME_SETTLE: Final = 0.5
"""Seconds a new connection may stay silent after its setup before it counts as accepted.

Gemini may refuse a resume right after ``setupComplete`` (a close 1011 while the incumbent is
still open, or 1007/1008 for a handle it no longer knows); the service sends a resumption
update right after a setup it accepts, so the switch happens as soon as that arrives. The
incumbent keeps serving meanwhile, so on a planned move the wait costs no input gap."""

CONFIG_MOVE_WAIT: Final = 600.0
"""Seconds a configuration change waits for a resumable point before it moves anyway. A
connection lives about ten minutes: its goAway comes first in practice."""

HANDLE_REFUSED_CODES: Final = frozenset({1007, 1008})
"""Close codes that mean the provider refused the handle itself (invalid or not found)."""

_REFUSED_OR_OVERLOADED: Final = 1011
"""A close code that is either a refused resume or a transient failure: the first one with a
given handle is retried, the second rebuilds."""

_WAIT_BOUND_SLACK: Final = 5.0


class Rotation:
    """The move machinery of one transport; see the module documentation."""

    def __init__(
        self,
        transport: GeminiLiveTransport,
        *,
        options: ResumptionOptions,
        retry_budget: int,
        resume_watchdog: float | None,
        enabled: bool,
    ) -> None:
        if isinstance(retry_budget, bool) or not isinstance(retry_budget, int) or retry_budget < 1:
            raise ValueError(f"retry_budget must be an int >= 1, got {retry_budget!r}")
        self._t = transport
        self._options = options
        self._budget = retry_budget
        self._enabled = enabled
        self.log = MoveLog()
        self._helper = self._new_helper()
        self._watchdog = ResumeWatchdog(resume_watchdog, self._watchdog_expired)
        self._own: asyncio.Task[None] | None = None
        self._helper_task: asyncio.Task[Any] | None = None
        self._done: list[asyncio.Future[MoveReport]] = []
        self._turn_in_switch = False
        self._forget_session()

    # --- state --------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """The transport moves the session by itself (goAway, losses, config changes)."""
        return self._enabled

    @property
    def moving(self) -> bool:
        """A move is in progress."""
        return self.log.current is not None or self._helper.reconnecting or self._busy(self._own)

    @property
    def switching(self) -> bool:
        """A move began and has not switched connections yet (nor ended)."""
        return self.log.current is not None

    def stats(self) -> MoveStats:
        """The move log, for diagnostics."""
        log = self.log
        return MoveStats(counts=log.counts, in_progress=log.current is not None, recent=log.recent)

    def reset(self) -> None:
        """A new server session starts (``connect``): forget the previous one's handles,
        refusals and budget."""
        self._helper.dispose()
        self._helper = self._new_helper()
        self._forget_session()

    def _forget_session(self) -> None:
        """What one server session accumulates: refusals, the retry budget spent, flags."""
        self._failures = 0
        self._refused: set[str] = set()
        self._strikes: dict[str, int] = {}
        self._break_first = False
        self._config_pending = False
        self._requested = False
        self._go_away_seen = False
        self._gave_up = False
        self._closed = False
        self._last_close: tuple[int | None, str | None] = (None, None)

    def forget_handles(self) -> None:
        """Drop the handles of the current server session (``clear_resumption``): a later
        move rebuilds. A move already running goes on."""
        if self.moving:
            return
        self._helper.dispose()
        self._helper = self._new_helper()

    # --- what the transport reports -------------------------------------------------------------

    def resumption_update(self, handle: str | None, resumable: bool) -> None:
        """A resumption update from the current connection."""
        if self._busy(self._own):
            return  # the session being replaced: its handles are no place to resume
        self._helper.resumption_update(handle, resumable)
        self._sync_move()

    def turn_started(self) -> None:
        """A sign of a turn (user input, a turn the client sent, model output, a tool call)."""
        self._helper.turn_started()
        self.hold_input()

    def hold_input(self) -> None:
        """A turn began while a move is under way (user speech, or a sign of the turn that
        arrived after the move chose its handle): more input could end that turn on the
        incumbent and start an answer the switch would cut. Until the switch, input waits
        for the new connection, which gets the whole turn replayed from the handle."""
        move = self.log.current
        if move is not None and not self._turn_in_switch:
            self._turn_in_switch = True
            move.input_stopped(self._t._now())

    @property
    def holding(self) -> bool:
        """A move is under way and a turn began on the incumbent: it takes no more input."""
        return self._turn_in_switch and self.log.current is not None

    def turn_ended(self) -> None:
        """The turn ended (turnComplete with no tool call pending or result unsent), or a move
        cut it."""
        self._helper.turn_ended()

    def user_turn(self) -> None:
        """A sign of the user's turn, for the resume watchdog."""
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
        if not self._enabled or self._busy(self._own) or self._closed:
            return
        self._go_away_seen = True
        self._helper.go_away(seconds)
        self._sync_move()

    def config_changed(self) -> None:
        """The setup changed and Gemini cannot apply it live: move at the next resumable
        point with the new setup."""
        if not self._enabled or self._closed:
            return
        self._config_pending = True
        if not self.moving:
            logger.info("{}: the setup changed; moving at the next resumable point", self._t)
            self._helper.go_away(CONFIG_MOVE_WAIT)
            self._sync_move()

    def connection_lost(self, code: int | None, reason: str | None) -> None:
        """The current connection closed without the transport asking (already detached)."""
        self._last_close = (code, reason)
        self._watchdog.stop()
        now = self._t._now()
        if self._closed or self._gave_up:
            return
        if not self._enabled:
            self._t._close_session(code, reason)
            return
        self._sync_move()
        move = self.log.current
        if move is not None or self._helper.reconnecting:
            # A move is under way: it carries on, and input waits for it.
            if move is not None:
                move.input_stopped(now)
            return
        if self._helper.connection_lost():
            move = self._sync_move()
            if move is not None:
                move.input_stopped(now)
            return
        if self._t._can_rebuild():
            logger.info("{}: connection lost with no handle; rebuilding from history", self._t)
            move = self._begin(MoveReason.LOST, None, HandleKind.NONE)
            move.input_stopped(now)
            self._start_own(move)
            return
        move = self._begin(MoveReason.LOST, None, HandleKind.NONE)
        move.input_stopped(now)
        self._give_up(
            SessionLostError(
                "the connection closed with no resumption handle and no history to rebuild from"
            )
        )

    def credential_expired(self) -> None:
        """The current connection's credential expired: move now (a new dial brings a new
        credential)."""
        self.request_soon(MoveReason.REQUESTED)

    # --- moves the transport asks for -----------------------------------------------------------

    def request_soon(self, reason: MoveReason) -> None:
        """Start a move now, with the latest handle (or rebuild when there is none), unless
        one is running."""
        if self._closed or self._gave_up or self.moving:
            return
        if self._helper.latest_handle is not None and not self._helper.stopped:
            self._requested = reason is MoveReason.REQUESTED
            self._helper.go_away(0.0)
            self._sync_move()
        else:
            move = self._begin(reason, None, HandleKind.NONE)
            self._start_own(move)

    async def request(self, reason: MoveReason) -> MoveReport:
        """Move now (after any move in progress) and return its report."""
        if self.moving:
            await self._wait_for_report()
        if self._closed or self._gave_up:
            raise SessionLostError("the session is over")
        waiter = self._report_waiter()
        self.request_soon(reason)
        if not self.moving:
            waiter.cancel()
            raise TransportError("the move could not start")
        return await self._bounded(waiter)

    # --- ending ---------------------------------------------------------------------------------

    async def close(self, why: str) -> None:
        """Stop everything (disconnect): the helper, any move (reported as lost with ``why``),
        the watchdog. Nothing of the rotation runs after it returns."""
        self._closed = True
        self._watchdog.stop()
        self._helper.dispose()
        # Called from inside a move (a callback of it), that move unwinds once this returns.
        tasks = [task for task in self._running() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_WAIT_BOUND_SLACK)
        self._finish_lost(why)

    def abandon(self, why: str) -> list[asyncio.Task[Any]]:
        """Stop at once (``abort_incumbent``): dispose the helper, cancel any move (reported as
        lost), and start over with no handle. Returns the cancelled tasks to await."""
        self._watchdog.stop()
        self._helper.dispose()
        tasks = self._running()
        for task in tasks:
            task.cancel()
        self._finish_lost(why)
        self._helper = self._new_helper()
        return tasks

    # --- the moves ------------------------------------------------------------------------------

    def _new_helper(self) -> SessionResumption:
        return SessionResumption(self._reconnect, self._options, self._reconnect_failed)

    async def _reconnect(self, handle: str) -> None:
        """The helper's ``reconnect``: one attempt of its move."""
        self._helper_task = asyncio.current_task()
        move = self._sync_move()
        decision = self._helper.last_move
        if move is None or decision is None:
            raise TransportError("no move in progress")
        await self._attempt(move, handle, HandleKind(decision.kind))

    def _sync_move(self) -> MoveInProgress | None:
        """Begin the move the helper just decided on, if it is not begun yet."""
        current = self.log.current
        if current is not None or not self._helper.reconnecting:
            return current
        decision = self._helper.last_move
        if decision is None:
            return None
        if decision.reason == "lost":
            reason = MoveReason.LOST
        elif self._requested:
            reason = MoveReason.REQUESTED
        elif self._config_pending and not self._go_away_seen:
            reason = MoveReason.CONFIG
        else:
            reason = MoveReason.PLANNED
        return self._begin(reason, decision.handle, HandleKind(decision.kind))

    def _begin(self, reason: MoveReason, handle: str | None, kind: HandleKind) -> MoveInProgress:
        self._watchdog.stop()
        self._turn_in_switch = False
        move = self.log.begin(reason, handle, kind, self._t._now())
        logger.info(
            "{}: move {} ({}) from {} handle {}",
            self._t,
            move.number,
            reason.value,
            kind.value,
            redact(handle),
        )
        self._t._call(self._t.on_move_started, reason, kind)
        return move

    def _start_own(self, move: MoveInProgress) -> None:
        self._own = asyncio.get_running_loop().create_task(
            self._own_move(move), name=f"gemini-live-move-{move.number}"
        )

    async def _own_move(self, move: MoveInProgress) -> None:
        """A move the helper cannot run (no handle to resume from: a rebuild), with the same
        retries and bounds as the helper's."""
        error: Exception = TransportError("no attempt was made")
        for delay in self._options.retry_delays:
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                async with asyncio.timeout(self._options.attempt_timeout):
                    await self._attempt(move, None, HandleKind.NONE)
                return
            except SessionLostError as lost:
                self._give_up(lost)
                return
            except TimeoutError:
                error = TimeoutError(
                    f"the attempt did not finish within attempt_timeout "
                    f"({self._options.attempt_timeout} s)"
                )
            except Exception as caught:
                error = caught
            logger.warning("{}: rebuild attempt failed: {}", self._t, self._describe(error))
        self._give_up(error)

    async def _attempt(self, move: MoveInProgress, handle: str | None, kind: HandleKind) -> None:
        """One attempt: resume from ``handle`` (or rebuild) and switch to the new connection."""
        if self._gave_up or self._closed:
            raise SessionLostError("the session is over")
        try:
            await self._try(move, handle, kind)
        except asyncio.CancelledError:
            raise
        except SessionLostError as error:
            # Nothing to retry: the helper's next attempt would fail the same way.
            asyncio.get_running_loop().call_soon(self._give_up, error)
            raise
        except Exception as error:
            self._failures += 1
            if self._failures >= self._budget and not self._gave_up:
                logger.error("{}: retry budget ({}) spent", self._t, self._budget)
                budget_error = SessionLostError(
                    f"the session's retry budget ({self._budget} failed attempts) is spent; "
                    f"last: {self._describe(error)}"
                )
                asyncio.get_running_loop().call_soon(self._give_up, budget_error)
            raise

    async def _try(self, move: MoveInProgress, handle: str | None, kind: HandleKind) -> None:
        t = self._t
        if handle is not None and handle in self._refused:
            handle = None
        if handle is not None and not t._input.outbox.hold(handle):
            logger.warning(
                "{}: handle {} is no longer a resumption point of the input buffer; rebuilding",
                t,
                redact(handle),
            )
            handle = None
        if handle is None:
            await self._rebuild(move)
            return
        while True:
            move.attempt(handle, kind)
            if t._current is not None and self._break_first:
                await t._handover.break_incumbent(t._current, move)
            try:
                conn = await t._dialler.dial(handle)
            except ConnectError as error:
                if not self._handle_refused(handle, error.failure.code):
                    raise
                await self._rebuild(move)
                return
            close = await t._handover.settle(conn)
            if close is None:
                t._handover.switch(conn, move, handle)
                return
            code = close[0]
            if code == _REFUSED_OR_OVERLOADED and t._current is not None and not self._break_first:
                # Once per session at most: the incumbent is closed first from now on.
                logger.warning(
                    "{}: the provider refused a resume while the old connection was open; "
                    "closing it first from now on",
                    t,
                )
                self._break_first = True
                continue
            if self._handle_refused(handle, code):
                await self._rebuild(move)
                return
            raise ConnectError(
                ConnectFailure(
                    "closed", f"the connection closed right after its setup (code {code})"
                )
            )

    def _handle_refused(self, handle: str, code: int | None) -> bool:
        """Whether ``code`` (at or right after a setup with ``handle``) means the handle is
        refused; remembers it."""
        if code in HANDLE_REFUSED_CODES:
            refused = True
        elif code == _REFUSED_OR_OVERLOADED:
            self._strikes[handle] = self._strikes.get(handle, 0) + 1
            refused = self._strikes[handle] >= 2
        else:
            refused = False
        if refused:
            logger.warning("{}: handle {} refused (code {})", self._t, redact(handle), code)
            self._refused.add(handle)
        return refused

    async def _rebuild(self, move: MoveInProgress) -> None:
        t = self._t
        if not t._can_rebuild() and move.reason is not MoveReason.REQUESTED:
            raise SessionLostError(
                "the handle was refused and there is no history to rebuild the session from"
            )
        move.attempt(None, HandleKind.NONE)
        incumbent = t._current
        if incumbent is not None and self._break_first:
            await t._handover.break_incumbent(incumbent, move)
        conn = await t._dialler.dial(None)
        close = await t._handover.settle(conn)
        if close is not None:
            raise ConnectError(
                ConnectFailure(
                    "closed", f"the connection closed right after its setup (code {close[0]})"
                )
            )
        t._handover.switch(conn, move, None)

    def switched(self, conn: _Connection, move: MoveInProgress, report: MoveReport) -> None:
        """The transport switched to ``conn``; ``report`` finished ``move``."""
        self._go_away_seen = False
        self._requested = False
        if report.outcome is MoveOutcome.RESUMED:
            self._strikes.clear()
            self._watchdog.watch()
        else:
            # A fresh server session: the old session's handles are worthless. Replace the
            # helper once its move (this one, maybe) has returned.
            asyncio.get_running_loop().call_soon(self._renew_helper, conn)
        self._resolve(report)
        if self._t.pending_setup_change:
            asyncio.get_running_loop().call_soon(self.config_changed)
        else:
            self._config_pending = False

    def _renew_helper(self, conn: _Connection) -> None:
        if self._closed or self._gave_up or self._t._current is not conn:
            return
        if self._helper.reconnecting:
            return  # a newer move already runs with it
        self._helper.dispose()
        self._helper = self._new_helper()
        self._refused.clear()

    # --- giving up ------------------------------------------------------------------------------

    def _reconnect_failed(self, error: Exception) -> None:
        self._give_up(error)

    def _give_up(self, error: BaseException) -> None:
        """The session cannot be carried on: report the move lost, then the fatal path."""
        if self._gave_up or self._closed:
            return
        self._gave_up = True
        self._watchdog.stop()
        self._helper.dispose()
        own = self._own
        if self._busy(own) and own is not asyncio.current_task():
            assert own is not None
            own.cancel()
        text = self._describe(error)
        logger.error("{}: the session is lost: {}", self._t, text)
        move = self.log.current or self._begin(MoveReason.LOST, None, HandleKind.NONE)
        report = move.finish(MoveOutcome.LOST, self._t._now(), error=text)
        self._t._call(self._t.on_move, report)
        self._resolve(report)
        lost = error if isinstance(error, SessionLostError) else SessionLostError(text)
        self._t._session_lost(lost, *self._last_close)

    def _finish_lost(self, why: str) -> None:
        move = self.log.current
        if move is None:
            return
        report = move.finish(MoveOutcome.LOST, self._t._now(), error=why)
        self._t._call(self._t.on_move, report)
        self._resolve(report)

    # --- the resume watchdog --------------------------------------------------------------------

    def _watchdog_expired(self, first: bool) -> None:
        t = self._t
        if self._closed or self._gave_up or self.moving or t._current is None:
            return
        if first and t._replay_retained_turn():
            logger.warning("{}: the resumed session did not answer; re-sending the turn", t)
            self._watchdog.user_turn()
            return
        logger.warning("{}: the resumed session still does not answer; rebuilding it", t)
        move = self._begin(MoveReason.LOST, None, HandleKind.NONE)
        self._start_own(move)

    # --- helpers --------------------------------------------------------------------------------

    def _report_waiter(self) -> asyncio.Future[MoveReport]:
        waiter: asyncio.Future[MoveReport] = asyncio.get_running_loop().create_future()
        self._done.append(waiter)
        return waiter

    async def _wait_for_report(self) -> MoveReport:
        return await self._bounded(self._report_waiter())

    async def _bounded(self, waiter: asyncio.Future[MoveReport]) -> MoveReport:
        options = self._options
        bound = (
            sum(options.retry_delays)
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

    def _describe(self, error: BaseException) -> str:
        text = str(error) or type(error).__name__
        return scrub(text, self._t._secrets)

    def _running(self) -> list[asyncio.Task[Any]]:
        return [task for task in (self._helper_task, self._own) if task and not task.done()]

    @staticmethod
    def _busy(task: asyncio.Task[Any] | None) -> bool:
        return task is not None and not task.done()
