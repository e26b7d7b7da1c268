"""The background tasks a session starts (a session update, a cancel of the answer): it owns
them, and cancels the ones still running when it closes."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class SessionTasks:
    """A session's running tasks."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` in a task of the session's."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def cancel(self) -> None:
        """Cancel the tasks still running and wait for them to end."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))
