"""What happened: every attempt, connection, message, handle and answer, and a summary of it.

Times are seconds on the event loop's clock since the emulator started. A server message is
*delivered* when it was written to a connection the client had not started closing, that was
not silenced and not dropped at that moment; the emulator cannot see whether the application
above the client library read it.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .audio import UserChunk
from .snapshot import Outcome, SessionState, Snapshot

ClosedBy = Literal["server", "client", "drop"]


@dataclass
class AttemptRecord:
    """One WebSocket upgrade request and what the emulator did with it."""

    time: float
    path: str
    outcome: str
    """``accepted``, ``http404``, or the refusal's ``http401``, ``http403``, ``http429`` or
    ``http503``."""


@dataclass
class ClientMessageRecord:
    """A client message: its index on its connection (setup is 0), kind and time."""

    index: int
    kind: str
    time: float
    audio_seqs: tuple[int, ...] = ()
    """User audio seqs it carried (realtime audio, or inline audio in ``client_content``)."""
    text: str | None = None
    tool_response_ids: tuple[str, ...] = ()
    turns: tuple[tuple[str, str], ...] = ()
    """``client_content``: (role, text) of each turn."""
    turn_complete: bool = False
    """``client_content``: the message ended the user's turn."""
    mime_types: tuple[str, ...] = ()
    """MIME type of each audio or video blob it carried, in order."""
    audio_bytes: int = 0
    """Bytes of realtime audio it carried (every audio blob's data)."""


@dataclass(frozen=True)
class SetupRecord:
    """What a connection's ``setup`` message asked for."""

    model: str
    system_instruction: str
    tools: tuple[str, ...]
    """Names of the declared functions, in order."""
    voice: str | None
    response_modalities: tuple[str, ...]
    resumption: bool
    """The setup enabled session resumption."""
    with_handle: bool
    """The setup asked to resume from a handle (valid or not)."""
    transparent: bool
    generation: Mapping[str, object] = field(default_factory=dict)
    """Its generation settings (temperature, thinking, ...), keys in snake_case."""
    compression: bool = False
    """It enabled context-window compression (a sliding window): no session cap."""


@dataclass
class ServerMessageRecord:
    """A server message and whether it was delivered."""

    kind: str
    time: float
    delivered: bool = False
    turn: int | None = None
    chunk: int | None = None
    handle_index: int | None = None


@dataclass
class HandleRecord:
    """A resumption handle the session issued (its redacted form) and what it stands for."""

    index: int
    redacted: str
    issued_at: float
    connection: int
    """Index of the connection (in ``SessionRecord.connections``) that issued it."""
    last_consumed_index: int | None
    snapshot: Snapshot
    consumed_through: int
    """The index of the last client message the connection had taken in when it issued the
    handle."""
    input_waiting: int
    """Client messages that had reached the connection (received, queued for it) but that it
    had not taken in when it issued the handle: the ``input_waiting`` messages after
    ``consumed_through``. The snapshot lacks them though they reached the server before the
    handle left it: a server behind its input, which a client placing the handle by its
    arrival cannot see."""
    expired: bool = False


@dataclass
class TurnRecord:
    """One answer turn: chunks planned, produced and delivered, and how it ended."""

    turn: int
    connection: int
    user_text: str
    planned: int
    produced: int = 0
    delivered: int = 0
    tool_calls: list[str] = field(default_factory=list)
    outcome: Outcome | Literal["running"] = "running"
    answers_result: str | None = None
    """The non-blocking call whose response this answer addresses (its ``user_text`` is then
    no user's); None for an answer to the user."""

    def count_delivery(self, delivered: asyncio.Future[bool]) -> None:
        """A chunk of this answer crossed the network (or did not)."""
        if delivered.result():
            self.delivered += 1


@dataclass(frozen=True)
class ToolResultRecord:
    """A non-blocking call's response the session took."""

    call_id: str
    connection: int
    """The connection it arrived on (not always the one that issued the call)."""
    scheduling: str
    """``INTERRUPT``, ``WHEN_IDLE`` or ``SILENT`` (``WHEN_IDLE`` when the response said
    none, the service's default)."""


