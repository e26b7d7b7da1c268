"""The scripted call every stack gets: what the caller says, when, and what it hears.

The caller is the same for every stack: a microphone streaming numbered 20 ms chunks in real
time (``ScriptedCaller``, speaking into the stack's audio input), and an ear that decodes the
emulator's answer-chunk ids from what the stack's audio output plays, in real time. The
``Conductor`` walks the script and injects the faults on the stack's own emulator; the moments
it waits for are read from that emulator's ledger, so each stack meets every fault at the same
point of its own conversation (the question "during the move" is asked a second into the
replacement connection's setup, whenever that stack dials it).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from realtime_resumption.testing.emulator import Emulator, answer_chunk_ids
from realtime_resumption.testing.emulator.audio import USER_RATE
from realtime_resumption.testing.emulator.caller import (
    CallerRecord,
    ScriptedCaller,
    SentAudio,
    Utterance,
)
from realtime_resumption.testing.emulator.ledger import SessionRecord
from realtime_resumption.transport import ContentTurn, ToolResult

INSTRUCTIONS = "You are a friendly assistant on a phone call."

MIC_CHUNK = 0.02
"""Seconds of audio in each microphone chunk."""
# Audio younger than this may still be on its way: not counted as lost while the call runs.
_LOSS_HORIZON = 1.5
# Bytes of an answer-chunk header less one: a header split between two played pieces is
# found by searching the end of the previous piece with the next one.
_HEADER_CARRY = 51


def weather(city: str | None) -> dict[str, str]:
    """The one tool every stack declares (``get_weather``). The emulator calls it by name,
    with no arguments."""
    return {"city": city or "Paris", "forecast": "sunny, 21 °C"}


@dataclass(frozen=True)
class Plan:
    """The script's timings, in seconds. ``Plan()`` is ``make demo``'s call."""

    notice: float = 10.0
    """goAway ``timeLeft``: the connection closes this long after the goAway."""
    slow_setup: float = 4.0
    """How long the replacement connection takes to set up."""
    question_into_move: float = 1.0
    """The question during the move starts this long after the replacement was dialled."""
    answer_chunks: int = 50
    """Chunks per answer (40 ms each: a 2 s answer)."""
    go_away_chunk: int = 15
    """The goAway comes after this chunk of the long answer."""
    speech: float = 0.8
    """Seconds of speech per question."""
    pause: float = 0.6
    """Silence between an answer and the next question."""
    answer_timeout: float = 8.0
    """How long a question waits for its answer before the script goes on."""
    settle_timeout: float = 20.0
    """How long the script waits for a connection to come back."""
    at_rest: bool = True
    """Ask the questions before the tool call (a shorter script skips them)."""


Phase = Literal[
    "at_rest",
    "tool",
    "go_away",
    "during_move",
    "after_move",
    "across_cap",
    "after_cap",
    "after_drop",
    "final",
]


@dataclass(frozen=True)
class Question:
    """One scripted question; ``key`` finds the emulator's answer turn for it."""

    words: tuple[str, ...]
    phase: Phase

    @property
    def key(self) -> str:
        return self.words[-1]


HELLO = Question(("hello", "there"), "at_rest")
WEATHER_Q = Question(("what", "is", "the", "get_weather", "in", "paris"), "tool")
STORY = Question(("tell", "me", "a", "long", "story"), "go_away")
DURING_MOVE = Question(("and", "what", "about", "tomorrow"), "during_move")
AFTER_MOVE = Question(("how", "about", "lisbon"), "after_move")
AFTER_DROP = Question(("one", "more", "thing"), "after_drop")
FINAL = Question(("that", "is", "all", "goodbye"), "final")


class AudioSink(Protocol):
    """Where the caller's microphone goes: the stack's audio input."""

    def push_audio(self, pcm: bytes) -> None:
        """Take one 20 ms chunk of 16 kHz PCM16 mono."""


