"""The client-message log that lets a session move to a new connection without losing input.

A new session holds what the server confirmed it had: a resumption point the provider placed in
the input (a handle, a snapshot of the server session), or an acknowledgement up to a message
(the server committed the input into the conversation a rebuilt session is seeded with).
Whatever the server received after that point is gone when a new connection resumes from it or
is rebuilt. The ``Outbox`` is the transport's send queue and the log of what it sent, so after a
move it can answer which messages the new session cannot have, and queue them again, in order,
exactly once. It knows no provider: each transport feeds it what its provider confirms.

It never touches a socket. The transport tells it:

- what the framework asked to send (:meth:`Outbox.submit`);
- what it wrote, to which connection, at which per-connection index
  (:meth:`Outbox.mark_sent`; the setup message is index 0, client messages count from 1 and the
  count restarts on each connection: the indexes a provider's acknowledgements name), and what
  a failed write did not deliver (:meth:`Outbox.mark_unsent`);
- which resumption handles arrived, on which connection, when, and up to which message index
  their session consumed the input, when the provider says (:meth:`Outbox.record_handle`), and
  which handle of a session it never wrote to a new connection resumes from
  (:meth:`Outbox.record_foreign_handle`: that session holds none of the log);
- what the conversation a rebuilt session is seeded with holds, for the rebuild path: the input
  up to a message the server acknowledged (:meth:`Outbox.confirmed`, exact), or, where the
  provider acknowledges nothing, what was written when a turn completed
  (:meth:`Outbox.turn_completed`);
- when a connection went away (:meth:`Outbox.detach`) and when a new one took over, resumed
  from a handle (:meth:`Outbox.attach_resumed`) or as a fresh session
  (:meth:`Outbox.attach_fresh`).

Replay rules
------------
*Exact* (the handle comes with the index of the last message its session consumed):
the resumed session holds exactly the messages consumed up to that index on the connection that
issued the handle (and whatever that connection's own session started from). Everything else
is queued again: the messages after the index, those sent on later connections, and those
buffered while no connection was live.

*Arrival* (no index): the provider does not say where in the input its snapshot was taken, so
the outbox places it by the network round trip. The server took the snapshot
about half a round trip before the handle arrived; a message written less than half a round
trip before that was still on its way. So the session holds exactly the messages written at
least one round trip ``rtt`` before the handle arrived: those written later are queued again.
``rtt`` is the kernel's round-trip estimate for the connection's socket (the transport reads
it; never a WebSocket ping, whose pong the service may send seconds late), given by
:meth:`Outbox.round_trip_measured`; it is never the setup time, which is the server's work, not
the network's. Write times are taken when
the write completed (:meth:`Outbox.mark_written`), so a message that waited in a queue is not
counted as on the wire before it was. Lost audio is expensive (the user's words are gone) and a
duplicated frame cheap, so messages of the kinds in ``OutboxLimits.margin_kinds`` (audio,
video frames, the end of the audio stream by default) written within ``OutboxLimits.round_trip_tolerance``
before that boundary, or within the measured jitter when it is larger, are queued again too
(counted as possibly duplicated). A handle a busy event loop kept waiting (``late_by`` of
:meth:`Outbox.record_handle`) is placed that much earlier, and its margin is at least as
much: the writes before it waited on the same busy loop, and their times say as little.

*Answered* (both rules): the model's output after a tool response shows the session took the
response in, and everything written to that connection before it (the input is one ordered
stream, and a function call holds the model until its result comes). Handles that arrive
later hold those messages whatever the timing says (:meth:`Outbox.model_answered`), so an
arrival moved back by a busy loop never replays an answered tool result or the question it
answered. A non-blocking function lets the model go on talking while it runs, which makes
its output no proof: the transport does not call it while one is declared.

Blind spots: the rule assumes the server consumes a message as soon as it arrives and that the
two directions take half the round trip each; a message written within the round trip's jitter
of the boundary (beyond the tolerance) is misplaced, heard twice if the link was faster than
measured, lost if slower; so is one written while the event loop was too busy to note the
handle's arrival promptly. Until a connection's round trip is measured, margin-kind messages
written within ``OutboxLimits.handle_margin`` of the handle's arrival are replayed (heard twice
when the session had them) and other messages written then are counted as held. In practice
the server issues a handle after a turn completed and none while a tool call is open, so a
tool response or a turn-taking text rarely lands near the boundary.

Bounds
------
Audio and video are the only messages the outbox gives up. It holds at most
``max_audio_seconds`` of audio and ``max_video_frames`` video frames, none older than
``max_media_age`` seconds (audio only when the outbox cannot tell speech from silence: see
*Held silence*), counting both what waits to be written (during a gap) and what was
written but a resumption point still lacks (what a resume would replay); past a bound the
oldest media entry is released. One never written (or queued for the live connection) is
dropped and counted at once in :attr:`Outbox.stats`, and reported by the next move when it
was dropped during a gap; one written but lacking from a resumption point (or possibly lacking,
within the arrival margin) is counted against that point and reported when a move resumes from
it. Text, content, files, activity markers and tool responses are never dropped. Entries every
retained resumption point already holds are pruned: the outbox keeps the newest
``max_handles`` handles and the last turn boundary (the rebuild point), plus entries written
within the margin of now (``handle_margin`` until the round trip is measured), moved back and
widened by how much earlier than it is handled the next handle may be placed (the ``late_by``
of :meth:`Outbox.round_trip_measured`): the next handle may need them. So memory follows the
conversation's recent past, not its length.

Silence
-------
Under the arrival rule, audio written within the margin of a handle's arrival (the window where
the rule cannot tell whether the snapshot holds it) is replayed when it is speech and not when
it is silence (quieter than ``OutboxLimits.silence_level``, by the ``audio_level`` the outbox
was given): speech there is replayed rather than lost, silence is neither heard twice nor worth
the replay. Nothing changes outside that window, nor under the exact rule.

Held silence
------------
Given ``audio_level`` (and ``silence_level`` above 0), the outbox holds speech, not wall time.
Of every stretch of silence it keeps the first and the last ``silence_padding`` seconds (what
the service's turn detection needs to hear an utterance end, and its lead-in) and gives up the
middle as soon as it is known to be the middle: skipped, never sent or replayed, counted in
:attr:`OutboxStats.silence_seconds_skipped` and never as a loss. So a long quiet stretch after
an old handle costs neither memory nor replay, and the audio bound (``max_audio_seconds``) is a
bound on speech and its padding; audio is then not bound by age. Past the bound the oldest
audio is released and counted as above (a move reports it), never silently.

Activity
--------
With the service's activity detection off, the client marks the start and the end of the
user's speech (:attr:`MessageKind.ACTIVITY_START`, :attr:`MessageKind.ACTIVITY_END`). An open activity belongs to a connection, not to the
snapshot: a resumed (or rebuilt) session starts with none open, and audio it receives outside
an activity is not heard as speech. So when the user's activity is open at the point a new
connection's session starts from (the first marker queued for it is an ``activityEnd``, or
none is queued while the activity is open), :attr:`Outbox.activity_to_reopen` asks the writer
to send one start of activity before anything else, and :meth:`Outbox.activity_reopened`
records it.

Writes
------
Call :meth:`Outbox.mark_sent` before awaiting the socket write, so a switch or a handle that
lands during the await sees the entry as written; when the write raises, call
:meth:`Outbox.mark_unsent` and the entry is queued again (even if it was pruned meanwhile).

Rebuild
-------
After a fresh session seeded with the conversation history (a refused or expired handle, or a
provider without handles), the history carries what the server confirmed.
:meth:`Outbox.attach_fresh` queues what came after the rebuild point (the messages written
since, and those never written), except tool responses: they answer calls of the old session,
which the new one never issued, so they are discarded and counted. The rebuild point is the
latest of the server's acknowledgements (:meth:`Outbox.confirmed`: exact, every message up to
the one acknowledged, in order, is held) and of the completed turns
(:meth:`Outbox.turn_completed`: the last message written on the connection that reported the
turn complete; an utterance begun before that moment, a barge-in, is carried only as far as
the history has it).
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Generic, TypeVar

from loguru import logger

from realtime_resumption.handles import HandleRef
from realtime_resumption.redaction import redact
from realtime_resumption.silence import SILENCE_LEVEL

T = TypeVar("T")


class MessageKind(StrEnum):
    """What a client message is, as far as replay and dropping are concerned."""

    AUDIO = "audio"
    VIDEO = "video"
    AUDIO_STREAM_END = "audio_stream_end"
    ACTIVITY_START = "activity_start"
    ACTIVITY_END = "activity_end"
    TEXT = "text"
    CONTENT = "content"
    TOOL_RESPONSE = "tool_response"
    CONTEXT_UPDATE = "context_update"
    FILE = "file"
    OTHER = "other"


_MEDIA = frozenset({MessageKind.AUDIO, MessageKind.VIDEO})
_TURN_KINDS = frozenset(
    {
        MessageKind.AUDIO,
        MessageKind.ACTIVITY_START,
        MessageKind.ACTIVITY_END,
        MessageKind.TEXT,
        MessageKind.CONTENT,
        MessageKind.TOOL_RESPONSE,
        MessageKind.FILE,
    }
)
"""The kinds that carry the user's turn (audio only when it is not silence)."""
DEFAULT_MARGIN_KINDS = frozenset(
    {MessageKind.AUDIO, MessageKind.VIDEO, MessageKind.AUDIO_STREAM_END}
)


