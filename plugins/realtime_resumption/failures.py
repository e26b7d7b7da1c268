"""The failure policy: what every failure of a connection means for the session.

One function, :func:`classify`, maps a failure — an HTTP status at the handshake, a close, an
exception, and *when* it happened (:class:`Stage`) — to a :class:`Verdict`. A close code means
what its provider says it means: the provider's transport reads it into a
:class:`CloseMeaning` (a :data:`CloseReading`; Gemini's is ``gemini.close_codes``), and the
policy rules on the meaning:

=========================================  ===========================  ====================
failure                                    stage                        verdict
=========================================  ===========================  ====================
HTTP 401 / 403                             dial                         fatal (credentials)
other HTTP 4xx but 408 and 429             dial                         fatal (request)
HTTP 408, 429, 5xx; no status              dial                         retry
a close read as handle or request refused  dial, settling, probation    refused
a close read as refused or overloaded      dial, settling, probation    retry, then refused
                                                                        at the 2nd strike
any other close                            dial, settling, probation    retry
timeout, unreachable, TLS, other errors    dial                         retry
``SessionLostError``                       any                          fatal
any close                                  serving                      move
=========================================  ===========================  ====================

*retry*: a failed attempt of the move, retried with the same handle after the next delay;
*refused*: the handle is gone, the session is rebuilt from its history; *fatal*: the session
ends now with a ``SessionLostError`` saying why; *move*: the connection served past its
probation, so its loss is no failure but the start of a new move (after a loss).

A connection that dies within :attr:`RetryPolicy.probation` seconds of the switch to it
(stage ``probation``) counts as a failed attempt of the move that installed it: a server that
drops every new connection right after its setup spends the budget instead of being "resumed"
forever. Every failed attempt is charged to the session's budget, which bounds it in count
(:attr:`RetryPolicy.attempts`) and in time (:attr:`RetryPolicy.within`: the longest a session
may go from a failure without a connection that outlived its probation). Delays get jitter, so
a storm of sessions dropped at once does not redial in lockstep.

:func:`connect_delays` reads a transport's ``connect(retry=...)`` (True, False, or pauses) into
the delays its opening's attempts are spaced by: one reading for every provider.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from realtime_resumption.transport import ConnectError, SessionLostError


class CloseMeaning(StrEnum):
    """What a close code says of the connection it ended, as its provider documents it."""

    CLOSED = "closed"
    """Nothing more than a close: the attempt may be retried."""
    HANDLE_REFUSED = "handle_refused"
    """The provider refused the resumption point itself (invalid or not found)."""
    REQUEST_REFUSED = "request_refused"
    """The provider cannot take the request: the resumption point, or the setup it came with
    (an unknown voice, say). A fresh session refused it too means the setup is at fault."""
    REFUSED_OR_OVERLOADED = "refused_or_overloaded"
    """A refused resume or a transient failure, the provider does not say which: the first
    with a given handle is retried, the second rebuilds; with an earlier connection of the
    session still open, it is the provider refusing a resume while that one is open."""


CloseReading = Callable[[int | None], CloseMeaning]
"""A provider's reading of its close codes (None: the connection closed without one)."""

_REFUSED: Final = frozenset({CloseMeaning.HANDLE_REFUSED, CloseMeaning.REQUEST_REFUSED})

AUTH_STATUSES: Final = frozenset({401, 403})
_RETRYABLE_4XX: Final = frozenset({408, 429})


class Stage(StrEnum):
    """When a failure happened, relative to the connection's life."""

    DIAL = "dial"
    """Before the provider confirmed the setup (handshake, setup)."""
    SETTLING = "settling"
    """Set up, before the session switched to it."""
    PROBATION = "probation"
    """Within ``RetryPolicy.probation`` seconds after the switch."""
    SERVING = "serving"
    """Later: the connection served."""


class Verdict(StrEnum):
    """What a failure means for the session."""

    RETRY = "retry"
    REFUSED = "refused"
    FATAL = "fatal"
    MOVE = "move"


@dataclass(frozen=True)
class Ruling:
    """A verdict and the words that explain it (safe to log: no provider text)."""

    verdict: Verdict
    why: str


