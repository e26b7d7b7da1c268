"""When a session moves to a new connection, and from which handle: one pure state machine.

:class:`MoveTiming` holds every decision about the moment of a move and nothing else, in the
spirit of h11: no I/O, no asyncio, no clock of its own (the caller passes ``now``, in seconds
of its own clock), no randomness of its own (the storm spread's draw is injected). The caller
feeds it :data:`Event` values and carries out the :data:`Action` values :meth:`MoveTiming.send`
returns. Timers are actions (:class:`StartTimer`, :class:`CancelTimer`); the caller reports
their expiry as :class:`TimerExpired`.

Two callers drive it. :class:`~realtime_resumption.resumption.SessionResumption` (the
standalone helper) lets it run the attempts too (``attempts=True``): each :class:`MoveNow` is
followed by :class:`Attempt` values, one per ``retry_delays`` entry, until one succeeds or
:class:`GiveUp`. The Gemini transport's rotation (``attempts=False``) hands each
:class:`MoveNow` to its move machine (``move_machine``), whose attempts follow the failure
policy, and reports back how the move ended (:class:`Switched`, :class:`Abandoned`).

What it holds:

- the latest handle, and whether it is a *resumable point*: marked resumable, issued while no
  turn was in progress, with no turn started since (only such a handle is a place for a planned
  move; any other is a fallback for the deadline or a lost connection);
- whether a turn is in progress;
- the *want*: a ``goAway`` (or a setup change the connection cannot take) asked for a move.
  Its *deadline* (when the connection closes: the earliest announced) and its *fallback*
  moment, ``deadline - clamp(notice / 3, MIN_DEADLINE_MARGIN, deadline_margin)``, when the
  move is forced with the latest handle if no resumable point came;
- the storm spread: a planned move at a resumable point waits a drawn share of
  ``storm_spread``;
- the move in flight and its attempt (``attempts=True`` only), and whether it gave up;
- for the rotation: whether the want came from a ``goAway`` or a setup change (the move's
  reason), the deadline the last move answered, whether the server session is ending (the
  next move rebuilds), and whether the connection the last move installed is still *quiet*
  (nothing said on it since the switch: that point is as good as a resumable one).

Transitions (``point``: the latest handle is a resumable point; ``want``: a move is wanted)::

    Update(handle, resumable)   resumable with a handle: it is the latest, a point unless a
                                turn is in progress or a move in flight; point and want (no
                                spread waiting) ─► MoveNow(planned)
                                not resumable: no point (its handle kept only if none is)
    TurnStarted                 turn in progress, no point, not quiet
    TurnEnded                   no turn in progress (the next resumable handle is a point;
                                ``rebuilds``: the point itself, and with a want
                                ─► MoveNow(planned, none))
    Heard                       not quiet (a sign of the user that starts no turn)
    GoAway(now, time_left)      want; deadline and fallback only move earlier; quiet: the
                                latest handle is a point (no handle: MoveNow(planned, none)
                                when the caller can rebuild); point ─► MoveNow(planned), or
                                StartTimer(spread); StartTimer(fallback), or at once
                                ─► MoveNow(deadline); ignored during a move in flight
    ConfigChanged(now, within)  no turn in progress, no point, and the connection has
                                answered nothing (quiet, no handle yet, or still on the
                                handle it was resumed from): no resumable point comes
                                before the user's next turn ─► MoveNow(config, forced) now,
                                from the latest handle (none: the caller rebuilds); else as
                                GoAway, without the quiet rule: reason ``config``
    ConfigDropped               the setup change is gone (rolled back): reason as if none
    Requested(reason)           ─► MoveNow(reason) now, from the point or the latest handle
                                (none: MoveNow(reason, none), the caller rebuilds)
    ResumedFrom(handle)         ``handle`` is the latest, no point; until the session
                                issues a handle or the user is heard, a setup change
                                moves now (from it, mid-turn: it may be a foreign one)
    TimerExpired(spread)        still a point, still a want ─► MoveNow(planned)
    TimerExpired(fallback)      a handle (or ``rebuilds``) ─► MoveNow(deadline); none: Lapsed
                                (the want ends)
    ConnectionLost              a handle ─► MoveNow(lost); none: the want ends, no move
    AttemptSucceeded            the move in flight ends (the handle stays, as a fallback)
    AttemptFailed               ─► Attempt(next, its delay), or GiveUp: stopped
    Switched(resumed, replayed_turn)  the rotation's move switched: the connection is quiet
                                unless the input replayed into it carries a turn; the
                                deadline answered is kept when resumed after a goAway;
                                rebuilt: the old session's handles are forgotten
    Abandoned(now, handle)      the rotation gave its planned move up (a turn began on the
                                incumbent): ``handle`` is the latest, a turn is in progress,
                                the want goes on with the notice left of its deadline
    Forget                      the server session's handles, the want, the move in flight
                                and a stop are forgotten
    Dispose                     stopped: every later event but Forget changes nothing

Every :class:`MoveNow` ends the want (its timers are cancelled) and spends the point: the
next resumable point comes from the new connection.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Generic, TypeVar

from realtime_resumption.handles import HandleRef
from realtime_resumption.move_reports import HandleKind, MoveReason
from realtime_resumption.redaction import redact

H = TypeVar("H", str, HandleRef)
"""A handle as the caller passes it: its text, or a reference to it."""

MIN_DEADLINE_MARGIN: Final = 1.0
"""The least time, in seconds, a deadline-forced move keeps before the announced close.

