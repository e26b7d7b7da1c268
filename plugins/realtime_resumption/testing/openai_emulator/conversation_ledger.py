"""What each OpenAI Realtime session heard, held and answered, for tests to assert on.

A session is one WebSocket connection (the service keeps nothing across connections: a new
session starts empty, and a client that moves on gives it the conversation as items). Per
session the ledger keeps the conversation's items in order: user speech by the chunk ids of
the audio each item was committed from (``audio.user_audio``), the items the client created
(``seeded``: what a client gives a new session), the answers with how many of their audio
chunks were produced, delivered and kept after a truncate, and the speech the session had
buffered but not committed when it ended. :meth:`Ledger.summary` adds it up across sessions:
user speech lost or heard twice, answers cut. Speech a client gives a new session in an item
(a user audio item of the conversation so far) is the conversation carried, not heard again:
it is heard twice when the input buffer commits it in two sessions, or when one session's
conversation holds it twice.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal

ItemSource = Literal["speech", "client", "model"]
"""How an item entered the conversation: committed from the input audio buffer, created by
the client (``conversation.item.create``), or produced by a response."""

AnswerOutcome = Literal["running", "complete", "cancelled", "truncated", "cut"]
"""``complete``: every chunk produced and none truncated away; ``cancelled``: stopped by
``response.cancel`` or by the user's speech (``interrupt_response``); ``truncated``: complete,
then truncated short of its end (the user did not hear it all); ``cut``: the session ended
(cap, drop, close) while it ran."""

ClosedBy = Literal["client", "server", "cap", "drop"]


@dataclass
class ItemRecord:
    """One conversation item."""

    id: str
    type: str
    role: str | None
    source: ItemSource
    text: str = ""
    """The words it holds: typed text, the transcript of its speech, an answer's transcript,
    a function call's name and arguments, a function output."""
    speech: tuple[int, ...] = ()
    """User speech chunk ids (``user_audio`` sequence numbers) its audio holds."""
    call_id: str | None = None
    deleted: bool = False


@dataclass
class AnswerRecord:
    """One response."""

    response_id: str
    turn: int
    """Numbers the answer's audio chunks: chunk ``k`` is ``(turn, k)`` (``answer_chunk_id``)."""
    item_id: str | None
    planned: int
    produced: int = 0
    delivered: int = 0
    """Chunks that crossed the network to the client."""
    sent_at: list[float] = field(default_factory=list)
    """When each chunk was sent (seconds since the emulator started, its scaled clock)."""
    heard_ms: int | None = None
    """The ``audio_end_ms`` of a truncate of its item (what the client says was played)."""
    chunk_ms: int = 0
    calls: tuple[str, ...] = ()
    """Call ids of the function calls it made (instead of audio)."""
    outcome: AnswerOutcome = "running"
    metadata: dict[str, object] | None = None

    def count_delivery(self, delivered: bool) -> None:
        """A chunk crossed the network (or was lost on the way)."""
        if delivered:
            self.delivered += 1


@dataclass
class SessionRecord:
    """One session (one connection)."""

    id: str
    index: int
    path: str
    flavour: str
    opened_at: float
    model: str
    created_at: float | None = None
    """When ``session.created`` was sent; the cap counts from it."""
    items: list[ItemRecord] = field(default_factory=list)
    answers: list[AnswerRecord] = field(default_factory=list)
    received_speech: list[int] = field(default_factory=list)
    """Every user speech chunk id that reached the input buffer, in order."""
    first_audio_at: float | None = None
    last_audio_at: float | None = None
    """When the session received its first and its last ``input_audio_buffer.append``."""
    cleared_speech: list[int] = field(default_factory=list)
    """Speech the client cleared from the buffer (``input_audio_buffer.clear``)."""
    uncommitted_speech: tuple[int, ...] = ()
    """Speech still in the input buffer when the session ended: it reached no item."""
    client_events: Counter[str] = field(default_factory=Counter)
    errors: list[tuple[str | None, str]] = field(default_factory=list)
    """(code, message) of every ``error`` event sent."""
    closed_at: float | None = None
    closed_by: ClosedBy | None = None
    close_code: int | None = None
    close_reason: str | None = None

    def item(self, item_id: str) -> ItemRecord | None:
        """The item with ``item_id`` (deleted ones too)."""
        return next((i for i in self.items if i.id == item_id), None)

    @property
    def seeded(self) -> list[ItemRecord]:
        """The items the client gave this session (``conversation.item.create``)."""
        return [i for i in self.items if i.source == "client"]

    @property
    def committed_speech(self) -> list[int]:
        """User speech chunk ids its conversation's items hold (deleted items included: the
        session heard them), in item order."""
        return [seq for item in self.items for seq in item.speech]

    @property
    def conversation_text(self) -> str:
        """The words of the items the conversation holds (not deleted), in order."""
        return " ".join(i.text for i in self.items if not i.deleted and i.text)


