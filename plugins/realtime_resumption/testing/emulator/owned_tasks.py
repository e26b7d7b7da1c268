"""The tasks an emulated connection owns: started by it, cancelled and awaited when it ends."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from loguru import logger
from websockets.exceptions import ConnectionClosed


class OwnedTasks:
    """Tasks with one owner: a task that fails is logged (a closed connection is not a
    failure), and ``cancel_all`` cancels every task, including those started meanwhile."""

    def __init__(self, failure: str) -> None:
        self._failure = failure
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` in a task owned here."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            if not isinstance(exc, ConnectionClosed):
                logger.opt(exception=exc).error(self._failure)

    async def cancel_all(self) -> None:
        """Cancel every task and wait until all have ended."""
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
