"""Every move of a session between connections, as one state machine.

Read this file top to bottom to see every move the transport makes. :class:`MoveMachine` is
pure, in the spirit of h11: no I/O, no asyncio, no clock of its own, and no provider: the
provider's transport (Gemini's rotation, ``gemini.rotation``) feeds it :data:`Event` values — a
move became due, a dial set up, a connection closed, a turn began — and carries out the
:data:`Action` values it returns (dial, settle, wait, switch, give up). When to move (the
resumable point after the provider's notice that the connection ends, the deadline fallback) is
decided by :class:`~realtime_resumption.move_timing.MoveTiming`; what a failure means by
:func:`~realtime_resumption.failures.classify`, over the provider's reading of its close codes
(the ``reading`` the machine is built with).

States (:class:`Phase`) and their transitions::

    IDLE ──Wanted──► WAITING                 the provider's notice of the end, or a setup
                                             change: wait for a resumable point (or the
                                             deadline); the incumbent serves
    IDLE, WAITING ──Due──► DIALLING          the decider chose the handle (or none: rebuild);
                                             the incumbent keeps serving (make-before-break)
                   └─Due (break first)─► DIALLING, after Break: close the incumbent first
                                             (the session or its endpoint refused a resume
                                             while the incumbent was open)
    DIALLING ──SetupOk──► SETTLING           the replacement is set up: let it prove that the
                                             provider accepted it (briefly while input is
                                             held: ``SETTLE_HELD``; not at all after a Break)
    SETTLING ──Settled──► IDLE               Switch: the session moves to the replacement;
                                             it is on probation for ``RetryPolicy.probation``
                                             (Served: an answered turn ends it early)
    DIALLING, SETTLING ──Failed──►           per the failure policy:
        request refused at the setup of a fresh session (no handle), with a setup other than the last
        one that worked (an update the service refuses whatever the session, such as an
        unknown voice; a refusal with a handle rebuilt first, since some models refuse a new
        instruction only on a resume) ─► DIALLING with the working setup and the move's first
        handle again (RollBack): no failed attempt
        retry    ─► BACKOFF ──BackoffOver──► DIALLING (same handle, next delay, jittered)
        refused  ─► DIALLING (no handle: rebuild from the history)
        refused or overloaded with the incumbent open (before or after the setup's
        confirmation: the provider refuses a resume while an earlier connection of the
        session is open), once ─► DIALLING after
        Break (break-before-make from now on, for the endpoint: RefusedWhileOpen); it is no
        strike against the handle and no failed attempt
        attempts spent on a takeover's handle ─► DIALLING (no handle: rebuild)
        fatal, budget or attempts spent ─► CLOSED (GiveUp)
    IDLE, WAITING ──Lost──► DIALLING         the connection closed without notice: resume from
                                             the latest handle with input held (on probation:
                                             a failed attempt of the move that installed it,
                                             so BACKOFF first); no handle: rebuild or GiveUp
    DIALLING, SETTLING, BACKOFF ──Lost──►    the incumbent is gone mid-move: input is held
                                             until the switch (same phase)
    DIALLING, SETTLING, BACKOFF ──TurnStarted──►
        a turn began on the incumbent (user speech, a typed turn, model output):
        planned or config move ─► WAITING (Abandon): the replacement is given up, the turn
            runs on the incumbent, and the move comes at the next resumable point, or at the
            deadline fallback with the notice left (no stall: the incumbent took all input);
        forced move (deadline, loss, requested, break-before-make) ─► same phase: input is
            held for the replacement, which gets the whole turn replayed from the handle.
    any ──Dispose──► CLOSED

A move is *lost* while it runs with no incumbent (``incumbent`` is False: input is held),
and *rebuilding* while its handle is None.

No stall. A planned move (the provider's notice or a setup change, at a resumable point) never
delays the
user: while the replacement dials and settles, the incumbent takes all input, and the first
sign of a turn on it (user speech, a typed turn, voice activity, model output) gives the
replacement up — its snapshot, taken before the turn, would lack it — so the turn is heard,
answered and finished on the incumbent; the move then resumes from the next resumable point,
as one move (one report, its attempts counting every dial). Limits: the notice's deadline
bounds the wait (the deadline fallback forces the move, mid-turn if it must, and a forced move
holds input for the replacement instead of yielding); a user who keeps talking until the
deadline therefore meets a forced move; each yielded dial costs a setup on the provider; a
session in break-before-make mode (the provider refused a resume while the incumbent was
open) cannot yield, since the incumbent closes before the dial; and a turn whose first sign
reaches the transport only after the switch (speech still in flight) is replayed to the new
connection from the handle, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Final

from realtime_resumption.failures import (
    Budget,
    CloseMeaning,
    CloseReading,
    RetryPolicy,
    Stage,
    Verdict,
    classify,
    close_code,
)
from realtime_resumption.handles import HandleRef
from realtime_resumption.move_reports import HandleKind, MoveReason


class InputGate(Enum):
    """How much of the session's input the current connection takes."""

    OPEN = "open"
    """Everything, in order."""
    MEDIA_ONLY = "media_only"
    """Audio and video only: a message that could end the user's turn waits for the next
    connection (a move is about to switch, and an answer started now would be cut)."""
    HELD = "held"
    """Nothing: the input waits for the next connection."""


