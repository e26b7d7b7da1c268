"""As slow and quiet as the service: setup latency, the network's round trip, nothing said
after setupComplete until there is something to say."""

from __future__ import annotations

import asyncio

import pytest
from google.genai import types

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio

from .emu_helpers import (
    MODEL,
    PCM,
    ask,
    audio_ids,
    config,
    handle_after_turn,
    is_handle,
    live_config,
    next_handle,
    read_turn,
    read_until,
)


def _setup_times(emu: Emulator) -> list[tuple[float, float]]:
    """(recorded latency, setup message to setupComplete) of every established connection."""
    out = []
    for record in emu.ledger.sessions.values():
        for c in record.connections:
            if c.setup_at is not None and c.setup_latency is not None:
                out.append((c.setup_latency, c.setup_at - c.client_messages[0].time))
    return out


def test_defaults_are_the_service_s() -> None:
    default = EmulatorConfig()
    assert default.setup_latency == 0.3 and not default.update_after_setup
    assert 0 < default.round_trip <= 0.02
    assert EmulatorConfig(round_trip=0.01, time_scale=0.5).one_way == pytest.approx(0.0025)
    for bad in ((0.2, 0.1), (-1.0, 0.1), -0.1):
        with pytest.raises(ValueError, match="setup_latency"):
            EmulatorConfig(setup_latency=bad)
    with pytest.raises(ValueError, match="round_trip"):
        EmulatorConfig(round_trip=-0.001)


async def test_setup_takes_the_configured_latency_on_the_emulator_clock() -> None:
    async with Emulator(config(setup_latency=10.0)) as emu:  # 100 ms at 1/100
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()):
            pass
        await emu.wait_disconnected()
    ((latency, took),) = _setup_times(emu)
    assert latency == pytest.approx(0.1) and took >= 0.1


async def test_a_latency_range_is_drawn_from_the_seed() -> None:
    async def latencies(seed: int) -> list[float]:
        async with Emulator(config(setup_latency=(1.0, 9.0), seed=seed)) as emu:
            for _ in range(4):
                async with emu.client().aio.live.connect(model=MODEL, config=live_config()):
                    pass
            await emu.wait_disconnected()
        times = _setup_times(emu)
        assert all(took >= latency for latency, took in times)
        return [latency for latency, _ in times]

    first, again, other = await latencies(1), await latencies(1), await latencies(2)
    assert first == again != other
    assert all(0.01 <= x <= 0.09 for x in first + other) and len(set(first)) == 4


async def test_slow_setups_apply_to_the_next_n_resumed_setups() -> None:
    async with Emulator(config(setup_latency=0.0)) as emu:
        emu.faults.slow_setups(2, 20.0, resumed_only=True)  # 200 ms each
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await handle_after_turn(session)
        for _ in range(3):
            async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)):
                pass
        await emu.wait_disconnected()
    connections = emu.ledger.sessions[session.session_id].connections
    assert [c.setup_latency for c in connections] == pytest.approx([0.0, 0.2, 0.2, 0.0])
    assert all(c.setup_at - c.client_messages[0].time >= 0.2 for c in connections[1:3])  # type: ignore[operator]


async def test_slow_setups_count_new_sessions_unless_resumed_only() -> None:
    async with Emulator(config(setup_latency=0.0)) as emu:
        emu.faults.slow_setups(1, 5.0)
        with pytest.raises(ValueError):
            emu.faults.slow_setups(-1, 1.0)
        with pytest.raises(ValueError):
            emu.faults.slow_setups(1, -1.0)
        for _ in range(2):
            async with emu.client().aio.live.connect(model=MODEL, config=live_config()):
                pass
        await emu.wait_disconnected()
    assert [latency for latency, _ in _setup_times(emu)] == pytest.approx([0.05, 0.0])


async def test_a_client_that_gives_up_during_a_slow_setup_is_let_go() -> None:
    async with Emulator(config(setup_latency=0.0)) as emu:
        emu.faults.slow_setups(1, 600.0)  # six seconds at 1/100

        async def dial() -> None:
            async with emu.client().aio.live.connect(model=MODEL, config=live_config()):
                pass

        dialling = asyncio.create_task(dial())
        # The client gives up once its setup has reached the emulator (however long TLS and
        # the upgrade took on a busy machine), long before the six seconds.
        async with asyncio.timeout(5.0):
            while not emu.ledger.sessions:  # noqa: ASYNC110 - the ledger has no event for it
                await asyncio.sleep(0.01)
        dialling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await dialling
        await emu.wait_disconnected(timeout=2.0)  # not after the six seconds
    ((conn,),) = [r.connections for r in emu.ledger.sessions.values()]
    assert conn.setup_at is None and conn.closed_by == "client"


async def test_nothing_follows_setup_complete_by_default() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            with pytest.raises(TimeoutError):
                await read_until(session, lambda m: True, timeout=0.1)
            await ask(session, "hi")
            await read_turn(session)
            await next_handle(session)  # the first handle follows the first answer
        await emu.wait_disconnected()
    (conn,) = emu.ledger.sessions[session.session_id].connections
    kinds = [m.kind for m in conn.server_messages]
    assert kinds[:2] == ["setup_complete", "resumption_update"]
    assert conn.server_messages[1].time > conn.client_messages[1].time  # only after the ask
    assert emu.ledger.sessions[session.session_id].handles[0].snapshot.history


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_an_update_right_after_setup_is_an_option(profile: str) -> None:
    async with Emulator(config(profile=profile, update_after_setup=True)) as emu:
        client = emu.client(vertex=profile == "vertex")
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            messages = await read_until(session, is_handle)
    assert len(messages) == 1
    (handle,) = emu.ledger.sessions[session.session_id].handles
    assert handle.snapshot.history == () and handle.snapshot.consumed_audio == ()


async def test_every_frame_crosses_the_round_trip_in_order() -> None:
    # 200 ms round trip on the emulator's clock: 100 ms each way.
    cfg = config(time_scale=1.0, round_trip=0.2, setup_latency=0.0, chunk_interval=0.001)
    async with Emulator(cfg) as emu:
        loop = asyncio.get_running_loop()
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            sent_at = loop.time()
            for seq in range(50):
                data = user_audio(seq, speech=False)
                await session.send_realtime_input(audio=types.Blob(data=data, mime_type=PCM))
            await ask(session, "hi")
            first = await read_until(session, lambda m: True)
            answered_at = loop.time()
            messages = first + await read_turn(session)
        await emu.wait_disconnected()
    assert answered_at - sent_at >= 0.2  # there and back
    (conn,) = emu.ledger.sessions[session.session_id].connections
    audio = [m for m in conn.client_messages if m.kind == "audio"]
    assert [m.audio_seqs for m in audio] == [(seq,) for seq in range(50)]
    # The delay is latency, not a rate: 50 frames are not 50 delays apart.
    assert audio[-1].time - audio[0].time < 2.5
    assert audio_ids(messages) == [(0, k) for k in range(10)]
    # The close the client sent also crossed the network after its last frame.
    assert conn.closed_by == "client" and conn.close_code == 1000
