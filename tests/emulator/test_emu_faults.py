"""Scripted faults, observed through the real SDK."""

from __future__ import annotations

import asyncio

import pytest
import websockets
from google.genai import errors, types
from google.genai.live import AsyncSession

from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.testing.emulator.ledger import ConnectionRecord

from .emu_helpers import (
    MODEL,
    PCM,
    ask,
    audio_ids,
    config,
    handle_after_turn,
    is_turn_complete,
    live_config,
    next_handle,
    read_turn,
    read_until,
    read_until_closed,
)


def go_aways(messages: list[types.LiveServerMessage]) -> list[types.LiveServerGoAway]:
    return [m.go_away for m in messages if m.go_away]


@pytest.mark.parametrize(
    ("profile", "code", "reason"),
    [
        ("gemini", 1011, "Deadline expired before operation could complete."),
        ("vertex", 1000, "The operation was cancelled."),
    ],
)
async def test_go_away_then_close_at_the_deadline(profile: str, code: int, reason: str) -> None:
    async with Emulator(config(profile=profile)) as emu:
        client = emu.client(vertex=profile == "vertex")
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            applied = emu.faults.go_away(5.0)  # 50 ms on the wire
            assert applied.count == 1 and await applied == 1
            with pytest.raises(errors.APIError) as caught:
                await read_until(session, lambda m: False)
        await emu.wait_disconnected()
    assert caught.value.code == code
    assert reason in str(caught.value)
    conn = emu.ledger.sessions[session.session_id].connections[0]
    sent = {m.kind: m.time for m in conn.server_messages}
    assert conn.closed_at is not None and conn.closed_at - sent["go_away"] >= 0.05
    assert (conn.close_code, conn.close_reason, conn.closed_by) == (code, reason, "server")