Dialling a replacement takes a TLS handshake and a setup round trip; under a second left, the
old connection would close before the new one is up.
"""

DEFAULT_GO_AWAY_NOTICE: Final = 30.0
"""The notice, in seconds, assumed when ``go_away`` gets no figure (or a non-finite one).

It is the shortest notice observed (Vertex AI; the Gemini API gives 50–60 s), so a deadline
fallback computed from it is early rather than late: a too-early move may cut a turn, a too-late
one loses the connection.
"""

STORM_SPREAD_SHARE: Final = 0.25
"""The most of the time left before the deadline fallback a spread planned move waits: the
rest is for the turn a user may start meanwhile, and for the move's own attempts."""

SESSION_END_TOLERANCE: Final = 1.0
"""Seconds by which a ``goAway``'s deadline may pass the one the last move answered and still
be the same end: the service states its notice in whole seconds (``"50s"``), and each
connection reads it after its own network delay."""


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


def notice_seconds(time_left: float | None) -> float:
    """The notice a ``goAway`` gives: ``time_left``, or :data:`DEFAULT_GO_AWAY_NOTICE` when it
    gives no finite figure; a negative figure counts as 0."""
    if time_left is None or not math.isfinite(time_left):
        return DEFAULT_GO_AWAY_NOTICE
    return max(float(time_left), 0.0)


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


class TimerKind(StrEnum):
    """The timers the caller runs for the machine."""

    SPREAD = "spread"
    """A planned move at a resumable point waits out its share of the storm spread."""
    FALLBACK = "fallback"
    """The deadline fallback: no resumable point came, the move is forced."""


# --- events -----------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Update(Generic[H]):
    """A resumption update: ``handle`` (None or empty: none) and whether the session can be
    resumed from this point without losing data (None: the wire omitted false)."""

    handle: H | None
    resumable: bool | None

    def __repr__(self) -> str:
        return f"Update(handle={redact(self.handle)}, resumable={self.resumable})"


@dataclass(frozen=True)
class TurnStarted:
    """A turn started or continued (user speech, a client turn, model output)."""


@dataclass(frozen=True)
class TurnEnded:
    """The turn ended (turnComplete with no tool call pending, an interruption, a cut)."""


@dataclass(frozen=True)
class Heard:
    """A sign of the user that starts no turn by itself (the audio stream paused, an activity
    signal, speech while the connection was quiet): the connection is no longer quiet."""


@dataclass(frozen=True)
class GoAway:
    """The provider closes the current connection in ``time_left`` seconds (None: no figure).

    ``rebuild_when_quiet``: on a quiet connection with no handle, the caller can rebuild the
    session (it kept the history), so the move comes now. ``capped``: the server session
    itself has a cap the caller cannot lift (Gemini without context compression): a
    ``goAway`` whose deadline keeps the one the last move answered ends the server session.
    """

    now: float
    time_left: float | None
    rebuild_when_quiet: bool = False
    capped: bool = False


@dataclass(frozen=True)
class ConfigChanged:
    """The setup changed and the connection cannot apply it: move at the next resumable point,
    within ``within`` seconds.

    Gemini issues a resumable handle once it has answered a turn, so a connection that has
    answered nothing (a fresh one, or the one a move just installed) gives no resumable point
    before the user's next turn, and that turn would be heard and answered with the old setup.
    With no turn in progress there, the move comes now instead, forced (input is held for the
    new connection, so a turn that begins meanwhile goes to it whole, not cut). Every caller
    gets this, awaited or not: a Pipecat pipeline that changes its instructions before the
    user speaks wants the first answer to follow them as much as a LiveKit agent awaiting
    ``update_instructions`` does, and the price, one dial while nothing is said, is paid
    before anyone waits on it.
    """

    now: float
    within: float


