"""The answer a ``generate_reply`` waits for: its future, until the generation that answers it
opens, and the clock that fails it when none does in time.

The clock counts only while the request can reach the service: while the session waits for a
connection (its first, or a move's) no answer can begin, so the clock starts again, whole, once
one is up. A newer request supersedes a pending one, as with LiveKit's own plugins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from livekit.agents import llm

from .generations import Generation
from .log import logger


def failed_reply(message: str) -> asyncio.Future[llm.GenerationCreatedEvent]:
    """What ``generate_reply`` returns when no answer can come: a future failed with
    ``RealtimeError(message)``."""
    fut: asyncio.Future[llm.GenerationCreatedEvent] = asyncio.get_running_loop().create_future()
    fut.set_exception(llm.RealtimeError(message))
    return fut


class PendingReply:
    """The latest ``generate_reply`` request of one session, while it waits.

    ``timeout``: seconds the clock gives the answer to begin. ``held()``: whether the request
    waits for a connection now (the clock then starts again instead of failing it).
    ``on_cancelled``: called when the caller cancels the pending request.
    """

    def __init__(
        self,
        timeout: float,
        *,
        held: Callable[[], bool],
        on_cancelled: Callable[[], None] | None = None,
    ) -> None:
        self._timeout = timeout
        self._held = held
        self._on_cancelled = on_cancelled
        self._future: asyncio.Future[llm.GenerationCreatedEvent] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.requested_at: float | None = None
        """When the request last reached the transport (the session sets it as it sends)."""

    @property
    def pending(self) -> bool:
        """A request was made and its future is not settled yet."""
        return self._future is not None

    def ask(self) -> asyncio.Future[llm.GenerationCreatedEvent]:
        """A new request: the one still pending is cancelled; the clock starts."""
        previous, self._future = self._future, None
        if previous is not None and not previous.done():
            logger.warning("generate_reply called while another is pending; cancelling it")
            previous.cancel("superseded by a new generate_reply call")
        fut: asyncio.Future[llm.GenerationCreatedEvent] = asyncio.get_running_loop().create_future()
        self._future = fut
        fut.add_done_callback(self._settled)
        self.restart()
        return fut

    def claims(self, generation: Generation) -> bool:
        """Whether ``generation`` answers the pending request (the next one to open, never a
        continuation of an answer); marks it ``user_initiated`` so."""
        fut = self._future
        generation.user_initiated = (
            fut is not None and not fut.done() and not generation.continuation
        )
        return generation.user_initiated

    def resolve(self, event: llm.GenerationCreatedEvent) -> None:
        """The generation that answers the request opened."""
        if self._future is not None and not self._future.done():
            self._future.set_result(event)

    def restart(self) -> None:
        """(Re)start the clock, whole: the request reaches the service from now."""
        self._stop()
        if self._future is not None and not self._future.done():
            self._timer = asyncio.get_running_loop().call_later(self._timeout, self._ran_out)

    def fail(self, message: str) -> None:
        """The session is over: the pending request fails with ``RealtimeError(message)``."""
        if self._future is not None and not self._future.done():
            self._future.set_exception(llm.RealtimeError(message))

    def close(self) -> None:
        """The session closed: the pending request is cancelled and the clock stopped."""
        self._stop()
        if self._future is not None and not self._future.done():
            self._future.cancel("session closed")

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _ran_out(self) -> None:
        self._timer = None
        fut = self._future
        if fut is None or fut.done():
            return
        if self._held():
            # The request waits for the new connection: no answer could have begun.
            self.restart()
            return
        fut.set_exception(
            llm.RealtimeError("generate_reply timed out waiting for generation_created")
        )

    def _settled(self, fut: asyncio.Future[llm.GenerationCreatedEvent]) -> None:
        if fut is not self._future:
            return  # a superseded request
        self._future = None
        self._stop()
        if fut.cancelled() and self._on_cancelled is not None:
            self._on_cancelled()
