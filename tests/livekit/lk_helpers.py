"""Offline LiveKit pieces for the plugin's tests: a real-time speaker, a paced microphone,
an event recorder, and the two models under comparison.

Everything runs in a real ``AgentSession`` with no room and no LiveKit server; the models talk
to the bundled emulator over TLS with the real google-genai SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from livekit import rtc
from livekit.agents import Agent, AgentSession, llm
from livekit.agents.voice.io import AudioInput, AudioOutput, AudioOutputCapabilities
from livekit.plugins import google
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.testing.emulator import Emulator, answer_chunk_id, user_audio
from realtime_resumption.testing.emulator.audio import USER_RATE

ModelKind = Literal["stock", "ours"]
WAIT = 10.0
"""Seconds any wait in these tests may take (wall clock)."""


def make_model(kind: ModelKind, emu: Emulator, **kwargs: Any) -> llm.RealtimeModel:
    """The stock Google model or ours, pointed at ``emu`` with the same arguments."""
    factory: Callable[..., llm.RealtimeModel] = (
        google.realtime.RealtimeModel if kind == "stock" else rr.RealtimeModel
    )
    return factory(api_key="test-key", http_options=emu.http_options(), **kwargs)


async def until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    """Wait (bounded) until ``predicate()`` holds."""
    # Polling: the conditions span the AgentSession, its history and the emulator's ledger,
    # none of which signals a change.
    async with asyncio.timeout(timeout):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


class Speaker(AudioOutput):
    """An audio sink that plays in real time: each frame takes its duration to play.

    ``clear_buffer`` stops at once (the rest of the segment is not heard). ``heard`` lists the
    emulator's (turn, chunk) ids of every frame that finished playing.
    """

    def __init__(self) -> None:
        super().__init__(label="test-speaker", capabilities=AudioOutputCapabilities(pause=False))
        self._frames: deque[rtc.AudioFrame] = deque()
        self._flushed = False
        self._position = 0.0
        self._player: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.heard: list[tuple[int, int]] = []
        self.cleared = 0
        self.playing = False

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if not self.playing:
            self.playing = True
            self._position = 0.0
            self._flushed = False
            self.on_playback_started(created_at=time.time())
        self._frames.append(frame)
        self._ensure_player()

    def flush(self) -> None:
        super().flush()
        if self.playing:
            self._flushed = True
            self._wake.set()

    def clear_buffer(self) -> None:
        self.cleared += 1
        self._frames.clear()
        if self.playing:
            self._finish(interrupted=True)

    def _finish(self, *, interrupted: bool) -> None:
        self.playing = False
        self._flushed = False
        self.on_playback_finished(playback_position=self._position, interrupted=interrupted)

    def _ensure_player(self) -> None:
        if self._player is None or self._player.done():
            self._player = asyncio.create_task(self._play())
        self._wake.set()

    async def _play(self) -> None:
        while True:
            if self._frames:
                frame = self._frames.popleft()
                await asyncio.sleep(frame.duration)
                if not self.playing:
                    continue
                self._position += frame.duration
                ident = answer_chunk_id(frame.data.tobytes())
                if ident is not None:
                    self.heard.append(ident)
            elif self.playing and self._flushed:
                self._finish(interrupted=False)
            else:
                self._wake.clear()
                try:
                    async with asyncio.timeout(1.0):
                        await self._wake.wait()
                except TimeoutError:
                    return

    async def aclose(self) -> None:
        if self._player is not None:
            self._player.cancel()
            await asyncio.wait({self._player})


@dataclass
class _Utterance:
    words: tuple[str, ...]
    speech_chunks: int
    spoken: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Microphone(AudioInput):
    """Streams 20 ms frames of mono audio at ``rate`` (16 kHz, Gemini's input rate, unless
    told) at ``pace`` (wall seconds per audio second: the emulator's ``time_scale``), silence
    between utterances. Every frame carries a seq number the emulator's ledger records; ``sent``
    lists them in order."""

    def __init__(self, pace: float, chunk_ms: int = 20, rate: int = USER_RATE) -> None:
        super().__init__(label="test-microphone")
        self._interval = chunk_ms / 1000 * pace
        self._chunk_ms = chunk_ms
        self._rate = rate
        self._queue: deque[_Utterance] = deque()
        self._seq = 0
        self._next_at: float | None = None
        self._closed = False
        self.sent: list[int] = []
        self.spoken: list[int] = []
        """The seqs of the speech frames captured so far."""

    def say(self, words: Iterable[str], *, speech_chunks: int = 8) -> asyncio.Event:
        """Queue an utterance; the event is set once its last chunk was captured."""
        utterance = _Utterance(tuple(words), speech_chunks)
        self._queue.append(utterance)
        return utterance.done

    def close(self) -> None:
        self._closed = True

    async def __anext__(self) -> rtc.AudioFrame:
        if self._closed:
            raise StopAsyncIteration
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._next_at = now if self._next_at is None else self._next_at + self._interval
        if self._next_at > now:
            await asyncio.sleep(self._next_at - now)
        else:
            self._next_at = now
        seq, self._seq = self._seq, self._seq + 1
        pcm = self._chunk(seq)
        self.sent.append(seq)
        samples = len(pcm) // 2
        return rtc.AudioFrame(pcm, self._rate, 1, samples)

    def _chunk(self, seq: int) -> bytes:
        if not self._queue:
            return user_audio(seq, speech=False, ms=self._chunk_ms, rate=self._rate)
        utterance = self._queue[0]
        spoken = utterance.spoken
        word = utterance.words[spoken] if spoken < len(utterance.words) else None
        utterance.spoken += 1
        if utterance.spoken >= max(utterance.speech_chunks, len(utterance.words)):
            self._queue.popleft()
            utterance.done.set()
        self.spoken.append(seq)
        return user_audio(seq, speech=True, ms=self._chunk_ms, word=word, rate=self._rate)


@dataclass
class Recorder:
    """The realtime session's events and the AgentSession's, as tests check them."""

    errors: list[llm.RealtimeModelError] = field(default_factory=list)
    reconnected: int = 0
    moves: list[rr.SessionMovedEvent] = field(default_factory=list)
    generations: int = 0
    speech_started: int = 0
    transcripts: list[llm.InputTranscriptionCompleted] = field(default_factory=list)
    metrics: list[Any] = field(default_factory=list)
    closed: list[Any] = field(default_factory=list)

    def attach(self, session: AgentSession) -> None:
        """Listen to ``session`` (its close) and, once started, its realtime session."""
        session.on("close", self.closed.append)

    def attach_realtime(self, rt: llm.RealtimeSession) -> None:
        rt.on("error", self.errors.append)
        rt.on("session_reconnected", self._reconnected)
        rt.on("session_moved", self.moves.append)
        rt.on("generation_created", self._generation)
        rt.on("input_speech_started", self._speech)
        rt.on("input_audio_transcription_completed", self.transcripts.append)
        rt.on("metrics_collected", self.metrics.append)

    @property
    def fatal_errors(self) -> list[llm.RealtimeModelError]:
        return [e for e in self.errors if not e.recoverable]

    def _reconnected(self, _: object) -> None:
        self.reconnected += 1

    def _generation(self, _: object) -> None:
        self.generations += 1

    def _speech(self, _: object) -> None:
        self.speech_started += 1


@dataclass
class VoiceCall:
    """An AgentSession with our model, a paced microphone and a real-time speaker."""

    session: AgentSession
    agent: Agent
    mic: Microphone
    speaker: Speaker
    recorder: Recorder

    @property
    def parts(self) -> CallParts:
        """Session, microphone, speaker and recorder."""
        return self.session, self.mic, self.speaker, self.recorder

    def messages(self, role: str | None = None) -> list[llm.ChatMessage]:
        """The session's history messages (of ``role``, if given)."""
        return [
            item
            for item in self.session.history.items
            if item.type == "message" and role in (None, item.role)
        ]

    async def settled(self, messages: int) -> None:
        """Wait until the history holds ``messages`` messages and the agent is silent."""
        await until(
            lambda: (
                len(self.messages()) >= messages
                and self.session.agent_state == "listening"
                and not self.speaker.playing
            )
        )


CallParts = tuple[AgentSession, Microphone, Speaker, Recorder]
"""A voice call's pieces, as the OpenAI tests unpack them: ``VoiceCall.parts``."""


@contextlib.asynccontextmanager
async def started_voice_call(
    model: llm.RealtimeModel, agent: Agent, *, pace: float, rate: int = USER_RATE
) -> AsyncIterator[VoiceCall]:
    """A started voice call on ``model``: a microphone paced at ``pace`` sending ``rate`` Hz
    audio, a real-time speaker and the recorder, closed on exit (microphone, session,
    speaker).

    The AgentSession runs with ``aec_warmup_duration=None``: during its echo-cancellation
    warmup LiveKit replaces the caller's audio with silence by design, which would hide the
    microphone's frame numbers from the ledger and the caller's words from the model.
    """
    call = VoiceCall(
        session=AgentSession(llm=model, aec_warmup_duration=None),
        agent=agent,
        mic=Microphone(pace=pace, rate=rate),
        speaker=Speaker(),
        recorder=Recorder(),
    )
    call.session.input.audio = call.mic
    call.session.output.audio = call.speaker
    call.recorder.attach(call.session)
    try:
        await call.session.start(agent)
        call.recorder.attach_realtime(agent.realtime_llm_session)
        yield call
    finally:
        call.mic.close()
        await call.session.aclose()
        await call.speaker.aclose()


@contextlib.asynccontextmanager
async def voice_call(
    emu: Emulator, agent: Agent, *, pace: float, kind: ModelKind = "ours", **model_kwargs: Any
) -> AsyncIterator[VoiceCall]:
    """A started voice call (``started_voice_call``) against ``emu`` with the ``kind`` model,
    made with ``model_kwargs``."""
    model = make_model(kind, emu, **model_kwargs)
    async with started_voice_call(model, agent, pace=pace) as call:
        yield call


def said(session: AgentSession, role: str) -> list[str]:
    """The texts of ``session``'s history messages of ``role``."""
    return [
        item.text_content or ""
        for item in session.history.items
        if item.type == "message" and item.role == role
    ]


async def hold_a_spoken_turn(
    session: AgentSession, mic: Microphone, speaker: Speaker, recorder: Recorder
) -> list[int]:
    """The caller says "hello livekit" to the OpenAI Realtime emulator (answering in four
    chunks): the speech is transcribed once, the answer is played out whole and kept in
    history, no error. Returns the microphone's speech frames."""
    mic.say(["hello", "livekit"])
    await until(lambda: len(speaker.heard) >= 4 and not speaker.playing)
    await until(lambda: len(said(session, "assistant")) >= 1)
    assert speaker.heard == [(1, k) for k in range(4)]
    assert [t.transcript for t in recorder.transcripts if t.is_final] == ["hello livekit"]
    assert "heard hello livekit" in said(session, "assistant")[0]
    assert not recorder.errors
    return list(mic.spoken)


@contextlib.asynccontextmanager
async def text_call(
    model: llm.RealtimeModel, agent: Agent | None = None
) -> AsyncIterator[tuple[AgentSession, Recorder]]:
    """A started AgentSession (no audio) with ``model`` and its recorder, closed on exit."""
    agent = agent or Agent(instructions="Be brief.")
    session = AgentSession(llm=model, aec_warmup_duration=None)
    recorder = Recorder()
    recorder.attach(session)
    try:
        await session.start(agent)
        recorder.attach_realtime(agent.realtime_llm_session)
        yield session, recorder
    finally:
        await session.aclose()
