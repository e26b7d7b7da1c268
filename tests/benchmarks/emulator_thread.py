"""The emulator on a thread and event loop of its own, so that a benchmark's client-thread CPU
does not count the server's work."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from google.genai import types

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

T = TypeVar("T")


class EmulatorThread:
    """The emulator on a thread and event loop of its own."""

    def __init__(self, config: EmulatorConfig) -> None:
        self._config = config
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.emu: Emulator | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with Emulator(self._config) as emu:
            self.emu = emu
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> EmulatorThread:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the emulator did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def soon(self, action: Callable[[Emulator], object]) -> None:
        """Run ``action`` on the emulator's loop, without waiting."""
        assert self._loop is not None and self.emu is not None
        emu = self.emu
        self._loop.call_soon_threadsafe(action, emu)

    def call(self, action: Callable[[Emulator], T]) -> T:
        """Run ``action`` on the emulator's loop and return its result."""
        assert self._loop is not None and self.emu is not None
        emu = self.emu
        done: Future[T] = Future()

        def run() -> None:
            try:
                done.set_result(action(emu))
            except Exception as error:
                done.set_exception(error)

        self._loop.call_soon_threadsafe(run)
        return done.result(30)

    @property
    def http_options(self) -> types.HttpOptions:
        """Client options that reach the emulator."""
        return self.call(lambda emu: emu.http_options())