@dataclass(frozen=True)
class ContextUpdateRecord:
    """A ``contextUpdate`` a connection received."""

    connection: int
    system_instruction: str | None
    functions: tuple[str, ...] | None
    outcome: Literal["applied", "ignored", "refused"]
    """``applied`` in the session; ``ignored`` (``instruction_change="ignore"``: the
    instruction was kept, the tools taken); ``refused``: the connection closed with 1007."""


@dataclass
class ConnectionRecord:
    """One connection of a session."""

    index: int
    session_id: str
    path: str
    api: Literal["gemini", "vertex"]
    """Which API path the client dialled."""
    opened_at: float
    resumed_from: str | None = None
    """The redacted handle this connection resumed from."""
    resumed_handle_index: int | None = None
    """Index of that handle in ``SessionRecord.handles`` (None if unknown or none)."""
    setup_at: float | None = None
    """When setupComplete was sent (None if never)."""
    setup_latency: float | None = None
    """How long the service worked on the setup (scaled), as drawn or scripted."""
    refused: str | None = None
    """Why the connection was refused, if it was: ``handle`` (expired or unknown),
    ``close1011``, ``hang``, ``open-session`` (resume while open), ``transparent`` (Gemini API),
    ``instruction`` (a new system instruction, with ``instruction_change="refuse"``),
    ``instruction-length`` (a resume over ``resume_instruction_limit``), ``video`` (a resume
    of a session sent video, with ``refuse_resume_after_video``), ``session-ended`` (a
    resume of a session that reached ``session_cap``) or ``deadline`` (a resume after a close
    without goAway, with ``refuse_resume_after_deadline``)."""
    closed_at: float | None = None
    close_code: int | None = None
    close_reason: str | None = None
    closed_by: ClosedBy | None = None
    client_messages: list[ClientMessageRecord] = field(default_factory=list)
    server_messages: list[ServerMessageRecord] = field(default_factory=list)
    setup: SetupRecord | None = None
    """What the connection's setup asked for (refused connections included)."""
    dead: bool = False
    """Resumed but dead (``faults.dead_after_resume``): it never answered anything."""

    @property
    def established(self) -> bool:
        """setupComplete was sent and the connection was not refused."""
        return self.setup_at is not None and self.refused is None


@dataclass
class SessionRecord:
    """One session, across all its connections."""

    session_id: str
    connections: list[ConnectionRecord] = field(default_factory=list)
    handles: list[HandleRecord] = field(default_factory=list)
    turns: dict[int, TurnRecord] = field(default_factory=dict)
    audio_received: list[int] = field(default_factory=list)
    """Every user audio seq received, on any connection, in arrival order."""
    speech: dict[int, bool] = field(default_factory=dict)
    """Whether each user audio seq received was speech (its level at or above the VAD
    threshold, as at its first receipt) or silence."""
    tool_calls_issued: list[str] = field(default_factory=list)
    stranded_tool_responses: list[str] = field(default_factory=list)
    """Responses to call ids this session never issued."""
    unawaited_tool_responses: list[str] = field(default_factory=list)
    """Responses to calls the session issued but no longer awaited (cancelled, resumed past,
    answered already)."""
    tool_results_taken: list[ToolResultRecord] = field(default_factory=list)
    """Responses to running non-blocking calls (``non_blocking_tools``) the session took."""
    context_updates: list[ContextUpdateRecord] = field(default_factory=list)
    """Every ``contextUpdate`` a connection of the session received, and what came of it."""
    state: SessionState | None = None
    """The state of the session's latest connection."""
    capped_at: float | None = None
    """When the session reached ``session_cap`` and ended (None if it did not)."""

    @property
    def audio_consumed(self) -> list[int]:
        """User audio seqs that survive in the session's latest state, in order."""
        return list(self.state.consumed_audio) if self.state else []

    def receive_audio(self, chunks: Sequence[UserChunk], vad_threshold: float) -> list[int]:
        """Record user audio chunks received, speech or silence; returns their seqs."""
        seqs = [c.seq for c in chunks]
        self.audio_received.extend(seqs)
        for c in chunks:
            self.speech.setdefault(c.seq, c.level >= vad_threshold)
        return seqs

    def is_speech(self, seq: int) -> bool:
        """Whether ``seq`` was speech (a seq never received counts as speech: unknown audio
        is never taken for silence)."""
        return self.speech.get(seq, True)