async def test_go_away_time_left_on_the_wire_is_scaled() -> None:
    async with Emulator(config(notice=50)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await emu.faults.go_away()
            messages = await read_until(session, lambda m: m.go_away is not None)
            await emu.faults.go_away(None, close_at_deadline=False)
            messages += await read_until(session, lambda m: m.go_away is not None)
    assert [g.time_left for g in go_aways(messages)] == ["0.500s", None]


async def test_go_away_without_close_keeps_the_connection() -> None:
    async with Emulator(config(answer_chunks=2)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await emu.faults.go_away(0.1, close_at_deadline=False)
            await asyncio.sleep(0.01)
            await ask(session, "still there?")
            messages = await read_turn(session)
    assert len(audio_ids(messages)) == 2


async def test_silence_after_go_away_cuts_the_answer() -> None:
    async with Emulator(config(answer_chunks=2000)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await ask(session, "talk")
            await read_until(session, lambda m: bool(audio_ids([m])))
            await emu.faults.go_away(10.0, silence=True)
            code, messages = await read_until_closed(session)
        await emu.wait_disconnected()
    assert code == 1011
    assert len(audio_ids(messages)) < 1999
    summary = emu.ledger.summary().sessions[session.session_id]
    (turn,) = summary.turns
    assert turn.produced > turn.delivered and turn.cut
    assert summary.answers_cut == (0,)


async def test_go_away_at_a_chunk() -> None:
    async with Emulator(config(answer_chunks=5)) as emu:
        emu.faults.go_away_at(turn=1, chunk=2, time_left=100)
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await ask(session, "one")
            first = await read_turn(session)
            await ask(session, "two")
            second = await read_turn(session)
    assert go_aways(first) == []
    position = next(i for i, m in enumerate(second) if m.go_away)
    before = audio_ids(second[:position])
    assert before == [(1, 0), (1, 1), (1, 2)]
    assert go_aways(second)[0].time_left == "1s"


async def test_go_away_on_tool_call_and_when_idle() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        emu.faults.go_away_at(on_tool_call=True, close_at_deadline=False)
        emu.faults.go_away_at(when_idle=True, close_at_deadline=False)
        cfg = live_config(tools=["f"])
        async with emu.client().aio.live.connect(model=MODEL, config=cfg) as session:
            await ask(session, "f please")
            messages = await read_until(session, lambda m: m.go_away is not None)
            call = next(m.tool_call for m in messages if m.tool_call)
            assert call.function_calls and messages[-2].tool_call is not None
            await session.send_tool_response(
                function_responses=[
                    types.FunctionResponse(id=call.function_calls[0].id, name="f", response={})
                ]
            )
            await read_turn(session)
            after = await read_until(session, lambda m: m.go_away is not None)
    assert after[0].session_resumption_update is not None
    assert after[0].session_resumption_update.resumable


async def test_go_away_at_validates() -> None:
    async with Emulator(config()) as emu:
        with pytest.raises(ValueError):
            emu.faults.go_away_at()


async def test_drop_is_an_abrupt_1006() -> None:
    async with Emulator(config(answer_chunks=5000)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await ask(session, "talk")
            await read_until(session, lambda m: bool(audio_ids([m])))
            assert emu.faults.drop(session_id="another-session") == 0
            assert emu.faults.drop(session_id=session.session_id) == 1
            code, _ = await read_until_closed(session)
        await emu.wait_disconnected()
    assert code == 1006
    conn = emu.ledger.sessions[session.session_id].connections[0]
    assert (conn.close_code, conn.closed_by) == (1006, "drop")
    assert emu.ledger.summary().sessions[session.session_id].answers_cut == (0,)


async def test_refuse_next_with_http_503() -> None:
    async with Emulator(config()) as emu:
        emu.faults.refuse_next(2)
        client = emu.client()
        for _ in range(2):
            with pytest.raises(websockets.exceptions.InvalidStatus) as caught:
                async with client.aio.live.connect(model=MODEL, config=live_config()):
                    pass
            assert caught.value.response.status_code == 503
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            assert session.session_id
    assert [a.outcome for a in emu.ledger.attempts] == ["http503", "http503", "accepted"]


async def test_refuse_next_with_close_1011_after_setup_complete() -> None:
    async with Emulator(config()) as emu:
        emu.faults.refuse_next(1, how="close1011")
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            assert session.session_id
            code, messages = await read_until_closed(session)
        assert code == 1011 and messages == []
        await emu.wait_disconnected()
        assert emu.ledger.sessions[session.session_id].connections[0].refused == "close1011"
    with pytest.raises(ValueError):
        emu.faults.refuse_next(1, how="later")  # type: ignore[arg-type]


async def test_hang_next_never_sends_setup_complete() -> None:
    async with Emulator(config()) as emu:
        emu.faults.hang_next(1)
        client = emu.client()

        async def hanging() -> None:
            async with client.aio.live.connect(model=MODEL, config=live_config()):
                pass

        attempt = asyncio.create_task(hanging())
        # The hang is taken by the attempt whose setup arrives first: the second connect
        # starts only once the emulator holds the first, however slow its handshake was.
        async with asyncio.timeout(10):
            while not any(c.refused == "hang" for c in _connections(emu)):  # noqa: ASYNC110 - the ledger has no change notification
                await asyncio.sleep(0.01)
        done, _ = await asyncio.wait({attempt}, timeout=0.2)
        assert not done, "a hung setup was answered"
        attempt.cancel()
        with pytest.raises(asyncio.CancelledError):
            await attempt
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            assert session.session_id
        await emu.wait_disconnected()
    refused = [c.refused for c in _connections(emu)]
    assert len(refused) == 2 and set(refused) == {"hang", None}


def _connections(emu: Emulator) -> list[ConnectionRecord]:
    return [c for r in emu.ledger.sessions.values() for c in r.connections]


async def test_rotation() -> None:
    async with Emulator(config(rotate_every=20, notice=5)) as emu:  # goAway at 150 ms, close at 200
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            code, messages = await read_until_closed(session)
        await emu.wait_disconnected()
    assert code == 1011
    assert [g.time_left for g in go_aways(messages)] == ["0.050s"]
    conn = emu.ledger.sessions[session.session_id].connections[0]
    go_away = next(m.time for m in conn.server_messages if m.kind == "go_away")
    assert conn.setup_at is not None and conn.closed_at is not None
    assert go_away - conn.setup_at >= 0.15 and conn.closed_at - go_away >= 0.05


async def test_close_fault() -> None:
    async with Emulator(config()) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            assert await emu.faults.close(1008, "policy") == 1
            code, _ = await read_until_closed(session)
    assert code == 1008


async def _say_to(session: AsyncSession) -> None:
    """A text turn, two chunks of speech and a replayed audio turn (client_content)."""
    await session.send_realtime_input(text="are you there?")
    for seq in (7, 8):
        await session.send_realtime_input(audio=types.Blob(data=user_audio(seq), mime_type=PCM))
    replay = types.Part(inline_data=types.Blob(data=user_audio(7) + user_audio(8), mime_type=PCM))
    await session.send_client_content(
        turns=types.Content(role="user", parts=[replay]), turn_complete=True
    )


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_dead_after_resume_sets_up_then_never_answers(profile: str) -> None:
    async with Emulator(config(profile=profile, answer_chunks=2)) as emu:
        emu.faults.dead_after_resume()
        client = emu.client(vertex=profile == "vertex")
        # A new session is not a resume: it answers, and the fault stays armed.
        async with client.aio.live.connect(model=MODEL, config=live_config()) as first:
            await ask(first, "hello")
            await read_turn(first)
            handle = await next_handle(first)
        cfg = live_config(handle=handle)
        async with client.aio.live.connect(model=MODEL, config=cfg) as dead:
            assert dead.session_id == first.session_id
            await next_handle(dead)  # its first resumption update still comes
            await _say_to(dead)
            # Ten seconds of notice (100 ms here) is ample time for a live session to answer.
            await emu.faults.go_away(10.0)
            code, silent = await read_until_closed(dead)
        # The fault is spent: the next resume answers the same script before the deadline.
        async with client.aio.live.connect(model=MODEL, config=cfg) as alive:
            await _say_to(alive)
            await emu.faults.go_away(10.0)
            _, answered = await read_until_closed(alive)
        await emu.wait_disconnected()

    assert code == (1011 if profile == "gemini" else 1000)
    assert [m.go_away is not None for m in silent] == [True]
    assert audio_ids(answered) and any(is_turn_complete(m) for m in answered)
    record = emu.ledger.sessions[first.session_id]
    connections = record.connections
    assert [c.dead for c in connections] == [False, True, False]
    conn = connections[1]
    assert conn.established and conn.refused is None
    assert [m.kind for m in conn.server_messages] == [
        "setup_complete",
        "resumption_update",
        "go_away",
    ]
    # Every client message is in the ledger; none of them reached the model.
    kinds = [m.kind for m in conn.client_messages]
    assert kinds == ["setup", "text", "audio", "audio", "client_content"]
    text, speech_7, speech_8, replay = conn.client_messages[1:]
    assert text.text == "are you there?"
    assert (speech_7.audio_seqs, speech_8.audio_seqs) == ((7,), (8,))
    assert speech_7.mime_types == (PCM,)
    assert (replay.audio_seqs, replay.mime_types, replay.turn_complete) == ((7, 8), (PCM,), True)
    assert replay.turns == (("user", ""),)
    assert [t.connection for t in record.turns.values()] == [0, 2, 2]
    assert record.audio_received[:2] == [7, 8]  # received by the dead connection...
    handle_of_dead = next(h for h in record.handles if h.connection == 1)
    assert handle_of_dead.snapshot.consumed_audio == ()  # ...consumed by nothing


async def test_dead_after_resume_without_its_first_update_sends_nothing() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        emu.faults.dead_after_resume(first_update=False)
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await handle_after_turn(session)
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s:
            await ask(s, "hello?")
            await emu.faults.go_away(10.0)
            _, messages = await read_until_closed(s)
        await emu.wait_disconnected()
    assert [m.go_away is not None for m in messages] == [True]
    conn = emu.ledger.sessions[session.session_id].connections[1]
    assert conn.dead and [m.kind for m in conn.server_messages] == ["setup_complete", "go_away"]
    assert [m.text for m in conn.client_messages[1:]] == ["hello?"]


async def test_dead_after_resume_counts_and_clears() -> None:
    async with Emulator(config()) as emu:
        with pytest.raises(ValueError):
            emu.faults.dead_after_resume(-1)
        emu.faults.dead_after_resume(2)
        emu.faults.clear()
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await handle_after_turn(session)
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s:
            await ask(s, "hi")
            assert audio_ids(await read_turn(s))
        await emu.wait_disconnected()
    assert not any(c.dead for c in emu.ledger.sessions[session.session_id].connections)
