"""What one connection move did: the report every move produces, and a log of them.

A *move* takes a session from one provider connection to the next: planned (the provider
announced the end of the connection), after a loss (it closed without notice), or to apply a
configuration the live connection cannot take. Each move ends with exactly one outcome:
``resumed`` (the server kept the session), ``rebuilt`` (a fresh session seeded with the
conversation history, after a refused or expired handle) or ``lost``.

Reports never hold a resumption handle whole: :class:`MoveReport` takes the redacted form only
(it refuses anything else), and error text is scrubbed of the move's handles and of any long
token before it is stored.

Times are floats in seconds from the caller's clock (the event loop's); durations in reports
are milliseconds.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import Enum, StrEnum

from pydantic import BaseModel

from realtime_resumption.redaction import redact


class MoveReason(StrEnum):
    """Why a move happened (the one spelling, shared with the resumption helper)."""

    PLANNED = "planned"
    """The provider announced the connection's end (its notice: ``on_go_away``) and the move
    came at a resumable point."""
    DEADLINE = "deadline"
    """The provider announced the connection's end and no resumable point came before the
    deadline: the move resumed from the latest handle, cutting the turn in progress."""
    LOST = "lost"
    """The connection closed without notice, or a resumed session stopped answering."""
    CONFIG = "config"
    """A setup change the live connection cannot apply (instructions, tools, voice)."""
    REQUESTED = "requested"
    """The framework asked for a new connection (``reconnect``, credential expiry)."""
    TAKEOVER = "takeover"
    """Another process took the call over from the state its previous process kept in a
    ``SessionStore`` (after a crash, a deploy or a drain)."""


class HandleKind(StrEnum):
    """The kind of the handle a move resumed from (the one spelling, shared with the
    resumption helper). Also accepts underscores (``"after_turn"``)."""

    AFTER_TURN = "after-turn"
    """A resumable point: issued while no turn was in progress, none started since."""
    MID_TURN = "mid-turn"
    """A fallback: issued during a turn, marked not resumable, or followed by a turn; used
    only because the deadline or a lost connection left no choice."""
    NONE = "none"
    """No handle: a fresh session."""

    @classmethod
    def _missing_(cls, value: object) -> HandleKind | None:
        if isinstance(value, str):
            spelled = value.replace("_", "-")
            return next((kind for kind in cls if kind.value == spelled), None)
        return None


class MoveOutcome(StrEnum):
    """How a move ended."""

    RESUMED = "resumed"
    """The new connection resumed the server session: its context is kept."""
    REBUILT = "rebuilt"
    """A fresh session, seeded with the conversation history (handle refused or expired)."""
    LOST = "lost"
    """Every attempt failed: the session is gone."""


class MoveMode(StrEnum):
    """Whether the replacement connection was made before the old one went away."""

    MAKE_BEFORE_BREAK = "make-before-break"
    """The old connection served until the switch to the replacement."""
    BREAK_BEFORE_MAKE = "break-before-make"
    """No connection served for part of the move: the old one was closed first (the provider
    refuses a resume while it is open) or was lost."""


_REDACTED = re.compile(r"<none>|<empty>|<\d+ chars>|.{4}…<\d+ chars>", re.DOTALL)
_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=]{24,}")
_MAX_ERROR_CHARS = 500


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every occurrence of ``secrets`` and any long token-like run redacted,
    cut to a bounded length: safe for a log or a report."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, redact(secret))
    text = _TOKEN.sub(lambda match: redact(match.group()), text)
    if len(text) > _MAX_ERROR_CHARS:
        text = text[: _MAX_ERROR_CHARS - 1] + "…"
    return text


class MoveFigures(BaseModel):
    """A move's figures, as :meth:`MoveReport.figures` gives them to metrics (enums as
    strings, durations in ms; never the handle). Each framework's move metrics (Pipecat's
    ``SessionMoveMetricsData``, LiveKit's ``SessionMoveMetrics``) are its own metrics type
    with these fields mixed in, so the figures are declared once."""

    reason: str
    outcome: str
    mode: str
    handle_kind: str
    attempts: int
    gap_ms: float
    held_messages: int
    held_audio_ms: float
    replayed_messages: int
    replayed_audio_ms: float
    dropped_audio_ms: float
    turn_cut: bool
    go_away_notice_ms: float | None = None
    go_away_to_switch_ms: float | None = None


@dataclass(frozen=True)
class MoveReport:
    """One move, from its start to its outcome.

    ``handle`` is the *redacted* handle (see :func:`realtime_resumption.redaction.redact`);
    a value that is not in redacted form is refused, so a report cannot carry a handle whole.
    """

    number: int
    """1 for the session's first move, counting up."""
    reason: MoveReason
    handle_kind: HandleKind
    handle: str
    outcome: MoveOutcome
    gap_ms: float
    """Time during which no connection could take input: input held for the next connection
    counts (0 when the incumbent took everything until the switch)."""
    messages_buffered: int
    """Client messages held while no connection could take them, delivered after."""
    messages_replayed: int
    """Client messages written before and sent again because the new session lacked them."""
    audio_chunks_dropped: int
    audio_seconds_dropped: float
    attempts: int
    """Connection attempts the move used."""
    started_at: float
    finished_at: float
    error: str | None = None
    """Why the last attempt failed (scrubbed), when one did."""
    turn_cut: bool = False
    """The move cut a turn: an answer in progress (or its open tool calls) ended with it."""
    mode: MoveMode = MoveMode.MAKE_BEFORE_BREAK
    audio_ms_held: float = 0.0
    """Of ``messages_buffered``: the audio, in ms (held while no connection took it)."""
    audio_ms_replayed: float = 0.0
    """Of ``messages_replayed``: the audio, in ms."""
    go_away_notice_ms: float | None = None
    """The time left that the provider's notice of the old connection's end gave
    (``on_go_away``); None when no notice came before the move."""
    go_away_to_switch_ms: float | None = None
    """From that notice to the move's end (the switch)."""

    def __post_init__(self) -> None:
        if self.number < 1:
            raise ValueError(f"number must be >= 1, got {self.number}")
        if not _REDACTED.fullmatch(self.handle):
            raise ValueError("handle must be given redacted (realtime_resumption.redaction)")
        for name in (
            "messages_buffered",
            "messages_replayed",
            "audio_chunks_dropped",
            "attempts",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in (
            "gap_ms",
            "audio_seconds_dropped",
            "started_at",
            "finished_at",
            "audio_ms_held",
            "audio_ms_replayed",
            "go_away_notice_ms",
            "go_away_to_switch_ms",
        ):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value}")
            if value is not None and value < 0 and name not in ("started_at", "finished_at"):
                raise ValueError(f"{name} must be >= 0, got {value}")
        if self.finished_at < self.started_at:
            raise ValueError("finished_at is before started_at")
        if self.error is not None:
            object.__setattr__(self, "error", scrub(self.error))

    @property
    def duration_ms(self) -> float:
        """From the move's start to its outcome."""
        return (self.finished_at - self.started_at) * 1000.0

    def figures(self) -> MoveFigures:
        """The move's figures as metrics carry them (enums as strings, durations in ms; never
        the handle), for every framework's metrics."""
        return MoveFigures(
            reason=self.reason.value,
            outcome=self.outcome.value,
            mode=self.mode.value,
            handle_kind=self.handle_kind.value,
            attempts=self.attempts,
            gap_ms=self.gap_ms,
            held_messages=self.messages_buffered,
            held_audio_ms=self.audio_ms_held,
            replayed_messages=self.messages_replayed,
            replayed_audio_ms=self.audio_ms_replayed,
            dropped_audio_ms=self.audio_seconds_dropped * 1000.0,
            turn_cut=self.turn_cut,
            go_away_notice_ms=self.go_away_notice_ms,
            go_away_to_switch_ms=self.go_away_to_switch_ms,
        )

    def as_dict(self) -> dict[str, object]:
        """Plain values (enums as strings), for diagnostics and JSON."""
        values = asdict(self)
        for key, value in values.items():
            if isinstance(value, Enum):
                values[key] = value.value
        values["duration_ms"] = self.duration_ms
        return values


