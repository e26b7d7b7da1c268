"""The network between the emulator and its clients: a fixed one-way delay each way, in order.

It sits between each connection's socket and websockets, so everything that crosses the wire
is delayed alike: the HTTP upgrade and its response, data frames, pings and pongs (which
websockets answers by itself), close frames, and the end of the connection. A client that
measures the round trip by pinging sees what its data sees. The TLS handshake happens below
it and crosses at once.

Each direction is a FIFO stamped on entry: bytes leave ``delay`` seconds after they entered
(within a burst up to ``_BATCH`` later, never earlier), never before the bytes ahead of them,
so the delay adds latency without costing throughput. One timer per direction is armed while
something is on its way, and none once the connection ended. Without a delay websockets' own
connection class is used: no hop, no timer.

The service's pongs can also come late (``pong_latency``): websockets answers a ping in its
protocol layer as soon as the ping is parsed, so the emulator's protocol hands pings to the
connection instead, which answers each one when its drawn delay has passed, in the order of
the pings. Nothing else waits behind a late pong: data and close frames leave as written. The
pong then crosses the network like any frame; its timers end with the connection.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, cast

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol

_T = TypeVar("_T")

_BATCH = 0.0005
"""A stream of items is delivered at most once per this long, or per delay if shorter (each
item up to that much late, never early): a timer per frame of a burst would cost more than
the frames themselves."""


class _Link(Generic[_T]):
    """One direction: each item is handed to ``deliver`` ``delay`` s after it was put (a
    burst's within one batch), in order."""

    def __init__(self, delay: float, deliver: Callable[[_T], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._delay = delay
        self._batch = min(_BATCH, delay)
        self._deliver = deliver
        self._items: deque[tuple[float, _T]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def empty(self) -> bool:
        """Nothing is on its way."""
        return not self._items

    def put(self, item: _T, *, at_once: bool = False) -> None:
        """Send ``item``; ``at_once``: due now, but still behind what is on its way."""
        self._items.append((self._loop.time() + (0.0 if at_once else self._delay), item))
        self._arm()

    def clear(self) -> list[_T]:
        """Stop: what is on its way is returned, never delivered."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        items = [item for _, item in self._items]
        self._items.clear()
        return items

    def _arm(self, earliest: float = 0.0) -> None:
        if self._timer is None and self._items:
            self._timer = self._loop.call_at(max(self._items[0][0], earliest), self._arrive)

    def _arrive(self) -> None:
        self._timer = None
        now = self._loop.time()
        try:
            while self._items and self._items[0][0] <= now:
                self._deliver(self._items.popleft()[1])
        finally:
            self._arm(now + self._batch)


@dataclass(frozen=True)
class _Mark:
    """Follows the bytes written before it: ``then(True)`` once they all reached the socket,
    ``then(False)`` if some never will."""

    then: Callable[[bool], None]


_Command = Literal["eof", "close", "abort"]
_Outgoing = bytes | _Mark | _Command


@dataclass(frozen=True)
class _Lost:
    """The socket's end (``connection_lost``), with its exception."""

    exc: Exception | None


_Incoming = bytes | Literal["eof"] | _Lost


class _DelayedTransport(asyncio.Transport):
    """What websockets writes reaches the socket ``delay`` s later, in order; so do the half
    close, the close and the abort (an abort drops what is on its way, both ways)."""

    def __init__(
        self, transport: asyncio.Transport, delay: float, on_abort: Callable[[], None]
    ) -> None:
        super().__init__()
        self._transport = transport
        self._out: _Link[_Outgoing] = _Link(delay, self._cross)
        self._on_abort = on_abort
        self._closing = False
        """close() or abort() was called: nothing written after it crosses."""
        self._aborted = False
        self.shut = False
        """The close or the abort reached the socket: its end is this side's doing."""
        self._gone = False
        """The socket is closing or closed: bytes that reach it now are lost."""
        self._lost = False
        """Some bytes written never reached the socket."""
        self._ended = False

    def crossed(self, then: Callable[[bool], None]) -> None:
        """Call ``then`` once everything written so far reached the socket (True), or some of
        it never will (False)."""
        if self._lost or self._out.empty:
            then(not self._lost)
        else:
            self._out.put(_Mark(then))

    def socket_gone(self) -> None:
        """The socket ended (the peer closed or the connection was lost)."""
        self._gone = True

    def ended(self) -> None:
        """The connection ended: nothing more crosses, no timer stays armed."""
        self._closing = self._ended = True
        self._drop()

    def _drop(self) -> None:
        dropped = self._out.clear()
        if dropped:
            self._lost = True
        for item in dropped:
            if isinstance(item, _Mark):
                item.then(False)

    def _cross(self, item: _Outgoing) -> None:
        if isinstance(item, _Mark):
            item.then(not self._lost)
        elif isinstance(item, bytes):
            if self._gone or self._transport.is_closing():
                self._lost = True  # quietly: a real socket's peer would not read it either
            else:
                self._transport.write(item)
        elif item == "eof":
            if not (self._gone or self._transport.is_closing()):
                self._transport.write_eof()
        else:
            self.shut = True
            if item == "close":
                self._transport.close()
            else:
                self._transport.abort()

    # --- asyncio.WriteTransport ------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            self._lost = True
        elif data:
            self._out.put(bytes(data))

    def write_eof(self) -> None:
        if not self._closing:
            self._out.put("eof")

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._out.put("close")

    def abort(self) -> None:
        if self._aborted:
            return
        self._aborted = True
        if self.shut or self._ended:
            self._transport.abort()  # the socket is closing already: now, at once
            return
        # The reset crosses the network too; what was on its way, either way, is lost.
        self._closing = True
        self._drop()
        self._lost = True
        self._on_abort()
        self._out.put("abort")

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    # --- asyncio.ReadTransport and BaseTransport -------------------------------------------

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)


class _LatePongProtocol(ServerProtocol):
    """websockets' server protocol, except that a ping is handed to ``on_ping`` (which must
    answer it) instead of being answered at once."""

    on_ping: Callable[[bytes], None]

    def recv_frame(self, frame: Frame) -> None:
        if frame.opcode is Opcode.PING:
            self.events.append(frame)  # as websockets does; its connection ignores pings
            self.on_ping(bytes(frame.data))
        else:
            super().recv_frame(frame)


class _LatePongs(ServerConnection):
    """A websockets server connection that answers each ping ``pong_delay()`` seconds late,
    in the order of the pings; nothing else waits."""

    pong_delay: Callable[[], float]

    def __init__(self, protocol: ServerProtocol, *args: Any, **kwargs: Any) -> None:
        # The protocol serve() made, with pings left to this connection.
        protocol.__class__ = _LatePongProtocol
        cast(_LatePongProtocol, protocol).on_ping = self._ping
        super().__init__(protocol, *args, **kwargs)
        self._pongs: deque[tuple[bytes, asyncio.TimerHandle]] = deque()

    @property
    def pongs_due(self) -> int:
        """Pings received and not answered yet."""
        return len(self._pongs)

    def _ping(self, data: bytes) -> None:
        due = self.loop.time() + self.pong_delay()
        if self._pongs:
            due = max(due, self._pongs[-1][1].when())  # pongs keep the pings' order
        self._pongs.append((data, self.loop.call_at(due, self._pong)))

    def _pong(self) -> None:
        # Timers due at the same time may fire in any order: the oldest ping is answered.
        data, _ = self._pongs.popleft()
        if self.protocol.state is not State.OPEN:
            return
        self.protocol.send_pong(data)
        try:
            self.send_data()
        except Exception as exc:  # as websockets' own data_received() handles it
            self.set_connection_exc(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        for _, timer in self._pongs:
            timer.cancel()
        self._pongs.clear()
        super().connection_lost(exc)


class _DelayedConnection(ServerConnection):
    """A websockets server connection whose bytes cross the network both ways."""

    one_way: float

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._cut = False
        self._in: _Link[_Incoming] = _Link(self.one_way, self._arrive)
        self._wire = _DelayedTransport(
            cast(asyncio.Transport, transport), self.one_way, self._abort_inbound
        )
        super().connection_made(self._wire)

    def _abort_inbound(self) -> None:
        self._cut = True
        self._in.clear()

    def data_received(self, data: bytes) -> None:
        if not self._cut:
            self._in.put(data)

    def eof_received(self) -> None:
        self._wire.socket_gone()
        if not self._cut:
            self._in.put("eof")
        # None: the socket closes (under TLS it does anyway); what is on its way still comes.

    def connection_lost(self, exc: Exception | None) -> None:
        self._wire.socket_gone()
        # An end this side caused is known here at once; the peer's crosses the network.
        self._in.put(_Lost(exc), at_once=self._wire.shut)

    def _arrive(self, item: _Incoming) -> None:
        if isinstance(item, _Lost):
            self._wire.ended()
            super().connection_lost(item.exc)
        elif item == "eof":
            super().eof_received()
        else:
            super().data_received(item)


def connection_class(
    one_way: float, pong_delay: Callable[[], float] | None = None
) -> type[ServerConnection]:
    """The ``create_connection`` class for ``websockets.asyncio.server.serve`` on a network
    with ``one_way`` seconds of delay each way, whose pongs leave ``pong_delay()`` seconds
    after their ping arrived (websockets' own class without a delay or late pongs)."""
    bases: tuple[type[ServerConnection], ...] = ()
    if one_way > 0:
        bases += (_DelayedConnection,)
    if pong_delay is not None:
        bases += (_LatePongs,)
    if not bases:
        return ServerConnection
    connection = cast(type[ServerConnection], type("EmulatedConnection", bases, {}))
    if one_way > 0:
        cast(type[_DelayedConnection], connection).one_way = one_way
    if pong_delay is not None:
        cast(type[_LatePongs], connection).pong_delay = staticmethod(pong_delay)
    return connection


def _when_crossed(ws: ServerConnection, then: Callable[[bool], None]) -> None:
    """Call ``then(True)`` once everything written to ``ws`` so far crossed the network, or
    ``then(False)`` if some of it never will (the connection was dropped or ended first)."""
    transport = ws.transport
    if isinstance(transport, _DelayedTransport):
        transport.crossed(then)
    else:
        then(True)


async def send_crossing(
    ws: ServerConnection, frame: str | bytes, noted: Callable[[bool], None] | None = None
) -> asyncio.Future[bool]:
    """Write ``frame`` to ``ws`` now; the future says whether it crossed the network (False at
    once if the connection is closed). ``noted(delivered)`` is called when it is known that it
    crossed or never will, even if the future was cancelled meanwhile."""
    done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    try:
        await ws.send(frame)
    except ConnectionClosed:
        done.set_result(False)
        return done

    def crossed(delivered: bool) -> None:
        if noted is not None:
            noted(delivered)
        if not done.done():  # a task awaiting it may have been cancelled
            done.set_result(delivered)

    _when_crossed(ws, crossed)
    return done
