"""LiveKit's input frames as the 16 kHz mono PCM16 Gemini Live takes."""

from __future__ import annotations

import numpy as np
from livekit import rtc

INPUT_SAMPLE_RATE = 16_000


class InputAudio:
    """Downmixes and resamples input frames; a 16 kHz mono frame passes through untouched."""

    def __init__(self) -> None:
        self._resampler: rtc.AudioResampler | None = None
        self._rate = 0

    def convert(self, frame: rtc.AudioFrame) -> list[bytes]:
        """The PCM of ``frame`` at 16 kHz mono (a resampler may hold some back)."""
        if frame.num_channels != 1:
            samples = np.frombuffer(frame.data, dtype=np.int16).reshape(-1, frame.num_channels)
            mono = samples.mean(axis=1).astype(np.int16)
            frame = rtc.AudioFrame(
                data=mono.tobytes(),
                sample_rate=frame.sample_rate,
                num_channels=1,
                samples_per_channel=len(mono),
            )
        if frame.sample_rate == INPUT_SAMPLE_RATE:
            return [frame.data.tobytes()]
        if self._resampler is None or self._rate != frame.sample_rate:
            self._rate = frame.sample_rate
            self._resampler = rtc.AudioResampler(
                input_rate=frame.sample_rate, output_rate=INPUT_SAMPLE_RATE, num_channels=1
            )
        return [f.data.tobytes() for f in self._resampler.push(frame) if f.samples_per_channel]

