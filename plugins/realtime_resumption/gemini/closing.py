"""``Closer``: how a transport's session ends, whatever the caller and the network do.

``disconnect`` closes in a task of its own, begun when it is called (not when awaited) and
shielded from the caller's cancellation, within ``DISCONNECT_TIMEOUT``: a move under way is
abandoned, the dial in flight too, the connection gets ``DRAIN_TIMEOUT`` to write what it
queued, and whatever is left past the bound is dropped. ``abort_incumbent`` strands the
connection at once and closes it within ``ABORT_TIMEOUT``. A process that lost the call's
lease to another stops feeding the service at once and closes the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final, Literal

from loguru import logger

from realtime_resumption.gemini.connection import LiveConnection
from realtime_resumption.gemini.connection_router import ConnectionRouter
from realtime_resumption.gemini.dialling import Dialler
from realtime_resumption.gemini.input_path import InputPath
from realtime_resumption.gemini.rotation import Rotation
from realtime_resumption.gemini.state import Callbacks, TransportState
from realtime_resumption.gemini.switchover import Switchover
from realtime_resumption.gemini.transport_phase import Lifecycle
from realtime_resumption.store import LeaseLostError
from realtime_resumption.telemetry import SessionTelemetry
from realtime_resumption.tool_calls import ToolCallTracker
from realtime_resumption.transport import TransportErrorEvent

ABORT_TIMEOUT: Final = 5.0
"""Seconds ``abort_incumbent`` gives the incumbent's close before reporting ``forced``."""
DISCONNECT_TIMEOUT: Final = 10.0
"""Seconds ``disconnect`` takes at most, whatever the connections and the network do."""


class Closer:
    """Ends a transport's session (see the module documentation). ``callbacks`` is the
    transport, whose ``on_error`` the framework sets; ``end_store`` ends the call in the
    store (with a store: its record deleted, its lease released); ``number`` names the
    close task."""

    def __init__(
        self,
        session: TransportState,
        callbacks: Callbacks,
        lifecycle: Lifecycle,
        *,
        router: ConnectionRouter,
        dialler: Dialler,
        switchover: Switchover,
        rotation: Rotation,
        end_store: Callable[[], Awaitable[None]],
        observer: SessionTelemetry | None,
        input_path: InputPath,
        tools: ToolCallTracker,
        describe: str,
        number: int,
    ) -> None:
        self._s = session
        self._callbacks = callbacks
        self._life = lifecycle
        self._router = router
        self._dialler = dialler
        self._switchover = switchover
        self._rotation = rotation
        self._end_store = end_store
        self._observer = observer
        self._input = input_path
        self._tools = tools
        self._describe = describe
        self._number = number
        self._closing: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return self._describe

    @property
    def _active(self) -> bool:
        return self._s.active

    @property
    def _current(self) -> LiveConnection | None:
        return self._s.current

    async def wait(self) -> None:
        """Let a disconnect still closing (its caller was cancelled) finish first."""
        if self._closing is not None and not self._closing.done():
            await asyncio.shield(self._closing)

    def _begin_close(self) -> asyncio.Task[None]:
        """The close task, started unless one runs already (RuntimeError with no loop)."""
        loop = asyncio.get_running_loop()
        self._life.close()
        closing = self._closing
        if closing is None or closing.done():
            closing = self._closing = loop.create_task(
                self._disconnect(), name=f"gemini-live-disconnect-{self._number}"
            )
        return closing

    async def _close_when_run(self) -> None:
        await self._closed_by(self._begin_close())

    @staticmethod
    async def _closed_by(closing: asyncio.Task[None]) -> None:
        # Shielded, as websockets closes its sockets: the caller's cancellation stops its wait,
        # never the close.
        await asyncio.shield(closing)

    async def _disconnect(self) -> None:
        try:
            async with asyncio.timeout(DISCONNECT_TIMEOUT):
                # The call is over: nothing is left to take over.
                await self._end_store()
                await self._close_all()
        except Exception as error:
            # Whatever is left is dropped below: disconnect must end the session regardless.
            logger.warning("{}: disconnect did not finish cleanly ({})", self, type(error).__name__)
        self._force_closed()
        if self._observer is not None:
            self._observer.close()

    async def _close_all(self) -> None:
        await self._rotation.close("the client closed the session during the move")
        await self._dialler.abandon(ABORT_TIMEOUT)
        conn = self._current
        if conn is not None:
            await self._router.retire(conn, "closed by the client")
        elif self._active:
            self._s.close(1000, "closed by the client")
        for candidate in self._switchover.settling:
            self._switchover.drop(candidate)
        self._s.cancel_timers()
        self._s.release_waiters()
        while self._s.tasks:
            await asyncio.wait(self._s.tasks, timeout=ABORT_TIMEOUT)
        await self._dialler.close_client(ABORT_TIMEOUT)

    def _force_closed(self) -> None:
        """After a disconnect that ran out of time or failed: nothing may stay up."""
        self._rotation.abandon("the client closed the session during the move")
        if self._active:
            self._s.close(1000, "closed by the client")
        self._s.cancel_timers()
        self._s.release_waiters()
        for task in self._s.tasks:
            task.cancel()

    async def _close_stranded(
        self, conn: LiveConnection | None, moves: Sequence[asyncio.Task[Any]]
    ) -> Literal["closed", "forced"]:
        try:
            async with asyncio.timeout(ABORT_TIMEOUT):
                if moves:
                    await asyncio.wait(moves)
                if conn is None:
                    return "closed"
                outcome: Literal["closed", "forced"] = await conn.close()
                return outcome
        except Exception:
            logger.opt(exception=True).debug("{}: closing the stranded {!r} failed", self, conn)
            return "forced"

    def store_error(self, error: Exception) -> None:
        if isinstance(error, LeaseLostError):
            self._taken_from_here(error)
            return
        self._s.call(self._callbacks.on_error, TransportErrorEvent(error, recoverable=True))

    def _taken_from_here(self, error: LeaseLostError) -> None:
        """Another process drives the call now (this one stalled past its lease and it took
        the call over): nothing more goes to the service from here, or one call would feed
        two server sessions (or one, interleaved). Input is refused at once, the connection
        closes without writing what it still queued, and ``on_error`` (not recoverable) then
        ``on_close`` say why; the record is the new driver's, left as it is."""
        self._s.lost(error, 1000, "another process took the call over")
        # The rest of the teardown (a move under way, a dial, the client) as ``disconnect``
        # does it; a later ``disconnect`` waits for it.
        self._begin_close()

    def disconnect(self) -> Coroutine[Any, Any, None]:
        """``GeminiLiveTransport.disconnect``."""
        try:
            closing = self._begin_close()
        except RuntimeError:
            # No loop runs (``loop.run_until_complete(transport.disconnect())``): the close
            # begins when the loop runs the coroutine.
            return self._close_when_run()
        return self._closed_by(closing)

    def abort_incumbent(self) -> asyncio.Task[Literal["closed", "forced"]]:
        """``GeminiLiveTransport.abort_incumbent``."""
        self._dialler.advance()
        s = self._s
        conn = s.strand()
        self._router.strand([c for c in (conn, *self._switchover.settling) if c is not None])
        moves = self._rotation.abandon("the incumbent was aborted during the move")
        s.deactivate()
        self._input.clear()
        self._tools.clear()
        task = asyncio.create_task(self._close_stranded(conn, moves))
        s.own(task)
        return task
