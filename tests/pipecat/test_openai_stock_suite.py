"""Pipecat's OpenAI Realtime example, run against the stock service and ours side by side on
the emulator, through real pipelines: every test runs once per service and asserts the same
thing of both.

pipecat-ai's sdist and its tests are not installed here; its own OpenAI Realtime tests drive
the stock service's private members with mocks (``_websocket``, ``_handle_evt_error``,
``_ws_send``), which ours replaces with the transport, so none of them runs as is. What
Pipecat's ``examples/realtime/realtime-openai.py`` relies on is reproduced instead: the bot
greets on ``LLMRunFrame`` through the aggregator pair, a registered function is called and its
result answered, the user's speech is heard and answered in audio.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    ErrorFrame,
    InputAudioRawFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.realtime import events
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService as StockService

from realtime_resumption.pipecat.openai import OpenAIRealtimeLLMService as OurService
from realtime_resumption.testing.openai_emulator import OpenAIEmulator, user_audio

from ..openai_emulator.oai_helpers import RATE
from .rig import Rig, until

Make = Callable[[OpenAIEmulator], StockService]


@pytest.fixture(params=["stock", "ours"])
def make(request: pytest.FixtureRequest) -> Make:
    kind = StockService if request.param == "stock" else OurService

    def build(emu: OpenAIEmulator) -> StockService:
        properties = events.SessionProperties(
            instructions="You are a helpful assistant.",
            audio=events.AudioConfiguration(
                input=events.AudioInput(transcription=events.InputAudioTranscription()),
                output=events.AudioOutput(voice="alloy"),
            ),
        )
        return kind(
            api_key="sk-test",
            base_url=emu.realtime_url,
            settings=kind.Settings(model="gpt-realtime", session_properties=properties),
        )

    return build


async def _speak(rig: Rig, first: int, count: int, words: list[str]) -> None:
    for i in range(count + 3):
        word = words[i] if i < len(words) else None
        audio = user_audio(first + i, speech=i < count, word=word, rate=RATE)
        await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=RATE, num_channels=1))


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_example_realtime_openai(openai_emulator_trusted: OpenAIEmulator, make: Make) -> None:
    emu = openai_emulator_trusted
    calls: list[str] = []

    async def get_current_weather(params: FunctionCallParams) -> None:
        calls.append(params.function_name)
        await params.result_callback({"conditions": "nice", "temperature": "75"})

    service = make(emu)
    service.register_function("get_current_weather", get_current_weather)
    weather = FunctionSchema(
        name="get_current_weather",
        description="Get the current weather",
        properties={"location": {"type": "string"}},
        required=["location"],
    )
    context = LLMContext(tools=ToolsSchema(standard_tools=[weather]))
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), service, pair.assistant()]) as rig:
        await rig.run_bot()
        answers = lambda: emu.ledger.sessions[0].answers  # noqa: E731
        await until(
            lambda: bool(emu.ledger.sessions and answers()) and answers()[0].outcome == "complete"
        )
        await _speak(rig, 0, 6, ["get_current_weather"])
        await until(lambda: len(answers()) >= 3 and answers()[2].outcome == "complete")
        await rig.wait(lambda: rig.count(TTSStoppedFrame) >= 2)
        assert calls == ["get_current_weather"]
        assert rig.count(TTSAudioRawFrame) == 6  # the greeting and the answer to the result
        assert rig.count(TTSStartedFrame) == rig.count(TTSStoppedFrame) == 2
        assert rig.count(LLMFullResponseStartFrame) == rig.count(LLMFullResponseEndFrame)
        assert not rig.of(ErrorFrame) and not rig.of(ErrorFrame, up=True)
    await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.committed_speech == list(range(6))
    assert "nice" in record.conversation_text
    assert record.errors == []


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=40, chunk_ms=100)
async def test_example_barge_in_interrupts_the_bot(
    openai_emulator_trusted: OpenAIEmulator, make: Make
) -> None:
    """The user speaks over the greeting: the pipeline is interrupted, the greeting is cut and
    the user's turn answered."""
    emu = openai_emulator_trusted
    context = LLMContext()
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), make(emu), pair.assistant()]) as rig:
        await rig.run_bot()
        await rig.wait(lambda: rig.count(TTSAudioRawFrame) >= 2)
        await _speak(rig, 0, 6, ["stop"])
        await rig.wait(lambda: rig.count(InterruptionFrame) >= 1)
        answers = lambda: emu.ledger.sessions[0].answers  # noqa: E731
        await until(lambda: len(answers()) >= 2 and answers()[1].outcome == "complete")
        assert answers()[0].outcome != "complete"
        assert not rig.of(ErrorFrame) and not rig.of(ErrorFrame, up=True)
    await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.committed_speech == list(range(6))
    assert "heard stop" in record.conversation_text
