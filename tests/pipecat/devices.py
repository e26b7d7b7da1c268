"""A microphone and a speaker for the pipeline tests: Pipecat transports that stream numbered
user audio at the emulator's pace and play the answer in (scaled) real time."""

from __future__ import annotations

import asyncio
from collections import deque

from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    InputAudioRawFrame,
    OutputAudioRawFrame,
    StartFrame,
)
from pipecat.transports.base_input import BaseInputTransport
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams

from realtime_resumption.testing.emulator import user_audio

CHUNK_SECONDS = 0.02


class Microphone(BaseInputTransport):
    """Once ``open``, streams 20 ms chunks without a break, numbered from 1: silence, or the
    utterances ``say`` plans (speech chunks carrying the words the emulator recognises)."""

    def __init__(self, time_scale: float) -> None:
        super().__init__(TransportParams(audio_in_enabled=True, audio_in_sample_rate=16_000))
        self._pace = CHUNK_SECONDS * time_scale
        self._plan: deque[str | None] = deque()
        self._task: asyncio.Task[None] | None = None
        self.sent = 0
        """Chunks streamed so far (the last seq)."""
        self.spoken: list[int] = []
        """The seqs of the speech chunks streamed so far."""

    def say(self, words: list[str], chunks_per_word: int = 3) -> None:
        """Speak ``words`` next; silence follows (the emulator's VAD ends the turn)."""
        for word in words:
            self._plan.append(word)
            self._plan.extend([""] * (chunks_per_word - 1))

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    def open(self) -> None:
        """Start streaming (a service sends nothing before its first context: open it
        after)."""
        if self._task is None:
            self._task = self.create_task(self._stream(), "microphone")

    async def mute(self) -> None:
        """Stop streaming."""
        if self._task is not None:
            await self.cancel_task(self._task)
            self._task = None

    async def stop(self, frame: EndFrame) -> None:
        await self.mute()
        await super().stop(frame)

    async def cancel(self, frame: CancelFrame) -> None:
        await self.mute()
        await super().cancel(frame)

    async def _stream(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            word = self._plan.popleft() if self._plan else None
            self.sent += 1
            if word is not None:
                self.spoken.append(self.sent)
            audio = user_audio(self.sent, speech=word is not None, word=word or None)
            await self.push_audio_frame(
                InputAudioRawFrame(audio=audio, sample_rate=16_000, num_channels=1)
            )
            next_at += self._pace
            await asyncio.sleep(max(0.0, next_at - loop.time()))


class Speaker(BaseOutputTransport):
    """Plays 24 kHz audio in real time on the emulator's clock (duration × ``time_scale``)."""

    def __init__(self, time_scale: float) -> None:
        super().__init__(TransportParams(audio_out_enabled=True, audio_out_sample_rate=24_000))
        self._scale = time_scale
        self.played = bytearray()

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        self.played.extend(frame.audio)
        seconds = len(frame.audio) / (2 * frame.sample_rate * frame.num_channels)
        await asyncio.sleep(seconds * self._scale)
        return True
