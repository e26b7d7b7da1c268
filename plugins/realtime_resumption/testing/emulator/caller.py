"""A scripted caller: drives a transport the way a voice framework would, and records it all.

``ScriptedCaller`` uses only a transport's public API. It streams microphone audio without a
break (silent chunks between utterances, speech chunks carrying words for utterances, each
chunk numbered so the emulator's ledger can tell which arrived), types text, answers tool
calls after a delay, and records every callback it sees: answer chunks (by their emulator ids),
generation starts and ends, turn completions, tool calls, goAways, moves, closes and errors.
Callbacks already set on the transport keep working: the caller chains them.

Its :class:`CallerSummary` compares with the emulator's ledger, so a test or a demo can say what
the user heard and said against what the service produced and kept::

    async with Emulator(EmulatorConfig(time_scale=0.05)) as emu:
        transport = GeminiLiveTransport(client=emu.client(), tools=[{"name": "lookup"}])
        async with ScriptedCaller(transport, pace=0.25, turn_silence=0.05) as caller:
            await transport.connect()
            caller.start_microphone()
            await caller.ask(["please", "lookup", "flights"])
            await caller.stop_microphone()
            await transport.disconnect()
        print(caller.summary().compare(emu.ledger.summary()))

Answers are attributed to the session the transport last announced with ``on_session_ready``.
Times are the event loop's clock (``loop.time()``), the clock move reports use too.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Literal, Protocol

from loguru import logger

from ...move_reports import HandleKind, MoveReason, MoveReport
from ...transport import (
    ContentTurn,
    GenerationEndReason,
    ToolCall,
    ToolResult,
    TransportError,
    TransportErrorEvent,
)
from .answers import answer_text_ids
from .audio import USER_RATE, answer_chunk_ids, user_audio
from .ledger import LedgerSummary

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds the caller's waits allow by default."""
_MAX_FAILURES_KEPT: Final = 200


class CallerTransport(Protocol):
    """What the caller calls on a transport (``GeminiLiveTransport`` has all of it).

    Callbacks are found by name (``on_audio_output``, ``on_move``, ...); one the transport
    does not have is simply never called.
    """

    def send_audio(self, audio: bytes) -> None:
        """Send 16 kHz PCM16 mono user audio."""
        ...

    def send_live_text(self, turns: Sequence[ContentTurn]) -> bool:
        """Send text that ends the user's turn; False when it was not sent."""
        ...

    def send_content(self, turns: Sequence[ContentTurn], turn_complete: bool = True) -> None:
        """Send conversation content."""
        ...

    def send_tool_result(self, result: ToolResult) -> None:
        """Answer a tool call."""
        ...


EventKind = Literal[
    "session",
    "utterance",
    "utterance_spoken",
    "typed",
    "transcript",
    "answer_chunk",
    "generation_start",
    "generation_end",
    "turn_complete",
    "interrupted",
    "tool_call",
    "tool_cancel",
    "tool_result",
    "go_away",
    "resumption",
    "move_started",
    "move",
    "close",
    "error",
    "send_failed",
]


@dataclass(frozen=True)
class CallerEvent:
    """One thing the caller did or saw, for a live timeline or a trigger."""

    at: float
    """Event-loop time."""
    kind: EventKind
    detail: str = ""
    turn: int | None = None
    """Answer turn (``answer_chunk``) or server turn id (``turn_complete``, ``interrupted``)."""
    chunk: int | None = None
    """Chunk index within the answer (``answer_chunk``)."""


@dataclass(frozen=True)
class SentAudio:
    """A microphone chunk the transport accepted."""

    seq: int
    at: float
    speech: bool


@dataclass(frozen=True)
class SendFailure:
    """A send the transport refused by raising."""

    at: float
    what: Literal["audio", "text", "tool_result"]
    error: str


@dataclass
class Utterance:
    """A scripted utterance: speech chunks carrying ``words``, one word per chunk first."""

    index: int
    words: tuple[str, ...]
    speech_chunks: int
    seqs: list[int] = field(default_factory=list)
    """Sequence numbers of the speech chunks handed to the transport so far."""
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def spoken(self) -> bool:
        """Every speech chunk was handed to the transport."""
        return len(self.seqs) >= self.speech_chunks