@dataclass(frozen=True)
class TurnSummary:
    """Per answer turn: chunks planned, produced and delivered, and how it ended."""

    turn: int
    planned: int
    produced: int
    delivered: int
    outcome: str
    cut: bool
    """Ended by something other than the user (a closed or resumed connection), or completed
    with chunks that were not delivered. A running answer is not cut (yet)."""


@dataclass(frozen=True)
class MoveSummary:
    """A move: the session going from one established connection to the next.

    - ``input_stall``: the longest time no connection of the session received client audio
      around the move: between two consecutive audio messages (on any connection) of which
      the later arrived after the first attempt of the move was dialled and the earlier no
      later than the new connection's first audio. None when the client sent no audio around
      the move. The emulator cannot tell a microphone the client paused from a stall: a
      client that stops streaming around a move sees the pause counted.
    - ``cadence``: the session's usual spacing of client audio, the median time between
      consecutive audio messages that carried a seq not received before (a real-time
      client's chunk length; a replay's burst does not count); None with fewer than two. ``input_lag`` is the stall beyond it: how much later than at its usual pace the
      client's audio arrived, 0 when the move cost the stream nothing.
    - ``audio_lost``: seqs whose last receipt was on the old connection and that the final
      state lacks (the new connection resumed from a snapshot without them, and the client
      did not replay them).
    - ``audio_duplicates``: seqs the final state holds more than once whose second receipt
      was on the new connection (replayed although the snapshot already held them).
    - ``speech_duplicates`` and ``silence_duplicates`` split ``audio_duplicates`` by what the
      chunk was (the VAD threshold, ``vad_threshold``): the user's words heard twice, and
      silence heard twice; ``speech_lost`` is the speech among ``audio_lost``.
    """

    index: int
    from_connection: int
    to_connection: int
    gap: float | None
    """The new connection's setupComplete minus the old one's close (negative when they
    overlapped); None while the old one is still open."""
    input_stall: float | None
    audio_lost: tuple[int, ...]
    audio_duplicates: tuple[int, ...]
    cadence: float | None = None
    speech_duplicates: tuple[int, ...] = ()
    silence_duplicates: tuple[int, ...] = ()
    speech_lost: tuple[int, ...] = ()

    @property
    def input_lag(self) -> float | None:
        """The input stall beyond the client's usual spacing of audio (never negative)."""
        if self.input_stall is None or self.cadence is None:
            return None
        return max(0.0, self.input_stall - self.cadence)


@dataclass(frozen=True)
class SessionSummary:
    """The figures a test or benchmark checks for one session."""

    session_id: str
    connections: int
    refused: int
    turns: tuple[TurnSummary, ...]
    answers_cut: tuple[int, ...]
    audio_received: tuple[int, ...]
    audio_consumed: tuple[int, ...]
    audio_lost: tuple[int, ...]
    """Received on some connection but absent from the final state."""
    audio_duplicates: tuple[int, ...]
    """Seqs present more than once in the final state."""
    stranded_tool_responses: tuple[str, ...]
    gaps: tuple[float, ...]
    """Between consecutive established connections: next setupComplete minus previous close
    (negative when they overlapped, i.e. make-before-break)."""
    moves: tuple[MoveSummary, ...] = ()
    """Each move, with its input stall and the audio it lost or made heard twice."""
    speech_duplicates: tuple[int, ...] = ()
    """The speech among ``audio_duplicates``: the user's words heard twice."""
    silence_duplicates: tuple[int, ...] = ()
    """The silence among ``audio_duplicates``."""
    speech_lost: tuple[int, ...] = ()
    """The speech among ``audio_lost``: the user's words the session never heard."""
    silence_lost: tuple[int, ...] = ()
    """The silence among ``audio_lost``."""

    @property
    def max_input_stall(self) -> float | None:
        """The longest input stall of any move (None without a measured one)."""
        return _max_stall(self.moves)