def classify(
    error: BaseException | None,
    stage: Stage,
    *,
    reading: CloseReading,
    code: int | None = None,
    strikes: int = 0,
) -> Ruling:
    """The verdict on one failure; see the module documentation for the table.

    ``error`` is what the attempt raised (a ``ConnectError`` carries the HTTP status or close
    code), or None for a close; ``code`` a close code when there is no error; ``reading`` what
    the provider's close codes mean; ``strikes`` the closes read as
    :attr:`CloseMeaning.REFUSED_OR_OVERLOADED` already seen with the same handle.
    """
    if isinstance(error, SessionLostError):
        return Ruling(Verdict.FATAL, str(error) or "the session is over")
    http = (
        error.failure.code
        if isinstance(error, ConnectError) and error.failure.kind == "refused"
        else None
    )
    code = close_code(error, code)
    if http is not None:
        if http in AUTH_STATUSES:
            return Ruling(
                Verdict.FATAL,
                f"the provider refused the credentials (HTTP {http}): check the API key, "
                "its project and its permissions",
            )
        if 400 <= http < 500 and http not in _RETRYABLE_4XX:
            return Ruling(
                Verdict.FATAL, f"the provider refused the request (HTTP {http}): check the setup"
            )
        return Ruling(Verdict.RETRY, f"the provider refused the connection (HTTP {http})")
    closed = code is not None or error is None
    if closed and stage is Stage.SERVING:
        return Ruling(Verdict.MOVE, _closed(stage, code))
    meaning = reading(code)
    if meaning in _REFUSED:
        return Ruling(Verdict.REFUSED, f"the provider refused the handle (code {code})")
    if meaning is CloseMeaning.REFUSED_OR_OVERLOADED and strikes >= 1:
        return Ruling(Verdict.REFUSED, f"the handle was refused twice (code {code})")
    if closed:
        return Ruling(Verdict.RETRY, _closed(stage, code))
    text = str(error) or type(error).__name__
    return Ruling(Verdict.RETRY, text)


def _closed(stage: Stage, code: int | None) -> str:
    """Why a close is ruled as it is: when it happened (unsaid while serving) and its code."""
    when = {
        Stage.DIAL: " during setup",
        Stage.SETTLING: " right after its setup",
        Stage.PROBATION: " right after the switch",
        Stage.SERVING: "",
    }[stage]
    return f"the connection closed{when} ({'no close code' if code is None else f'code {code}'})"


def close_code(error: BaseException | None, code: int | None = None) -> int | None:
    """The close code of a failure: ``code``, else the one a ``ConnectError`` carries."""
    if code is None and isinstance(error, ConnectError) and error.failure.kind == "closed":
        return error.failure.code
    return code


@dataclass(frozen=True)
class RetryPolicy:
    """How much failure a session may spend, and how retries are spaced.

    - ``attempts`` (20): failed connection attempts the whole session may spend, over all its
      moves. Five per move lets a session ride out a few bad moves, yet one whose every move
      fails ends within minutes rather than retrying forever.
    - ``within`` (120 s): the longest a session may go, from a failed attempt, without a
      connection that outlived its probation; then it is lost even with attempts left.
    - ``probation`` (1 s): a connection that dies this soon after the switch to it counts as a
      failed attempt of its move. Long enough to catch a server that closes right after every
      setup; short enough that a later, unrelated loss starts a fresh move.
    - ``jitter`` (0.5): each retry delay is scaled by a uniform factor in ``[1 - jitter,
      1 + jitter]`` (a zero delay stays zero).
    - ``random``: the source of that factor (``random.random`` when None); pass a seeded one
      (``random.Random(7).random``) for deterministic tests.
    """

    attempts: int = 20
    within: float = 120.0
    probation: float = 1.0
    jitter: float = 0.5
    random: Callable[[], float] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if (
            isinstance(self.attempts, bool)
            or not isinstance(self.attempts, int)
            or self.attempts < 1
        ):
            raise ValueError(f"retry_budget must be an int >= 1, got {self.attempts!r}")
        for name in ("within", "probation"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number of seconds, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter!r}")

    def spread(self, delay: float) -> float:
        """``delay`` with its jitter."""
        if delay <= 0 or self.jitter == 0:
            return delay
        draw = (self.random or random.random)()
        return delay * (1 - self.jitter + 2 * self.jitter * draw)


class Budget:
    """What one session has spent of its :class:`RetryPolicy`."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.spent = 0
        self.streak = 0
        """Failed attempts since the last connection that outlived its probation."""
        self._streak_since: float | None = None

    def charge(self, now: float) -> str | None:
        """Count one failed attempt at ``now``; the reason the session is lost when that spent
        the budget, else None."""
        self.spent += 1
        self.streak += 1
        if self._streak_since is None:
            self._streak_since = now
        if self.spent >= self.policy.attempts:
            return f"the session's retry budget ({self.policy.attempts} failed attempts) is spent"
        return self.overdue(now)

    def overdue(self, now: float) -> str | None:
        """The reason the session is lost when its failures have lasted too long, else None."""
        since = self._streak_since
        if since is not None and now - since > self.policy.within:
            return (
                f"no connection has held for {now - since:.0f} s "
                f"(the retry budget allows {self.policy.within:g} s)"
            )
        return None

    def healthy(self) -> None:
        """A connection outlived its probation: the streak of failures is over."""
        self.streak = 0
        self._streak_since = None


def connect_delays(retry: bool | Sequence[float]) -> tuple[float, ...] | None:
    """The pauses before each attempt of a connect (None: the session's own)."""
    if retry is False:
        return (0.0,)
    if retry is True:
        return None
    delays = tuple(retry)
    if not delays or any(
        isinstance(d, bool) or not isinstance(d, int | float) or not 0 <= d < math.inf
        for d in delays
    ):
        raise ValueError(f"retry must be True, False or pauses in seconds, not {retry!r}")
    return delays
