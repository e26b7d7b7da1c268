"""Decides when a realtime session moves to a new connection, and drives the move.

:class:`SessionResumption` holds no transport. The driver (the transport) reports what the
provider says — resumption updates, turn boundaries, ``goAway`` notices, lost connections — and
supplies ``reconnect(handle)``, the call that opens the replacement connection resuming from
``handle``. The helper chooses the moment and the handle, then runs the attempts.

A handle is what the driver passes: the provider's text, or a
:class:`~realtime_resumption.handles.HandleRef` when the driver keeps the text elsewhere (the
Gemini transport keeps each handle's text once, in its ``HandleBook``). The helper only keeps
and compares handles, so it works the same with either.

Time comes from the running event loop (timers and sleeps only), so tests fast-forward it.
Call every method from the event loop the helper's moves run on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from loguru import logger

from .handles import HandleRef
from .move_reports import HandleKind, MoveReason
from .redaction import redact

H = TypeVar("H", str, HandleRef)
"""A handle as the driver passes it: its text, or a reference to it."""

MIN_DEADLINE_MARGIN = 1.0
"""The least time, in seconds, a deadline-forced move keeps before the announced close.

Dialling a replacement takes a TLS handshake and a setup round trip; under a second left, the
old connection would close before the new one is up.
"""

DEFAULT_GO_AWAY_NOTICE = 30.0
"""The notice, in seconds, assumed when ``go_away`` gets no figure (or a non-finite one).

It is the shortest notice observed (Vertex AI; the Gemini API gives 50–60 s), so a deadline
fallback computed from it is early rather than late: a too-early move may cut a turn, a too-late
one loses the connection.
"""

STORM_SPREAD_SHARE = 0.25
"""The most of the time left before the deadline fallback a spread planned move waits: the
rest is for the turn a user may start meanwhile, and for the move's own attempts."""

_TASK_NAME = "realtime-resumption-move"

Reconnect = Callable[[H], Awaitable[None]]
"""Opens the replacement connection, resuming the session from the given handle.

Returns when the new connection is ready; raises (or is cancelled at the attempt timeout) when
it is not. It must honour cancellation: the helper cancels it at the attempt timeout and on
``dispose()``.
"""

ReconnectFailed = Callable[[Exception], None]
"""Called once, with the last attempt's error, when every attempt of a move failed."""


@dataclass(frozen=True, repr=False)
class MoveDecision(Generic[H]):
    """One attempt of a move: the handle it resumes from, that handle's kind
    (``after-turn`` or ``mid-turn``), and why (``planned``, ``deadline`` or ``lost``)."""

    handle: H
    kind: HandleKind
    reason: MoveReason
    attempt: int
    """1 for the first attempt of the move, then counting up through the retries."""

    def __repr__(self) -> str:
        return (
            f"MoveDecision(handle={redact(self.handle)}, kind={str(self.kind)!r}, "
            f"reason={str(self.reason)!r}, attempt={self.attempt})"
        )


@dataclass(frozen=True)
class ResumptionOptions:
    """How a move is timed and retried. Durations are in seconds.

    - ``deadline_margin`` (5 s): the most a deadline-forced move keeps before the announced
      close. With the usual 30–60 s notice a turn has 25–55 s to finish at a resumable point,
      and 5 s still fits a dial, a setup and a quick retry. At least :data:`MIN_DEADLINE_MARGIN`.
    - ``retry_delays`` ((0, 0.5, 1, 2, 4)): the pause before each attempt; one attempt per entry.
      The first is immediate because most failures are transient; the backoff then doubles, so
      five attempts span under 8 s of pauses — enough to ride out a brief outage without
      keeping a caller in silence for long.
    - ``attempt_timeout`` (10 s): the bound on one ``reconnect`` call. A setup normally
      completes within a second or two, but the provider may hold a handshake open and never
      answer; 10 s tolerates a slow network yet leaves room for the retries.
    - ``storm_spread`` (0 s: off, as seed 000 moves at once): the most a planned move at a
      resumable point waits after ``goAway`` before it starts, a random share of it per
      session, and never more than :data:`STORM_SPREAD_SHARE` of the time left before the
      deadline fallback. The service sends ``goAway`` to many sessions at once; a process
      serving many calls spreads their dials and replays instead of running them all in one
      burst. A few seconds suit a process with tens of calls; a turn the user starts
      meanwhile makes the move wait for the next resumable point, as without it.

    Invalid values raise ValueError (TypeError for a non-number) naming the field.
    """

    deadline_margin: float = 5.0
    retry_delays: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0)
    attempt_timeout: float = 10.0
    storm_spread: float = 0.0

    def __post_init__(self) -> None:
        _check_seconds("deadline_margin", self.deadline_margin)
        if self.deadline_margin < MIN_DEADLINE_MARGIN:
            raise ValueError(
                f"deadline_margin must be at least MIN_DEADLINE_MARGIN ({MIN_DEADLINE_MARGIN} s),"
                f" got {self.deadline_margin!r}"
            )
        # Accept any iterable, store a tuple: the options stay immutable and hashable.
        delays = tuple(self.retry_delays)
        object.__setattr__(self, "retry_delays", delays)
        if not delays:
            raise ValueError("retry_delays needs at least one entry (one per attempt)")
        for index, delay in enumerate(delays):
            _check_seconds(f"retry_delays[{index}]", delay)
        _check_seconds("attempt_timeout", self.attempt_timeout)
        if self.attempt_timeout == 0:
            raise ValueError("attempt_timeout must be greater than 0 s, got 0")
        _check_seconds("storm_spread", self.storm_spread)


