"""``GenerationLifecycleProcessor`` behind the stock Gemini Live service, on the emulator: one
pair per answer where stock splits it, an interrupted answer ended as such, and the answer a
rotation leaves open (stock never ends it) ended when the pipeline is cancelled."""

from __future__ import annotations

from pipecat.frames.frames import (
    CancelFrame,
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    TTSAudioRawFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext

from realtime_resumption.frames import GenerationEndedFrame, GenerationStartedFrame
from realtime_resumption.pipecat import GenerationLifecycleProcessor
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import GenerationEndReason

from . import services
from .rig import PushLog, Rig, emulator_config, stream_audio, until


def _context(text: str) -> LLMContextFrame:
    return LLMContextFrame(LLMContext(messages=[{"role": "user", "content": text}]))


def _one_generation(frames: list[Frame]) -> GenerationEndReason:
    """The one generation the processor bracketed; returns why it ended."""
    pushed = [f for f in frames if isinstance(f, (GenerationStartedFrame, GenerationEndedFrame))]
    assert [(type(f).__name__, f.generation_id) for f in pushed] == [
        ("GenerationStartedFrame", "gen_1"),
        ("GenerationEndedFrame", "gen_1"),
    ]
    reason: GenerationEndReason = pushed[1].reason
    return reason


async def test_a_tool_call_after_turn_complete_is_one_generation_behind_stock() -> None:
    async with Emulator(emulator_config(tool_call_after_turn_complete=True)) as emu:
        lifecycle = GenerationLifecycleProcessor()
        async with Rig([services.stock(emu, tools=True), lifecycle]) as rig:
            await rig.queue(_context("please lookup flights"))
            await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 1)
    # Stock pushed two response pairs for the one answer; the processor one generation.
    assert rig.count(LLMFullResponseStartFrame) == 2
    assert _one_generation(rig.down.frames) is GenerationEndReason.GENERATION_COMPLETE
    kinds = [type(f) for f in rig.down.frames]
    assert kinds.index(GenerationStartedFrame) < kinds.index(TTSAudioRawFrame)


async def test_an_interrupted_answer_ends_as_interrupted_behind_stock() -> None:
    async with Emulator(emulator_config(answer_chunks=40)) as emu:
        lifecycle = GenerationLifecycleProcessor()
        async with Rig([services.stock(emu), lifecycle]) as rig:
            await rig.queue(_context("hello there"))
            await rig.wait(lambda: rig.count(TTSAudioRawFrame) >= 1)
            await stream_audio(rig, 1, 5, speech=True)
            await stream_audio(rig, 6, 5, speech=False)
            await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 2)
    reasons = [f.reason for f in rig.of(GenerationEndedFrame)]
    assert reasons == [GenerationEndReason.INTERRUPTED, GenerationEndReason.GENERATION_COMPLETE]
    starts = [f.generation_id for f in rig.of(GenerationStartedFrame)]
    assert starts == [f.generation_id for f in rig.of(GenerationEndedFrame)]


async def test_the_answer_a_rotation_leaves_open_behind_stock_is_ended() -> None:
    async with Emulator(emulator_config(answer_chunks=400)) as emu:
        lifecycle = GenerationLifecycleProcessor()
        log = PushLog()
        log.source = lifecycle
        async with Rig([services.stock(emu), lifecycle], observers=[log]) as rig:
            await rig.queue(_context("hello there"))
            await rig.wait(lambda: rig.count(TTSAudioRawFrame) >= 3)
            # The connection goes quiet after goAway and closes at the deadline (1 s).
            emu.faults.go_away(20.0, silence=True)
            # Stock had no handle (none comes before the answer): it reconnects to a fresh
            # session.
            await until(lambda: _established(emu) >= 2)
            await rig.cancel()
    # Stock reconnected and never ended the answer it was giving.
    assert rig.count(LLMFullResponseStartFrame) == 1
    assert rig.count(LLMFullResponseEndFrame) == 0
    # Pushed before the CancelFrame (which, as Pipecat cancels, may discard it on its way).
    assert _one_generation(log.frames()) is GenerationEndReason.CANCELLED
    kinds = [type(f) for f in log.frames()]
    assert kinds.index(GenerationEndedFrame) < kinds.index(CancelFrame)


def _established(emu: Emulator) -> int:
    sessions = list(emu.ledger.sessions.values())
    return sum(c.established for s in sessions for c in s.connections)