class Microphone:
    """``ScriptedCaller``'s transport side, reduced to the one thing a framework input takes.

    The caller never types nor answers tools here: the stack under test runs its own tool.
    """

    def __init__(self, sink: AudioSink) -> None:
        self._sink = sink

    def send_audio(self, audio: bytes) -> None:
        self._sink.push_audio(audio)

    def send_live_text(self, turns: Sequence[ContentTurn]) -> bool:
        raise NotImplementedError("the demo's caller only speaks")

    def send_content(self, turns: Sequence[ContentTurn], turn_complete: bool = True) -> None:
        raise NotImplementedError("the demo's caller only speaks")

    def send_tool_result(self, result: ToolResult) -> None:
        raise NotImplementedError("the stack answers its own tool calls")


@dataclass(frozen=True)
class Heard:
    """One answer chunk the caller heard: when its piece began to play."""

    at: float
    turn: int
    chunk: int


class Ear:
    """What the caller heard, from the stack's audio output as it plays.

    Times are seconds since the call's emulator started (the ledger's clock). ``pace`` is
    wall-clock seconds per second of audio: 1.0 plays in real time (the demo), more plays a
    time-scaled call's answers as slowly as its emulator sends them.
    """

    def __init__(self, clock: Callable[[], float], pace: float = 1.0) -> None:
        if not (math.isfinite(pace) and pace > 0):
            raise ValueError(f"pace must be a finite number > 0, not {pace!r}")
        self._clock = clock
        self._pace = pace
        self._carry = b""
        self.chunks: list[Heard] = []
        self.spans: list[tuple[float, float]] = []
        """(start, end) of the answer audio played, merged when contiguous."""

    def play(self, pcm: bytes, rate: int) -> float:
        """Record ``pcm`` (PCM16 mono at ``rate``) starting to play now; returns how long it
        plays (its duration times ``pace``)."""
        now = self._clock()
        duration = len(pcm) / (2 * rate) * self._pace
        for turn, chunk in answer_chunk_ids(self._carry + pcm):
            self.chunks.append(Heard(now, turn, chunk))
        self._carry = pcm[-_HEADER_CARRY:]
        if self.spans and now - self.spans[-1][1] < 0.03:
            self.spans[-1] = (self.spans[-1][0], now + duration)
        else:
            self.spans.append((now, now + duration))
        return duration

    def interrupted(self) -> None:
        """Playback was cleared: the next piece does not continue this one."""
        self._carry = b""


@dataclass
class Mark:
    """Something the script did or saw, for the display and the timeline."""

    at: float
    kind: str
    text: str
    value: float | None = None
    """``lost_audio``: seconds of user audio lost so far."""


@dataclass
class Asked:
    """A question as it was asked and answered."""

    question: Question
    utterance: Utterance
    spoken_at: float | None = None
    """When its last speech chunk went to the stack (ledger clock)."""
    first_heard_at: float | None = None
    """When the caller first heard its answer (None: never)."""

    @property
    def delay(self) -> float | None:
        """From the end of the question to its answer heard (None: never answered)."""
        if self.spoken_at is None or self.first_heard_at is None:
            return None
        return self.first_heard_at - self.spoken_at


@dataclass
class CallRecord:
    """Everything one stack's call produced, besides the emulator's ledger."""

    asked: list[Asked] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)
    """Errors the stack surfaced to the application."""
    closed: str | None = None
    """Set when the stack ended the call itself (a fatal error)."""


class StackIO(Protocol):
    """What the conductor needs from a running stack."""

    def push_audio(self, pcm: bytes) -> None:
        """The caller's microphone chunk into the stack's audio input."""


class Pacing(Protocol):
    """The timings every script shares (``Plan``, ``OpenAIPlan``)."""

    @property
    def speech(self) -> float: ...
    @property
    def pause(self) -> float: ...
    @property
    def answer_timeout(self) -> float: ...
    @property
    def settle_timeout(self) -> float: ...


class LedgerView(Protocol):
    """What the conductor reads of its emulator's ledger while the call runs."""

    def connected_since(self, since: float) -> bool:
        """A connection was set up at or after ``since`` (ledger clock)."""

    def answer_turns(self, key: str) -> set[int]:
        """The answer turns (answer-chunk ids' turn numbers) that answer a question whose
        words end with ``key``."""

    def answer_running(self, key: str) -> bool:
        """An answer to that question is still being produced."""

    def audio_lost(self, sent: Sequence[SentAudio]) -> list[SentAudio]:
        """Of the microphone chunks ``sent``, those the service does not hold."""

    def notes(self) -> list[tuple[tuple[str, ...], str, str]]:
        """(key, mark kind, text) of what the ledger shows so far: connections, closes,
        refusals, cut answers; the same key for the same fact on each call."""