SETTLE: Final = 0.5
"""Seconds a replacement may stay silent after its setup before it counts as accepted, while
the incumbent serves.

A provider may refuse a resume right after it confirmed the setup (a resume while the incumbent
is still open, or a handle it no longer knows: Gemini's closes for those are read in
``gemini.close_codes``); a connection that says anything first was accepted, so the switch happens as soon as it does. The incumbent keeps serving
meanwhile, so on a planned move the wait costs no input gap."""

SETTLE_HELD: Final = 0.05
"""The settle while input is held (the incumbent is gone, or a forced move holds it).

Every moment of it is silence for the user, and a service that says nothing after its setup
would make :data:`SETTLE` the gap. So only a close that follows the setup's confirmation at once is
waited for; a later refusal closes the installed connection on probation, which counts as a
failed attempt of the move (a second report, the next attempt backed off), and what was
replayed to it is replayed again from the handle.

A move that closed the incumbent itself (break-before-make) does not settle at all: input has
been held since the Break, and the refusal the settle is for (a resume while the incumbent is
open) cannot come with the incumbent closed; a handle refused after the setup is caught on
probation all the same. The switch follows the setup's confirmation."""


class Phase(StrEnum):
    """Where the session's move stands."""

    IDLE = "idle"
    """One connection serves; no move is wanted."""
    WAITING = "waiting"
    """A move is wanted: waiting for a resumable point or the deadline."""
    DIALLING = "dialling"
    """Dialling the replacement."""
    SETTLING = "settling"
    """The replacement is set up and proves that the provider accepted it."""
    BACKOFF = "backoff"
    """An attempt failed: waiting before the next one."""
    CLOSED = "closed"
    """Disposed, or the session is lost: nothing moves any more."""


MOVING = frozenset({Phase.DIALLING, Phase.SETTLING, Phase.BACKOFF})


# --- events -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wanted:
    """The provider's notice that the connection ends, or a setup change: move at the next
    resumable point."""


@dataclass(frozen=True)
class Due:
    """Move now: ``handle`` (None: rebuild) of ``kind`` was chosen for ``reason``."""

    now: float
    reason: MoveReason
    handle: HandleRef | None
    kind: HandleKind
    incumbent: bool
    """A connection still serves the session."""
    can_rebuild: bool
    """There is history to seed a fresh session with."""
    forced: bool = False
    """The deadline or a loss forced the move: a turn in progress is cut."""
    break_first: bool = False
    """The endpoint is known to refuse a resume while an earlier connection of the session is
    open (the transport keeps what each endpoint refuses): close the incumbent first."""
    rebuild_when_spent: bool = False
    """When the attempts with the handle are spent, rebuild rather than give up (a takeover:
    the stopped process's connection may keep the session open longer than they last)."""


