"""Where a transport is in its life: one phase, changed only by the transitions below.

``GeminiLiveTransport`` is idle until ``connect``. ``connect`` begins when it is called:
from then on sends are taken, and held here until its dial starts (a disconnect may still be
closing, a store may still be answering: what it sends first goes before them). Then the dial
opens the session's first connection, and the session is open. ``hand_over`` stops the input
for good (the call is another process's), ``disconnect`` closes. Whether an open session still
has a connection is the session state's to say (``TransportState.active``: a session is lost
without the transport asking); the phase says what the app asked for and what ``connect`` is
doing.

Each transition names the phases it may start from; any other start is a bug of the
transport, raised as ``LifecycleError`` rather than carried on in a state nobody meant.
"""

from __future__ import annotations

import enum
from collections.abc import Set
from typing import Final

from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.outbox import ReplayScope


class Phase(enum.Enum):
    """The phases of a transport's life."""

    IDLE = "idle"
    """Never connected, or the last ``connect`` failed: no session, nothing under way."""
    STARTING = "starting"
    """``connect`` was called and its dial has not begun (a disconnect still closing, the
    store answering): sends are held until it does."""
    DIALLING = "dialling"
    """A session's first connection is being dialled (``connect``, ``reconnect`` while not
    connected, a takeover): sends are queued for it."""
    OPEN = "open"
    """The session was opened (a lost connection ends it; ``TransportState.active`` says)."""
    HANDED_OVER = "handed_over"
    """``hand_over`` stopped the input: the call is another process's, no send is taken."""
    CLOSED = "closed"
    """``disconnect`` was called: a close runs or ran; no new session until ``connect``."""


_ANY: Final = frozenset(Phase)
_STARTS: Final = frozenset(Phase) - {Phase.STARTING, Phase.DIALLING}
"""Where a new session may begin: nothing under way (an open one is checked by the caller,
which knows whether it is still up)."""


class LifecycleError(RuntimeError):
    """A transition from a phase it does not start from: a bug of the transport."""


class Lifecycle:
    """One transport's phase and the sends held while ``connect`` starts (see the module
    documentation)."""

    __slots__ = ("_held", "_phase", "_taken_over")

    def __init__(self) -> None:
        self._phase = Phase.IDLE
        self._held: list[tuple[ClientMessage, ReplayScope]] | None = None
        """What was sent since ``connect`` began; None once taken (or with no connect)."""
        self._taken_over = False

    def __repr__(self) -> str:
        return f"Lifecycle({self._phase.value})"

    @property
    def phase(self) -> Phase:
        """Where the transport is."""
        return self._phase

    @property
    def taken_over(self) -> bool:
        """The last ``connect`` took over a call another process left in the store."""
        return self._taken_over

    @property
    def busy(self) -> bool:
        """``connect`` is under way (starting or dialling): a second one is refused."""
        return self._phase in (Phase.STARTING, Phase.DIALLING)

    @property
    def closed(self) -> bool:
        """``disconnect`` was called since the last ``connect`` began."""
        return self._phase is Phase.CLOSED

    @property
    def handed_over(self) -> bool:
        """``hand_over`` stopped the input since the last ``connect`` began."""
        return self._phase is Phase.HANDED_OVER

    def takes_input(self, session_up: bool) -> bool:
        """Whether a send is taken now: a session is up (``session_up``), ``connect`` is
        dialling, or it is starting and what it holds was not taken yet (a takeover takes it
        before its dial); never once the call was handed over."""
        if self._phase is Phase.HANDED_OVER:
            return False
        if self._phase is Phase.STARTING:
            return session_up or self._held is not None
        return session_up or self._phase is Phase.DIALLING

    def hold(self, message: ClientMessage, scope: ReplayScope) -> bool:
        """Keep ``message`` until the dial starts; False when it started (send it on)."""
        if self._phase is not Phase.STARTING or self._held is None:
            return False
        self._held.append((message, scope))
        return True

    def take_held(self) -> list[tuple[ClientMessage, ReplayScope]]:
        """What was sent before the dial started (once: nothing is held from then on)."""
        held, self._held = self._held or [], None
        return held

    # --- transitions ---------------------------------------------------------------------------

    def begin(self) -> None:
        """``connect`` was called."""
        self._move(_STARTS, Phase.STARTING)
        self._held = []
        self._taken_over = False

    def claimed(self, stored: bool) -> None:
        """The store answered; ``stored``: it held the call, which this connect takes over."""
        self._check({Phase.STARTING, Phase.CLOSED})
        self._taken_over = stored

    def dial(self) -> None:
        """A dial opens the session's first connection (after ``begin``, or on its own)."""
        self._move(_STARTS | {Phase.STARTING}, Phase.DIALLING)

    def opened(self) -> None:
        """The dial completed: the session is open. A ``disconnect`` or a hand-over that
        came meanwhile stays the phase (its close retires the connection)."""
        self._check({Phase.DIALLING, Phase.CLOSED, Phase.HANDED_OVER})
        if self._phase is Phase.DIALLING:
            self._phase = Phase.OPEN

    def failed(self) -> None:
        """The connect failed (or was abandoned): the held sends are dropped with it, and
        the transport is idle again; any other phase stays (a ``disconnect`` or a hand-over
        came meanwhile)."""
        self._held = None
        if self.busy:
            self._phase = Phase.IDLE

    def hand_over(self) -> None:
        """``hand_over`` stops the input: nothing accepted from now on is left out. From any
        phase: the hand-over saved the call first, whatever the app did meanwhile (a
        ``disconnect`` included), and the record is another process's now."""
        self._move(_ANY, Phase.HANDED_OVER)

    def close(self) -> None:
        """``disconnect`` was called. A call handed over stays so (its record is another
        process's until ``forget_handed_over``)."""
        if self._phase is not Phase.HANDED_OVER:
            self._phase = Phase.CLOSED

    def _move(self, starts: Set[Phase], to: Phase) -> None:
        self._check(starts)
        self._phase = to

    def _check(self, starts: Set[Phase]) -> None:
        if self._phase not in starts:
            raise LifecycleError(f"no transition from {self._phase.value} here")
