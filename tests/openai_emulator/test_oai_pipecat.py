"""A real Pipecat pipeline with the stock ``OpenAIRealtimeLLMService`` (pipecat-ai 1.14) holding
a short call against the emulator: its session setup, the caller's speech through server VAD,
the spoken answer, a function call, and what stock does at the cap."""

from __future__ import annotations

import pytest
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    ErrorFrame,
    InputAudioRawFrame,
    LLMFullResponseEndFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.realtime import events
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService

from realtime_resumption.testing.openai_emulator import (
    OpenAIEmulator,
    answer_chunk_ids,
    user_audio,
)

from ..pipecat.rig import Rig, until
from .oai_helpers import RATE


async def _speak(rig: Rig, first: int, count: int, words: list[str]) -> None:
    for i in range(count + 3):
        word = words[i] if i < len(words) else None
        audio = user_audio(first + i, speech=i < count, word=word, rate=RATE)
        await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=RATE, num_channels=1))


def _service(emu: OpenAIEmulator, **settings: object) -> OpenAIRealtimeLLMService:
    properties = events.SessionProperties(
        audio=events.AudioConfiguration(
            input=events.AudioInput(transcription=events.InputAudioTranscription())
        ),
        **settings,
    )
    return OpenAIRealtimeLLMService(
        api_key="sk-test",
        base_url=emu.realtime_url,
        settings=OpenAIRealtimeLLMService.Settings(
            model="gpt-realtime", session_properties=properties
        ),
    )


# Pipecat dials with websockets' default SSL context: the fixture trusts the CA through
# SSL_CERT_FILE (the service takes no SSL option).
@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=5)
async def test_stock_pipecat_holds_a_spoken_call(openai_emulator_trusted: OpenAIEmulator) -> None:
    emu = openai_emulator_trusted
    async with Rig([_service(emu)]) as rig:
        await rig.context(LLMContext())
        # Stock asks for an answer to the first context (the bot speaks first): speech
        # before it ends would race it (the service refuses a second response).
        await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        await _speak(rig, 0, 8, ["hello", "pipecat"])
        await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
        audio = b"".join(f.audio for f in rig.of(TTSAudioRawFrame))
        assert answer_chunk_ids(audio) == [(t, k) for t in (1, 2) for k in range(5)]
        await rig.wait(lambda: rig.count(TranscriptionFrame, up=True) >= 1)
        heard = [f.text for f in rig.of(TranscriptionFrame, up=True)]
        assert heard == ["hello pipecat"]
        assert not rig.of(ErrorFrame) and not rig.of(ErrorFrame, up=True)
    await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.client_events["session.update"] >= 1
    assert record.committed_speech == list(range(8))
    greeting, answer = record.answers
    # The greeting was all delivered; stock truncates it when the user speaks, at the audio
    # it measured as played (wall time, so a part of it at a scaled pace).
    assert greeting.delivered == 5 and answer.outcome == "complete"
    assert "heard hello pipecat" in record.conversation_text
    assert record.errors == [] and record.closed_by == "client"


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_stock_pipecat_calls_a_function_and_answers_with_its_result(
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
    # The aggregators carry the function's result into the context, which runs the
    # service again, as in a stock pipeline.
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), service, pair.assistant()]) as rig:
        await rig.context(context)
        answers = lambda: emu.ledger.sessions[0].answers  # noqa: E731
        await until(
            lambda: bool(emu.ledger.sessions and answers()) and answers()[0].outcome == "complete"
        )
        await _speak(rig, 0, 6, ["weather"])
        await until(lambda: len(answers()) >= 3 and answers()[2].outcome == "complete")
    await emu.wait_disconnected()
    assert calls == ["weather"]
    record = emu.ledger.sessions[0]
    assert record.answers[1].calls and record.answers[2].produced == 3
    assert "result" in record.conversation_text and "clear" in record.conversation_text


@pytest.mark.openai_emulator(time_scale=0.05, session_cap=10.0)
async def test_stock_pipecat_at_the_cap_keeps_no_session(
    openai_emulator_trusted: OpenAIEmulator,
) -> None:
    """The facts measured of stock Pipecat: at the 1001 close nothing reconnects, and every
    later audio frame fails to send with a non-fatal ErrorFrame."""
    emu = openai_emulator_trusted
    async with Rig([_service(emu)]) as rig:
        await rig.context(LLMContext())
        await until(lambda: any(s.closed_at is not None for s in emu.ledger.sessions))
        await _speak(rig, 0, 3, [])
        await rig.wait(lambda: len(rig.of(ErrorFrame, up=True)) >= 3)
        assert "1001" in rig.of(ErrorFrame, up=True)[0].error
    assert len(emu.ledger.sessions) == 1
    assert emu.ledger.sessions[0].close_code == 1001
