"""The service as teams measured it in 2026 (the emulator's defaults), and the kinder service
still available: a resume refused while the session's earlier connection is open, late pongs,
the session cap without context-window compression, handles valid for a while after their
session ended, and the ledger's speech and silence.

Timing runs on real sockets with the emulator's time scaled; lower bounds are exact (a delay
can grow under load, never shrink), upper bounds carry a margin for a loaded machine.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from google.genai import errors, types
from google.genai.live import AsyncSession
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosedError

from realtime_resumption.testing.emulator import KIND_SERVICE, Emulator, EmulatorConfig, user_audio
from realtime_resumption.testing.emulator.audio import UserAudioDecoder
from realtime_resumption.testing.emulator.config import PROFILES, REFUSAL_TIMINGS
from realtime_resumption.testing.emulator.ledger import SessionRecord
from realtime_resumption.testing.emulator.models import Profile
from realtime_resumption.testing.emulator.network import _LatePongs, connection_class
from realtime_resumption.testing.emulator.wire import Setup, parse_client_message

from .emu_helpers import (
    MODEL,
    NO_PROXY,
    PCM,
    ask,
    config,
    handle_after_turn,
    live_config,
    read_turn,
    read_until_closed,
)
from .test_emu_network import ASK, PATH, SETUP, raw_client

SLACK = 0.5
"""Upper bounds' margin on a loaded machine (seconds)."""


def now() -> float:
    return asyncio.get_running_loop().time()


