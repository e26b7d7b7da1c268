"""The emulated network delays everything on the wire alike: the upgrade, data frames, pings
and pongs, close frames and the end of the connection, in order, both ways.

Timing runs on real sockets with the emulator's time scaled; every bound is a lower one (a
delay can grow under load, never shrink).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from google.genai import types
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed, InvalidStatus

from realtime_resumption.outbox import OutboxLimits
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio
from realtime_resumption.testing.emulator.ledger import ConnectionRecord
from realtime_resumption.testing.emulator.network import connection_class

from ..transport.transport_helpers import measured_round_trip, quiet_hooks, started_connection
from .emu_helpers import MODEL, NO_PROXY, PCM, config, live_config, read_until_closed

PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = json.dumps({"setup": {"model": "models/net", "generationConfig": {}}})
ASK = json.dumps({"client_content": {"turns": [{"parts": [{"text": "go"}]}], "turnComplete": True}})
RTT = 0.2
"""The round trip these tests configure, on the emulator's clock."""


def slow_network(**changes: Any) -> EmulatorConfig:
    """200 ms round trips at 1/10: 20 ms on the wall clock, 10 ms each way."""
    changes.setdefault("time_scale", 0.1)
    # Pings here measure the network: pongs come as soon as the service reads the ping.
    changes.setdefault("pong_latency", 0.0)
    return config(round_trip=RTT, setup_latency=0.0, **changes)


def now() -> float:
    return asyncio.get_running_loop().time()


def only_connection(emu: Emulator) -> ConnectionRecord:
    ((conn,),) = [record.connections for record in emu.ledger.sessions.values()]
    return conn


@asynccontextmanager
async def raw_client(emu: Emulator, *, set_up: bool = True) -> AsyncIterator[ClientConnection]:
    """A websockets client (no SDK in between), after its setup (or before it)."""
    async with connect(
        f"wss://127.0.0.1:{emu.port}{PATH}",
        ssl=emu.client_ssl_context(),
        additional_headers={"x-goog-api-key": "net"},
        **NO_PROXY,
        max_size=2**20,
    ) as ws:
        if set_up:
            await ws.send(SETUP)
            await ws.recv()
        yield ws


def test_no_delay_means_websockets_own_connection() -> None:
    assert connection_class(0.0) is ServerConnection
    assert connection_class(0.003) is not ServerConnection


async def test_pings_take_the_round_trip_data_takes() -> None:
    cfg = slow_network()
    rtt = cfg.scaled(RTT)
    async with Emulator(cfg) as emu:
        dialled = now()
        async with raw_client(emu, set_up=False) as ws:
            opened = now()
            await ws.send(SETUP)
            await ws.recv()
            set_up = now()
            pings = [await (await ws.ping()) for _ in range(3)]
        await emu.wait_disconnected()
    # The HTTP upgrade, the setup and every ping cross there and back.
    assert opened - dialled >= rtt
    assert set_up - opened >= rtt
    assert min(pings) >= rtt
    (attempt,), conn = emu.ledger.attempts, only_connection(emu)
    assert emu.started_at + attempt.time - dialled >= rtt / 2  # the request's way there
    assert emu.started_at + conn.client_messages[0].time - opened >= rtt / 2


async def test_a_refused_upgrade_crosses_the_network_too() -> None:
    cfg = slow_network()
    async with Emulator(cfg) as emu:
        emu.faults.refuse_next(1, "http503")
        dialled = now()
        with pytest.raises(InvalidStatus) as refused:
            async with raw_client(emu, set_up=False):
                pass
        assert now() - dialled >= cfg.scaled(RTT)
    assert refused.value.response.status_code == 503


async def test_frames_and_pings_keep_their_order() -> None:
    cfg = slow_network()
    async with Emulator(cfg) as emu:
        async with raw_client(emu) as ws:
            pongs = []
            for seq in range(20):
                audio = user_audio(seq, speech=False)
                await ws.send(json.dumps(_realtime_audio(audio)))
                pongs.append(await ws.ping())
            latencies = [await pong for pong in pongs]
        await emu.wait_disconnected()
    conn = only_connection(emu)
    audio = [m for m in conn.client_messages if m.kind == "audio"]
    assert [m.audio_seqs for m in audio] == [(seq,) for seq in range(20)]
    assert min(latencies) >= cfg.scaled(RTT)


def _realtime_audio(data: bytes) -> dict[str, Any]:
    blob = {"data": base64.b64encode(data).decode(), "mimeType": PCM}
    return {"realtime_input": {"audio": blob}}


