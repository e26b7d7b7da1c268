"""How late an event loop runs: a 10 ms ticker's lateness, sampled while it runs. The client
of a capacity benchmark measures its own loop with it, and each emulator process its loop:
a server that lags takes the client's input late, which is not the client's doing."""

from __future__ import annotations

import asyncio

TICK = 0.01


class LoopTicker:
    """How late a ``TICK`` ticker wakes on the running loop, from ``start`` to ``stop``."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.times: list[float] = []
        """When each sample was taken (loop time)."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})

    def take(self) -> list[float]:
        """The samples so far, forgotten here: the next ``take`` returns those after it."""
        samples, self.samples, self.times = self.samples, [], []
        return samples

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + TICK
            await asyncio.sleep(TICK)
            self.samples.append(max(0.0, loop.time() - due))
            self.times.append(loop.time())

    def before(self, instant: float) -> list[float]:
        """The samples taken before ``instant``."""
        return [lag for at, lag in zip(self.times, self.samples, strict=True) if at < instant]
