"""One OpenAI Realtime session over the ``openai`` SDK's realtime client.

A :class:`RealtimeConnection` is one socket, hence one server session: OpenAI Realtime keeps
nothing across sockets. It dials with the SDK (``client.realtime.connect(...)``, GA, or
``client.beta.realtime.connect(...)``, beta, whichever the flavour says; an
``AsyncAzureOpenAI`` client dials Azure's endpoint the same way), reads every server frame
into a typed event (:func:`~realtime_resumption.openai.realtime_server_events.read_server_event`)
for its owner, and writes client events in the order they were posted, from one writer task.
It knows no conversation and no move: the transport above decides what to send and when.

The SDK's own reconnection (``on_reconnecting``) is never enabled: it opens a fresh, empty
session and replays only its unsent queue (``openai/_websocket_connection.py``), which would
hide the end of the session from the transport that must rebuild it.

One reach into the SDK's private members: its connection's WebSocket (``_connection``, a
``websockets.asyncio`` connection in the GA and the beta client alike). With it, an event posted
while nothing waits to be written goes on the socket at once, through websockets' synchronous
send core (``reaches.DirectSend``, which declines whenever ``send`` would wait or
fail), instead of waking the writer task and passing through the SDK's ``send_raw``, whose
bookkeeping for its own reconnection (never enabled here) costs more than framing the 50 audio
chunks a second of a call. Probed once (:data:`SDK_SOCKET`); without it, or when the socket
declines, every event goes through the writer and the SDK.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from loguru import logger
from websockets.exceptions import ConnectionClosed, InvalidStatus

from realtime_resumption.openai.realtime_server_events import ServerEvent, read_server_event
from realtime_resumption.openai.session_config import Flavour
from realtime_resumption.reaches import DirectSend, Reach
from realtime_resumption.transport import ConnectError, ConnectFailure

CLOSE_TIMEOUT: Final = 2.0
"""Seconds a close may take before the socket is abandoned."""

_ids = itertools.count(1)


def _sdk_socket_member() -> str | None:
    from openai.resources.beta.realtime.realtime import AsyncRealtimeConnection as Beta
    from openai.resources.realtime.realtime import AsyncRealtimeConnection as GA

    for kind in (GA, Beta):
        socket = object()
        try:
            connection = kind(socket)  # type: ignore[arg-type]
        except Exception as error:
            return f"{kind.__module__}.AsyncRealtimeConnection(socket) raised {error!r}"
        if getattr(connection, "_connection", None) is not socket:
            return f"{kind.__module__}.AsyncRealtimeConnection keeps no _connection"
    return None


SDK_SOCKET: Final = Reach(
    "the openai SDK's AsyncRealtimeConnection._connection",
    "every client event goes through the writer task and the SDK's send",
    _sdk_socket_member,
)


def direct_send(sdk_connection: Any) -> DirectSend | None:
    """The synchronous writer of the SDK connection's WebSocket; None without the reach (or
    when the socket is not a ``websockets.asyncio`` connection)."""
    if not SDK_SOCKET.taken():
        return None
    return DirectSend.of(getattr(sdk_connection, "_connection", None))


def _close_of(exc: BaseException) -> tuple[int | None, str | None]:
    """The close code and reason a websockets close carries (the frame received, else sent)."""
    if isinstance(exc, ConnectionClosed):
        frame = exc.rcvd or exc.sent
        if frame is not None:
            return frame.code, frame.reason
        return 1006, None
    return None, None


async def dial(
    client: Any,
    *,
    model: str,
    flavour: Flavour,
    websocket_options: dict[str, Any],
    timeout: float,
    headers: Callable[[], Awaitable[Mapping[str, str]]] | None = None,
) -> Any:
    """Open the SDK's realtime connection (its ``AsyncRealtimeConnection``), bounded by
    ``timeout`` (``headers`` asked for within it); a failure is a :class:`ConnectError` whose
    message holds no credential."""
    resource = client.realtime if flavour == "ga" else client.beta.realtime
    try:
        async with asyncio.timeout(timeout):
            extra = dict(await _headers(headers)) if headers is not None else {}
            manager = resource.connect(
                model=model,
                extra_headers=extra,
                websocket_connection_options=dict(websocket_options),
            )
            return await manager.enter()
    except InvalidStatus as exc:
        status = exc.response.status_code
        raise ConnectError(
            ConnectFailure("refused", f"the service refused the connection (HTTP {status})", status)
        ) from None
    except TimeoutError:
        raise ConnectError(
            ConnectFailure("timeout", f"no connection within {timeout:g} s")
        ) from None
    except ConnectionClosed as exc:
        code, _ = _close_of(exc)
        raise ConnectError(
            ConnectFailure("closed", "the socket closed while opening", code)
        ) from None
    except OSError as exc:
        raise ConnectError(
            ConnectFailure("unreachable", f"the service is unreachable ({type(exc).__name__})")
        ) from None


async def _headers(headers: Callable[[], Awaitable[Mapping[str, str]]]) -> Mapping[str, str]:
    """The dial's own headers; the provider's failure (its message may hold a credential) is
    told by its type alone."""
    try:
        return await headers()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise ConnectError(
            ConnectFailure("unreachable", f"the dial's headers failed ({type(exc).__name__})")
        ) from None


class RealtimeConnection:
    """One server session: its socket, its reader and its writer (see the module docs).

    ``on_event`` gets every server event in order; ``on_closed`` once, with the close code
    and reason, when the socket ended without :meth:`close` (a drop, the cap, a server close).
    """

    def __init__(
        self,
        sdk_connection: Any,
        *,
        flavour: Flavour,
        on_event: Callable[[RealtimeConnection, ServerEvent], None],
        on_closed: Callable[[RealtimeConnection, int | None, str | None], None],
    ) -> None:
        self.id = f"oai-conn-{next(_ids)}"
        self.flavour: Flavour = flavour
        self._sdk = sdk_connection
        self._direct = direct_send(sdk_connection)
        self._on_event = on_event
        self._on_closed = on_closed
        self._outgoing: deque[dict[str, Any]] = deque()
        self._wake = asyncio.Event()
        self._closing = False
        self._ended = False
        self._waiters: list[tuple[Callable[[ServerEvent], bool], asyncio.Future[ServerEvent]]] = []
        self.written = 0
        """Client events written to the socket."""
        self.close_code: int | None = None
        """The code the socket ended with (None while open, or without a code)."""
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read(), name=f"{self.id}-read")
        self._writer = loop.create_task(self._write(), name=f"{self.id}-write")

    def __repr__(self) -> str:
        return f"RealtimeConnection({self.id}, {self.flavour}, ended={self._ended})"

    @property
    def open(self) -> bool:
        """Neither closed by the owner nor ended by the server."""
        return not (self._closing or self._ended)

    @property
    def queued(self) -> int:
        """Client events posted and not written yet."""
        return len(self._outgoing)

    def post(self, event: dict[str, Any]) -> None:
        """Queue ``event`` for the socket, after every event posted before it (written at once
        when nothing is queued and the socket takes it without waiting)."""
        if not self.open:
            return
        direct = self._direct
        if direct is not None and not self._outgoing:
            try:
                written = direct.send_text(json.dumps(event))
            except OSError:
                # The socket is aborted: queued, the event fails as any other would, and
                # the reader reports the close.
                written = False
            if written:
                self.written += 1
                return
        self._outgoing.append(event)
        self._wake.set()

    def expect(self, match: Callable[[ServerEvent], bool]) -> asyncio.Future[ServerEvent]:
        """A future of the first server event from now on that ``match`` accepts (delivered
        to the owner first), registered at once: an event that answers something posted after
        this call cannot be missed. It fails with :class:`ConnectError` when the socket ends
        first; cancelling it forgets it."""
        future: asyncio.Future[ServerEvent] = asyncio.get_running_loop().create_future()
        if not self.open:
            failure = ConnectFailure("closed", "the session has ended", self.close_code)
            future.set_exception(ConnectError(failure))
            return future
        waiter = (match, future)
        self._waiters.append(waiter)
        future.add_done_callback(lambda _: self._forget(waiter))
        return future

    async def wait_for(self, match: Callable[[ServerEvent], bool], timeout: float) -> ServerEvent:
        """The first server event from now on that ``match`` accepts. Raises ``TimeoutError``
        after ``timeout`` seconds, and :class:`ConnectError` when the socket ends before it."""
        future = self.expect(match)
        try:
            async with asyncio.timeout(timeout):
                return await future
        finally:
            future.cancel()

    def _forget(
        self, waiter: tuple[Callable[[ServerEvent], bool], asyncio.Future[ServerEvent]]
    ) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)

    async def close(self) -> None:
        """Close the socket (bounded by :data:`CLOSE_TIMEOUT`) and stop both tasks. Idempotent;
        ``on_closed`` is not called."""
        self._closing = True
        self._writer.cancel()
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await self._sdk.close()
        except Exception:
            logger.debug("{}: the close did not complete cleanly", self.id)
        self._reader.cancel()
        await asyncio.gather(self._reader, self._writer, return_exceptions=True)

    # --- tasks ------------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                frame = await self._sdk.recv_bytes()
                event = read_server_event(frame, self.flavour)
                try:
                    self._on_event(self, event)
                except Exception:
                    # The owner's fault must not end the session it is reading.
                    logger.exception("{}: handling a server event failed", self.id)
                self._release(event)
        except ConnectionClosed as exc:
            self._end(*_close_of(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("{}: the socket failed ({})", self.id, type(exc).__name__)
            self._end(None, None)

    async def _write(self) -> None:
        try:
            while True:
                while self._outgoing:
                    await self._send(self._outgoing[0])
                    self._outgoing.popleft()
                    self.written += 1
                self._wake.clear()
                await self._wake.wait()
        except asyncio.CancelledError:
            raise
        except ConnectionClosed:
            pass  # the reader sees the close and reports it
        except Exception as exc:
            # A socket that cannot be written to is no session: end it, so it is replaced.
            logger.warning(
                "{}: a write failed ({}); ending the session", self.id, type(exc).__name__
            )
            self._end(None, None)
            self._reader.cancel()

    async def _send(self, event: dict[str, Any]) -> None:
        # The GA client takes the text as it is; the beta client has no raw send, and checks
        # the event against its own types first.
        send_raw = getattr(self._sdk, "send_raw", None)
        if send_raw is not None:
            await send_raw(json.dumps(event))
        else:
            await self._sdk.send(event)

    def _release(self, event: ServerEvent) -> None:
        for match, future in list(self._waiters):
            if not future.done() and match(event):
                future.set_result(event)

    def _end(self, code: int | None, reason: str | None) -> None:
        if self._ended or self._closing:
            return
        self._ended = True
        self.close_code = code
        self._writer.cancel()
        failure = ConnectFailure("closed", "the session ended", code)
        for _, future in list(self._waiters):
            if not future.done():
                future.set_exception(ConnectError(failure))
        self._on_closed(self, code, reason)
