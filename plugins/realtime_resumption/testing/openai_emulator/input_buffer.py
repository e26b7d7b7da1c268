"""A session's input audio buffer and the server VAD over it: decisions only, no I/O.

Server VAD as the API reference describes ``turn_detection`` (``server_vad``): audio at or above
the threshold's level starts speech; ``silence_duration_ms`` of quieter audio ends it (0 is
taken as written: the first quiet frame ends it, the reference names no minimum); before
speech only the last ``prefix_padding_ms`` of audio is kept (it is committed with the speech).
The VAD reads the audio itself, frame by frame (:data:`VAD_FRAME_MS`), not the client's
appends: one append that holds speech then silence ends the turn inside it. Time is the
buffer's audio time (what the client appended), so a client that streams faster or slower
than real time is heard the same; ``scale`` shrinks the configured silence as the emulator's
clock is scaled.

The times the VAD states are those of the ``openai`` SDK's types:
``InputAudioBufferSpeechStartedEvent.audio_start_ms`` "will correspond to the beginning of
audio sent to the model, and thus includes the prefix_padding_ms"; ``...SpeechStoppedEvent
.audio_end_ms`` "will correspond to the end of audio sent to the model, and thus includes the
min_silence_duration_ms". The committed item holds the audio between the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

VAD_FRAME_MS = 20
"""The length of audio the VAD judges at a time: an append longer than it is judged frame by
frame, one shorter as it is. The service does not document its frame; the emulator's is the
20 ms Pipecat's transports stream, so a client appending as Pipecat does is judged as before
and one appending more at a time is no longer judged coarser."""


@dataclass(frozen=True)
class VadStep:
    """What a frame changed: speech ``started`` (``at_ms``: the start of the audio the buffer
    holds, the prefix padding included), or ``stopped`` (``at_ms``: the end of the audio the
    buffer holds, the silence that ended the speech included)."""

    kind: Literal["started", "stopped"]
    at_ms: int


@dataclass(frozen=True)
class _Part:
    ms: float
    speech: tuple[int, ...]
    words: tuple[str, ...]


class InputBuffer:
    """The audio appended since the last commit or clear, and whether the user is speaking."""

    def __init__(self) -> None:
        self._parts: list[_Part] = []
        self._time_ms = 0.0
        self._silence_ms = 0.0
        self.speaking = False

    @property
    def buffered_ms(self) -> float:
        """Audio in the buffer (ms)."""
        return sum(p.ms for p in self._parts)

    @property
    def speech(self) -> tuple[int, ...]:
        """The user speech chunk ids in the buffer."""
        return tuple(s for p in self._parts for s in p.speech)

    def append(
        self,
        ms: float,
        speech: tuple[int, ...],
        words: tuple[str, ...],
        *,
        loud: bool,
        detection: dict[str, Any] | None,
        scale: float,
    ) -> VadStep | None:
        """Add a frame of ``ms`` of audio (holding the ``speech`` chunk ids and ``words``),
        ``loud`` if it is at or above the VAD's level; with turn ``detection`` on, the VAD's
        step."""
        begin = self._time_ms - self.buffered_ms
        self._time_ms += ms
        self._parts.append(_Part(ms, speech, words))
        if detection is None:
            return None
        if loud:
            self._silence_ms = 0.0
            if not self.speaking:
                self.speaking = True
                return VadStep("started", int(begin))
            return None
        if self.speaking:
            self._silence_ms += ms
            if self._silence_ms >= float(detection["silence_duration_ms"]) * scale:
                return VadStep("stopped", int(self._time_ms))
            return None
        self._keep_last(float(detection["prefix_padding_ms"]))
        return None

    def _keep_last(self, keep_ms: float) -> None:
        total = self.buffered_ms
        while self._parts and total - self._parts[0].ms >= keep_ms:
            total -= self._parts.pop(0).ms

    def take(self) -> tuple[tuple[int, ...], str]:
        """Commit: the speech chunk ids and the words the buffer held; it is empty after."""
        speech = self.speech
        words = " ".join(w for p in self._parts for w in p.words)
        self.clear()
        return speech, words

    def clear(self) -> tuple[int, ...]:
        """Empty the buffer (the user is no longer speaking); the speech it held."""
        speech = self.speech
        self._parts.clear()
        self._silence_ms = 0.0
        self.speaking = False
        return speech
