"""Keepalive: a late pong never closes a healthy connection, and a peer that answers no ping
is still dropped within the bound.

The SDK dials with websockets' default keepalive (a ping every 20 s, 20 s for its pong); the
live service's pongs come 8-30 s late. Here the SDK is given that keepalive at the emulator's
time scale (its ``async_client_args`` reach websockets' ``connect``), and the emulator answers
pings late (``pong_latency``); ``late_pongs.count_pings`` counts them."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from google import genai
from google.genai import types

from realtime_resumption.gemini import GeminiLiveTransport, connection
from realtime_resumption.gemini.connection import ConnectionHooks, LiveConnection
from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio
from realtime_resumption.transport import ContentTurn

from .late_pongs import count_pings
from .transport_helpers import MODEL, Recorder, quiet_hooks

TIME_SCALE = 0.02
STOCK_PING_INTERVAL = 20.0
STOCK_PING_TIMEOUT = 20.0
PONGS_LATE = 25.0
PONG_TIMEOUT = 60.0
"""The README's figures (Limits): a pong may take 60 s, and the kernel drops a connection whose
data stays unacknowledged for 20 s. Not the package's constants, so that changing those fails
here."""
USER_TIMEOUT = 20.0
LATEST_PONG = 30.0
"""The latest pong measured on the live service (README: 8-30 s)."""
CALL = 240.0
"""Seconds of the call, at the emulator's scale: four minutes."""


def _stock_keepalive_client(emu: Emulator, scale: float = TIME_SCALE) -> genai.Client:
    """A client of ``emu`` whose WebSockets keep alive as the SDK's do, at ``scale``."""
    return genai.Client(
        api_key="test-key",
        http_options=types.HttpOptions(
            base_url=emu.base_url,
            async_client_args={
                "ssl": emu.client_ssl_context(),
                "ping_interval": STOCK_PING_INTERVAL * scale,
                "ping_timeout": STOCK_PING_TIMEOUT * scale,
            },
        ),
    )


async def test_a_call_of_minutes_with_late_pongs_keeps_its_one_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pings = count_pings(monkeypatch)
    async with Emulator(EmulatorConfig(time_scale=TIME_SCALE, pong_latency=PONGS_LATE)) as emu:
        transport = GeminiLiveTransport(client=_stock_keepalive_client(emu), model=MODEL)
        rec = Recorder(transport)
        await transport.connect()
        try:
            chunks = round(CALL * TIME_SCALE / 0.02)
            for seq in range(1, chunks + 1):
                transport.send_audio(user_audio(seq, speech=False))
                if seq % 50 == 0:  # a question now and then
                    transport.send_live_text([ContentTurn("user", "hello there")])
                await asyncio.sleep(0.02)
        finally:
            await transport.disconnect()
        await emu.wait_disconnected()

    # The SDK pinged all along, and every pong came later than its own timeout allows.
    assert pings.count >= CALL / (STOCK_PING_INTERVAL + PONGS_LATE)
    assert rec.moves == []
    (session,) = emu.ledger.sessions.values()
    (connection,) = session.connections
    assert connection.closed_by == "client"
    assert rec.of("on_close") == [(1000, "closed by the client")]
    assert len(session.turns) == chunks // 50


def _hooks(closes: list[tuple[float, int | None, str | None]]) -> ConnectionHooks:
    def on_closed(_: LiveConnection, code: int | None, reason: str | None) -> None:
        closes.append((asyncio.get_running_loop().time(), code, reason))

    return quiet_hooks(closed=on_closed)


def _connection(
    client: genai.Client, closes: list[tuple[float, int | None, str | None]], **options: Any
) -> LiveConnection:
    """A connection through ``client`` (the SDK's keepalive), its closes noted in ``closes``
    with the loop's time."""
    return LiveConnection(
        client=client,
        model=MODEL,
        config=types.LiveConnectConfig(),
        dial_gen=1,
        handle_supplied=False,
        hooks=_hooks(closes),
        owns_client=True,
        **options,
    )


