"""Handles as snapshots, each profile's resumption semantics, refused handles."""

from __future__ import annotations

import asyncio

import pytest
from google.genai import errors, types

from realtime_resumption.testing.emulator import KIND_SERVICE, Emulator, user_audio

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
    read_until_closed,
)


def updates(
    messages: list[types.LiveServerMessage],
) -> list[types.LiveServerSessionResumptionUpdate]:
    return [m.session_resumption_update for m in messages if m.session_resumption_update]


async def test_gemini_issues_no_handle_while_answering_or_awaiting_a_tool() -> None:
    async with Emulator(config(profile="gemini", answer_chunks=4)) as emu:
        cfg = live_config(tools=["f"])
        async with emu.client().aio.live.connect(model=MODEL, config=cfg) as session:
            await ask(session, "call f")
            during = await read_until(session, lambda m: m.tool_call is not None)
            call = during[-1].tool_call.function_calls[0]  # type: ignore[union-attr,index]
            await session.send_tool_response(
                function_responses=[types.FunctionResponse(id=call.id, name="f", response={})]
            )
            during += await read_turn(session)
            after = await read_until(session, is_handle)
    assert updates(during)
    assert all(u.new_handle is None and not u.resumable for u in updates(during))
    assert after[0].session_resumption_update is not None  # the very next message
    assert after[0].session_resumption_update.resumable


async def test_vertex_marks_every_update_resumable_and_delays_the_post_turn_handle() -> None:
    cfg = config(profile="vertex", time_scale=1.0, answer_chunks=4, chunk_interval=0.001)
    async with Emulator(cfg) as emu:
        async with emu.client(vertex=True).aio.live.connect(
            model=MODEL, config=live_config()
        ) as session:
            await ask(session, "hi")
            during = await read_turn(session)
            await next_handle(session)
    assert len(updates(during)) == 2  # at the start and halfway
    assert all(u.new_handle and u.resumable for u in updates(during))
    record = emu.ledger.sessions[session.session_id]
    messages = record.connections[0].server_messages
    turn_complete = next(m.time for m in messages if m.kind == "turn_complete")
    delay = record.handles[-1].issued_at - turn_complete
    assert 0.02 <= delay <= 1.0
    mid = record.handles[1].snapshot.answer
    assert mid is not None and mid.turn == 0 and mid.produced == 2


async def test_transparent_reports_last_consumed_index_per_connection() -> None:
    async with Emulator(config(profile="vertex", answer_chunks=1)) as emu:
        client = emu.client(vertex=True)
        cfg = live_config(transparent=True)
        async with client.aio.live.connect(model=MODEL, config=cfg) as session:
            for seq in range(3):
                data = user_audio(seq, speech=False)
                await session.send_realtime_input(audio=types.Blob(data=data, mime_type=PCM))
            await ask(session, "hi")  # message 4
            messages = await read_turn(session)
            messages += await read_until(session, is_handle)
            handle = messages[-1].session_resumption_update.new_handle  # type: ignore[union-attr]
        indexes = [u.last_consumed_client_message_index for u in updates(messages)]
        assert len(indexes) >= 2 and set(indexes) == {4}
        async with client.aio.live.connect(
            model=MODEL, config=live_config(handle=handle, transparent=True)
        ) as session:
            await ask(session, "again")  # message 1: the count restarts on each connection
            resumed = await read_turn(session)
        assert {u.last_consumed_client_message_index for u in updates(resumed)} == {1}


async def test_gemini_profile_refuses_transparent() -> None:
    async with Emulator(config(profile="gemini")) as emu:
        client = emu.client(vertex=True)  # the Gemini-API SDK mode refuses it client-side
        with pytest.raises(errors.APIError) as caught:
            async with client.aio.live.connect(model=MODEL, config=live_config(transparent=True)):
                pass
    assert caught.value.code == 1007


