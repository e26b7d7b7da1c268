"""The user's transcription, cut into sentences as the stock service cuts it.

Gemini sends the user's words as small deltas. ``UserTranscript`` gathers them and gives back
each complete sentence; the rest waits for more words, for ``FLUSH_AFTER`` seconds of quiet,
or for the model's answer to begin (so the user's message reaches the context before the
answer's). Pure state: the caller owns the timer.
"""

from __future__ import annotations

from typing import Final

from pipecat.utils.string import match_endofsentence

FLUSH_AFTER: Final = 0.5
"""Seconds without a new delta after which an unfinished sentence is pushed as it is."""


class UserTranscript:
    """Deltas in, sentences out."""

    def __init__(self) -> None:
        self._buffer = ""

    @property
    def pending(self) -> bool:
        """Words wait for the end of their sentence."""
        return bool(self._buffer)

    def add(self, delta: str) -> list[str]:
        """Take a delta; return the sentences it completed, in order."""
        if not self._buffer:
            delta = delta.lstrip()
        self._buffer += delta
        sentences = []
        while end := match_endofsentence(self._buffer):
            sentences.append(self._buffer[:end])
            self._buffer = self._buffer[end:]
        return sentences

    def flush(self) -> str | None:
        """The unfinished sentence, if any; the buffer is empty after."""
        text, self._buffer = self._buffer, ""
        return text or None
