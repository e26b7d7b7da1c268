"""The answer's frames as processors downstream see them, and ``ResponseFrames`` for what the
emulator never sends (thoughts, grounding): the transport's
callbacks are called directly, as its receive loop would, and a recording sink stands in for
the service (the emulator cannot produce these server messages, so this is the one place a
stand-in is used)."""

from __future__ import annotations

import asyncio
from typing import Any

from pipecat.frames.frames import (
    Frame,
    InputTextRawFrame,
    LLMFullResponseEndFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
)
from pipecat.metrics.metrics import LLMTokenUsage
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from realtime_resumption.emulator import Emulator
from realtime_resumption.frames import GenerationEndedFrame, GenerationStartedFrame
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.pipecat.output import ResponseFrames
from realtime_resumption.transport import GenerationEndReason, TransportUsageMetadata

from . import services
from .rig import Rig, emulator_config


class _Sink:
    def __init__(self) -> None:
        self.events: list[str] = []

    async def push_frame(
        self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM
    ) -> None:
        self.events.append(type(frame).__name__)

    async def broadcast_interruption(self) -> None:
        self.events.append("interruption")

    async def stop_ttfb_metrics(self) -> None:
        pass

    async def start_llm_usage_metrics(self, tokens: LLMTokenUsage) -> None:
        self.events.append(f"usage {tokens.total_tokens}")

    async def push_error(self, error_msg: str, *args: Any, **kwargs: Any) -> None:
        self.events.append(f"error {error_msg}")


async def _nothing(*args: Any) -> None:
    pass


async def test_thoughts_grounding_and_usage_in_the_answers_frames() -> None:
    sink = _Sink()
    frames = ResponseFrames(sink, on_tool_calls=_nothing, on_answer_end=_nothing)
    transport = GeminiLiveTransport(api_key="unused")
    frames.bind(transport)
    assert transport.on_generation_start and transport.on_reasoning_summary
    assert transport.on_text_output and transport.on_grounding_metadata
    assert transport.on_usage_metadata and transport.on_generation_end
    transport.on_generation_start("gen_1")
    transport.on_reasoning_summary("thinking about Paris")
    transport.on_text_output("Sunny.")
    transport.on_grounding_metadata({"grounding_chunks": [{"web": {"uri": "https://e.org"}}]})
    transport.on_usage_metadata(TransportUsageMetadata(3, 5, {"prompt_token_count": 3}))
    transport.on_generation_end("gen_1", GenerationEndReason.GENERATION_COMPLETE)
    frames.finish()
    await asyncio.wait_for(frames.run(), 5.0)
    frames.close()
    assert sink.events == [
        "GenerationStartedFrame",
        "LLMFullResponseStartFrame",
        "LLMThoughtStartFrame",
        "LLMThoughtTextFrame",
        "LLMThoughtEndFrame",
        "LLMTextFrame",
        "LLMSearchResponseFrame",
        "LLMFullResponseEndFrame",
        "usage 3",
        "GenerationEndedFrame",
    ]


class _SlowOutput(FrameProcessor):
    """Takes its time over each audio frame, as an output transport playing it does."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            await asyncio.sleep(0.005)
        await self.push_frame(frame, direction)


async def test_the_generation_frames_keep_their_place_behind_a_slow_processor() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service, _SlowOutput()]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(
                lambda: (
                    rig.count(GenerationEndedFrame) >= 1 and rig.count(LLMFullResponseEndFrame) >= 1
                )
            )
    # What a processor downstream sees, in the documented order.
    kinds = [type(f) for f in rig.down.frames]
    last_audio = max(i for i, kind in enumerate(kinds) if kind is TTSAudioRawFrame)
    assert kinds.index(GenerationStartedFrame) < kinds.index(TTSStartedFrame)
    assert (
        last_audio
        < kinds.index(TTSStoppedFrame)
        < kinds.index(LLMFullResponseEndFrame)
        < kinds.index(GenerationEndedFrame)
    )