@pytest.mark.parametrize("service", ["as measured", "kind"])
@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_a_handle_is_a_snapshot(profile: str, service: str) -> None:
    kind = KIND_SERVICE if service == "kind" else {}
    async with Emulator(config(profile=profile, answer_chunks=2, **kind)) as emu:
        vertex = profile == "vertex"
        client = emu.client(vertex=vertex)
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            for seq in range(3):
                data = user_audio(seq, speech=False)
                await session.send_realtime_input(audio=types.Blob(data=data, mime_type=PCM))
            await ask(session, "first")
            await read_turn(session)
            after_first = await next_handle(session)
            for seq in range(3, 6):
                data = user_audio(seq, speech=False)
                await session.send_realtime_input(audio=types.Blob(data=data, mime_type=PCM))
            await ask(session, "second")
            await read_turn(session)
            await next_handle(session)
        sid = session.session_id
        async with client.aio.live.connect(
            model=MODEL, config=live_config(handle=after_first)
        ) as resumed:
            assert resumed.session_id == sid
            await ask(resumed, "third")
            messages = await read_turn(resumed)
        await emu.wait_disconnected()
    assert {t for t, _ in audio_ids(messages)} == {2}  # turn ids stay unique in a session
    record = emu.ledger.sessions[sid]
    assert record.state is not None
    assert [t.user_text for t in record.state.history] == ["first", "third"]  # "second" is lost
    assert record.audio_consumed == [0, 1, 2]
    assert record.audio_received == [0, 1, 2, 3, 4, 5]
    resumed_from = record.connections[1].resumed_handle_index
    assert resumed_from is not None
    handle_record = record.handles[resumed_from]
    assert handle_record.redacted == record.connections[1].resumed_from
    assert [t.user_text for t in handle_record.snapshot.history] == ["first"]
    assert handle_record.snapshot.answer is None
    summary = emu.ledger.summary().sessions[sid]
    assert summary.audio_lost == (3, 4, 5) and summary.connections == 2


async def test_resume_from_a_mid_answer_handle_does_not_continue_the_answer() -> None:
    async with Emulator(config(profile="vertex", answer_chunks=6)) as emu:
        client = emu.client(vertex=True)
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            await ask(session, "long")
            messages = await read_until(session, lambda m: len(audio_ids([m])) > 0)
            messages += await read_until(session, is_handle)  # the halfway handle
            handle = messages[-1].session_resumption_update.new_handle  # type: ignore[union-attr]
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s2:
            with pytest.raises(TimeoutError):
                await read_until(s2, lambda m: bool(audio_ids([m])), timeout=0.2)
        await emu.wait_disconnected()
    record = emu.ledger.sessions[session.session_id]
    assert record.state is not None
    (turn,) = record.state.history
    assert turn.outcome == "cut" and turn.produced == 3
    assert emu.ledger.summary().sessions[session.session_id].answers_cut == (0,)


@pytest.mark.parametrize(
    ("code", "after_setup_complete"), [(1007, False), (1008, False), (1007, True)]
)
async def test_unknown_handle_is_refused(code: int, after_setup_complete: bool) -> None:
    cfg = config(refuse_close_code=code, refuse_after_setup_complete=after_setup_complete)
    async with Emulator(cfg) as emu:
        cfg_handle = live_config(handle="no-such-handle")
        if after_setup_complete:
            async with emu.client().aio.live.connect(model=MODEL, config=cfg_handle) as session:
                assert session.session_id is not None
                closed, messages = await read_until_closed(session)
            assert closed == code and messages == []
        else:
            with pytest.raises(errors.APIError) as caught:
                async with emu.client().aio.live.connect(model=MODEL, config=cfg_handle):
                    pass
            assert caught.value.code == code
        await emu.wait_disconnected()
    (record,) = emu.ledger.sessions.values()
    assert record.connections[0].refused == "handle"
    assert record.connections[0].resumed_from is not None
    assert "no-such-handle" not in record.connections[0].resumed_from


async def test_expired_handles_are_refused() -> None:
    async with Emulator(config(handle_lifetime=2.0)) as emu:  # 20 ms
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            old = await handle_after_turn(session)
        await asyncio.sleep(0.03)
        with pytest.raises(errors.APIError) as caught:
            async with client.aio.live.connect(model=MODEL, config=live_config(handle=old)):
                pass
        assert caught.value.code == 1007
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            fresh = await handle_after_turn(session)
        assert emu.faults.expire_handles() >= 1
        with pytest.raises(errors.APIError):
            async with client.aio.live.connect(model=MODEL, config=live_config(handle=fresh)):
                pass
        record = emu.ledger.sessions[session.session_id]
        assert all(h.expired for h in record.handles)


async def test_without_resumption_config_no_updates_are_sent() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        cfg = live_config(resumption=False)
        async with emu.client().aio.live.connect(model=MODEL, config=cfg) as session:
            await ask(session, "hi")
            messages = await read_turn(session)
    assert updates(messages) == []
    assert not any(r.handles for r in emu.ledger.sessions.values())