class UnknownHandleError(LookupError):
    """A resume from a handle the outbox does not hold (never recorded, or pruned)."""


@dataclass(frozen=True)
class OutboxLimits:
    """Bounds and margins of an :class:`Outbox` (seconds are floats)."""

    max_audio_seconds: float = 30.0
    """Audio held for sending or replay; past it the oldest audio is released and counted.
    With ``audio_level`` this bounds the user's speech (and the silence padding around it):
    silence beyond ``silence_padding`` is not held (see *Held silence*)."""
    max_video_frames: int = 30
    """Video frames held for sending or replay; past it the oldest frame is released."""
    max_media_age: float = 60.0
    """Video older than this (since submitted) is never sent or replayed; audio too when the
    outbox has no ``audio_level`` (with one, audio is bound by speech, not age)."""
    handle_margin: float = 0.3
    """Arrival rule on a connection whose round trip is not measured yet: margin-kind
    messages written this long before a handle arrived are replayed on a resume from it."""
    round_trip_tolerance: float = 0.04
    """Arrival rule with a measured round trip: margin-kind messages written up to this much
    (or the measured jitter, when larger) earlier than one round trip before a handle arrived
    are replayed too. The round trip does not see how long the service takes a frame in after it
    arrived: a service that takes audio in as tokens (Gemini's are 1/32 s) may lack up to one
    token's worth of audio that had arrived, and a busy service or event loop takes longer.
    40 ms covers one token and a loaded loop, at the cost of about two 20 ms frames heard
    twice per move while the user speaks; 15 ms lost a 50 ms chunk now and then on a loaded
    2-core machine."""
    margin_kinds: frozenset[MessageKind] = DEFAULT_MARGIN_KINDS
    """Kinds a duplicate of which is harmless, replayed within the margins."""
    silence_level: float = SILENCE_LEVEL
    """Audio quieter than this (RMS of PCM16) within the arrival rule's uncertain window is
    not replayed (see *Silence*); 0 replays silence there too."""
    silence_padding: float = 1.0
    """Seconds of silence held after speech and before it (see *Held silence*): the live
    service ends the user's turn after about 0.5-0.8 s of silence, so 1 s lets a replayed
    utterance end as it did, and leads into the next one as it began."""
    max_handles: int = 2
    """Handles kept as resumption points: the newest, and the one before it (a move may have
    started from it just before the newer one arrived). :meth:`Outbox.pin` keeps one longer.
    A resume from a handle no longer kept raises."""

    def __post_init__(self) -> None:
        for name in (
            "max_audio_seconds",
            "max_media_age",
            "handle_margin",
            "round_trip_tolerance",
            "silence_level",
            "silence_padding",
        ):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.max_video_frames < 0:
            raise ValueError(f"max_video_frames must be >= 0, got {self.max_video_frames}")
        if self.max_handles < 1:
            raise ValueError(f"max_handles must be >= 1, got {self.max_handles}")


@dataclass(frozen=True)
class Replay:
    """What :meth:`Outbox.attach_resumed` or :meth:`Outbox.attach_fresh` queued for the new
    connection, and what the move could not deliver."""

    replayed: int = 0
    """Messages written before (to a connection whose session the new one lacks) and queued
    again."""
    buffered: int = 0
    """Messages never written yet (held during the gap or the switch) now queued."""
    possibly_duplicated: int = 0
    """Of ``replayed``: margin-kind messages the session may already hold (arrival rule)."""
    audio_chunks_dropped: int = 0
    audio_seconds_dropped: float = 0.0
    video_frames_dropped: int = 0
    tool_responses_discarded: int = 0
    """Tool responses not sent to a fresh session (they answer the old session's calls)."""
    audio_seconds_replayed: float = 0.0
    """Audio of ``replayed``."""
    audio_seconds_buffered: float = 0.0
    """Audio of ``buffered``."""
    turn_input: int = 0
    """Of the queued messages, those that carry the user's turn: audio louder than silence
    (any audio when the outbox cannot tell), a text or content turn, a tool response, an
    activity signal, a file. The new connection hears them after the switch: its session is
    not idle, whatever it has said so far."""

    @property
    def queued(self) -> int:
        """Messages now waiting for the new connection."""
        return self.replayed + self.buffered


