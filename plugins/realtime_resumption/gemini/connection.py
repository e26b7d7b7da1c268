"""One dial of Gemini Live: the SDK session, its receive and write tasks, its message index.

A ``LiveConnection`` knows nothing of generations or callbacks: it hands every server message,
write outcome and its close to ``ConnectionHooks`` tagged with itself, and the transport
decides whether that connection still counts. Several can be open at once (a replacement
dialled while the incumbent still serves).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Final, Literal

from google import genai
from google.genai import errors, live, types
from loguru import logger
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from realtime_resumption.gemini import loop_lag, sdk_internals, server_events, tcp
from realtime_resumption.gemini.loop_lag import LoopLag
from realtime_resumption.gemini.messages import ClientMessage, Writer
from realtime_resumption.redaction import secret
from realtime_resumption.transport import (
    ConnectError,
    ConnectFailure,
    NotConnectedError,
    SendQueueFullError,
)

OUTBOX_LIMIT: Final = 2000
"""Messages a connection queues before refusing more: 40 s of 20 ms audio frames, longer
than the write watchdog (``WRITE_TIMEOUT``) lets a stalled socket live."""

WRITE_TIMEOUT: Final = 10.0
"""Seconds one write may wait for the socket before the socket is dropped as stalled."""

CLOSE_TIMEOUT: Final = 2.0
"""Seconds a close may take before the socket is dropped without the closing handshake."""

WRITE_BATCH: Final = 16
"""Messages the write loop writes before it lets the event loop run other work. A socket with
room in its buffer takes a write without suspending, so without this a replay (up to 30 s of
held audio: 1,500 messages) was written in one loop turn, stalling every other call of the
process for a fifth of a second. A connection that wrote its batch waits for the next turn, so
the connections of a process take turns; a replay still goes out at 16 frames of 20 ms per
loop turn, far faster than real time. The socket's buffer (websockets waits while it holds
more than its high-water mark) paces it to what the network and the service take."""

TURN_WRITE_SHARE: Final = 0.5
"""Share of the time since the previous loop turn that the write loops of one event loop may
spend writing in this turn, together (see :class:`WritePacer`). What the calls submitted in
that time costs less than this to write as long as the writes fit in half the loop, so it
is always written in the next turn, however long turns grow under load; only a backlog (a
replay, a storm of them) beyond it waits for later turns."""

TURN_WRITE_FLOOR: Final = 0.004
"""Seconds of writing every loop turn allows, however short the last one was: about 64
messages of the SDK's serialising, so a replay on a loop with little else to do is not held
to a crawl by its own short turns."""

TURN_WRITE_CEILING: Final = 0.02
"""Seconds of writing no loop turn exceeds (but for the one message that crosses it), however
long the last one was: the writes add at most this to any other call's wait, under the 50 ms
a caller notices."""

_PROVIDER_TEXT_LIMIT: Final = 300


class WritePacer:
    """How long the write loops of one event loop may write in its current turn: a pure
    decision on the clock readings it is given, so it is tested with a fake clock.

    A turn's allowance is a share (``share``) of the time since the previous turn began, kept
    between ``floor`` and ``ceiling`` seconds. What is due in real time (the messages the
    calls submitted since the last turn) is written as long as writing fits in that share of
    the loop's time; a backlog beyond it is paced, at most ``ceiling`` of writing per turn. A
    turn always takes its first write, so writing never stops.
    """

    __slots__ = ("_allowance", "_began", "_ceiling", "_floor", "_share", "_spent", "_turn")

    def __init__(
        self,
        *,
        share: float = TURN_WRITE_SHARE,
        floor: float = TURN_WRITE_FLOOR,
        ceiling: float = TURN_WRITE_CEILING,
    ) -> None:
        if not 0 <= share <= 1:
            raise ValueError(f"share must be between 0 and 1, got {share}")
        if not 0 <= floor <= ceiling:
            raise ValueError(f"need 0 <= floor <= ceiling, got {floor} and {ceiling}")
        self._share = share
        self._floor = floor
        self._ceiling = ceiling
        self._turn = 0
        self._began = -math.inf
        self._allowance = ceiling
        self._spent = 0.0

    @property
    def turn(self) -> int:
        """The current turn's number: what :meth:`wrote` is told a write began in."""
        return self._turn

    def turn_began(self, now: float) -> None:
        """A loop turn with writes to make began at ``now``."""
        elapsed = now - self._began
        self._allowance = min(max(self._share * elapsed, self._floor), self._ceiling)
        self._began = now
        self._spent = 0.0
        self._turn += 1

    def may_write(self) -> bool:
        """Whether another write fits in the current turn."""
        return self._spent == 0.0 or self._spent < self._allowance

    def wrote(self, turn: int, began: float, ended: float) -> None:
        """A write (and its bookkeeping) that began in turn ``turn`` took ``began`` to
        ``ended``. A write that waited for the socket ended in a later turn: not this turn's
        work, so not counted."""
        if turn == self._turn:
            # Never 0: a turn's first write counts, however coarse the clock.
            self._spent += max(ended - began, 1e-9)


_PACERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WritePacer] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True, slots=True)
class _Writing:
    """A connection's write side, fixed when writing starts: its event loop, the writer of
    its frames, and the loop's write pacer and lag monitor (shared by every connection on it)."""

    loop: asyncio.AbstractEventLoop
    frames: Writer
    pacer: WritePacer
    lag: LoopLag

    def turn_mark(self, now: float) -> None:
        """A write is due at ``now``: the first of a loop turn starts the turn's allowance and
        its lag probe (one probe serves both)."""
        if self.lag.mark_turn(self.loop, now):
            self.pacer.turn_began(now)


def _loop_pacer(loop: asyncio.AbstractEventLoop) -> WritePacer:
    pacer = _PACERS.get(loop)
    if pacer is None:
        pacer = _PACERS[loop] = WritePacer()
    return pacer


PONG_TIMEOUT: Final = 60.0
"""Seconds a keepalive ping may wait for its pong before the connection is dropped as dead.
The SDK dials with websockets' default keepalive (a ping every 20 s, 20 s for its pong), which
closes healthy calls with 1011 "keepalive ping timeout": the live service's pongs come 8-30 s
late. Twice the latest measured keeps them; a peer that answers no ping at all is still found
within the ping interval (20 s) and this, 80 s, and sooner on Linux (``USER_TIMEOUT``)."""

USER_TIMEOUT: Final = 20.0
"""Seconds written data may stay unacknowledged before the kernel drops the connection (Linux
``TCP_USER_TIMEOUT``; without it, the retransmission limit: about 15 minutes). The peer's
kernel acknowledges, never late for its application, so this only ends a connection whose peer
is gone from the network: within 20 s of the first write it leaves unanswered. A call writes
audio every 20 ms, and the keepalive pings every 20 s when it does not."""

ROUND_TRIP_REFRESH: Final = 0.1
"""Seconds a reading of the kernel's round-trip estimate serves the handovers that follow it
(:meth:`LiveConnection.round_trip_measure`), rather than one system call per 20 ms chunk. The
kernel's estimate is itself a smoothed average over eight acknowledgements or more, so it moves
slower than this; the loop's lag, which moves faster, is read at every handover."""

_BAD_FRAME: Final = (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError)
"""What the SDK raises for a frame it cannot parse."""


@dataclass(frozen=True, slots=True)
class ConnectionHooks:
    """Where a connection reports what happens to it, tagged with itself."""

    message: Callable[[LiveConnection, types.LiveServerMessage], None]
    receive_error: Callable[[LiveConnection, Exception], None]
    """A frame the SDK could not read, or an error frame; the connection goes on."""
    written: Callable[[LiveConnection, ClientMessage], None]
    write_failed: Callable[[LiveConnection, Sequence[ClientMessage], Exception], None]
    """These accepted messages were not written (the connection died, or the SDK refused
    one)."""
    closed: Callable[[LiveConnection, int | None, str | None], None]
    """Exactly once per connection that opened, with the close code and raw reason."""


