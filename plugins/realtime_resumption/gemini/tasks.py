"""Ending tasks the transport owns, without swallowing the caller's own cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], timeout: float) -> bool:
    """Cancel ``tasks`` and wait up to ``timeout`` seconds for them to finish; True when they
    all did. Their own cancellation is absorbed; a cancellation of the *caller* (while it
    waits) propagates: ``asyncio.wait`` does not raise what the children raise, and the
    caller's ``CancelledError`` is never caught here."""
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    if not pending:
        return True
    _, still = await asyncio.wait(pending, timeout=timeout)
    return not still
