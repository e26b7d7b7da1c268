"""The ledger and its summary: what tests and benchmarks count."""

from __future__ import annotations

import asyncio

from google.genai import types

from realtime_resumption.emulator import Emulator, user_audio

from .emu_helpers import (
    MODEL,
    PCM,
    ask,
    config,
    live_config,
    next_handle,
    read_turn,
    read_until,
)


async def send_audio(session, seqs: range) -> None:  # type: ignore[no-untyped-def]
    for seq in seqs:
        data = user_audio(seq, speech=False)
        await session.send_realtime_input(audio=types.Blob(data=data, mime_type=PCM))


async def test_audio_replay_lost_and_duplicates() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await next_handle(session)
            await send_audio(session, range(4))
        # Break before make: a gap between the two connections.
        await emu.wait_disconnected()
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s2:
            await send_audio(s2, range(2, 6))  # replays 2 and 3 only: 0 and 1 are lost
            await send_audio(s2, range(5, 6))  # 5 twice
            await ask(s2, "done")
            await read_turn(s2)
        await emu.wait_disconnected()
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.audio_received == (0, 1, 2, 3, 2, 3, 4, 5, 5)
    assert summary.audio_consumed == (2, 3, 4, 5, 5)
    assert summary.audio_lost == (0, 1)
    assert summary.audio_duplicates == (5,)
    assert len(summary.gaps) == 1 and summary.gaps[0] > 0
    assert summary.turns[0].produced == summary.turns[0].delivered == 1
    assert not summary.turns[0].cut and summary.answers_cut == ()
    assert "lost 2" in str(emu.ledger.summary())


async def test_client_messages_are_indexed_per_connection() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await next_handle(session)
            await send_audio(session, range(2))
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s2:
            await send_audio(s2, range(2, 3))
            await ask(s2, "x")
            await read_turn(s2)
        await emu.wait_disconnected()
    first, second = emu.ledger.sessions[session.session_id].connections
    assert [(m.index, m.kind, m.audio_seqs) for m in first.client_messages] == [
        (0, "setup", ()),
        (1, "audio", (0,)),
        (2, "audio", (1,)),
    ]
    assert [m.index for m in second.client_messages] == [0, 1, 2]
    assert second.resumed_handle_index == 0
    times = [m.time for m in first.client_messages + second.client_messages]
    assert times == sorted(times)
    delivered = [m for m in second.server_messages if m.kind == "audio"]
    assert [(m.turn, m.chunk, m.delivered) for m in delivered] == [(0, 0, True)]


async def test_a_tool_response_sent_to_another_session_is_stranded() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        client = emu.client()
        cfg = live_config(tools=["f"])
        async with client.aio.live.connect(model=MODEL, config=cfg) as first:
            await ask(first, "f")
            messages = await read_until(first, lambda m: m.tool_call is not None)
        call = messages[-1].tool_call.function_calls[0]  # type: ignore[union-attr,index]
        # A rebuilt session (no handle) receives the result of the old session's call.
        async with client.aio.live.connect(model=MODEL, config=cfg) as rebuilt:
            await rebuilt.send_tool_response(
                function_responses=[types.FunctionResponse(id=call.id, name="f", response={})]
            )
            await asyncio.sleep(0.02)
        await emu.wait_disconnected()
    summaries = emu.ledger.summary().sessions
    assert summaries[rebuilt.session_id].stranded_tool_responses == (call.id,)
    assert summaries[first.session_id].stranded_tool_responses == ()
    assert summaries[first.session_id].answers_cut == (0,)  # closed while awaiting the tool
