"""What both emulators' command lines share: the log on stderr, serving until Ctrl-C or
SIGTERM while periodic faults run, and a quiet end on Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from loguru import logger


def log_to_stderr(verbose: bool) -> None:
    """Log on stderr only: DEBUG with ``--verbose``, INFO without."""
    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if verbose else "INFO")


def run(serve: Coroutine[Any, Any, None]) -> None:
    """Run ``serve`` in a new event loop; Ctrl-C before the signal handlers are in place ends
    it quietly too."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve)


def stop_signal() -> asyncio.Event:
    """An event that SIGINT and SIGTERM set (where the running loop can catch them)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop


async def every(seconds: float, fault: Callable[[], int], message: str) -> None:
    """Apply ``fault`` every ``seconds`` (already scaled) and log ``message`` with the count it
    returns, when that is not zero."""
    while True:
        await asyncio.sleep(seconds)
        count = fault()
        if count:
            logger.info(message, count)


async def serve_until(stop: asyncio.Event, periodic: Sequence[Coroutine[Any, Any, None]]) -> None:
    """Run the ``periodic`` faults until ``stop`` is set, then cancel and await them."""
    tasks = [asyncio.create_task(coro) for coro in periodic]
    try:
        await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
