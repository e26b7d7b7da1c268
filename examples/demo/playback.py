"""Playing answer audio in real time, as a loudspeaker would, into the caller's ear."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from .call import Ear

ANSWER_RATE = 24_000


class RealtimePlayer:
    """Plays queued PCM16 pieces one after another at their own pace.

    ``enqueue`` takes a piece and an optional callback for when it has played; ``clear`` drops
    what has not played yet (an interruption). Owns one task, stopped by ``aclose``.
    """

    def __init__(self, ear: Ear, rate: int = ANSWER_RATE) -> None:
        self._ear = ear
        self._rate = rate
        self._queue: deque[tuple[bytes, Callable[[], None] | None]] = deque()
        self._ready = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._play(), name="demo-player")

    def enqueue(self, pcm: bytes, on_played: Callable[[], None] | None = None) -> None:
        """Queue ``pcm`` to play after what is queued (empty: only the callback, in turn)."""
        self._queue.append((pcm, on_played))
        self._ready.set()

    def clear(self) -> list[Callable[[], None]]:
        """Drop what has not played; returns the callbacks of the dropped pieces."""
        dropped = [done for _, done in self._queue if done is not None]
        self._queue.clear()
        self._ear.interrupted()
        return dropped

    async def _play(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            while not self._queue:
                self._ready.clear()
                await self._ready.wait()
            pcm, on_played = self._queue.popleft()
            if pcm:
                next_at = max(next_at, loop.time()) + self._ear.play(pcm, self._rate)
                await asyncio.sleep(next_at - loop.time())
            if on_played is not None:
                on_played()

    async def aclose(self) -> None:
        """Stop playing."""
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