@dataclass(frozen=True)
class SetupOk:
    """The replacement completed its setup."""


@dataclass(frozen=True)
class Settled:
    """The replacement settled: the provider accepted it."""

    now: float


@dataclass(frozen=True)
class Failed:
    """The attempt failed at ``stage``: ``error`` raised, or the connection closed (``code``,
    read by the machine's ``reading``)."""

    now: float
    stage: Stage
    error: BaseException | None = None
    code: int | None = None
    can_rebuild: bool = True
    setup_changed: bool = False
    """The dial carried a setup other than the last one a connection was set up with."""


@dataclass(frozen=True)
class BackoffOver:
    """The pause before the next attempt is over."""


@dataclass(frozen=True)
class Lost:
    """The session's connection closed without the transport asking. ``handle``/``kind``:
    what a move would resume from (the decider's latest handle)."""

    now: float
    code: int | None
    handle: HandleRef | None
    kind: HandleKind
    can_rebuild: bool


@dataclass(frozen=True)
class Served:
    """The installed connection completed an answered turn: it is no flapping connection,
    whatever its age (its probation ends)."""


@dataclass(frozen=True)
class TurnStarted:
    """A turn began on the incumbent (user speech, a client turn, model output)."""


@dataclass(frozen=True)
class Dispose:
    """The session ends (disconnect, abort, the session was lost)."""


Event = (
    Wanted | Due | SetupOk | Settled | Failed | BackoffOver | Lost | Served | TurnStarted | Dispose
)


# --- actions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Begin:
    """A move begins: report it (``on_move_started``)."""

    reason: MoveReason
    handle: HandleRef | None
    kind: HandleKind


@dataclass(frozen=True)
class Break:
    """Close the incumbent before the replacement's setup is sent (the provider refuses a
    resume while it is open), holding input from then on; always followed by the
    :class:`Dial`, whose socket the transport may open first."""


@dataclass(frozen=True)
class RefusedWhileOpen:
    """The provider refused a resume while the incumbent was open: remember it for the
    endpoint, so later moves and sessions close the incumbent first at once."""


@dataclass(frozen=True)
class RollBack:
    """The service refused the setup an update asked for: go back to the last setup that
    worked, and tell the framework (``why`` is safe to log); the session goes on."""

    why: str


@dataclass(frozen=True)
class Dial:
    """Dial a replacement resuming from ``handle`` (None: a fresh session); one attempt."""

    handle: HandleRef | None


@dataclass(frozen=True)
class Settle:
    """Let the replacement settle: until it says something, closes, or ``seconds`` pass (0:
    switch at once, unless it closed already)."""

    seconds: float


@dataclass(frozen=True)
class Wait:
    """Pause ``seconds`` before the next attempt, then feed :class:`BackoffOver`."""

    seconds: float


@dataclass(frozen=True)
class Switch:
    """Make the replacement the session's connection (resumed from ``handle``, or rebuilt);
    its input opens once what it said while it settled is delivered."""

    handle: HandleRef | None


@dataclass(frozen=True)
class Abandon:
    """Give the replacement up (a turn began on the incumbent during a planned move): the move
    waits for the next resumable point, or the deadline, with the notice it has left."""


@dataclass(frozen=True)
class Gate:
    """Set how much input the current connection takes."""

    gate: InputGate


@dataclass(frozen=True)
class Retried:
    """An attempt failed and will be retried (``why`` is safe to log)."""

    why: str


@dataclass(frozen=True)
class GiveUp:
    """The session cannot be carried on: it is lost, for ``why``."""

    why: str


Action = (
    Begin
    | Break
    | RefusedWhileOpen
    | RollBack
    | Dial
    | Settle
    | Wait
    | Switch
    | Abandon
    | Gate
    | Retried
    | GiveUp
)


# --- the machine ------------------------------------------------------------------------------


