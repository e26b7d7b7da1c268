"""Switching the session from one connection to the next.

:class:`Switchover` belongs to one transport. It lets a freshly set-up connection *settle* (its
first message shows the provider accepted it; a close right after the setup means it refused
it), deferring whatever the connection says meanwhile; *switches* the session to it in one step
(the cut answer ends, input the new session lacks is queued, the incumbent is retired, the move
finishes); and *breaks* the incumbent first when the provider will not resume while it is open.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from google.genai import types
from loguru import logger

from realtime_resumption.gemini.connection import CLOSE_TIMEOUT
from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.move_reports import MoveInProgress, MoveOutcome, MoveReport
from realtime_resumption.outbox import Replay
from realtime_resumption.transport import GenerationEndReason

if TYPE_CHECKING:
    from realtime_resumption.gemini.connection import LiveConnection
    from realtime_resumption.gemini.dialling import Dialler
    from realtime_resumption.gemini.input_path import InputPath
    from realtime_resumption.gemini.state import TransportState
    from realtime_resumption.generation import GenerationTracker
    from realtime_resumption.handles import HandleRef
    from realtime_resumption.history import ConversationHistory
    from realtime_resumption.tool_calls import ToolCallTracker

Close = tuple[int | None, str | None]


class Switchover:
    """Settles, switches to and retires connections; see the module documentation.

    ``deliver`` applies a message of the current connection (the receiver); ``turn_cut``
    tells the rotation that a move cut the turn in progress.
    """

    def __init__(
        self,
        session: TransportState,
        dialler: Dialler,
        *,
        tracker: GenerationTracker,
        input_path: InputPath,
        tools: ToolCallTracker,
        history: ConversationHistory,
        deliver: Callable[[LiveConnection, types.LiveServerMessage], None],
        turn_cut: Callable[[], None],
    ) -> None:
        self._s = session
        self._dialler = dialler
        self._tracker = tracker
        self._input = input_path
        self._tools = tools
        self._history = history
        self._deliver = deliver
        self._turn_cut = turn_cut
        self._deferred: dict[LiveConnection, list[types.LiveServerMessage]] = {}
        self._settling: dict[LiveConnection, asyncio.Future[None]] = {}
        self._closes: dict[LiveConnection, Close] = {}

    @property
    def settling(self) -> tuple[LiveConnection, ...]:
        """Connections set up and waiting to settle."""
        return tuple(self._settling)

    # --- what connections report --------------------------------------------------------------

    def defer(self, conn: LiveConnection, message: types.LiveServerMessage) -> bool:
        """Keep ``message`` when ``conn``'s messages are deferred (settling, or switched to
        but not released yet); False when they are not."""
        deferred = self._deferred.get(conn)
        if deferred is None:
            return False
        deferred.append(message)
        signal = self._settling.get(conn)
        if signal is not None and not signal.done():
            signal.set_result(None)
        return True

    def closed(self, conn: LiveConnection, code: int | None, reason: str | None) -> bool:
        """``conn`` closed: True when it was settling (its settle reports the close)."""
        signal = self._settling.get(conn)
        if signal is None:
            return False
        self._closes[conn] = (code, reason)
        if not signal.done():
            signal.set_result(None)
        return True

    def forget(self, conn: LiveConnection) -> None:
        """Drop what ``conn`` said that is still deferred (it no longer counts)."""
        self._deferred.pop(conn, None)

    def release(self, conn: LiveConnection) -> None:
        """Deliver what ``conn`` said while deferred, in order, if it is the current connection."""
        for message in self._deferred.pop(conn, None) or ():
            if conn is not self._s.current:
                return
            self._deliver(conn, message)

    # --- settling -----------------------------------------------------------------------------

    async def settle(self, conn: LiveConnection, seconds: float) -> Close | None:
        """Let a new connection prove it was accepted: None once it sent its first message
        (or stayed open ``seconds``); its close code and reason when it closed first. What it
        sends meanwhile is deferred to the switch."""
        signal: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._deferred[conn] = []
        self._settling[conn] = signal
        try:
            conn.start_receiving()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await signal
        except BaseException:
            self.drop(conn)
            raise
        finally:
            self._settling.pop(conn, None)
        close = self._closes.pop(conn, None)
        if close is None and not conn.closed:
            return None
        self.drop(conn)
        return close if close is not None else (None, None)

    def drop(self, conn: LiveConnection) -> None:
        """Give up a connection that was dialled for a move and not switched to."""
        self._deferred.pop(conn, None)
        self._closes.pop(conn, None)
        self._dialler.forget(conn)
        if not conn.closed:
            self._s.spawn_close(conn)

    # --- switching ----------------------------------------------------------------------------

    def switch(
        self, conn: LiveConnection, move: MoveInProgress, handle: HandleRef | None
    ) -> tuple[MoveReport, Replay]:
        """Make ``conn`` (set up, settled; resumed from ``handle``, or a fresh session when
        None) the session's connection, in one step: the answer a switch cuts ends, calls the
        new session never issued are orphaned, the input it lacks is queued (after the
        history, for a fresh session), the incumbent is retired, and ``move`` finishes; its
        report (``on_move`` has it) and what was queued are returned. What ``conn`` said while
        it settled stays deferred until :meth:`release`."""
        s = self._s
        now = s.now()
        old = s.current
        if old is not None and self.cut_turn(now, GenerationEndReason.MOVED):
            move.turn_was_cut()
        orphaned = self._tools.connected(conn.dial_gen, resumed_from=handle)
        for call_id in orphaned:
            self._input.withdraw_result(call_id)
        if handle is not None:
            replay = self._input.attach_resumed(conn, handle, now)
        else:
            replay = self._input.attach_fresh(conn, now)
            s.forget_handle()  # the old session's handles resume nothing any more
            history = ClientMessage.history(s.conversation())
            if history is not None:
                # Before anything else reaches the fresh session (Gemini 3.x takes history
                # only before the first realtime input).
                conn.enqueue(history)
        if old is not None:
            self.retire(old)
        else:
            move.incumbent_gone()
        s.install(conn, *self._dialler.take(conn))
        if orphaned:
            # Results already written, to a session the new one does not continue.
            logger.info(
                "{}: {} answered tool call(s) left behind by the move", s.callbacks, len(orphaned)
            )
        move.input_resumed(now)
        report = move.finish(
            MoveOutcome.RESUMED if handle is not None else MoveOutcome.REBUILT,
            now,
            messages_buffered=replay.buffered,
            messages_replayed=replay.replayed,
            audio_chunks_dropped=replay.audio_chunks_dropped,
            audio_seconds_dropped=replay.audio_seconds_dropped,
            audio_seconds_held=replay.audio_seconds_buffered,
            audio_seconds_replayed=replay.audio_seconds_replayed,
        )
        logger.info(
            "{}: move {} {} on {} (gap {:.1f} ms, {} buffered, {} replayed)",
            s.callbacks,
            report.number,
            report.outcome.value,
            conn.attempt_id,
            report.gap_ms,
            report.messages_buffered,
            report.messages_replayed,
        )
        s.call(s.callbacks.on_move, report)
        return report, replay

    async def break_incumbent(self, conn: LiveConnection, move: MoveInProgress) -> None:
        """Break-before-make: close the incumbent before dialling (input is held meanwhile)."""
        now = self._s.now()
        move.input_stopped(now)
        move.incumbent_gone()
        if self.cut_turn(now, GenerationEndReason.MOVED):
            move.turn_was_cut()
        task = self.retire(conn)
        # The provider refuses a resume while the old connection is open: let it close.
        await asyncio.wait({task}, timeout=2 * CLOSE_TIMEOUT)

    def retire(self, conn: LiveConnection) -> asyncio.Task[Any]:
        """Detach ``conn`` (a move replaced it) and close it; its close is reported as a
        lifecycle event only."""
        self._s.detach(conn)
        return self._s.spawn_close(conn)

    def cut_turn(self, now: float, reason: GenerationEndReason) -> bool:
        """The connection serving the session's turn is gone: an answer in progress ends
        with ``reason``, and the history and the helper learn that the turn was cut. Tool
        calls still open are orphaned (a resumed session does not continue the answer they
        belong to): their results are never sent, the framework hears them cancelled, and
        their answer ends as ``tool_call_orphaned``. True when an answer was cut."""
        s = self._s
        tracker, tools = self._tracker, self._tools
        cut = tracker.answer_in_progress
        open_calls = tools.orphan(tools.pending_ids() + tools.unsent_ids())
        if open_calls:
            for call_id in open_calls:
                self._input.withdraw_result(call_id)
            reason = GenerationEndReason.TOOL_CALL_ORPHANED
        s.apply(tracker.connection_lost(now, reason))
        if open_calls:
            logger.warning(
                "{}: {} open tool call(s) orphaned by the move", s.callbacks, len(open_calls)
            )
            s.call(s.callbacks.on_tool_call_cancel, open_calls)
        if not cut:
            return False
        history = self._history
        if history.answer_started:
            history.interrupted()
            history.turn_complete()
            self._input.turn_completed()
        self._turn_cut()
        return True