@dataclass
class GenerationSpan:
    """A generation from its start to its end(s), as reported."""

    generation_id: str
    started_at: float | None
    ended_at: float | None = None
    reason: GenerationEndReason | None = None
    starts: int = 0
    ends: int = 0

    @property
    def paired(self) -> bool:
        """Started once and ended exactly once, after the start."""
        return self.starts == 1 and self.ends == 1


@dataclass(frozen=True)
class ToolAnswer:
    """What the caller did with one tool call."""

    call_id: str
    name: str
    at: float
    outcome: Literal["sent", "refused", "skipped"]
    """``skipped``: the call was cancelled before its delay ran out."""
    error: str | None = None


@dataclass(frozen=True)
class ResumptionSeen:
    """A resumption update (the handle itself is never kept)."""

    at: float
    has_handle: bool
    resumable: bool
    last_consumed_index: int | None


@dataclass(frozen=True)
class MoveStarted:
    """A move began."""

    at: float
    reason: MoveReason
    handle_kind: HandleKind


@dataclass
class CallerRecord:
    """Everything the caller did and observed, in arrival order."""

    session_ids: list[str] = field(default_factory=list)
    audio: list[SentAudio] = field(default_factory=list)
    audio_refused: list[int] = field(default_factory=list)
    send_failures: list[SendFailure] = field(default_factory=list)
    """The first failures (a bounded number); ``send_failure_count`` counts them all."""
    send_failure_count: int = 0
    utterances: list[Utterance] = field(default_factory=list)
    typed: list[tuple[float, str, bool]] = field(default_factory=list)
    """(time, text, accepted) for every typed text."""
    answer_chunks: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    """Chunk indexes received per (session id, answer turn), in arrival order."""
    foreign_outputs: int = 0
    """Model audio or text that carried no emulator id."""
    input_transcript: list[str] = field(default_factory=list)
    generations: dict[str, GenerationSpan] = field(default_factory=dict)
    turn_completes: list[int | None] = field(default_factory=list)
    interruptions: list[int | None] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_cancellations: list[str] = field(default_factory=list)
    tool_answers: list[ToolAnswer] = field(default_factory=list)
    go_aways: list[tuple[float, float | None]] = field(default_factory=list)
    """(time, notice in seconds or None)."""
    resumption_updates: list[ResumptionSeen] = field(default_factory=list)
    moves_started: list[MoveStarted] = field(default_factory=list)
    moves: list[MoveReport] = field(default_factory=list)
    closes: list[tuple[float, int | None, str | None]] = field(default_factory=list)
    errors: list[tuple[float, TransportErrorEvent]] = field(default_factory=list)
    events: list[CallerEvent] = field(default_factory=list)

    @property
    def session_id(self) -> str | None:
        """The session announced last."""
        return self.session_ids[-1] if self.session_ids else None

    @property
    def completed_generations(self) -> int:
        """Generations that ended as complete answers."""
        return sum(
            1
            for span in self.generations.values()
            if span.reason == GenerationEndReason.GENERATION_COMPLETE
        )

    @property
    def open_generations(self) -> list[str]:
        """Generations started and not ended yet."""
        return [gid for gid, span in self.generations.items() if span.starts > span.ends]

    @property
    def move_in_progress(self) -> bool:
        """A move started and has not reported its outcome yet."""
        return len(self.moves_started) > len(self.moves)

    def answered_since(self, at: float) -> bool:
        """A generation that started at or after ``at`` ended as a complete answer."""
        return any(
            span.started_at is not None
            and span.started_at >= at
            and span.reason == GenerationEndReason.GENERATION_COMPLETE
            for span in self.generations.values()
        )


@dataclass(frozen=True)
class AnswerSeen:
    """The chunks of one answer the caller received."""

    session_id: str
    turn: int
    chunks: tuple[int, ...]
    """Distinct chunk indexes, sorted."""
    repeats: int
    """Chunks received more than once."""