@dataclass
class Move:
    """The move in progress."""

    reason: MoveReason
    handle: HandleRef | None
    kind: HandleKind
    forced: bool
    incumbent: bool
    """A connection still serves the session during the move (make-before-break)."""
    dialled: bool = False
    """An attempt of this move has dialled (a move after a failed probation waits before its
    first)."""
    held: bool = False
    """Input waits for the replacement (a turn began on the incumbent, or it is gone)."""
    first_handle: HandleRef | None = None
    """The handle the move set out with (a rollback of a refused setup resumes from it)."""
    first_kind: HandleKind = HandleKind.NONE
    rebuild_when_spent: bool = False
    """See :attr:`Due.rebuild_when_spent`."""
    broke: bool = False
    """The move closed the incumbent itself before its dial (:class:`Break`)."""

    @property
    def yields(self) -> bool:
        """A planned move the user's next turn overrides: the incumbent takes all input, and
        a turn that begins on it abandons the replacement (see :class:`Abandon`)."""
        return (
            self.reason in (MoveReason.PLANNED, MoveReason.CONFIG)
            and not self.forced
            and self.incumbent
        )


@dataclass
class MoveMachine:
    """The session's moves; see the module documentation.

    ``delays`` are the pauses before each attempt of a streak of failures (the resumption
    options' ``retry_delays``: one attempt per entry); ``policy`` the retry budget and jitter;
    ``reading`` what the provider's close codes mean (Gemini's: ``gemini.close_codes``).
    """

    delays: tuple[float, ...]
    policy: RetryPolicy
    reading: CloseReading
    phase: Phase = Phase.IDLE
    move: Move | None = None
    break_first: bool = False
    """The provider refused a resume while the incumbent was open: close it first from now on."""
    probation_until: float | None = None
    """The installed connection's loss before this instant is a failed attempt of its move."""
    budget: Budget = field(init=False)
    refused: set[HandleRef] = field(default_factory=set)
    """Handles the provider refused: a move with one rebuilds."""
    strikes: dict[HandleRef, int] = field(default_factory=dict)
    """Closes read as refused or overloaded, per handle."""

    def __post_init__(self) -> None:
        self.budget = Budget(self.policy)

    @property
    def moving(self) -> bool:
        """A move runs (dialling, settling or between attempts)."""
        return self.phase in MOVING

    def send(self, event: Event) -> list[Action]:
        """Apply ``event``; returns the actions to carry out, in order."""
        handler = _TRANSITIONS.get((self.phase, type(event)))
        if handler is None:
            return []
        return handler(self, event)

    # --- transitions --------------------------------------------------------------------------

    def _wanted(self, event: Wanted) -> list[Action]:
        self.phase = Phase.WAITING
        return []

    def _due(self, event: Due) -> list[Action]:
        if not self._on_probation(event.now):
            self.budget.healthy()
        return self._begin(event)

    def _begin(self, event: Due) -> list[Action]:
        self.break_first = self.break_first or event.break_first
        handle = event.handle if event.handle not in self.refused else None
        self.move = Move(
            event.reason,
            handle,
            event.kind if handle is not None else HandleKind.NONE,
            event.forced or not event.incumbent,
            event.incumbent,
            rebuild_when_spent=event.rebuild_when_spent,
        )
        self.move.first_handle, self.move.first_kind = self.move.handle, self.move.kind
        # The gate first: whatever the framework sends when it hears of the move is gated.
        if self.move.yields and not self.break_first:
            # No stall: the incumbent keeps taking everything until the switch.
            actions: list[Action] = [Gate(InputGate.OPEN)]
        elif event.incumbent:
            # The incumbent takes only audio and video: a turn it began answering now
            # would be cut by the switch.
            actions = [Gate(InputGate.MEDIA_ONLY)]
        else:
            actions = self._hold(self.move)
        actions.append(Begin(event.reason, handle, self.move.kind))
        if handle is None and not event.can_rebuild and event.reason is not MoveReason.REQUESTED:
            return [
                *actions,
                *self._give_up(
                    "there is no resumption handle and no history to rebuild the session from"
                ),
            ]
        return actions + self._attempt()

    def _setup_ok(self, event: SetupOk) -> list[Action]:
        move = self.move
        assert move is not None
        self.phase = Phase.SETTLING
        if move.broke:
            return [Settle(0.0)]  # nothing serves meanwhile: see SETTLE_HELD
        return [Settle(SETTLE_HELD if move.held else SETTLE)]

    def _settled(self, event: Settled) -> list[Action]:
        move = self.move
        assert move is not None
        if move.handle is not None:
            self.strikes.clear()
        else:
            # A fresh server session: the old session's refusals mean nothing any more.
            self.refused.clear()
        self.phase = Phase.IDLE
        self.move = None
        self.probation_until = event.now + self.policy.probation
        return [Switch(move.handle)]

    def _failed(self, event: Failed) -> list[Action]:
        move = self.move
        assert move is not None
        handle = move.handle
        strikes = self.strikes.get(handle, 0) if handle is not None else 0
        ruling = classify(
            event.error, event.stage, reading=self.reading, code=event.code, strikes=strikes
        )
        if ruling.verdict is Verdict.FATAL:
            return self._give_up(ruling.why)
        code = close_code(event.error, event.code)
        meaning = self.reading(code)
        if (
            meaning is CloseMeaning.REQUEST_REFUSED
            and event.stage is Stage.DIAL
            and event.setup_changed
            and handle is None
        ):
            # Refused on a fresh session too: the changed setup itself is invalid, and the
            # handle was refused for it. Go back to the setup that worked, from that handle.
            if move.first_handle is not None:
                self.refused.discard(move.first_handle)
                move.handle, move.kind = move.first_handle, move.first_kind
            why = f"a fresh session was refused it too (code {code})"
            return [RollBack(why), *self._attempt()]
        if (
            meaning is CloseMeaning.REFUSED_OR_OVERLOADED
            and handle is not None
            and move.incumbent
            and not self.break_first
        ):
            # The provider refuses a resume while an earlier connection of the session is
            # open, right after the setup frame or right after it confirmed the setup.
            # That says nothing about the handle: no strike, no failed attempt. The
            # incumbent is closed first, now and from now on.
            self.break_first = True
            return [RefusedWhileOpen(), Retried(ruling.why), *self._attempt()]
        if meaning is CloseMeaning.REFUSED_OR_OVERLOADED and handle is not None:
            self.strikes[handle] = strikes + 1
        if ruling.verdict is Verdict.REFUSED and handle is not None:
            self.refused.add(handle)
            move.handle, move.kind = None, HandleKind.NONE
            if not event.can_rebuild and move.reason is not MoveReason.REQUESTED:
                return self._give_up(
                    f"{ruling.why}, and there is no history to rebuild the session from"
                )
            return [Retried(ruling.why), *self._attempt()]
        return self._retry(event.now, ruling.why)

    def _backoff_over(self, event: BackoffOver) -> list[Action]:
        return self._attempt()

    def _lost(self, event: Lost) -> list[Action]:
        handle = event.handle
        if self._on_probation(event.now):
            # The connection the last move installed died right away: a failed attempt of
            # that move, so the next one waits the next delay and the budget pays for it.
            ruling = classify(None, Stage.PROBATION, reading=self.reading, code=event.code)
            if ruling.verdict is Verdict.REFUSED and handle is not None:
                self.refused.add(handle)
            lost = self.budget.charge(event.now)
            if lost is not None:
                return self._give_up(f"{lost}; last: {ruling.why}")
        else:
            self.budget.healthy()
        self.probation_until = None
        due = Due(
            event.now,
            MoveReason.LOST,
            handle,
            event.kind,
            incumbent=False,
            can_rebuild=event.can_rebuild,
            forced=True,
        )
        return self._begin(due)

    def _served(self, event: Served) -> list[Action]:
        if self.probation_until is not None:
            self.probation_until = None
            self.budget.healthy()
        return []

    def _lost_mid_move(self, event: Lost) -> list[Action]:
        move = self.move
        assert move is not None
        if not move.incumbent:
            return []
        move.incumbent = False
        move.forced = True
        return self._hold(move)

    def _turn_started(self, event: TurnStarted) -> list[Action]:
        move = self.move
        assert move is not None
        if move.yields:
            # The replacement resumes from a snapshot the turn is not in: let the turn run on
            # the incumbent and move from the next resumable point (or at the deadline).
            self.phase = Phase.WAITING
            self.move = None
            return [Abandon()]
        return self._hold(move)

    def _hold(self, move: Move) -> list[Action]:
        if move.held:
            return []
        move.held = True
        return [Gate(InputGate.HELD)]

    def _dispose(self, event: Dispose) -> list[Action]:
        self.phase = Phase.CLOSED
        self.move = None
        return []

    def _on_probation(self, now: float) -> bool:
        until = self.probation_until
        return until is not None and now < until

    # --- attempts -----------------------------------------------------------------------------

    def _attempt(self) -> list[Action]:
        """The next attempt of the move: dial now, or after the streak's delay."""
        move = self.move
        assert move is not None
        streak = self.budget.streak
        if self.phase is not Phase.BACKOFF and streak > 0 and not move.dialled:
            # A move after a failed probation starts where its predecessor stopped.
            delay = self._delay(streak)
            if delay is None:
                return self._give_up("every attempt failed")
            self.phase = Phase.BACKOFF
            return [Wait(delay)]
        move.dialled = True
        self.phase = Phase.DIALLING
        actions: list[Action] = []
        if move.incumbent and self.break_first:
            move.incumbent = False
            move.forced = True
            move.held = True  # from the Break on, input waits for the replacement
            move.broke = True
            actions.append(Break())
        return [*actions, Dial(move.handle)]

    def _retry(self, now: float, why: str) -> list[Action]:
        lost = self.budget.charge(now)
        if lost is not None:
            return self._give_up(f"{lost}; last: {why}")
        delay = self._delay(self.budget.streak)
        move = self.move
        if (
            delay is None
            and move is not None
            and move.rebuild_when_spent
            and move.handle is not None
        ):
            self.refused.add(move.handle)
            move.handle, move.kind = None, HandleKind.NONE
            why = f"every attempt with the handle failed; last: {why}"
            return [Retried(why), *self._attempt()]
        if delay is None:
            return self._give_up(f"every attempt failed; last: {why}")
        self.phase = Phase.BACKOFF
        return [Retried(why), Wait(delay)]

    def _delay(self, streak: int) -> float | None:
        if streak >= len(self.delays):
            return None
        return self.policy.spread(self.delays[streak])

    def _give_up(self, why: str) -> list[Action]:
        self.phase = Phase.CLOSED
        self.move = None
        return [GiveUp(why)]


