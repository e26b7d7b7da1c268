"""The Pipecat OpenAI drop-in keeps its call in a store under its ``session_key``: a pipeline
that hands the call over leaves it there, and the next pipeline with the key takes it over
(reason ``takeover``) with the conversation. Real Pipecat pipelines, the OpenAI Realtime
emulator over TLS, and a real Redis server."""

from __future__ import annotations

import asyncio

import pytest
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import ErrorFrame, InputAudioRawFrame, LLMFullResponseEndFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.realtime import events

from realtime_resumption.frames import SessionMovedFrame
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.pipecat.openai import OpenAIRealtimeLLMService
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import StoreOptions
from realtime_resumption.testing.openai_emulator import OpenAIEmulator, user_audio

from ..openai_emulator.oai_helpers import RATE
from .rig import Rig

KEY = "pipecat-call-1"
OPTIONS = StoreOptions(write_interval=0.25, lease_ttl=1.0)


def _service(
    emu: OpenAIEmulator, store: RedisStore, options: StoreOptions = OPTIONS
) -> OpenAIRealtimeLLMService:
    return OpenAIRealtimeLLMService(
        api_key="sk-test",
        base_url=emu.realtime_url,
        settings=OpenAIRealtimeLLMService.Settings(
            model="gpt-realtime",
            session_properties=events.SessionProperties(
                audio=events.AudioConfiguration(
                    input=events.AudioInput(transcription=events.InputAudioTranscription())
                )
            ),
        ),
        store=store,
        session_key=KEY,
        store_options=options,
    )


async def _speak(rig: Rig, first: int, count: int, words: list[str]) -> None:
    for i in range(count + 3):
        word = words[i] if i < len(words) else None
        audio = user_audio(first + i, speech=i < count, word=word, rate=RATE)
        await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=RATE, num_channels=1))


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_call_handed_over_by_one_pipeline_is_taken_over_by_the_next(
    openai_emulator_trusted: OpenAIEmulator, redis_store: RedisStore
) -> None:
    emu = openai_emulator_trusted
    a = _service(emu, redis_store)
    async with Rig([a]) as rig:
        await rig.context(LLMContext())
        await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        await _speak(rig, 0, 5, ["pineapple"])
        await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
        assert a.transport is not None
        await a.transport.hand_over()
    assert await redis_store.load(KEY) is not None  # kept for the next pipeline

    b = _service(emu, redis_store)
    async with Rig([b]) as rig:
        await rig.context(LLMContext())
        await rig.wait(lambda: bool(rig.of(SessionMovedFrame)))
        await _speak(rig, 20, 3, ["recall"])
        await rig.wait(
            lambda: any(a.outcome == "complete" for a in emu.ledger.sessions[-1].answers)
        )
        assert "recall pineapple" in emu.ledger.sessions[-1].conversation_text
        (moved,) = rig.of(SessionMovedFrame)
    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.REBUILT,
    )
    # The new pipeline's context is not given to the session again, nor answered: the session
    # holds the call's conversation, and its one answer is the recall's.
    taker = emu.ledger.sessions[-1]
    assert [a.outcome for a in taker.answers] == ["complete"]
    assert [i.text for i in taker.seeded].count("pineapple") == 1
    assert await redis_store.load(KEY) is None  # the call ended with the pipeline


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_second_pipeline_for_a_driven_call_pushes_an_error_frame(
    openai_emulator_trusted: OpenAIEmulator, redis_store: RedisStore
) -> None:
    emu = openai_emulator_trusted
    async with Rig([_service(emu, redis_store)]) as rig:
        await rig.context(LLMContext())
        await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        second = _service(emu, redis_store, StoreOptions(lease_ttl=1.0, lease_wait=0))
        async with Rig([second]) as other:
            await other.wait(lambda: bool(other.of(ErrorFrame, up=True)))
            (error,) = other.of(ErrorFrame, up=True)
            # Reported as any failed connect is, its transport closed (not a processor whose
            # setup raised).
            assert error.error.startswith("Error connecting: ")
            assert "not taken over twice" in error.error
            assert second.transport is None
    assert len(emu.ledger.sessions) == 1  # the second never dialled


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_function_running_when_the_call_was_handed_over_is_answered_by_the_next_pipeline(
    openai_emulator_trusted: OpenAIEmulator, redis_store: RedisStore
) -> None:
    emu = openai_emulator_trusted
    tools = ToolsSchema(
        standard_tools=[FunctionSchema(name="weather", description="", properties={}, required=[])]
    )
    started = asyncio.Event()

    async def never_done(params: FunctionCallParams) -> None:
        started.set()
        await asyncio.Event().wait()  # the process hands the call over while it runs

    async def weather(params: FunctionCallParams) -> None:
        await params.result_callback({"sky": "sunny"})

    a = _service(emu, redis_store)
    a.register_function("weather", never_done)
    context = LLMContext(tools=tools)
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), a, pair.assistant()]) as rig:
        await rig.context(context)
        await rig.wait(lambda: bool(emu.ledger.sessions and emu.ledger.sessions[0].answers))
        await rig.wait(lambda: emu.ledger.sessions[0].answers[0].outcome == "complete")
        await _speak(rig, 0, 6, ["weather"])
        async with asyncio.timeout(10):
            await started.wait()
        assert a.transport is not None
        await a.transport.hand_over(timeout=0.5)

    b = _service(emu, redis_store)
    b.register_function("weather", weather)
    context = LLMContext(tools=tools)
    pair = LLMContextAggregatorPair(context)
    async with Rig([pair.user(), b, pair.assistant()]) as rig:
        await rig.context(context)
        await rig.wait(lambda: bool(rig.of(SessionMovedFrame)))
        taker = emu.ledger.sessions[-1]
        await rig.wait(lambda: any(a.outcome == "complete" for a in taker.answers))
    outputs = [i for i in taker.items if i.type == "function_call_output"]
    assert len(outputs) == 1 and "sunny" in outputs[0].text