async def test_the_close_frame_follows_the_frames_sent_before_it() -> None:
    cfg = slow_network()
    async with Emulator(cfg) as emu:
        async with raw_client(emu) as ws:
            emu.faults.send_raw('{"one": 1}')
            emu.faults.send_raw('{"two": 2}')
            closing = emu.faults.close(1011)
            got = [await ws.recv(), await ws.recv()]
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            await closing
        await emu.wait_disconnected()
    assert got == ['{"one": 1}', '{"two": 2}']
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    conn = only_connection(emu)
    assert [(m.kind, m.delivered) for m in conn.server_messages] == [
        ("setup_complete", True),
        ("raw", True),
        ("raw", True),
    ]


async def test_a_drop_loses_what_is_in_flight() -> None:
    # The transcription of the first word is written and, in the same step, the connection
    # aborted: it is on its way, and never arrives.
    async with Emulator(slow_network()) as emu:
        emu.faults.flap(drop_on_first_message=True)
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            audio = user_audio(1, word="hello")
            await session.send_realtime_input(audio=types.Blob(data=audio, mime_type=PCM))
            code, messages = await read_until_closed(session)
        await emu.wait_disconnected()
    assert code == 1006
    assert not [m for m in messages if m.server_content and m.server_content.input_transcription]
    conn = only_connection(emu)
    assert [(m.kind, m.delivered) for m in conn.server_messages] == [
        ("setup_complete", True),
        ("input_transcription", False),
    ]
    assert conn.closed_by == "drop" and conn.close_code == 1006


async def test_frames_sent_after_the_client_vanished_are_lost_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The server learns of the abort one way (10 ms) later and answers until then, 0.4 ms a
    # chunk: what was on its way, or sent meanwhile, reaches a closed socket.
    cfg = slow_network(answer_chunks=200, chunk_interval=0.004)
    async with Emulator(cfg) as emu:
        with caplog.at_level(logging.WARNING):
            async with raw_client(emu) as ws:
                await ws.send(ASK)
                await ws.recv(decode=False)  # the first chunk
                aborted_at = now()
                ws.transport.abort()
            await emu.wait_disconnected()
    assert not [r for r in caplog.records if r.name.startswith(("asyncio", "websockets"))]
    conn = only_connection(emu)
    audio = [m for m in conn.server_messages if m.kind == "audio"]
    assert audio[0].delivered and not audio[-1].delivered
    delivered = [m.delivered for m in audio]
    assert delivered == sorted(delivered, reverse=True)  # what was lost is what came last
    assert conn.closed_by == "client" and conn.close_code == 1006
    assert conn.closed_at is not None
    assert emu.started_at + conn.closed_at - aborted_at >= cfg.one_way  # the reset's way here


class _TimerLoop(asyncio.SelectorEventLoop):
    """An event loop that remembers the callback of every timer still armed."""

    def __init__(self) -> None:
        super().__init__()
        self._armed: dict[asyncio.TimerHandle, Callable[..., object]] = {}

    def call_at(  # type: ignore[override]
        self, when: float, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        def fire(*a: Any) -> None:
            self._armed.pop(handle, None)
            callback(*a)

        handle = super().call_at(when, fire, *args, context=context)
        self._armed[handle] = callback
        return handle

    def armed(self) -> list[Callable[..., object]]:
        return [cb for handle, cb in self._armed.items() if not handle.cancelled()]


def test_a_closed_connection_leaves_no_task_or_timer_behind() -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, _TimerLoop)
        async with Emulator(slow_network(answer_chunks=3)) as emu:
            before = asyncio.all_tasks()
            for how in ("close", "abort"):
                async with raw_client(emu) as ws:
                    await ws.send(ASK)  # an answer on its way, pings both ways
                    await ws.recv()
                    await (await ws.ping())
                    if how == "abort":
                        ws.transport.abort()
                await emu.wait_disconnected()
            tasks = [t.get_name() for t in asyncio.all_tasks() - before]
            timers = [repr(cb) for cb in loop.armed()]
        return tasks, timers

    with asyncio.Runner(loop_factory=_TimerLoop) as runner:
        tasks, timers = runner.run(scenario())
    assert tasks == []
    assert timers == []


async def test_the_transport_reads_the_kernel_round_trip_which_the_tolerance_covers() -> None:
    # The transport reads the round trip from the kernel, never from a ping (the live service
    # pongs seconds late). The emulator's delay is added in user space, which the kernel does
    # not see; the arrival rule's tolerance covers it, as it covers the service's own time.
    cfg = config(round_trip=10 * RTT, setup_latency=0.0, time_scale=0.1)  # 200 ms of wall clock
    closed = asyncio.Event()
    hooks = quiet_hooks(closed=lambda conn, code, reason: closed.set())
    async with Emulator(cfg) as emu:
        conn = await started_connection(emu, hooks)
        try:
            measured = await measured_round_trip(conn)
        finally:
            assert await conn.close() == "closed"
        assert closed.is_set()
        await emu.wait_disconnected()
    assert measured < cfg.scaled(10 * RTT) / 2  # loopback: microseconds, a few ms when loaded
    assert EmulatorConfig().round_trip <= OutboxLimits().round_trip_tolerance
