"""LiveKit's input frames as mono PCM16 at the provider's rate (16 kHz for Gemini Live, 24 kHz
for OpenAI Realtime), in 50 ms chunks.

Chunks of 50 ms (as the Google plugin sends) cost a third of the messages 20 ms frames would,
for at most 30 ms of added delay while the microphone streams.
"""

from __future__ import annotations

import numpy as np
from livekit import rtc

INPUT_SAMPLE_RATE = 16_000


class InputAudio:
    """Downmixes, resamples and re-chunks input frames."""

    def __init__(self, rate: int = INPUT_SAMPLE_RATE) -> None:
        self._out_rate = rate
        self._chunk = rate // 20 * 2
        self._resampler: rtc.AudioResampler | None = None
        self._rate = 0
        self._pending = bytearray()

    def convert(self, frame: rtc.AudioFrame) -> list[bytes]:
        """The 50 ms chunks of mono audio that ``frame`` completes."""
        chunk = self._chunk
        for pcm in self._pcm(frame):
            self._pending += pcm
        if len(self._pending) < chunk:
            return []
        cut = len(self._pending) - len(self._pending) % chunk
        data = bytes(self._pending[:cut])
        del self._pending[:cut]
        return [data[i : i + chunk] for i in range(0, cut, chunk)]

    def _pcm(self, frame: rtc.AudioFrame) -> list[bytes]:
        if frame.num_channels != 1:
            samples = np.frombuffer(frame.data, dtype=np.int16).reshape(-1, frame.num_channels)
            mono = samples.mean(axis=1).astype(np.int16)
            frame = rtc.AudioFrame(
                data=mono.tobytes(),
                sample_rate=frame.sample_rate,
                num_channels=1,
                samples_per_channel=len(mono),
            )
        if frame.sample_rate == self._out_rate:
            return [frame.data.tobytes()]
        if self._resampler is None or self._rate != frame.sample_rate:
            self._rate = frame.sample_rate
            self._resampler = rtc.AudioResampler(
                input_rate=frame.sample_rate, output_rate=self._out_rate, num_channels=1
            )
        return [f.data.tobytes() for f in self._resampler.push(frame) if f.samples_per_channel]
