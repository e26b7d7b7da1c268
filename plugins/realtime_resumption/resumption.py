"""Decides when a realtime session moves to a new connection, and drives the move.

:class:`SessionResumption` holds no transport. The driver (the transport) reports what the
provider says — resumption updates, turn boundaries, ``goAway`` notices, lost connections — and
supplies ``reconnect(handle)``, the call that opens the replacement connection resuming from
``handle``. The helper chooses the moment and the handle, then runs the attempts.

A handle is what the driver passes: the provider's text, or a
:class:`~realtime_resumption.handles.HandleRef` when the driver keeps the text elsewhere (the
Gemini transport keeps each handle's text once, in its ``HandleBook``). The helper only keeps
and compares handles, so it works the same with either.

The decisions (the resumable point, the deadline fallback, the storm spread, the attempts and
their delays) are :class:`~realtime_resumption.move_timing.MoveTiming`'s, a pure machine; the
helper is its asyncio driver: it runs the machine's timers on the loop, and the attempts it asks
for in a move task of its own.

Time comes from the running event loop (timers and sleeps only), so tests fast-forward it.
Call every method from the event loop the helper's moves run on.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from loguru import logger

from . import move_timing as t
from .handles import HandleRef
from .move_reports import HandleKind, MoveReason
from .move_timing import (
    DEFAULT_GO_AWAY_NOTICE,
    MIN_DEADLINE_MARGIN,
    STORM_SPREAD_SHARE,
    MoveDecision,
    ResumptionOptions,
)
from .redaction import redact

__all__ = [
    "DEFAULT_GO_AWAY_NOTICE",
    "MIN_DEADLINE_MARGIN",
    "STORM_SPREAD_SHARE",
    "HandleKind",
    "MoveDecision",
    "MoveReason",
    "MoveTimers",
    "Reconnect",
    "ReconnectFailed",
    "ResumptionOptions",
    "SessionResumption",
]

H = TypeVar("H", str, HandleRef)
"""A handle as the driver passes it: its text, or a reference to it."""

_TASK_NAME = "realtime-resumption-move"

Reconnect = Callable[[H], Awaitable[None]]
"""Opens the replacement connection, resuming the session from the given handle.

Returns when the new connection is ready; raises (or is cancelled at the attempt timeout) when
it is not. It must honour cancellation: the helper cancels it at the attempt timeout and on
``dispose()``.
"""

ReconnectFailed = Callable[[Exception], None]
"""Called once, with the last attempt's error, when every attempt of a move failed."""


class MoveTimers:
    """Runs the timers of a :class:`~realtime_resumption.move_timing.MoveTiming` on the running
    event loop (its :class:`~realtime_resumption.move_timing.StartTimer` and
    :class:`~realtime_resumption.move_timing.CancelTimer` actions) and reports each expiry to
    ``expired``, with the loop's time."""

    def __init__(self, expired: Callable[[t.TimerExpired], None]) -> None:
        self._expired = expired
        self._handles: dict[t.TimerKind, asyncio.TimerHandle] = {}

    @property
    def idle(self) -> bool:
        """No timer is running."""
        return not self._handles

    def carry_out(self, action: t.StartTimer | t.CancelTimer) -> None:
        """Start (replacing one of the same kind) or cancel a timer."""
        old = self._handles.pop(action.kind, None)
        if old is not None:
            old.cancel()
        if isinstance(action, t.StartTimer):
            loop = asyncio.get_running_loop()
            self._handles[action.kind] = loop.call_at(action.at, self._fire, action.kind)

    def _fire(self, kind: t.TimerKind) -> None:
        del self._handles[kind]
        self._expired(t.TimerExpired(kind, asyncio.get_running_loop().time()))


