"""Opening a connection's socket before its setup is sent: break-before-make without the
socket's cost.

When the provider refuses a resume while the old connection is open, the move must close it
before the new connection's setup reaches the service, and input is held from that moment until
the switch. Everything before the setup frame need not wait: the credential, the client, TCP,
TLS and the WebSocket upgrade (three round trips or more on a real network). google-genai's
``live.connect`` opens the socket and sends the setup in one call, with no hook between the
two; its WebSocket comes from the module-level name ``google.genai.live.ws_connect``. So for a
dial made under a :class:`SetupGate`, :func:`install` has a wrapper put there
(``sdk_internals.wrap_ws_connect``) that opens the socket, reports it open, and hands it to the
SDK (which then sends the setup) only once the gate is released. Dials made without a gate, by
this package or anything else in the process, go straight through. If a google-genai version no
longer has that name, :func:`install` returns False and a move closes the old connection before
dialling, as it would without this module.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Final

from realtime_resumption.gemini import sdk_internals

_GATE: Final[ContextVar[SetupGate | None]] = ContextVar("realtime_resumption_setup_gate")


class SetupGate:
    """Holds one dial's setup frame until :meth:`release`; :attr:`socket_open` resolves when
    the socket is open (TCP, TLS and the WebSocket upgrade done)."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.socket_open: asyncio.Future[None] = loop.create_future()
        self._released = asyncio.Event()

    def release(self) -> None:
        """Let the SDK send the setup."""
        self._released.set()

    def enter(self) -> None:
        """Gate the dial that the current task makes (call it inside that task)."""
        _GATE.set(self)

    async def _opened(self) -> None:
        if not self.socket_open.done():
            self.socket_open.set_result(None)
        await self._released.wait()


class _GatedConnect:
    """``async with ws_connect(...)`` whose entry waits for the gate once the socket is open."""

    def __init__(self, connect: Any, gate: SetupGate) -> None:
        self._connect = connect
        self._gate = gate

    async def __aenter__(self) -> Any:
        websocket = await self._connect.__aenter__()
        try:
            await self._gate._opened()
        except BaseException:
            await self._connect.__aexit__(None, None, None)
            raise
        return websocket

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> Any:
        return await self._connect.__aexit__(kind, error, traceback)


def install() -> bool:
    """Have google-genai's live module open its sockets through the gate (once); False when the
    SDK has no such name (dials then send their setup as soon as the socket opens)."""
    return sdk_internals.wrap_ws_connect(_gated)


def _gated(connect: Any) -> Any:
    gate = _GATE.get(None)
    return connect if gate is None else _GatedConnect(connect, gate)