@dataclass(frozen=True)
class LedgerSummary:
    """Summary of every session."""

    sessions: Mapping[str, SessionSummary]

    @property
    def moves(self) -> tuple[MoveSummary, ...]:
        """Every session's moves."""
        return tuple(m for s in self.sessions.values() for m in s.moves)

    @property
    def max_input_stall(self) -> float | None:
        """The longest input stall of any move of any session."""
        return _max_stall(self.moves)

    @property
    def audio_lost_count(self) -> int:
        """User audio chunks lost, over every session."""
        return sum(len(s.audio_lost) for s in self.sessions.values())

    @property
    def audio_duplicate_count(self) -> int:
        """User audio chunks heard twice (or more), over every session."""
        return sum(len(s.audio_duplicates) for s in self.sessions.values())

    @property
    def speech_duplicate_count(self) -> int:
        """User speech chunks heard twice (or more), over every session."""
        return sum(len(s.speech_duplicates) for s in self.sessions.values())

    @property
    def silence_duplicate_count(self) -> int:
        """User silence chunks heard twice (or more), over every session."""
        return sum(len(s.silence_duplicates) for s in self.sessions.values())

    @property
    def speech_lost_count(self) -> int:
        """User speech chunks lost, over every session."""
        return sum(len(s.speech_lost) for s in self.sessions.values())

    def __str__(self) -> str:
        lines = []
        for s in self.sessions.values():
            moves = "; ".join(
                f"stall {_ms(m.input_stall)} (lag {_ms(m.input_lag)}), lost {len(m.audio_lost)}, "
                f"twice {len(m.audio_duplicates)} (speech {len(m.speech_duplicates)}, "
                f"silence {len(m.silence_duplicates)}), speech lost {len(m.speech_lost)}"
                for m in s.moves
            )
            lines.append(
                f"session {s.session_id}: {s.connections} connection(s), {s.refused} refused, "
                f"{len(s.turns)} turn(s), cut {list(s.answers_cut)}, audio "
                f"{len(s.audio_consumed)}/{len(s.audio_received)} consumed, "
                f"lost {len(s.audio_lost)}, duplicates {len(s.audio_duplicates)}, "
                f"speech twice {len(s.speech_duplicates)}, silence twice "
                f"{len(s.silence_duplicates)}, speech lost {len(s.speech_lost)}, "
                f"stranded {len(s.stranded_tool_responses)}, "
                f"gaps {[round(g, 4) for g in s.gaps]}, moves [{moves}]"
            )
        return "\n".join(lines)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def _max_stall(moves: tuple[MoveSummary, ...]) -> float | None:
    stalls = [m.input_stall for m in moves if m.input_stall is not None]
    return max(stalls) if stalls else None


class Ledger:
    """Everything the emulator saw and did, for tests and benchmarks."""

    def __init__(self) -> None:
        self.sessions: dict[str, SessionRecord] = {}
        self.attempts: list[AttemptRecord] = []

    def session(self, session_id: str) -> SessionRecord:
        """The record of ``session_id``, made on first use."""
        record = self.sessions.get(session_id)
        if record is None:
            record = self.sessions[session_id] = SessionRecord(session_id)
        return record

    def summary(self, now: float | None = None) -> LedgerSummary:
        """Per-session figures (``now`` closes the gap of a connection still open)."""
        return LedgerSummary({sid: _summarise(r, now) for sid, r in self.sessions.items()})