def _check_seconds(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite, non-negative number of seconds, got {value!r}")


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
        self._spread_draw = spread_draw
        self._options = options if options is not None else ResumptionOptions()
        self._on_reconnect_failed = on_reconnect_failed
        self._latest_handle: H | None = None
        self._at_point = False
        self._in_turn = False
        self._fallback_at: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._spread: asyncio.TimerHandle | None = None
        """A planned move at a resumable point, waiting out its share of the storm spread."""
        self._move_task: asyncio.Task[None] | None = None
        self._last_move: MoveDecision[H] | None = None
        self._moves = 0
        self._stopped = False

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
        return self._latest_handle

    @property
    def reconnecting(self) -> bool:
        """Whether a move is in progress (from its decision until ``reconnect`` returned, the
        attempts ran out, or ``dispose()``)."""
        return not self._stopped and self._move_task is not None

    @property
    def last_move(self) -> MoveDecision[H] | None:
        """The current or latest move's attempt: set before each ``reconnect`` call, so the
        driver reads it inside ``reconnect`` to learn which kind of handle it got and why."""
        return self._last_move

    @property
    def stopped(self) -> bool:
        """Whether the helper gave up (every attempt failed) or was disposed."""
        return self._stopped

    @property
    def is_idle(self) -> bool:
        """Whether nothing of the helper is scheduled: no deadline timer, no move task alive.

        Right after ``dispose()`` the cancelled move task may need a few loop iterations to
        unwind; it is idle once it has.
        """
        return (
            self._timer is None
            and self._spread is None
            and (self._move_task is None or self._move_task.done())
        )

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
        if self._stopped:
            return
        if not resumable:
            self._at_point = False
            if handle and self._latest_handle is None:
                self._latest_handle = handle
            logger.debug("resumption update: not resumable, handle {}", redact(handle))
            return
        if not handle:
            logger.debug("resumption update: resumable but no handle; nothing to resume from")
            return
        self._latest_handle = handle
        self._at_point = not self._in_turn and self._move_task is None
        logger.debug(
            "resumption update: handle {} ({})",
            redact(handle),
            "resumable point" if self._at_point else "fallback",
        )
        if self._at_point and self._fallback_at is not None and self._spread is None:
            self._start_move(MoveReason.PLANNED)

    def turn_started(self) -> None:
        """A turn started or continued: a planned move waits until it ends. Repeats change
        nothing. The latest handle stops being a resumable point: resuming from it would drop
        the turn."""
        if self._stopped:
            return
        self._in_turn = True
        self._at_point = False

    def turn_ended(self) -> None:
        """The turn ended (turnComplete, no tool call pending): the next resumable handle is a
        resumable point. Also call it when a turn ends any other way (interrupted, or cut by a
        move), or planned moves wait for the deadline. Repeats change nothing."""
        if self._stopped:
            return
        self._in_turn = False

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
        if self._stopped or self._move_task is not None:
            return
        notice = _notice_seconds(time_left)
        now = asyncio.get_running_loop().time()
        margin = min(max(notice / 3, MIN_DEADLINE_MARGIN), self._options.deadline_margin)
        fallback_at = now + notice - margin
        if self._fallback_at is not None:
            fallback_at = min(fallback_at, self._fallback_at)
        self._fallback_at = fallback_at
        logger.info(
            "goAway: connection closes in {:.3f} s; fallback move in {:.3f} s at the latest",
            notice,
            max(fallback_at - now, 0.0),
        )
        self._cancel_timer()
        loop = asyncio.get_running_loop()
        if self._at_point and self._spread is None:
            delay = self._spread_delay(fallback_at - now)
            if delay <= 0:
                self._start_move(MoveReason.PLANNED)
                return
            logger.debug("goAway: planned move spread by {:.3f} s", delay)
            self._spread = loop.call_later(delay, self._spread_over)
        if fallback_at <= now:
            self._deadline_reached()
        else:
            self._timer = loop.call_at(fallback_at, self._deadline_reached)

    def connection_lost(self) -> bool:
        """The connection closed without the consumer asking.

        Returns True when a move started (or one was already in flight): the driver reports
        "reconnecting". Returns False when there is no handle to resume from, or the helper
        stopped: the driver keeps its fatal path. Any pending ``goAway`` is dropped either way.
        """
        if self._stopped:
            return False
        if self._move_task is not None:
            return True
        if self._latest_handle is None:
            self._clear_go_away()
            logger.info("connection lost with no handle to resume from")
            return False
        self._start_move(MoveReason.LOST)
        return True

    def forget(self) -> None:
        """Forgets the server session: its handles, any ``goAway`` pending, any move in flight
        (abandoned) and a stop after failed attempts. The helper then serves a new server
        session (a fresh connect, a rebuild) as a new helper would, so one helper lives as
        long as its driver."""
        self._clear_go_away()
        if self._move_task is not None:
            self._move_task.cancel()
            self._move_task = None
        self._latest_handle = None
        self._at_point = False
        self._in_turn = False
        self._last_move = None
        self._stopped = False

    def dispose(self) -> None:
        """Cancels timers, abandons any attempt in flight, stops retries. Nothing runs after;
        every later call is a no-op (until ``forget``). Idempotent."""
        self._stopped = True
        self._clear_go_away()
        if self._move_task is not None:
            self._move_task.cancel()

    def _start_move(self, reason: MoveReason) -> None:
        handle = self._latest_handle
        assert handle is not None, "a move needs a handle"
        kind = HandleKind.AFTER_TURN if self._at_point else HandleKind.MID_TURN
        self._clear_go_away()
        # The handle is being spent: the next resumable point comes from the new connection.
        self._at_point = False
        self._last_move = MoveDecision(handle=handle, kind=kind, reason=reason, attempt=1)
        self._moves += 1
        logger.info("moving ({}) with {} handle {}", reason, kind, redact(handle))
        self._move_task = asyncio.get_running_loop().create_task(
            self._move(self._last_move), name=f"{_TASK_NAME}-{self._moves}"
        )

    async def _move(self, decision: MoveDecision[H]) -> None:
        try:
            error: Exception | None = None
            for attempt, delay in enumerate(self._options.retry_delays, start=1):
                if delay > 0:
                    await asyncio.sleep(delay)
                self._last_move = dataclasses.replace(decision, attempt=attempt)
                error = await self._attempt(decision.handle)
                if error is None:
                    self._move_task = None
                    logger.info("moved on attempt {} ({})", attempt, decision.reason)
                    return
                logger.warning(
                    "move attempt {} with handle {} failed: {}",
                    attempt,
                    redact(decision.handle),
                    _describe(error, decision.handle),
                )
            assert error is not None, "retry_delays is never empty"
            self._move_task = None
            self._stopped = True
            logger.error(
                "every move attempt failed; giving up: {}", _describe(error, decision.handle)
            )
            self._report_failure(error)
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
            if self._stopped or _cancel_requested():
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

    def _spread_delay(self, until_fallback: float) -> float:
        """This session's share of the storm spread: a draw within the spread, never more
        than :data:`STORM_SPREAD_SHARE` of the time left before the fallback."""
        spread = min(self._options.storm_spread, STORM_SPREAD_SHARE * until_fallback)
        if spread <= 0:
            return 0.0
        draw = self._spread_draw()
        if not (math.isfinite(draw) and 0 <= draw < 1):
            raise ValueError(f"spread_draw must give a number in [0, 1), gave {draw!r}")
        return spread * draw

    def _spread_over(self) -> None:
        self._spread = None
        # A turn started meanwhile: the next resumable point (or the deadline) moves instead.
        if self._at_point and self._fallback_at is not None:
            self._start_move(MoveReason.PLANNED)

    def _deadline_reached(self) -> None:
        self._timer = None
        if self._latest_handle is None:
            logger.warning("goAway deadline near and no handle to resume from; notice lapses")
            self._clear_go_away()
            return
        self._start_move(MoveReason.DEADLINE)

    def _clear_go_away(self) -> None:
        self._fallback_at = None
        self._cancel_timer()
        if self._spread is not None:
            self._spread.cancel()
            self._spread = None

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _notice_seconds(time_left: float | None) -> float:
    if time_left is None or not math.isfinite(time_left):
        return DEFAULT_GO_AWAY_NOTICE
    return max(float(time_left), 0.0)


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