class SessionResumption(Generic[H]):
    """Decides when a session moves to a new connection, and drives the move.

    Resumable point: a handle marked resumable and issued while no turn is in progress, with no
    turn started since. Only such a handle is a place for a planned move; any other handle is a
    fallback for the deadline or a lost connection. After ``go_away`` the helper moves at once
    if the latest handle is a resumable point, else at the next one, else shortly before the
    deadline with the latest handle. A move runs one attempt per ``retry_delays`` entry, each
    bounded by ``attempt_timeout``; when all fail it calls ``on_reconnect_failed`` once and
    stops: every later call is then a no-op and ``connection_lost()`` returns False.

    After a move succeeds (``reconnect`` returned) the helper serves the new connection: the
    handle it moved with is kept as the fallback, but it is no longer a resumable point — a
    planned move waits for the new connection's first resumable handle. Updates that arrive
    while a move is in flight are kept as fallbacks, never as resumable points, since they may
    come from the connection being replaced.

    The decisions are :class:`~realtime_resumption.move_timing.MoveTiming`'s; the helper runs
    its timers and the attempts it asks for.
    """

    def __init__(
        self,
        reconnect: Reconnect[H],
        options: ResumptionOptions | None = None,
        on_reconnect_failed: ReconnectFailed | None = None,
        *,
        spread_draw: Callable[[], float] = random.random,
    ) -> None:
        """``spread_draw``: a number in [0, 1) per spread move (see
        ``ResumptionOptions.storm_spread``); tests pass their own."""
        self._reconnect: Reconnect[H] = reconnect
        self._options = options if options is not None else ResumptionOptions()
        self._on_reconnect_failed = on_reconnect_failed
        self._timing: t.MoveTiming[H] = t.MoveTiming(self._options, spread_draw=spread_draw)
        self._timers = MoveTimers(self._send)
        self._move_task: asyncio.Task[None] | None = None
        self._last_move: MoveDecision[H] | None = None
        self._moves = 0

    @property
    def options(self) -> ResumptionOptions:
        """The options the helper runs with."""
        return self._options

    @property
    def latest_handle(self) -> H | None:
        """The handle a move would resume from, or None before the first usable update.

        That is the latest non-empty handle the provider issued, except that a handle marked
        not resumable never replaces an earlier one (it is kept only when there is no other).
        """
        return self._timing.latest_handle

    @property
    def reconnecting(self) -> bool:
        """Whether a move is in progress (from its decision until ``reconnect`` returned, the
        attempts ran out, or ``dispose()``)."""
        return self._timing.moving

    @property
    def last_move(self) -> MoveDecision[H] | None:
        """The current or latest move's attempt: set before each ``reconnect`` call, so the
        driver reads it inside ``reconnect`` to learn which kind of handle it got and why."""
        return self._last_move

    @property
    def stopped(self) -> bool:
        """Whether the helper gave up (every attempt failed) or was disposed."""
        return self._timing.stopped

    @property
    def is_idle(self) -> bool:
        """Whether nothing of the helper is scheduled: no deadline timer, no move task alive.

        Right after ``dispose()`` the cancelled move task may need a few loop iterations to
        unwind; it is idle once it has.
        """
        return self._timers.idle and (self._move_task is None or self._move_task.done())

    def resumption_update(self, handle: H | None, resumable: bool | None) -> None:
        """Records the provider's latest resumption state.

        - A non-empty ``handle`` with ``resumable`` true becomes the latest handle; it is a
          resumable point unless a turn is in progress (or a move is in flight). A point with a
          ``goAway`` pending starts the move at once.
        - ``resumable`` false (None, as the wire omits false) means resuming from the previous
          handle would lose data: the previous handle stays the fallback but is no longer a
          resumable point. A handle in such an update is kept only if there is no other, as a
          last resort for a lost connection.
        - An update without a handle (None or ``""``) never supplies one: an empty handle is
          never used to resume. With ``resumable`` true it changes nothing.
        """
        timing = self._timing
        if timing.stopped:
            return
        moving = timing.moving
        self._send(t.Update(handle, resumable))
        if not resumable:
            logger.debug("resumption update: not resumable, handle {}", redact(handle))
        elif not handle:
            logger.debug("resumption update: resumable but no handle; nothing to resume from")
        else:
            logger.debug(
                "resumption update: handle {} ({})",
                redact(handle),
                # (a point a move just left from is spent already)
                "resumable point"
                if timing.at_point or (timing.moving and not moving)
                else "fallback",
            )

    def turn_started(self) -> None:
        """A turn started or continued: a planned move waits until it ends. Repeats change
        nothing. The latest handle stops being a resumable point: resuming from it would drop
        the turn."""
        self._send(t.TurnStarted())

    def turn_ended(self) -> None:
        """The turn ended (turnComplete, no tool call pending): the next resumable handle is a
        resumable point. Also call it when a turn ends any other way (interrupted, or cut by a
        move), or planned moves wait for the deadline. Repeats change nothing."""
        self._send(t.TurnEnded())

    def go_away(self, time_left: float | None) -> None:
        """The provider will close the current connection in ``time_left`` seconds.

        Moves at once if the latest handle is a resumable point (after a random share of
        ``options.storm_spread``, when set); otherwise at the next one; if
        none comes, with the latest handle at ``deadline - clamp(time_left / 3,
        MIN_DEADLINE_MARGIN, options.deadline_margin)``, or at once when that moment has passed.
        ``None``, NaN or infinity mean no figure: :data:`DEFAULT_GO_AWAY_NOTICE` applies; a
        negative figure counts as 0. A second notice while one is pending starts no second move
        and never postpones anything: the deadline and the fallback moment only move earlier.
        Ignored while a move is in flight. With no handle at all when the fallback moment
        comes, the notice lapses and the driver's ``connection_lost()`` decides.
        """
        timing = self._timing
        if timing.stopped or timing.moving:
            return
        now = asyncio.get_running_loop().time()
        logger.info("goAway: connection closes in {:.3f} s", t.notice_seconds(time_left))
        self._send(t.GoAway(now, time_left))
        if timing.fallback_at is not None:
            logger.info("goAway: fallback move in {:.3f} s at the latest", timing.fallback_at - now)

    def connection_lost(self) -> bool:
        """The connection closed without the consumer asking.

        Returns True when a move started (or one was already in flight): the driver reports
        "reconnecting". Returns False when there is no handle to resume from, or the helper
        stopped: the driver keeps its fatal path. Any pending ``goAway`` is dropped either way.
        """
        if self._timing.stopped:
            return False
        self._send(t.ConnectionLost())
        if not self._timing.moving:
            logger.info("connection lost with no handle to resume from")
            return False
        return True

    def forget(self) -> None:
        """Forgets the server session: its handles, any ``goAway`` pending, any move in flight
        (abandoned) and a stop after failed attempts. The helper then serves a new server
        session (a fresh connect, a rebuild) as a new helper would, so one helper lives as
        long as its driver."""
        self._send(t.Forget())
        if self._move_task is not None:
            self._move_task.cancel()
            self._move_task = None
        self._last_move = None

    def dispose(self) -> None:
        """Cancels timers, abandons any attempt in flight, stops retries. Nothing runs after;
        every later call is a no-op (until ``forget``). Idempotent."""
        self._send(t.Dispose())
        if self._move_task is not None:
            self._move_task.cancel()

    def _send(self, event: t.Event[H]) -> None:
        for action in self._timing.send(event):
            if isinstance(action, (t.StartTimer, t.CancelTimer)):
                self._timers.carry_out(action)
            elif isinstance(action, t.Attempt):
                self._start_move(action)
            elif isinstance(action, t.Lapsed):
                logger.warning("goAway deadline near and no handle to resume from; notice lapses")
            elif isinstance(action, t.MoveNow) and action.reason is MoveReason.PLANNED:
                logger.debug("goAway: planned move at the resumable point")

    def _start_move(self, first: t.Attempt[H]) -> None:
        decision = first.decision
        self._last_move = decision
        self._moves += 1
        logger.info(
            "moving ({}) with {} handle {}", decision.reason, decision.kind, redact(decision.handle)
        )
        self._move_task = asyncio.get_running_loop().create_task(
            self._move(first), name=f"{_TASK_NAME}-{self._moves}"
        )

    async def _move(self, attempt: t.Attempt[H]) -> None:
        """The move's retry loop: each attempt after its delay, until the decider says the
        move is over (succeeded, or given up)."""
        try:
            while True:
                if attempt.delay > 0:
                    await asyncio.sleep(attempt.delay)
                decision = attempt.decision
                self._last_move = decision
                error = await self._attempt(decision.handle)
                if error is None:
                    self._timing.send(t.AttemptSucceeded())
                    self._move_task = None
                    logger.info("moved on attempt {} ({})", decision.attempt, decision.reason)
                    return
                logger.warning(
                    "move attempt {} with handle {} failed: {}",
                    decision.attempt,
                    redact(decision.handle),
                    _describe(error, decision.handle),
                )
                [after] = self._timing.send(t.AttemptFailed())
                if isinstance(after, t.GiveUp):
                    self._move_task = None
                    logger.error(
                        "every move attempt failed; giving up: {}",
                        _describe(error, decision.handle),
                    )
                    self._report_failure(error)
                    return
                assert isinstance(after, t.Attempt)
                attempt = after
        finally:
            # Also reached when dispose() cancelled the task: drop the reference either way.
            if self._move_task is asyncio.current_task():
                self._move_task = None

    async def _attempt(self, handle: H) -> Exception | None:
        timeout = self._options.attempt_timeout
        try:
            # Awaited in the move's own task (not wrapped in another, as wait_for does on
            # Python 3.11): when reconnect returns, the move ends in the same step, so a loss
            # the driver reports right after its switch starts a new move instead of being
            # taken for the move in flight. A synchronous raise and a non-awaitable result land
            # in the handlers below too.
            async with asyncio.timeout(timeout):
                await self._reconnect(handle)
        except TimeoutError:
            return TimeoutError(f"reconnect did not return within attempt_timeout ({timeout} s)")
        except asyncio.CancelledError:
            if self._timing.stopped or _cancel_requested():
                raise
            # reconnect itself raised CancelledError (e.g. the driver abandoned its dial): that
            # is a failed attempt, not a request to stop the move.
            return RuntimeError("reconnect was cancelled from inside")
        except Exception as error:
            return error
        return None

    def _report_failure(self, error: Exception) -> None:
        if self._on_reconnect_failed is None:
            return
        try:
            self._on_reconnect_failed(error)
        except Exception as callback_error:
            handle = self._last_move.handle if self._last_move is not None else None
            logger.error("on_reconnect_failed raised {}", _describe(callback_error, handle))


def _cancel_requested() -> bool:
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Task.cancelling() exists from Python 3.11
    return callable(cancelling) and bool(cancelling())


def _describe(error: BaseException, handle: str | HandleRef | None) -> str:
    # A driver's error message may quote the handle: never let it reach the log whole.
    text = str(error)
    if isinstance(handle, str) and handle:
        text = text.replace(handle, redact(handle))
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