@dataclass(frozen=True)
class LedgerComparison:
    """What the caller received and sent against what the emulator produced and kept.

    Compare once the microphone stopped and the transport's sends were written, or audio still
    in flight shows as missing.
    """

    answers: int
    """Answer turns the emulator produced in the caller's sessions."""
    answers_fully_received: int
    """Of those, the ones whose every produced chunk the caller received."""
    chunks_missing: Mapping[tuple[str, int], tuple[int, ...]]
    """Produced but never received, per (session id, answer turn)."""
    chunks_unknown: tuple[tuple[str, int, int], ...]
    """Received (session, turn, chunk) ids the emulator has no record of producing."""
    audio_missing: tuple[int, ...]
    """Accepted by the transport, absent from every one of the caller's sessions' final
    state."""
    audio_unreceived: tuple[int, ...]
    """Accepted by the transport, never received by the emulator at all (a subset of
    ``audio_missing``; the rest were received and then rolled back by a resume)."""
    audio_duplicated: tuple[int, ...]
    """Present more than once in one session's final state."""
    stranded_tool_responses: tuple[str, ...]
    unpaired_generations: tuple[str, ...]

    @property
    def clean(self) -> bool:
        """Nothing missing, nothing stranded, every generation paired."""
        return not (
            self.chunks_missing
            or self.chunks_unknown
            or self.audio_missing
            or self.stranded_tool_responses
            or self.unpaired_generations
        )

    def __str__(self) -> str:
        missing = sum(len(chunks) for chunks in self.chunks_missing.values())
        return (
            f"answers {self.answers_fully_received}/{self.answers} fully received, "
            f"{missing} chunk(s) missing in {len(self.chunks_missing)} answer(s), "
            f"{len(self.chunks_unknown)} unknown; audio {len(self.audio_missing)} missing "
            f"({len(self.audio_unreceived)} never received), "
            f"{len(self.audio_duplicated)} duplicated; "
            f"stranded {len(self.stranded_tool_responses)}; "
            f"unpaired generations {len(self.unpaired_generations)}"
        )


@dataclass(frozen=True)
class CallerSummary:
    """Figures of one caller's record."""

    sessions: tuple[str, ...]
    audio_accepted: tuple[int, ...]
    audio_refused: int
    utterances: int
    typed: int
    answers: tuple[AnswerSeen, ...]
    generations: int
    generation_ends: Mapping[str, int]
    """Ends per reason."""
    unpaired_generations: tuple[str, ...]
    """Started without exactly one end, or ended without a start."""
    turns_completed: int
    interruptions: int
    tool_calls: int
    tool_results_sent: int
    tool_results_refused: int
    tool_results_skipped: int
    go_aways: int
    moves_started: int
    moves: tuple[MoveReport, ...]
    closes: int
    errors: int
    send_failures: int

    @property
    def move_outcomes(self) -> dict[str, int]:
        """Finished moves per outcome."""
        return dict(Counter(move.outcome.value for move in self.moves))

    def compare(self, ledger: LedgerSummary) -> LedgerComparison:
        """This caller against the emulator's ``ledger.summary()`` (its own sessions only)."""
        sessions = [ledger.sessions[sid] for sid in self.sessions if sid in ledger.sessions]
        received = {(a.session_id, a.turn): set(a.chunks) for a in self.answers}
        missing: dict[tuple[str, int], tuple[int, ...]] = {}
        produced_ids: set[tuple[str, int, int]] = set()
        answers = complete = 0
        for session in sessions:
            for turn in session.turns:
                if turn.produced == 0:
                    continue
                answers += 1
                key = (session.session_id, turn.turn)
                produced = set(range(turn.produced))
                produced_ids.update((key[0], key[1], chunk) for chunk in produced)
                lacking = produced - received.get(key, set())
                if lacking:
                    missing[key] = tuple(sorted(lacking))
                else:
                    complete += 1
        unknown = tuple(
            sorted(
                (sid, turn, chunk)
                for (sid, turn), chunks in received.items()
                for chunk in chunks
                if (sid, turn, chunk) not in produced_ids
            )
        )
        consumed: set[int] = set()
        arrived: set[int] = set()
        duplicated: set[int] = set()
        stranded: list[str] = []
        for session in sessions:
            consumed.update(session.audio_consumed)
            arrived.update(session.audio_received)
            duplicated.update(session.audio_duplicates)
            stranded.extend(session.stranded_tool_responses)
        accepted = self.audio_accepted
        return LedgerComparison(
            answers=answers,
            answers_fully_received=complete,
            chunks_missing=missing,
            chunks_unknown=unknown,
            audio_missing=tuple(seq for seq in accepted if seq not in consumed),
            audio_unreceived=tuple(seq for seq in accepted if seq not in arrived),
            audio_duplicated=tuple(sorted(duplicated)),
            stranded_tool_responses=tuple(stranded),
            unpaired_generations=self.unpaired_generations,
        )

    def __str__(self) -> str:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.move_outcomes.items()))
        return (
            f"caller: {len(self.sessions)} session(s), audio {len(self.audio_accepted)} sent "
            f"({self.audio_refused} refused), {self.utterances} utterance(s), {self.typed} "
            f"typed, {len(self.answers)} answer(s) heard, {self.generations} generation(s) "
            f"({len(self.unpaired_generations)} unpaired), {self.tool_calls} tool call(s) "
            f"({self.tool_results_sent} answered, {self.tool_results_refused} refused, "
            f"{self.tool_results_skipped} skipped), {self.go_aways} goAway(s), "
            f"{len(self.moves)}/{self.moves_started} move(s) [{outcomes}], "
            f"{self.closes} close(s), {self.errors} error(s)"
        )


