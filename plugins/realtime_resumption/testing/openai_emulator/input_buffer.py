"""A session's input audio buffer and the server VAD over it: decisions only, no I/O.

Server VAD as the API reference describes ``turn_detection`` (``server_vad``): audio at or above
the threshold's level starts speech; ``silence_duration_ms`` of quieter audio ends it; before
speech only the last ``prefix_padding_ms`` of audio is kept (it is committed with the speech).
Time is the buffer's audio time (what the client appended), so a client that streams faster or
slower than real time is heard the same; ``scale`` shrinks the configured silence as the
emulator's clock is scaled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class VadStep:
    """What an append changed: speech ``started`` at ``at_ms``, or ``stopped`` at ``at_ms``
    (the end of the speech, before the silence that ended it)."""

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
        """Add ``ms`` of audio (holding the ``speech`` chunk ids and ``words``), ``loud`` if it
        is at or above the VAD's level; with turn ``detection`` on, the VAD's step."""
        start = self._time_ms
        self._time_ms += ms
        self._parts.append(_Part(ms, speech, words))
        if detection is None:
            return None
        if loud:
            self._silence_ms = 0.0
            if not self.speaking:
                self.speaking = True
                return VadStep("started", int(start))
            return None
        if self.speaking:
            self._silence_ms += ms
            silence = float(detection.get("silence_duration_ms") or 500)
            if self._silence_ms >= silence * scale:
                return VadStep("stopped", int(self._time_ms - self._silence_ms))
            return None
        self._keep_last(float(detection.get("prefix_padding_ms") or 0))
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