def test_the_defaults_are_the_service_as_measured_and_the_kind_one_is_one_call_away() -> None:
    default = EmulatorConfig()
    assert default.refuse_resume_while_open
    assert default.refuse_resume_while_open_when == "before_setup_complete"
    assert default.pong_latency == (8.0, 30.0)
    assert default.session_cap == 900.0
    assert default.handle_validity_seconds == 7200.0
    assert EmulatorConfig(profile="vertex").handle_validity_seconds == 86400.0
    assert EmulatorConfig(handle_validity=60.0).handle_validity_seconds == 60.0
    assert default.handle_lifetime is None and not default.overstay_1008
    kind = EmulatorConfig.kind(profile="vertex")
    assert kind.profile == "vertex" and not kind.refuse_resume_while_open
    assert (kind.pong_latency, kind.session_cap) == (0.0, None)
    assert EmulatorConfig(pong_latency=[1.0, 2.0]).pong_latency == (1.0, 2.0)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"refuse_resume_while_open_when": "soon"}, "refuse_resume_while_open_when"),
        ({"pong_latency": (3.0, 1.0)}, "pong_latency"),
        ({"pong_latency": -1.0}, "pong_latency"),
        ({"session_cap": 0.0}, "session_cap"),
        ({"handle_validity": -1.0}, "handle_validity"),
        ({"handle_lifetime": -1.0}, "handle_lifetime"),
    ],
)
def test_bad_service_settings_are_refused(changes: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        EmulatorConfig(**changes)


# --- a resume while the session's earlier connection is open ---------------------------------


async def _resume_refused(client: Any, handle: str, when: str) -> int:
    """Try to resume from ``handle``; the close code of the refusal."""
    cfg = live_config(handle=handle)
    if when == "before_setup_complete":
        with pytest.raises(errors.APIError) as caught:
            async with client.aio.live.connect(model=MODEL, config=cfg):
                pass
        return caught.value.code
    async with client.aio.live.connect(model=MODEL, config=cfg) as early:
        code, messages = await read_until_closed(early)
    assert messages == []
    return code


@pytest.mark.parametrize("when", REFUSAL_TIMINGS)
@pytest.mark.parametrize("profile", PROFILES)
async def test_a_resume_while_the_session_is_open_is_refused_and_works_once_it_closed(
    profile: Profile, when: str
) -> None:
    latency = 0.2
    cfg = config(
        profile=profile,
        refuse_resume_while_open_when=when,
        setup_latency=latency / 0.01,
        answer_chunks=1,
    )
    async with Emulator(cfg) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as old:
            handle = await handle_after_turn(old)
            assert await _resume_refused(client, handle, when) == 1011
            await ask(old, "still there?")  # the old connection still serves
            await read_turn(old)
        # Closed first, the same handle works.
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as new:
            assert new.session_id == old.session_id
        await emu.wait_disconnected()
    first, refused, resumed = emu.ledger.sessions[old.session_id].connections
    assert (first.refused, refused.refused, resumed.refused) == (None, "open-session", None)
    assert resumed.established and resumed.resumed_handle_index is not None
    assert refused.close_code == 1011 and refused.closed_by == "server"
    took = (refused.closed_at or 0.0) - refused.client_messages[0].time
    if when == "before_setup_complete":
        # Right after the setup frame: no setupComplete, no setup latency.
        assert [m.kind for m in refused.server_messages] == []
        assert refused.setup_at is None and took < latency
    else:
        assert [m.kind for m in refused.server_messages] == ["setup_complete"]
        assert took >= latency


@pytest.mark.parametrize("how", ["config", "fault attribute"])
async def test_the_kind_service_takes_make_before_break(how: str) -> None:
    changes = {"refuse_resume_while_open": False} if how == "config" else {}
    async with Emulator(config(answer_chunks=1, **changes)) as emu:
        if how == "fault attribute":
            # The fault attribute of old still switches it while the emulator runs.
            assert emu.faults.refuse_resume_while_open
            emu.faults.refuse_resume_while_open = False
        assert not emu.config.refuse_resume_while_open
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as old:
            handle = await handle_after_turn(old)
            cfg = live_config(handle=handle)
            async with client.aio.live.connect(model=MODEL, config=cfg) as new:
                await ask(new, "hi")
                await read_turn(new)
        await emu.wait_disconnected()
    summary = emu.ledger.summary().sessions[old.session_id]
    assert summary.connections == 2 and summary.refused == 0
    assert summary.gaps[0] < 0  # they overlapped


@pytest.mark.parametrize("overstay", [False, True])
@pytest.mark.parametrize("profile", PROFILES)
async def test_a_connection_kept_open_to_its_go_away_deadline(
    profile: Profile, overstay: bool
) -> None:
    async with Emulator(config(profile=profile, overstay_1008=overstay)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await emu.faults.go_away(5.0)  # 50 ms
            code, messages = await read_until_closed(session)
        await emu.wait_disconnected()
    assert any(m.go_away is not None for m in messages)
    (record,) = emu.ledger.sessions[session.session_id].connections
    if overstay:
        assert (code, record.close_reason) == (
            1008,
            "client failed to close the connection after receiving a GoAway signal",
        )
    else:
        assert code == {"gemini": 1011, "vertex": 1000}[profile]


# --- late pongs --------------------------------------------------------------------------------


async def test_pongs_come_late_and_nothing_waits_behind_them() -> None:
    cfg = config(pong_latency=20.0)  # 200 ms at 1/100
    async with Emulator(cfg) as emu:
        async with raw_client(emu) as ws:
            pinged = now()
            pong = await ws.ping()
            await ws.send(ASK)
            await ws.recv()  # the answer's first frame
            answered = now()
            latency = await pong
        await emu.wait_disconnected()
    assert latency >= 0.2
    assert answered - pinged < 0.2  # data did not wait behind the pong


@pytest.mark.parametrize(("setting", "low", "high"), [((10.0, 20.0), 0.1, 0.2), (0.0, 0.0, 0.0)])
async def test_each_pong_is_drawn_from_the_range_or_prompt(
    setting: float | tuple[float, float], low: float, high: float
) -> None:
    async with Emulator(config(pong_latency=setting)) as emu:
        async with raw_client(emu) as ws:
            latencies = [await (await ws.ping()) for _ in range(3)]
        await emu.wait_disconnected()
    round_trip = emu.config.scaled(emu.config.round_trip)
    assert min(latencies) >= low + round_trip
    assert max(latencies) < high + SLACK


@pytest.mark.parametrize("pong_latency", [50.0, 0.0])
async def test_a_keepalive_shorter_than_the_pongs_closes_a_healthy_connection(
    pong_latency: float,
) -> None:
    """What the report saw: websockets' keepalive (here 0.1 s pings, 0.2 s timeout; its
    default is 20 s) closes with 1011 a connection whose pongs take 0.5 s."""
    async with Emulator(config(pong_latency=pong_latency)) as emu:
        async with connect(
            f"wss://127.0.0.1:{emu.port}{PATH}",
            ssl=emu.client_ssl_context(),
            additional_headers={"x-goog-api-key": "net"},
            **NO_PROXY,
            ping_interval=0.1,
            ping_timeout=0.2,
        ) as ws:
            await ws.send(SETUP)
            await ws.recv()
            if pong_latency:
                with pytest.raises(ConnectionClosedError) as closed:
                    await asyncio.wait_for(ws.recv(), 2.0)
                assert closed.value.sent is not None and closed.value.sent.code == 1011
            else:
                with pytest.raises(TimeoutError):  # alive and quiet, pings answered
                    await asyncio.wait_for(ws.recv(), 0.6)
        await emu.wait_disconnected()


async def test_pongs_keep_the_order_of_their_pings_and_end_with_the_connection() -> None:
    served: list[ServerConnection] = []
    delays = iter([0.3, 0.05, 60.0])

    async def handler(ws: ServerConnection) -> None:
        served.append(ws)
        await ws.wait_closed()  # the test reads from the connection itself

    factory = connection_class(0.0, lambda: next(delays))
    async with serve(handler, "127.0.0.1", 0, create_connection=factory) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}", ping_interval=None, **NO_PROXY) as ws:
            first, second = await ws.ping(), await ws.ping()
            # The second ping's own delay is shorter: its pong still follows the first's.
            latencies = [await first, await second]
            await ws.ping()  # answered in 60 s: still due when the connection ends
            await ws.send("after the ping")  # read by the server after the ping
            (conn,) = served
            assert isinstance(conn, _LatePongs)
            assert await asyncio.wait_for(conn.recv(), 2) == "after the ping"
            assert conn.pongs_due == 1
        await conn.wait_closed()
    assert min(latencies) >= 0.3
    assert conn.pongs_due == 0  # its timer went with the connection


# --- the session cap without context-window compression ---------------------------------------

CAP_SCALE = 0.001
"""The cap's 900 s are 900 ms, the notice's 50 s 50 ms."""


def capped(**changes: Any) -> EmulatorConfig:
    return config(time_scale=CAP_SCALE, **changes)


def _compression() -> dict[str, Any]:
    window = types.ContextWindowCompressionConfig(sliding_window=types.SlidingWindow())
    return {"context_window_compression": window}


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_session_without_compression_ends_at_the_cap_for_good(profile: Profile) -> None:
    cfg = capped(profile=profile)
    cap, notice = cfg.scaled(900.0), cfg.scaled(cfg.notice)
    async with Emulator(cfg) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await handle_after_turn(session)
            code, messages = await read_until_closed(session, timeout=cap + 3)
        await emu.wait_disconnected()
        with pytest.raises(errors.APIError) as caught:
            async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)):
                pass
        await emu.wait_disconnected()
    assert code == {"gemini": 1011, "vertex": 1000}[profile]
    (go_away,) = [m.go_away for m in messages if m.go_away is not None]
    assert go_away.time_left == "0.050s"
    assert caught.value.code == 1007
    record = emu.ledger.sessions[session.session_id]
    first, refused = record.connections
    assert first.setup is not None and not first.setup.compression
    assert first.setup_at is not None and first.closed_at is not None
    # From when setupComplete was posted (the session serves from then), not ``setup_at``
    # (after its write returned, later on a loaded machine).
    (served,) = [m.time for m in first.server_messages if m.kind == "setup_complete"]
    (sent,) = [m for m in first.server_messages if m.kind == "go_away"]
    assert sent.time - served >= cap - notice
    assert cap <= first.closed_at - served < cap + SLACK
    assert record.capped_at is not None
    assert refused.refused == "session-ended" and refused.close_code == 1007


