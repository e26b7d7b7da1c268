"""The plugin's surface: the Google plugin's constructor, honest capabilities, registration,
logging, audio conversion, the chat-context mirror, a lost session, and a clean close."""

from __future__ import annotations

import asyncio
import inspect
import logging

import numpy as np
import pytest
from google.genai import types
from livekit import rtc
from livekit.agents import Agent, AgentSession, APIConnectOptions, Plugin
from livekit.agents.voice.events import CloseReason
from livekit.plugins import google
from livekit.plugins import realtime_resumption as rr
from livekit.plugins.realtime_resumption.audio_input import InputAudio

from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from .lk_helpers import text_call, until

OURS_ONLY = {
    "resumption",
    "input_buffer",
    "retry_budget",
    "resume_watchdog",
    "transparent",
    "store",
    "session_key",
    "store_options",
}


def test_the_constructor_takes_every_parameter_of_the_google_plugin_with_its_default() -> None:
    stock = inspect.signature(google.realtime.RealtimeModel.__init__).parameters
    ours = inspect.signature(rr.RealtimeModel.__init__).parameters
    assert set(ours) - set(stock) == OURS_ONLY
    assert set(stock) <= set(ours)
    for name, parameter in stock.items():
        assert ours[name].kind == parameter.kind, name
        assert ours[name].default == parameter.default, name


def test_capabilities_are_honest() -> None:
    model = rr.RealtimeModel(api_key="k")
    caps = model.capabilities
    assert caps.mutable_chat_context and caps.mutable_instructions and caps.mutable_tools
    assert not caps.message_truncation and not caps.per_response_tool_choice
    assert caps.turn_detection and caps.user_transcription and caps.audio_output
    assert caps.auto_tool_reply_generation
    assert model.provider == "Gemini"
    assert model.model == google.realtime.RealtimeModel(api_key="k").model

    text = rr.RealtimeModel(api_key="k", modalities=[types.Modality.TEXT])
    assert not text.capabilities.audio_output
    manual = rr.RealtimeModel(
        api_key="k",
        realtime_input_config=types.RealtimeInputConfig(
            automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
        ),
        input_audio_transcription=None,
    )
    assert not manual.capabilities.turn_detection
    assert not manual.capabilities.user_transcription


def test_bad_configuration_is_refused_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    with pytest.raises(ValueError, match="api_key"):
        rr.RealtimeModel()
    with pytest.raises(ValueError, match="Vertex AI feature"):
        rr.RealtimeModel(api_key="k", transparent=True)


def test_more_than_one_candidate_is_logged_as_not_applied(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="livekit.plugins.realtime_resumption"):
        rr.RealtimeModel(api_key="k", candidate_count=2)
    (record,) = [r for r in caplog.records if "not applied" in r.getMessage()]
    assert record.name == "livekit.plugins.realtime_resumption"
    assert "candidate_count" in record.getMessage()


def test_the_plugin_is_registered_with_its_logger() -> None:
    (plugin,) = [p for p in Plugin.registered_plugins if p.package == rr.__name__]
    assert plugin.logger is not None
    assert plugin.logger.name == "livekit.plugins.realtime_resumption"
    assert plugin.version == rr.__version__


def test_input_audio_is_downmixed_and_resampled_to_16_khz() -> None:
    audio = InputAudio()
    stereo = np.zeros((480 * 50, 2), dtype=np.int16)
    stereo[:, 0] = 1000
    stereo[:, 1] = 3000
    frames = [rtc.AudioFrame(chunk.tobytes(), 48_000, 2, 480) for chunk in np.split(stereo, 50)]
    pcm = b"".join(b"".join(audio.convert(frame)) for frame in frames)
    samples = np.frombuffer(pcm, dtype=np.int16)
    # 500 ms at 16 kHz, less the few tens of ms the resampler holds back.
    assert 7000 <= len(samples) <= 8000
    assert abs(int(np.median(samples)) - 2000) <= 20


