"""What happened: every attempt, connection, message, handle and answer, and a summary of it.

Times are seconds on the event loop's clock since the emulator started. A server message is
*delivered* when it was written to a connection the client had not started closing, that was
not silenced and not dropped at that moment; the emulator cannot see whether the application
above the client library read it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .snapshot import Outcome, SessionState, Snapshot

ClosedBy = Literal["server", "client", "drop"]


@dataclass
class AttemptRecord:
    """One WebSocket upgrade request and what the emulator did with it."""

    time: float
    path: str
    outcome: str
    """``accepted``, ``http401``, ``http404`` or ``http503``."""


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
    refused: str | None = None
    """Why the connection was refused, if it was: ``handle`` (expired or unknown),
    ``close1011``, ``hang``, ``open-session`` (resume while open), ``transparent`` (Gemini API)
    or ``instruction`` (a new system instruction, with ``instruction_change="refuse"``)."""
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
    tool_calls_issued: list[str] = field(default_factory=list)
    stranded_tool_responses: list[str] = field(default_factory=list)
    """Responses to call ids this session never issued."""
    unawaited_tool_responses: list[str] = field(default_factory=list)
    """Responses to calls the session issued but no longer awaited (cancelled, resumed past)."""
    state: SessionState | None = None
    """The state of the session's latest connection."""

    @property
    def audio_consumed(self) -> list[int]:
        """User audio seqs that survive in the session's latest state, in order."""
        return list(self.state.consumed_audio) if self.state else []


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


@dataclass(frozen=True)
class LedgerSummary:
    """Summary of every session."""

    sessions: Mapping[str, SessionSummary]

    def __str__(self) -> str:
        lines = []
        for s in self.sessions.values():
            lines.append(
                f"session {s.session_id}: {s.connections} connection(s), {s.refused} refused, "
                f"{len(s.turns)} turn(s), cut {list(s.answers_cut)}, audio "
                f"{len(s.audio_consumed)}/{len(s.audio_received)} consumed, "
                f"lost {len(s.audio_lost)}, duplicates {len(s.audio_duplicates)}, "
                f"stranded {len(s.stranded_tool_responses)}, "
                f"gaps {[round(g, 4) for g in s.gaps]}"
            )
        return "\n".join(lines)


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
    gaps = []
    for prev, nxt in itertools.pairwise(established):
        closed = prev.closed_at if prev.closed_at is not None else now
        if closed is not None and nxt.setup_at is not None:
            gaps.append(nxt.setup_at - closed)
    return SessionSummary(
        session_id=record.session_id,
        connections=len(record.connections),
        refused=sum(1 for c in record.connections if c.refused is not None),
        turns=turns,
        answers_cut=tuple(t.turn for t in turns if t.cut),
        audio_received=tuple(record.audio_received),
        audio_consumed=tuple(consumed),
        audio_lost=tuple(s for s in dict.fromkeys(record.audio_received) if s not in kept),
        audio_duplicates=tuple(s for s, n in counts.items() if n > 1),
        stranded_tool_responses=tuple(record.stranded_tool_responses),
        gaps=tuple(gaps),
    )
