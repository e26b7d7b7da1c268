"""A hostile server: flapping connections, refused upgrades, raw frames, a goAway storm."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from google.genai import types
from websockets.asyncio.client import connect

from realtime_resumption.testing.emulator import Emulator

from .emu_helpers import (
    MODEL,
    PCM,
    config,
    handle_after_turn,
    live_config,
    read_until,
    read_until_closed,
)
from .test_emu_handshake import GEMINI_PATH, SETUP, ws_connect


async def test_flap_closes_every_new_connection_after_its_setup() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await handle_after_turn(session)  # set up before the flapping began
        emu.faults.flap(close_after=5.0, code=1008)  # 50 ms after setupComplete
        codes = []
        for _ in range(3):
            async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s:
                codes.append((await read_until_closed(s))[0])
        emu.faults.clear()
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s:
            with pytest.raises(TimeoutError):
                await read_until(s, lambda m: True, timeout=0.1)
        await emu.wait_disconnected()
    assert codes == [1008] * 3
    connections = emu.ledger.sessions[session.session_id].connections
    assert [c.close_code for c in connections] == [1000, 1008, 1008, 1008, 1000]
    for c in connections[1:4]:
        assert c.closed_by == "server" and c.closed_at - c.setup_at >= 0.05  # type: ignore[operator]


async def test_flap_can_drop_after_the_first_message_for_n_connections() -> None:
    async with Emulator(config()) as emu:
        emu.faults.flap(drop_on_first_message=True, n=2)
        client = emu.client()
        blob = types.Blob(data=b"\0\0" * 320, mime_type=PCM)
        codes = []
        for _ in range(2):
            async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
                await session.send_realtime_input(audio=blob)
                codes.append((await read_until_closed(session))[0])
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            await session.send_realtime_input(audio=blob)
            with pytest.raises(TimeoutError):
                await read_until(session, lambda m: True, timeout=0.1)
        await emu.wait_disconnected()
    assert codes == [1006, 1006]
    connections = [r.connections[0] for r in emu.ledger.sessions.values()]
    assert [(c.closed_by, c.close_code) for c in connections[:2]] == [("drop", 1006)] * 2
    assert [m.kind for m in connections[0].client_messages] == ["setup", "audio"]
    assert connections[2].closed_by == "client"  # the third was left alone


def test_flap_rejects_what_it_cannot_do() -> None:
    emu = Emulator(config())
    for bad in ({}, {"close_after": -1.0}, {"close_after": 1.0, "code": 99}):
        with pytest.raises(ValueError):
            emu.faults.flap(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [401, 403, 429, 503])
async def test_refuse_the_upgrade_with_a_status(status: int) -> None:
    async with Emulator(config()) as emu:
        emu.faults.refuse_next(2, f"http{status}")  # type: ignore[arg-type]
        client = emu.client()
        for _ in range(2):
            with pytest.raises(websockets.exceptions.InvalidStatus) as caught:
                async with client.aio.live.connect(model=MODEL, config=live_config()):
                    pass
            assert caught.value.response.status_code == status
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            assert session.session_id
    assert [a.outcome for a in emu.ledger.attempts] == [f"http{status}"] * 2 + ["accepted"]


async def test_refuse_all_until_cleared() -> None:
    async with Emulator(config()) as emu:
        emu.faults.refuse_next(1, "http429")
        emu.faults.refuse_all("http401")
        client = emu.client()
        statuses = []
        for _ in range(4):
            with pytest.raises(websockets.exceptions.InvalidStatus) as caught:
                async with client.aio.live.connect(model=MODEL, config=live_config()):
                    pass
            statuses.append(caught.value.response.status_code)
        emu.faults.refuse_all(None)
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            assert session.session_id
        with pytest.raises(ValueError):
            emu.faults.refuse_all("http418")  # type: ignore[arg-type]
    assert statuses == [429, 401, 401, 401]


@pytest.mark.parametrize(
    "frame",
    ["[1, 2]", '"str"', "[" * 2000 + "]" * 2000, "{not json", b'{"unknownKey": {"x": 1}}'],
)
async def test_send_raw_delivers_the_frame_unchanged(frame: str | bytes) -> None:
    async with Emulator(config()) as emu, ws_connect(emu) as ws:
        await ws.send(SETUP)
        assert "setupComplete" in json.loads(await ws.recv())
        applied = emu.faults.send_raw(frame)
        assert applied.count == 1 and await applied == 1
        assert await asyncio.wait_for(ws.recv(), 2) == frame  # str: a text frame, bytes: binary
    ((conn,),) = [r.connections for r in emu.ledger.sessions.values()]
    assert [(m.kind, m.delivered) for m in conn.server_messages][-1] == ("raw", True)


def test_send_raw_takes_only_text_or_bytes() -> None:
    with pytest.raises(TypeError, match="str or bytes"):
        Emulator(config()).faults.send_raw([1, 2])  # type: ignore[arg-type]


async def test_a_storm_sends_go_away_to_every_session_at_once() -> None:
    sessions = 30
    async with Emulator(config()) as emu:
        opened = asyncio.Event()
        stormed = asyncio.Event()
        ready = 0

        async def one() -> list[str]:
            nonlocal ready
            url = f"wss://127.0.0.1:{emu.port}{GEMINI_PATH}"
            ssl = emu.client_ssl_context()
            async with connect(url, ssl=ssl, additional_headers={"x-goog-api-key": "k"}) as ws:
                await ws.send(SETUP)
                await ws.recv()
                ready += 1
                if ready == sessions:
                    opened.set()
                await stormed.wait()
                return [json.dumps(json.loads(await asyncio.wait_for(ws.recv(), 5)))]

        tasks = [asyncio.create_task(one()) for _ in range(sessions)]
        await asyncio.wait_for(opened.wait(), 20)
        applied = emu.faults.go_away(10.0, close_at_deadline=False)
        assert applied.count == sessions
        stormed.set()
        received = await asyncio.gather(*tasks)
        assert await applied == sessions
    assert all(r == ['{"goAway": {"timeLeft": "0.100s"}}'] for r in received)
    times = [
        m.time
        for record in emu.ledger.sessions.values()
        for m in record.connections[0].server_messages
        if m.kind == "go_away"
    ]
    assert len(times) == sessions
