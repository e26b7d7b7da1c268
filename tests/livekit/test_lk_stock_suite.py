"""LiveKit's own tests and examples for the Google realtime model, run on the stock model and on
ours side by side against the emulator (only ``http_options`` points at it).

Ported from livekit/agents (``tests/test_plugin_google_realtime.py`` and the realtime examples
in ``examples/voice_agents``), through public API only; the scenarios are re-told here, not
copied. Of that test module, these reach into private members and are not ported:
``test_output_streams_close_on_generation_complete`` (``_start_new_generation``,
``_handle_server_content``, ``_current_generation``: its public behaviour is ported below),
``test_late_content_after_generation_complete_is_dropped`` (same members),
``test_input_transcription_uses_generation_timestamp`` (same members: ported below through a
voice call), ``test_session_close_releases_the_genai_client`` (``_client``),
``test_tool_response_scheduling_follows_the_output`` and
``test_blocking_tools_send_the_response_and_warn_it_cannot_be_silent`` (``_msg_ch``,
``_active_session``, ``_handle_tool_calls``). ``test_function_response_scheduling_only_for_gemini_api``
tests ``livekit.plugins.google.utils.create_function_response``, which both models share.
Examples: ``realtime_video_agent.py`` (and the older ``gemini_video_agent.py``: a greeting
with ``generate_reply(instructions=...)`` and video input) and ``realtime_with_tts.py`` (text
modality with a tool) are ported; ``realtime_turn_detector.py`` needs a speech-to-text service
(Deepgram), which cannot run here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from google.genai import types
from livekit import rtc
from livekit.agents import Agent, AgentSession, function_tool
from livekit.plugins import google
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, answer_text_ids

from .lk_helpers import WAIT, ModelKind, make_model, voice_call

# The stock plugin still sets LiveConnectConfig.generation_config (deprecated).
pytestmark = pytest.mark.filterwarnings(
    "ignore:Setting `LiveConnectConfig.generation_config`:DeprecationWarning"
)
both = pytest.mark.parametrize("kind", ["stock", "ours"])

CHUNKS = 10
FACTORIES = {"stock": google.realtime.RealtimeModel, "ours": rr.RealtimeModel}


# --- tests/test_plugin_google_realtime.py -----------------------------------------------------


@both
async def test_output_streams_close_on_generation_complete(kind: ModelKind) -> None:
    """The answer's audio and text streams end (at generationComplete), with every chunk,
    and the generation closes after them. (The emulator sends turnComplete right after
    generationComplete, so the gap Gemini leaves between them is not observed here.)"""
    async with Emulator(EmulatorConfig(time_scale=0.5, answer_chunks=CHUNKS)) as emu:
        rt = make_model(kind, emu).session()
        try:
            generation = await asyncio.wait_for(rt.generate_reply(), WAIT)
            async with asyncio.timeout(WAIT):
                message = await anext(aiter(generation.message_stream))
                frames = [frame async for frame in message.audio_stream]
                text = "".join([chunk async for chunk in message.text_stream])
                media_ended = time.monotonic()
                async for _ in generation.message_stream:
                    pass
                async for _ in generation.function_stream:
                    pass
                generation_ended = time.monotonic()
        finally:
            await rt.aclose()
    assert len(frames) >= CHUNKS
    assert answer_text_ids(text) == [(0, k) for k in range(CHUNKS)]
    assert generation_ended >= media_ended


@both
async def test_input_transcription_uses_generation_timestamp(kind: ModelKind) -> None:
    """The interim and final transcripts of one utterance carry the same turn start, which
    comes before the reply it prompted."""
    scale = 0.25
    async with (
        Emulator(EmulatorConfig(time_scale=scale, answer_chunks=CHUNKS)) as emu,
        voice_call(emu, Agent(instructions="Be helpful."), pace=scale, kind=kind) as call,
    ):
        transcripts: list[Any] = []
        call.agent.realtime_llm_session.on(
            "input_audio_transcription_completed", transcripts.append
        )
        call.mic.say(["hello", "there"])
        await call.settled(messages=2)
        user, assistant = call.messages()
    assert transcripts[-1].is_final and transcripts[-1].transcript == "hello there"
    assert {t.turn_started_at for t in transcripts} == {transcripts[0].turn_started_at}
    assert transcripts[0].turn_started_at <= assistant.created_at
    assert user.created_at == transcripts[0].turn_started_at


@both
def test_vertex_scheduling_warns(kind: ModelKind, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        FACTORIES[kind](
            vertexai=True,
            project="p",
            location="us-central1",
            tool_response_scheduling=types.FunctionResponseScheduling.SILENT,
        )
    assert any("tool_response_scheduling is not supported" in r.message for r in caplog.records)


@both
def test_gemini_api_scheduling_does_not_warn(
    kind: ModelKind, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key")
    with caplog.at_level(logging.WARNING):
        FACTORIES[kind](tool_response_scheduling=types.FunctionResponseScheduling.SILENT)
    assert not any("tool_response_scheduling is not supported" in r.message for r in caplog.records)


# --- examples/voice_agents --------------------------------------------------------------------


@both
async def test_realtime_video_agent_greets_and_takes_video(kind: ModelKind) -> None:
    """``realtime_video_agent.py``: video input on, a greeting asked for with instructions."""
    async with Emulator(EmulatorConfig(time_scale=0.1, answer_chunks=CHUNKS)) as emu:
        session = AgentSession(llm=make_model(kind, emu), aec_warmup_duration=None)
        agent = Agent(instructions="You can see the user's video and hear the user's voice.")
        await session.start(agent)
        try:
            frame = rtc.VideoFrame(16, 16, rtc.VideoBufferType.RGBA, bytes(16 * 16 * 4))
            agent.realtime_llm_session.push_video(frame)
            handle = session.generate_reply(
                instructions="introduce yourself very briefly and ask about the user's day"
            )
            async with asyncio.timeout(WAIT):
                await handle
            result = await session.run(user_input="it was fine")
            result.expect.next_event().is_message(role="assistant")
        finally:
            await session.aclose()
    replies = [m for m in session.history.items if m.type == "message" and m.role == "assistant"]
    assert len(replies) == 2
    (record,) = emu.ledger.sessions.values()
    kinds = [m.kind for c in record.connections for m in c.client_messages]
    assert "video" in kinds


class _WeatherAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a helpful assistant.")

    @function_tool
    async def get_weather(self, location: str = "Paris") -> str:
        """Called when the user asks about the weather."""
        return f"The weather in {location} is sunny."


@both
async def test_realtime_text_modality_agent_with_a_tool(kind: ModelKind) -> None:
    """``realtime_with_tts.py``, on Gemini: text modality, a tool, a greeting with
    instructions (no TTS here: text output only)."""
    async with Emulator(EmulatorConfig(time_scale=0.1, answer_chunks=CHUNKS)) as emu:
        model = make_model(kind, emu, modalities=[types.Modality.TEXT])
        session = AgentSession(llm=model, aec_warmup_duration=None)
        session.output.audio = None
        await session.start(_WeatherAgent())
        try:
            handle = session.generate_reply(instructions="say hello to the user in English")
            async with asyncio.timeout(WAIT):
                await handle
            result = await session.run(user_input="what is the get_weather in Paris")
            result.expect.next_event().is_function_call(name="get_weather")
            result.expect.next_event().is_function_call_output()
            message = result.expect.next_event().is_message(role="assistant").event().item
        finally:
            await session.aclose()
    assert answer_text_ids(message.text_content or "")


async def _video_agent_through_a_rotation(kind: ModelKind) -> tuple[list[str], int]:
    """``realtime_video_agent.py`` with a goAway in the middle of the greeting: the replies'
    texts, and the errors the app was told of."""
    errors: list[Any] = []
    async with Emulator(EmulatorConfig(time_scale=0.1, answer_chunks=CHUNKS)) as emu:
        session = AgentSession(llm=make_model(kind, emu), aec_warmup_duration=None)
        session.on("error", errors.append)
        agent = Agent(instructions="You can see the user's video and hear the user's voice.")
        await session.start(agent)
        try:
            emu.faults.go_away_at(turn=0, chunk=3, time_left=5.0)
            handle = session.generate_reply(
                instructions="introduce yourself very briefly and ask about the user's day"
            )
            async with asyncio.timeout(WAIT):
                await handle
            result = await session.run(user_input="it was fine")
            result.expect.contains_message(role="assistant")
        finally:
            await session.aclose()
    texts = [
        m.text_content or ""
        for m in session.history.items
        if m.type == "message" and m.role == "assistant"
    ]
    return texts, len(errors)


async def test_the_video_agent_through_a_rotation_does_at_least_as_well_as_stock() -> None:
    """Better where the stock model fails at a rotation: its greeting is cut at the goAway;
    ours finishes it, answers the next question, and tells the app of no error."""
    stock_texts, _ = await _video_agent_through_a_rotation("stock")
    texts, errors = await _video_agent_through_a_rotation("ours")
    assert [answer_text_ids(t) for t in texts] == [[(n, k) for k in range(CHUNKS)] for n in (0, 1)]
    assert errors == 0
    complete = [answer_text_ids(t) == [(n, k) for k in range(CHUNKS)] for n, t in enumerate(texts)]
    stock_complete = [len(answer_text_ids(t)) == CHUNKS for t in stock_texts]
    assert sum(complete) >= sum(stock_complete)