class Conductor:
    """Walks a script on one stack and reads its own emulator's ledger through ``view``;
    ``_script`` is the call (``GeminiConductor``, ``OpenAIConductor``)."""

    def __init__(
        self,
        view: LedgerView,
        clock: Callable[[], float],
        plan: Pacing,
        record: CallRecord,
        ear: Ear,
        on_mark: Callable[[Mark], None],
        *,
        rate: int = USER_RATE,
    ) -> None:
        self._view = view
        self._clock = clock
        self._pacing = plan
        self.record = record
        self._ear = ear
        self._on_mark = on_mark
        self._rate = rate
        self._caller: ScriptedCaller | None = None

    @property
    def caller(self) -> ScriptedCaller:
        """The microphone (while ``run`` runs)."""
        assert self._caller is not None
        return self._caller

    @property
    def microphone(self) -> CallerRecord:
        """What the microphone sent (empty if the call never started)."""
        return self._caller.record if self._caller is not None else CallerRecord()

    def mark(self, kind: str, text: str, value: float | None = None) -> None:
        """Note something for the display and the picture."""
        mark = Mark(self._clock(), kind, text, value)
        self.record.marks.append(mark)
        self._on_mark(mark)

    # --- the ledger, read live ---------------------------------------------------------------

    def _answered(self, asked: Asked) -> bool:
        """Some chunk of an answer to ``asked`` was heard."""
        turns = self._view.answer_turns(asked.question.key)
        for heard in self._ear.chunks:
            if heard.turn in turns and (asked.spoken_at is None or heard.at >= asked.spoken_at):
                asked.first_heard_at = heard.at
                return True
        return False

    def _answer_over(self, asked: Asked) -> bool:
        """The answer to ``asked`` ended (its turns are over) and nothing played for 0.3 s."""
        running = self._view.answer_running(asked.question.key)
        quiet = not self._ear.spans or self._clock() - self._ear.spans[-1][1] > 0.3
        return not running and quiet

    def _answer_quiet(self) -> bool:
        return not self._ear.spans or self._clock() - self._ear.spans[-1][1] > 0.5

    async def _poll(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait (bounded) until ``predicate()`` holds; False on timeout."""
        try:
            async with asyncio.timeout(timeout):
                # The ledger and the ear tell no one when they change: sample them.
                while not predicate():  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
        except TimeoutError:
            return False
        return True

    # --- the script --------------------------------------------------------------------------

    async def ask(
        self, question: Question, *, wait: bool = True, speech: float | None = None
    ) -> Asked:
        """Say ``question`` (``speech`` seconds of it, else the plan's); with ``wait``, wait
        until its answer was heard and is over."""
        plan = self._pacing
        speech = plan.speech if speech is None else speech
        chunks = max(len(question.words), round(speech / MIC_CHUNK))
        utterance = self.caller.say(question.words, speech_chunks=chunks)
        asked = Asked(question, utterance)
        self.record.asked.append(asked)
        self.mark("ask", " ".join(question.words))
        await self.caller.wait_spoken(utterance, timeout=speech * 4 + 5)
        asked.spoken_at = self._clock()
        if wait:
            await self.answer(asked)
        return asked

    async def answer(self, asked: Asked) -> None:
        """Wait until ``asked`` is answered and the answer is over (bounded)."""
        timeout = self._pacing.answer_timeout
        if not await self._poll(lambda: self._answered(asked), timeout):
            self.mark("loss", f"no answer to {' '.join(asked.question.words)!r}")
            return
        await self._poll(lambda: self._answer_over(asked), timeout)

    async def run(self, stack: StackIO) -> None:
        """The whole call, from the first connection to the last answer."""
        watcher = asyncio.create_task(self._watch(), name="demo-ledger-watch")
        try:
            await self._script(stack)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            if self._caller is not None:
                await self._caller.aclose()

    async def _watch(self) -> None:
        """Marks what the ledger shows as it happens: attempts, closes, cut answers, and the
        user audio lost so far."""
        noted: set[tuple[str, ...]] = set()
        reported = 0.0
        while True:
            for key, kind, text in self._view.notes():
                if key not in noted:
                    noted.add(key)
                    self.mark(kind, text)
            lost = self._audio_lost_so_far()
            if lost > reported:
                reported = lost
                self.mark("lost_audio", f"{lost:.2f} s of user audio lost so far", lost)
            await asyncio.sleep(0.05)

    async def _script(self, stack: StackIO) -> None:
        """The call itself."""
        raise NotImplementedError

    async def _start_call(self, stack: StackIO) -> ScriptedCaller | None:
        """Wait for the first connection, then start the microphone and let a greeting play
        out; None if the stack never connected."""
        plan = self._pacing
        if not await self._poll(lambda: self._view.connected_since(0.0), plan.settle_timeout):
            self.mark("loss", "never connected")
            return None
        caller = ScriptedCaller(Microphone(stack), turn_silence=0.0, rate=self._rate)
        self._caller = caller
        caller.start_microphone()
        # A greeting, if the stack makes one, plays out before the first question.
        await asyncio.sleep(plan.pause * 2)
        await self._poll(self._answer_quiet, plan.answer_timeout)
        return caller

    def _audio_lost_so_far(self) -> float:
        """Seconds of microphone audio sent over a second ago that no session holds."""
        if self._caller is None:
            return 0.0
        horizon = asyncio.get_running_loop().time() - _LOSS_HORIZON
        sent = [a for a in self._caller.record.audio if a.at < horizon]
        return len(self._view.audio_lost(sent)) * MIC_CHUNK


class GeminiLedgerView:
    """The Gemini emulator's ledger, as the conductor reads it."""

    def __init__(self, emulator: Emulator) -> None:
        self._emu = emulator
        # Only the messages not looked at yet: a connection sends thousands.
        self._scanned: dict[tuple[str, str], int] = {}
        self._go_aways: set[tuple[str, str]] = set()

    def _sessions(self) -> list[SessionRecord]:
        return list(self._emu.ledger.sessions.values())

    def connected_since(self, since: float) -> bool:
        return any(
            c.established and c.setup_at is not None and c.setup_at >= since
            for s in self._sessions()
            for c in s.connections
        )

    def answer_turns(self, key: str) -> set[int]:
        return {
            t.turn for s in self._sessions() for t in s.turns.values() if key in t.user_text.split()
        }

    def answer_running(self, key: str) -> bool:
        return any(
            t.outcome == "running"
            for s in self._sessions()
            for t in s.turns.values()
            if key in t.user_text.split()
        )

    def audio_lost(self, sent: Sequence[SentAudio]) -> list[SentAudio]:
        kept = {seq for s in self._sessions() for seq in s.audio_consumed}
        return [a for a in sent if a.seq not in kept]

    def notes(self) -> list[tuple[tuple[str, ...], str, str]]:
        notes: list[tuple[tuple[str, ...], str, str]] = []
        for i, attempt in enumerate(self._emu.ledger.attempts):
            if attempt.outcome != "accepted":
                notes.append(
                    (("attempt", str(i)), "refused", f"attempt refused ({attempt.outcome})")
                )
        for session in self._sessions():
            sid = session.session_id
            for c in session.connections:
                key = (sid, str(c.index))
                if c.established:
                    how = "resumed" if c.resumed_from is not None else "new session"
                    notes.append(((*key, "up"), "connect", f"connection {c.index} up ({how})"))
                elif c.refused is not None:
                    notes.append(
                        ((*key, "refused"), "refused", f"connection refused ({c.refused})")
                    )
                seen = self._scanned.get(key, 0)
                self._scanned[key] = len(c.server_messages)
                if any(m.kind == "go_away" for m in c.server_messages[seen:]):
                    self._go_aways.add(key)
                if key in self._go_aways:
                    notes.append(((*key, "go_away"), "go_away", "goAway"))
                if c.closed_at is not None:
                    notes.append(
                        ((*key, "closed"), "close", f"connection {c.index} closed {c.close_code}")
                    )
            for t in session.turns.values():
                if t.outcome == "cut":
                    notes.append(((sid, "cut", str(t.turn)), "loss", f"answer {t.turn} cut"))
        return notes


class GeminiConductor(Conductor):
    """``make demo``'s call on a stack and its Gemini emulator: the questions, the tool call,
    the rotation with a slow replacement and a question during it, the refused drop."""

    def __init__(
        self,
        emulator: Emulator,
        clock: Callable[[], float],
        plan: Plan,
        record: CallRecord,
        ear: Ear,
        on_mark: Callable[[Mark], None],
    ) -> None:
        super().__init__(GeminiLedgerView(emulator), clock, plan, record, ear, on_mark)
        self._emu = emulator
        self._plan = plan

    async def _script(self, stack: StackIO) -> None:
        plan, faults = self._plan, self._emu.faults
        caller = await self._start_call(stack)
        if caller is None:
            return
        if plan.at_rest:
            await self.ask(HELLO)
            await asyncio.sleep(plan.pause)
        await self.ask(WEATHER_Q)
        await asyncio.sleep(plan.pause)
        await self._rotation()
        await asyncio.sleep(plan.pause)
        await self.ask(AFTER_MOVE)
        await asyncio.sleep(plan.pause)
        faults.refuse_next(1, how="http503")
        faults.drop()
        self.mark("drop", "connection dropped; the next attempt is refused")
        await asyncio.sleep(plan.pause)
        await self.ask(AFTER_DROP)
        await asyncio.sleep(plan.pause)
        await self.ask(FINAL)
        await asyncio.sleep(plan.pause)
        await caller.stop_microphone()

    async def _end_life_at(self, chunk: int) -> None:
        """Once chunk ``chunk`` of the answer to the long story was sent, end the connection's
        life: its deadline close, no goAway."""
        ledger = self._emu.ledger

        def story_at_chunk() -> bool:
            return any(
                STORY.key in t.user_text.split() and t.produced > chunk
                for s in ledger.sessions.values()
                for t in s.turns.values()
            )

        if not await self._poll(story_at_chunk, self._plan.answer_timeout):
            self.mark("loss", "the long story never reached the end of its connection")
            return
        await self._emu.faults.deadline_close()
        self.mark("deadline", "the connection's life ended: closed, no goAway")

    async def _rotation(self) -> None:
        """The long answer, the end of its connection in its middle, a slow replacement, a
        question during it.

        The connection ends as the call's service ends one: a goAway with ``plan.notice``, or,
        on a service whose connections end without one (``rotate_without_go_away``: the
        gemini-3.8-live profile, whose connections live 58 minutes), the deadline close alone
        at the same moment, the connection's life cut short to fit the call into a minute."""
        plan, faults, ledger = self._plan, self._emu.faults, self._emu.ledger
        without_notice = self._emu.config.rotate_without_go_away
        if not without_notice:
            faults.go_away_at(chunk=plan.go_away_chunk, time_left=plan.notice)
        faults.slow_setups(1, plan.slow_setup)
        attempts = len(ledger.attempts)
        asked_at = self._clock()
        story = await self.ask(STORY, wait=False)
        if without_notice:
            await self._end_life_at(plan.go_away_chunk)

        async def question_during_move() -> Asked | None:
            dialled = await self._poll(
                lambda: len(ledger.attempts) > attempts, plan.notice + plan.settle_timeout
            )
            if not dialled:
                self.mark("loss", "the connection was never replaced")
                return None
            self.mark("move", "replacement dialled")
            await asyncio.sleep(plan.question_into_move)
            return await self.ask(DURING_MOVE)

        during = asyncio.create_task(question_during_move(), name="demo-question-during-move")
        try:
            await self.answer(story)
            await during
        finally:
            during.cancel()
            await asyncio.gather(during, return_exceptions=True)
        await self._poll(lambda: self._view.connected_since(asked_at), plan.settle_timeout)
