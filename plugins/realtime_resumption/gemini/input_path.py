"""The input path: every client message from the framework's send to a connection's socket.

A send is *submitted* to the session's :class:`~realtime_resumption.outbox.Outbox`,
whatever the state of the connections, and *fed* to the current connection one message at a
time: the next message is handed over only once the previous one was written. So the outbox
knows exactly what each connection got, a message is never stranded in a dead connection's
queue, and whatever waits when a move switches connections goes to the new one, in order.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Final, get_args

from loguru import logger
from websockets.exceptions import ConnectionClosed

from realtime_resumption.gemini.connection import LiveConnection
from realtime_resumption.gemini.messages import ClientMessage, ToolResponse
from realtime_resumption.handles import HandleRef
from realtime_resumption.move_machine import InputGate
from realtime_resumption.outbox import (
    Entry,
    MessageKind,
    Outbox,
    OutboxLimits,
    Replay,
    ReplayScope,
)
from realtime_resumption.silence import rms
from realtime_resumption.transport import (
    InputStats,
    NotConnectedError,
    SendCounter,
    SendKind,
    ToolResult,
)

_MEDIA: Final = frozenset({MessageKind.AUDIO, MessageKind.VIDEO})
_MEDIA_SENDS: Final[frozenset[SendKind]] = frozenset({"audio", "video"})
_LARGE: Final = 64 * 1024
"""Payload bytes from which a message may be the one a connection refused as too big (1009):
far above any audio chunk, far below any limit a service sets."""

SEND_KINDS: Final[tuple[SendKind, ...]] = get_args(SendKind)

Written = Callable[[LiveConnection, ClientMessage, list[ToolResult]], None]
"""Hears of a message other than audio and video once it reached a connection's socket,
with the tool results it carried to the current connection (their calls' results are sent)."""


class _Counter:
    __slots__ = ("attempted", "bytes", "failed", "refused", "sent")

    def __init__(self) -> None:
        self.attempted = 0
        self.sent = 0
        self.refused = 0
        self.failed = 0
        self.bytes = 0

    def snapshot(self) -> SendCounter:
        return SendCounter(self.attempted, self.sent, self.refused, self.failed, self.bytes)


def _counters() -> dict[SendKind, _Counter]:
    return {kind: _Counter() for kind in SEND_KINDS}


def audio_level(message: ClientMessage) -> float:
    """The loudness of an audio message (RMS of its PCM16, from every 4th sample: the outbox
    asks it once of every chunk, to hold speech rather than silence); infinite for anything
    else, which is never silence."""
    payload = message.payload
    if message.kind != "audio" or not isinstance(payload, bytes):
        return math.inf
    return rms(payload, stride=4)


class InputPath:
    """The session's outbox, the feed to the current connection, and the send counters.

    The outbox is its own: what the other parts need of it (a handle's place in the input,
    what a new session lacks, a turn's end) they ask of the input path, in connections
    rather than the outbox's numbers. It knows the connection it feeds and how much of the
    input the gate lets through, so a connection reports each write (:meth:`written`) here
    and the next message goes out in the same step. ``written`` hears of the writes that
    matter beyond the input (:data:`Written`).
    """

    def __init__(self, limits: OutboxLimits | None = None, *, written: Written) -> None:
        self._limits = limits
        self._report = written
        self._conn: LiveConnection | None = None
        """The connection fed: the session's current one."""
        self._gate = InputGate.OPEN
        self._outbox: Outbox[ClientMessage] = Outbox(limits, audio_level=audio_level)
        self._in_flight: dict[LiveConnection, Entry[ClientMessage]] = {}
        self._results: dict[str, tuple[Entry[ClientMessage], ToolResult]] = {}
        self._largest: dict[LiveConnection, Entry[ClientMessage]] = {}
        """The largest message handed to each open connection, from ``_LARGE`` bytes."""
        self._sends = _counters()
        self._total = _counters()

    # --- counters -----------------------------------------------------------------------------

    def connection_counters(self) -> dict[SendKind, SendCounter]:
        """Counters of the current connection."""
        return {kind: counter.snapshot() for kind, counter in self._sends.items()}

    def total_counters(self) -> dict[SendKind, SendCounter]:
        """Counters since the transport was made."""
        return {kind: counter.snapshot() for kind, counter in self._total.items()}

    def connected(self, conn: LiveConnection) -> None:
        """``conn`` became the current connection: it is fed from now on, and its counters
        start at zero."""
        self._conn = conn
        self._sends = _counters()

    def stop_feeding(self) -> None:
        """The session has no current connection any more (stranded, or closed)."""
        self._conn = None

    @property
    def gate(self) -> InputGate:
        """How much of the input the current connection takes (the move decides)."""
        return self._gate

    def set_gate(self, gate: InputGate) -> None:
        """Let the current connection take ``gate``'s share of the input (no feed: the
        caller feeds when the moment is right)."""
        self._gate = gate

    def refuse(self, kind: SendKind, error: Exception) -> Exception:
        """Count a send refused with ``error``; returns it to raise."""
        for counters in (self._sends, self._total):
            counters[kind].attempted += 1
            counters[kind].refused += 1
        return error

    def stats(self) -> InputStats:
        """The outbox's figures, for diagnostics."""
        stats = self._outbox.stats
        return InputStats(
            buffered=stats.pending,
            submitted=stats.submitted,
            written=stats.sent,
            replayed=stats.resent,
            audio_chunks_dropped=stats.audio_chunks_dropped,
            audio_seconds_dropped=stats.audio_seconds_dropped,
            video_frames_dropped=stats.video_frames_dropped,
            tool_responses_discarded=stats.tool_responses_discarded,
            silence_seconds_skipped=stats.silence_seconds_skipped,
        )

    # --- the framework's side -----------------------------------------------------------------

    def submit(
        self, message: ClientMessage, now: float, scope: ReplayScope = ReplayScope.SESSION
    ) -> Entry[ClientMessage]:
        """Queue ``message`` for the current connection (or the next one). Raises
        ValueError (counted as refused) for a message the input bounds cannot hold."""
        try:
            entry = self._outbox.submit(
                message,
                MessageKind(message.kind),
                now,
                audio_seconds=message.seconds,
                scope=scope,
            )
        except ValueError as error:
            raise self.refuse(message.kind, error) from None
        self._sends[message.kind].attempted += 1
        self._total[message.kind].attempted += 1
        return entry

    def submit_result(self, message: ClientMessage, result: ToolResult, now: float) -> None:
        """Queue a tool result; :meth:`withdraw_result` can take it back until it is written."""
        self._results[result.id] = (self.submit(message, now), result)

    def withdraw_result(self, call_id: str) -> bool:
        """Never send (or replay) the result of ``call_id``; False when none was held."""
        held = self._results.pop(call_id, None)
        return held is not None and self._outbox.withdraw(held[0])

    def take_results(self, messages: Sequence[ClientMessage]) -> set[str]:
        """Forget the tool results ``messages`` carried (they were dropped unsent, or refused
        after their write); returns the calls they answered, which take a new result."""
        dropped = {id(message) for message in messages}
        call_ids = {
            call_id for call_id, (held, _) in self._results.items() if id(held.message) in dropped
        }
        for call_id in call_ids:
            del self._results[call_id]
        for message in messages:
            if isinstance(message.payload, ToolResponse):
                # A result refused after its write (1009) is no longer held by id.
                call_ids.update(r.id for r in message.payload.responses if r.id)
        return call_ids

    def connection_closed(self, conn: LiveConnection, *, too_big: bool) -> ClientMessage | None:
        """``conn`` closed. With ``too_big`` (close 1009: the service refused a message as too
        big) the largest message handed to it is dropped from the outbox, so no later
        connection gets it again, and returned; None when there was none to drop."""
        largest = self._largest.pop(conn, None)
        if not too_big or largest is None or not self._outbox.withdraw(largest):
            return None
        return largest.message

    # --- the connections' sessions -------------------------------------------------------------

    def record_handle(
        self,
        handle: HandleRef,
        conn: LiveConnection,
        now: float,
        *,
        resumable: bool,
        last_consumed_index: int | None,
    ) -> None:
        """``handle`` arrived on ``conn`` (handled at ``now``): a resumption point in the
        input, placed as much earlier as the event loop may have kept it waiting."""
        self._outbox.record_handle(
            handle,
            conn.dial_gen,
            now,
            late_by=conn.late_by(now),
            resumable=resumable,
            last_consumed_index=last_consumed_index,
        )

    def record_foreign_handle(self, handle: HandleRef) -> None:
        """``handle`` is the snapshot of a session this input never went to (a stored call
        taken over, or a ``connect`` that resumes): a session resumed from it lacks it all."""
        self._outbox.record_foreign_handle(handle)

    def pin(self, handle: HandleRef) -> bool:
        """Keep ``handle``'s place in the input until the next connection attaches (a dial
        from it started); False when the input no longer knows it."""
        return self._outbox.pin(handle)

    def lacking(self, handle: HandleRef | None) -> list[ClientMessage]:
        """What a session resumed from ``handle`` (rebuilt, for None or a handle no longer
        known) would lack, in order; changes nothing."""
        return self._outbox.lacking(handle)

    def model_answered(self, conn: LiveConnection) -> None:
        """The model's audio or text arrived on ``conn``: its session took in the input up to
        the last tool result written to it."""
        self._outbox.model_answered(conn.dial_gen)

    def turn_completed(self) -> None:
        """A turn completed and the history holds it: a rebuilt session need not be given the
        input written up to now."""
        self._outbox.turn_completed()

    def attach_resumed(self, conn: LiveConnection, handle: HandleRef, now: float) -> Replay:
        """``conn`` resumed the session from ``handle`` and takes every write from now; what
        the resumed session lacks is queued for it."""
        return self._outbox.attach_resumed(conn.dial_gen, handle, now, round_trip=conn.round_trip)

    def attach_fresh(self, conn: LiveConnection, now: float, *, seeded: bool = True) -> Replay:
        """``conn`` opened a fresh session and takes every write from now; what came after the
        last completed turn is queued for it (``seeded=False``: nothing seeds the session,
        so input that only a resumed session would lack is queued too)."""
        return self._outbox.attach_fresh(
            conn.dial_gen, now, round_trip=conn.round_trip, seeded=seeded
        )

    def detach(self, conn: LiveConnection) -> None:
        """``conn``, the current connection, is gone: input waits (within the bounds) for the
        next one."""
        if conn is self._conn:
            self._conn = None
        self._outbox.detach(conn.dial_gen)

    # --- the writer's side --------------------------------------------------------------------

    def feed(self, now: float) -> None:
        """Hand the current connection its next message if it is idle, as far as the gate
        lets it: none while the gate holds input; with ``MEDIA_ONLY`` (a move is about to
        replace the connection) a message that could end the user's turn waits, with
        everything after it, for the next connection: an answer the old connection started
        would be cut by the switch."""
        gate, conn = self._gate, self._conn
        if gate is InputGate.HELD or conn is None or not conn.accepting or conn.busy:
            return
        media_only = gate is InputGate.MEDIA_ONLY
        outbox = self._outbox
        reopen = outbox.activity_to_reopen
        entry = None if reopen else outbox.next_unsent()
        if not reopen and (entry is None or (media_only and entry.kind not in _MEDIA)):
            return
        # Measured before each message is handed over, so handles are placed by the estimate
        # current when the input they follow was written (nothing to hand over: nothing to
        # place).
        measure = conn.round_trip_measure(now)
        if measure is not None:
            outbox.round_trip_measured(conn.dial_gen, *measure)
        if reopen:
            # Before the audio replayed to it: the user is still speaking.
            index = conn.enqueue(ClientMessage.activity_start())
            outbox.activity_reopened(conn.dial_gen, index)
            return
        assert entry is not None
        index = conn.enqueue(entry.message, wake=False)
        self._outbox.mark_sent(entry, conn.dial_gen, index, now)
        self._in_flight[conn] = entry
        size = entry.message.size
        if size >= _LARGE:
            largest = self._largest.get(conn)
            if largest is None or size > largest.message.size:
                self._largest[conn] = entry
        # Last: the write may be reported (``written``) before this returns.
        conn.write_soon()

    def written(self, conn: LiveConnection, message: ClientMessage) -> None:
        """``message`` reached ``conn``'s socket (the connection's report): it is counted and
        marked written, ``written`` hears of it unless it is audio or video, and the current
        connection is handed its next message."""
        now = asyncio.get_running_loop().time()
        current = conn is self._conn
        entry = self._in_flight.pop(conn, None)
        if entry is not None and entry.message is not message:
            self._in_flight[conn] = entry  # a message written outside the outbox (history)
        elif entry is not None:
            self._outbox.mark_written(entry, conn.dial_gen, now)
        for counters in (self._sends, self._total) if current else (self._total,):
            counters[message.kind].sent += 1
            counters[message.kind].bytes += message.size
        if message.kind not in _MEDIA_SENDS:
            self._report(conn, message, self._results_sent(entry, message) if current else [])
        if current:
            self.feed(now)

    def _results_sent(
        self, entry: Entry[ClientMessage] | None, message: ClientMessage
    ) -> list[ToolResult]:
        """The tool results ``message`` (``entry``'s, if from the outbox) carried."""
        if not isinstance(message.payload, ToolResponse):
            return []
        results = []
        for response in message.payload.responses:
            for call_id, (held, result) in list(self._results.items()):
                if held is entry or (response.id is not None and call_id == response.id):
                    del self._results[call_id]
                    results.append(result)
        return results

    def failed(
        self,
        conn: LiveConnection,
        messages: Sequence[ClientMessage],
        error: Exception,
        *,
        current: bool,
    ) -> bool:
        """These messages were not written to ``conn``. Returns True when the message itself
        was refused (it is dropped); False when the connection died (it goes to the next
        one)."""
        for message in messages:
            for counters in (self._sends, self._total) if current else (self._total,):
                counters[message.kind].failed += 1
        entry = self._in_flight.pop(conn, None)
        if entry is None or not any(message is entry.message for message in messages):
            if entry is not None:
                self._in_flight[conn] = entry
            return False
        if isinstance(error, ConnectionClosed | OSError | NotConnectedError):
            self._outbox.mark_unsent(entry, conn.dial_gen)
            return False
        logger.warning(
            "a {} message was refused by the SDK ({}); it is dropped",
            entry.kind.value,
            type(error).__name__,
        )
        self._outbox.withdraw(entry)
        return True

    def clear(self) -> None:
        """The session is over: forget every message."""
        self._outbox.clear()
        self._outbox = Outbox(self._limits, audio_level=audio_level)
        self._in_flight.clear()
        self._results.clear()
        self._largest.clear()