ToolResponder = Callable[[ToolCall], Mapping[str, Any]]


def _default_response(call: ToolCall) -> Mapping[str, Any]:
    return {"result": f"{call.name} done"}


class ScriptedCaller:
    """Drives ``transport`` as a voice framework would and records what it observes.

    - ``chunk_ms``: audio per microphone chunk (PCM16 mono at ``rate``).
    - ``rate``: the microphone's sample rate: 16 kHz (Gemini Live's input) by default; OpenAI
      Realtime takes 24 kHz, and a framework resampling anything else would lose the chunks'
      numbers.
    - ``pace``: wall-clock seconds per second of audio: 1.0 streams in real time, 0.25 four
      times faster (the emulator's VAD measures silence in audio time, so turns still end).
    - ``turn_silence``: seconds of silent audio after an utterance before the next one starts,
      so that the provider's VAD ends each turn (the emulator's ``vad_silence`` times its
      ``time_scale``, or more).
    - ``tool_delay``: seconds before a tool call is answered with ``send_tool_result``;
      ``tool_response`` makes the response (default ``{"result": "<name> done"}``);
      ``answer_tools=False`` leaves tool calls unanswered.
    - ``first_seq``: the first microphone sequence number (keep callers sharing an emulator
      apart).

    Construct it before ``connect`` to record the first session; callbacks already set on the
    transport are chained, and restored by ``aclose``. Use ``async with`` or call ``aclose``.
    """

    def __init__(
        self,
        transport: CallerTransport,
        *,
        chunk_ms: int = 20,
        rate: int = USER_RATE,
        pace: float = 1.0,
        turn_silence: float = 0.5,
        tool_delay: float = 0.0,
        tool_response: ToolResponder | None = None,
        answer_tools: bool = True,
        first_seq: int = 0,
    ) -> None:
        if not 1 <= chunk_ms <= 10_000:
            raise ValueError(f"chunk_ms must be between 1 and 10000, not {chunk_ms!r}")
        for name, value in (("pace", pace), ("turn_silence", turn_silence)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if not pace > 0:
            raise ValueError("pace must be > 0")
        if isinstance(rate, bool) or not isinstance(rate, int) or not 8_000 <= rate <= 48_000:
            raise ValueError(f"rate must be a sample rate between 8000 and 48000, not {rate!r}")
        if not (math.isfinite(tool_delay) and tool_delay >= 0):
            raise ValueError(f"tool_delay must be a finite number >= 0, not {tool_delay!r}")
        if not 0 <= first_seq < 2**32:
            raise ValueError("first_seq must fit in 32 bits")
        self._transport = transport
        self._chunk_ms = chunk_ms
        self._rate = rate
        self._interval = chunk_ms / 1000 * pace
        self._silence_chunks = math.ceil(turn_silence * 1000 / chunk_ms)
        self._tool_delay = tool_delay
        self._tool_response = tool_response or _default_response
        self._answer_tools = answer_tools
        self._next_seq = first_seq
        self.record = CallerRecord()
        """What the caller did and saw so far."""
        self._changed = asyncio.Event()
        self._listeners: list[Callable[[CallerEvent], None]] = []
        self._queue: deque[Utterance] = deque()
        self._speaking: Utterance | None = None
        self._silence_left = 0
        self._failing = False
        self._microphone: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._cancelled_calls: set[str] = set()
        self._closed = False
        self._installed: dict[str, tuple[Callable[..., None], Callable[..., None] | None]] = {}
        self._install_callbacks()

    def __repr__(self) -> str:
        return (
            f"ScriptedCaller(sessions={len(self.record.session_ids)}, "
            f"audio={len(self.record.audio)}, moves={len(self.record.moves)})"
        )

    async def __aenter__(self) -> ScriptedCaller:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- driving ------------------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        """The microphone is sending."""
        return self._microphone is not None and not self._microphone.done()

    def start_microphone(self) -> None:
        """Start streaming: silence, and the queued utterances in turn. Idempotent."""
        if self._closed:
            raise RuntimeError("the caller is closed")
        if not self.streaming:
            self._microphone = asyncio.get_running_loop().create_task(
                self._stream(), name="scripted-caller-microphone"
            )
            self._microphone.add_done_callback(self._task_done)

    async def stop_microphone(self) -> None:
        """Stop streaming (an utterance being spoken is cut where it is)."""
        task, self._microphone = self._microphone, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def say(self, words: Sequence[str] | str, *, speech_chunks: int | None = None) -> Utterance:
        """Queue an utterance on the microphone: ``speech_chunks`` chunks of speech (at least
        one per word, the default), carrying ``words`` one per chunk from the first.

        Returns its record at once; ``wait_spoken`` waits until it was sent. The microphone
        must be streaming.
        """
        if not self.streaming:
            raise RuntimeError("start the microphone before speaking")
        spoken = (words,) if isinstance(words, str) else tuple(words)
        chunks = len(spoken) if speech_chunks is None else speech_chunks
        if chunks < max(1, len(spoken)):
            raise ValueError("an utterance needs at least one speech chunk per word (and one)")
        utterance = Utterance(len(self.record.utterances), spoken, chunks)
        self.record.utterances.append(utterance)
        self._queue.append(utterance)
        return utterance

    def type_text(self, text: str, *, via: Literal["live_text", "content"] = "live_text") -> bool:
        """Type ``text`` as a complete user turn (realtime text, or conversation content).
        Returns whether the transport accepted it."""
        turn = [ContentTurn("user", text)]
        accepted = False
        try:
            if via == "live_text":
                accepted = self._transport.send_live_text(turn)
                if not accepted:
                    self._send_failed("text", "send_live_text returned False")
            else:
                self._transport.send_content(turn, True)
                accepted = True
        except TransportError as error:
            self._send_failed("text", _describe(error))
        now = self._now()
        self.record.typed.append((now, text, accepted))
        self._event("typed", f"{text!r}{'' if accepted else ' (refused)'}")
        return accepted

    async def ask(
        self,
        words: Sequence[str] | str,
        *,
        speech_chunks: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Utterance:
        """Say ``words`` and wait until an answer that began after the utterance started has
        ended complete."""
        utterance = self.say(words, speech_chunks=speech_chunks)
        await self.wait_spoken(utterance, timeout=timeout)
        assert utterance.started_at is not None
        started = utterance.started_at
        await self.wait_until(
            lambda r: r.answered_since(started),
            timeout=timeout,
            what=f"an answer to utterance {utterance.index}",
        )
        return utterance

    async def ask_typed(self, text: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Type ``text`` and wait until an answer that began after it has ended complete."""
        start = self._now()
        if not self.type_text(text):
            raise TransportError(f"the transport refused the typed text {text!r}")
        await self.wait_until(
            lambda r: r.answered_since(start), timeout=timeout, what=f"an answer to {text!r}"
        )

    # --- waiting ------------------------------------------------------------------------------

    async def wait_until(
        self,
        predicate: Callable[[CallerRecord], bool],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        what: str = "the condition",
    ) -> None:
        """Wait until ``predicate(record)`` holds; TimeoutError after ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                while not predicate(self.record):
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise TimeoutError(f"{self!r}: no {what} within {timeout} s") from None

    async def wait_spoken(
        self, utterance: Utterance, *, chunks: int | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """Wait until ``chunks`` (default: all) of the utterance's speech chunks were sent."""
        wanted = utterance.speech_chunks if chunks is None else chunks
        await self.wait_until(
            lambda _: len(utterance.seqs) >= wanted,
            timeout=timeout,
            what=f"{wanted} chunk(s) of utterance {utterance.index}",
        )

    async def wait_moves(self, count: int, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until ``count`` moves reported their outcome."""
        await self.wait_until(
            lambda r: len(r.moves) >= count, timeout=timeout, what=f"{count} move outcome(s)"
        )

    def add_listener(self, listener: Callable[[CallerEvent], None]) -> Callable[[], None]:
        """Call ``listener`` with every event as it is recorded (from the callback that
        caused it). Returns a function that removes it."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    # --- results ------------------------------------------------------------------------------

    def summary(self) -> CallerSummary:
        """Figures of the record so far."""
        r = self.record
        answers = tuple(
            AnswerSeen(sid, turn, tuple(sorted(set(chunks))), len(chunks) - len(set(chunks)))
            for (sid, turn), chunks in sorted(r.answer_chunks.items())
        )
        ends = Counter(str(s.reason) for s in r.generations.values() if s.reason is not None)
        tool_outcomes = Counter(answer.outcome for answer in r.tool_answers)
        return CallerSummary(
            sessions=tuple(dict.fromkeys(r.session_ids)),
            audio_accepted=tuple(a.seq for a in r.audio),
            audio_refused=len(r.audio_refused),
            utterances=len(r.utterances),
            typed=len(r.typed),
            answers=answers,
            generations=len(r.generations),
            generation_ends=dict(ends),
            unpaired_generations=tuple(
                gid for gid, span in r.generations.items() if not span.paired
            ),
            turns_completed=len(r.turn_completes),
            interruptions=len(r.interruptions),
            tool_calls=len(r.tool_calls),
            tool_results_sent=tool_outcomes["sent"],
            tool_results_refused=tool_outcomes["refused"],
            tool_results_skipped=tool_outcomes["skipped"],
            go_aways=len(r.go_aways),
            moves_started=len(r.moves_started),
            moves=tuple(r.moves),
            closes=len(r.closes),
            errors=len(r.errors),
            send_failures=r.send_failure_count,
        )

    async def aclose(self) -> None:
        """Stop the microphone and pending tool answers, and give the transport back its
        own callbacks. Call it after the transport's ``disconnect`` to record the callbacks
        that makes. Idempotent."""
        self._closed = True
        await self.stop_microphone()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for name, (ours, previous) in self._installed.items():
            if getattr(self._transport, name, None) is ours:
                setattr(self._transport, name, previous)
        self._installed.clear()

    # --- the microphone -----------------------------------------------------------------------

    async def _stream(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            self._send_chunk()
            next_at += self._interval
            delay = next_at - loop.time()
            if delay < -10 * self._interval:
                # Far behind (a stalled loop): a microphone does not send a backlog in a burst.
                next_at = loop.time()
            await asyncio.sleep(max(0.0, delay))

    def _send_chunk(self) -> None:
        utterance = self._speaking
        if utterance is None and self._silence_left <= 0 and self._queue:
            utterance = self._speaking = self._queue.popleft()
            utterance.started_at = self._now()
            self._event("utterance", " ".join(utterance.words) or "(no words)")
        seq = self._next_seq
        self._next_seq = (seq + 1) % 2**32
        if utterance is not None:
            position = len(utterance.seqs)
            word = utterance.words[position] if position < len(utterance.words) else None
            data = user_audio(seq, speech=True, ms=self._chunk_ms, word=word, rate=self._rate)
            utterance.seqs.append(seq)
            if utterance.spoken:
                utterance.finished_at = self._now()
                self._speaking = None
                self._silence_left = self._silence_chunks
                self._event("utterance_spoken", f"utterance {utterance.index}")
        else:
            data = user_audio(seq, speech=False, ms=self._chunk_ms, rate=self._rate)
            self._silence_left = max(0, self._silence_left - 1)
        try:
            self._transport.send_audio(data)
        except TransportError as error:
            self.record.audio_refused.append(seq)
            self._send_failed("audio", _describe(error))
        else:
            self._failing = False
            self.record.audio.append(SentAudio(seq, self._now(), utterance is not None))
        self._touch()

    def _send_failed(self, what: Literal["audio", "text", "tool_result"], error: str) -> None:
        r = self.record
        r.send_failure_count += 1
        if len(r.send_failures) < _MAX_FAILURES_KEPT:
            r.send_failures.append(SendFailure(self._now(), what, error))
        # A refusing transport refuses every chunk: report the first of a run only.
        if what != "audio" or not self._failing:
            self._event("send_failed", f"{what}: {error}")
        if what == "audio":
            self._failing = True

    # --- tool calls ---------------------------------------------------------------------------

    async def _answer_tool(self, call: ToolCall) -> None:
        if self._tool_delay:
            await asyncio.sleep(self._tool_delay)
        if call.id in self._cancelled_calls:
            self._tool_answered(ToolAnswer(call.id, call.name, self._now(), "skipped"))
            return
        result = ToolResult(call.id, call.name, dict(self._tool_response(call)))
        try:
            self._transport.send_tool_result(result)
        except TransportError as error:
            self._send_failed("tool_result", _describe(error))
            answer = ToolAnswer(call.id, call.name, self._now(), "refused", _describe(error))
        else:
            answer = ToolAnswer(call.id, call.name, self._now(), "sent")
        self._tool_answered(answer)

    def _tool_answered(self, answer: ToolAnswer) -> None:
        self.record.tool_answers.append(answer)
        self._event("tool_result", f"{answer.name} {answer.call_id} {answer.outcome}")

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.opt(exception=task.exception()).error("scripted caller: a task failed")

    # --- what the transport reports -----------------------------------------------------------

    def _install_callbacks(self) -> None:
        handlers: dict[str, Callable[..., None]] = {
            "on_session_ready": self._on_session_ready,
            "on_audio_output": self._on_audio_output,
            "on_text_output": self._on_text_output,
            "on_input_transcription": self._on_input_transcription,
            "on_generation_start": self._on_generation_start,
            "on_generation_end": self._on_generation_end,
            "on_turn_complete": self._on_turn_complete,
            "on_interrupted": self._on_interrupted,
            "on_tool_call": self._on_tool_call,
            "on_tool_call_cancel": self._on_tool_call_cancel,
            "on_go_away": self._on_go_away,
            "on_resumption_update": self._on_resumption_update,
            "on_move_started": self._on_move_started,
            "on_move": self._on_move,
            "on_close": self._on_close,
            "on_error": self._on_error,
        }
        for name, handler in handlers.items():
            previous = getattr(self._transport, name, None)
            chained = _chain(handler, previous)
            setattr(self._transport, name, chained)
            self._installed[name] = (chained, previous)

    def _on_session_ready(self, session_id: str) -> None:
        if self.record.session_id != session_id:
            self.record.session_ids.append(session_id)
        self._event("session", session_id)

    def _on_audio_output(self, data: bytes) -> None:
        self._answer_ids(answer_chunk_ids(data))

    def _on_text_output(self, text: str) -> None:
        self._answer_ids(answer_text_ids(text))

    def _answer_ids(self, ids: Iterable[tuple[int, int]]) -> None:
        session = self.record.session_id or ""
        found = False
        for turn, chunk in ids:
            found = True
            self.record.answer_chunks.setdefault((session, turn), []).append(chunk)
            self._event("answer_chunk", f"{turn}.{chunk}", turn=turn, chunk=chunk)
        if not found:
            self.record.foreign_outputs += 1
            self._touch()

    def _on_input_transcription(self, text: str) -> None:
        self.record.input_transcript.append(text)
        self._event("transcript", text)

    def _on_generation_start(self, generation_id: str) -> None:
        span = self.record.generations.get(generation_id)
        if span is None:
            span = self.record.generations[generation_id] = GenerationSpan(
                generation_id, self._now()
            )
        span.starts += 1
        self._event("generation_start", generation_id)

    def _on_generation_end(self, generation_id: str, reason: GenerationEndReason) -> None:
        span = self.record.generations.get(generation_id)
        if span is None:
            span = self.record.generations[generation_id] = GenerationSpan(generation_id, None)
        span.ends += 1
        span.ended_at = self._now()
        span.reason = reason
        self._event("generation_end", f"{generation_id} {reason}")

    def _on_turn_complete(self, server_turn_id: int | None) -> None:
        self.record.turn_completes.append(server_turn_id)
        self._event("turn_complete", f"server turn {server_turn_id}", turn=server_turn_id)

    def _on_interrupted(self, server_turn_id: int | None) -> None:
        self.record.interruptions.append(server_turn_id)
        self._event("interrupted", f"server turn {server_turn_id}", turn=server_turn_id)

    def _on_tool_call(self, calls: Sequence[ToolCall]) -> None:
        for call in calls:
            self.record.tool_calls.append(call)
            self._event("tool_call", f"{call.name} {call.id}")
            if self._answer_tools and not self._closed:
                self._spawn(self._answer_tool(call), f"scripted-caller-tool-{call.id}")

    def _on_tool_call_cancel(self, ids: Sequence[str]) -> None:
        self._cancelled_calls.update(ids)
        self.record.tool_cancellations.extend(ids)
        self._event("tool_cancel", " ".join(ids))

    def _on_go_away(self, raw: str | None, seconds: float | None) -> None:
        self.record.go_aways.append((self._now(), seconds))
        self._event("go_away", f"time left {raw if raw is not None else 'not given'}")

    def _on_resumption_update(
        self, handle: str | None, resumable: bool, last_consumed_index: int | None
    ) -> None:
        seen = ResumptionSeen(self._now(), handle is not None, resumable, last_consumed_index)
        self.record.resumption_updates.append(seen)
        self._event(
            "resumption",
            f"{'handle' if handle is not None else 'no handle'}, "
            f"{'resumable' if resumable else 'not resumable'}",
        )

    def _on_move_started(self, reason: MoveReason, handle_kind: HandleKind) -> None:
        self.record.moves_started.append(MoveStarted(self._now(), reason, handle_kind))
        self._event("move_started", f"{reason} from a {handle_kind} handle")

    def _on_move(self, report: MoveReport) -> None:
        self.record.moves.append(report)
        self._event(
            "move",
            f"#{report.number} {report.reason} {report.outcome}, gap {report.gap_ms:.1f} ms, "
            f"{report.attempts} attempt(s), replayed {report.messages_replayed}, "
            f"audio dropped {report.audio_chunks_dropped}",
        )

    def _on_close(self, code: int | None, reason: str | None) -> None:
        self.record.closes.append((self._now(), code, reason))
        self._event("close", f"{code} {reason or ''}".rstrip())

    def _on_error(self, event: TransportErrorEvent) -> None:
        self.record.errors.append((self._now(), event))
        self._event(
            "error",
            f"{_describe(event.error)} ({'recoverable' if event.recoverable else 'fatal'})",
        )

    # --- plumbing -----------------------------------------------------------------------------

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _touch(self) -> None:
        self._changed.set()

    def _event(
        self, kind: EventKind, detail: str, *, turn: int | None = None, chunk: int | None = None
    ) -> None:
        event = CallerEvent(self._now(), kind, detail, turn, chunk)
        self.record.events.append(event)
        self._touch()
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                logger.exception("scripted caller: a listener raised")


def _chain(
    handler: Callable[..., None], previous: Callable[..., None] | None
) -> Callable[..., None]:
    if previous is None:
        return handler

    def chained(*args: Any) -> None:
        handler(*args)
        previous(*args)

    return chained


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
