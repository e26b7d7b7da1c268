"""One connection on its own: a stalled socket is dropped, and everything is reported once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from google import genai
from google.genai import types

from realtime_resumption.gemini.connection import ConnectionHooks, LiveConnection
from realtime_resumption.gemini.messages import ClientMessage

from .transport_helpers import MODEL, ScriptedServer


async def test_a_stalled_write_drops_the_socket_and_reports_what_was_lost() -> None:
    server = ScriptedServer(reading=False)
    await server.start()
    written: list[ClientMessage] = []
    lost: list[ClientMessage] = []
    closes: list[tuple[int | None, str | None]] = []
    closed = asyncio.Event()

    def on_lost(_: LiveConnection, messages: Sequence[ClientMessage], error: Exception) -> None:
        lost.extend(messages)

    def on_closed(_: LiveConnection, code: int | None, reason: str | None) -> None:
        closes.append((code, reason))
        closed.set()

    hooks = ConnectionHooks(
        message=lambda conn, message: None,
        receive_error=lambda conn, error: None,
        written=lambda conn, message: written.append(message),
        write_failed=on_lost,
        closed=on_closed,
    )
    client = genai.Client(api_key="k", http_options=server.http_options())
    conn = LiveConnection(
        client=client,
        model=MODEL,
        config=types.LiveConnectConfig(),
        dial_gen=1,
        handle_supplied=False,
        hooks=hooks,
        owns_client=True,
        write_timeout=0.2,
    )
    try:
        await conn.open(5)
        conn.start()
        big = b"\0" * 600_000  # under the server's 1 MiB frame limit once in base64
        for _ in range(40):  # far more than the socket buffers hold
            conn.enqueue(ClientMessage.media("video", big, "image/jpeg"))
        async with asyncio.timeout(10):
            await closed.wait()
        assert closes == [(1006, closes[0][1])]
        assert 0 < len(lost) and len(written) + len(lost) == 40
        assert not conn.accepting
        assert await conn.close() == "closed"
        assert len(closes) == 1
    finally:
        await server.stop()