async def test_the_shipped_pong_timeout_outlasts_the_latest_pongs_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ``PONG_TIMEOUT`` exists for: every pong 30 s late, the latest measured, and the
    connection stays open through minutes of pings (the shipped figure, on the emulator's
    clock as the SDK's keepalive is here)."""
    pings = count_pings(monkeypatch)
    closes: list[tuple[float, int | None, str | None]] = []
    config = EmulatorConfig(time_scale=TIME_SCALE, pong_latency=LATEST_PONG)
    async with Emulator(config) as emu:
        conn = _connection(
            _stock_keepalive_client(emu), closes, pong_timeout=connection.PONG_TIMEOUT * TIME_SCALE
        )
        await conn.open(5)
        conn.start()
        try:
            for seq in range(1, round(CALL * TIME_SCALE / 0.02) + 1):
                if not conn.accepting:
                    break
                conn.enqueue(ClientMessage.audio(user_audio(seq, speech=False)))
                await asyncio.sleep(0.02)
            assert conn.accepting and closes == [], f"a late pong closed the connection: {closes}"
        finally:
            await conn.close()

    # A ping every 20 s, each answered 30 s later.
    assert pings.count >= CALL // (STOCK_PING_INTERVAL + LATEST_PONG)
    assert [(code, reason) for _, code, reason in closes] == [(1000, "closed by the client")]


DEAD_PEER_SCALE = 0.05
"""Long enough on the wall clock that a pong timeout 15 s too long overruns the bound."""


async def test_a_peer_that_answers_no_ping_is_dropped_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What bounds ``PONG_TIMEOUT`` from above: a peer that answers no ping is dropped within
    the ping interval and the README's 60 s (the shipped figure, on the emulator's clock)."""
    pings = count_pings(monkeypatch)
    scale = DEAD_PEER_SCALE
    ping_interval = STOCK_PING_INTERVAL * scale
    pong_timeout = connection.PONG_TIMEOUT * scale
    bound = (STOCK_PING_INTERVAL + PONG_TIMEOUT) * scale
    closes: list[tuple[float, int | None, str | None]] = []
    # A pong a day late: within the test, none comes.
    async with Emulator(EmulatorConfig(time_scale=scale, pong_latency=86_400.0)) as emu:
        conn = _connection(_stock_keepalive_client(emu, scale), closes, pong_timeout=pong_timeout)
        await conn.open(5)
        opened = asyncio.get_running_loop().time()
        conn.start()
        try:
            async with asyncio.timeout(bound + 2.0):
                while not closes:
                    # The connection may be closed a moment before its close is reported.
                    if conn.accepting:
                        conn.enqueue(ClientMessage.audio(user_audio(1, speech=False)))
                    await asyncio.sleep(0.02)
        finally:
            await conn.close()

    assert pings.count >= 1
    ((closed_at, code, reason),) = closes
    # Not before its pong was overdue: the SDK's own timeout (a third of it) did not apply.
    assert closed_at - opened >= ping_interval + LATEST_PONG * scale
    assert closed_at - opened >= pong_timeout
    assert closed_at - opened <= bound + 10.0 * scale
    # websockets failed the connection (1011 sent); the SDK reports it lost, as the transport
    # treats any connection that ends without the server's close frame.
    assert code == 1006, reason


async def test_the_sdks_connection_gets_the_keepalive() -> None:
    async with Emulator(EmulatorConfig(time_scale=TIME_SCALE)) as emu:
        closes: list[tuple[float, int | None, str | None]] = []
        conn = _connection(_stock_keepalive_client(emu, scale=1.0), closes)
        await conn.open(5)
        try:
            # The SDK keeps its WebSocket private; this is what websockets' keepalive reads.
            ws = conn._websocket()
            assert getattr(ws, "ping_timeout", None) == PONG_TIMEOUT
            sock = ws.transport.get_extra_info("socket")  # type: ignore[attr-defined]
            user_timeout = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
            assert user_timeout == USER_TIMEOUT * 1000
        finally:
            await conn.close()