def test_input_audio_at_16_khz_passes_through_in_50_ms_chunks() -> None:
    audio = InputAudio()
    frames = [rtc.AudioFrame(bytes([n, 0]) * 320, 16_000, 1, 320) for n in range(1, 4)]
    out = [audio.convert(frame) for frame in frames]
    # 20 ms frames: the third completes the first 50 ms chunk, byte for byte.
    assert out[:2] == [[], []]
    assert out[2] == [b"\x01\x00" * 320 + b"\x02\x00" * 320 + b"\x03\x00" * 160]


async def test_the_chat_context_mirrors_the_server_so_history_is_sent_once() -> None:
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        model = rr.RealtimeModel(api_key="k", http_options=emu.http_options())
        session = AgentSession(llm=model, aec_warmup_duration=None)
        agent = Agent(instructions="Be brief.")
        await session.start(agent)
        try:
            for text in ("first question", "second question", "third question"):
                result = await session.run(user_input=text)
                result.expect.next_event().is_message(role="assistant")
            mirror = agent.realtime_llm_session.chat_ctx
            agent_ids = {item.id for item in agent.chat_ctx.items}
        finally:
            await session.aclose()
    (record,) = emu.ledger.sessions.values()
    sent = [
        text
        for conn in record.connections
        for message in conn.client_messages
        for _, text in message.turns
    ]
    for text in ("first question", "second question", "third question"):
        assert sent.count(text) == 1
    roles = [item.role for item in mirror.items if item.type == "message"]
    assert roles == ["user", "assistant"] * 3
    assert {item.id for item in mirror.items} <= agent_ids


async def test_a_session_that_cannot_be_moved_is_lost_and_closes_the_agent_session() -> None:
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        model = rr.RealtimeModel(
            api_key="k",
            http_options=emu.http_options(),
            resumption=ResumptionOptions(retry_delays=(0.0, 0.05)),
            retry_budget=2,
        )
        async with text_call(model) as (session, recorder):
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            emu.faults.refuse_next(10)
            emu.faults.drop()
            await until(lambda: bool(recorder.closed))
    assert len(recorder.fatal_errors) == 1
    assert [m.report.outcome for m in recorder.moves] == [MoveOutcome.LOST]
    assert recorder.reconnected == 0
    assert recorder.closed[0].reason is CloseReason.ERROR


async def test_closing_the_session_leaves_no_task_behind() -> None:
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        before = asyncio.all_tasks()
        model = rr.RealtimeModel(api_key="k", http_options=emu.http_options())
        session = model.session()
        future = session.generate_reply()
        generation = await asyncio.wait_for(future, 5)
        async for message in generation.message_stream:
            async for _ in message.audio_stream:
                pass
        await session.aclose()
        await asyncio.sleep(0)
        left = {t for t in asyncio.all_tasks() - before if not t.done() and _ours(t)}
        assert left == set()


def _ours(task: asyncio.Task[object]) -> bool:
    """A task running the plugin's or the transport's code. The emulator's tasks, and the
    SDK's own clean-up tasks (google-genai closes a collected client in a task), are not."""
    code = getattr(task.get_coro(), "cr_code", None)
    package = rr.__file__.rsplit("/", 2)[0]
    return (
        code is not None
        and code.co_filename.startswith(package)
        and not code.co_filename.startswith(f"{package}/emulator/")
    )


@pytest.mark.parametrize("refused", [1, 2])
async def test_the_first_connection_is_retried_as_conn_options_say(refused: int) -> None:
    """``conn_options``: ``max_retry`` retries ``retry_interval`` apart; each failed attempt
    is a recoverable error but the last, which closes the AgentSession."""
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        emu.faults.refuse_next(refused)
        model = rr.RealtimeModel(
            api_key="k",
            http_options=emu.http_options(),
            conn_options=APIConnectOptions(max_retry=1, retry_interval=0.01, timeout=5.0),
        )
        async with text_call(model) as (session, recorder):
            if refused == 1:
                result = await session.run(user_input="hello")
                result.expect.next_event().is_message(role="assistant")
            else:
                await until(lambda: bool(recorder.closed))
    assert [e.recoverable for e in recorder.errors] == [True, False][:refused]
    if refused == 2:
        assert recorder.closed[0].reason is CloseReason.ERROR