class MoveInProgress:
    """A move that started: collects attempts and the input gap until :meth:`finish`."""

    def __init__(
        self,
        log: MoveLog,
        number: int,
        reason: MoveReason,
        handle: str | None,
        handle_kind: HandleKind,
        now: float,
    ) -> None:
        self._log = log
        self.number = number
        self.reason = reason
        self.started_at = now
        self._handle = handle
        self._handles: list[str] = [handle] if handle else []
        self._handle_kind = handle_kind if handle else HandleKind.NONE
        self._attempts = 0
        self._gap = 0.0
        self._gap_since: float | None = None
        self._turn_cut = False
        self._incumbent_gone = False
        self._go_away: tuple[float | None, float] | None = None
        self._finished = False

    @property
    def attempts(self) -> int:
        """Attempts counted so far."""
        return self._attempts

    @property
    def input_blocked(self) -> bool:
        """Whether no connection can take input right now (a gap is running)."""
        return self._gap_since is not None

    def attempt(self, handle: str | None, handle_kind: HandleKind) -> int:
        """Count an attempt, made with ``handle`` (None: a fresh session); returns its
        number. The report shows the last attempt's handle."""
        self._check_open()
        self._attempts += 1
        self._handle = handle
        self._handle_kind = handle_kind if handle else HandleKind.NONE
        if handle:
            self._handles.append(handle)
        return self._attempts

    def turn_was_cut(self) -> None:
        """The move cut the turn in progress."""
        self._turn_cut = True

    def incumbent_gone(self) -> None:
        """The old connection stopped serving before the switch: closed first or lost (the
        move is break-before-make)."""
        self._incumbent_gone = True

    def go_away(self, notice: float | None, now: float) -> None:
        """The provider's notice of the old connection's end came at ``now`` with
        ``notice`` seconds (None: no figure). The first one counts."""
        if self._go_away is None:
            self._go_away = (notice, now)

    def input_stopped(self, now: float) -> None:
        """No connection can take input from ``now`` (the old one closed or was lost)."""
        self._check_open()
        if self._gap_since is None:
            self._gap_since = now

    def input_resumed(self, now: float) -> None:
        """A connection takes input again from ``now``."""
        self._check_open()
        if self._gap_since is not None:
            self._gap += max(0.0, now - self._gap_since)
            self._gap_since = None

    def finish(
        self,
        outcome: MoveOutcome,
        now: float,
        *,
        messages_buffered: int = 0,
        messages_replayed: int = 0,
        audio_chunks_dropped: int = 0,
        audio_seconds_dropped: float = 0.0,
        audio_seconds_held: float = 0.0,
        audio_seconds_replayed: float = 0.0,
        error: str | None = None,
    ) -> MoveReport:
        """Close the move with its outcome; records the report in the log and returns it.
        A gap still open counts until ``now``."""
        self._check_open()
        self.input_resumed(now)
        self._finished = True
        notice, go_away_at = self._go_away if self._go_away is not None else (None, None)
        report = MoveReport(
            number=self.number,
            reason=self.reason,
            handle_kind=self._handle_kind,
            handle=redact(self._handle),
            outcome=outcome,
            gap_ms=self._gap * 1000.0,
            messages_buffered=messages_buffered,
            messages_replayed=messages_replayed,
            audio_chunks_dropped=audio_chunks_dropped,
            audio_seconds_dropped=audio_seconds_dropped,
            attempts=self._attempts,
            started_at=self.started_at,
            finished_at=max(now, self.started_at),
            error=None if error is None else scrub(error, self._handles),
            turn_cut=self._turn_cut,
            mode=MoveMode.BREAK_BEFORE_MAKE if self._incumbent_gone else MoveMode.MAKE_BEFORE_BREAK,
            audio_ms_held=audio_seconds_held * 1000.0,
            audio_ms_replayed=audio_seconds_replayed * 1000.0,
            go_away_notice_ms=None if notice is None else notice * 1000.0,
            go_away_to_switch_ms=(
                None if go_away_at is None else max(0.0, now - go_away_at) * 1000.0
            ),
        )
        self._log._finished(self, report)
        return report

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError(f"move {self.number} already finished")

    def __repr__(self) -> str:
        return (
            f"MoveInProgress(number={self.number}, reason={self.reason.value}, "
            f"handle={redact(self._handle)}, attempts={self._attempts})"
        )


