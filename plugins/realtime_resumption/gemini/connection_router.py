"""``ConnectionRouter``: what the session's connections report, each report routed to the
part it concerns, and the end of a connection the session is done with.

A ``LiveConnection`` knows no session: it reports its server messages, its unreadable
frames, each message written or not written, and its close, through the ``ConnectionHooks``
this router gives the dialler. The router sends a message to the switchover while a new
connection settles, else to the receiver when it came from the current connection; a write
to the input path, which reports back the ones other than audio and video (a tool result's
then goes to the tool calls and the history); a close to the
switchover (a candidate that failed), to the rotation (the session's connection was lost),
or nowhere (a connection the transport stranded or that stopped counting). It keeps the two
facts only these reports need: the connections ``abort_incumbent`` stranded, and the one a
setup change was last written to in the session (its close with 1007 means the model refused
the change).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Final

from google.genai import types
from loguru import logger

from realtime_resumption.gemini.close_codes import INVALID_ARGUMENT
from realtime_resumption.gemini.connection import ConnectionHooks, LiveConnection
from realtime_resumption.gemini.dialling import Dialler
from realtime_resumption.gemini.input_path import InputPath
from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.gemini.receive import Receiver
from realtime_resumption.gemini.rotation import Rotation
from realtime_resumption.gemini.state import Callbacks, TransportState
from realtime_resumption.gemini.switchover import Switchover
from realtime_resumption.history import ConversationHistory
from realtime_resumption.tool_calls import ToolCallTracker
from realtime_resumption.transport import (
    GenerationEndReason,
    MessageTooLargeError,
    ToolResult,
    TransportErrorEvent,
)

DRAIN_TIMEOUT: Final = 1.0
"""Seconds queued messages get to reach the socket when the transport closes a connection."""
CLOSE_TOO_BIG: Final = 1009
"""The WebSocket close code for a message larger than the peer takes."""


class ConnectionRouter:
    """Routes what the session's connections report (see the module documentation).

    Built before the parts it routes to (the dialler takes its ``hooks``, the switchover its
    ``deliver`` and ``turn_cut``, the input path its ``written``), and given them once with
    :meth:`bind`. ``callbacks`` is
    the transport, whose ``on_error`` and ``on_credential_expiry`` the framework sets.
    """

    def __init__(
        self,
        session: TransportState,
        callbacks: Callbacks,
        *,
        input_path: InputPath,
        tools: ToolCallTracker,
        history: ConversationHistory,
        describe: str,
    ) -> None:
        self._s = session
        self._callbacks = callbacks
        self._input = input_path
        self._tools = tools
        self._history = history
        self._describe = describe
        self._stranded: set[LiveConnection] = set()
        self._updated_in_session: LiveConnection | None = None
        """The connection a setup change was last written to in the session."""
        self.hooks = ConnectionHooks(
            message=self._on_message,
            receive_error=self._on_receive_error,
            written=input_path.written,
            write_failed=self._on_write_failed,
            closed=self._on_closed,
        )

    def bind(
        self, *, dialler: Dialler, switchover: Switchover, rotation: Rotation, receiver: Receiver
    ) -> None:
        """The parts the reports go to, once they are built."""
        self._dialler = dialler
        self._switchover = switchover
        self._rotation = rotation
        self._receiver = receiver

    def __repr__(self) -> str:
        return self._describe

    @property
    def _current(self) -> LiveConnection | None:
        return self._s.current

    def _now(self) -> float:
        return self._s.now()

    def strand(self, conns: Iterable[LiveConnection]) -> None:
        """``abort_incumbent`` left these connections behind: whatever they still report
        counts for nothing (their close included)."""
        self._stranded.update(conns)

    def _on_message(self, conn: LiveConnection, message: types.LiveServerMessage) -> None:
        if self._switchover.defer(conn, message):
            return
        if conn is self._current:
            self._receiver.message(conn, message)

    def _on_receive_error(self, conn: LiveConnection, error: Exception) -> None:
        if conn is not self._current:
            return
        logger.warning("{}: unreadable server frame skipped ({})", self, type(error).__name__)
        self._s.call(self._callbacks.on_error, TransportErrorEvent(error, recoverable=True))

    def written(
        self, conn: LiveConnection, message: ClientMessage, results: list[ToolResult]
    ) -> None:
        """A message other than audio and video was written (the input path's report)."""
        if message.kind == "context_update":
            self._updated_in_session = conn
        for result in results:
            self._tools.result_sent(result.id)
            self._history.tool_result(result)

    def _on_write_failed(
        self, conn: LiveConnection, messages: Sequence[ClientMessage], error: Exception
    ) -> None:
        current = conn is self._current
        refused = self._input.failed(conn, messages, error, current=current)
        if refused:
            self._tools.results_refused(self._input.take_results(messages))
        logger.warning(
            "{}: {} message(s) not written on {} ({})",
            self,
            len(messages),
            conn.attempt_id,
            type(error).__name__,
        )
        if current and refused:
            self._s.call(self._callbacks.on_error, TransportErrorEvent(error, recoverable=True))
            self._s.feed()

    def _on_closed(self, conn: LiveConnection, code: int | None, reason: str | None) -> None:
        if conn is self._updated_in_session:
            self._updated_in_session = None
            if code == INVALID_ARGUMENT:
                # The model refused the setup change: the move that follows the close sets
                # up the next connection with it, and later changes go the same way.
                logger.warning(
                    "{}: the service refused a setup change in the session (1007); "
                    "setup changes move the session from now on",
                    self,
                )
                self._s.traits = replace(self._s.traits, in_session_updates=False)
        self._dialler.forget(conn)
        too_big = self._input.connection_closed(conn, too_big=code == CLOSE_TOO_BIG)
        if too_big is not None and conn not in self._stranded:
            self._refused_as_too_big(conn, too_big)
        if conn in self._stranded:
            self._stranded.discard(conn)
            self._switchover.forget(conn)
            return
        self._s.report_generation_close(conn, code, reason)
        self._s.forget_close(conn)
        if self._switchover.closed(conn, code, reason):
            return
        if conn is not self._current:
            self._switchover.forget(conn)
            logger.debug("{}: {} closed after it stopped counting", self, conn.attempt_id)
            return
        # What it said before closing still counts.
        self._switchover.release(conn)
        if conn is self._current:
            self._lost(conn, code, reason)

    def _refused_as_too_big(self, conn: LiveConnection, message: ClientMessage) -> None:
        """``conn`` closed with 1009: the service refused a message as too big. The largest
        one written to it is dropped (never replayed, or a resumed session would refuse it
        again and again), its tool calls take a new result, and the caller is told."""
        self._tools.results_refused(self._input.take_results((message,)))
        mib = message.wire_size / 2**20
        logger.warning(
            "{}: {} refused a {} message of {:.1f} MiB as too big; it is dropped",
            self,
            conn.attempt_id,
            message.kind,
            mib,
        )
        error = MessageTooLargeError(
            f"Gemini Live refused a {message.kind} message of {mib:.1f} MiB as too big "
            "(close 1009): it was dropped, and the session goes on without it"
        )
        self._s.call(self._callbacks.on_error, TransportErrorEvent(error, recoverable=True))

    def _lost(self, conn: LiveConnection, code: int | None, reason: str | None) -> None:
        """The session's connection closed without the transport asking."""
        logger.info("{}: {} closed ({}, {})", self, conn.attempt_id, code, self._s.clean(reason))
        self._s.detach(conn)
        if not self._rotation.enabled:
            self._s.close(code, reason)
            return
        cut = self._switchover.cut_turn(self._now(), GenerationEndReason.DISCONNECTED)
        self._rotation.connection_lost(code, reason, turn_cut=cut)

    def deliver(self, conn: LiveConnection, message: types.LiveServerMessage) -> None:
        self._receiver.message(conn, message)

    def turn_cut(self) -> None:
        self._rotation.turn_ended()

    def credential_expired(self, conn: LiveConnection) -> None:
        attempt_id: str = conn.attempt_id
        if conn is not self._current:
            return
        logger.info("{}: the credential of {} expired", self, attempt_id)
        self._s.call(self._callbacks.on_credential_expiry)
        if conn is not self._current:
            return
        if self._rotation.enabled:
            self._rotation.credential_expired()
        else:
            self._s.own(asyncio.create_task(self.retire(conn, "credential expired")))

    async def retire(self, conn: LiveConnection, reason: str) -> None:
        """Let ``conn`` write what it queued (within ``DRAIN_TIMEOUT``), end the session on it
        (answer ended as disconnected, ``GenerationClose``, ``on_close``), then close it."""
        await conn.flush(DRAIN_TIMEOUT)
        if self._s.detach(conn):
            self._s.report_generation_close(conn, 1000, reason)
            self._s.close(1000, reason)
        await conn.close()
