"""One OpenAI Realtime session's conversation and input buffer, followed exactly.

:class:`ConversationState` is a reducer: the transport hands it every server event it reads
(:meth:`~ConversationState.receive`, values of :mod:`.realtime_server_events`) and says what it
sent that the server does not echo (:meth:`~ConversationState.appended`,
:meth:`~ConversationState.sent_commit`, :meth:`~ConversationState.sent_clear`). It does no
I/O. From that it knows what a new session would lack:

- **The conversation**: the items in the server's order (``previous_item_id``), each as the
  server last stated it: user items with their typed text and, once
  ``input_audio_transcription.completed`` arrives, their transcript (their audio is kept until
  then, and for good when no transcript comes); assistant items with their words and how much
  of their audio the user heard after a truncate; function calls with their arguments, and
  their outputs.
- **The input not yet in an item**: OpenAI commits the input buffer into a user item with an
  id (``input_audio_buffer.committed``), and states where speech starts and stops in
  milliseconds of all the audio appended in the session
  (``InputAudioBufferSpeechStartedEvent.audio_start_ms``, ``...SpeechStoppedEvent.audio_end_ms``).
  The client counts what it appended on the same time base, so the audio a new session must
  be given is known to the byte: :meth:`~ConversationState.uncommitted_audio`.
- **Whether this is a turn boundary** (:attr:`~ConversationState.at_turn_boundary`).

Rules and their sources:

- A VAD commit holds the audio from the speech's ``audio_start_ms`` (prefix padding included)
  to its ``audio_end_ms``; a client commit holds everything appended before the commit was sent
  (the socket keeps order); a clear empties everything appended before it was sent. Audio after
  a VAD commit's ``audio_end_ms`` stays uncommitted: if the service took some of that trailing
  silence into the item, a new session is given silence twice, never speech.
- While no speech is under way, only the last ``idle_audio_ms`` of input is kept: the server
  keeps only its prefix padding of quiet audio (API reference, ``turn_detection``), and a
  ``speech_started`` names a start no older than the round trip plus the VAD's reaction.
- A committed user item waits for an answer when the session's turn detection has
  ``create_response`` (a client commit never creates one: API reference,
  ``input_audio_buffer.commit``).
- An answer's words are placed on its audio: a transcript delta belongs to the audio delta
  received last before it (the service sends each audio delta before its transcript, as the
  bundled emulator does), so a truncate at ``audio_end_ms`` keeps the deltas whose audio
  started before it (``ConversationItemTruncatedEvent``: "remove the server-side text
  transcript to ensure there is no text in the context that hasn't been heard by the user").
  Where the transcript runs ahead of the audio, more words are kept than were heard.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from realtime_resumption.openai.realtime_server_events import (
    AudioDelta,
    BufferCleared,
    BufferCommitted,
    BufferTimeout,
    FunctionArgumentsDone,
    InputTranscriptCompleted,
    InputTranscriptDelta,
    InputTranscriptFailed,
    Item,
    ItemAnnounced,
    ItemDeleted,
    ItemTruncated,
    OutputItem,
    OutputTextDelta,
    OutputTextDone,
    ResponseCreated,
    ResponseDone,
    ServerEvent,
    SessionEvent,
    SpeechStarted,
    SpeechStopped,
)
from realtime_resumption.openai.session_config import (
    PCM16_24K,
    AudioFormat,
    ServerVad,
    SessionConfig,
)

ItemKind = Literal["user", "assistant", "system", "function_call", "function_call_output", "other"]


@dataclass(frozen=True)
class HeldItem:
    """One item of the conversation, as :class:`ConversationState` knows it."""

    id: str
    kind: ItemKind
    text: str = ""
    """User: its typed text and its audio's transcript; assistant: its words (after a
    truncate, those the user heard); system: its text; function output: the output."""
    has_audio: bool = False
    """A user item made of speech (an ``input_audio`` part)."""
    transcript_pending: bool = False
    """A user speech item whose transcript has not come (and may never: transcription off or
    failed); ``audio`` then holds its speech."""
    audio: bytes = field(default=b"", repr=False)
    """The user speech of an item whose words are not known, in the input format; empty when
    the words are known, or when it was not kept (see ``max_item_audio_ms``)."""
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    """A function call's arguments, JSON text as the model wrote them."""
    status: str | None = None
    response_id: str | None = None
    """The response that produced it (assistant items and function calls)."""
    audio_ms: int = 0
    """An answer's audio received (ms)."""
    heard_ms: int | None = None
    """An answer truncated at this many ms; None when it was not truncated."""


