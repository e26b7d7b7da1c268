"""The answer's frames as processors downstream see them, behind a slow processor. (Thoughts,
grounding and usage come through a real pipeline in ``test_output_frames_pipeline``.)"""

from __future__ import annotations

import asyncio

from pipecat.frames.frames import (
    Frame,
    InputTextRawFrame,
    LLMFullResponseEndFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from realtime_resumption.frames import GenerationEndedFrame, GenerationStartedFrame
from realtime_resumption.testing.emulator import Emulator

from . import services
from .rig import Rig, emulator_config


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