async def test_the_cap_counts_connected_time_across_resumed_connections() -> None:
    cfg = capped(answer_chunks=1)
    cap = cfg.scaled(900.0)
    async with Emulator(cfg) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as first:
            handle = await handle_after_turn(first)
            await asyncio.sleep(cap / 2)
        await emu.wait_disconnected()
        await asyncio.sleep(cap)  # no connection open: not session time
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s2:
            code, _ = await read_until_closed(s2, timeout=cap + 3)
        await emu.wait_disconnected()
    assert code == 1011
    one, two = emu.ledger.sessions[first.session_id].connections
    assert one.setup_at and one.closed_at and two.setup_at and two.closed_at
    first_time, second_time = one.closed_at - one.setup_at, two.closed_at - two.setup_at
    assert first_time >= cap / 2
    assert second_time < cap  # the resume did not start the count again
    assert cap <= first_time + second_time < cap + SLACK
    assert two.closed_at - one.setup_at >= 1.5 * cap  # the time between did not count


@pytest.mark.parametrize("why", ["compression", "session_cap=None"])
async def test_no_cap_with_compression_or_with_the_cap_off(why: str) -> None:
    cfg = capped(session_cap=None) if why == "session_cap=None" else capped()
    cap = cfg.scaled(900.0)
    extra = _compression() if why == "compression" else {}
    async with Emulator(cfg) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config(**extra)) as session:
            await asyncio.sleep(1.5 * cap)
            await ask(session, "still here?")
            messages = await read_turn(session)
        await emu.wait_disconnected()
    assert not any(m.go_away for m in messages)
    record = emu.ledger.sessions[session.session_id]
    (conn,) = record.connections
    assert record.capped_at is None and conn.closed_by == "client"
    assert conn.setup is not None and conn.setup.compression == (why == "compression")


