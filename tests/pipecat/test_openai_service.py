"""``realtime_resumption.pipecat.openai``'s services in real Pipecat pipelines against the
OpenAI Realtime emulator, with one import changed from stock (``tests/openai_emulator/
test_oai_pipecat.py`` holds the same calls on stock): the spoken call, a function call, and
the call carried on past a drop and past the service's cap, where stock keeps no session."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    ErrorFrame,
    InputAudioRawFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    MetricsFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
)
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.realtime import events

from realtime_resumption.frames import (
    GenerationEndedFrame,
    GenerationStartedFrame,
    SessionMovedFrame,
)
from realtime_resumption.pipecat.openai import AzureRealtimeLLMService, OpenAIRealtimeLLMService
from realtime_resumption.testing.openai_emulator import (
    OpenAIEmulator,
    answer_chunk_ids,
    user_audio,
)
from realtime_resumption.transport import GenerationEndReason

from ..openai_emulator.oai_helpers import RATE
from .rig import Rig, until


async def _speak(rig: Rig, first: int, count: int, words: list[str]) -> None:
    for i in range(count + 3):
        word = words[i] if i < len(words) else None
        audio = user_audio(first + i, speech=i < count, word=word, rate=RATE)
        await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=RATE, num_channels=1))


def _properties() -> events.SessionProperties:
    return events.SessionProperties(
        audio=events.AudioConfiguration(
            input=events.AudioInput(transcription=events.InputAudioTranscription())
        )
    )


def _service(emu: OpenAIEmulator) -> OpenAIRealtimeLLMService:
    # The stock service's keywords, as test_oai_pipecat.py gives them to stock.
    return OpenAIRealtimeLLMService(
        api_key="sk-test",
        base_url=emu.realtime_url,
        settings=OpenAIRealtimeLLMService.Settings(
            model="gpt-realtime", session_properties=_properties()
        ),
    )


def _no_errors(rig: Rig) -> None:
    assert not rig.of(ErrorFrame) and not rig.of(ErrorFrame, up=True)


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=5)
async def test_a_spoken_call_is_held_as_on_stock_with_paired_generations(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    emu = openai_emulator_trusted
    async with Rig([_service(emu)], metrics=True) as rig:
        await rig.context(LLMContext())
        await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        await _speak(rig, 0, 8, ["hello", "pipecat"])
        await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 2)
        audio = b"".join(f.audio for f in rig.of(TTSAudioRawFrame))
        assert answer_chunk_ids(audio) == [(t, k) for t in (1, 2) for k in range(5)]
        await rig.wait(lambda: rig.count(TranscriptionFrame, up=True) >= 1)
        assert [f.text for f in rig.of(TranscriptionFrame, up=True)] == ["hello pipecat"]
        assert rig.count(LLMFullResponseStartFrame) == rig.count(LLMFullResponseEndFrame) == 2
        started = [f.generation_id for f in rig.of(GenerationStartedFrame)]
        ended = [(f.generation_id, f.reason) for f in rig.of(GenerationEndedFrame)]
        assert ended == [(g, GenerationEndReason.GENERATION_COMPLETE) for g in started]
        usage = [
            d for m in rig.of(MetricsFrame) for d in m.data if isinstance(d, LLMUsageMetricsData)
        ]
        assert len(usage) == 2 and all(d.value.completion_tokens > 0 for d in usage)
        _no_errors(rig)
    await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.committed_speech == list(range(8))
    assert [a.outcome for a in record.answers] == ["complete", "complete"]
    assert "heard hello pipecat" in record.conversation_text
    assert record.errors == [] and record.closed_by == "client"


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_function_is_called_and_answered_with_its_result_as_on_stock(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    calls: list[str] = []

    async def weather(params: FunctionCallParams) -> None:
        calls.append(params.function_name)
        await params.result_callback({"sky": "clear"})

    emu = openai_emulator_trusted
    service = _service(emu)
    service.register_function("weather", weather)
    tools = ToolsSchema(
        standard_tools=[FunctionSchema(name="weather", description="", properties={}, required=[])]
    )
    context = LLMContext(tools=tools)
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), service, pair.assistant()]) as rig:
        await rig.context(context)
        answers = lambda: emu.ledger.sessions[0].answers  # noqa: E731
        await until(
            lambda: bool(emu.ledger.sessions and answers()) and answers()[0].outcome == "complete"
        )
        await _speak(rig, 0, 6, ["weather"])
        await until(lambda: len(answers()) >= 3 and answers()[2].outcome == "complete")
        _no_errors(rig)
    await emu.wait_disconnected()
    assert calls == ["weather"]
    record = emu.ledger.sessions[0]
    assert record.answers[1].calls and record.answers[2].produced == 3
    assert "result" in record.conversation_text and "clear" in record.conversation_text


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_dropped_session_is_moved_and_the_next_question_answered_with_the_context(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    emu = openai_emulator_trusted
    async with Rig([_service(emu)]) as rig:
        await rig.context(LLMContext())
        await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 1)
        await _speak(rig, 0, 6, ["pineapple"])
        await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 2)
        assert emu.faults.drop() == 1
        await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
        await _speak(rig, 20, 6, ["recall"])
        await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 3)
        (moved,) = rig.of(SessionMovedFrame)
        assert moved.report.outcome == "rebuilt"
        _no_errors(rig)
    await emu.wait_disconnected()
    first, second = emu.ledger.sessions
    assert first.closed_by == "drop"
    assert ("user", "pineapple") in [(i.role, i.text) for i in second.seeded]
    assert "recall pineapple" in second.conversation_text
    assert second.committed_speech == list(range(20, 26))


@pytest.mark.openai_emulator(time_scale=0.05, session_cap=10.0, answer_chunks=3)
async def test_past_the_cap_the_call_goes_on_in_a_new_session_where_stock_keeps_none(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    emu = openai_emulator_trusted
    async with Rig([_service(emu)]) as rig:
        await rig.context(LLMContext())
        await until(lambda: any(s.closed_at is not None for s in emu.ledger.sessions))
        await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
        await _speak(rig, 0, 6, ["still", "here"])
        await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 2)
        _no_errors(rig)
    assert emu.ledger.sessions[0].close_code == 1001
    assert "heard still here" in emu.ledger.sessions[1].conversation_text


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_the_azure_service_takes_stocks_keywords_and_dials_the_v1_surface(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    emu = openai_emulator_trusted
    base = emu.realtime_url.replace("/v1/realtime", "/openai/v1/realtime")
    service = AzureRealtimeLLMService(
        api_key="azure-key",
        base_url=base,
        settings=AzureRealtimeLLMService.Settings(
            model="my-deployment", session_properties=_properties()
        ),
    )
    async with Rig([service]) as rig:
        await rig.context(LLMContext())
        await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 1)
        _no_errors(rig)
    await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.answers[0].outcome == "complete"
    with pytest.raises(ValueError, match="api_key"):
        AzureRealtimeLLMService(base_url=base)


@pytest.mark.openai_emulator(time_scale=0.05, api_key="sk-the-right-one")
async def test_a_refused_key_is_an_error_frame_that_never_shows_the_key(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    emu = openai_emulator_trusted
    service = OpenAIRealtimeLLMService(
        api_key="sk-wrong-0123456789abcdef",
        base_url=emu.realtime_url,
        settings=OpenAIRealtimeLLMService.Settings(model="gpt-realtime"),
    )
    async with Rig([service]) as rig:
        await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= 1)
        (error,) = rig.of(ErrorFrame, up=True)
        assert error.error.startswith("Error connecting") and not error.fatal
        assert "0123456789abcdef" not in error.error
        assert "0123456789abcdef" not in repr(error.exception)
    assert all(s.created_at is None for s in emu.ledger.sessions)


def test_options_of_the_wrong_type_are_refused_at_construction() -> None:
    with pytest.raises(TypeError, match="OpenAIRealtimeOptions"):
        OpenAIRealtimeLLMService(api_key="sk-test", options={"session_cap": 10})  # type: ignore[arg-type]


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_restored_context_reaches_the_model_as_stocks_adapter_packs_it(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    """A context restored from an earlier call (a function call and its result among it) goes
    in as the adapter gives it to stock (one user text), and the answer comes."""
    emu = openai_emulator_trusted
    context = LLMContext(
        messages=[
            {"role": "user", "content": "what is the weather"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_old",
                        "type": "function",
                        "function": {"name": "weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_old", "content": '{"sky": "clear"}'},
        ]
    )
    async with Rig([_service(emu)]) as rig:
        await rig.context(context)
        await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 1)
        _no_errors(rig)
    record = emu.ledger.sessions[0]
    assert record.answers[0].outcome == "complete"
    assert "what is the weather" in record.conversation_text


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3, api_key="entra-token-0001")
async def test_the_azure_service_dials_with_the_token_its_provider_gives(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    emu = openai_emulator_trusted
    asked: list[int] = []

    async def token_provider() -> str:
        asked.append(1)
        return "entra-token-0001"

    service = AzureRealtimeLLMService(
        token_provider=token_provider,
        base_url=emu.realtime_url.replace("/v1/realtime", "/openai/v1/realtime"),
        settings=AzureRealtimeLLMService.Settings(model="my-deployment"),
    )
    async with Rig([service]) as rig:
        await rig.context(LLMContext())
        await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 1)
        _no_errors(rig)
    assert asked == [1]
    assert emu.ledger.sessions[0].answers[0].outcome == "complete"


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3, api_key="entra-token-0001")
async def test_the_azure_service_asks_its_token_provider_again_for_each_new_session(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    # Entra ID tokens expire (about an hour): a session opened after one expired must dial with
    # a fresh one, not the token of the call's first dial. The emulator takes only the newest.
    emu = openai_emulator_trusted
    tokens = ["entra-token-0001", "entra-token-0002"]
    given: list[str] = []

    async def token_provider() -> str:
        given.append(tokens[min(len(given), len(tokens) - 1)])
        return given[-1]

    service = AzureRealtimeLLMService(
        token_provider=token_provider,
        base_url=emu.realtime_url.replace("/v1/realtime", "/openai/v1/realtime"),
        settings=AzureRealtimeLLMService.Settings(model="my-deployment"),
    )
    async with Rig([service]) as rig:
        await rig.context(LLMContext())
        await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 1)
        emu.config = replace(emu.config, api_key="entra-token-0002")
        assert emu.faults.drop() == 1
        await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
        await _speak(rig, 0, 6, ["weather"])
        await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 2)
        _no_errors(rig)
    assert given == tokens
    assert not emu.ledger.refused
    assert emu.ledger.sessions[1].answers[0].outcome == "complete"


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_function_running_across_a_drop_has_its_result_answered_in_the_new_session(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    emu = openai_emulator_trusted
    release = asyncio.Event()
    calls: list[str] = []

    async def weather(params: FunctionCallParams) -> None:
        calls.append(params.tool_call_id)
        await release.wait()
        await params.result_callback({"sky": "sunny"})

    service = _service(emu)
    service.register_function("weather", weather)
    tools = ToolsSchema(
        standard_tools=[FunctionSchema(name="weather", description="", properties={}, required=[])]
    )
    context = LLMContext(tools=tools)
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), service, pair.assistant()]) as rig:
        await rig.context(context)
        await until(lambda: bool(emu.ledger.sessions and emu.ledger.sessions[0].answers))
        await until(lambda: emu.ledger.sessions[0].answers[0].outcome == "complete")
        await _speak(rig, 0, 6, ["weather"])
        await until(lambda: bool(calls))
        assert emu.faults.drop() == 1
        await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
        release.set()
        await until(lambda: len(emu.ledger.sessions) == 2 and "sunny" in _said(emu))
        _no_errors(rig)
    first, second = emu.ledger.sessions
    assert [i.call_id for i in second.seeded if i.type == "function_call"] == calls
    outputs = [i for s in (first, second) for i in s.items if i.type == "function_call_output"]
    assert len(outputs) == 1 and outputs[0] in second.items


def _said(emu: OpenAIEmulator) -> str:
    return emu.ledger.sessions[-1].conversation_text


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=2)
async def test_audio_at_another_rate_is_resampled_to_the_sessions_24_khz_as_on_stock(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    """24 kHz frames reach the transport as they are; 16 kHz frames go through stock's
    resampler first (the session's input is PCM16 at 24 kHz)."""
    emu = openai_emulator_trusted
    service = _service(emu)
    async with Rig([service]) as rig:
        await rig.context(LLMContext())
        await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        transport = service.transport
        assert transport is not None
        appended: list[int] = []
        send_audio = transport.send_audio

        def counting(audio: bytes) -> None:
            appended.append(len(audio))
            send_audio(audio)

        transport.send_audio = counting  # type: ignore[method-assign]
        for rate in (RATE, 16_000):
            for seq in range(10):
                audio = user_audio(seq, speech=False, rate=rate)
                await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=rate, num_channels=1))
        await until(lambda: sum(appended[10:]) > 0)
        _no_errors(rig)
    assert appended[:10] == [960] * 10
    # Resampled in blocks of its own (it holds some back): never the 640 bytes of a 16 kHz
    # frame, at most the 24 kHz audio of the ten frames.
    resampled = appended[10:]
    assert 640 not in resampled and 0 < sum(resampled) <= 10 * 960


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=2)
async def test_without_turn_detection_the_audio_keeps_stocks_pre_roll(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    """With turn detection off, stock keeps the last audio sent as a pre-roll to append
    again after an interruption clears the input buffer (its ``_user_audio_preroll_buffer``,
    as Pipecat's own tests read it): ours keeps it too."""
    emu = openai_emulator_trusted
    properties = events.SessionProperties(
        audio=events.AudioConfiguration(input=events.AudioInput(turn_detection=False))
    )
    service = OpenAIRealtimeLLMService(
        api_key="sk-test",
        base_url=emu.realtime_url,
        settings=OpenAIRealtimeLLMService.Settings(
            model="gpt-realtime", session_properties=properties
        ),
    )
    async with Rig([service]) as rig:
        await rig.context(LLMContext())
        await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        for seq in range(5):
            audio = user_audio(seq, speech=False, rate=RATE)
            await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=RATE, num_channels=1))
        await until(lambda: len(service._user_audio_preroll_buffer) >= 5 * 960)
        await until(lambda: emu.ledger.sessions[0].client_events["input_audio_buffer.append"] >= 5)
        _no_errors(rig)