_Handler = Callable[[MoveMachine, Event], list[Action]]

_TRANSITIONS: dict[tuple[Phase, type], _Handler] = {}
"""(phase, event type) → transition: every move the machine makes is in this table."""


def _on(
    phases: set[Phase] | frozenset[Phase], event: type, handler: Callable[..., list[Action]]
) -> None:
    for phase in phases:
        _TRANSITIONS[(phase, event)] = handler


_on({Phase.IDLE}, Wanted, MoveMachine._wanted)
_on({Phase.IDLE, Phase.WAITING}, Due, MoveMachine._due)
_on({Phase.DIALLING}, SetupOk, MoveMachine._setup_ok)
_on({Phase.SETTLING}, Settled, MoveMachine._settled)
_on({Phase.DIALLING, Phase.SETTLING}, Failed, MoveMachine._failed)
_on({Phase.BACKOFF}, BackoffOver, MoveMachine._backoff_over)
_on({Phase.IDLE, Phase.WAITING}, Lost, MoveMachine._lost)
_on(MOVING, Lost, MoveMachine._lost_mid_move)
_on({Phase.IDLE, Phase.WAITING}, Served, MoveMachine._served)
_on(MOVING, TurnStarted, MoveMachine._turn_started)
_on(set(Phase) - {Phase.CLOSED}, Dispose, MoveMachine._dispose)
