"""User input on its way to the transport: audio resampled to 16 kHz mono, images as JPEG at
most once a second, and the checks that turn a malformed frame into a clear message.

Gemini Live takes 16 kHz mono PCM16 only; Pipecat's input transports deliver whatever the
device or the call gives (8 kHz telephony, 48 kHz WebRTC, stereo). ``AudioConverter`` downmixes
and resamples each stream with Pipecat's stream resampler, which keeps its filter state from
chunk to chunk (no clicks at the boundaries).
"""

from __future__ import annotations

import array
import io
import sys
from typing import Final

from PIL import Image
from pipecat.audio.resamplers.base_audio_resampler import BaseAudioResampler
from pipecat.audio.utils import create_stream_resampler
from pipecat.frames.frames import InputAudioRawFrame, InputImageRawFrame

TARGET_RATE: Final = 16_000
MIN_INPUT_RATE: Final = 8_000
MAX_INPUT_RATE: Final = 48_000
"""Input sample rates the service takes (Hz): telephony's 8 kHz to WebRTC's 48 kHz, the
range Pipecat's transports deliver and Gemini Live accepts."""
IMAGE_INTERVAL: Final = 1.0
"""Seconds between two images sent to the model (as the stock service does)."""


class MalformedInputError(ValueError):
    """An input frame the service cannot send; the message says what is wrong with it."""


def check_audio(frame: InputAudioRawFrame) -> None:
    """Raise ``MalformedInputError`` unless ``frame`` holds whole PCM16 frames at an int rate
    from ``MIN_INPUT_RATE`` to ``MAX_INPUT_RATE``."""
    audio = frame.audio
    if not isinstance(audio, (bytes, bytearray, memoryview)):
        raise MalformedInputError(
            f"InputAudioRawFrame.audio must be PCM16 bytes, not {type(audio).__name__}"
        )
    rate = frame.sample_rate
    if isinstance(rate, bool) or not isinstance(rate, int):
        raise MalformedInputError(
            f"InputAudioRawFrame.sample_rate must be an int (Hz), not {type(rate).__name__}"
        )
    if not MIN_INPUT_RATE <= rate <= MAX_INPUT_RATE:
        raise MalformedInputError(
            f"InputAudioRawFrame.sample_rate must be {MIN_INPUT_RATE}..{MAX_INPUT_RATE} Hz, "
            f"not {rate}"
        )
    if not isinstance(frame.num_channels, int) or frame.num_channels < 1:
        raise MalformedInputError(
            f"InputAudioRawFrame.num_channels must be >= 1, not {frame.num_channels!r}"
        )
    if len(audio) % (2 * frame.num_channels):
        raise MalformedInputError(
            f"InputAudioRawFrame.audio has {len(audio)} bytes: not whole PCM16 frames of "
            f"{frame.num_channels} channel(s)"
        )


def _downmix(pcm: bytes, channels: int) -> bytes:
    samples = array.array("h")
    samples.frombytes(pcm)
    if sys.byteorder == "big":
        samples.byteswap()
    mono = array.array(
        "h",
        (sum(samples[i : i + channels]) // channels for i in range(0, len(samples), channels)),
    )
    if sys.byteorder == "big":
        mono.byteswap()
    return mono.tobytes()


class AudioConverter:
    """Turns input audio of any rate and channel count into 16 kHz mono PCM16."""

    def __init__(self) -> None:
        self._resampler: BaseAudioResampler | None = None
        self._rate: int | None = None

    async def convert(self, frame: InputAudioRawFrame) -> bytes:
        """``frame``'s audio at 16 kHz mono (checked first: see ``check_audio``)."""
        check_audio(frame)
        pcm = bytes(frame.audio)
        if frame.num_channels > 1:
            pcm = _downmix(pcm, frame.num_channels)
        if frame.sample_rate == TARGET_RATE:
            return pcm
        if self._resampler is None or self._rate != frame.sample_rate:
            # A new input rate is a new stream: old filter state would smear into it.
            self._resampler = create_stream_resampler()
            self._rate = frame.sample_rate
        return await self._resampler.resample(pcm, frame.sample_rate, TARGET_RATE)


class ImageThrottle:
    """Encodes input images as JPEG, at most one every ``IMAGE_INTERVAL`` seconds."""

    def __init__(self, interval: float = IMAGE_INTERVAL) -> None:
        self._interval = interval
        self._last: float | None = None

    def jpeg(self, frame: InputImageRawFrame, now: float) -> bytes | None:
        """The image as JPEG, or None when one was sent less than the interval ago. Raises
        ``MalformedInputError`` when the bytes do not match the frame's size and format."""
        if self._last is not None and now - self._last < self._interval:
            return None
        try:
            image = Image.frombytes(frame.format or "RGB", frame.size, frame.image)
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, format="JPEG")
        except (ValueError, TypeError, OSError) as error:
            raise MalformedInputError(
                f"InputImageRawFrame does not hold a {frame.format} image of size "
                f"{frame.size}: {error}"
            ) from error
        self._last = now
        return buffer.getvalue()


PREROLL: Final = 0.5
"""Seconds of audio kept before an activity starts, when the upstream VAD's own start delay
is not known (server VAD disabled)."""
PREROLL_MARGIN: Final = 0.1
"""Seconds added to the upstream VAD's ``start_secs`` when it sizes the pre-roll."""


class Preroll:
    """The most recent ``seconds`` of 16 kHz mono audio, kept while no activity is open (server
    VAD disabled) and sent after ``activityStart``, so the onset of speech is not clipped.

    Trimmed to the exact number of whole samples (as the stock service trims its buffer),
    whatever the size of the frames that fill it."""

    def __init__(self, seconds: float = PREROLL) -> None:
        self._pcm = bytearray()
        self.seconds = seconds

    def keep(self, pcm: bytes) -> None:
        """Keep ``pcm``; the oldest audio beyond ``seconds`` goes."""
        self._pcm += pcm
        excess = len(self._pcm) - int(self.seconds * TARGET_RATE) * 2
        if excess > 0:
            del self._pcm[:excess]

    def take(self) -> bytes:
        """Everything kept, oldest first; empty after."""
        pcm = bytes(self._pcm)
        self._pcm.clear()
        return pcm

    def clear(self) -> None:
        """Forget what was kept."""
        self._pcm.clear()
