"""Sends that arrive before the session's first connection is set up, held in order.

A LiveKit session starts pushing audio and chat context as soon as it exists; the first setup
takes a round trip or more. Everything is held and delivered once the connection is up, in the
order it came. Audio is bounded (``max_audio_seconds``): past it the oldest audio is dropped
and counted, never text, tool results or reply requests.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .log import logger

DEFAULT_MAX_AUDIO_SECONDS = 10.0
"""Audio held before the first setup: enough for a slow setup and its retries."""


@dataclass
class _Held:
    send: Callable[[], None]
    audio_seconds: float = 0.0


class StartupHold:
    """Holds sends until :meth:`release`; see the module documentation."""

    def __init__(self, max_audio_seconds: float = DEFAULT_MAX_AUDIO_SECONDS) -> None:
        self._max_audio = max_audio_seconds
        self._held: deque[_Held] = deque()
        self._audio = 0.0
        self._released = False
        self.audio_seconds_dropped = 0.0
        """Audio given up past the bound."""

    @property
    def released(self) -> bool:
        """Sends go straight through now."""
        return self._released

    def hold(self, send: Callable[[], None], *, audio_seconds: float = 0.0) -> None:
        """Keep ``send`` for later; ``audio_seconds`` > 0 marks it as droppable audio."""
        self._held.append(_Held(send, audio_seconds))
        self._audio += audio_seconds
        while self._audio > self._max_audio:
            self._drop_oldest_audio()

    def release(self) -> None:
        """Deliver everything held, in order; from now on nothing is held."""
        self._released = True
        held, self._held = self._held, deque()
        self._audio = 0.0
        for item in held:
            item.send()

    def discard(self) -> None:
        """The session closed before it connected: forget what is held."""
        self._held.clear()
        self._audio = 0.0

    def _drop_oldest_audio(self) -> None:
        for item in self._held:
            if item.audio_seconds > 0:
                self._held.remove(item)
                self._audio -= item.audio_seconds
                if not self.audio_seconds_dropped:
                    logger.warning(
                        "the first connection is slow to set up: dropping the oldest audio "
                        "held for it",
                        extra={"max_audio_seconds": self._max_audio},
                    )
                self.audio_seconds_dropped += item.audio_seconds
                return
