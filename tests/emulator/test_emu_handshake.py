"""Connecting: both API modes over TLS, routing, auth, bad client input, clean stop."""

from __future__ import annotations

import asyncio
import json
import os
import ssl

import pytest
import websockets
from google import genai
from websockets.asyncio.client import connect

from realtime_resumption.testing.emulator import Emulator

from .emu_helpers import MODEL, NO_PROXY, ask, config, live_config, read_turn, read_until_closed

GEMINI_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
VERTEX_PATH = "/ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"
SETUP = json.dumps({"setup": {"model": "models/m"}})


def exists(path: str) -> bool:
    return os.path.exists(path)


def wss(emu: Emulator, path: str) -> str:
    return f"wss://127.0.0.1:{emu.port}{path}"


def ws_connect(emu: Emulator, path: str = GEMINI_PATH, key: bool = True):  # type: ignore[no-untyped-def]
    headers = {"x-goog-api-key": "k"} if key else {}
    return connect(
        wss(emu, path), ssl=emu.client_ssl_context(), additional_headers=headers, **NO_PROXY
    )


@pytest.mark.parametrize("vertex", [False, True])
async def test_setup_round_trip_in_both_modes(vertex: bool) -> None:
    async with Emulator(config()) as emu:
        client = emu.client(vertex=vertex)
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            assert session.session_id is not None
            await ask(session, "hello")
            messages = await read_turn(session)
        await emu.wait_disconnected()
        record = emu.ledger.sessions[session.session_id]
        (conn,) = record.connections
        assert conn.api == ("vertex" if vertex else "gemini")
        assert conn.established and conn.closed_by == "client" and conn.close_code == 1000
        assert [m.kind for m in conn.client_messages] == ["setup", "client_content"]
        assert conn.client_messages[1].text == "hello"
        assert messages[-1].usage_metadata is not None
        assert messages[-1].usage_metadata.total_token_count == 12


@pytest.mark.parametrize(
    "path",
    [
        GEMINI_PATH,
        "//" + GEMINI_PATH.lstrip("/"),
        GEMINI_PATH.replace("v1beta", "v1alpha") + "Constrained",
        GEMINI_PATH.replace("v1beta", "v1"),
        VERTEX_PATH,
        "//" + VERTEX_PATH.lstrip("/").replace("v1beta1", "v1"),
        GEMINI_PATH + "?key=secret-key",
    ],
)
async def test_routes(path: str) -> None:
    async with Emulator(config()) as emu, ws_connect(emu, path) as ws:
        await ws.send(SETUP)
        reply = json.loads(await asyncio.wait_for(ws.recv(), 2))
        assert "sessionId" in reply["setupComplete"]
        assert "secret" not in str(emu.ledger.attempts)


async def test_server_frames_are_binary_json() -> None:
    async with Emulator(config()) as emu, ws_connect(emu) as ws:
        await ws.send(SETUP)
        frame = await asyncio.wait_for(ws.recv(), 2)
        assert isinstance(frame, bytes)


@pytest.mark.parametrize(
    ("path", "key", "status"),
    [
        ("/ws/other", True, 404),
        ("/", True, 404),
        (GEMINI_PATH, False, 401),
        (VERTEX_PATH, False, 401),
    ],
)
async def test_refused_upgrades(path: str, key: bool, status: int) -> None:
    async with Emulator(config()) as emu:
        with pytest.raises(websockets.exceptions.InvalidStatus) as caught:
            async with ws_connect(emu, path, key=key):
                pass
        assert caught.value.response.status_code == status
        assert emu.ledger.attempts[-1].outcome == f"http{status}"


async def test_missing_auth_through_the_sdk() -> None:
    async with Emulator(config()) as emu:
        # Client-level: google-genai before 2.34 takes no http_options in LiveConnectConfig.
        options = emu.http_options()
        options.headers = {"x-goog-api-key": ""}
        client = genai.Client(api_key="emulator-key", http_options=options)
        with pytest.raises(websockets.exceptions.InvalidStatus):
            async with client.aio.live.connect(model=MODEL, config=live_config()):
                pass


@pytest.mark.parametrize(
    "frames",
    [
        ["not json"],
        ['{"client_content": {"turnComplete": true}}'],
        [SETUP, "not json"],
        [SETUP, '{"bogus": {}}'],
        [SETUP, SETUP],
        [SETUP, '{"realtime_input": {"audio": {"data": "!!"}}}'],
        ['{"setup": {"model": "m", "sessionResumption": {"transparent": true}}}'],
    ],
)
async def test_bad_client_input_gets_1007(frames: list[str]) -> None:
    async with Emulator(config()) as emu:
        async with ws_connect(emu) as ws:
            for frame in frames:
                await ws.send(frame)
            with pytest.raises(websockets.exceptions.ConnectionClosed) as caught:
                async with asyncio.timeout(2):
                    while True:
                        await ws.recv()
        assert caught.value.rcvd is not None
        assert caught.value.rcvd.code == 1007
        assert caught.value.rcvd.reason == "Request contains an invalid argument."
        # The emulator is still fine: a new connection works.
        async with ws_connect(emu) as ws:
            await ws.send(SETUP)
            assert "setupComplete" in json.loads(await asyncio.wait_for(ws.recv(), 2))


async def test_no_setup_in_time_is_closed() -> None:
    async with Emulator(config(setup_timeout=5)) as emu, ws_connect(emu) as ws:
        with pytest.raises(websockets.exceptions.ConnectionClosed) as caught:
            await asyncio.wait_for(ws.recv(), 2)
        assert caught.value.rcvd is not None and caught.value.rcvd.code == 1011


async def test_stop_leaves_no_task_socket_or_file() -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before_tasks = asyncio.all_tasks()
    before_fds = open_fds()
    emu = Emulator(config(answer_chunks=10000))
    await emu.start()
    ca_file = emu.ca_file
    assert exists(ca_file)
    client = emu.client()
    ctx = client.aio.live.connect(model=MODEL, config=live_config())
    session = await ctx.__aenter__()
    await ask(session, "a long answer")  # still answering when the emulator stops
    reader = asyncio.create_task(read_until_closed(session))
    await asyncio.sleep(0.02)
    await emu.stop()
    code, messages = await reader
    assert code == 1001 and messages
    await ctx.__aexit__(None, None, None)
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == before_tasks
    assert not exists(ca_file)
    assert open_fds() <= before_fds
    assert emu.ledger.sessions[session.session_id].turns[0].outcome == "cut"


async def test_client_helpers() -> None:
    async with Emulator(config()) as emu:
        assert emu.base_url == f"https://127.0.0.1:{emu.port}"
        ctx = ssl.create_default_context(cafile=emu.ca_file)
        async with connect(
            wss(emu, GEMINI_PATH), ssl=ctx, additional_headers={"x-goog-api-key": "k"}, **NO_PROXY
        ) as ws:
            await ws.send(SETUP)
            assert "setupComplete" in json.loads(await asyncio.wait_for(ws.recv(), 2))
        assert emu.http_options().base_url == emu.base_url
    with pytest.raises(RuntimeError):
        _ = emu.base_url
