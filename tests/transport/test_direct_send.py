"""Text frames written without a coroutine (``reaches.DirectSend``), on real
``websockets`` connections: written when the socket takes them at once, declined (nothing written) whenever
``Connection.send`` would wait or fail, and used by the transport for every checked chunk after
the first, over real TLS."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.reaches import DirectSend

from .transport_helpers import GRACE, MODEL, ScriptedServer


class _Peer:
    """A local WebSocket server keeping what it reads."""

    def __init__(self) -> None:
        self.received: list[str | bytes] = []

    async def handle(self, ws: ServerConnection) -> None:
        async for message in ws:
            self.received.append(message)


@contextlib.asynccontextmanager
async def _client(peer: _Peer) -> AsyncIterator[ClientConnection]:
    async with serve(peer.handle, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}", close_timeout=0.5) as ws:
            yield ws


async def _received(peer: _Peer, count: int) -> list[str | bytes]:
    async with asyncio.timeout(5):
        while len(peer.received) < count:  # noqa: ASYNC110 - the peer has no event for it
            await asyncio.sleep(0.005)
    return peer.received


async def test_frames_written_at_once_arrive_in_order_among_awaited_ones() -> None:
    peer = _Peer()
    async with _client(peer) as ws:
        direct = DirectSend.of(ws)
        assert direct is not None
        assert direct.send_text("one")
        await ws.send("two")
        assert direct.send_text('{"three": "é"}')
        assert await _received(peer, 3) == ["one", "two", '{"three": "é"}']


async def test_declined_when_the_socket_would_make_send_wait() -> None:
    # A peer that stops reading after the setup (over TLS, as the service is reached): the
    # socket's buffers fill, then the transport's, and ``send`` would wait for the drain.
    server = ScriptedServer(reading=False)
    await server.start()
    try:
        options = server.http_options()
        assert options.base_url is not None and options.async_client_args is not None
        uri = options.base_url.replace("https://", "wss://") + "/ws"
        async with connect(uri, ssl=options.async_client_args["ssl"], close_timeout=0.2) as ws:
            await ws.send(json.dumps({"setup": {}}))
            await ws.recv()
            direct = DirectSend.of(ws)
            assert direct is not None
            frame = "x" * 500_000
            written = 0
            while direct.send_text(frame):
                written += 1
                assert written < 400, "the write buffer never filled"
                await asyncio.sleep(0)  # the TLS layer moves bytes to the socket on its turns
            buffered = ws.transport.get_write_buffer_size()
            # Declined at the first send that would wait (the buffer over its high-water mark).
            assert ws.paused
            assert not direct.send_text("small")
            assert ws.transport.get_write_buffer_size() == buffered, "a declined send wrote"
            ws.transport.abort()
    finally:
        await server.stop()


async def test_declined_once_the_connection_closes() -> None:
    peer = _Peer()
    async with _client(peer) as ws:
        direct = DirectSend.of(ws)
        assert direct is not None
        await ws.close()
        assert not direct.send_text("late")
    assert peer.received == []


async def test_declined_while_a_fragmented_message_is_under_way() -> None:
    peer = _Peer()
    async with _client(peer) as ws:
        direct = DirectSend.of(ws)
        assert direct is not None
        release = asyncio.Event()
        attempts: list[bool] = []

        async def fragments() -> AsyncIterator[str]:
            yield "frag-1"
            attempts.append(direct.send_text("between"))
            await release.wait()
            yield "frag-2"

        sending = asyncio.create_task(ws.send(fragments()))
        await asyncio.sleep(0)
        async with asyncio.timeout(5):
            while not attempts:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
        release.set()
        await sending
        assert attempts == [False]
        assert await _received(peer, 1) == ["frag-1frag-2"]


class _RefusingTransport:
    """Stands in for a transport whose write raises, which asyncio's own transports only do on
    misuse: a real one cannot be made to."""

    def __init__(self, real: asyncio.Transport) -> None:
        self.real = real
        self.aborted = False

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        raise RuntimeError("refused")

    def abort(self) -> None:
        self.aborted = True
        self.real.abort()


async def test_a_refused_write_aborts_the_connection_and_raises_oserror() -> None:
    peer = _Peer()
    async with _client(peer) as ws:
        direct = DirectSend.of(ws)
        assert direct is not None
        refusing = _RefusingTransport(ws.transport)
        ws.transport = refusing  # type: ignore[assignment]
        with pytest.raises(OSError, match="refused a write"):
            direct.send_text("x")
        assert refusing.aborted
        ws.transport = refusing.real


def test_only_websockets_connections_get_a_direct_sender() -> None:
    class Other:
        async def send(self, text: str) -> None: ...

    assert DirectSend.of(Other()) is None
    assert DirectSend.of(None) is None


async def test_the_transport_writes_every_checked_chunk_directly(
    scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct_writes: list[str] = []
    send_text = DirectSend.send_text

    def counted(self: DirectSend, text: str) -> bool:
        written = send_text(self, text)
        if written:
            direct_writes.append(text)
        return written

    monkeypatch.setattr(DirectSend, "send_text", counted)
    transport = GeminiLiveTransport(
        model=MODEL, api_key="k", http_options=scripted.http_options(), tool_call_grace=GRACE
    )
    await transport.connect()
    chunks = [bytes([n]) * 640 for n in range(5)]
    for pcm in chunks:
        transport.send_audio(pcm)
    async with asyncio.timeout(5):
        while len(scripted.received) < len(chunks):  # noqa: ASYNC110
            await asyncio.sleep(0.005)
    await transport.disconnect()
    got: list[dict[str, Any]] = scripted.received
    assert [m["realtime_input"]["audio"]["data"] for m in got] == [
        base64.urlsafe_b64encode(pcm).decode() for pcm in chunks
    ]
    # The first chunk of the process checks the spelling against the SDK's, through ``send``;
    # the rest go out directly, as the same frames.
    assert [json.loads(text) for text in direct_writes] == got[-len(direct_writes) :]
    assert len(direct_writes) >= len(chunks) - 1


async def test_in_a_calls_steady_state_each_chunk_is_written_before_send_audio_returns(
    scripted: ScriptedServer,
) -> None:
    # No task wakes per chunk: the chunk is on the socket when the call returns.
    transport = GeminiLiveTransport(
        model=MODEL, api_key="k", http_options=scripted.http_options(), tool_call_grace=GRACE
    )
    await transport.connect()
    try:
        transport.send_audio(b"\x01\x00" * 320)  # the first checks the SDK's spelling
        async with asyncio.timeout(5):
            while transport.get_diagnostics().input.written < 1:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
        for n in range(5):
            transport.send_audio(bytes([n + 2, 0]) * 320)
            assert transport.get_diagnostics().input.written == n + 2
            await asyncio.sleep(0.02)
        async with asyncio.timeout(5):
            while len(scripted.received) < 6:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
    finally:
        await transport.disconnect()