class LiveConnection:
    """One WebSocket session with Gemini Live, from setup to close.

    ``message_index`` counts client messages on this connection as the server does for
    ``lastConsumedClientMessageIndex``: the setup is 0, and each queued message takes the next
    number (the queue is written in order, one message at a time).
    """

    def __init__(
        self,
        *,
        client: genai.Client,
        model: str,
        config: types.LiveConnectConfig,
        dial_gen: int,
        handle_supplied: bool,
        hooks: ConnectionHooks,
        owns_client: bool,
        outbox_limit: int = OUTBOX_LIMIT,
        write_batch: int = WRITE_BATCH,
        write_timeout: float = WRITE_TIMEOUT,
        close_timeout: float = CLOSE_TIMEOUT,
        pong_timeout: float = PONG_TIMEOUT,
        user_timeout: float = USER_TIMEOUT,
    ) -> None:
        self.dial_gen = dial_gen
        self.attempt_id = f"att_{dial_gen}"
        self.handle_supplied = handle_supplied
        self.session_id: str | None = None
        self.setup_seconds: float | None = None
        """How long the dial took, up to setupComplete (mostly the server's setup work)."""
        self.transport_generation: int | None = None
        """Set by the transport when the setup completed."""
        self.message_index = 0
        self.realtime_input_sent = False
        """A realtime input was queued: Gemini 3.x takes no more history after it."""
        self._client = client
        self._model = model
        self._config = config
        self._hooks = hooks
        self._owns_client = owns_client
        self._outbox: deque[ClientMessage] = deque()
        self._outbox_limit = outbox_limit
        if write_batch < 1:
            raise ValueError(f"write_batch must be >= 1, got {write_batch}")
        self._write_batch = write_batch
        self._write_timeout = write_timeout
        self._close_timeout = close_timeout
        self._pong_timeout = pong_timeout
        self._user_timeout = user_timeout
        self._socket: tcp.Socket | None = None
        self._estimate: tcp.RoundTrip | None = None
        self._estimated_at = -math.inf
        self._wake = asyncio.Event()
        self._writing_since: float | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._drained = asyncio.Event()
        self._drained.set()
        self._cm: AbstractAsyncContextManager[live.AsyncSession] | None = None
        self._session: live.AsyncSession | None = None
        self._receiver: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._writing: _Writing | None = None
        """What writes the messages, once writing started."""
        self._writing_now = False
        """:meth:`write_soon` is writing: a message queued meanwhile goes to the write loop."""
        self._lag: LoopLag | None = None
        self._state: Literal["new", "open", "closing", "closed"] = "new"
        self._broken = False
        self._released = False
        self._close_reported = False
        self._done = asyncio.Event()

    def __repr__(self) -> str:
        return f"<Connection {self.attempt_id} {self._state}>"

    @property
    def accepting(self) -> bool:
        """The connection takes messages."""
        return self._state == "open" and not self._broken

    @property
    def closed(self) -> bool:
        """The connection closed (or is closing)."""
        return self._state in ("closing", "closed")

    @property
    def busy(self) -> bool:
        """A message is queued or being written."""
        return bool(self._outbox)

    # --- opening ------------------------------------------------------------------------------

    async def open(self, timeout: float) -> None:
        """Dial and wait for the setup to complete, within ``timeout`` seconds.

        Raises ``ConnectError`` with the reason; nothing stays open after a failure.
        """
        cm = self._client.aio.live.connect(model=self._model, config=self._config)
        started = asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(timeout):
                session = await cm.__aenter__()
        except TimeoutError:
            failure = ConnectFailure(
                "timeout", f"no setupComplete within {timeout:g} s (the server never answered)"
            )
            await self._release_client()
            raise ConnectError(failure) from None
        except Exception as error:
            await self._release_client()
            # The SDK's frames hold the request headers (the credential) and the setup (the
            # handle): chain the cause without them, so a traceback logged with its variables
            # shows neither.
            raise ConnectError(_failure(error)) from _without_frames(error)
        self._cm = cm
        self._session = session
        self.session_id = session.session_id
        self.setup_seconds = asyncio.get_running_loop().time() - started
        self._state = "open"
        self._keep_alive()

    def _keep_alive(self) -> None:
        """Let the SDK's WebSocket wait ``pong_timeout`` for a pong, and have the kernel drop
        the connection when data stays unacknowledged for ``user_timeout`` (see
        ``PONG_TIMEOUT`` and ``USER_TIMEOUT``). websockets reads ``ping_timeout`` at every
        ping, and its first comes a ping interval (20 s) after the upgrade: after any setup
        that completed within the default ``setup_timeout`` (10 s)."""
        ws: Any = self._websocket()
        if hasattr(ws, "ping_timeout"):
            ws.ping_timeout = self._pong_timeout
        transport = getattr(ws, "transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:
            self._socket = sock
            tcp.set_user_timeout(sock, self._user_timeout)

    @property
    def round_trip(self) -> float | None:
        """The network round trip in seconds: the kernel's current estimate for the socket
        (``gemini.tcp``); None where it gives none. Never a WebSocket ping, whose pong the
        service's application may delay by seconds, and never the setup time: both are the
        server's work, not the network's."""
        estimate = tcp.round_trip(self._socket) if self._socket is not None else None
        return estimate.seconds if estimate is not None else None

    def round_trip_measure(self, now: float) -> tuple[float, float, float] | None:
        """The network round trip, how far it varies, and how much earlier than it is
        handled a handle still to come may be placed, in seconds, at ``now`` (the loop's
        clock); None where the kernel gives no estimate.

        The variation is twice the kernel's deviation (``gemini.tcp``). A handle is placed
        by its own lag (:meth:`late_by`); one still to come may be kept waiting as long as
        the loop was late in the last seconds (``LoopLag.recent``): the third figure, twice
        that, is how far back the outbox keeps what such a handle may lack. The kernel's
        estimate is read again after ``ROUND_TRIP_REFRESH``."""
        if now - self._estimated_at >= ROUND_TRIP_REFRESH:
            self._estimated_at = now
            self._estimate = tcp.round_trip(self._socket) if self._socket is not None else None
        estimate = self._estimate
        if estimate is None:
            return None
        recent = self._lag.recent(now) if self._lag is not None else 0.0
        return estimate.seconds, estimate.jitter, 2 * recent

    def late_by(self, handled_at: float) -> float:
        """How much earlier than ``handled_at`` a server message handled then may have
        reached the process: twice the lag of the loop turns it may have waited through (see
        ``gemini.loop_lag``). Twice, because the lag also delayed the writes before it (their
        completion is what the outbox times), and a sampled maximum underestimates the lag.
        A lag that ended before the message arrived does not count: the loop was on time
        since. The outbox moves a handle's arrival back by it, and widens the window of what
        the handle may lack by as much: a ping's latency used to carry the lag, the kernel's
        estimate does not. Under load a move replays more (heard twice), never less."""
        return 2 * self._lag.current(handled_at) if self._lag is not None else 0.0

    @property
    def endpoint(self) -> str | None:
        """Where the connection goes, as a key without secrets: the API's flavour and the
        host the SDK dialled (``Host`` of the upgrade request); None before it opened."""
        request = getattr(self._websocket(), "request", None)
        headers = getattr(request, "headers", None)
        host = headers.get("Host") if headers is not None else None
        if not isinstance(host, str) or not host:
            return None
        return f"{'vertex' if self._client.vertexai else 'gemini'}:{host.lower()}"

    def _websocket(self) -> object:
        # The SDK keeps its WebSocket private (``sdk_internals``): None without it.
        return sdk_internals.session_socket(self._session) if self._session is not None else None

    def start(self) -> None:
        """Start receiving and writing. Until then, server messages wait in the socket."""
        self.start_receiving()
        self.start_writing()

    def start_receiving(self) -> None:
        """Start handing server messages (and the close) to the hooks. Idempotent."""
        if self._state != "open" or self._receiver is not None:
            return
        # The loop's lag places handles in the input (``late_by``).
        self._lag = loop_lag.for_loop(asyncio.get_running_loop())
        self._receiver = asyncio.create_task(
            self._receive_loop(), name=f"gemini-live-receive-{self.attempt_id}"
        )

    def start_writing(self) -> None:
        """Start writing queued messages, under the stall watchdog. Idempotent."""
        if self._state != "open" or self._writer is not None:
            return
        assert self._session is not None
        loop = asyncio.get_running_loop()
        self._writing = _Writing(
            loop, Writer(self._session), _loop_pacer(loop), loop_lag.for_loop(loop)
        )
        self._writer = asyncio.create_task(
            self._write_loop(), name=f"gemini-live-write-{self.attempt_id}"
        )
        self._arm_watchdog(self._write_timeout)

    # --- sending ------------------------------------------------------------------------------

    def enqueue(self, message: ClientMessage, *, wake: bool = True) -> int:
        """Queue ``message`` for writing; returns its client message index. With ``wake``
        False the write loop is not woken: the caller calls :meth:`write_soon` once its
        bookkeeping of the message is done."""
        if not self.accepting:
            raise NotConnectedError(f"the connection {self.attempt_id} is closed")
        if len(self._outbox) >= self._outbox_limit:
            raise SendQueueFullError(
                f"{len(self._outbox)} messages wait for the socket of {self.attempt_id}"
            )
        self._outbox.append(message)
        if wake:
            self._wake.set()
        self._drained.clear()
        self.message_index += 1
        if message.kind != "content" and message.kind != "tool_response":
            self.realtime_input_sent = True
        return self.message_index

    def write_soon(self) -> None:
        """Write the queued message now when it is the only one, the write loop is idle, this
        loop turn has room for a write (``WritePacer``) and the socket takes it at once
        (``Writer.write_now``); otherwise wake the write loop. In a call's steady state (one
        20 ms chunk queued at a time) every chunk is written here, in the caller's turn, so
        no task wakes per chunk. The write is reported (``written``) before this returns; a
        message queued by that report goes to the write loop, so one call writes at most one
        message."""
        writing = self._writing
        if (
            writing is None
            or self._writing_now
            or len(self._outbox) != 1
            or self._writing_since is not None
            or not self.accepting
        ):
            self._wake.set()
            return
        pacer = writing.pacer
        began = writing.loop.time()
        writing.turn_mark(began)
        if not pacer.may_write():
            self._wake.set()
            return
        turn = pacer.turn
        message = self._outbox[0]
        try:
            written = writing.frames.write_now(message)
        except OSError as error:
            self._socket_lost(error)
            return
        except Exception as error:
            self._refused(message, error)
            return
        if written:
            self._wrote(message, turn, began)
        else:
            self._wake.set()

    def _wrote(self, message: ClientMessage, turn: int, began: float) -> None:
        """``message``, the head of the queue, was written in turn ``turn`` from ``began``:
        report it. A message the report feeds goes to the write loop (not ``write_soon``), so
        the batch and the pacer count it; the report's bookkeeping is the write's cost too."""
        assert self._writing is not None
        self._outbox.popleft()
        self._writing_now = True
        try:
            self._hooks.written(self, message)
        finally:
            self._writing_now = False
        self._drained_if_empty()
        self._writing.pacer.wrote(turn, began, self._writing.loop.time())

    def _refused(self, message: ClientMessage, error: Exception) -> None:
        """The SDK refused ``message``, the head of the queue: it is dropped and reported."""
        self._outbox.popleft()
        self._hooks.write_failed(self, [message], error)
        self._drained_if_empty()

    def _drained_if_empty(self) -> None:
        # After the report, never before: the report may queue the next message, and a
        # ``flush`` woken in between would return with it unwritten (a move closing the
        # connection behind it would lose it).
        if not self._outbox:
            self._drained.set()

    def _socket_lost(self, error: Exception) -> None:
        """The socket is gone (or the watchdog dropped it): nothing queued can be written."""
        self._broken = True
        lost = list(self._outbox)
        self._outbox.clear()
        self._drained.set()
        # The write loop sees the connection broken and ends.
        self._wake.set()
        self._hooks.write_failed(self, lost, error)

    async def flush(self, timeout: float) -> bool:
        """Wait until every queued message was written; False if that took over ``timeout``
        seconds or the connection closed first."""
        try:
            async with asyncio.timeout(timeout):
                await self._drained.wait()
        except TimeoutError:
            return False
        return self.accepting

    async def _write_loop(self) -> None:
        writing = self._writing
        assert writing is not None
        write, write_now = writing.frames.write, writing.frames.write_now
        outbox = self._outbox
        pacer = writing.pacer
        clock = writing.loop.time
        batch = self._write_batch
        run = 0
        while not self._broken:
            if not outbox:
                self._drained.set()
                self._wake.clear()
                await self._wake.wait()
                run = 0
                continue
            began = clock()
            if run < batch:
                writing.turn_mark(began)
            if run >= batch or not pacer.may_write():
                # Bounded work per loop turn, for this connection and for all of them: let
                # every other call of the process run first (``WRITE_BATCH``, ``WritePacer``).
                await asyncio.sleep(0)
                run = 0
                continue
            run += 1
            turn = pacer.turn
            message = outbox[0]
            # Bounded by the watchdog rather than a timer per message: this is the audio path.
            self._writing_since = began
            try:
                # Realtime input the socket takes at once is written without a coroutine;
                # the rest (and anything that must wait for the socket) is awaited.
                if not write_now(message):
                    await write(message)
            except (ConnectionClosed, OSError) as error:
                self._socket_lost(error)
                return
            except Exception as error:
                self._refused(message, error)
                continue
            finally:
                self._writing_since = None
            self._wrote(message, turn, began)

    def _arm_watchdog(self, delay: float) -> None:
        self._watchdog = asyncio.get_running_loop().call_later(delay, self._watch_writes)

    def _watch_writes(self) -> None:
        """Drop the socket when one write has waited ``write_timeout`` for it: it is stalled,
        and the close that follows is reported like any other."""
        self._watchdog = None
        if self._released:
            return
        since = self._writing_since
        now = asyncio.get_running_loop().time()
        if since is not None and now - since >= self._write_timeout:
            logger.warning("{!r}: a write waited {:.1f} s; dropping the socket", self, now - since)
            self._abort_socket()
            return
        self._arm_watchdog(
            self._write_timeout if since is None else since + self._write_timeout - now
        )

    # --- receiving ----------------------------------------------------------------------------

    async def _receive_loop(self) -> None:
        session = self._session
        assert session is not None
        reader = server_events.Reader(session)
        close: tuple[int | None, str | None] | None = None
        while close is None:
            try:
                message = await reader.next()
            except StopAsyncIteration:
                close = (None, None)  # the SDK read no message: its receive ended
                continue
            except Exception as error:
                close = self._receive_failed(error)
                continue
            _seal(message)
            self._hooks.message(self, message)
        code, reason = close
        if self._state == "closing" and not reason:
            reason = "closed by the client"
        await self._release()
        self._report_closed(code, reason)

    def _receive_failed(self, error: Exception) -> tuple[int | None, str | None] | None:
        """What an exception out of the SDK's receive means: None for a frame it could not
        read (reported, skipped: the socket is fine), else the close (code, reason). Never a
        third outcome, so the session never looks connected while nothing is received."""
        if isinstance(error, errors.APIError):
            if isinstance(error.details, dict):
                self._hooks.receive_error(self, error)  # an error frame from the server
                return None
            # The SDK reports every close, 1000 included, as an APIError with its code.
            return error.code, error.details
        if isinstance(error, ConnectionClosed):
            if error.rcvd is None:
                return 1006, None
            return error.rcvd.code, error.rcvd.reason
        if isinstance(error, _BAD_FRAME):
            # Unknown keys only, bad JSON, JSON that is not an object, nesting too deep.
            self._hooks.receive_error(self, error)
            return None
        # Anything else leaves the socket in an unknown state: drop it, so the session moves.
        logger.warning("{!r}: the receive failed ({}); dropping", self, type(error).__name__)
        return 1006, f"the receive failed ({type(error).__name__})"

    # --- closing ------------------------------------------------------------------------------

    async def close(self) -> Literal["closed", "forced"]:
        """Close within the close timeout: ``closed`` after a clean close, ``forced`` when the
        socket had to be dropped. Reports the close (once) before returning. Never raises
        (except cancellation)."""
        if self._state == "new":
            self._state = "closed"
            await self._release_client()
            return "closed"
        if self._state in ("closing", "closed"):
            try:
                async with asyncio.timeout(self._close_timeout * 2):
                    await self._done.wait()
            except TimeoutError:
                return "forced"
            return "closed"
        self._state = "closing"
        clean = await self._release()
        receiver = self._receiver
        if receiver is not None and receiver is not asyncio.current_task():
            try:
                async with asyncio.timeout(self._close_timeout):
                    await asyncio.shield(receiver)
            except TimeoutError:
                clean = False
                receiver.cancel()
                # wait, not await: the caller's own cancellation must still propagate.
                await asyncio.wait({receiver})
            except Exception as error:
                clean = False
                logger.debug("{!r}: the receive loop failed ({})", self, type(error).__name__)
        self._report_closed(1000, "closed by the client")
        return "closed" if clean else "forced"

    async def _release(self) -> bool:
        """Stop writing, leave the SDK session (closing the socket) and release the client.
        Runs once; False when the socket had to be dropped."""
        if self._released:
            return True
        self._released = True
        if self._state == "open":
            self._state = "closing"
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        clean = True
        writer = self._writer
        if writer is not None and writer is not asyncio.current_task():
            writer.cancel()
            await asyncio.wait({writer})
        self._drained.set()
        if self._outbox:
            lost = list(self._outbox)
            self._outbox.clear()
            self._hooks.write_failed(self, lost, NotConnectedError("the connection closed"))
        cm = self._cm
        if cm is not None:
            try:
                async with asyncio.timeout(self._close_timeout):
                    await cm.__aexit__(None, None, None)
            except Exception as error:
                clean = False
                logger.debug("{!r}: close not clean ({}); dropping the socket", self, error)
                self._abort_socket()
            # The socket cancelled its keepalive task as it closed; let that finish, so nothing
            # of this connection outlives its close.
            await asyncio.sleep(0)
        await self._release_client()
        return clean

    def _abort_socket(self) -> None:
        # Dropping the TCP connection is the only way to end a close handshake that does not
        # finish.
        transport = getattr(self._websocket(), "transport", None)
        if transport is not None:
            transport.abort()

    async def _release_client(self) -> None:
        if not self._owns_client:
            return
        self._owns_client = False
        # Bounded: a client whose close hangs must not hold the connection's close.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self._close_timeout):
                await self._client.aio.aclose()
        with contextlib.suppress(Exception):
            self._client.close()

    def _report_closed(self, code: int | None, reason: str | None) -> None:
        self._state = "closed"
        self._done.set()
        if self._close_reported:
            return
        self._close_reported = True
        self._hooks.closed(self, code, reason)


def _seal(message: types.LiveServerMessage) -> None:
    """Make a resumption handle a :class:`Secret` as soon as it arrives, so every value and
    record downstream of the receive loop shows it redacted."""
    update = message.session_resumption_update
    if update is not None and update.new_handle:
        update.new_handle = secret(update.new_handle)


def _without_frames(error: BaseException) -> BaseException:
    """``error`` and the exceptions chained to it, without their tracebacks."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.__traceback__ = None
        current = current.__cause__ or current.__context__
    return error


def _provider_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", "replace")
    text = str(value)
    return text[:_PROVIDER_TEXT_LIMIT] if text else None


def _failure(error: Exception) -> ConnectFailure:
    """What a failed dial says, with the provider's words kept apart."""
    if isinstance(error, InvalidStatus):
        status = error.response.status_code
        return ConnectFailure(
            "refused",
            f"the server refused the connection (HTTP {status})",
            code=status,
            provider_text=_provider_text(error.response.body),
        )
    if isinstance(error, errors.APIError):
        return ConnectFailure(
            "closed",
            f"the server closed the connection during setup (code {error.code})",
            code=error.code,
            provider_text=_provider_text(error.details),
        )
    if isinstance(error, ConnectionClosed):
        code = error.rcvd.code if error.rcvd else 1006
        return ConnectFailure(
            "closed",
            f"the connection closed during setup (code {code})",
            code=code,
            provider_text=_provider_text(error.rcvd.reason if error.rcvd else None),
        )
    if isinstance(error, ssl.SSLError):
        return ConnectFailure("unreachable", f"TLS failed ({type(error).__name__})")
    if isinstance(error, OSError):
        return ConnectFailure("unreachable", f"cannot reach the server ({type(error).__name__})")
    if isinstance(error, InvalidHandshake):
        return ConnectFailure("refused", f"the WebSocket handshake failed ({type(error).__name__})")
    return ConnectFailure("error", f"the dial failed ({type(error).__name__})")
