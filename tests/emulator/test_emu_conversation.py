"""The deterministic model over the real SDK: answers, audio turns, tools, interruptions."""

from __future__ import annotations

import asyncio

import pytest
from google.genai import types

from realtime_resumption.testing.emulator import Emulator, answer_text_ids, user_audio

from ..transport.transport_helpers import sends_context_updates
from .emu_helpers import (
    MODEL,
    PCM,
    ask,
    audio_ids,
    config,
    is_turn_complete,
    live_config,
    read_turn,
    read_until,
    say,
)


def texts(messages: list[types.LiveServerMessage], attr: str) -> str:
    out = ""
    for m in messages:
        sc = m.server_content
        value = getattr(sc, attr, None) if sc else None
        if value is not None and value.text:
            out += value.text
    return out


@pytest.mark.parametrize("vertex", [False, True])
async def test_audio_answer(vertex: bool) -> None:
    async with Emulator(config(answer_chunks=4)) as emu:
        client = emu.client(vertex=vertex)
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            await ask(session, "hello there")
            messages = await read_turn(session)
    assert audio_ids(messages) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert answer_text_ids(texts(messages, "output_transcription")) == audio_ids(messages)
    flags = [
        ("generation" if m.server_content.generation_complete else "turn")
        for m in messages
        if m.server_content
        and (m.server_content.generation_complete or m.server_content.turn_complete)
    ]
    assert flags == ["generation", "turn"]
    usage = messages[-1].usage_metadata
    assert usage is not None and usage.response_token_count == 4 and usage.prompt_token_count == 3
    for m in messages:
        if m.server_content and m.server_content.model_turn:
            (part,) = m.server_content.model_turn.parts or []
            assert part.inline_data is not None
            assert part.inline_data.mime_type == "audio/pcm;rate=24000"
            assert len(part.inline_data.data or b"") == 24_000 * 40 // 1000 * 2


async def test_text_modality_answers_with_text_parts() -> None:
    async with Emulator(config(answer_chunks=3)) as emu:
        async with emu.client().aio.live.connect(
            model=MODEL, config=live_config(text=True)
        ) as session:
            await ask(session, "hi")
            messages = await read_turn(session)
    assert audio_ids(messages) == []
    assert answer_text_ids("".join(m.text or "" for m in messages)) == [(0, 0), (0, 1), (0, 2)]


async def test_audio_turn_ends_after_vad_silence() -> None:
    async with Emulator(config(answer_chunks=2, vad_silence=3.0)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            # 30 ms of silence is needed (3.0 s x 0.01): two 20 ms silent chunks.
            await say(session, words=["what", "time"], speech=2, silence=1)
            await asyncio.sleep(0.05)
            assert emu.ledger.sessions[session.session_id].turns == {}
            await say(session, start=3, speech=0, silence=1)
            messages = await read_turn(session)
    assert texts(messages, "input_transcription") == "what time"
    assert audio_ids(messages) == [(0, 0), (0, 1)]
    record = emu.ledger.sessions[session.session_id]
    assert record.turns[0].user_text == "what time"
    assert record.audio_consumed == [0, 1, 2, 3]


@pytest.mark.parametrize("end", ["audio_stream_end", "text"])
async def test_other_turn_ends(end: str) -> None:
    async with Emulator(config(answer_chunks=1, vad_silence=100)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await say(session, words=["one"], speech=1, silence=0)
            if end == "text":
                await session.send_realtime_input(text="two")
            else:
                await session.send_realtime_input(audio_stream_end=True)
            await read_turn(session)
    expected = "one two" if end == "text" else "one"
    assert emu.ledger.sessions[session.session_id].turns[0].user_text == expected


async def test_client_content_accumulates_until_turn_complete() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="first")]),
                turn_complete=False,
            )
            await ask(session, "second")
            await read_turn(session)
    assert emu.ledger.sessions[session.session_id].turns[0].user_text == "first second"


