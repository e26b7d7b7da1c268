"""Resumed but dead: a resumed connection that takes input yet never answers the user.

A resume can succeed on the wire and still leave a session that never answers (the provider
lost the turn, or the session wedged). :class:`ResumeWatchdog` watches a resumed connection
until its first answer: each sign of the user's turn (a transcription delta, a voice-activity
event, a turn the client sent, audio loud enough to be speech) restarts a bound, and any output
of the model ends the watch.
When the bound runs out, the transport re-sends the user's turn once (from
:class:`UserTurnRetainer`); when it runs out again, it rebuilds the session.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Final

from realtime_resumption.silence import rms
from realtime_resumption.transport import RetainedUserTurn

DEFAULT_RESUME_WATCHDOG: Final = 8.0
"""Seconds a resumed connection may leave the user's turn unanswered, counted from the user's
latest sign of speech or input. A model answers within a second or two of the end of a turn;
eight seconds rides out a slow answer and still recovers before the user gives up."""

RETAINED_AUDIO_SECONDS: Final = 15.0
"""The most audio of the user's turn kept for a re-send (the newest part of it)."""

SPEECH_LEVEL: Final = 500.0
"""RMS level (PCM16) above which a chunk of user audio counts as speech for the watchdog: a
dead session transcribes nothing, so the audio itself is the sign of the user's turn."""


def is_speech(pcm: bytes) -> bool:
    """Whether PCM16 little-endian ``pcm`` is louder than :data:`SPEECH_LEVEL`."""
    return rms(pcm) > SPEECH_LEVEL


class UserTurnRetainer:
    """The user's input since the last completed turn: the audio (newest
    ``RETAINED_AUDIO_SECONDS``) and any text turn, to re-send once if it went unanswered."""

    def __init__(self, sample_rate: int, max_seconds: float = RETAINED_AUDIO_SECONDS) -> None:
        self._sample_rate = sample_rate
        self._max_bytes = int(max_seconds * sample_rate) * 2
        self._audio: deque[bytes] = deque()
        self._bytes = 0
        self._text: str | None = None
        self._turns = 0

    def audio(self, pcm: bytes) -> None:
        """The user sent PCM16 audio."""
        self._audio.append(pcm)
        self._bytes += len(pcm)
        while self._bytes > self._max_bytes and len(self._audio) > 1:
            self._bytes -= len(self._audio.popleft())

    def text(self, text: str) -> None:
        """The user sent a text turn; it is what a re-send repeats."""
        self._text = text

    def clear(self) -> None:
        """The turn was answered (turnComplete): nothing to re-send."""
        self._audio.clear()
        self._bytes = 0
        self._text = None

    @property
    def text_turn(self) -> str | None:
        """The text turn sent since the last completed turn, if any."""
        return self._text

    def audio_turn(self, now: float) -> RetainedUserTurn | None:
        """The retained audio as one utterance, or None when there is none."""
        if not self._audio:
            return None
        self._turns += 1
        return RetainedUserTurn(b"".join(self._audio), self._sample_rate, self._turns, now)


class ResumeWatchdog:
    """Watches one resumed connection until its first answer; see the module documentation.

    ``on_expired(first)`` runs on the event loop when the bound ran out: ``first`` is True the
    first time (re-send the turn), False after that (rebuild).
    """

    def __init__(self, bound: float | None, on_expired: Callable[[bool], None]) -> None:
        if bound is not None and not bound > 0:
            raise ValueError(f"resume_watchdog must be > 0 seconds or None, got {bound!r}")
        self._bound = bound
        self._on_expired = on_expired
        self._watching = False
        self._expired = 0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def watching(self) -> bool:
        """A resumed connection has not answered yet."""
        return self._watching

    @property
    def armed(self) -> bool:
        """The bound is running."""
        return self._timer is not None

    def watch(self) -> None:
        """A move resumed the session on a new connection: watch it until it answers."""
        self.stop()
        self._watching = self._bound is not None
        self._expired = 0

    def user_turn(self) -> None:
        """A sign of the user's turn: (re)start the bound."""
        if not self._watching or self._bound is None:
            return
        self._cancel_timer()
        self._timer = asyncio.get_running_loop().call_later(self._bound, self._expire)

    def answered(self) -> None:
        """The model produced output: the connection is alive; stop watching it."""
        self.stop()

    def stop(self) -> None:
        """Stop watching (answered, moved, closed)."""
        self._watching = False
        self._cancel_timer()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        self._expired += 1
        self._on_expired(self._expired == 1)