@dataclass
class _Entry:
    """The mutable record behind a :class:`HeldItem`."""

    item: HeldItem
    typed: str = ""
    transcript: str | None = None
    partial: str = ""
    """Input transcription deltas so far (shown until the transcript completes)."""
    words: list[tuple[int, str]] = field(default_factory=list)
    """An answer's transcript deltas, each with the byte offset where its audio started."""
    audio_bytes: int = 0
    last_audio_at: int = 0


_KINDS: dict[tuple[str, str | None], ItemKind] = {
    ("message", "user"): "user",
    ("message", "assistant"): "assistant",
    ("message", "system"): "system",
    ("function_call", None): "function_call",
    ("function_call_output", None): "function_call_output",
}


def _kind(item: Item) -> ItemKind:
    return _KINDS.get((item.type, item.role), "other")


class ConversationState:
    """The conversation and input buffer of one session; see the module documentation.

    ``conversation`` is what the client gave the session before any event (the items of a
    :class:`~realtime_resumption.openai.conversation_seed.Seed`): their echoes then complete
    them, and an item seeded as audio keeps its audio, which the server never echoes.
    """

    def __init__(
        self,
        *,
        input_format: AudioFormat = PCM16_24K,
        output_format: AudioFormat = PCM16_24K,
        idle_audio_ms: int = 3_000,
        max_item_audio_ms: int = 300_000,
        conversation: Sequence[HeldItem] = (),
    ) -> None:
        if idle_audio_ms < 0 or max_item_audio_ms < 0:
            raise ValueError("idle_audio_ms and max_item_audio_ms must be >= 0")
        self._input_format = input_format
        self._output_format = output_format
        self._idle_audio_ms = idle_audio_ms
        self._max_item_audio_ms = max_item_audio_ms
        self.config: SessionConfig | None = None
        """The session's configuration, as its last ``session.*`` event stated it."""
        self.session_id: str | None = None
        self.expires_at: int | None = None
        self._entries: dict[str, _Entry] = {}
        self._order: list[str] = []
        for held in conversation:
            self._place(held.id, None, _Entry(held, typed=held.text), at_end=True)
        self._response: str | None = None
        self._awaiting_response = False
        # Input audio, in bytes of the session's input: everything appended so far, the part
        # still held (from _buffer_from), and the end of what is committed or cleared.
        self._appended = 0
        self._buffer = bytearray()
        self._buffer_from = 0
        self._boundary = 0
        self._speaking = False
        self._speech_from: int | None = None
        self._stop: tuple[str, int] | None = None
        self._commits: deque[int] = deque()
        self._clears: deque[int] = deque()

    # --- what the client did ----------------------------------------------------------------

    def appended(self, audio: bytes) -> None:
        """The client sent ``audio`` in an ``input_audio_buffer.append``."""
        self._buffer += audio
        self._appended += len(audio)
        self._trim()

    def sent_commit(self) -> None:
        """The client sent ``input_audio_buffer.commit``."""
        self._commits.append(self._appended)

    def sent_clear(self) -> None:
        """The client sent ``input_audio_buffer.clear``."""
        self._clears.append(self._appended)

    def truncate(self, item_id: str, audio_end_ms: int) -> None:
        """The answer ``item_id`` was heard up to ``audio_end_ms``: its words after that
        leave it. The server's ``conversation.item.truncated`` comes here; so does a cut the
        client knows of that no server will confirm (its session is gone)."""
        entry = self._entries.get(item_id)
        if entry is None:
            return
        end = audio_end_ms * self._output_format.bytes_per_ms
        heard = "".join(text for at, text in entry.words if at < end).strip()
        entry.item = replace(entry.item, heard_ms=audio_end_ms, text=heard)
        entry.words = [(at, text) for at, text in entry.words if at < end]

    # --- what the server said ---------------------------------------------------------------

    def receive(self, event: ServerEvent) -> None:
        """Apply one server event (any value of :func:`read_server_event`; the ones that say
        nothing of the conversation or the input buffer change nothing)."""
        if isinstance(event, SessionEvent):
            self._session(event)
        elif isinstance(event, ItemAnnounced):
            self._announced(event.item, event.previous_item_id)
        elif isinstance(event, OutputItem):
            self._announced(event.item, None, response_id=event.response_id)
        elif isinstance(event, ItemTruncated):
            self.truncate(event.item_id, event.audio_end_ms)
        elif isinstance(event, ItemDeleted):
            if self._entries.pop(event.item_id, None) is not None:
                self._order.remove(event.item_id)
        elif isinstance(event, InputTranscriptDelta):
            self._transcript(event.item_id, partial=event.delta)
        elif isinstance(event, InputTranscriptCompleted):
            self._transcript(event.item_id, complete=event.transcript)
        elif isinstance(event, InputTranscriptFailed):
            self._transcript(event.item_id)
        elif isinstance(event, SpeechStarted):
            self._speaking = True
            self._speech_from = max(self._boundary, self._at(event.audio_start_ms))
        elif isinstance(event, SpeechStopped):
            self._speaking = False
            self._stop = (event.item_id, self._at(event.audio_end_ms))
        elif isinstance(event, BufferTimeout):
            self._speech_from = max(self._boundary, self._at(event.audio_start_ms))
            self._stop = (event.item_id, self._at(event.audio_end_ms))
        elif isinstance(event, BufferCommitted):
            self._committed(event)
        elif isinstance(event, BufferCleared):
            end = self._clears.popleft() if self._clears else self._appended
            self._boundary = max(self._boundary, end)
            self._speaking, self._speech_from, self._stop = False, None, None
            self._trim()
        elif isinstance(event, ResponseCreated):
            self._response = event.response_id
            self._awaiting_response = False
        elif isinstance(event, ResponseDone):
            if self._response == event.response_id:
                self._response = None
        elif isinstance(event, AudioDelta):
            entry = self._answer(event.item_id, event.response_id)
            entry.last_audio_at = entry.audio_bytes
            entry.audio_bytes += len(event.audio)
            ms = entry.audio_bytes // self._output_format.bytes_per_ms
            entry.item = replace(entry.item, audio_ms=ms)
        elif isinstance(event, OutputTextDelta):
            entry = self._answer(event.item_id, event.response_id)
            entry.words.append((entry.last_audio_at, event.delta))
            if entry.item.heard_ms is None:
                entry.item = replace(entry.item, text="".join(t for _, t in entry.words).strip())
        elif isinstance(event, OutputTextDone):
            entry = self._answer(event.item_id, event.response_id)
            if not entry.words and entry.item.heard_ms is None:
                entry.item = replace(entry.item, text=event.text.strip())
        elif isinstance(event, FunctionArgumentsDone):
            entry = self._answer(event.item_id, event.response_id, kind="function_call")
            entry.item = replace(
                entry.item, call_id=event.call_id, name=event.name, arguments=event.arguments
            )

    # --- what it knows ----------------------------------------------------------------------

    @property
    def items(self) -> tuple[HeldItem, ...]:
        """The conversation, in the server's order."""
        return tuple(self._entries[i].item for i in self._order)

    def item(self, item_id: str) -> HeldItem | None:
        """The item ``item_id``, or None when the conversation does not hold it."""
        entry = self._entries.get(item_id)
        return None if entry is None else entry.item

    @property
    def response_in_progress(self) -> str | None:
        """The id of the answer under way (``response.created`` without its ``.done``)."""
        return self._response

    @property
    def user_speaking(self) -> bool:
        """Between ``speech_started`` and ``speech_stopped``."""
        return self._speaking

    @property
    def speech_uncommitted(self) -> bool:
        """Speech the server detected is not yet in an item (spoken, or stopped and its commit
        not come)."""
        return self._speech_from is not None or self._stop is not None

    @property
    def awaiting_response(self) -> bool:
        """A user turn the server committed and will answer by itself has no answer yet."""
        return self._awaiting_response

    def calls_awaiting_output(self) -> tuple[str, ...]:
        """Call ids of the function calls whose output the conversation does not hold (a call
        cut with its answer, status ``incomplete``, awaits nothing)."""
        answered = {
            e.item.call_id for e in self._entries.values() if e.item.kind == "function_call_output"
        }
        return tuple(
            e.item.call_id
            for i in self._order
            if (e := self._entries[i]).item.kind == "function_call"
            and e.item.call_id is not None
            and e.item.call_id not in answered
            and e.item.status != "incomplete"
        )

    @property
    def at_turn_boundary(self) -> bool:
        """No answer under way or due, the user not speaking, no speech, commit or clear
        waiting on the server, no function call waiting for its output: a new session given
        :attr:`items` and :meth:`uncommitted_audio` now continues the call as it is."""
        return (
            self._response is None
            and not self._awaiting_response
            and not self._speaking
            and not self.speech_uncommitted
            and not self._commits
            and not self._clears
            and not self.calls_awaiting_output()
        )

    def uncommitted_audio(self) -> bytes:
        """The input no item holds and no clear removed: what a new session must be
        appended, in the input format (at most ``idle_audio_ms`` of it while no speech is
        under way)."""
        return bytes(self._buffer[self.uncommitted_from - self._buffer_from :])

    @property
    def committed_to(self) -> int:
        """Where the input no item holds and no clear removed begins, in bytes of all the
        input appended in the session (:attr:`appended_bytes`'s time base)."""
        return max(self._boundary, self._clears[-1] if self._clears else 0)

    @property
    def uncommitted_from(self) -> int:
        """Where :meth:`uncommitted_audio` begins (:attr:`appended_bytes`'s time base): past
        :attr:`committed_to` and the quiet audio no longer kept."""
        return max(self.committed_to, self._buffer_from)

    @property
    def appended_bytes(self) -> int:
        """Bytes of input appended in the session."""
        return self._appended

    @property
    def input_idle(self) -> bool:
        """No speech the server detected waits for its commit, and no commit of the
        client's: the input no item holds is only the recent quiet (``idle_audio_ms``)."""
        return not self.speech_uncommitted and not self._commits

    @property
    def appended_ms(self) -> int:
        """Milliseconds of input appended in the session (the time base of the speech
        events)."""
        return self._appended // self._input_format.bytes_per_ms

    # --- internals --------------------------------------------------------------------------

    def _at(self, ms: int) -> int:
        return ms * self._input_format.bytes_per_ms

    def _session(self, event: SessionEvent) -> None:
        self.session_id = event.id or self.session_id
        self.expires_at = event.expires_at or self.expires_at
        if event.config is not None:
            self.config = event.config
            self._input_format = event.config.input_format
            self._output_format = event.config.output_format

    def _place(self, item_id: str, previous: str | None, entry: _Entry, *, at_end: bool) -> None:
        """Insert after ``previous`` (None: first, as the server says of an item with no
        predecessor; an id it does not hold: last)."""
        self._entries[item_id] = entry
        if at_end or (previous is not None and previous not in self._entries):
            self._order.append(item_id)
        elif previous is None:
            self._order.insert(0, item_id)
        else:
            self._order.insert(self._order.index(previous) + 1, item_id)

    def _announced(
        self, item: Item, previous: str | None, *, response_id: str | None = None
    ) -> None:
        entry = self._entries.get(item.id)
        if entry is None:
            entry = _Entry(HeldItem(item.id, _kind(item), response_id=response_id))
            # An output item is announced without its place: it follows what is there.
            self._place(item.id, previous, entry, at_end=response_id is not None)
        held = replace(
            entry.item,
            status=item.status or entry.item.status,
            response_id=response_id or entry.item.response_id,
        )
        if held.kind in ("user", "system"):
            typed = " ".join(p.text for p in item.content if p.type == "input_text" and p.text)
            entry.typed = typed or entry.typed
            audio = [p for p in item.content if p.type == "input_audio"]
            if audio:
                held = replace(held, has_audio=True)
                if audio[0].transcript is not None and entry.transcript is None:
                    entry.transcript = audio[0].transcript
            entry.item = held
            self._refresh_user(entry)
            return
        if held.kind == "assistant":
            said = " ".join(t for p in item.content if (t := p.transcript or p.text)).strip()
            # The words stated whole stand only when no delta came (a missed stream).
            if said and not entry.words and held.heard_ms is None:
                held = replace(held, text=said)
        elif held.kind == "function_call":
            held = replace(
                held,
                call_id=item.call_id,
                name=item.name or held.name,
                arguments=item.arguments or held.arguments,
            )
        elif held.kind == "function_call_output":
            held = replace(held, call_id=item.call_id, text=item.output or "")
        entry.item = held

    def _refresh_user(self, entry: _Entry) -> None:
        words = entry.transcript if entry.transcript is not None else entry.partial
        text = " ".join(t for t in (entry.typed.strip(), words.strip()) if t)
        pending = entry.item.has_audio and entry.transcript is None
        audio = entry.item.audio if pending else b""
        entry.item = replace(entry.item, text=text, transcript_pending=pending, audio=audio)

    def _transcript(self, item_id: str, *, partial: str = "", complete: str | None = None) -> None:
        entry = self._entries.get(item_id)
        if entry is None:
            return
        entry.partial += partial
        if complete is not None:
            entry.transcript = complete
        self._refresh_user(entry)

    def _answer(self, item_id: str, response_id: str, kind: ItemKind = "assistant") -> _Entry:
        entry = self._entries.get(item_id)
        if entry is None:
            # Its announcement was missed: it is the newest item.
            entry = _Entry(HeldItem(item_id, kind, response_id=response_id))
            self._place(item_id, None, entry, at_end=True)
        return entry

    def _committed(self, event: BufferCommitted) -> None:
        if self._stop is not None and self._stop[0] == event.item_id:
            start = self._speech_from if self._speech_from is not None else self._boundary
            end = self._stop[1]
            # Before any session event, the session has the API's default: server VAD that
            # answers each turn.
            detection = self.config.turn_detection if self.config is not None else ServerVad()
            self._awaiting_response = detection is not None and detection.create_response
        else:
            # The client's commit: everything appended before it was sent. A commit the
            # client did not send is taken to hold all that was appended.
            start = self._boundary
            end = self._commits.popleft() if self._commits else self._appended
        start = max(start, self._buffer_from)
        end = max(end, start)
        speech = bytes(self._buffer[start - self._buffer_from : end - self._buffer_from])
        entry = self._entries.get(event.item_id)
        if entry is None:
            held = HeldItem(event.item_id, "user", has_audio=True)
            entry = _Entry(held)
            self._place(event.item_id, event.previous_item_id, entry, at_end=False)
        entry.item = replace(entry.item, has_audio=True, audio=speech)
        self._refresh_user(entry)
        self._boundary = max(self._boundary, end)
        self._speaking, self._speech_from, self._stop = False, None, None
        self._trim()
        self._bound_item_audio()

    def _trim(self) -> None:
        keep_from = self._boundary
        if not self.speech_uncommitted and not self._commits:
            idle = self._idle_audio_ms * self._input_format.bytes_per_ms
            keep_from = max(keep_from, self._appended - idle)
        drop = keep_from - self._buffer_from
        if drop > 0:
            del self._buffer[:drop]
            self._buffer_from = keep_from

    def _bound_item_audio(self) -> None:
        """Keep at most ``max_item_audio_ms`` of untranscribed speech, the newest."""
        budget = self._max_item_audio_ms * self._input_format.bytes_per_ms
        for item_id in reversed(self._order):
            entry = self._entries[item_id]
            size = len(entry.item.audio)
            if size > budget:
                entry.item = replace(entry.item, audio=b"")
            budget -= min(size, budget)