@dataclass(frozen=True)
class OutboxStats:
    """Counters for diagnostics."""

    submitted: int
    sent: int
    """Writes reported by :meth:`Outbox.mark_sent`, replays included."""
    resent: int
    """Of ``sent``: writes of a message written before."""
    pending: int
    retained: int
    retained_audio_seconds: float
    handles: int
    audio_chunks_dropped: int
    """Audio released by a bound before it was written, or while queued again for the live
    connection (a replay not yet written): no session will get it."""
    audio_seconds_dropped: float
    video_frames_dropped: int
    tool_responses_discarded: int
    silence_chunks_skipped: int = 0
    """Silent audio chunks given up beyond the padding (see *Held silence*): never a loss."""
    silence_seconds_skipped: float = 0.0


class ReplayScope(StrEnum):
    """Which later connections a message is replayed to, where their session lacks it."""

    SESSION = "session"
    """Any: the message is part of the conversation (the default)."""
    RESUMED = "resumed"
    """Resumed sessions only: a fresh session gets it another way (history the transport
    seeds into a rebuilt session)."""
    CONNECTION = "connection"
    """None: it restates input the log already holds, for the connection it goes to (a
    retained user turn sent again to a session that did not answer)."""


class Entry(Generic[T]):
    """One client message the framework submitted: the transport's own value and its kind."""

    __slots__ = (
        "_conn",
        "_earlier",
        "_in_log",
        "_index",
        "_queued",
        "_released",
        "_sent_at",
        "_silent",
        "_withdrawn",
        "audio_seconds",
        "kind",
        "message",
        "scope",
        "seq",
        "submitted_at",
    )

    def __init__(
        self,
        seq: int,
        message: T,
        kind: MessageKind,
        audio_seconds: float,
        submitted_at: float,
        scope: ReplayScope = ReplayScope.SESSION,
    ) -> None:
        self.seq = seq
        self.message = message
        self.kind = kind
        self.audio_seconds = audio_seconds
        self.submitted_at = submitted_at
        self.scope = scope
        # Its deliveries (each connection it was written to, at which index, and when the
        # write completed): the latest in the entry's own slots, earlier ones (an entry
        # replayed) in a list. Almost every entry is written once, and a session holds
        # seconds of audio chunks: each object per chunk is one more for every garbage
        # collection to walk.
        self._conn: _ConnectionLog | None = None
        self._index = 0
        self._sent_at = 0.0
        self._earlier: list[_Delivery] | None = None
        self._in_log = True
        self._queued = True
        self._withdrawn = False
        self._released = False
        """Given up to honour a bound (see ``Outbox._release``): never put back."""
        self._silent: bool | None = None
        """Whether the entry is silent audio, once the outbox asked (see ``Outbox._silent``)."""

    def _deliveries(self) -> list[_Delivery]:
        """Its deliveries, oldest first."""
        if self._conn is None:
            return []
        latest = _Delivery(self._conn, self._index, self._sent_at)
        return [*self._earlier, latest] if self._earlier else [latest]

    def _delivery_on(self, conn: _ConnectionLog) -> _Delivery | None:
        """Its delivery to ``conn``; None when it was not written there."""
        if self._conn is conn:
            return _Delivery(conn, self._index, self._sent_at)
        return next((d for d in self._earlier or () if d.conn is conn), None)

    def _deliver(self, conn: _ConnectionLog, index: int, sent_at: float) -> None:
        """Written to ``conn`` at ``index``: the latest delivery from now."""
        if self._conn is not None:
            earlier = self._earlier if self._earlier is not None else []
            earlier.append(_Delivery(self._conn, self._index, self._sent_at))
            self._earlier = earlier
        self._conn, self._index, self._sent_at = conn, index, sent_at

    def _completed(self, connection: int, now: float) -> tuple[_ConnectionLog, int] | None:
        """The latest write to ``connection`` completed at ``now``: returns that
        connection's log and the write's index; None when it was never written there."""
        conn = self._conn
        if conn is not None and conn.id == connection:
            self._sent_at = max(self._sent_at, now)
            return conn, self._index
        earlier = self._earlier or []
        for i in range(len(earlier) - 1, -1, -1):
            delivery = earlier[i]
            if delivery.conn.id == connection:
                earlier[i] = _Delivery(delivery.conn, delivery.index, max(delivery.sent_at, now))
                return delivery.conn, delivery.index
        return None

    def _undeliver(self, delivery: _Delivery) -> None:
        """Forget ``delivery`` (one of :meth:`_deliveries`)."""
        deliveries = self._deliveries()
        deliveries.remove(delivery)
        self._conn = None
        self._earlier = None
        for earlier in deliveries:
            self._deliver(earlier.conn, earlier.index, earlier.sent_at)

    def __repr__(self) -> str:
        return f"Entry(seq={self.seq}, kind={self.kind.value})"


@dataclass(eq=False)
class _ConnectionLog:
    id: int
    first_seq: int
    """Entries with this seq or above were submitted after the connection took over."""
    base: _Point | None
    """The handle the connection resumed from; None for a fresh session."""
    base_through: int
    """Fresh session: entries up to this seq are carried by the seeded history."""
    seeded: bool
    """Fresh session seeded with the history: it holds every ``RESUMED`` message submitted
    before it took over (the history it was seeded with), whatever the turn boundary."""
    margin: float
    """How long before a handle's arrival an entry written on this connection may be missing
    from its snapshot (see :meth:`Outbox._margin`)."""
    round_trip: float | None = None
    """The measured round trip; None until measured."""
    jitter: float = 0.0
    """How much the measured round trip varies."""
    late_by: float = 0.0
    """How much earlier than it was handled a handle still to come may be placed."""
    reach: float = 0.0
    """How long before now an entry written on this connection may be missing from a
    handle still to come: ``margin``, widened and moved back by ``late_by``."""
    last_index: int = 0
    last_sent_seq: int = 0
    last_tool_response: int = 0
    """Index of the latest tool response whose write to this connection completed."""
    answered_through: int = 0
    """Messages written at an index up to this are in the connection's session: the model
    answered after the tool response at this index, and the input is one ordered stream."""


@dataclass(frozen=True)
class _Delivery:
    conn: _ConnectionLog
    index: int
    sent_at: float