@pytest.mark.parametrize(
    ("key", "window"),
    [
        ("contextWindowCompression", "slidingWindow"),
        ("context_window_compression", "sliding_window"),
    ],
)
def test_compression_is_read_in_either_spelling(key: str, window: str) -> None:
    def setup(body: dict[str, Any]) -> Setup:
        parsed = parse_client_message(json.dumps({"setup": {"model": "m", **body}}))
        assert isinstance(parsed, Setup)
        return parsed

    assert setup({key: {window: {}, "triggerTokens": 1000}}).compression
    assert not setup({key: {"triggerTokens": 1000}}).compression  # no mechanism: none
    assert not setup({}).compression


# --- handle validity ---------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_handle_is_valid_for_the_documented_time_after_its_session_ended(
    profile: Profile,
) -> None:
    validity = 0.15
    documented = EmulatorConfig(profile=profile).handle_validity_seconds
    # The profile's own figure, scaled to 150 ms; nothing else here may end the session, and
    # the client has its usual seconds to send its setup.
    scale = validity / documented
    cfg = config(profile=profile, time_scale=scale, session_cap=None, setup_timeout=5.0 / scale)
    async with Emulator(cfg) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as first:
            handle = await handle_after_turn(first)
            await asyncio.sleep(1.5 * validity)  # older than the validity, session still open
        await emu.wait_disconnected()
        # Valid: its session ended just now (a rule counted from the issue would refuse it).
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s2:
            assert s2.session_id == first.session_id
            later = await handle_after_turn(s2)
        await emu.wait_disconnected()
        await asyncio.sleep(1.5 * validity)
        with pytest.raises(errors.APIError) as caught:
            async with client.aio.live.connect(model=MODEL, config=live_config(handle=later)):
                pass
        await emu.wait_disconnected()
    assert caught.value.code == 1007
    record = emu.ledger.sessions[first.session_id]
    assert [c.refused for c in record.connections] == [None, None, "handle"]
    resumed = record.connections[1].resumed_handle_index
    assert resumed is not None and not record.handles[resumed].expired
    assert record.handles[-1].expired  # ``later``, the last handle issued


# --- speech and silence in the ledger ----------------------------------------------------------


async def _send(session: AsyncSession, chunks: list[tuple[int, bool]]) -> None:
    for seq, speech in chunks:
        data = user_audio(seq, speech=speech)
        await session.send_realtime_input(audio=types.Blob(data=data, mime_type=PCM))


@pytest.mark.parametrize("service", ["as measured", "kind"])
async def test_a_move_counts_speech_and_silence_heard_twice_and_speech_lost(service: str) -> None:
    changes = KIND_SERVICE if service == "kind" else {}
    # No turn ends on silence here: only the audio's fate is counted.
    async with Emulator(config(answer_chunks=1, vad_silence=3600.0, **changes)) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as first:
            handle = await handle_after_turn(first)
            await _send(first, [(0, True), (1, True), (2, False), (3, False)])
        await emu.wait_disconnected()  # break before make: the handle predates 0-3
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s2:
            await _send(s2, [(1, True), (3, False)])  # replayed: 0 (speech), 2 (silence) lost
            await _send(s2, [(1, True), (3, False)])  # and again: heard twice
            await ask(s2, "done")
            await read_turn(s2)
        await emu.wait_disconnected()
    ledger = emu.ledger.summary()
    summary = ledger.sessions[first.session_id]
    assert (summary.audio_lost, summary.audio_duplicates) == ((0, 2), (1, 3))
    assert (summary.speech_lost, summary.silence_lost) == ((0,), (2,))
    assert (summary.speech_duplicates, summary.silence_duplicates) == ((1,), (3,))
    (move,) = summary.moves
    assert (move.speech_lost, move.speech_duplicates, move.silence_duplicates) == (
        (0,),
        (1,),
        (3,),
    )
    counts = (
        ledger.speech_lost_count,
        ledger.speech_duplicate_count,
        ledger.silence_duplicate_count,
    )
    assert counts == (1, 1, 1)
    assert "speech twice 1, silence twice 1, speech lost 1" in str(ledger)


def test_each_chunk_of_a_message_is_speech_or_silence_by_the_vad_threshold() -> None:
    data = user_audio(1) + user_audio(2, speech=False) + user_audio(3, word="hi")
    chunks = UserAudioDecoder().feed(data)
    threshold = EmulatorConfig().vad_threshold
    assert [(c.seq, c.level >= threshold) for c in chunks] == [(1, True), (2, False), (3, True)]
    record = SessionRecord("s")
    assert record.receive_audio(chunks, threshold) == [1, 2, 3]
    assert [record.is_speech(s) for s in (1, 2, 3)] == [True, False, True]
    assert record.is_speech(99)  # never received: not taken for silence
    loud = SessionRecord("t")  # the same notion as the VAD: a higher threshold hears less
    loud.receive_audio(chunks, 30_000)
    assert not any(loud.is_speech(s) for s in (1, 2, 3))
