"""The Pipecat OpenAI drop-in keeps its call in a store under its ``session_key``: a pipeline
that hands the call over leaves it there, and the next pipeline with the key takes it over
(reason ``takeover``) with the conversation. Real Pipecat pipelines, the OpenAI Realtime
emulator over TLS, and a real Redis server."""

from __future__ import annotations

import pytest
from pipecat.frames.frames import InputAudioRawFrame, LLMFullResponseEndFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.realtime import events

from realtime_resumption.frames import SessionMovedFrame
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.pipecat.openai import OpenAIRealtimeLLMService
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import StoreOptions
from realtime_resumption.testing.openai_emulator import OpenAIEmulator, user_audio

from ..openai.realtime_store_helpers import redis_server, redis_store
from ..openai_emulator.oai_helpers import RATE
from .rig import Rig

__all__ = ["redis_server", "redis_store"]  # the fixtures this module uses

KEY = "pipecat-call-1"


def _service(emu: OpenAIEmulator, store: RedisStore) -> OpenAIRealtimeLLMService:
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
        store_options=StoreOptions(write_interval=0.25, lease_ttl=1.0),
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
        await rig.wait(lambda: "recall pineapple" in emu.ledger.sessions[-1].conversation_text)
        (moved,) = rig.of(SessionMovedFrame)
    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.REBUILT,
    )
    assert await redis_store.load(KEY) is None  # the call ended with the pipeline