@dataclass(frozen=True)
class ConfigDropped:
    """The setup change was rolled back: a later move is no longer for it."""


@dataclass(frozen=True)
class Requested:
    """The caller asks for a move now, for ``reason``."""

    reason: MoveReason = MoveReason.REQUESTED


@dataclass(frozen=True, repr=False)
class ResumedFrom(Generic[H]):
    """The session was opened by resuming ``handle`` (a connect with a handle, a takeover):
    it is the latest handle until the session issues one, and no resumable point (a planned
    move waits for the session's first), as after a move."""

    handle: H

    def __repr__(self) -> str:
        return f"ResumedFrom(handle={redact(self.handle)})"


@dataclass(frozen=True)
class TimerExpired:
    """The caller's timer of ``kind`` (started by :class:`StartTimer`) expired at ``now``."""

    kind: TimerKind
    now: float


@dataclass(frozen=True)
class ConnectionLost:
    """The connection closed without the caller asking."""


@dataclass(frozen=True)
class AttemptSucceeded:
    """The attempt in flight moved the session (``attempts=True``)."""


@dataclass(frozen=True)
class AttemptFailed:
    """The attempt in flight failed (``attempts=True``)."""


@dataclass(frozen=True)
class Switched:
    """The caller's move switched connections: ``resumed`` the server session, or rebuilt it
    (``attempts=False``). ``replayed_turn``: the input replayed into the new connection
    carries a turn (speech, typed text, a tool result): it may be answering before it says
    so, so it is not quiet."""

    resumed: bool
    replayed_turn: bool = False


@dataclass(frozen=True, repr=False)
class Abandoned(Generic[H]):
    """The caller gave its planned move up, as a turn began on the incumbent (``attempts=
    False``): ``handle`` is the latest the incumbent issued."""

    now: float
    handle: H | None

    def __repr__(self) -> str:
        return f"Abandoned(now={self.now!r}, handle={redact(self.handle)})"


@dataclass(frozen=True)
class Forget:
    """Forget the server session: its handles, the want, any move in flight, a stop."""


@dataclass(frozen=True)
class Dispose:
    """The session ends: nothing is decided any more (until :class:`Forget`)."""


Event = (
    Update[H]
    | TurnStarted
    | TurnEnded
    | Heard
    | GoAway
    | ConfigChanged
    | ConfigDropped
    | Requested
    | ResumedFrom[H]
    | TimerExpired
    | ConnectionLost
    | AttemptSucceeded
    | AttemptFailed
    | Switched
    | Abandoned[H]
    | Forget
    | Dispose
)


# --- actions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartTimer:
    """Start (or restart) the timer of ``kind`` to expire at ``at``; report its expiry as
    :class:`TimerExpired`."""

    at: float
    kind: TimerKind


@dataclass(frozen=True)
class CancelTimer:
    """Cancel the timer of ``kind``."""

    kind: TimerKind


@dataclass(frozen=True, repr=False)
class MoveNow(Generic[H]):
    """Move now, for ``reason``, from ``handle`` of ``kind`` (None: no handle to resume from,
    the caller rebuilds the session or fails). ``forced``: the deadline, a loss or a request
    away from a resumable point: a turn in progress is cut."""

    reason: MoveReason
    handle: H | None
    kind: HandleKind
    forced: bool

    def __repr__(self) -> str:
        return (
            f"MoveNow(reason={str(self.reason)!r}, handle={redact(self.handle)}, "
            f"kind={str(self.kind)!r}, forced={self.forced})"
        )


@dataclass(frozen=True)
class Attempt(Generic[H]):
    """Run ``decision`` (its attempt numbered) after ``delay`` seconds, then report
    :class:`AttemptSucceeded` or :class:`AttemptFailed` (``attempts=True``)."""

    decision: MoveDecision[H]
    delay: float


@dataclass(frozen=True)
class GiveUp:
    """Every attempt of the move failed: the machine stopped."""


@dataclass(frozen=True)
class Lapsed:
    """The fallback moment came with no handle to resume from: the want ends, and a lost
    connection decides."""