class MoveLog:
    """The session's moves: numbers them, keeps the latest reports and counts outcomes."""

    def __init__(self, keep: int = 32) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self._recent: deque[MoveReport] = deque(maxlen=keep)
        self._counts = dict.fromkeys(MoveOutcome, 0)
        self._started = 0
        self._current: MoveInProgress | None = None
        self._go_away: tuple[float | None, float] | None = None

    def begin(
        self, reason: MoveReason, handle: str | None, handle_kind: HandleKind, now: float
    ) -> MoveInProgress:
        """Start a move. Only one runs at a time: starting another raises RuntimeError."""
        if self._current is not None:
            raise RuntimeError(f"move {self._current.number} is still running")
        self._started += 1
        self._current = MoveInProgress(self, self._started, reason, handle, handle_kind, now)
        if self._go_away is not None:
            self._current.go_away(*self._go_away)
            self._go_away = None
        return self._current

    def go_away(self, notice: float | None, now: float) -> None:
        """The provider announced the end of the current connection at ``now``, ``notice``
        seconds ahead (None: no figure): the move running now, or else the next one to
        begin, reports it."""
        if self._current is not None:
            self._current.go_away(notice, now)
        elif self._go_away is None:
            self._go_away = (notice, now)

    @property
    def current(self) -> MoveInProgress | None:
        """The move running now, if any."""
        return self._current

    @property
    def total(self) -> int:
        """Moves finished so far."""
        return sum(self._counts.values())

    @property
    def counts(self) -> dict[MoveOutcome, int]:
        """Finished moves per outcome."""
        return dict(self._counts)

    @property
    def last(self) -> MoveReport | None:
        """The latest report."""
        return self._recent[-1] if self._recent else None

    @property
    def recent(self) -> tuple[MoveReport, ...]:
        """The latest reports, oldest first (at most ``keep``)."""
        return tuple(self._recent)

    def as_dict(self) -> dict[str, object]:
        """Plain values for diagnostics."""
        return {
            "moves": self.total,
            "in_progress": self._current is not None,
            "outcomes": {outcome.value: n for outcome, n in self._counts.items()},
            "recent": [report.as_dict() for report in self._recent],
        }

    def _finished(self, move: MoveInProgress, report: MoveReport) -> None:
        if self._current is move:
            self._current = None
        self._counts[report.outcome] += 1
        self._recent.append(report)