@pytest.mark.parametrize("vertex", [False, True])
async def test_tool_call_then_answer(vertex: bool) -> None:
    async with Emulator(config(answer_chunks=2)) as emu:
        client = emu.client(vertex=vertex)
        cfg = live_config(tools=["get_weather", "unused"])
        async with client.aio.live.connect(model=MODEL, config=cfg) as session:
            await ask(session, "please get_weather for Paris")
            messages = await read_until(session, lambda m: m.tool_call is not None)
            assert audio_ids(messages) == []
            assert messages[-1].tool_call is not None
            (call,) = messages[-1].tool_call.function_calls or []
            assert call.name == "get_weather" and call.id
            await session.send_tool_response(
                function_responses=[
                    types.FunctionResponse(id=call.id, name=call.name, response={"t": 21})
                ]
            )
            messages = await read_turn(session)
    assert audio_ids(messages) == [(0, 0), (0, 1)]
    record = emu.ledger.sessions[session.session_id]
    assert record.tool_calls_issued == [call.id]
    assert record.turns[0].tool_calls == [call.id] and record.turns[0].outcome == "complete"
    assert record.stranded_tool_responses == []


def _kinds(messages: list[types.LiveServerMessage]) -> list[str]:
    """What each message is, in the terms of this test."""
    out = []
    for m in messages:
        sc = m.server_content
        if m.tool_call:
            out.append("tool_call")
        elif m.session_resumption_update:
            update = m.session_resumption_update
            out.append("handle" if update.new_handle else "no_handle")
        elif sc and sc.model_turn:
            out.append("audio")
        elif sc and sc.generation_complete:
            out.append("generation_complete")
        elif sc and sc.turn_complete:
            out.append("turn_complete")
    return out


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_a_tool_call_may_come_after_turn_complete(profile: str) -> None:
    cfg_emu = config(profile=profile, answer_chunks=4, tool_call_after_turn_complete=True)
    async with Emulator(cfg_emu) as emu:
        client = emu.client(vertex=profile == "vertex")
        cfg = live_config(tools=["lookup"], transcription=False)
        async with client.aio.live.connect(model=MODEL, config=cfg) as session:
            await ask(session, "just talk")  # no tool: the answer is as usual
            plain = await read_turn(session)
            await read_until(session, lambda m: _kinds([m]) == ["handle"])
            await ask(session, "lookup the weather")
            before = await read_until(session, lambda m: m.tool_call is not None)
            (call,) = before[-1].tool_call.function_calls or []  # type: ignore[union-attr]
            await session.send_tool_response(
                function_responses=[types.FunctionResponse(id=call.id, name="lookup", response={})]
            )
            after = await read_turn(session)
            after += await read_until(session, lambda m: _kinds([m]) == ["handle"])
        await emu.wait_disconnected()

    assert _kinds(plain)[-2:] == ["generation_complete", "turn_complete"]
    assert audio_ids(before) == [(1, 0)]
    # The boundary comes first: no generationComplete before the call; on the Gemini API no
    # handle either (the answer is not over).
    kinds = [k for k in _kinds(before) if k not in ("handle", "no_handle")]
    assert kinds == ["audio", "turn_complete", "tool_call"]
    if profile == "gemini":
        assert "handle" not in _kinds(before)
    assert audio_ids(after) == [(1, 1), (1, 2), (1, 3)]
    kinds = [k for k in _kinds(after) if k != "no_handle"]
    assert kinds[-3:] == ["generation_complete", "turn_complete", "handle"]
    record = emu.ledger.sessions[session.session_id]
    turn = record.turns[1]
    assert turn.tool_calls == [call.id] and turn.outcome == "complete"
    assert (turn.planned, turn.produced, turn.delivered) == (4, 4, 4)
    sent = [m.kind for m in record.connections[0].server_messages if m.turn == 1]
    assert sent.count("turn_complete") == 2 and sent.count("generation_complete") == 1


async def test_audio_turn_can_call_a_tool() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        cfg = live_config(tools=["lights"])
        async with emu.client().aio.live.connect(model=MODEL, config=cfg) as session:
            await say(session, words=["turn", "on", "the", "lights"], speech=4)
            messages = await read_until(session, lambda m: m.tool_call is not None)
    assert messages[-1].tool_call is not None
    assert [c.name for c in messages[-1].tool_call.function_calls or []] == ["lights"]


async def test_stranded_tool_response_is_recorded_and_not_answered() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        cfg = live_config(tools=["f"])
        async with emu.client().aio.live.connect(model=MODEL, config=cfg) as session:
            await session.send_tool_response(
                function_responses=[
                    types.FunctionResponse(id="fc-elsewhere", name="f", response={})
                ]
            )
            await ask(session, "just talk")
            messages = await read_turn(session)
    assert [m.tool_call for m in messages if m.tool_call] == []
    record = emu.ledger.sessions[session.session_id]
    assert record.stranded_tool_responses == ["fc-elsewhere"]
    assert len(record.turns) == 1