def _summarise(record: SessionRecord, now: float | None) -> SessionSummary:
    turns = tuple(
        TurnSummary(
            turn=t.turn,
            planned=t.planned,
            produced=t.produced,
            delivered=t.delivered,
            outcome=t.outcome,
            cut=t.outcome == "cut" or (t.outcome == "complete" and t.delivered < t.produced),
        )
        for t in sorted(record.turns.values(), key=lambda t: t.turn)
    )
    consumed = record.audio_consumed
    kept = set(consumed)
    counts = Counter(consumed)
    established = sorted(
        (c for c in record.connections if c.established), key=lambda c: c.setup_at or 0.0
    )
    lost = tuple(s for s in dict.fromkeys(record.audio_received) if s not in kept)
    duplicates = tuple(s for s, n in counts.items() if n > 1)
    moves = _moves(record, established, lost, duplicates, now)
    speech, silence = _split(record, duplicates)
    speech_lost, silence_lost = _split(record, lost)
    return SessionSummary(
        session_id=record.session_id,
        connections=len(record.connections),
        refused=sum(1 for c in record.connections if c.refused is not None),
        turns=turns,
        answers_cut=tuple(t.turn for t in turns if t.cut),
        audio_received=tuple(record.audio_received),
        audio_consumed=tuple(consumed),
        audio_lost=lost,
        audio_duplicates=duplicates,
        stranded_tool_responses=tuple(record.stranded_tool_responses),
        gaps=tuple(m.gap for m in moves if m.gap is not None),
        moves=moves,
        speech_duplicates=speech,
        silence_duplicates=silence,
        speech_lost=speech_lost,
        silence_lost=silence_lost,
    )


def _split(record: SessionRecord, seqs: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``seqs`` split into (speech, silence), each in order."""
    speech = tuple(s for s in seqs if record.is_speech(s))
    return speech, tuple(s for s in seqs if not record.is_speech(s))


def _audio_messages(record: SessionRecord) -> list[tuple[ClientMessageRecord, int]]:
    """Every client message carrying audio, with its connection's index, by arrival."""
    found = [
        (m, c.index)
        for c in record.connections
        for m in c.client_messages
        if m.audio_seqs or m.kind == "audio"
    ]
    return sorted(found, key=lambda item: item[0].time)


def _cadence(audio: list[tuple[ClientMessageRecord, int]]) -> float | None:
    """The median time between consecutive audio messages that carried something new: a
    replay's burst is not the client's pace."""
    seen: set[int] = set()
    fresh: list[float] = []
    for m, _ in audio:
        if not m.audio_seqs or not seen.issuperset(m.audio_seqs):
            fresh.append(m.time)
        seen.update(m.audio_seqs)
    spacing = [b - a for a, b in itertools.pairwise(fresh)]
    return statistics.median(spacing) if spacing else None


def _moves(
    record: SessionRecord,
    established: list[ConnectionRecord],
    lost: tuple[int, ...],
    duplicates: tuple[int, ...],
    now: float | None,
) -> tuple[MoveSummary, ...]:
    audio = _audio_messages(record)
    times = [m.time for m, _ in audio]
    cadence = _cadence(audio)
    receipts: dict[int, list[int]] = {}
    for m, conn in audio:
        for seq in m.audio_seqs:
            receipts.setdefault(seq, []).append(conn)
    lost_from: dict[int, list[int]] = {}
    for seq in lost:
        lost_from.setdefault(receipts[seq][-1], []).append(seq)
    twice_on: dict[int, list[int]] = {}
    for seq in duplicates:
        seen = receipts[seq]
        if len(seen) > 1:
            twice_on.setdefault(seen[1], []).append(seq)
    moves = []
    for i, (old, new) in enumerate(itertools.pairwise(established)):
        assert old.setup_at is not None and new.setup_at is not None
        dialled = min(
            c.opened_at
            for c in record.connections
            if old.setup_at < c.opened_at <= new.opened_at or c is new
        )
        first_on_new = next((m.time for m, conn in audio if conn == new.index), None)
        end = first_on_new if first_on_new is not None else math.inf
        stalls = [b - a for a, b in itertools.pairwise(times) if b >= dialled and a <= end]
        closed = old.closed_at if old.closed_at is not None else now
        move_lost = tuple(lost_from.get(old.index, ()))
        move_twice = tuple(twice_on.get(new.index, ()))
        speech_twice, silence_twice = _split(record, move_twice)
        moves.append(
            MoveSummary(
                index=i,
                from_connection=old.index,
                to_connection=new.index,
                gap=None if closed is None else new.setup_at - closed,
                input_stall=max(stalls) if stalls else None,
                audio_lost=move_lost,
                audio_duplicates=move_twice,
                cadence=cadence,
                speech_duplicates=speech_twice,
                silence_duplicates=silence_twice,
                speech_lost=_split(record, move_lost)[0],
            )
        )
    return tuple(moves)