@dataclass(frozen=True)
class SessionEnds:
    """The ``goAway`` just received keeps the deadline the last move answered: the server
    session is ending, and the next move rebuilds it instead of resuming."""


Action = StartTimer | CancelTimer | MoveNow[H] | Attempt[H] | GiveUp | Lapsed | SessionEnds


# --- the machine ------------------------------------------------------------------------------


def _never_drawn() -> float:
    raise AssertionError("no storm spread configured")


@dataclass(repr=False)
class MoveTiming(Generic[H]):
    """When to move and from which handle; see the module documentation.

    ``attempts``: the machine also runs the move's attempts (one per ``retry_delays`` entry).
    ``spread_draw``: a number in [0, 1) per spread move (``ResumptionOptions.storm_spread``).
    """

    options: ResumptionOptions = field(default_factory=ResumptionOptions)
    attempts: bool = True
    spread_draw: Callable[[], float] = _never_drawn
    rebuilds: bool = False
    """The provider has no resumption handles (OpenAI Realtime): every move rebuilds a fresh
    session from the conversation, a turn's end (``TurnEnded``, no turn since) is the
    resumable point, and the deadline fallback rebuilds instead of lapsing
    (``attempts=False`` only)."""
    latest_handle: H | None = None
    """The handle a move would resume from, or None before the first usable update."""
    at_point: bool = False
    """The latest handle is a resumable point."""
    in_turn: bool = False
    deadline: float | None = None
    """When the connection closes, as the earliest ``goAway`` (or setup change) announced."""
    fallback_at: float | None = None
    """While a move is wanted: when it is forced with the latest handle."""
    answered_deadline: float | None = None
    """The deadline of the ``goAway`` the last move answered, while the connection it resumed
    serves (``attempts=False``)."""
    quiet: bool = False
    """Nothing was said on the connection the last move installed (``attempts=False``)."""
    ending: bool = False
    """The server session is ending: the next move rebuilds (``attempts=False``)."""
    stopped: bool = False
    """Every attempt failed, or disposed."""
    move: MoveDecision[H] | None = None
    """The move in flight (``attempts=True``), at its latest attempt."""
    _timers: set[TimerKind] = field(default_factory=set)
    _go_away: bool = False
    """A ``goAway`` is among what the move answers."""
    _config: bool = False
    """A setup change is among what the move answers."""
    _on_resumed: bool = False
    """The latest handle is the one the session was resumed from, and nothing was heard since:
    the connection has answered nothing."""

    def __post_init__(self) -> None:
        if self.rebuilds and self.attempts:
            raise ValueError("a MoveTiming that rebuilds leaves the attempts to its caller")

    def __repr__(self) -> str:
        return (
            f"MoveTiming(latest_handle={redact(self.latest_handle)}, at_point={self.at_point}, "
            f"in_turn={self.in_turn}, deadline={self.deadline!r}, "
            f"fallback_at={self.fallback_at!r}, move={self.move!r}, stopped={self.stopped})"
        )

    @property
    def moving(self) -> bool:
        """A move is in flight (``attempts=True``: from its decision until an attempt
        succeeded, the attempts ran out, a forget or a dispose)."""
        return self.move is not None

    @property
    def wanted(self) -> bool:
        """A move is wanted: waiting for a resumable point or the fallback."""
        return self.fallback_at is not None

    def send(self, event: Event[H]) -> list[Action[H]]:
        """Apply ``event``; returns the actions to carry out, in order."""
        if isinstance(event, (TurnStarted, Heard)):
            self.quiet = self._on_resumed = False
        if isinstance(event, Forget):
            return self._forget()
        if self.stopped:
            return []
        if isinstance(event, Update):
            return self._update(event)
        if isinstance(event, TurnStarted):
            self.in_turn = True
            self.at_point = False
        elif isinstance(event, TurnEnded):
            self.in_turn = False
            if self.rebuilds:
                # No handle will mark the point: the turn's end is the point itself.
                self.at_point = not self.moving
                if self.at_point and self.wanted and TimerKind.SPREAD not in self._timers:
                    return self._decide(MoveReason.PLANNED)
        elif isinstance(event, GoAway):
            return self._go_away_event(event)
        elif isinstance(event, ConfigChanged):
            if self.moving:
                return []
            self._config = True
            self._note_deadline(event.now + event.within)
            if not self.in_turn and not self.at_point:
                if self.latest_handle is None:
                    return self._clear_want() + self._rebuild(MoveReason.CONFIG, True)
                if self.quiet:
                    self.at_point = True  # nothing said since the switch: as good as a point
                if self.quiet or self._on_resumed:
                    return self._decide(MoveReason.CONFIG)
            return self._want(event.now, event.within)
        elif isinstance(event, ConfigDropped):
            self._config = False
        elif isinstance(event, Requested):
            if self.latest_handle is None:
                return self._clear_want() + self._rebuild(event.reason, False)
            # From the resumable point if there is one (and no spread wait holds it), else
            # forced from the latest handle: the caller wants the move now either way.
            point = self.at_point and TimerKind.SPREAD not in self._timers
            return self._decide(
                MoveReason.PLANNED if point else MoveReason.DEADLINE, requested=event.reason
            )
        elif isinstance(event, ResumedFrom):
            self.latest_handle = event.handle
            self.at_point = False
            self._on_resumed = True
        elif isinstance(event, TimerExpired):
            return self._expired(event)
        elif isinstance(event, ConnectionLost):
            return self._lost()
        elif isinstance(event, AttemptSucceeded):
            return self._succeeded()
        elif isinstance(event, AttemptFailed):
            return self._failed()
        elif isinstance(event, Switched):
            return self._switched(event)
        elif isinstance(event, Abandoned):
            return self._abandoned(event)
        elif isinstance(event, Dispose):
            self.stopped = True
            self.move = None
            return self._clear_want()
        return []

    # --- transitions --------------------------------------------------------------------------

    def _update(self, event: Update[H]) -> list[Action[H]]:
        handle = event.handle
        if handle:
            self._on_resumed = False  # the session issued a handle of its own
        if not event.resumable:
            self.at_point = False
            if handle and self.latest_handle is None:
                self.latest_handle = handle
            return []
        if not handle:
            return []
        self.latest_handle = handle
        self.at_point = not self.in_turn and not self.moving
        if self.at_point and self.wanted and TimerKind.SPREAD not in self._timers:
            return self._decide(MoveReason.PLANNED)
        return []

    def _go_away_event(self, event: GoAway) -> list[Action[H]]:
        if self.moving:
            return []
        notice = notice_seconds(event.time_left)
        self._go_away = True
        self._note_deadline(event.now + notice)
        actions: list[Action[H]] = []
        answered = self.answered_deadline
        if (
            event.capped
            and answered is not None
            and self.deadline is not None
            and self.deadline <= answered + SESSION_END_TOLERANCE
        ):
            self.ending = True
            actions.append(SessionEnds())
        if self.quiet:
            # Nothing was said since the session was resumed (or rebuilt): that point is as
            # good as a resumable one, unless a turn is still counted in progress.
            if self.latest_handle is not None:
                self.at_point = not self.in_turn
                if self.at_point and self.wanted and TimerKind.SPREAD not in self._timers:
                    return actions + self._decide(MoveReason.PLANNED)
            elif event.rebuild_when_quiet:
                return actions + self._rebuild(MoveReason.PLANNED, False)
        return actions + self._want(event.now, notice)

    def _want(self, now: float, notice: float) -> list[Action[H]]:
        margin = min(max(notice / 3, MIN_DEADLINE_MARGIN), self.options.deadline_margin)
        fallback_at = now + notice - margin
        if self.fallback_at is not None:
            fallback_at = min(fallback_at, self.fallback_at)
        self.fallback_at = fallback_at
        actions: list[Action[H]] = self._cancel(TimerKind.FALLBACK)
        if self.at_point and TimerKind.SPREAD not in self._timers:
            delay = self._spread_delay(fallback_at - now)
            if delay <= 0:
                return actions + self._decide(MoveReason.PLANNED)
            actions.append(self._start(now + delay, TimerKind.SPREAD))
        if fallback_at <= now:
            return actions + self._fallback()
        actions.append(self._start(fallback_at, TimerKind.FALLBACK))
        return actions

    def _expired(self, event: TimerExpired) -> list[Action[H]]:
        if event.kind not in self._timers:
            return []  # cancelled meanwhile: the caller's timer fired anyway
        self._timers.discard(event.kind)
        if event.kind is TimerKind.FALLBACK:
            return self._fallback()
        # A turn started meanwhile: the next resumable point (or the fallback) moves instead.
        if self.at_point and self.wanted:
            return self._decide(MoveReason.PLANNED)
        return []

    def _fallback(self) -> list[Action[H]]:
        if self.latest_handle is None and not self.rebuilds:
            actions = self._clear_want()
            actions.append(Lapsed())
            return actions
        return self._decide(MoveReason.DEADLINE)

    def _lost(self) -> list[Action[H]]:
        if self.moving:
            return []
        if self.latest_handle is None:
            return self._clear_want()
        return self._decide(MoveReason.LOST)

    def _succeeded(self) -> list[Action[H]]:
        self.move = None
        self.deadline = None
        self._go_away = self._config = False
        return []

    def _failed(self) -> list[Action[H]]:
        move = self.move
        if move is None:
            return []
        if move.attempt >= len(self.options.retry_delays):
            self.move = None
            self.stopped = True
            return [GiveUp()]
        self.move = MoveDecision(move.handle, move.kind, move.reason, move.attempt + 1)
        return [Attempt(self.move, self.options.retry_delays[move.attempt])]

    def _switched(self, event: Switched) -> list[Action[H]]:
        self.answered_deadline = self.deadline if event.resumed and self._go_away else None
        self.quiet = not event.replayed_turn
        self.ending = self._on_resumed = False
        self.deadline = None
        self._go_away = self._config = False
        if event.resumed:
            return []
        # A fresh server session: the old session's handles are worthless.
        return self._forget()

    def _abandoned(self, event: Abandoned[H]) -> list[Action[H]]:
        actions = self._clear_want()
        self.latest_handle = event.handle
        self.at_point = False
        self.in_turn = True
        if self.deadline is None:
            return actions
        # The abandoned dial spent the want: it starts over with the notice left.
        return actions + self._want(event.now, max(0.0, self.deadline - event.now))

    def _forget(self) -> list[Action[H]]:
        actions = self._clear_want()
        self.latest_handle = None
        self.at_point = self.in_turn = self.stopped = self._on_resumed = False
        self.move = None
        self.deadline = None
        self._go_away = self._config = False
        return actions

    # --- deciding -----------------------------------------------------------------------------

    def _decide(self, decided: MoveReason, requested: MoveReason | None = None) -> list[Action[H]]:
        """Move now from the latest handle; ``decided``: planned (from a resumable point),
        deadline (forced, from a fallback), lost, or config (forced: a setup change where no
        resumable point comes before the user's next turn)."""
        handle = self.latest_handle
        assert handle is not None or self.rebuilds, "a move needs a handle"
        kind = HandleKind.AFTER_TURN if self.at_point else HandleKind.MID_TURN
        actions = self._clear_want()
        # The handle is being spent: the next resumable point comes from the new connection.
        self.at_point = False
        if requested is not None:
            reason = requested
        elif decided is not MoveReason.LOST and self._config and not self._go_away:
            reason = MoveReason.CONFIG
        else:
            reason = decided
        forced = decided is not MoveReason.PLANNED
        if self.ending or handle is None:
            return actions + self._rebuild(reason, forced)
        actions.append(MoveNow(reason, handle, kind, forced))
        if self.attempts:
            self.move = MoveDecision(handle, kind, decided, 1)
            actions.append(Attempt(self.move, self.options.retry_delays[0]))
        return actions

    def _rebuild(self, reason: MoveReason, forced: bool) -> list[Action[H]]:
        """Move now with no handle: the caller rebuilds the session (or fails)."""
        return [MoveNow(reason, None, HandleKind.NONE, forced)]

    def _spread_delay(self, until_fallback: float) -> float:
        """This session's share of the storm spread: a draw within the spread, never more
        than :data:`STORM_SPREAD_SHARE` of the time left before the fallback."""
        spread = min(self.options.storm_spread, STORM_SPREAD_SHARE * until_fallback)
        if spread <= 0:
            return 0.0
        draw = self.spread_draw()
        if not (math.isfinite(draw) and 0 <= draw < 1):
            raise ValueError(f"spread_draw must give a number in [0, 1), gave {draw!r}")
        return spread * draw

    def _note_deadline(self, at: float) -> None:
        self.deadline = at if self.deadline is None else min(self.deadline, at)

    # --- timers -------------------------------------------------------------------------------

    def _start(self, at: float, kind: TimerKind) -> StartTimer:
        self._timers.add(kind)
        return StartTimer(at, kind)

    def _cancel(self, kind: TimerKind) -> list[Action[H]]:
        if kind not in self._timers:
            return []
        self._timers.discard(kind)
        return [CancelTimer(kind)]

    def _clear_want(self) -> list[Action[H]]:
        self.fallback_at = None
        return self._cancel(TimerKind.FALLBACK) + self._cancel(TimerKind.SPREAD)