@dataclass
class _Losses:
    audio_chunks: int = 0
    audio_seconds: float = 0.0
    video_frames: int = 0

    def add(self, entry: Entry[Any]) -> None:
        if entry.kind is MessageKind.AUDIO:
            self.audio_chunks += 1
            self.audio_seconds += entry.audio_seconds
        elif entry.kind is MessageKind.VIDEO:
            self.video_frames += 1


@dataclass(eq=False)
class _Point:
    """A point the server confirmed: the session state a handle captured, or an
    acknowledgement (no handle)."""

    handle: HandleRef | None = field(repr=False)
    conn: _ConnectionLog = field(repr=False)
    limit: int
    """Entries written on ``conn`` at an index up to this are in the snapshot."""
    exact: bool
    arrived_at: float
    margin: float
    round_trip: float | None
    answered_through: int = 0
    """Entries written on ``conn`` at an index up to this are in the snapshot, whatever
    their timing (see :meth:`Outbox.model_answered`)."""
    prunable_through: int = 0
    lost: _Losses = field(default_factory=_Losses)

    def __repr__(self) -> str:
        return f"_Point(handle={redact(self.handle)}, limit={self.limit}, exact={self.exact})"


class Outbox(Generic[T]):
    """Send queue and sent-message log of one session; see the module documentation."""

    def __init__(
        self,
        limits: OutboxLimits | None = None,
        *,
        audio_level: Callable[[T], float] | None = None,
    ) -> None:
        """``audio_level``: the loudness of an audio message (RMS of PCM16), for the
        *Silence* rule; without it, audio is replayed whatever its level."""
        self._limits = limits or OutboxLimits()
        self._audio_level = audio_level
        self._by_speech = audio_level is not None and self._limits.silence_level > 0
        """Held audio is bound by speech (see *Held silence*)."""
        self._silence_kept = 0.0
        """Seconds of the current silent stretch held as the padding after speech."""
        self._silence_tail: deque[Entry[T]] = deque()
        """The rest of the current silent stretch: its last ``silence_padding`` seconds."""
        self._silence_tail_seconds = 0.0
        self._skipped = _Losses()
        self._next_seq = 1
        self._log: OrderedDict[int, Entry[T]] = OrderedDict()
        self._pending: deque[Entry[T]] = deque()
        self._dead_pending = 0
        self._audio: deque[Entry[T]] = deque()
        self._dead_audio = 0
        """Entries of ``_audio`` no longer in the log (behind its front)."""
        self._video: deque[Entry[T]] = deque()
        self._audio_seconds = 0.0
        self._video_frames = 0
        self._live: _ConnectionLog | None = None
        self._last_conn: _ConnectionLog | None = None
        self._handles: OrderedDict[HandleRef, _Point] = OrderedDict()
        self._rebuild_through = 0
        """Entries up to this seq are in the conversation a rebuild is seeded with (the
        latest acknowledgement or completed turn: see *Rebuild*)."""
        self._frontier = 0
        self._pinned: set[HandleRef] = set()
        self._activity_open = False
        self._reopen_activity = False
        self._clock = -math.inf
        self._rebuild_lost = _Losses()
        self._gap_dropped = _Losses()
        self._submitted = 0
        self._sent = 0
        self._resent = 0
        self._dropped = _Losses()
        self._discarded = 0

    # -- the framework's side -------------------------------------------------------------

    def admit(self, kind: MessageKind, audio_seconds: float = 0.0) -> None:
        """Raise ValueError for a message :meth:`submit` would refuse: one the bounds could
        never hold (taking it would release it, or earlier audio, at once)."""
        if not math.isfinite(audio_seconds) or audio_seconds < 0:
            raise ValueError(f"audio_seconds must be a finite number >= 0, got {audio_seconds!r}")
        if kind is not MessageKind.AUDIO and audio_seconds:
            raise ValueError(f"audio_seconds is only for audio, not {kind.value}")
        limits = self._limits
        if audio_seconds > limits.max_audio_seconds + 1e-9:
            raise ValueError(
                f"a {audio_seconds:g} s audio chunk is longer than the input buffer holds "
                f"(OutboxLimits.max_audio_seconds = {limits.max_audio_seconds:g} s): send "
                "shorter chunks (20-100 ms is usual)"
            )
        if kind is MessageKind.VIDEO and limits.max_video_frames == 0:
            raise ValueError("the input buffer holds no video frames (max_video_frames is 0)")

    def submit(
        self,
        message: T,
        kind: MessageKind,
        now: float,
        *,
        audio_seconds: float = 0.0,
        scope: ReplayScope = ReplayScope.SESSION,
    ) -> Entry[T]:
        """Queue a client message; returns its entry (send it when :meth:`next_unsent`
        returns it). ``audio_seconds`` is the duration of an audio chunk; ``scope`` says
        which later connections it may be replayed to."""
        self.admit(kind, audio_seconds)
        self._clock = max(self._clock, now)
        entry: Entry[T] = Entry(self._next_seq, message, kind, audio_seconds, now, scope)
        self._next_seq += 1
        self._submitted += 1
        self._log[entry.seq] = entry
        self._pending.append(entry)
        if kind is MessageKind.AUDIO:
            self._audio.append(entry)
            self._audio_seconds += audio_seconds
            if self._by_speech:
                self._hold_speech(entry)
        elif kind is MessageKind.VIDEO:
            self._video.append(entry)
            self._video_frames += 1
        elif kind is MessageKind.ACTIVITY_START or kind is MessageKind.ACTIVITY_END:
            self._activity_open = kind is MessageKind.ACTIVITY_START
        self._enforce_bounds(now)
        self._prune()
        return entry

    def withdraw(self, entry: Entry[T]) -> bool:
        """Never send or replay ``entry`` (e.g. the result of an orphaned or cancelled tool
        call). Returns False when the outbox no longer held it."""
        if not entry._in_log:
            return False
        entry._withdrawn = True
        self._remove(entry)
        return True

    # -- the writer's side ----------------------------------------------------------------

    @property
    def live_connection(self) -> int | None:
        """The id of the connection new writes go to, or None during a gap."""
        return self._live.id if self._live is not None else None

    @property
    def activity_to_reopen(self) -> bool:
        """The live connection must get a start of activity before anything queued for it:
        the user's activity was open at the point its session starts from (see *Activity*)."""
        return self._reopen_activity and self._live is not None

    def activity_reopened(self, connection: int, index: int) -> None:
        """A start of activity that no entry carries was written to the live ``connection``
        at ``index``, reopening the user's activity there."""
        live = self._live
        if live is None or live.id != connection:
            raise ValueError(f"connection {connection} is not the live connection")
        if index <= live.last_index:
            raise ValueError(
                f"index {index} on connection {connection} does not follow {live.last_index}"
            )
        live.last_index = index
        self._reopen_activity = False

    def next_unsent(self) -> Entry[T] | None:
        """The next entry to write to the live connection, in order; None when there is
        nothing to write or no live connection."""
        if self._live is None:
            return None
        return self._head()

    def mark_sent(self, entry: Entry[T], connection: int, index: int, now: float) -> None:
        """Record that ``entry`` (the one :meth:`next_unsent` returned) was written to the
        live ``connection`` at per-connection ``index``. Call it before awaiting the write,
        so a switch in between cannot lose the entry."""
        live = self._live
        if live is None or live.id != connection:
            raise ValueError(f"connection {connection} is not the live connection")
        if self._head() is not entry:
            raise ValueError(f"{entry!r} is not the next entry to send")
        if index <= live.last_index:
            raise ValueError(
                f"index {index} on connection {connection} does not follow {live.last_index}"
            )
        self._clock = max(self._clock, now)
        self._pending.popleft()
        entry._queued = False
        if entry._conn is not None:
            self._resent += 1
        entry._deliver(live, index, now)
        live.last_index = index
        live.last_sent_seq = max(live.last_sent_seq, entry.seq)
        self._sent += 1

    def mark_written(self, entry: Entry[T], connection: int, now: float) -> None:
        """The write of ``entry`` to ``connection`` completed at ``now``: the arrival rule
        counts it as on the wire from then (not from :meth:`mark_sent`, which comes before
        the write waits its turn)."""
        written = entry._completed(connection, now)
        if written is not None and entry.kind is MessageKind.TOOL_RESPONSE:
            conn, index = written
            conn.last_tool_response = max(conn.last_tool_response, index)
        self._clock = max(self._clock, now)

    def round_trip_measured(
        self, connection: int, seconds: float, jitter: float = 0.0, late_by: float = 0.0
    ) -> None:
        """The live ``connection``'s network round trip (the kernel's estimate) is
        ``seconds``, varying by ``jitter``: handles it issues from now are placed by it (see
        *Arrival*). ``late_by``: how much earlier than it was handled the transport may
        place a handle still to come on it (a busy event loop may keep one waiting that
        long); the log keeps what such a handle may lack (see *Bounds*)."""
        live = self._live
        if live is not None and live.id == connection:
            if seconds != live.round_trip or jitter != live.jitter or late_by != live.late_by:
                self._set_round_trip(live, seconds, jitter, late_by)

    def model_answered(self, connection: int) -> None:
        """The model's audio or text arrived on the live ``connection``. A function call
        holds the model until its result comes, so output that follows a tool response whose
        write completed shows the session consumed it, and with it everything written to the
        connection before it (one ordered stream). Handles that arrive later hold those
        messages whatever their timing: a busy event loop, which moves a handle's arrival
        back, cannot make a move replay an answered tool result or the question before it."""
        live = self._live
        if live is not None and live.id == connection:
            live.answered_through = max(live.answered_through, live.last_tool_response)

    def mark_unsent(self, entry: Entry[T], connection: int) -> None:
        """The write of ``entry`` to ``connection`` failed: it never got there. The entry is
        queued again for the live connection (or the next one), unless it was withdrawn, is
        already queued, or was written to the live connection since. Works after a switch
        too, when the failure is reported late. Media a bound released meanwhile stays given
        up, counted once as lost (see *Bounds*)."""
        delivery = next((d for d in reversed(entry._deliveries()) if d.conn.id == connection), None)
        if delivery is None:
            raise ValueError(f"{entry!r} was not written to connection {connection}")
        if entry._released:
            # The release counted it lost where it was lacking; where this write counted it
            # held (a handle, the turn boundary), it is lacking now.
            held = [p for p in self._points() if self._in_state(entry, p) is True]
            entry._undeliver(delivery)
            for point in held:
                if self._in_state(entry, point) is not True:
                    point.lost.add(entry)
            if entry.seq <= self._rebuild_through:
                self._rebuild_lost.add(entry)
            return
        entry._undeliver(delivery)
        if entry._withdrawn:
            return
        # Whatever counted it as held (a handle, the turn boundary) counted wrong.
        for point in self._points():
            point.prunable_through = min(point.prunable_through, entry.seq - 1)
        delivery.conn.last_sent_seq = min(delivery.conn.last_sent_seq, entry.seq - 1)
        self._rebuild_through = min(self._rebuild_through, entry.seq - 1)
        self._refresh()
        if not entry._in_log:
            self._reinsert(entry)
        live = self._live
        if entry.scope is ReplayScope.CONNECTION and (live is None or live.id != connection):
            return  # it was for that connection alone
        if not entry._queued and (live is None or entry._delivery_on(live) is None):
            self._queue_in_order(entry)

    # -- the receiver's side --------------------------------------------------------------

    def record_handle(
        self,
        handle: HandleRef,
        connection: int,
        now: float,
        *,
        resumable: bool = True,
        last_consumed_index: int | None = None,
        late_by: float = 0.0,
    ) -> bool:
        """Record a resumption handle that arrived on ``connection`` and was handled at
        ``now``. Returns False (and records nothing) for a handle not marked resumable or from
        a connection that is not live: no move resumes from those. ``late_by``: how much
        earlier it may have arrived (a busy event loop kept it waiting): the arrival rule
        places it that much earlier, and widens its margin to at least as much (see
        *Arrival*)."""
        live = self._live
        if not resumable or not handle or live is None or live.id != connection:
            return False
        if last_consumed_index is None:
            limit, exact = live.last_index, False
        else:
            if last_consumed_index < 0:
                raise ValueError(f"last_consumed_index must be >= 0, got {last_consumed_index}")
            if last_consumed_index > live.last_index:
                logger.warning(
                    "handle {} claims index {} consumed on connection {}, but only {} were "
                    "written; using {}",
                    redact(handle),
                    last_consumed_index,
                    connection,
                    live.last_index,
                    live.last_index,
                )
            limit, exact = min(last_consumed_index, live.last_index), True
        self._clock = max(self._clock, now)
        arrived_at, margin = now, live.margin
        if math.isfinite(late_by) and late_by > 0:
            arrived_at = now - late_by
            margin = self._margin(live.round_trip, max(live.jitter, late_by))
        self._add_point(
            handle,
            _Point(
                handle,
                live,
                limit,
                exact,
                arrived_at,
                margin,
                live.round_trip,
                live.answered_through,
            ),
        )
        return True

    def record_foreign_handle(self, handle: HandleRef) -> None:
        """Record ``handle``, the snapshot of a session this outbox never wrote to (the stored
        handle of a call taken over from another process, or one ``connect`` resumes from
        after the log was cleared), as a resumption point that holds none of the messages
        logged, before or after: call it before :meth:`attach_resumed` from it. Until the
        new session issues a handle of its own, a resume from ``handle`` (and :meth:`lacking`,
        what a snapshot of the session stores) queues every message again, the ones the
        takeover replayed first: the session resumed from it again lacks them all."""
        # A connection no entry is ever written to, whose session every entry came after.
        elsewhere = _ConnectionLog(-1, 0, None, 0, False, 0.0)
        self._add_point(handle, _Point(handle, elsewhere, 0, True, self._clock, 0.0, None))

    def pin(self, handle: HandleRef) -> bool:
        """Keep ``handle``'s resumption point, however many newer handles arrive, until the
        next attach. Call it when a dial with ``handle`` starts (make-before-break: the live
        connection may issue newer handles meanwhile). Returns False for an unknown handle."""
        if handle not in self._handles:
            return False
        self._pinned.add(handle)
        return True

    def confirmed(self, connection: int, index: int) -> None:
        """The server acknowledged that the conversation holds every message written to
        ``connection`` up to ``index`` (an exact acknowledgement, where the provider gives
        one: the input committed into a conversation item), so a rebuild seeded with that
        conversation need not replay them, nor a stored record keep them (see *Rebuild*).
        An acknowledgement on a connection other than the live or the last one, or short of
        the rebuild point, changes nothing; an index past the last message written counts up
        to that message."""
        if index < 0:
            raise ValueError(f"index must be >= 0, got {index}")
        conn = next(
            (c for c in (self._live, self._last_conn) if c is not None and c.id == connection),
            None,
        )
        if conn is None:
            return
        point = _Point(None, conn, min(index, conn.last_index), True, self._clock, 0.0, None)
        through = self._rebuild_through
        for entry in self._log.values():
            if entry.seq <= through or entry.scope is ReplayScope.CONNECTION:
                continue
            if self._in_state(entry, point) is not True:
                break
            through = entry.seq
        if through > self._rebuild_through:
            self._rebuild_through = through
            self._rebuild_lost = _Losses()
            self._refresh()

    def turn_completed(self) -> None:
        """A turn completed (the provider said so) and the history committed it: a rebuild need not
        replay what was written up to now. Also call it when the history commits an answer
        a lost connection cut."""
        conn = self._live or self._last_conn
        if conn is not None and conn.last_sent_seq > self._rebuild_through:
            self._rebuild_through = conn.last_sent_seq
            self._rebuild_lost = _Losses()
            self._refresh()

    # -- connection switches --------------------------------------------------------------

    def detach(self, connection: int) -> bool:
        """``connection`` is gone (lost or closed): a gap starts when it was the live one.
        Submitted messages are held (within the bounds) until a new connection attaches."""
        if self._live is None or self._live.id != connection:
            return False
        self._last_conn = self._live
        self._live = None
        return True

    def attach_resumed(
        self, connection: int, handle: HandleRef, now: float, *, round_trip: float | None = None
    ) -> Replay:
        """``connection`` resumed the session from ``handle`` and takes every write from now
        (the previous live connection, if any, gets nothing more). Queues, in order, what
        the resumed session lacks. ``round_trip``: the connection's network round trip, if
        measured already (see :meth:`round_trip_measured`). Raises
        :class:`UnknownHandleError` for a handle the outbox does not hold."""
        point = self._handles.get(handle)
        if point is None:
            raise UnknownHandleError(f"no resumption point for handle {redact(handle)}")
        self._enforce_bounds(now)
        needed: list[Entry[T]] = []
        possibly_duplicated = 0
        for entry in self._log.values():
            if entry.scope is ReplayScope.CONNECTION:
                continue
            in_state = self._in_state(entry, point)
            if in_state is True:
                continue
            needed.append(entry)
            possibly_duplicated += entry._conn is not None and in_state is None
        replay = self._replay(
            needed, possibly_duplicated, _sum_losses(point.lost, self._gap_dropped)
        )
        self._switch(self._connection(connection, point, 0, False, round_trip), needed)
        logger.debug("connection {} resumed from {}: {}", connection, redact(handle), replay)
        return replay

    def attach_fresh(
        self,
        connection: int,
        now: float,
        *,
        round_trip: float | None = None,
        seeded: bool = True,
    ) -> Replay:
        """``connection`` opened a fresh session (first connection, or a rebuild seeded with
        the history) and takes every write from now. Queues what came after the last
        completed turn; discards tool responses; forgets every handle (they belong to the
        old session). ``seeded=False``: nothing seeds the session (the first connection), so
        ``RESUMED``-scope messages are queued too."""
        self._enforce_bounds(now)
        needed: list[Entry[T]] = []
        discarded: list[Entry[T]] = []
        scopes = (ReplayScope.SESSION,) if seeded else (ReplayScope.SESSION, ReplayScope.RESUMED)
        for entry in self._log.values():
            if entry.seq <= self._rebuild_through or entry.scope not in scopes:
                continue
            if entry.kind is MessageKind.TOOL_RESPONSE:
                discarded.append(entry)
                continue
            needed.append(entry)
        for entry in discarded:
            self.withdraw(entry)
        self._discarded += len(discarded)
        replay = replace(
            self._replay(needed, 0, _sum_losses(self._rebuild_lost, self._gap_dropped)),
            tool_responses_discarded=len(discarded),
        )
        self._handles.clear()
        self._switch(
            self._connection(connection, None, self._rebuild_through, seeded, round_trip),
            needed,
        )
        logger.debug("connection {} opened a fresh session: {}", connection, replay)
        return replay

    def lacking(self, handle: HandleRef | None) -> list[T]:
        """What a session resumed from ``handle`` would lack, in order, as
        :meth:`attach_resumed` would queue it; for None or a handle the outbox no longer
        holds, what a session rebuilt from the history would lack, as :meth:`attach_fresh`
        would queue it (no tool responses). Changes nothing: it is what a snapshot of the
        session keeps for another process to replay."""
        point = self._handles.get(handle) if handle is not None else None
        if point is None:
            return [
                entry.message
                for entry in self._log.values()
                if entry.seq > self._rebuild_through
                and entry.scope is ReplayScope.SESSION
                and entry.kind is not MessageKind.TOOL_RESPONSE
            ]
        return [
            entry.message
            for entry in self._log.values()
            if entry.scope is not ReplayScope.CONNECTION
            and self._in_state(entry, point) is not True
        ]

    def clear(self) -> None:
        """Forget every message, handle and connection (the session is closed)."""
        for entry in self._log.values():
            entry._in_log = False
            entry._queued = False
            entry._withdrawn = True
        self._log.clear()
        self._pending.clear()
        self._dead_pending = 0
        self._audio.clear()
        self._dead_audio = 0
        self._video.clear()
        self._audio_seconds = 0.0
        self._video_frames = 0
        self._handles.clear()
        self._pinned.clear()
        self._live = self._last_conn = None
        self._activity_open = self._reopen_activity = False
        self._silence_kept = self._silence_tail_seconds = 0.0
        self._silence_tail.clear()

    # -- diagnostics ----------------------------------------------------------------------

    @property
    def stats(self) -> OutboxStats:
        """A snapshot of the counters."""
        return OutboxStats(
            submitted=self._submitted,
            sent=self._sent,
            resent=self._resent,
            pending=sum(1 for e in self._pending if e._in_log and e._queued),
            retained=len(self._log),
            retained_audio_seconds=self._audio_seconds,
            handles=len(self._handles),
            audio_chunks_dropped=self._dropped.audio_chunks,
            audio_seconds_dropped=self._dropped.audio_seconds,
            video_frames_dropped=self._dropped.video_frames,
            tool_responses_discarded=self._discarded,
            silence_chunks_skipped=self._skipped.audio_chunks,
            silence_seconds_skipped=self._skipped.audio_seconds,
        )

    def __repr__(self) -> str:
        live = self._live.id if self._live is not None else None
        return (
            f"Outbox(live={live}, retained={len(self._log)}, pending={len(self._pending)}, "
            f"handles={len(self._handles)})"
        )

    # -- internals ------------------------------------------------------------------------

    def _points(self) -> Iterator[_Point]:
        return iter(self._handles.values())

    def _head(self) -> Entry[T] | None:
        pending = self._pending
        while pending and not pending[0]._queued:
            pending.popleft()
            self._dead_pending = max(0, self._dead_pending - 1)
        return pending[0] if pending else None

    def _reinsert(self, entry: Entry[T]) -> None:
        """Put back an entry pruned while its write was still in flight."""
        entry._in_log = True
        self._log[entry.seq] = entry
        self._log = OrderedDict(sorted(self._log.items()))
        if entry.kind is MessageKind.AUDIO:
            _insert_in_order(self._audio, entry)
            self._audio_seconds += entry.audio_seconds
        elif entry.kind is MessageKind.VIDEO:
            _insert_in_order(self._video, entry)
            self._video_frames += 1

    def _queue_in_order(self, entry: Entry[T]) -> None:
        entry._queued = True
        _insert_in_order(self._pending, entry)

    def _in_state(self, entry: Entry[T], point: _Point) -> bool | None:
        """Whether the session captured by ``point`` holds ``entry``: True, False, or None
        when it probably does but the arrival margin says replay it anyway."""
        current = point
        while True:
            conn = current.conn
            delivery = entry._delivery_on(conn)
            if delivery is not None:
                if delivery.index > current.limit:
                    return False
                if current.exact or delivery.index <= current.answered_through:
                    return True
                if delivery.sent_at >= current.arrived_at - current.margin:
                    # The uncertain window: silence there is not worth replaying.
                    if self._silent(entry):
                        return True
                    if (
                        current.round_trip is not None
                        and delivery.sent_at > current.arrived_at - current.round_trip
                    ):
                        return False  # still on its way when the snapshot was taken
                    if entry.kind in self._limits.margin_kinds:
                        return None
                return True
            if entry.seq >= conn.first_seq:
                # Submitted after this connection took over, and never written to it.
                return False
            if conn.base is None:
                return entry.seq <= conn.base_through or (
                    conn.seeded and entry.scope is ReplayScope.RESUMED
                )
            current = conn.base

    def _silent(self, entry: Entry[T]) -> bool:
        if entry._silent is None:
            level = self._audio_level
            entry._silent = (
                level is not None
                and entry.kind is MessageKind.AUDIO
                and level(entry.message) < self._limits.silence_level
            )
        return entry._silent

    def _hold_speech(self, entry: Entry[T]) -> None:
        """Track the silent stretch ``entry`` (just submitted audio) ends or continues, and
        skip its middle: what lies beyond the padding after speech and before the newest
        ``silence_padding`` seconds (see *Held silence*)."""
        if not self._silent(entry):
            self._silence_kept = self._silence_tail_seconds = 0.0
            self._silence_tail.clear()
            return
        padding = self._limits.silence_padding
        if self._silence_kept < padding - 1e-9:
            self._silence_kept += entry.audio_seconds
            return
        tail = self._silence_tail
        tail.append(entry)
        self._silence_tail_seconds += entry.audio_seconds
        while tail and self._silence_tail_seconds - tail[0].audio_seconds >= padding - 1e-9:
            middle = tail.popleft()
            self._silence_tail_seconds -= middle.audio_seconds
            if middle._in_log:
                self._skipped.add(middle)
                middle._withdrawn = True
                self._remove(middle)

    def _add_point(self, handle: HandleRef, point: _Point) -> None:
        """Keep ``point`` as the newest resumption point, ``handle``'s (a repeated handle
        moves up), within ``max_handles`` but the pinned ones."""
        point.prunable_through = self._prunable_through(point)
        self._handles.pop(handle, None)
        self._handles[handle] = point
        for old in list(self._handles)[: -self._limits.max_handles]:
            if old not in self._pinned:
                del self._handles[old]
        self._refresh()

    def _prunable_through(self, point: _Point) -> int:
        for entry in self._log.values():
            # A restated turn is owed to its own connection alone, never to a later session.
            if (
                entry.scope is not ReplayScope.CONNECTION
                and self._in_state(entry, point) is not True
            ):
                return entry.seq - 1
        return self._next_seq - 1

    def _refresh(self) -> None:
        """Resumption points changed: recompute what every one of them holds, and prune."""
        frontier = self._rebuild_through
        for point in self._points():
            frontier = min(frontier, point.prunable_through)
        self._frontier = frontier
        self._prune()
        self._cut_chains()

    def _prune(self) -> None:
        frontier = self._frontier
        pruned = False
        # A handle still to come may lack entries written within the margin before it
        # arrives, its arrival moved back by a busy loop: keep those.
        live = self._live
        horizon = self._clock - (live.reach if live is not None else self._limits.handle_margin)
        log = self._log
        while log:
            seq, entry = next(iter(log.items()))
            if seq > frontier or entry._queued:
                break
            if entry._conn is not None and entry._sent_at >= horizon:
                break
            log.popitem(last=False)
            self._forget(entry)
            pruned = True
        if pruned:
            self._cut_chains()

    def _cut_chains(self) -> None:
        """Drop links to base sessions no retained entry can be looked up in any more."""
        oldest = next(iter(self._log), self._next_seq)
        starts = [p.conn for p in self._points()]
        if self._live is not None:
            starts.append(self._live)
        for conn in starts:
            current: _ConnectionLog | None = conn
            while current is not None and current.base is not None:
                if oldest >= current.first_seq:
                    current.base = None
                    break
                current = current.base.conn

    def _enforce_bounds(self, now: float) -> None:
        self._clock = max(self._clock, now)
        limits = self._limits
        # the tolerance keeps float sums of chunk durations from dropping one chunk too many
        while self._audio and self._audio_seconds > limits.max_audio_seconds + 1e-9:
            self._release(self._audio[0])
        while self._video and self._video_frames > limits.max_video_frames:
            self._release(self._video[0])
        horizon = now - limits.max_media_age
        # Read the deques anew on each release: one may compact (be replaced) while releasing.
        while not self._by_speech and self._audio and self._audio[0].submitted_at < horizon:
            self._release(self._audio[0])
        while self._video and self._video[0].submitted_at < horizon:
            self._release(self._video[0])

    def _release(self, entry: Entry[T]) -> None:
        """Give up a media entry to honour a bound, counting what it costs."""
        entry._released = True
        if entry._conn is None or (entry._queued and self._live is not None):
            # The live session, or the next one, will never get it.
            self._dropped.add(entry)
            if self._live is None:
                self._gap_dropped.add(entry)
        else:
            for point in self._points():
                # within the arrival margin the session may lack it: count it as lost
                if self._in_state(entry, point) is not True:
                    point.lost.add(entry)
            if entry.seq > self._rebuild_through:
                self._rebuild_lost.add(entry)
        self._remove(entry)

    def _remove(self, entry: Entry[T]) -> None:
        del self._log[entry.seq]
        self._forget(entry)

    def _forget(self, entry: Entry[T]) -> None:
        entry._in_log = False
        if entry._queued:
            entry._queued = False
            self._dead_pending += 1
            if self._dead_pending > 32 and self._dead_pending * 2 > len(self._pending):
                self._pending = deque(e for e in self._pending if e._queued)
                self._dead_pending = 0
        if entry.kind is MessageKind.AUDIO:
            self._audio_seconds -= entry.audio_seconds
            # Skipped silence leaves dead entries behind held speech: compact them away.
            self._dead_audio += 1 - self._drop_dead(self._audio)
            if self._dead_audio > 32 and self._dead_audio * 2 > len(self._audio):
                self._audio = deque(e for e in self._audio if e._in_log)
                self._dead_audio = 0
            if not self._audio:
                self._audio_seconds = 0.0
                self._dead_audio = 0
        elif entry.kind is MessageKind.VIDEO:
            self._video_frames -= 1
            self._drop_dead(self._video)

    @staticmethod
    def _drop_dead(media: deque[Entry[T]]) -> int:
        """Drop the dead entries at the front of ``media``; returns how many."""
        dropped = 0
        while media and not media[0]._in_log:
            media.popleft()
            dropped += 1
        return dropped

    def _connection(
        self,
        connection: int,
        base: _Point | None,
        base_through: int,
        seeded: bool,
        round_trip: float | None,
    ) -> _ConnectionLog:
        conn = _ConnectionLog(connection, self._next_seq, base, base_through, seeded, 0.0)
        self._set_round_trip(conn, round_trip)
        return conn

    def _set_round_trip(
        self,
        conn: _ConnectionLog,
        round_trip: float | None,
        jitter: float = 0.0,
        late_by: float = 0.0,
    ) -> None:
        if round_trip is not None and (not math.isfinite(round_trip) or round_trip < 0):
            round_trip = None
        if not math.isfinite(jitter) or jitter < 0:
            jitter = 0.0
        if not math.isfinite(late_by) or late_by < 0:
            late_by = 0.0
        conn.round_trip = round_trip
        conn.jitter = jitter
        conn.late_by = late_by
        conn.margin = self._margin(round_trip, jitter)
        # A handle moved back by ``late_by`` has its margin widened to as much (see
        # :meth:`record_handle`): keep that far before it too.
        conn.reach = late_by + self._margin(round_trip, max(jitter, late_by))

    def _margin(self, round_trip: float | None, jitter: float) -> float:
        """How long before a handle's arrival an entry may be missing from its snapshot: the
        round trip and its tolerance (at least the jitter), or ``handle_margin`` while it is
        not measured."""
        if round_trip is None:
            return self._limits.handle_margin
        return round_trip + max(self._limits.round_trip_tolerance, jitter)

    def _switch(self, conn: _ConnectionLog, needed: list[Entry[T]]) -> None:
        for entry in self._pending:
            entry._queued = False
        for entry in needed:
            entry._queued = True
        self._pending = deque(needed)
        self._dead_pending = 0
        self._reopen_activity = self._activity_open_before(needed)
        self._live = conn
        self._gap_dropped = _Losses()
        self._pinned.clear()
        self._refresh()

    def _activity_open_before(self, needed: list[Entry[T]]) -> bool:
        """Whether the user's activity is open where ``needed`` (what a new connection gets
        queued) begins: the opposite of the first activity marker in it, else as it is now."""
        for entry in needed:
            if entry.kind is MessageKind.ACTIVITY_START:
                return False
            if entry.kind is MessageKind.ACTIVITY_END:
                return True
        return self._activity_open

    def _replay(
        self, needed: Sequence[Entry[T]], possibly_duplicated: int, lost: _Losses
    ) -> Replay:
        """What queuing ``needed`` means: entries written before are replayed, the others
        were held (never written)."""
        replayed = [entry for entry in needed if entry._conn is not None]
        buffered = [entry for entry in needed if entry._conn is None]
        return Replay(
            turn_input=sum(
                entry.kind in _TURN_KINDS and not self._silent(entry) for entry in needed
            ),
            replayed=len(replayed),
            buffered=len(buffered),
            possibly_duplicated=possibly_duplicated,
            audio_chunks_dropped=lost.audio_chunks,
            audio_seconds_dropped=lost.audio_seconds,
            video_frames_dropped=lost.video_frames,
            audio_seconds_replayed=sum(entry.audio_seconds for entry in replayed),
            audio_seconds_buffered=sum(entry.audio_seconds for entry in buffered),
        )


def _insert_in_order(entries: deque[Entry[T]], entry: Entry[T]) -> None:
    position = next((i for i, e in enumerate(entries) if e.seq > entry.seq), len(entries))
    entries.insert(position, entry)


def _sum_losses(a: _Losses, b: _Losses) -> _Losses:
    return _Losses(
        a.audio_chunks + b.audio_chunks,
        a.audio_seconds + b.audio_seconds,
        a.video_frames + b.video_frames,
    )