async def test_user_speech_interrupts_the_answer_and_cancels_tool_calls() -> None:
    async with Emulator(config(answer_chunks=5000)) as emu:
        cfg = live_config(tools=["f"])
        async with emu.client().aio.live.connect(model=MODEL, config=cfg) as session:
            await ask(session, "long answer")
            await read_until(session, lambda m: bool(audio_ids([m])))
            await say(session, speech=1, silence=0)
            messages = await read_turn(session)
            assert any(m.server_content and m.server_content.interrupted for m in messages)
            # The interrupted answer stops; a tool call pending when the user speaks is cancelled.
            await say(session, start=1, words=["call", "f"], speech=2, silence=3)
            await read_until(session, lambda m: m.tool_call is not None)
            await say(session, start=10, speech=1, silence=0)
            messages = await read_turn(session)
    cancels = [m.tool_call_cancellation for m in messages if m.tool_call_cancellation]
    record = emu.ledger.sessions[session.session_id]
    assert cancels and cancels[0].ids == record.turns[1].tool_calls
    assert record.turns[0].outcome == "interrupted" and record.turns[0].produced < 5000
    assert record.turns[1].outcome == "interrupted"


async def test_no_interruption_when_the_setup_says_so() -> None:
    async with Emulator(config(answer_chunks=5)) as emu:
        cfg = live_config(
            realtime_input_config=types.RealtimeInputConfig(
                activity_handling=types.ActivityHandling.NO_INTERRUPTION
            )
        )
        async with emu.client().aio.live.connect(model=MODEL, config=cfg) as session:
            await ask(session, "answer")
            await say(session, speech=1, silence=0)
            messages = await read_turn(session)
    assert not any(m.server_content and m.server_content.interrupted for m in messages)
    assert len(audio_ids(messages)) == 5


async def test_manual_activity_bounds_the_turn() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        cfg = live_config(
            realtime_input_config=types.RealtimeInputConfig(
                automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
            )
        )
        async with emu.client().aio.live.connect(model=MODEL, config=cfg) as session:
            await session.send_realtime_input(activity_start=types.ActivityStart())
            await say(session, words=["manual"], speech=1, silence=5)
            await asyncio.sleep(0.05)
            assert emu.ledger.sessions[session.session_id].turns == {}
            await session.send_realtime_input(activity_end=types.ActivityEnd())
            await read_turn(session)
    record = emu.ledger.sessions[session.session_id]
    assert record.turns[0].user_text == "manual"
    kinds = [m.kind for m in record.connections[0].client_messages]
    assert kinds[1] == "activity_start" and kinds[-1] == "activity_end"


@sends_context_updates
async def test_context_update_and_video() -> None:
    async with Emulator(config(answer_chunks=1, in_session_updates=True)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await session.send_realtime_input(
                video=types.Blob(data=b"\xff\xd8\xff", mime_type="image/jpeg")
            )
            await session.send_context_update(
                system_instruction="be terse",
                tools=[types.Tool(function_declarations=[types.FunctionDeclaration(name="g")])],
            )
            await ask(session, "use g")
            messages = await read_until(session, lambda m: m.tool_call is not None)
    assert messages[-1].tool_call is not None
    record = emu.ledger.sessions[session.session_id]
    assert [m.kind for m in record.connections[0].client_messages][1:3] == [
        "video",
        "context_update",
    ]
    assert record.state is not None and record.state.system_instruction == "be terse"


async def test_voice_activity_messages() -> None:
    async with Emulator(config(answer_chunks=1, voice_activity=True)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await say(session, speech=2, silence=3)
            messages = await read_turn(session)
    activity = [m.voice_activity for m in messages if m.voice_activity]
    kinds = [a.voice_activity_type for a in activity]
    assert [a.audio_offset for a in activity] == ["0s", "0.040s"]
    assert kinds == [types.VoiceActivityType.ACTIVITY_START, types.VoiceActivityType.ACTIVITY_END]


async def test_audio_rate_from_mime_type_sets_silence_duration() -> None:
    async with Emulator(config(answer_chunks=1, vad_silence=3.0)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await say(session, speech=1, silence=0)
            # 20 ms of samples at a declared 8 kHz are 40 ms: enough silence in one chunk.
            await session.send_realtime_input(
                audio=types.Blob(data=user_audio(1, speech=False), mime_type="audio/pcm;rate=8000")
            )
            messages = await read_until(session, is_turn_complete)
    assert audio_ids(messages) == [(0, 0)]
    assert PCM.endswith("16000")