@dataclass(frozen=True)
class LedgerSummary:
    """A call's accounting across its sessions."""

    sessions: int
    speech_committed: tuple[int, ...]
    """Every user speech chunk id committed to an item, across sessions, in order."""
    speech_heard_twice: tuple[int, ...]
    """Chunk ids the input buffer committed more than once (in one session or in two), or
    that two items of one session's conversation hold (one committed, one given by the
    client, say); a chunk given to a later session in an item is carried, not heard twice."""
    speech_uncommitted: tuple[int, ...]
    """Chunk ids a session had buffered when it ended, never committed in any session."""
    answers: int
    answers_complete: int
    answers_cut: int
    """Answers ``cut`` by a session's end (a cap, a drop, a close) while they ran."""
    answers_truncated: int
    """Answers the client truncated short of their end (the user heard part of them)."""
    answers_cancelled: int
    seeded_items: int
    errors: int

    def __str__(self) -> str:
        return (
            f"{self.sessions} session(s); user speech: {len(self.speech_committed)} chunks "
            f"committed, {len(self.speech_heard_twice)} heard twice, "
            f"{len(self.speech_uncommitted)} never committed; answers: {self.answers} "
            f"({self.answers_complete} complete, {self.answers_cut} cut, "
            f"{self.answers_truncated} truncated, {self.answers_cancelled} cancelled); "
            f"{self.seeded_items} items seeded; {self.errors} error events"
        )

    def speech_lost(self, sent: list[int] | tuple[int, ...]) -> list[int]:
        """The speech chunk ids of ``sent`` (what the caller said) that no item holds."""
        committed = set(self.speech_committed)
        return [seq for seq in sent if seq not in committed]


class Ledger:
    """Every session of one emulator, in the order they opened."""

    def __init__(self) -> None:
        self.sessions: list[SessionRecord] = []
        self.refused: list[tuple[float, str, int]] = []
        """(time, path, HTTP status) of every refused upgrade."""
        self.longest_input_pause = 0.0
        """The longest time between two appends the service took, whichever sessions took
        them (seconds, the emulator's clock): for a caller that streams all along, the
        longest its input stalled, a move included."""
        self._last_append: float | None = None

    def audio_appended(self, record: SessionRecord, now: float) -> None:
        """``record``'s session took an ``input_audio_buffer.append`` at ``now``."""
        if record.first_audio_at is None:
            record.first_audio_at = now
        record.last_audio_at = now
        if self._last_append is not None:
            self.longest_input_pause = max(self.longest_input_pause, now - self._last_append)
        self._last_append = now

    def session(self, session_id: str) -> SessionRecord:
        """The session with ``session_id``."""
        for record in self.sessions:
            if record.id == session_id:
                return record
        raise KeyError(session_id)

    def input_gaps(self) -> list[float]:
        """The gaps in the caller's audio between sessions: from each session's last append to
        the first append of the next session that received audio (seconds, the emulator's
        clock), in the order the sessions opened; negative where they overlapped."""
        spans = [
            (s.first_audio_at, s.last_audio_at)
            for s in self.sessions
            if s.first_audio_at is not None and s.last_audio_at is not None
        ]
        return [later[0] - earlier[1] for earlier, later in pairwise(spans)]

    def summary(self) -> LedgerSummary:
        """Add up every session."""
        committed = [seq for s in self.sessions for seq in s.committed_speech]
        counts = Counter(committed)
        heard = Counter(
            seq for s in self.sessions for i in s.items if i.source == "speech" for seq in i.speech
        )
        twice = {seq for seq, n in heard.items() if n > 1}
        for s in self.sessions:
            twice.update(seq for seq, n in Counter(s.committed_speech).items() if n > 1)
        uncommitted = [
            seq for s in self.sessions for seq in s.uncommitted_speech if seq not in counts
        ]
        answers = [a for s in self.sessions for a in s.answers]
        return LedgerSummary(
            sessions=len(self.sessions),
            speech_committed=tuple(committed),
            speech_heard_twice=tuple(sorted(twice)),
            speech_uncommitted=tuple(dict.fromkeys(uncommitted)),
            answers=len(answers),
            answers_complete=sum(a.outcome == "complete" for a in answers),
            answers_cut=sum(a.outcome == "cut" for a in answers),
            answers_truncated=sum(a.outcome == "truncated" for a in answers),
            answers_cancelled=sum(a.outcome == "cancelled" for a in answers),
            seeded_items=sum(len(s.seeded) for s in self.sessions),
            errors=sum(len(s.errors) for s in self.sessions),
        )
