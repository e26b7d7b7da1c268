"""Where an emulator listens: a WebSocket server over TLS on the emulated network.

The TLS material is made at start (a throwaway CA, a certificate for 127.0.0.1) and its CA file
exists while the listener listens; everything on the wire crosses the emulated network
(``network``). Both emulators (Gemini Live, OpenAI Realtime) listen through one, keep the
connections they serve in a ``LiveConnections`` and stop as a ``ListeningEmulator``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

from loguru import logger
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from .certs import TlsMaterial
from .network import connection_class

MAX_CLIENT_MESSAGE = 16 * 2**20
# Not scaled: a close handshake under load must not turn into an abort (1006).
_CLOSE_TIMEOUT = 5.0
_STOP_TIMEOUT = 10.0

Handler = Callable[[ServerConnection], Awaitable[None]]
ProcessRequest = Callable[[ServerConnection, Request], Response | None]


def received_close(ws: ServerConnection) -> tuple[int | None, str | None]:
    """The code and reason of the close ``ws`` received (None, None without one). Read from
    the protocol: websockets 13's connection has no ``close_code`` of its own."""
    return ws.protocol.close_code, ws.protocol.close_reason


class Droppable(Protocol):
    """A served connection that can be aborted (no close frame)."""

    def drop(self) -> None: ...


LiveT = TypeVar("LiveT", bound=Droppable)


class LiveConnections(Generic[LiveT]):
    """The connections an emulator is serving, and whether there are none left."""

    def __init__(self) -> None:
        self._live: set[LiveT] = set()
        self._none = asyncio.Event()
        self._none.set()

    async def serve(
        self,
        conn: LiveT,
        run: Callable[[], Awaitable[None]],
        finish: Callable[[], Awaitable[None]],
    ) -> None:
        """Serve ``conn``: live from now until ``run`` has ended (a closed connection ends it
        as any end does) and ``finish`` has recorded the end, or failed to (its error is the
        handler's; the connection is no longer served either way)."""
        self._live.add(conn)
        self._none.clear()
        try:
            await run()
        except ConnectionClosed:
            pass
        finally:
            try:
                await finish()
            finally:
                self._live.discard(conn)
                if not self._live:
                    self._none.set()

    def __iter__(self) -> Iterator[LiveT]:
        return iter(self._live)

    def drop_all(self) -> None:
        """Abort every connection being served."""
        for conn in list(self._live):
            conn.drop()

    async def wait_none(self, timeout: float) -> None:
        """Wait until none is left; TimeoutError after ``timeout`` seconds."""
        await asyncio.wait_for(self._none.wait(), timeout)


class Listener:
    """One emulator's TLS WebSocket server; ``start`` then ``stop`` (once each)."""

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._wanted_port = port
        self._tls: TlsMaterial | None = None
        self._server: Server | None = None
        self._port: int | None = None

    @property
    def listening(self) -> bool:
        """Started and not stopped."""
        return self._server is not None

    async def start(
        self,
        handler: Handler,
        process_request: ProcessRequest,
        *,
        one_way: float,
        pong_delay: Callable[[], float] | None = None,
    ) -> None:
        """Make the certificates and listen; ``one_way`` is the network's delay each way."""
        if self._server is not None:
            raise RuntimeError("the emulator is already running")
        self._tls = TlsMaterial(self._host)
        try:
            self._server = await serve(
                handler,
                self._host,
                self._wanted_port,
                ssl=self._tls.server_context(),
                process_request=process_request,
                compression=None,
                max_size=MAX_CLIENT_MESSAGE,
                close_timeout=_CLOSE_TIMEOUT,
                create_connection=connection_class(one_way, pong_delay),
            )
        except BaseException:
            self._tls.remove()
            self._tls = None
            raise
        self._port = self._server.sockets[0].getsockname()[1]

    async def stop(self, abort: Callable[[], None]) -> None:
        """Close every connection (1001) and stop listening; if they do not close in time,
        ``abort`` them. The CA file is removed either way."""
        server, self._server = self._server, None
        try:
            if server is not None:
                server.close()
                try:
                    await asyncio.wait_for(server.wait_closed(), _STOP_TIMEOUT)
                except TimeoutError:
                    logger.warning("emulator: connections did not close in time; aborting them")
                    abort()
                    await server.wait_closed()
        finally:
            if self._tls is not None:
                self._tls.remove()
                self._tls = None

    @property
    def port(self) -> int:
        """The port it listens on."""
        if self._port is None or self._server is None:
            raise RuntimeError("the emulator is not running")
        return self._port

    @property
    def ca_file(self) -> str:
        """Path of the CA certificate (PEM) that clients must trust."""
        if self._tls is None:
            raise RuntimeError("the emulator is not running")
        return self._tls.ca_file

    def client_context(self) -> ssl.SSLContext:
        """An SSL context trusting the CA (and only it)."""
        if self._tls is None:
            raise RuntimeError("the emulator is not running")
        return self._tls.client_context()


class ListeningEmulator(Generic[LiveT]):
    """What both emulators are as servers: a ``Listener`` and the connections live on it.

    Each emulator starts its own way (``start``); both stop the same way and serve as
    ``async with`` blocks, and give clients the port and the CA to trust.
    """

    def __init__(self, host: str, port: int) -> None:
        self._listener = Listener(host, port)
        self._live = LiveConnections[LiveT]()

    async def start(self) -> None:
        """Make the certificates and start listening."""
        raise NotImplementedError

    async def stop(self) -> None:
        """Close every connection (1001), stop listening and remove the CA file; the
        connections that do not close in time are dropped."""
        await self._listener.stop(self._live.drop_all)

    async def wait_disconnected(self, timeout: float = 5.0) -> None:
        """Wait until no connection is open (and the ledger has recorded every close).

        Raises TimeoutError after ``timeout`` seconds (not scaled).
        """
        await self._live.wait_none(timeout)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        """The port the emulator listens on."""
        return self._listener.port

    @property
    def ca_file(self) -> str:
        """Path of the CA certificate (PEM) that clients must trust."""
        return self._listener.ca_file

    def client_ssl_context(self) -> ssl.SSLContext:
        """An SSL context trusting the emulator's CA."""
        return self._listener.client_context()
